//! The read path: row sets, pushdown plans, GC on read, filters, reversed scans.
//!
//! A ReadRows request, step by step:
//! 1. Resolve the table's schema (an `Arc` snapshot) and take a storage snapshot:
//!    the whole read sees one consistent point in time.
//! 2. Compile the filter and derive its [`ReadPlan`] (families, qualifier ranges,
//!    timestamp range, per-column limit).
//! 3. Normalize the row set into sorted, disjoint key ranges; each becomes one range
//!    of encoded keys (see [`crate::keys`]).
//! 4. Walk the keys. For each key, before its value is loaded, [`Selector::judge`]
//!    decides: keep, drop, or skip the rest of the column or family. GC rules are
//!    applied here (version index and age), then the plan. Long skips become seeks.
//! 5. At each row boundary, the kept cells go through the full filter; a row with
//!    cells left is yielded. Only one row is held in memory at a time.
//! 6. Reversed reads walk the keys backwards, gather one row, restore its forward
//!    cell order and judge it the same way.

use std::cell::RefCell;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use fjall::Readable;

use crate::catalog::{FamilyMeta, TableMeta};
use crate::db::{Engine, encoded_range};
use crate::error::Result;
use crate::filter::{CompiledFilter, RowFilter};
use crate::keys::{self, KeyParts};
use crate::plan::ReadPlan;
use crate::rowset::RowSet;
use crate::{Cell, Row};

/// Keys skipped one by one before a skip becomes a seek: a seek costs about as much
/// as reading a handful of keys.
const SKIPS_BEFORE_SEEK: u32 = 8;

/// A read request, as `ReadRowsRequest`.
#[derive(Debug, Clone, Default)]
pub struct ReadRequest {
    /// Rows to read (empty = all).
    pub rows: RowSet,
    /// Filter applied to every row.
    pub filter: Option<RowFilter>,
    /// Stop after this many rows (0 or `None` = no limit).
    pub limit: Option<u64>,
    /// Return rows in descending key order.
    pub reversed: bool,
}

/// Counters of one read, for request stats and pushdown benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Cell keys examined in storage.
    pub cells_seen: u64,
    /// Cell values loaded (kept by GC and the plan).
    pub cells_loaded: u64,
    /// Cells returned after the filter.
    pub cells_returned: u64,
    /// Rows returned.
    pub rows_returned: u64,
    /// Seeks made to skip columns or families.
    pub seeks: u64,
}

/// What to do with one stored cell, decided from its key alone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Keep,
    /// Drop this cell and seek straight to the key: what lies before it is out of
    /// the plan (another family, or qualifiers before the next selected range).
    Jump(Vec<u8>),
    /// Drop this cell; `Some(key)` says everything before `key` can be dropped too.
    Skip(Option<Vec<u8>>),
}

/// Per-row state of GC and plan evaluation, fed keys in forward order.
struct Selector<'a> {
    meta: &'a TableMeta,
    plan: &'a ReadPlan,
    now_us: i64,
    column: Vec<u8>,
    family: Option<&'a FamilyMeta>,
    version_index: usize,
    kept_in_column: u32,
    kept_in_row: u32,
}

impl<'a> Selector<'a> {
    fn new(meta: &'a TableMeta, plan: &'a ReadPlan, now_us: i64) -> Self {
        Self {
            meta,
            plan,
            now_us,
            column: Vec::new(),
            family: None,
            version_index: 0,
            kept_in_column: 0,
            kept_in_row: 0,
        }
    }

    fn judge(&mut self, key: &[u8], p: &KeyParts) -> Verdict {
        let column = p.column(key);
        if column != self.column.as_slice() {
            self.column.clear();
            self.column.extend_from_slice(column);
            self.version_index = 0;
            self.kept_in_column = 0;
            self.family = self.meta.family_by_id(p.family_id);
        }
        let row_prefix = &key[..p.row_end];
        let next_family = || {
            Some(keys::family_prefix(
                row_prefix,
                p.family_id.saturating_add(1),
            ))
        };
        let Some(family) = self.family else {
            return next_family().map_or(Verdict::Skip(None), Verdict::Jump); // dropped family, awaiting purge
        };
        let Some(ranges) = self.plan.family_ranges(&family.name) else {
            return next_family().map_or(Verdict::Skip(None), Verdict::Jump);
        };
        let idx = self.version_index;
        self.version_index += 1;
        let column_end = || {
            let mut k = column.to_vec();
            if let Some(last) = k.last_mut() {
                *last = 0x02;
            }
            Some(k)
        };
        if let Some(ranges) = ranges {
            let q = p.qualifier(key);
            if !ranges.iter().any(|r| r.contains(&q)) {
                // Jump to the next range that starts after this qualifier, or past
                // the family when none does.
                let next = ranges.iter().find_map(|r| match &r.start {
                    Bound::Included(s) if s.as_slice() > q.as_slice() => {
                        Some(keys::column_prefix(row_prefix, p.family_id, s))
                    }
                    Bound::Excluded(s) if s.as_slice() >= q.as_slice() => {
                        Some(keys::column_end(row_prefix, p.family_id, s))
                    }
                    _ => None,
                });
                return next
                    .or_else(next_family)
                    .map_or(Verdict::Skip(None), Verdict::Jump);
            }
        }
        let ts = p.timestamp_us;
        if family.spec.gc_rule.collects(idx, ts, self.now_us) {
            return Verdict::Skip(None);
        }
        if !self.plan.ts_in_range(ts) {
            return Verdict::Skip(None);
        }
        if self
            .plan
            .cells_per_column
            .is_some_and(|n| self.kept_in_column >= n)
        {
            return Verdict::Skip(column_end());
        }
        if self
            .plan
            .cells_per_row
            .is_some_and(|n| self.kept_in_row >= n)
        {
            // Past the row's limit: seek over the rest of the row.
            return Verdict::Jump(keys::family_prefix(row_prefix, u32::MAX));
        }
        self.kept_in_column += 1;
        self.kept_in_row += 1;
        Verdict::Keep
    }

    fn cell(&self, key: &[u8], p: &KeyParts, value: Vec<u8>) -> Option<Cell> {
        let f = self.meta.family_by_id(p.family_id)?;
        Some(Cell {
            family: f.name.clone(),
            qualifier: p.qualifier(key).into(),
            timestamp_us: p.timestamp_us,
            value,
            labels: vec![],
        })
    }
}

/// The rows of a read, one at a time. Holds a storage snapshot until dropped.
pub struct RowStream {
    engine: Engine,
    meta: Arc<TableMeta>,
    snapshot: fjall::Snapshot,
    filter: Option<CompiledFilter>,
    plan: ReadPlan,
    now_us: i64,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    iter: Option<fjall::Iter>,
    /// End of the range being walked (forward) or its start (reversed).
    bound: Vec<u8>,
    reversed: bool,
    remaining: Option<u64>,
    /// A cell already pulled from storage that belongs to the next row.
    pending: Option<(fjall::UserKey, fjall::UserValue)>,
    stats: ReadStats,
    done: bool,
    /// The table's access counters ([`crate::access`]).
    access: Option<Arc<crate::access::TableAccess>>,
}

impl RowStream {
    /// Counters so far.
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    fn open_next_range(&mut self) -> bool {
        let next = if self.reversed {
            self.ranges.pop()
        } else if self.ranges.is_empty() {
            None
        } else {
            Some(self.ranges.remove(0))
        };
        let Some((lo, hi)) = next else { return false };
        self.iter = Some(
            self.snapshot
                .range(&self.engine.inner.cells, lo.clone()..hi.clone()),
        );
        self.bound = if self.reversed { lo } else { hi };
        true
    }

    /// The next row of the current range (forward), with pushdown and seeks.
    fn next_forward(&mut self) -> Result<Option<Row>> {
        loop {
            if self.iter.is_none() && self.pending.is_none() && !self.open_next_range() {
                return Ok(None);
            }
            let mut row_prefix: Option<Vec<u8>> = None;
            let mut kept: Vec<Cell> = Vec::new();
            let mut skipped_in_a_row = 0u32;
            let selector = RefCell::new(Selector::new(&self.meta, &self.plan, self.now_us));
            if let Some((k, v)) = self.pending.take() {
                self.stats.cells_seen += 1;
                let p = KeyParts::parse(&k)?;
                row_prefix = Some(k[..p.row_end].to_vec());
                let verdict = selector.borrow_mut().judge(&k, &p);
                if verdict == Verdict::Keep {
                    self.stats.cells_loaded += 1;
                    kept.extend(selector.borrow().cell(&k, &p, v.to_vec()));
                }
            }
            while let Some(iter) = self.iter.as_mut() {
                let Some(guard) = iter.next() else {
                    self.iter = None;
                    break;
                };
                // Judge from the key before loading the value. The first key of the
                // next row is loaded whole and kept for the next call.
                let verdict = RefCell::new(Verdict::Skip(None));
                let parts = RefCell::new(None);
                let boundary = RefCell::new(false);
                let (key, value) = guard.into_inner_if(|k| {
                    let Ok(p) = KeyParts::parse(k) else {
                        return false;
                    };
                    if row_prefix
                        .as_deref()
                        .is_some_and(|rp| rp != &k[..p.row_end])
                    {
                        *boundary.borrow_mut() = true;
                        return true;
                    }
                    let v = selector.borrow_mut().judge(k, &p);
                    let keep = v == Verdict::Keep;
                    *verdict.borrow_mut() = v;
                    *parts.borrow_mut() = Some(p);
                    keep
                })?;
                if boundary.into_inner() {
                    if let Some(v) = value {
                        self.pending = Some((key, v));
                    }
                    break;
                }
                self.stats.cells_seen += 1;
                let p = match parts.into_inner() {
                    Some(p) => p,
                    None => KeyParts::parse(&key)?,
                };
                if row_prefix.is_none() {
                    row_prefix = Some(key[..p.row_end].to_vec());
                }
                match (verdict.into_inner(), value) {
                    (Verdict::Keep, Some(v)) => {
                        skipped_in_a_row = 0;
                        self.stats.cells_loaded += 1;
                        kept.extend(selector.borrow().cell(&key, &p, v.to_vec()));
                    }
                    (Verdict::Jump(target), _) => {
                        if target.as_slice() < self.bound.as_slice() {
                            self.stats.seeks += 1;
                            self.iter = Some(
                                self.snapshot
                                    .range(&self.engine.inner.cells, target..self.bound.clone()),
                            );
                        } else {
                            self.iter = None;
                        }
                    }
                    (Verdict::Skip(Some(target)), _) => {
                        skipped_in_a_row += 1;
                        if skipped_in_a_row >= SKIPS_BEFORE_SEEK
                            && target.as_slice() < self.bound.as_slice()
                        {
                            self.stats.seeks += 1;
                            skipped_in_a_row = 0;
                            self.iter = Some(
                                self.snapshot
                                    .range(&self.engine.inner.cells, target..self.bound.clone()),
                            );
                        }
                    }
                    _ => {}
                }
            }
            let Some(rp) = row_prefix else { continue };
            if let Some(row) = self.finish_row(&rp, kept)? {
                return Ok(Some(row));
            }
        }
    }

    /// The next row walking backwards: gather one row's keys, then judge them forwards.
    fn next_reversed(&mut self) -> Result<Option<Row>> {
        loop {
            if self.iter.is_none() && self.pending.is_none() && !self.open_next_range() {
                return Ok(None);
            }
            let mut gathered: Vec<(fjall::UserKey, fjall::UserValue)> = Vec::new();
            let mut row_end = 0usize;
            if let Some(first) = self.pending.take() {
                row_end = KeyParts::parse(&first.0)?.row_end;
                gathered.push(first);
            }
            while let Some(guard) = self.iter.as_mut().and_then(DoubleEndedIterator::next_back) {
                let (k, v) = guard.into_inner()?;
                let p = KeyParts::parse(&k)?;
                if let Some((first, _)) = gathered.first()
                    && first[..row_end] != k[..p.row_end]
                {
                    self.pending = Some((k, v));
                    break;
                }
                row_end = p.row_end;
                gathered.push((k, v));
            }
            if self.pending.is_none() {
                self.iter = None;
            }
            let Some((first, _)) = gathered.first() else {
                continue;
            };
            let rp = first[..row_end].to_vec();
            let mut selector = Selector::new(&self.meta, &self.plan, self.now_us);
            let mut kept = Vec::new();
            for (k, v) in gathered.into_iter().rev() {
                self.stats.cells_seen += 1;
                let p = KeyParts::parse(&k)?;
                if selector.judge(&k, &p) == Verdict::Keep {
                    self.stats.cells_loaded += 1;
                    if let Some(c) = selector.cell(&k, &p, v.to_vec()) {
                        kept.push(c);
                    }
                }
            }
            if let Some(row) = self.finish_row(&rp, kept)? {
                return Ok(Some(row));
            }
        }
    }

    /// Counts a row that was walked but returns no cell (the key is decoded only
    /// when counting by key range is on).
    fn count_skipped(&self, row_prefix: &[u8]) {
        if let Some(a) = &self.access {
            a.add(&keys::row_of_prefix(row_prefix), [0, 0, 0, 0, 1]);
        }
    }

    fn finish_row(&mut self, row_prefix: &[u8], cells: Vec<Cell>) -> Result<Option<Row>> {
        let totals = &self.engine.inner.access.totals;
        totals.rows_scanned.fetch_add(1, Relaxed);
        if cells.is_empty() {
            self.count_skipped(row_prefix);
            return Ok(None);
        }
        let key = keys::row_of_prefix(row_prefix);
        let cells = match &self.filter {
            Some(f) => f.apply(&key, cells, &self.engine.inner.rng),
            None => cells,
        };
        if cells.is_empty() {
            self.count_skipped(row_prefix);
            return Ok(None);
        }
        let row = Row { key, cells };
        let bytes = row.bytes();
        totals.rows_read.fetch_add(1, Relaxed);
        totals.cells_read.fetch_add(row.cells.len() as u64, Relaxed);
        totals.bytes_read.fetch_add(bytes, Relaxed);
        if let Some(a) = &self.access {
            a.add(&row.key, [0, 1, 0, bytes, 1]);
        }
        self.stats.rows_returned += 1;
        self.stats.cells_returned += row.cells.len() as u64;
        Ok(Some(row))
    }
}

impl Iterator for RowStream {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.remaining == Some(0) {
            return None;
        }
        let r = if self.reversed {
            self.next_reversed()
        } else {
            self.next_forward()
        };
        match r {
            Ok(Some(row)) => {
                if let Some(n) = self.remaining.as_mut() {
                    *n -= 1;
                }
                Some(Ok(row))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Engine {
    /// Starts a read; rows stream from the returned iterator.
    pub fn read_rows(&self, instance: &str, table: &str, req: ReadRequest) -> Result<RowStream> {
        req.rows.validate()?;
        for k in &req.rows.keys {
            crate::validate::row_key(k)?;
        }
        let meta = self.table(instance, table)?;
        if let Some(f) = &req.filter {
            crate::validate::filter_timestamps(&meta, f)?;
        }
        let filter = req
            .filter
            .as_ref()
            .map(CompiledFilter::compile)
            .transpose()?;
        Ok(self.stream(meta, &req.rows, filter, req.limit, req.reversed))
    }

    fn stream(
        &self,
        meta: Arc<TableMeta>,
        rows: &RowSet,
        filter: Option<CompiledFilter>,
        limit: Option<u64>,
        reversed: bool,
    ) -> RowStream {
        let names: Vec<&str> = meta.families.iter().map(|f| &*f.name).collect();
        let plan = filter.as_ref().map(|f| f.plan(&names)).unwrap_or_default();
        let ranges = rows
            .normalized()
            .iter()
            .map(|r| encoded_range(meta.id, r))
            .collect();
        RowStream {
            access: self.inner.access.counter(self, meta.id),
            engine: self.clone(),
            snapshot: self.inner.db.snapshot(),
            now_us: self.now_us(),
            meta,
            filter,
            plan,
            ranges,
            iter: None,
            bound: Vec::new(),
            reversed,
            remaining: limit.filter(|&n| n > 0),
            pending: None,
            stats: ReadStats::default(),
            done: false,
        }
    }

    /// Reads one row (GC applied, filter applied); `None` if it has no cells.
    pub fn read_row(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        filter: Option<&RowFilter>,
    ) -> Result<Option<Row>> {
        crate::validate::row_key(key)?;
        let meta = self.table(instance, table)?;
        if let Some(f) = filter {
            crate::validate::filter_timestamps(&meta, f)?;
        }
        let filter = filter.map(CompiledFilter::compile).transpose()?;
        self.stream(meta, &RowSet::key(key.to_vec()), filter, None, false)
            .next()
            .transpose()
    }

    /// Reads one row of a table whose schema the caller holds (under a row lock).
    pub(crate) fn read_row_locked(
        &self,
        meta: &Arc<TableMeta>,
        key: &[u8],
        filter: Option<&CompiledFilter>,
    ) -> Result<Option<Row>> {
        let mut s = self.stream(
            Arc::clone(meta),
            &RowSet::key(key.to_vec()),
            None,
            None,
            false,
        );
        let Some(row) = s.next().transpose()? else {
            return Ok(None);
        };
        Ok(match filter {
            None => Some(row),
            Some(f) => {
                let cells = f.apply(&row.key, row.cells, &self.inner.rng);
                (!cells.is_empty()).then(|| Row {
                    key: key.to_vec(),
                    cells,
                })
            }
        })
    }
}
