//! Reading points back, whatever the pattern: a [`Selection`] (measure name, dimension
//! equalities, time range, attributes) becomes key ranges, a filter and a post-check.
//!
//! 1. Ranges: each selected measure name (or every one in the schema) with the values
//!    of the leading dimensions given is one or two key prefixes
//!    ([`crate::keys::selection_prefixes`]); when every dimension of the table is given
//!    the series is pinned and the time range narrows the key range itself.
//!    A time window over series that are not pinned is read series by series: a
//!    one-cell probe finds the next series, and its window is one key range.
//! 2. Filter: the time range as a cell-timestamp range (every pattern stamps cells
//!    with the point's millisecond), plus the selected attributes as column ranges
//!    where attributes are columns.
//! 3. Each row decodes into points ([`crate::rows::decode_row_projected`]), checked exactly
//!    against the selection (dimension values, nanosecond time bounds).
//!
//! In tables that seal ([`crate::seal`]), a time range starts at the block row of its
//! first bucket, and the cell-time filter lets block cells through.

use std::ops::{Bound, ControlFlow, Range};
use std::sync::Arc;

use almanac_engine::filter::RowFilter;
use almanac_engine::rowset::{RowRange, RowSet, prefix_successor};
use almanac_engine::{ReadRequest, Row};

use crate::block::{BlockColumns, BlockSummary, decode_block_columns};
use crate::catalog::{BLOCK_FAMILY, MEASURE_FAMILY, META_FAMILY, TableMeta};
use crate::codec::named_prefix;
use crate::directory;
use crate::error::Result;
use crate::guard::is_guard;
use crate::keys::{self, selection_prefixes};
use crate::layout::Pattern;
use crate::limits::MAX_RANGES_PER_READ;
use crate::model::{DimensionPair, Measures, Point};
use crate::rows::{cell_ts_us, decode_row_projected, decode_row_within, dimensions_of};
use crate::seal::{
    Leftovers, SUMMARY_QUALIFIER, block_cell, bucket_start_ns, is_multi, retention_horizon_us,
};
use crate::store::WideColumnStore;

mod parts;

use parts::{Found, Over};
pub use parts::{Part, SeriesQueue};

/// Which points to read.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Only this measure name.
    pub measure_name: Option<String>,
    /// Only points with these dimension values.
    pub dimensions: Vec<(String, String)>,
    /// Inclusive lower time bound, ns.
    pub start_ns: i64,
    /// Exclusive upper time bound, ns.
    pub end_ns: i64,
    /// Only these attributes of multi-measure records (others are dropped; a record
    /// with none of them is skipped).
    pub attributes: Option<Vec<String>>,
    /// Only these attributes of multi-measure records are decoded (others are dropped
    /// unread where a sealed block allows); unlike [`Selection::attributes`], a record
    /// with none of them is still returned, without values. What a reader that needs
    /// only some columns asks for.
    pub project: Option<Vec<String>>,
    /// Only one share of the series: one partition of a scan that runs on several
    /// threads (see [`Part`]). Honoured by the reads that go series by series: a
    /// time window over series the selection does not pin, and [`latest`].
    pub part: Option<Part>,
}

/// Whether reading `sel` goes series by series, so that [`Selection::part`] can share
/// its series among threads: a bounded time window over several series, or any
/// selection of [`latest`] (`newest_only`) that does not pin one series.
pub fn splits_by_series(meta: &TableMeta, sel: &Selection, newest_only: bool) -> bool {
    !is_pinned(meta, sel) && (newest_only || (sel.start_ns > 0 && sel.end_ns < i64::MAX))
}

impl Default for Selection {
    fn default() -> Self {
        Self {
            measure_name: None,
            dimensions: Vec::new(),
            start_ns: 0,
            end_ns: i64::MAX,
            attributes: None,
            project: None,
            part: None,
        }
    }
}

/// Counters of one read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Rows read from the store.
    pub rows: u64,
    /// Cells read from the store.
    pub cells: u64,
    /// Points returned.
    pub points: u64,
}

fn range_of(start: Vec<u8>, end: Option<Vec<u8>>) -> RowRange {
    RowRange {
        start: Bound::Included(start),
        end: end.map_or(Bound::Unbounded, Bound::Excluded),
    }
}

/// Step 1: the key ranges of a selection.
pub fn key_ranges(meta: &TableMeta, sel: &Selection) -> RowSet {
    let schema = &meta.schema;
    let leading: Vec<&str> = schema
        .dimensions
        .iter()
        .map_while(|d| {
            sel.dimensions
                .iter()
                .find(|(n, _)| n == d)
                .map(|(_, v)| v.as_str())
        })
        .collect();
    if leading.is_empty() && sel.measure_name.is_none() {
        return crate::directory::all_points();
    }
    let measures: Vec<&str> = match &sel.measure_name {
        Some(m) => vec![m.as_str()],
        None => schema.measures.keys().map(String::as_str).collect(),
    };
    let pinned = leading.len() == schema.dimensions.len();
    let mut ranges = Vec::new();
    for m in measures {
        let [more, exact] = selection_prefixes(m, &leading);
        if !pinned {
            ranges.push(RowRange::prefix(&more));
        }
        if pinned && (sel.start_ns > 0 || sel.end_ns < i64::MAX) {
            ranges.push(time_range(meta, &exact, sel));
        } else {
            ranges.push(RowRange::prefix(&exact));
        }
    }
    RowSet {
        keys: Vec::new(),
        ranges,
    }
}

/// The rows of one series between the selection's times.
fn time_range(meta: &TableMeta, series: &[u8], sel: &Selection) -> RowRange {
    let layout = &meta.layout;
    let comp = |ns: i64| -> String {
        if layout.pattern.is_bucketed() {
            let secs = ns.div_euclid(1_000_000_000);
            keys::bucket_component(
                secs - secs.rem_euclid(layout.bucket_secs),
                layout.reverse_time,
            )
        } else {
            keys::time_component(ns, layout.reverse_time)
        }
    };
    let last = sel.end_ns.saturating_sub(1).max(sel.start_ns);
    let (mut lo, hi) = if layout.reverse_time {
        (last, sel.start_ns)
    } else {
        (sel.start_ns, last)
    };
    if layout.seal && !layout.pattern.is_bucketed() {
        // The first bucket may be sealed: start at its block row (`seal::block_row`).
        let bucket = layout.bucket_ns();
        lo = bucket_start_ns(layout, lo);
        if layout.reverse_time {
            lo = lo.saturating_add(bucket - 1);
        }
    }
    let mut start = series.to_vec();
    start.extend_from_slice(comp(lo).as_bytes());
    let mut end = series.to_vec();
    end.extend_from_slice(comp(hi).as_bytes());
    range_of(start, prefix_successor(&end))
}

/// Step 2: the filter of a selection.
pub fn filter(meta: &TableMeta, sel: &Selection) -> Option<RowFilter> {
    let mut chain = Vec::new();
    if sel.start_ns > 0 || sel.end_ns < i64::MAX {
        chain.push(RowFilter::TimestampRange {
            start_us: cell_ts_us(sel.start_ns),
            end_us: (sel.end_ns < i64::MAX)
                .then(|| cell_ts_us(sel.end_ns.saturating_sub(1)) + 1000),
        });
    }
    if let Some(attrs) = &sel.attributes
        && meta.layout.pattern != Pattern::RowSerialized
    {
        let mut any: Vec<RowFilter> = vec![RowFilter::FamilyNameRegex(META_FAMILY.into())];
        for a in attrs {
            let (start, end) = if meta.layout.pattern == Pattern::BucketColumns {
                let p = named_prefix(a);
                let end = prefix_successor(&p);
                (
                    Bound::Included(p),
                    end.map_or(Bound::Unbounded, Bound::Excluded),
                )
            } else {
                (
                    Bound::Included(a.as_bytes().to_vec()),
                    Bound::Included(a.as_bytes().to_vec()),
                )
            };
            any.push(RowFilter::ColumnRange {
                family: MEASURE_FAMILY.into(),
                start,
                end,
            });
        }
        chain.push(RowFilter::Interleave(any));
    }
    match chain.len() {
        0 => None,
        1 => chain.pop().map(|f| let_blocks_through(meta, f)),
        _ => Some(let_blocks_through(meta, RowFilter::Chain(chain))),
    }
}

/// In a table that seals, `filter` (on cell times and measure columns) applies to the
/// row-form cells, and a block cell always passes: its timestamp is only its newest
/// point's ([`crate::seal`]), and decoding checks each point.
pub fn let_blocks_through(meta: &TableMeta, filter: RowFilter) -> RowFilter {
    if !meta.layout.seal {
        return filter;
    }
    RowFilter::Interleave(vec![
        RowFilter::Chain(vec![row_form_cells(), filter]),
        RowFilter::FamilyNameRegex(BLOCK_FAMILY.into()),
    ])
}

/// The cells of a row's points in row form (measure and meta families), not its block.
fn row_form_cells() -> RowFilter {
    RowFilter::FamilyNameRegex(format!("[{MEASURE_FAMILY}{META_FAMILY}]"))
}

/// Whether the selection's measure name and dimension values match a series'.
fn selects_series(sel: &Selection, measure_name: &str, dimensions: &[DimensionPair<'_>]) -> bool {
    sel.measure_name.as_ref().is_none_or(|m| m == measure_name)
        && sel
            .dimensions
            .iter()
            .all(|(n, v)| dimensions.iter().any(|(pn, pv)| pn == n && pv == v))
}

/// The measure name and dimensions of a row's series, if the selection selects it.
fn selected_series(
    meta: &TableMeta,
    sel: &Selection,
    key: &[u8],
) -> Result<Option<(String, Vec<DimensionPair<'static>>)>> {
    let layout = &meta.layout;
    let parts = keys::decode(key, layout.pattern.is_bucketed(), layout.reverse_time)?;
    let dimensions = dimensions_of(&meta.schema, &parts);
    Ok(selects_series(sel, &parts.measure, &dimensions).then_some((parts.measure, dimensions)))
}

/// Step 3: whether a decoded point is selected; trims unselected attributes.
fn keep(sel: &Selection, mut p: Point<'static>) -> Option<Point<'static>> {
    if p.time_ns < sel.start_ns || p.time_ns >= sel.end_ns {
        return None;
    }
    if !selects_series(sel, &p.measure_name, &p.dimensions) {
        return None;
    }
    if let (Some(attrs), Measures::Multi(vs)) = (&sel.attributes, &mut p.measures) {
        vs.retain(|(n, _)| attrs.iter().any(|a| a == n));
        if vs.is_empty() {
            return None;
        }
    }
    if let (Some(names), Measures::Multi(vs)) = (&sel.project, &mut p.measures) {
        vs.retain(|(n, _)| names.iter().any(|a| a == n));
    }
    Some(p)
}

/// Whether every dimension of the table is given, so the selection is one series
/// per measure name and the time range narrows the key range itself.
fn is_pinned(meta: &TableMeta, sel: &Selection) -> bool {
    let dims = &meta.schema.dimensions;
    dims.iter()
        .all(|d| sel.dimensions.iter().any(|(n, _)| n == d))
}

/// What a row handler of [`scan_rows`] says: go on or stop; an error stops the scan.
type OnRow<'a> = dyn FnMut(Row) -> Result<ControlFlow<()>> + 'a;

/// Reads the selected points, row by row in key order, passing each to `visit`.
///
/// A time window (both ends bounded) over series the selection does not pin is read
/// series by series ([`scan_rows`]): each series' window is its own key range, so the
/// rows outside the window are never walked.
pub fn scan<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    visit: &mut dyn FnMut(Point<'static>) -> ControlFlow<()>,
) -> Result<ScanStats> {
    let mut stats = ScanStats::default();
    let now_us = store.now_us();
    scan_rows(store, meta, sel, filter(meta, sel), &mut |row| {
        count_row(&mut stats, &row);
        visit_points(meta, sel, &row, now_us, &mut stats, visit)
    })?;
    Ok(stats)
}

fn count_row(stats: &mut ScanStats, row: &Row) {
    stats.rows += 1;
    stats.cells += row.cells.len() as u64;
}

/// Decodes a row, checks each point against the selection and visits it.
fn visit_points(
    meta: &TableMeta,
    sel: &Selection,
    row: &Row,
    now_us: i64,
    stats: &mut ScanStats,
    visit: &mut dyn FnMut(Point<'static>) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    for p in decode_row_projected(meta, row, now_us, sel.project.as_deref())? {
        if let Some(p) = keep(sel, p) {
            stats.points += 1;
            if visit(p).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// The rows a selection reads, through `row_filter`, each passed to `on_row`.
///
/// Skip-scan when a bounded time window does not pin the series: find the next series
/// with a one-cell probe (value stripped), read its window, jump past it. Two seeks
/// per series instead of a walk over every row of every series.
fn scan_rows<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    row_filter: Option<RowFilter>,
    on_row: &mut OnRow<'_>,
) -> Result<()> {
    if !splits_by_series(meta, sel, false) {
        if !Part::is_first(sel.part.as_ref()) {
            // One series, or one walk over all: the first partition reads it.
            return Ok(());
        }
        let req = ReadRequest {
            rows: key_ranges(meta, sel),
            filter: row_filter,
            ..ReadRequest::default()
        };
        // Whether `on_row` stopped early makes no difference here.
        let _ = read_each(store, meta, req, on_row)?;
        return Ok(());
    }
    if meta.indexed {
        return scan_listed(store, meta, sel, row_filter, on_row);
    }
    let ranges = key_ranges(meta, sel).normalized();
    let probe = Some(RowFilter::Chain(vec![
        RowFilter::CellsPerRowLimit(1),
        RowFilter::StripValue,
    ]));
    let mut walk = Over {
        store,
        meta,
        ranges: &ranges,
        filter: probe,
        reversed: false,
        part: sel.part.as_ref(),
    }
    .walk();
    while let Some(found) = walk.next()? {
        if !found.owned {
            continue;
        }
        let series = found.series;
        let req = ReadRequest {
            rows: RowSet {
                keys: Vec::new(),
                ranges: vec![time_range(meta, &series, sel)],
            },
            filter: row_filter.clone(),
            ..ReadRequest::default()
        };
        if read_each(store, meta, req, on_row)?.is_break() {
            break;
        }
    }
    Ok(())
}

/// [`scan_rows`] over a table with a series directory: the series from the directory
/// (one read), then every window at once (one read of many ranges), instead of two
/// reads per series: what keeps a query's round trips to a remote Bigtable constant.
fn scan_listed<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    row_filter: Option<RowFilter>,
    on_row: &mut OnRow<'_>,
) -> Result<()> {
    let series = listed_series(store, meta, sel)?;
    let windows: Vec<RowRange> = series
        .iter()
        .enumerate()
        .filter(|(ordinal, _)| Part::owns(sel.part.as_ref(), *ordinal))
        .map(|(_, s)| time_range(meta, s, sel))
        .collect();
    for ranges in windows.chunks(MAX_RANGES_PER_READ) {
        let req = ReadRequest {
            rows: RowSet {
                keys: Vec::new(),
                ranges: ranges.to_vec(),
            },
            filter: row_filter.clone(),
            ..ReadRequest::default()
        };
        if read_each(store, meta, req, on_row)?.is_break() {
            break;
        }
    }
    Ok(())
}

/// The series a selection reads, from the table's directory: the key ranges of its
/// measure and dimensions, whatever its time window (one read).
fn listed_series<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
) -> Result<Vec<Vec<u8>>> {
    let any_time = Selection {
        start_ns: 0,
        end_ns: i64::MAX,
        ..sel.clone()
    };
    directory::series_under(store, meta, &key_ranges(meta, &any_time))
}

/// One read, each row passed to `on_row`; `Break` when it stopped the read.
fn read_each<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    req: ReadRequest,
    on_row: &mut OnRow<'_>,
) -> Result<ControlFlow<()>> {
    let mut failure = None;
    let mut stopped = false;
    let mut leftovers = Leftovers::default();
    store.read_rows(
        &meta.store_table,
        req,
        &mut |row| match leftovers.skip(meta, &row).and_then(|skip| {
            if skip {
                Ok(ControlFlow::Continue(()))
            } else {
                on_row(row)
            }
        }) {
            Ok(ControlFlow::Continue(())) => ControlFlow::Continue(()),
            Ok(ControlFlow::Break(())) => {
                stopped = true;
                ControlFlow::Break(())
            }
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        },
    )?;
    match failure {
        Some(e) => Err(e),
        None if stopped => Ok(ControlFlow::Break(())),
        None => Ok(ControlFlow::Continue(())),
    }
}

/// One piece of a [`scan_columns`]: the selected points of a sealed block, column by
/// column, or a point.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// Points of one sealed block.
    Block {
        /// The series' measure name.
        measure_name: String,
        /// The series' dimensions.
        dimensions: Vec<DimensionPair<'static>>,
        /// The block's columns (the projected attributes only, for MULTI blocks).
        columns: BlockColumns,
        /// The selected points: these indexes of `columns.times_ns`.
        range: Range<usize>,
    },
    /// A selected point stored in row form.
    Point(Point<'static>),
}

/// [`scan`] for a columnar reader: a sealed block comes whole, decoded column by
/// column with only the projected attributes and no per-point allocation, with the
/// range of its points inside the time window and the retention; row-form points
/// come one by one.
pub fn scan_columns<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    visit: &mut dyn FnMut(Chunk) -> ControlFlow<()>,
) -> Result<ScanStats> {
    if sel.attributes.is_some() || !meta.layout.seal {
        return scan(store, meta, sel, &mut |p| visit(Chunk::Point(p)));
    }
    let mut stats = ScanStats::default();
    let now_us = store.now_us();
    let horizon_us = retention_horizon_us(meta, now_us);
    scan_rows(store, meta, sel, filter(meta, sel), &mut |row| {
        count_row(&mut stats, &row);
        visit_chunks(meta, sel, &row, now_us, horizon_us, &mut stats, &mut *visit)
    })?;
    Ok(stats)
}

/// One row for [`scan_columns`]: its sealed block as columns (when the row holds only
/// the block), else its points one by one.
fn visit_chunks(
    meta: &TableMeta,
    sel: &Selection,
    row: &Row,
    now_us: i64,
    horizon_us: i64,
    stats: &mut ScanStats,
    visit: &mut dyn FnMut(Chunk) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    let only_block = row
        .cells
        .iter()
        .all(|c| &*c.family == BLOCK_FAMILY || is_guard(c));
    let Some(cell) = block_cell(row).filter(|_| only_block) else {
        let mut visit_point = |p| visit(Chunk::Point(p));
        return visit_points(meta, sel, row, now_us, stats, &mut visit_point);
    };
    let Some((measure_name, dimensions)) = selected_series(meta, sel, &row.key)? else {
        return Ok(ControlFlow::Continue(()));
    };
    let multi = is_multi(meta, &measure_name)?;
    let keep = |name: &str| {
        sel.project
            .as_ref()
            .is_none_or(|p| p.iter().any(|a| a == name))
    };
    let columns = decode_block_columns(&cell.value, multi, &keep)?;
    let times = &columns.times_ns;
    let lo = times.partition_point(|&t| t < sel.start_ns || cell_ts_us(t) < horizon_us);
    let hi = times.partition_point(|&t| t < sel.end_ns);
    if lo >= hi {
        return Ok(ControlFlow::Continue(()));
    }
    stats.points += (hi - lo) as u64;
    Ok(visit(Chunk::Block {
        measure_name,
        dimensions,
        columns,
        range: lo..hi,
    }))
}

/// One piece of a [`scan_partials`]: a whole sealed bucket by its summary, or a point.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// The selected points of a sealed bucket, by their summary (the stored one when
    /// every point of the bucket is selected).
    Bucket {
        /// The series' measure name (shared by the pieces of one series).
        measure_name: Arc<str>,
        /// The series' dimensions (shared by the pieces of one series).
        dimensions: Arc<[DimensionPair<'static>]>,
        /// What the bucket's block holds.
        summary: BlockSummary,
    },
    /// A selected point outside such buckets.
    Point(Point<'static>),
}

/// What an aggregate over whole buckets needs, cheaply: each sealed bucket whose every
/// point is inside the selection's time window comes as its stored summary, a sealed
/// bucket that straddles the window's edge (or whose oldest points retention has
/// collected) as a summary of its selected points, and every row-form point as
/// itself: in key order, but for the straddling buckets, which come last.
///
/// Rows are read with the block cells left out and the summaries let through; the
/// straddling buckets are read again whole after the scan, in one read, and their
/// blocks decoded column by column.
/// Tables not yet [`TableMeta::summarized`] give points only.
pub fn scan_partials<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    visit: &mut dyn FnMut(Piece) -> ControlFlow<()>,
) -> Result<ScanStats> {
    if !(meta.layout.seal && meta.summarized) {
        return scan(store, meta, sel, &mut |p| visit(Piece::Point(p)));
    }
    let mut stats = ScanStats::default();
    let now_us = store.now_us();
    let horizon_us = retention_horizon_us(meta, now_us);
    let point_filter = filter(meta, sel);
    let row_form = row_form_cells();
    let row_filter = RowFilter::Interleave(vec![
        match point_filter.clone() {
            Some(f) => RowFilter::Chain(vec![row_form, f]),
            None => row_form,
        },
        RowFilter::ColumnRange {
            family: BLOCK_FAMILY.into(),
            start: Bound::Included(SUMMARY_QUALIFIER.to_vec()),
            end: Bound::Included(SUMMARY_QUALIFIER.to_vec()),
        },
    ]);
    let edges = EdgeBuckets {
        store,
        meta,
        sel,
        filter: point_filter.map(|f| let_blocks_through(meta, f)),
        now_us,
        horizon_us,
    };
    let mut straddling: Vec<Vec<u8>> = Vec::new();
    let mut series = LastSeries::default();
    scan_rows(store, meta, sel, Some(row_filter), &mut |row| {
        count_row(&mut stats, &row);
        let summary = row
            .cells
            .iter()
            .find(|c| &*c.family == BLOCK_FAMILY && *c.qualifier == *SUMMARY_QUALIFIER);
        let Some(cell) = summary else {
            let mut visit_point = |p| visit(Piece::Point(p));
            return visit_points(meta, sel, &row, now_us, &mut stats, &mut visit_point);
        };
        let summary = BlockSummary::decode(&cell.value)?;
        let whole = row.cells.iter().all(|c| &*c.family == BLOCK_FAMILY)
            && summary.first_ns >= sel.start_ns
            && summary.last_ns < sel.end_ns
            && cell_ts_us(summary.first_ns) >= horizon_us;
        if whole {
            let Some((measure_name, dimensions)) = series.of(meta, sel, &row.key)? else {
                return Ok(ControlFlow::Continue(()));
            };
            stats.points += summary.points;
            return Ok(visit(Piece::Bucket {
                measure_name,
                dimensions,
                summary,
            }));
        }
        // The bucket straddles the window: read the row again at the end, block
        // included, and summarize the points inside the window (they share the
        // bucket, so any group of whole buckets holds all of them). Every such row of
        // the scan is read in one read, not one read a row.
        straddling.push(row.key.to_vec());
        Ok(ControlFlow::Continue(()))
    })?;
    for keys in straddling.chunks(MAX_RANGES_PER_READ) {
        if edges.read(keys.to_vec(), &mut stats, visit)?.is_break() {
            break;
        }
    }
    Ok(stats)
}

/// The series of the last row [`scan_partials`] decoded, which the next rows (the
/// series' other buckets) share: a key's series is decoded once, not once a bucket.
#[derive(Default)]
struct LastSeries {
    /// The series prefix of the key, and its series if the selection selects it.
    last: Option<(Vec<u8>, SelectedSeries)>,
}

/// A selected series' measure name and dimensions, `None` if not selected.
type SelectedSeries = Option<(Arc<str>, Arc<[DimensionPair<'static>]>)>;

impl LastSeries {
    fn of(&mut self, meta: &TableMeta, sel: &Selection, key: &[u8]) -> Result<SelectedSeries> {
        let prefix = &key[..keys::series_len(key)?];
        match &self.last {
            Some((last, selected)) if last[..] == *prefix => Ok(selected.clone()),
            _ => {
                let selected = selected_series(meta, sel, key)?
                    .map(|(measure, dimensions)| (measure.into(), dimensions.into()));
                self.last = Some((prefix.to_vec(), selected.clone()));
                Ok(selected)
            }
        }
    }
}

/// How [`scan_partials`] reads the sealed buckets that straddle its window's edges.
struct EdgeBuckets<'a, S> {
    store: &'a S,
    meta: &'a TableMeta,
    sel: &'a Selection,
    /// The selection's filter, blocks let through.
    filter: Option<RowFilter>,
    now_us: i64,
    horizon_us: i64,
}

impl<S: WideColumnStore> EdgeBuckets<'_, S> {
    /// Reads the rows `keys` whole and [`EdgeBuckets::visit`]s each.
    fn read(
        &self,
        keys: Vec<Vec<u8>>,
        stats: &mut ScanStats,
        visit: &mut dyn FnMut(Piece) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>> {
        let req = ReadRequest {
            rows: RowSet {
                keys,
                ranges: Vec::new(),
            },
            filter: self.filter.clone(),
            ..ReadRequest::default()
        };
        read_each(self.store, self.meta, req, &mut |row: Row| {
            stats.cells += row.cells.len() as u64;
            self.visit(&row, stats, visit)
        })
    }

    /// Visits, for a row read whole, a summary of its block's points inside the
    /// window and its row-form points.
    fn visit(
        &self,
        row: &Row,
        stats: &mut ScanStats,
        visit: &mut dyn FnMut(Piece) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>> {
        let mut visit_chunk = |chunk| match chunk {
            Chunk::Point(p) => visit(Piece::Point(p)),
            Chunk::Block {
                measure_name,
                dimensions,
                columns,
                range,
            } => match BlockSummary::of_columns(&columns, range) {
                Some(summary) => visit(Piece::Bucket {
                    measure_name: measure_name.into(),
                    dimensions: dimensions.into(),
                    summary,
                }),
                None => ControlFlow::Continue(()),
            },
        };
        let (meta, sel) = (self.meta, self.sel);
        visit_chunks(
            meta,
            sel,
            row,
            self.now_us,
            self.horizon_us,
            stats,
            &mut visit_chunk,
        )
    }
}

/// The first row (the last, `reversed`) from `start` to `end` that passes `filter`.
fn edge_row<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
    filter: Option<RowFilter>,
    reversed: bool,
) -> Result<Option<Row>> {
    let range = RowRange {
        start: start.clone(),
        end: end.clone(),
    };
    // The cursor passes the end once the last series of a pinned range is done.
    if range.is_empty() {
        return Ok(None);
    }
    let probe = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: vec![range],
        },
        filter,
        limit: Some(1),
        reversed,
    };
    let mut first = None;
    store.read_rows(&meta.store_table, probe, &mut |row| {
        first = Some(row);
        ControlFlow::Break(())
    })?;
    Ok(first)
}

/// The series part of a row key (measure name and dimensions, through the `@`).
fn series_of(key: &[u8]) -> Result<Vec<u8>> {
    Ok(key[..keys::series_len(key)?].to_vec())
}

/// The newest selected point of every series, without a scan of every point: one
/// reversed read a series without a time window over keys whose time runs forwards
/// (`latest_backwards`), else two short reads a series (find the next series, read
/// its newest row in the window).
pub fn latest<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
) -> Result<(Vec<Point<'static>>, ScanStats)> {
    let mut out = Vec::new();
    let mut stats = ScanStats::default();
    let filter = filter(meta, sel);
    let windowed = meta.layout.seal && (sel.start_ns > 0 || sel.end_ns < i64::MAX);
    if meta.indexed {
        return latest_listed(store, meta, sel, filter, windowed);
    }
    let ranges = key_ranges(meta, sel).normalized();
    if !windowed && !meta.layout.reverse_time {
        return latest_backwards(store, meta, sel, ranges, filter);
    }
    let mut walk = Over {
        store,
        meta,
        ranges: &ranges,
        filter: filter.clone(),
        reversed: false,
        part: sel.part.as_ref(),
    }
    .walk();
    while let Some(Found { row, series, owned }) = walk.next()? {
        stats.rows += 1;
        let best = if !owned {
            None
        } else if windowed {
            // A block passes the filter whatever its times, so the newest row may
            // hold no point of the window: walk newest first to the first that does.
            newest_in_window(store, meta, sel, &series, &mut stats)?
        } else {
            newest_point(store, meta, sel, row, &series, filter.clone(), &mut stats)?
        };
        if let Some(p) = best {
            stats.points += 1;
            out.push(p);
        }
    }
    Ok((out, stats))
}

/// [`latest`] without a time window where time runs forwards in keys: the series
/// walked from the last, each found by the read of its newest row (the last row before
/// the series after it), so one read a series instead of a probe and a read. Points
/// come in key order.
fn latest_backwards<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    ranges: Vec<RowRange>,
    filter: Option<RowFilter>,
) -> Result<(Vec<Point<'static>>, ScanStats)> {
    let mut out = Vec::new();
    let mut stats = ScanStats::default();
    let now_us = store.now_us();
    let mut walk = Over {
        store,
        meta,
        ranges: &ranges,
        filter,
        reversed: true,
        part: sel.part.as_ref(),
    }
    .walk();
    while let Some(Found { row, owned, .. }) = walk.next()? {
        stats.rows += 1;
        if owned {
            stats.cells += row.cells.len() as u64;
            if let Some(p) = decode_newest(meta, sel, &row, now_us)? {
                stats.points += 1;
                out.push(p);
            }
        }
    }
    out.reverse();
    Ok((out, stats))
}

/// [`latest`] over a table with a series directory: the series from the directory,
/// then the newest row of each, all read at once ([`WideColumnStore::read_many`]).
/// A series whose newest row in a window holds no selected point (a block that passes
/// the filter whatever its times) is walked further alone, as [`latest`] walks it.
fn latest_listed<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    filter: Option<RowFilter>,
    windowed: bool,
) -> Result<(Vec<Point<'static>>, ScanStats)> {
    let mut stats = ScanStats::default();
    let series: Vec<Vec<u8>> = listed_series(store, meta, sel)?
        .into_iter()
        .enumerate()
        .filter(|(ordinal, _)| Part::owns(sel.part.as_ref(), *ordinal))
        .map(|(_, s)| s)
        .collect();
    let newest_first = |range: RowRange| ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: vec![range],
        },
        filter: filter.clone(),
        limit: Some(1),
        reversed: !meta.layout.reverse_time,
    };
    let reads: Vec<ReadRequest> = series
        .iter()
        .map(|s| {
            newest_first(if windowed {
                time_range(meta, s, sel)
            } else {
                RowRange::prefix(s)
            })
        })
        .collect();
    let now_us = store.now_us();
    let mut out = Vec::new();
    for (rows, s) in store
        .read_many(&meta.store_table, &reads)?
        .into_iter()
        .zip(&series)
    {
        let Some(row) = rows.into_iter().next() else {
            continue;
        };
        stats.rows += 1;
        stats.cells += row.cells.len() as u64;
        let best = match decode_newest(meta, sel, &row, now_us)? {
            None if windowed => newest_in_window(store, meta, sel, s, &mut stats)?,
            best => best,
        };
        if let Some(p) = best {
            stats.points += 1;
            out.push(p);
        }
    }
    Ok((out, stats))
}

/// The newest selected point of `row`, among a sealed block's newest point in the
/// window only (unless the selection keeps points by their attributes, which the
/// newest point may lack) and every row-form point.
fn decode_newest(
    meta: &TableMeta,
    sel: &Selection,
    row: &Row,
    now_us: i64,
) -> Result<Option<Point<'static>>> {
    let window = sel
        .attributes
        .is_none()
        .then_some((sel.start_ns, sel.end_ns));
    Ok(
        decode_row_within(meta, row, now_us, sel.project.as_deref(), window)?
            .into_iter()
            .filter_map(|p| keep(sel, p))
            .max_by_key(|p| p.time_ns),
    )
}

/// The newest selected point of one series: in its newest row (`first`, the series'
/// first row in key order, when time is reversed; else one more read).
fn newest_point<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    first: Row,
    series: &[u8],
    filter: Option<RowFilter>,
    stats: &mut ScanStats,
) -> Result<Option<Point<'static>>> {
    let newest = if meta.layout.reverse_time {
        Some(first)
    } else {
        let mut newest = None;
        let req = ReadRequest {
            rows: RowSet {
                keys: Vec::new(),
                ranges: vec![RowRange::prefix(series)],
            },
            filter,
            limit: Some(1),
            reversed: true,
        };
        store.read_rows(&meta.store_table, req, &mut |row| {
            newest = Some(row);
            ControlFlow::Break(())
        })?;
        stats.rows += 1;
        newest
    };
    let Some(row) = newest else {
        return Ok(None);
    };
    stats.cells += row.cells.len() as u64;
    decode_newest(meta, sel, &row, store.now_us())
}

/// The newest selected point of one series within the selection's time window, read
/// newest row first until a row holds one.
fn newest_in_window<S: WideColumnStore>(
    store: &S,
    meta: &TableMeta,
    sel: &Selection,
    series: &[u8],
    stats: &mut ScanStats,
) -> Result<Option<Point<'static>>> {
    let req = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: vec![time_range(meta, series, sel)],
        },
        filter: filter(meta, sel),
        limit: None,
        reversed: !meta.layout.reverse_time,
    };
    let now_us = store.now_us();
    let mut best = None;
    let mut failure = None;
    store.read_rows(&meta.store_table, req, &mut |row| {
        stats.rows += 1;
        stats.cells += row.cells.len() as u64;
        match decode_newest(meta, sel, &row, now_us) {
            Ok(newest) => {
                best = newest;
                if best.is_some() {
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(best),
    }
}
