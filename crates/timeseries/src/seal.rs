//! Sealing: once a time bucket of a series is closed, its points are rewritten into one
//! compressed block cell ([`crate::block`]), so a closed hour of a series costs one row
//! and about 6 bytes per point instead of a row per point.
//!
//! ## Where a block lives
//! - Bucket: [`crate::Layout::bucket_secs`] (one hour by default) in every pattern; in
//!   the bucketed patterns it is also the span of a row.
//! - Row: the bucket's first key in key order ([`block_row`]): the row of the bucket
//!   start (`series@<start>`), or in reversed-time tables the row of its last
//!   nanosecond; in the bucketed patterns, the bucket's own row.
//! - Cell: family `b`, empty qualifier, timestamp = the newest point's millisecond (so
//!   the retention GC rule drops the block once its newest point expires; readers drop
//!   older points of a live block themselves, [`decode_block_cell`]), value = the block.
//! - Beside it, `b:s` at the same timestamp: the block's summary
//!   ([`crate::block::BlockSummary`]: counts, min, max, sum per column, first and last
//!   time), written and deleted with the block, for readers of whole buckets.
//!
//! Byte layout: docs/format.md#sealed-blocks
//!
//! A sealed bucket has no other cells: the seal is one MutateRows that sets the block
//! (after a DeleteFromRow of its row) and deletes every cell it read from the other
//! rows of the bucket, each by its exact timestamp. The
//! embedded store commits a batch as one journal record, so readers and crashes see
//! the bucket before or after, never between. (A store without that would, after a
//! crash mid-seal, show the bucket's points twice until the next seal pass merges them.)
//!
//! ## A seal pass, step by step ([`seal_table`])
//! 1. Take the buckets with row-form points from the table's unsealed set
//!    ([`crate::unsealed`], kept by the write path; the first pass after an open walks
//!    the table's keys once to fill it); a bucket is due when it ended
//!    [`SEAL_DELAY_NS`] ago and (in a background pass) has not been written for a
//!    while (`serve --seal-quiet-secs`).
//! 2. Raise the table's [`TableMeta::sealed_before_ns`] to that cutoff (persisted in
//!    the catalog) before sealing anything: writers look for a block only in buckets
//!    ending by then, so a backfill of fresh buckets costs no extra read.
//! 3. For each due group, under the series' write lock: read the bucket's rows, merge
//!    the block's points (if any) with the row-form points (the higher version wins a
//!    time), and write the new block and the deletes in one MutateRows.
//! 4. One sync for the whole pass (a seal changes how points are stored, not what they
//!    are, so it needs no fsync of its own; a write acknowledged later syncs it anyway).
//!
//! ## Reads and writes of sealed buckets
//! - Reads widen a time range's first bucket to its block row ([`crate::query`]) and
//!   let family `b` through their cell-time filter; [`crate::rows::decode_row`] turns a
//!   block back into points.
//! - A write into a sealed bucket (a late point, an upsert) rewrites the block under
//!   the series lock ([`crate::write`]): points never go back to row form there.

use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

use almanac_engine::RowMutations;
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::{RowRange, RowSet, prefix_successor};
use almanac_engine::{Cell, ReadRequest, Row};

use crate::block::{
    BlockPoint, BlockSummary, MAX_BLOCK_POINTS, decode_block_keeping, decode_newest_within,
    encode_block,
};
use crate::catalog::{
    BLOCK_FAMILY, MEASURE_FAMILY, META_FAMILY, SealLease, SeriesCatalog, TableHandle, TableMeta,
};
use crate::error::Result;
use crate::guard::{Guard, apply, guard_of, guarded_write, is_guard, mark_sealing, written_guard};
use crate::keys::{self, KeyParts};
use crate::layout::Layout;
use crate::model::{DimensionPair, MeasureType, Point};
use crate::rows::{bucket_row_points, cell_ts_us, measure_kind};
use crate::store::WideColumnStore;

/// How long after its end a bucket is sealed: late points of the last few minutes
/// (Timestream accepts writes up to 15 minutes ahead of a client's clock, so clocks
/// drift that much) still land as rows; later ones rewrite the block.
pub const SEAL_DELAY_NS: i64 = 10 * 60 * 1_000_000_000;
const NS_PER_SEC: i64 = 1_000_000_000;
/// Microseconds in a millisecond, the store tables' timestamp granularity.
const MICROS_PER_MILLI: i64 = 1_000;
/// Qualifier of a block's summary cell in family `b` (the block's own is empty).
pub const SUMMARY_QUALIFIER: &[u8] = b"s";
/// A bucket whose block would be larger than this stays in rows: a late write rewrites
/// its whole block, and the engine refuses values over 100 MiB. (An hour of ten doubles
/// a second per series is about 250 KB.)
pub const MAX_SEALED_BLOCK_BYTES: usize = 16 * 1024 * 1024;

/// What a seal pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SealStats {
    /// Buckets sealed (or re-sealed with late points).
    pub buckets: u64,
    /// Points now in those blocks.
    pub points: u64,
    /// Rows deleted because their points moved into a block.
    pub rows_removed: u64,
    /// Bytes of the row-form cells deleted (row key, qualifier and value of each): what
    /// the deletion markers shadow until a compaction drops both.
    pub bytes_removed: u64,
}

impl SealStats {
    /// Adds another pass's counts.
    pub fn add(&mut self, other: Self) {
        self.buckets += other.buckets;
        self.points += other.points;
        self.rows_removed += other.rows_removed;
        self.bytes_removed += other.bytes_removed;
    }
}

/// Start of the bucket holding `time_ns`.
pub fn bucket_start_ns(layout: &Layout, time_ns: i64) -> i64 {
    time_ns - time_ns.rem_euclid(layout.bucket_ns())
}

/// End of the bucket holding `time_ns`.
fn bucket_end_ns(layout: &Layout, time_ns: i64) -> i64 {
    bucket_start_ns(layout, time_ns).saturating_add(layout.bucket_ns())
}

/// How far front-ends' clocks may disagree (NTP keeps them within milliseconds):
/// sealing waits [`SEAL_DELAY_NS`] after a bucket's end on its sealer's clock, and
/// writers of a guarded table start checking for a seal this much earlier on theirs
/// ([`closed_for_rows`]).
pub const MAX_CLOCK_SKEW_NS: i64 = 5 * 60 * NS_PER_SEC;

/// Whether, in a guarded table, the bucket of `time_ns` may be sealed at `now_ns` on
/// some front-end's clock. A write of a point there in a one-point-a-row pattern reads
/// the bucket's block row too: a sealed (or marked) bucket is rewritten as one block
/// with the point; otherwise the point takes its row and the block row is checked again
/// after the write (`write::recheck`), so a seal never misses a row it then deletes.
pub fn closed_for_rows(meta: &TableMeta, time_ns: i64, now_ns: i64) -> bool {
    meta.guarded
        && meta.layout.seal
        && bucket_end_ns(&meta.layout, time_ns)
            <= now_ns.saturating_sub(SEAL_DELAY_NS - MAX_CLOCK_SKEW_NS)
}

/// Whether the bucket of `time_ns` may be sealed in this table: it ends no later than
/// the table's [`TableMeta::sealed_before_ns`].
pub fn may_be_sealed(meta: &TableMeta, time_ns: i64) -> bool {
    meta.layout.seal && bucket_end_ns(&meta.layout, time_ns) <= meta.sealed_before_ns
}

/// The time component of the bucket's first key in key order.
fn first_component(layout: &Layout, start_ns: i64) -> String {
    if layout.pattern.is_bucketed() {
        keys::bucket_component(start_ns.div_euclid(NS_PER_SEC), layout.reverse_time)
    } else if layout.reverse_time {
        keys::time_component(start_ns + layout.bucket_ns() - 1, true)
    } else {
        keys::time_component(start_ns, false)
    }
}

/// The row holding the block of the bucket of `time_ns` in `series` (see the module docs).
pub fn block_row(layout: &Layout, series: &[u8], time_ns: i64) -> Vec<u8> {
    let mut row = series.to_vec();
    let start = bucket_start_ns(layout, time_ns);
    row.extend_from_slice(first_component(layout, start).as_bytes());
    row
}

/// All rows of the bucket starting at `start_ns` in `series`, in key order.
pub(crate) fn bucket_rows(layout: &Layout, series: &[u8], start_ns: i64) -> RowRange {
    let last = start_ns + layout.bucket_ns() - 1;
    let (lo, hi) = if layout.pattern.is_bucketed() {
        let c = first_component(layout, start_ns);
        (c.clone(), c)
    } else if layout.reverse_time {
        (
            keys::time_component(last, true),
            keys::time_component(start_ns, true),
        )
    } else {
        (
            keys::time_component(start_ns, false),
            keys::time_component(last, false),
        )
    };
    let mut start = series.to_vec();
    start.extend_from_slice(lo.as_bytes());
    let mut end = series.to_vec();
    end.extend_from_slice(hi.as_bytes());
    RowRange {
        start: Bound::Included(start),
        end: prefix_successor(&end).map_or(Bound::Unbounded, Bound::Excluded),
    }
}

/// Whether the measure of a key is a MULTI measure in the table's schema.
pub(crate) fn is_multi(meta: &TableMeta, measure: &str) -> Result<bool> {
    Ok(measure_kind(meta, measure)? == MeasureType::Multi)
}

/// The points of a block cell in the row with key `parts` (`multi`: its measure is a
/// MULTI measure), less those whose cell time the table's retention has collected at
/// `now_us` (the store's clock), as GC would. With `project`, only those attributes of
/// a MULTI block are decoded.
///
/// With `newest_in` `(start, end)`, only the newest point with `start <= time < end`
/// becomes a [`Point`] (each point carries its own copy of the dimensions, which is
/// most of the cost of decoding a block into points).
#[expect(
    clippy::too_many_arguments,
    reason = "the row's parts, decoded once by the caller"
)]
pub fn decode_block_cell(
    meta: &TableMeta,
    parts: &KeyParts,
    multi: bool,
    dimensions: &[DimensionPair<'static>],
    value: &[u8],
    now_us: i64,
    project: Option<&[String]>,
    newest_in: Option<(i64, i64)>,
) -> Result<Vec<Point<'static>>> {
    Ok(
        live_block_points(meta, multi, value, now_us, project, newest_in)?
            .into_iter()
            .map(|p| Point {
                dimensions: dimensions.to_vec(),
                measure_name: parts.measure.clone().into(),
                time_ns: p.time_ns,
                version: p.version,
                measures: p.measures,
            })
            .collect(),
    )
}

/// [`decode_block_cell`]'s points without their series.
pub(crate) fn live_block_points(
    meta: &TableMeta,
    multi: bool,
    value: &[u8],
    now_us: i64,
    project: Option<&[String]>,
    newest_in: Option<(i64, i64)>,
) -> Result<Vec<BlockPoint>> {
    let horizon_us = retention_horizon_us(meta, now_us);
    let keep = |name: &str| project.is_none_or(|p| p.iter().any(|a| a == name));
    let mut points = match newest_in {
        Some(window) => decode_newest_within(value, multi, &keep, window)?
            .into_iter()
            .collect(),
        None => decode_block_keeping(value, multi, &keep)?,
    };
    points.retain(|p| cell_ts_us(p.time_ns) >= horizon_us);
    Ok(points)
}

/// The mutations that make `points` (one series, one bucket, sorted by time) the block
/// of their row, replacing the old block.
pub fn block_mutations(meta: &TableMeta, points: &[Point]) -> Result<Vec<Mutation>> {
    let Some(last) = points.last() else {
        return block_cells(false, &[]);
    };
    let multi = is_multi(meta, &last.measure_name)?;
    let block: Vec<BlockPoint> = points
        .iter()
        .map(|p| BlockPoint {
            time_ns: p.time_ns,
            version: p.version,
            measures: p.measures.clone().into_owned(),
        })
        .collect();
    block_cells(multi, &block)
}

/// [`block_mutations`] of points without their series (`multi`: of a MULTI measure).
fn block_cells(multi: bool, block: &[BlockPoint]) -> Result<Vec<Mutation>> {
    let clear = Mutation::DeleteFromFamily {
        family: BLOCK_FAMILY.into(),
    };
    let Some(last) = block.last() else {
        return Ok(vec![clear]);
    };
    let value = encode_block(block, multi)?;
    let summary = BlockSummary::of(block).map(|s| s.encode());
    let ts = cell_ts_us(last.time_ns);
    let mut out = vec![
        clear,
        Mutation::SetCell {
            family: BLOCK_FAMILY.into(),
            qualifier: Vec::new(),
            timestamp_us: ts,
            value,
        },
    ];
    out.extend(summary.map(|value| Mutation::SetCell {
        family: BLOCK_FAMILY.into(),
        qualifier: SUMMARY_QUALIFIER.to_vec(),
        timestamp_us: ts,
        value,
    }));
    Ok(out)
}

/// The block cell of a row (family `b`, empty qualifier), if it has one.
pub fn block_cell(row: &Row) -> Option<&Cell> {
    row.cells
        .iter()
        .find(|c| &*c.family == BLOCK_FAMILY && c.qualifier.is_empty())
}

/// Row-form rows left beside a sealed bucket's block in the one-point-a-row patterns,
/// where the block has its own row: a seal over a store without atomic multi-row
/// batches writes the block first and deletes the rows after, and a sealer that stops
/// between leaves them. Their points are in the block, so readers skip them; the next
/// seal or late write of the bucket deletes them. A row written into the bucket after
/// its seal read it is skipped too until its writer (which has not answered yet)
/// merges it into the block.
///
/// A read meets a bucket's block row before its other rows (it is the bucket's first
/// key, and reads widen their first bucket to it), so remembering the last block's
/// bucket suffices.
#[derive(Debug, Default)]
pub struct Leftovers {
    /// Series prefix and bucket start of the last block row read.
    sealed: Option<(Vec<u8>, i64)>,
}

impl Leftovers {
    /// Whether `row` (read after the rows this was shown before) is a leftover.
    pub fn skip(&mut self, meta: &TableMeta, row: &Row) -> Result<bool> {
        let layout = &meta.layout;
        if layout.pattern.is_bucketed() || !layout.seal {
            return Ok(false);
        }
        let block = row.cells.iter().any(|c| &*c.family == BLOCK_FAMILY);
        if !block
            && !self
                .sealed
                .as_ref()
                .is_some_and(|(series, _)| row.key.starts_with(series))
        {
            return Ok(false);
        }
        let (series_len, time) = keys::decode_series_time(&row.key, false, layout.reverse_time)?;
        let here = (&row.key[..series_len], bucket_start_ns(layout, time));
        if block {
            self.sealed = Some((here.0.to_vec(), here.1));
            return Ok(false);
        }
        Ok(self
            .sealed
            .as_ref()
            .is_some_and(|(series, start)| (series.as_slice(), *start) == here))
    }
}

/// Whether a row holds a block cell.
pub fn has_block(row: &Row) -> bool {
    block_cell(row).is_some()
}

/// The oldest cell time (µs) the table's retention keeps at `now_us`: GC's cutoff,
/// which readers of a live block apply to its points themselves.
pub fn retention_horizon_us(meta: &TableMeta, now_us: i64) -> i64 {
    now_us.saturating_sub(meta.retention.keep_ns() / 1000)
}

/// Gives every block of a table created before summaries existed its summary, each
/// under its series lock (a late write may be rewriting the block), then marks the
/// table [`TableMeta::summarized`]. Runs once, in the table's first seal pass.
fn summarize_blocks<S: WideColumnStore>(
    catalog: &SeriesCatalog<S>,
    handle: &TableHandle,
) -> Result<u64> {
    let store = catalog.store().as_ref();
    let meta = handle.meta();
    let blocks_only = {
        Some(RowFilter::Chain(vec![
            RowFilter::FamilyNameRegex(BLOCK_FAMILY.into()),
            RowFilter::ColumnRange {
                family: BLOCK_FAMILY.into(),
                start: Bound::Included(Vec::new()),
                end: Bound::Included(Vec::new()),
            },
            RowFilter::StripValue,
        ]))
    };
    let mut block_rows: Vec<Vec<u8>> = Vec::new();
    let req = ReadRequest {
        rows: crate::directory::all_points(),
        filter: blocks_only,
        ..ReadRequest::default()
    };
    store.read_rows(&meta.store_table, req, &mut |row| {
        block_rows.push(row.key.to_vec());
        ControlFlow::Continue(())
    })?;
    let bucketed = meta.layout.pattern.is_bucketed();
    let mut done = 0;
    for key in block_rows {
        let parts = keys::decode(&key, bucketed, meta.layout.reverse_time)?;
        let locks = &handle.series;
        let _guard = locks.lock(vec![locks.stripe(&key[..parts.series_len])]);
        let req = ReadRequest {
            rows: RowSet {
                keys: vec![key.clone()],
                ranges: Vec::new(),
            },
            ..ReadRequest::default()
        };
        let mut found = None;
        store.read_rows(&meta.store_table, req, &mut |row| {
            found = block_cell(&row).map(|c| (c.timestamp_us, c.value.to_vec()));
            ControlFlow::Break(())
        })?;
        let Some((ts, value)) = found else { continue };
        let multi = is_multi(&meta, &parts.measure)?;
        let Some(summary) = BlockSummary::of(&decode_block_keeping(&value, multi, &|_| true)?)
        else {
            continue;
        };
        let batch = [RowMutations {
            key,
            mutations: vec![Mutation::SetCell {
                family: BLOCK_FAMILY.into(),
                qualifier: SUMMARY_QUALIFIER.to_vec(),
                timestamp_us: ts,
                value: summary.encode(),
            }],
        }];
        for r in store.mutate_rows(&meta.store_table, &batch)? {
            r?;
        }
        done += 1;
    }
    let _schema = handle
        .schema_lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    catalog.change_table(handle, |current| {
        let mut next = current.clone();
        next.summarized = true;
        Ok((!current.summarized).then_some(next))
    })?;
    Ok(done)
}

/// Seals every due bucket of one table (steps in the module docs): closed buckets not
/// written in the last `quiet_ns`.
pub fn seal_table<S: WideColumnStore>(
    catalog: &SeriesCatalog<S>,
    handle: &TableHandle,
    now_ns: i64,
    quiet_ns: i64,
) -> Result<SealStats> {
    let store = catalog.store().as_ref();
    let meta = handle.meta();
    let mut stats = SealStats::default();
    if !meta.layout.seal {
        return Ok(stats);
    }
    // Over a store other front-ends write too, one pass at a time per table.
    let _lease = if store.other_writers() {
        match SealLease::take(store, &meta.store_table, now_ns)? {
            Some(lease) => Some(lease),
            None => return Ok(stats),
        }
    } else {
        None
    };
    if !meta.summarized {
        summarize_blocks(catalog, handle)?;
    }
    let cutoff = now_ns.saturating_sub(SEAL_DELAY_NS);
    let unsealed = &handle.unsealed;
    if !unsealed.is_known() {
        unsealed.found(due_buckets(store, &meta, i64::MAX)?);
    }
    let quiet = now_ns.saturating_sub(quiet_ns);
    let due =
        unsealed.due(|start, last| bucket_end_ns(&meta.layout, start) <= cutoff && last <= quiet);
    if due.is_empty() {
        return Ok(stats);
    }
    // Writers must look for blocks up to the cutoff before the first bucket is sealed.
    if cutoff > meta.sealed_before_ns {
        let _schema = handle
            .schema_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        catalog.change_table(handle, |current| {
            let mut next = current.clone();
            next.sealed_before_ns = next.sealed_before_ns.max(cutoff);
            Ok((next.sealed_before_ns != current.sealed_before_ns).then_some(next))
        })?;
    }
    let sealed: Result<()> = due.into_iter().try_for_each(|(series, start)| {
        stats.add(seal_bucket(store, handle, &series, start)?);
        Ok(())
    });
    // One sync for the pass, even after a failure: each bucket's batch is one journal
    // record, so a crash before it leaves every bucket before or after its seal.
    if stats.buckets > 0 {
        store.sync()?;
    }
    sealed.map(|()| stats)
}

/// Step 1 after an open: the (series, bucket start) groups with row-form cells whose
/// bucket ended by `cutoff_ns`, by a key-only walk of the table.
fn due_buckets<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    cutoff_ns: i64,
) -> Result<Vec<(Vec<u8>, i64)>> {
    let layout = &meta.layout;
    let bucketed = layout.pattern.is_bucketed();
    let req = ReadRequest {
        rows: crate::directory::all_points(),
        // Row-form cells only: a row holding just a block (and its guard) is sealed.
        filter: Some(RowFilter::Chain(vec![
            RowFilter::FamilyNameRegex(format!("{MEASURE_FAMILY}|{META_FAMILY}")),
            RowFilter::CellsPerRowLimit(1),
            RowFilter::StripValue,
        ])),
        ..ReadRequest::default()
    };
    let mut due = Vec::new();
    // The group being walked: series, bucket start, whether it has row-form cells.
    let mut group: Option<(Vec<u8>, i64, bool)> = None;
    let mut failure = None;
    let flush = |g: Option<(Vec<u8>, i64, bool)>, due: &mut Vec<(Vec<u8>, i64)>| {
        if let Some((series, start, row_form)) = g
            && row_form
            && bucket_end_ns(layout, start) <= cutoff_ns
        {
            due.push((series, start));
        }
    };
    store.read_rows(&meta.store_table, req, &mut |row| {
        let (series_len, time) =
            match keys::decode_series_time(&row.key, bucketed, layout.reverse_time) {
                Ok(p) => p,
                Err(e) => {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
            };
        let time_ns = if bucketed {
            time.saturating_mul(NS_PER_SEC)
        } else {
            time
        };
        let start = bucket_start_ns(layout, time_ns);
        let series = &row.key[..series_len];
        let row_form = !row.cells.is_empty();
        match &mut group {
            Some((s, b, rf)) if s.as_slice() == series && *b == start => *rf |= row_form,
            _ => flush(group.replace((series.to_vec(), start, row_form)), &mut due),
        }
        ControlFlow::Continue(())
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    flush(group, &mut due);
    Ok(due)
}

/// A bucket as a seal reads it.
struct BucketRead {
    /// Each row's key, the exact cells to delete from it, and its guard.
    rows: Vec<(Vec<u8>, Vec<Mutation>, Option<Guard>)>,
    /// Its points by time: the higher version of a time read twice; on a tie the one
    /// read first (the block row's).
    points: BTreeMap<i64, BlockPoint>,
    /// Whether the series' measure is a MULTI measure (known once a row is read).
    multi: bool,
    /// Bytes of the row-form cells (key, qualifier and value of each).
    bytes_removed: u64,
}

impl BucketRead {
    /// Whether the bucket holds row-form points to seal.
    fn has_rows(&self) -> bool {
        !self.points.is_empty() && self.rows.iter().any(|(_, deletes, _)| !deletes.is_empty())
    }

    /// The guard read of row `key`.
    fn guard(&self, key: &[u8]) -> Option<Guard> {
        self.rows
            .iter()
            .find(|(k, _, _)| k == key)
            .and_then(|(_, _, g)| g.clone())
    }
}

/// Reads every row of the bucket starting at `start_ns` in `series`.
fn read_bucket<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    series: &[u8],
    start_ns: i64,
) -> Result<BucketRead> {
    let now_us = store.now_us();
    let req = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: vec![bucket_rows(&meta.layout, series, start_ns)],
        },
        ..ReadRequest::default()
    };
    let mut out = BucketRead {
        rows: Vec::new(),
        points: BTreeMap::new(),
        multi: false,
        bytes_removed: 0,
    };
    let mut kind = None;
    let mut failure = None;
    store.read_rows(&meta.store_table, req, &mut |row| {
        let mut deletes = Vec::with_capacity(row.cells.len());
        for c in row
            .cells
            .iter()
            .filter(|c| &*c.family != BLOCK_FAMILY && !is_guard(c))
        {
            out.bytes_removed += (row.key.len() + c.qualifier.len() + c.value.len()) as u64;
            deletes.push(exact_delete(c));
        }
        // The series' measure, from the first row's key; the others' are the same.
        let decoded = kind
            .map_or_else(|| series_kind(meta, &row.key), Ok)
            .and_then(|k| {
                kind = Some(k);
                bucket_row_points(meta, &row, series, k, now_us)
            });
        match decoded {
            Ok(decoded) => {
                for p in decoded {
                    match out.points.get(&p.time_ns) {
                        Some(q) if q.version >= p.version => {}
                        _ => {
                            out.points.insert(p.time_ns, p);
                        }
                    }
                }
            }
            Err(e) => {
                failure = Some(e);
                return ControlFlow::Break(());
            }
        }
        out.rows.push((row.key.to_vec(), deletes, guard_of(&row)));
        ControlFlow::Continue(())
    })?;
    out.multi = kind == Some(MeasureType::Multi);
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The type of the measure of the series whose row has key `key`.
fn series_kind(meta: &TableMeta, key: &[u8]) -> Result<MeasureType> {
    let layout = &meta.layout;
    let parts = keys::decode(key, layout.pattern.is_bucketed(), layout.reverse_time)?;
    measure_kind(meta, &parts.measure)
}

/// Step 2: seals one bucket under its series lock.
///
/// In a guarded table, over a store without atomic multi-row batches, the block is
/// written first, conditioned on its row's guard as read (a late write rewriting the
/// block at the same time wins, and has merged these rows itself); then the bucket's
/// other rows are deleted ([`delete_merged_rows`]). Readers skip any row a stop leaves
/// behind ([`Leftovers`]).
///
/// In a guarded table of a one-point-a-row pattern the bucket's block row is marked
/// first ([`mark_sealing`]) and the bucket read again: a writer that put a row into
/// the bucket after that read finds the mark when it checks, and merges the bucket
/// itself (`write::recheck`).
fn seal_bucket<S: WideColumnStore>(
    store: &S,
    handle: &TableHandle,
    series: &[u8],
    start_ns: i64,
) -> Result<SealStats> {
    let locks = &handle.series;
    let _guard = locks.lock(vec![locks.stripe(series)]);
    let meta = handle.meta();
    let layout = &meta.layout;
    let mut read = read_bucket(store, &meta, series, start_ns)?;
    // Whatever happens below, the bucket is done until a write adds it again.
    handle.unsealed.remove(series, start_ns);
    // Nothing but a block (another front-end sealed it since this one wrote it).
    if !read.has_rows() {
        return Ok(SealStats::default());
    }
    let block_key = block_row(layout, series, start_ns);
    if meta.guarded && !layout.pattern.is_bucketed() {
        let newest_us = read.points.keys().last().map_or(0, |&t| cell_ts_us(t));
        let mark = mark_sealing(
            block_key.clone(),
            read.guard(&block_key).as_ref(),
            newest_us,
        );
        if !apply(store, &meta.store_table, &mark)? {
            // A writer changed the block row: it seals the bucket, or a later pass.
            return Ok(SealStats::default());
        }
        read = read_bucket(store, &meta, series, start_ns)?;
        let ours = written_guard(&mark).map(|g| g.token().to_vec());
        if read.guard(&block_key).map(|g| g.token().to_vec()) != ours || !read.has_rows() {
            return Ok(SealStats::default());
        }
    }
    let block_guard = read.guard(&block_key);
    let BucketRead {
        rows,
        points,
        multi,
        bytes_removed,
    } = read;
    // The bucket's other rows with row-form cells, and the exact deletes of those.
    let replaced: Vec<(Vec<u8>, Vec<Mutation>)> = rows
        .into_iter()
        .filter(|(k, m, _)| *k != block_key && !m.is_empty())
        .map(|(key, deletes, _)| (key, deletes))
        .collect();
    let points: Vec<BlockPoint> = points.into_values().collect();
    if points.len() > MAX_BLOCK_POINTS {
        return Ok(SealStats::default());
    }
    let block = block_cells(multi, &points)?;
    if block.iter().any(
        |m| matches!(m, Mutation::SetCell { value, .. } if value.len() > MAX_SEALED_BLOCK_BYTES),
    ) {
        // Left in rows: a block this large would make every late write rewrite it.
        return Ok(SealStats::default());
    }
    let mut mutations = vec![Mutation::DeleteFromRow];
    mutations.extend(block);
    let stats = SealStats {
        buckets: 1,
        points: points.len() as u64,
        rows_removed: replaced.len() as u64,
        bytes_removed,
    };
    if meta.guarded {
        let write = guarded_write(block_key, block_guard.as_ref(), mutations);
        if !apply(store, &meta.store_table, &write)? {
            // A late write rewrote the block meanwhile, and merged these rows itself.
            return Ok(SealStats::default());
        }
        let keys = replaced.into_iter().map(|(key, _)| key).collect();
        delete_merged_rows(store, &meta, keys)?;
        return Ok(stats);
    }
    let mut batch: Vec<RowMutations> = replaced
        .into_iter()
        .map(|(key, mutations)| RowMutations { key, mutations })
        .collect();
    batch.push(RowMutations {
        key: block_key,
        mutations,
    });
    // Every entry but the block's deletes cells, which cannot fail; the block's value
    // is far under the engine's limits, so the batch lands whole. Made durable once for
    // the whole pass ([`seal_table`]).
    for r in store.mutate_rows_unsynced(&meta.store_table, &batch)? {
        r?;
    }
    Ok(stats)
}

/// Deletes the rows of a bucket whose points a block now holds, in one MutateRows.
///
/// Not conditioned on their guards: a row written after the bucket was read belongs to
/// a writer that has not answered yet, and that writer's check after writing finds the
/// block row changed (the seal's mark, or the block of a writer that merged), so it
/// tries the record again against the block ([`closed_for_rows`]). A row left behind
/// (the deleter stopped) is skipped by readers ([`Leftovers`]) until the next seal.
pub(crate) fn delete_merged_rows<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    keys: Vec<Vec<u8>>,
) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let batch: Vec<RowMutations> = keys
        .into_iter()
        .map(|key| RowMutations {
            key,
            mutations: vec![Mutation::DeleteFromRow],
        })
        .collect();
    for r in store.mutate_rows(&meta.store_table, &batch)? {
        r?;
    }
    Ok(())
}

/// The deletion of exactly `cell`: its column over its one millisecond (the store's
/// tables have millisecond granularity, so no other cell shares it). The engine writes
/// the tombstone without reading the row again, which a DeleteFromRow would (that read
/// was 30% of a seal pass's CPU; docs/benchmarks.md). The series lock held by the pass
/// keeps the row from gaining cells between the read and the delete.
fn exact_delete(cell: &almanac_engine::Cell) -> Mutation {
    Mutation::DeleteFromColumn {
        family: cell.family.to_string(),
        qualifier: cell.qualifier.to_vec(),
        start_us: cell.timestamp_us,
        end_us: cell.timestamp_us.checked_add(MICROS_PER_MILLI),
    }
}

#[cfg(test)]
mod tests;
