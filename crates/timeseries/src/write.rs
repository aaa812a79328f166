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
use almanac_engine::{ReadRequest, Row, RowMutations};

use crate::catalog::{SeriesCatalog, TableHandle, TableMeta};
use crate::error::{Error, Result};
use crate::guard::{
    GUARD_FAMILY, Guard, applied, guard_of, guarded_write, is_sealing, let_guard_through,
    written_guard,
};
use crate::keys;
use crate::limits::{MAX_FUTURE_NS, MAX_RECORDS_PER_WRITE, MAX_WRITE_TRIES};
use crate::model::{Ingested, Point, Record, RejectedRecord};
use crate::query::let_blocks_through;
use crate::rows::{Place, decode_row, erase_point, place, write_point};
use crate::seal::{
    block_mutations, block_row, bucket_rows, bucket_start_ns, closed_for_rows, delete_merged_rows,
    has_block, may_be_sealed,
};
use crate::store::{Conditional, WideColumnStore};
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
///
/// In a guarded table, the records whose rows another process changed between this
/// one's read and write are tried again, from step 1, up to [`MAX_WRITE_TRIES`] times.
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
    let mut out = WriteOutcome::default();
    let (first, mut again) = write_once(catalog, handle, common, records, now_ns)?;
    out.add(first, |i| i);
    for _ in 1..MAX_WRITE_TRIES {
        if again.is_empty() {
            break;
        }
        let subset: Vec<Record> = again.iter().map(|&i| records[i].clone()).collect();
        let (part, conflicted) = write_once(catalog, handle, common, &subset, now_ns)?;
        out.add(part, |i| again[i]);
        again = conflicted.into_iter().map(|i| again[i]).collect();
    }
    if !again.is_empty() {
        return Err(Error::Contended(format!(
            "The rows of {} records kept changing under writes from other front-ends \
             ({MAX_WRITE_TRIES} tries); retry the request.",
            again.len()
        )));
    }
    out.rejected.sort_by_key(|r| r.index);
    Ok(out)
}

impl WriteOutcome {
    /// Adds the outcome of a write of some of the request's records, whose index `i`
    /// is the request's `index(i)`.
    fn add(&mut self, part: WriteOutcome, index: impl Fn(usize) -> usize) {
        self.ingested.total += part.ingested.total;
        self.ingested.memory_store += part.ingested.memory_store;
        self.ingested.magnetic_store += part.ingested.magnetic_store;
        self.rejected
            .extend(part.rejected.into_iter().map(|r| RejectedRecord {
                index: index(r.index),
                ..r
            }));
    }
}

/// One try of [`write_records`]: what it did, and the indexes of the records whose
/// rows changed under it (guarded tables only), neither written nor rejected.
fn write_once<S: WideColumnStore>(
    catalog: &SeriesCatalog<S>,
    handle: &TableHandle,
    common: Option<&Record>,
    records: &[Record],
    now_ns: i64,
) -> Result<(WriteOutcome, Vec<usize>)> {
    let mut rejected = Vec::new();
    // 1. Each record alone, and its time against retention.
    let mut meta = handle.meta();
    if catalog.store().other_writers() && !meta.guarded {
        return Err(Error::invalid(format!(
            "Table {}.{} was created without row guards, which writes from several \
             front-ends need; create it again through a front-end of this version.",
            meta.database, meta.name
        )));
    }
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
    // The series are in the table's directory before any of their points is stored.
    if meta.indexed {
        handle.directory.register(
            catalog.store().as_ref(),
            &meta,
            points
                .iter()
                .map(|(_, p, pl, _)| (&pl.row[..pl.series_len], p.time_ns)),
        )?;
    }
    let series = &handle.series;
    let locks = series.lock(
        points
            .iter()
            .map(|(_, _, pl, _)| series.stripe(&pl.row[..pl.series_len]))
            .collect(),
    );
    // 4. Stored points that could collide, and the sealed blocks they are in.
    let Stored {
        points: mut stored,
        mut blocks,
        guards,
        leftovers,
        merged,
        tentative,
        sealing: _,
    } = read_stored(catalog.store().as_ref(), handle, &meta, &points, now_ns)?;
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
    // A bucket read whole is rewritten whole, even when no point of it changed: its
    // rows (a seal's leftovers, rows written beside a seal) go into the block.
    for (key, &series_len) in &merged {
        rows.entry(key.clone()).or_insert_with(|| RowWrite {
            mutations: Vec::new(),
            indexes: Vec::new(),
            series_len,
            newest_ns: i64::MIN,
            row_form: false,
        });
        dirty.insert(key.clone());
    }
    for key in dirty {
        if let (Some(points), Some(entry)) = (blocks.get(&key), rows.get_mut(&key)) {
            entry.mutations = block_mutations(&meta, points)?;
            if merged.contains_key(&key) {
                // The bucket's row-form cells are in the block now.
                entry.mutations.insert(0, Mutation::DeleteFromRow);
            }
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
    let store = catalog.store();
    let Landed {
        failed,
        mut conflicted,
        written: guards_written,
    } = if meta.guarded {
        write_guarded(store.as_ref(), &meta, batch, &guards, &leftovers)?
    } else {
        let results = if batch.is_empty() {
            Vec::new()
        } else {
            store.mutate_rows_unsynced(&meta.store_table, &batch)?
        };
        let failed = batch
            .into_iter()
            .zip(results)
            .filter_map(|(entry, r)| r.err().map(|e| (entry.key, e.to_string())))
            .collect();
        Landed {
            failed,
            ..Landed::default()
        }
    };
    if !tentative.is_empty() {
        let landed = rows
            .iter()
            .filter(|(k, w)| w.row_form && !failed.contains_key(*k) && !conflicted.contains(*k))
            .map(|(k, w)| {
                let block = block_row(&meta.layout, &k[..w.series_len], w.newest_ns);
                (k.clone(), block)
            });
        conflicted.extend(recheck(
            store.as_ref(),
            &meta,
            landed.collect(),
            &tentative,
            &guards_written,
        )?);
    }
    let mut again = Vec::new();
    let mut ingested = Ingested::default();
    let mut written = Vec::with_capacity(rows.len());
    for (key, w) in &rows {
        if conflicted.contains(key) {
            again.extend(&w.indexes);
            continue;
        }
        if let Some(why) = failed.get(key) {
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
            .filter(|(k, w)| w.row_form && !failed.contains_key(*k) && !conflicted.contains(*k))
            .map(|(k, w)| {
                (
                    &k[..w.series_len],
                    bucket_start_ns(&meta.layout, w.newest_ns),
                )
            });
        handle.unsealed.written(row_form, now_ns);
    }
    // 7. Unlock; the caller syncs before it answers.
    drop(locks);
    again.sort_unstable();
    Ok((WriteOutcome { ingested, rejected }, again))
}

/// Step 6 in a guarded table: each changed row in one CheckAndMutateRow conditioned on
/// the guard read in step 4, all sent at once; then the row-form rows of the buckets
/// whose blocks were rewritten are deleted. Returns the rows that failed (with why)
/// and those another process changed since step 4.
fn write_guarded<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    batch: Vec<RowMutations>,
    guards: &HashMap<Vec<u8>, Guard>,
    leftovers: &OtherRows,
) -> Result<Landed> {
    let mut landed = Landed::default();
    if batch.is_empty() {
        return Ok(landed);
    }
    let writes: Vec<Conditional> = batch
        .into_iter()
        .map(|r| {
            let read = guards.get(&r.key);
            guarded_write(r.key, read, r.mutations)
        })
        .collect();
    let results = store.check_and_mutate_rows(&meta.store_table, &writes)?;
    let mut deletes = Vec::new();
    for (w, r) in writes.into_iter().zip(results) {
        match r {
            Ok(matched) if applied(&w, matched) => {
                if let Some(rows) = leftovers.get(&w.key) {
                    deletes.extend(rows.iter().cloned());
                }
                if let Some(g) = written_guard(&w) {
                    landed.written.insert(w.key, g);
                }
            }
            Ok(_) => {
                landed.conflicted.insert(w.key);
            }
            Err(e) => {
                landed.failed.insert(w.key, e.to_string());
            }
        }
    }
    // Their points are in the block now.
    delete_merged_rows(store, meta, deletes)?;
    Ok(landed)
}

/// Which rows of step 6 did not land.
#[derive(Default)]
struct Landed {
    /// Rows the store refused, with why.
    failed: HashMap<Vec<u8>, String>,
    /// Rows another process changed since step 4 (guarded tables).
    conflicted: BTreeSet<Vec<u8>>,
    /// The guards the rows that landed have now (guarded tables).
    written: HashMap<Vec<u8>, Guard>,
}

/// Step 6's check of the rows written into closed buckets of a guarded table in the
/// one-point-a-row patterns (`landed`: row key and its bucket's block row). A sealer
/// marks a bucket's block row before it reads the bucket, so while a block row's guard
/// is still the one step 4 read (or the one this request wrote there), any seal of the
/// bucket will read these rows. Otherwise a seal may have read the bucket before them,
/// or a block may have been written since step 4 read around it: those rows' records
/// are tried again, and the next try, finding the mark or the block, merges the bucket
/// with these rows into one block (where each record is decided again against the
/// block). Returns the rows whose records must be tried again.
fn recheck<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    landed: Vec<(Vec<u8>, Vec<u8>)>,
    tentative: &HashMap<Vec<u8>, Option<Guard>>,
    written: &HashMap<Vec<u8>, Guard>,
) -> Result<BTreeSet<Vec<u8>>> {
    let landed: Vec<(Vec<u8>, Vec<u8>)> = landed
        .into_iter()
        .filter(|(_, block)| tentative.contains_key(block))
        .collect();
    if landed.is_empty() {
        return Ok(BTreeSet::new());
    }
    let blocks: BTreeSet<Vec<u8>> = landed.iter().map(|(_, b)| b.clone()).collect();
    let req = ReadRequest {
        rows: RowSet {
            keys: blocks.iter().cloned().collect(),
            ranges: Vec::new(),
        },
        filter: Some(RowFilter::FamilyNameRegex(GUARD_FAMILY.into())),
        ..ReadRequest::default()
    };
    // Each block row's guard token now; a marked row counts as changed.
    let mut now: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    store.read_rows(&meta.store_table, req, &mut |row| {
        let token = if is_sealing(&row) {
            Some(Vec::new())
        } else {
            guard_of(&row).map(|g| g.token().to_vec())
        };
        now.insert(row.key.to_vec(), token);
        ControlFlow::Continue(())
    })?;
    let changed: BTreeSet<&Vec<u8>> = blocks
        .iter()
        .filter(|b| {
            let expected = written
                .get(*b)
                .or_else(|| tentative.get(*b).and_then(Option::as_ref))
                .map(|g| g.token().to_vec());
            now.get(*b).cloned().flatten() != expected
        })
        .collect();
    Ok(landed
        .into_iter()
        .filter(|(_, b)| changed.contains(b))
        .map(|(row, _)| row)
        .collect())
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
#[derive(Default)]
struct Stored<'a> {
    /// Stored points by place (the highest version of a place read twice).
    points: HashMap<Place, Point<'a>>,
    /// The sealed blocks among the rows read, by row key: their points, by time (the
    /// request's points join them). In a guarded table, every bucket closed to
    /// row-form writes that the request writes, with its row-form points merged in.
    blocks: HashMap<Vec<u8>, Vec<Point<'a>>>,
    /// The guards of the rows read (guarded tables; a row without one is absent).
    guards: HashMap<Vec<u8>, Guard>,
    /// Guarded tables: for each bucket in `blocks`, its other rows.
    leftovers: OtherRows,
    /// Guarded tables: the buckets read whole and merged into `blocks` (their block
    /// rows, with the length of their series prefix): rewritten whole, their other rows
    /// deleted.
    merged: BTreeMap<Vec<u8>, usize>,
    /// Guarded tables: the block rows of the closed buckets this request writes rows
    /// into, with the guard step 4 read (see [`recheck`]).
    tentative: HashMap<Vec<u8>, Option<Guard>>,
    /// Rows read that carry a seal's mark.
    sealing: BTreeSet<Vec<u8>>,
}

/// By a bucket's block row: the bucket's other rows.
type OtherRows = HashMap<Vec<u8>, Vec<Vec<u8>>>;

impl Stored<'_> {
    /// Keeps a stored point, the higher version when its place was read already.
    fn keep(&mut self, meta: &TableMeta, p: Point<'static>) {
        match self.points.entry(place(meta, &p)) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if o.get().version < p.version {
                    o.insert(p);
                }
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(p);
            }
        }
    }
}

/// Step 4: the stored points in the slots of points at or below their series' mark,
/// looked up in their rows, and the blocks of the points' buckets that may be sealed.
///
/// In a guarded table another process may have written any series since this one
/// learned its mark, so every point's row is read (with its guard); and a point of a
/// bucket that may be sealed ([`closed_for_rows`]) in a one-point-a-row pattern has its
/// bucket's block row read too: if that holds a block or a seal's mark, the whole
/// bucket is read, to be rewritten as one block.
fn read_stored<'a, S: WideColumnStore + ?Sized>(
    store: &S,
    handle: &TableHandle,
    meta: &TableMeta,
    points: &[(usize, Point<'_>, Place, bool)],
    now_ns: i64,
) -> Result<Stored<'a>> {
    let guarded = meta.guarded;
    let bucketed = meta.layout.pattern.is_bucketed();
    let mut rows: BTreeMap<Vec<u8>, (i64, i64)> = BTreeMap::new();
    // Block row → (series, bucket start) of closed buckets (one-point-a-row patterns).
    let mut closed: BTreeMap<Vec<u8>, (Vec<u8>, i64)> = BTreeMap::new();
    // Taken under the series locks: a seal pass raises the watermark before it takes
    // any of them, so this sees every bucket sealed in these series.
    let sealing = handle.meta();
    let marks = handle
        .series
        .marks_of(points.iter().map(|(_, _, pl, _)| &pl.row[..pl.series_len]));
    for ((_, p, pl, _), mark) in points.iter().zip(marks) {
        let series = &pl.row[..pl.series_len];
        if guarded {
            widen(&mut rows, pl.row.clone(), pl.slot);
            // A bucketed row is its bucket's block row: its guard covers both.
            if !bucketed && closed_for_rows(meta, p.time_ns, now_ns) {
                let key = block_row(&meta.layout, series, p.time_ns);
                widen(&mut rows, key.clone(), pl.slot);
                let start = bucket_start_ns(&meta.layout, p.time_ns);
                closed.insert(key, (series.to_vec(), start));
            }
            continue;
        }
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
            widen(&mut rows, pl.row.clone(), pl.slot);
        }
        if sealable {
            widen(
                &mut rows,
                block_row(&meta.layout, series, p.time_ns),
                pl.slot,
            );
        }
    }
    let mut out = Stored::default();
    if !rows.is_empty() {
        read_point_rows(store, meta, &rows, &mut out)?;
    }
    // A closed bucket that is sealed, or being sealed, is read whole and rewritten as
    // one block; the others take rows, checked again after the write ([`recheck`]).
    let mut merge = BTreeSet::new();
    for (key, bucket) in closed {
        if out.blocks.contains_key(&key) || out.sealing.contains(&key) {
            merge.insert(bucket);
        } else {
            let read = out.guards.get(&key).cloned();
            out.tentative.insert(key, read);
        }
    }
    if !merge.is_empty() {
        read_closed_buckets(store, meta, &merge, &mut out)?;
    }
    Ok(out)
}

/// Adds `slot` to the slots step 4 reads of row `key` (the lowest and the highest).
fn widen(rows: &mut BTreeMap<Vec<u8>, (i64, i64)>, key: Vec<u8>, slot: i64) {
    let r = rows.entry(key).or_insert((slot, slot));
    r.0 = r.0.min(slot);
    r.1 = r.1.max(slot);
}

/// Step 4's read of the points' own rows (only the slots between the lowest and the
/// highest written, in bucketed rows).
fn read_point_rows<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    rows: &BTreeMap<Vec<u8>, (i64, i64)>,
    out: &mut Stored<'_>,
) -> Result<()> {
    let bucketed = meta.layout.pattern.is_bucketed();
    let lo = rows.values().map(|r| r.0).min().unwrap_or(0);
    let hi = rows.values().map(|r| r.1).max().unwrap_or(0);
    let filter = bucketed.then(|| {
        let_blocks_through(
            meta,
            RowFilter::TimestampRange {
                start_us: lo,
                end_us: Some(hi + 1000),
            },
        )
    });
    let req = ReadRequest {
        rows: RowSet {
            keys: rows.keys().cloned().collect(),
            ranges: Vec::new(),
        },
        filter: if meta.guarded {
            let_guard_through(filter)
        } else {
            filter
        },
        ..ReadRequest::default()
    };
    let now_us = store.now_us();
    read_decoded(store, meta, req, now_us, &mut |row, points| {
        if let Some(g) = guard_of(row) {
            out.guards.insert(row.key.to_vec(), g);
        }
        if is_sealing(row) {
            out.sealing.insert(row.key.to_vec());
        }
        if has_block(row) {
            let mut sorted = points.clone();
            sorted.sort_by_key(|p| p.time_ns);
            out.blocks.insert(row.key.to_vec(), sorted);
        }
        for p in points {
            out.keep(meta, p);
        }
    })
}

/// Step 4's read of closed buckets that are sealed or being sealed (guarded tables):
/// all of each bucket's rows, merged into the bucket's block (the higher version wins a
/// time; on a tie the block row's, read first, stays).
fn read_closed_buckets<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    closed: &BTreeSet<(Vec<u8>, i64)>,
    out: &mut Stored<'_>,
) -> Result<()> {
    let layout = &meta.layout;
    let req = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: closed
                .iter()
                .map(|(series, start)| bucket_rows(layout, series, *start))
                .collect(),
        },
        ..ReadRequest::default()
    };
    let mut merged: HashMap<Vec<u8>, BTreeMap<i64, Point<'static>>> = closed
        .iter()
        .map(|(series, start)| (block_row(layout, series, *start), BTreeMap::new()))
        .collect();
    let now_us = store.now_us();
    let bucketed = layout.pattern.is_bucketed();
    let mut failure = None;
    read_decoded(store, meta, req, now_us, &mut |row, points| {
        let parts = match keys::decode(&row.key, bucketed, layout.reverse_time) {
            Ok(p) => p,
            Err(e) => {
                failure = Some(e);
                return;
            }
        };
        let time_ns = if bucketed {
            parts.time.saturating_mul(1_000_000_000)
        } else {
            parts.time
        };
        let block_key = block_row(layout, &row.key[..parts.series_len], time_ns);
        out.merged.insert(block_key.clone(), parts.series_len);
        if block_key == *row.key {
            if let Some(g) = guard_of(row) {
                out.guards.insert(block_key.clone(), g);
            }
        } else {
            out.leftovers
                .entry(block_key.clone())
                .or_default()
                .push(row.key.to_vec());
        }
        let bucket = merged.entry(block_key).or_default();
        for p in points {
            match bucket.get(&p.time_ns) {
                Some(q) if q.version >= p.version => {}
                _ => {
                    bucket.insert(p.time_ns, p.clone());
                }
            }
            out.keep(meta, p);
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    for (key, points) in merged {
        out.blocks.insert(key, points.into_values().collect());
    }
    Ok(())
}

/// Reads rows and passes each with its decoded points to `on_row`; stops at the first
/// row that does not decode.
fn read_decoded<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    req: ReadRequest,
    now_us: i64,
    on_row: &mut dyn FnMut(&Row, Vec<Point<'static>>),
) -> Result<()> {
    let mut failure = None;
    store.read_rows(
        &meta.store_table,
        req,
        &mut |row| match decode_row(meta, &row, now_us) {
            Ok(points) => {
                on_row(&row, points);
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
        None => Ok(()),
    }
}

/// The newest time stored in a series, as an upper bound (`i64::MIN` when empty).
fn newest_in_series<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    series: &[u8],
) -> Result<i64> {
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
