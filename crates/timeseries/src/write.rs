//! WriteRecords, one request:
//!
//! 1. Merge `CommonAttributes` into each record and check it alone
//!    ([`crate::validate`]); check its time against the table's retention window.
//! 2. Admit the names into the table's schema (types fixed once seen); a schema that
//!    grows is persisted, under the table's schema lock, before any record using it.
//! 3. Place each point in its row ([`crate::rows::place`]) and lock the stripes of the
//!    series involved (ascending, so writers never deadlock).
//! 4. Points newer than their series' high-water mark cannot collide with stored ones;
//!    for the others, read the stored points of their slots in one ReadRows.
//! 5. Resolve records in request order: no point there → write; higher version →
//!    replace; same version and same values → accept, nothing to write; otherwise
//!    reject with the stored version.
//! 6. One MutateRows of every changed row (each row atomic); a row that fails rejects
//!    its records. A point of a sealed bucket ([`crate::seal`]) rewrites that
//!    bucket's block instead of writing a row. Raise the high-water marks.
//! 7. Unlock. The caller waits for the store's sync (group commit) before it answers,
//!    so writers waiting on one fsync do not hold each other's series; the sync is
//!    unconditional, since a record found already stored (an idempotent retry) may be
//!    another request's write that is not durable yet.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

use almanac_engine::calendar::rfc3339_millis;
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::{ReadRequest, RowMutations};

use crate::catalog::{SeriesCatalog, TableHandle, TableMeta};
use crate::error::{Error, Result};
use crate::limits::{MAX_FUTURE_NS, MAX_RECORDS_PER_WRITE};
use crate::model::{Ingested, Point, Record, RejectedRecord};
use crate::query::let_blocks_through;
use crate::rows::{Place, decode_row, erase_point, place, write_point};
use crate::seal::{block_mutations, block_row, bucket_start_ns, has_block, may_be_sealed};
use crate::store::WideColumnStore;
use crate::validate::{Merged, Parsed, RecordChecker};

/// What happened to one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Records accepted.
    pub ingested: Ingested,
    /// Records rejected, by index.
    pub rejected: Vec<RejectedRecord>,
}

impl WriteOutcome {
    /// The counts if every record was accepted, else `Error::Rejected` listing the
    /// others (as WriteRecords answers).
    pub fn into_result(self) -> Result<Ingested> {
        if self.rejected.is_empty() {
            Ok(self.ingested)
        } else {
            Err(Error::Rejected(self.rejected))
        }
    }
}

fn reject(
    out: &mut Vec<RejectedRecord>,
    index: usize,
    reason: impl Into<String>,
    existing: Option<i64>,
) {
    out.push(RejectedRecord {
        index,
        reason: reason.into(),
        existing_version: existing,
    });
}

/// Whether a record's time is writable now; `Ok(true)` means it goes to the magnetic
/// store (older than the memory-store window).
fn check_window(meta: &TableMeta, time_ns: i64, now_ns: i64) -> Result<bool, String> {
    let end = now_ns.saturating_add(MAX_FUTURE_NS);
    let memory_start = now_ns.saturating_sub(meta.retention.memory_ns());
    let keep_start = now_ns.saturating_sub(meta.retention.keep_ns());
    if time_ns >= end {
        return Err(format!(
            "The record timestamp is outside the time range [{}, {}) of the data ingestion window.",
            rfc3339_millis(memory_start),
            rfc3339_millis(end)
        ));
    }
    if time_ns >= memory_start {
        return Ok(false);
    }
    if meta.magnetic_writes.enabled && time_ns >= keep_start {
        return Ok(true);
    }
    let start = if meta.magnetic_writes.enabled {
        keep_start
    } else {
        memory_start
    };
    Err(format!(
        "The record timestamp is outside the time range [{}, {}) of the {}.",
        rfc3339_millis(start),
        rfc3339_millis(end),
        if meta.magnetic_writes.enabled {
            "retention period"
        } else {
            "memory store"
        }
    ))
}

/// One slot's state while a request is resolved.
#[derive(Default)]
struct Slot<'a> {
    stored: Option<Point<'a>>,
    current: Option<Point<'a>>,
    indexes: Vec<usize>,
}

/// The pending write of one row.
struct RowWrite {
    mutations: Vec<Mutation>,
    /// Records resolved into this row.
    indexes: Vec<usize>,
    series_len: usize,
    newest_ns: i64,
    /// Whether the row gets row-form points (not a sealed block's rewrite).
    row_form: bool,
}

/// Writes a request's records into a table; they are visible when this returns, and
/// durable once the store's `sync` returns.
pub fn write_records<S: WideColumnStore>(
    catalog: &SeriesCatalog<S>,
    handle: &TableHandle,
    common: Option<&Record>,
    records: &[Record],
    now_ns: i64,
) -> Result<WriteOutcome> {
    if records.is_empty() || records.len() > MAX_RECORDS_PER_WRITE {
        return Err(Error::invalid(format!(
            "A WriteRecords request carries 1 to {MAX_RECORDS_PER_WRITE} records; this one has {}.",
            records.len()
        )));
    }
    check_request(common, records)?;
    let mut rejected = Vec::new();
    // 1. Each record alone, and its time against retention.
    let mut meta = handle.meta();
    let mut parsed: Vec<(usize, Parsed, bool)> = Vec::with_capacity(records.len());
    let mut checker = RecordChecker::default();
    let key = meta.partition_key.as_ref();
    for (i, rec) in records.iter().enumerate() {
        match checker.check(Merged::new(common, rec)).and_then(|p| {
            let names = p.dimensions.iter().map(|(n, _)| &**n);
            if let Some(why) = key.and_then(|k| k.missing_key(names)) {
                return Err(why);
            }
            let magnetic = check_window(&meta, p.time_ns, now_ns)?;
            Ok((p, magnetic))
        }) {
            Ok((p, magnetic)) => parsed.push((i, p, magnetic)),
            Err(reason) => reject(&mut rejected, i, reason, None),
        }
    }
    // 2. Schema.
    let admitted = admit(catalog, handle, &mut meta, parsed, &mut rejected)?;
    // 3. Places and locks.
    let points: Vec<(usize, Point, Place, bool)> = admitted
        .into_iter()
        .map(|(i, p, magnetic)| {
            let mut dims = p.dimensions;
            meta.schema.sort_dimensions(&mut dims);
            let point = Point {
                dimensions: dims,
                measure_name: p.measure_name,
                time_ns: p.time_ns,
                version: p.version,
                measures: p.measures,
            };
            let place = place(&meta, &point);
            (i, point, place, magnetic)
        })
        .collect();
    let series = &handle.series;
    let guards = series.lock(
        points
            .iter()
            .map(|(_, _, pl, _)| series.stripe(&pl.row[..pl.series_len]))
            .collect(),
    );
    // 4. Stored points that could collide, and the sealed blocks they are in.
    let Stored {
        points: mut stored,
        mut blocks,
    } = read_stored(catalog.store().as_ref(), handle, &meta, &points)?;
    // 5. Resolve in request order.
    let mut slots: BTreeMap<Place, Slot> = BTreeMap::new();
    let mut magnetic_of = vec![false; records.len()];
    for (i, p, pl, magnetic) in points {
        let slot = match slots.entry(pl) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let stored = stored.remove(v.key());
                v.insert(Slot {
                    stored,
                    ..Slot::default()
                })
            }
        };
        match slot.current.as_ref().or(slot.stored.as_ref()) {
            None => {}
            Some(e) if e.time_ns != p.time_ns => {
                reject(
                    &mut rejected,
                    i,
                    format!(
                        "The {} layout stores one point per series per millisecond; a point at \
                         {} already holds this millisecond.",
                        meta.layout.pattern.as_str(),
                        e.time_ns
                    ),
                    Some(e.version),
                );
                continue;
            }
            Some(e) if p.version > e.version => {}
            Some(e) if p.version == e.version && p.measures.same_as(&e.measures) => {}
            Some(e) => {
                let why = if p.version < e.version {
                    format!(
                        "The record version {} is lower than the existing version {}. A higher \
                         version is required to update the measure value.",
                        p.version, e.version
                    )
                } else {
                    "A record already exists with the same time, dimensions, measure name, and \
                     record version. A higher record version must be specified in order to \
                     update the measure value."
                        .to_string()
                };
                reject(&mut rejected, i, why, Some(e.version));
                continue;
            }
        }
        slot.current = Some(p);
        slot.indexes.push(i);
        magnetic_of[i] = magnetic;
    }
    // 6. Write the changed rows; a point of a sealed bucket rewrites its block.
    let mut rows: BTreeMap<Vec<u8>, RowWrite> = BTreeMap::new();
    let mut dirty: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (pl, slot) in slots {
        let Some(cur) = &slot.current else { continue };
        let series = &pl.row[..pl.series_len];
        let block_key = (meta.layout.seal && !blocks.is_empty())
            .then(|| block_row(&meta.layout, series, cur.time_ns))
            .filter(|k| blocks.contains_key(k));
        let key = block_key.clone().unwrap_or(pl.row);
        let entry = rows.entry(key).or_insert_with(|| RowWrite {
            mutations: Vec::new(),
            indexes: Vec::new(),
            series_len: pl.series_len,
            newest_ns: i64::MIN,
            row_form: false,
        });
        entry.indexes.extend(&slot.indexes);
        entry.newest_ns = entry.newest_ns.max(cur.time_ns);
        let unchanged = slot
            .stored
            .as_ref()
            .is_some_and(|s| s.version == cur.version && s.measures.same_as(&cur.measures));
        if unchanged {
            continue;
        }
        if let Some(points) = block_key.as_ref().and_then(|k| blocks.get_mut(k)) {
            match points.binary_search_by_key(&cur.time_ns, |p| p.time_ns) {
                Ok(i) => points[i] = cur.clone(),
                Err(i) => points.insert(i, cur.clone()),
            }
            dirty.extend(block_key);
            continue;
        }
        if let Some(old) = &slot.stored {
            erase_point(&meta.layout, old, &mut entry.mutations);
        }
        write_point(&meta.layout, cur, &mut entry.mutations);
        entry.row_form = true;
    }
    for key in dirty {
        if let (Some(points), Some(entry)) = (blocks.get(&key), rows.get_mut(&key)) {
            entry.mutations = block_mutations(&meta, points)?;
        }
    }
    let batch: Vec<RowMutations> = rows
        .iter_mut()
        .filter(|(_, w)| !w.mutations.is_empty())
        .map(|(k, w)| RowMutations {
            key: k.clone(),
            mutations: std::mem::take(&mut w.mutations),
        })
        .collect();
    let results = if batch.is_empty() {
        Vec::new()
    } else {
        catalog
            .store()
            .mutate_rows_unsynced(&meta.store_table, &batch)?
    };
    let mut failed: HashMap<&[u8], String> = HashMap::new();
    for (entry, r) in batch.iter().zip(results) {
        if let Err(e) = r {
            failed.insert(entry.key.as_slice(), e.to_string());
        }
    }
    let mut ingested = Ingested::default();
    let mut written = Vec::with_capacity(rows.len());
    for (key, w) in &rows {
        if let Some(why) = failed.get(key.as_slice()) {
            for &i in &w.indexes {
                reject(&mut rejected, i, why.clone(), None);
            }
            continue;
        }
        written.push((&key[..w.series_len], w.newest_ns));
        for &i in &w.indexes {
            ingested.total += 1;
            if magnetic_of[i] {
                ingested.magnetic_store += 1;
            } else {
                ingested.memory_store += 1;
            }
        }
    }
    series.raise_all(written);
    if meta.layout.seal {
        let row_form = rows
            .iter()
            .filter(|(k, w)| w.row_form && !failed.contains_key(k.as_slice()))
            .map(|(k, w)| {
                (
                    &k[..w.series_len],
                    bucket_start_ns(&meta.layout, w.newest_ns),
                )
            });
        handle.unsealed.written(row_form, now_ns);
    }
    // 7. Unlock; the caller syncs before it answers.
    drop(guards);
    rejected.sort_by_key(|r| r.index);
    Ok(WriteOutcome { ingested, rejected })
}

/// Request-level checks that fail the whole request (`ValidationException`), as
/// Timestream does: versions below 1, and dimensions repeated between
/// `CommonAttributes` and a record.
fn check_request(common: Option<&Record>, records: &[Record]) -> Result<()> {
    for (i, r) in records.iter().enumerate() {
        if r.dimensions.is_empty() && common.is_none_or(|c| c.dimensions.is_empty()) {
            return Err(Error::invalid(format!(
                "Record {i} has no dimensions; at least one dimension is required."
            )));
        }
        if let Some(v) = r.version.filter(|v| *v < 1) {
            return Err(Error::invalid(format!(
                "Record {i} has Version {v}; versions must be 1 or greater."
            )));
        }
        if let Some(c) = common
            && let Some(d) = r
                .dimensions
                .iter()
                .find(|d| c.dimensions.iter().any(|cd| cd.name == d.name))
        {
            return Err(Error::invalid(format!(
                "Record {i} repeats the dimension '{}' of CommonAttributes; they may not overlap.",
                d.name
            )));
        }
    }
    if let Some(v) = common.and_then(|c| c.version).filter(|v| *v < 1) {
        return Err(Error::invalid(format!(
            "CommonAttributes has Version {v}; versions must be 1 or greater."
        )));
    }
    Ok(())
}

/// Step 2: admits the records' names. When every name is known (the common case) the
/// schema is only read; when some record brings new names, the schema grows and is
/// persisted under the table's schema lock, checked against the newest description.
fn admit<'r, S: WideColumnStore>(
    catalog: &SeriesCatalog<S>,
    handle: &TableHandle,
    meta: &mut std::sync::Arc<TableMeta>,
    parsed: Vec<(usize, Parsed<'r>, bool)>,
    rejected: &mut Vec<RejectedRecord>,
) -> Result<Vec<(usize, Parsed<'r>, bool)>> {
    let checks: Vec<Result<bool, String>> = parsed
        .iter()
        .map(|(_, p, _)| {
            meta.schema
                .check(&p.dimensions, &p.measure_name, &p.measures)
        })
        .collect();
    let verdicts: Vec<Result<(), String>> = if checks.iter().any(|c| matches!(c, Ok(true))) {
        let _lock = handle
            .schema_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Against the newest description: another front-end may have grown the schema,
        // and then the admission runs again on what it wrote.
        let mut verdicts = Vec::new();
        *meta = catalog.change_table(handle, |fresh| {
            let mut schema = fresh.schema.clone();
            verdicts = parsed
                .iter()
                .map(|(_, p, _)| schema.admit(&p.dimensions, &p.measure_name, &p.measures))
                .collect();
            Ok((schema != fresh.schema).then(|| TableMeta {
                schema,
                ..fresh.clone()
            }))
        })?;
        verdicts
    } else {
        checks.into_iter().map(|c| c.map(drop)).collect()
    };
    let mut ok = Vec::with_capacity(parsed.len());
    for (record, verdict) in parsed.into_iter().zip(verdicts) {
        match verdict {
            Ok(()) => ok.push(record),
            Err(reason) => reject(rejected, record.0, reason, None),
        }
    }
    Ok(ok)
}

/// What step 4 found.
struct Stored<'a> {
    /// Stored points by place.
    points: HashMap<Place, Point<'a>>,
    /// The sealed blocks among the rows read, by row key: their points, by time (the
    /// request's points join them).
    blocks: HashMap<Vec<u8>, Vec<Point<'a>>>,
}

/// Step 4: the stored points in the slots of points at or below their series' mark,
/// looked up in their rows, and the blocks of the points' buckets that may be sealed.
fn read_stored<'a, S: WideColumnStore>(
    store: &S,
    handle: &TableHandle,
    meta: &TableMeta,
    points: &[(usize, Point<'_>, Place, bool)],
) -> Result<Stored<'a>> {
    let mut rows: BTreeMap<Vec<u8>, (i64, i64)> = BTreeMap::new();
    // Taken under the series locks: a seal pass raises the watermark before it takes
    // any of them, so this sees every bucket sealed in these series.
    let sealing = handle.meta();
    let marks = handle
        .series
        .marks_of(points.iter().map(|(_, _, pl, _)| &pl.row[..pl.series_len]));
    for ((_, p, pl, _), mark) in points.iter().zip(marks) {
        let series = &pl.row[..pl.series_len];
        // A series without a mark is looked up once (a second point of it in this
        // request finds the mark the first one learned).
        let mark = match mark.or_else(|| handle.series.mark(series)) {
            Some(m) => m,
            None => {
                let m = newest_in_series(store, meta, series)?;
                handle.series.raise(series, m);
                m
            }
        };
        // A bucket that may be sealed has its block read, even above the mark (a late
        // point after the newest one), so the point goes into the block.
        let sealable = may_be_sealed(&sealing, p.time_ns);
        if p.time_ns <= mark {
            let r = rows.entry(pl.row.clone()).or_insert((pl.slot, pl.slot));
            r.0 = r.0.min(pl.slot);
            r.1 = r.1.max(pl.slot);
        }
        if sealable {
            let r = rows
                .entry(block_row(&meta.layout, series, p.time_ns))
                .or_insert((pl.slot, pl.slot));
            r.0 = r.0.min(pl.slot);
            r.1 = r.1.max(pl.slot);
        }
    }
    let mut out = Stored {
        points: HashMap::new(),
        blocks: HashMap::new(),
    };
    if rows.is_empty() {
        return Ok(out);
    }
    let bucketed = meta.layout.pattern.is_bucketed();
    let lo = rows.values().map(|r| r.0).min().unwrap_or(0);
    let hi = rows.values().map(|r| r.1).max().unwrap_or(0);
    let req = ReadRequest {
        rows: RowSet {
            keys: rows.keys().cloned().collect(),
            ranges: Vec::new(),
        },
        filter: bucketed.then(|| {
            let_blocks_through(
                meta,
                RowFilter::TimestampRange {
                    start_us: lo,
                    end_us: Some(hi + 1000),
                },
            )
        }),
        ..ReadRequest::default()
    };
    let mut failure = None;
    let now_us = store.now_us();
    store.read_rows(
        &meta.store_table,
        req,
        &mut |row| match decode_row(meta, &row, now_us) {
            Ok(points) => {
                if has_block(&row) {
                    let mut sorted = points.clone();
                    sorted.sort_by_key(|p| p.time_ns);
                    out.blocks.insert(row.key.to_vec(), sorted);
                }
                for p in points {
                    let pl = place(meta, &p);
                    out.points.insert(pl, p);
                }
                ControlFlow::Continue(())
            }
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        },
    )?;
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The newest time stored in a series, as an upper bound (`i64::MIN` when empty).
fn newest_in_series<S: WideColumnStore>(store: &S, meta: &TableMeta, series: &[u8]) -> Result<i64> {
    let req = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: vec![RowRange::prefix(series)],
        },
        filter: None,
        limit: Some(1),
        reversed: !meta.layout.reverse_time,
    };
    let mut newest = i64::MIN;
    let mut failure = None;
    let now_us = store.now_us();
    store.read_rows(&meta.store_table, req, &mut |row| {
        match decode_row(meta, &row, now_us) {
            Ok(points) => newest = points.iter().map(|p| p.time_ns).max().unwrap_or(newest),
            Err(e) => failure = Some(e),
        }
        ControlFlow::Break(())
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(newest),
    }
}
