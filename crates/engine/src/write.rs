//! The write path: row-atomic mutations, MutateRows batches, ReadModifyWrite and
//! CheckAndMutate.
//!
//! One request, step by step:
//! 1. Resolve the table under the catalog read lock (held until commit, so no
//!    family or table can be dropped underneath).
//! 2. Validate every mutation of every row ([`crate::validate`]); a row that fails is
//!    rejected whole and nothing of it is written.
//! 3. Lock the rows (striped locks, in stripe order) and take a snapshot.
//! 4. Apply the mutations in order into an overlay of pending key changes, reading
//!    the snapshot where a mutation depends on what is stored (deletes, aggregates).
//!    Writes see what reads see: an aggregate cell that the family's GC rule collects
//!    counts as absent even before the sweep removes it, so AddToCell/MergeToCell
//!    start from nothing there.
//! 5. Check the stored row's size ([`crate::rowsize`]): a row that would pass 256 MiB
//!    is rejected whole. An in-memory bound decides; the row is measured only near a
//!    threshold.
//! 6. Turn the overlay into one fjall batch: one journal record, one sequence
//!    number, so readers see all of a row's change or none of it.
//! 7. Unlock, then wait for the fsync policy (group commit) before acknowledging. The
//!    `*_unsynced` variants leave that wait to the caller ([`Unsynced`]), so one sync
//!    can cover many writes.
//! 8. Report the recommended limits the write passed ([`crate::warning`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use fjall::Readable;

use crate::aggregate;
use crate::catalog::TableMeta;
use crate::db::Engine;
use crate::error::{Error, Result};
use crate::filter::{CompiledFilter, RowFilter};
use crate::keys;
use crate::limits::{MAX_READ_MODIFY_WRITE_RULES, MICROS_PER_MILLI, RECOMMENDED_VALUE_BYTES};
use crate::mutation::{Mutation, ReadModifyWriteOp, ReadModifyWriteRule, SERVER_TIME};
use crate::rowsize;
use crate::schema::{Granularity, ValueType};
use crate::validate;
use crate::warning::Warning;
use crate::{Cell, Row};

/// One entry of a MutateRows batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMutations {
    /// Row key.
    pub key: Vec<u8>,
    /// Mutations applied atomically, in order.
    pub mutations: Vec<Mutation>,
}

/// Pending changes by full cell key: `Some(value)` writes, `None` deletes.
type Overlay = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Applies mutations for one batch against one snapshot.
struct Applier<'a> {
    engine: &'a Engine,
    meta: &'a TableMeta,
    snapshot: fjall::Snapshot,
    /// Changes of entries already applied in this batch.
    batch: Overlay,
    /// Server time for `-1` timestamps: the clock, truncated to the table's granularity.
    now_us: i64,
    /// The clock as GC rules judge cells (reads use the same untruncated time).
    gc_now_us: i64,
    /// Recommended limits that the rows applied so far pass, reported after commit.
    warnings: Vec<Warning>,
    /// The rows applied and their mutations (server timestamps resolved), kept when the
    /// table has a change stream ([`crate::changes`]).
    changes: Option<Vec<(Vec<u8>, Vec<Mutation>)>>,
    /// The table's access counters ([`crate::access`]).
    access: Option<Arc<crate::access::TableAccess>>,
    /// The oldest timestamp of a cell the batch writes (`i64::MAX`: none), reported to
    /// [`crate::oldest`] once committed.
    oldest_us: i64,
}

impl<'a> Applier<'a> {
    fn new(engine: &'a Engine, meta: &'a TableMeta) -> Self {
        let now = engine.now_us();
        let now_us = match meta.granularity {
            Granularity::Millis => now - now.rem_euclid(MICROS_PER_MILLI),
            Granularity::Micros => now,
        };
        Self {
            engine,
            meta,
            snapshot: engine.inner.db.snapshot(),
            batch: Overlay::new(),
            now_us,
            gc_now_us: now,
            warnings: Vec::new(),
            changes: meta.change_retention_us.map(|_| Vec::new()),
            access: engine.inner.access.counter(engine, meta.id),
            oldest_us: i64::MAX,
        }
    }

    /// `m` as a change stream records it: the server's time in place of [`SERVER_TIME`].
    fn resolved(&self, m: &Mutation) -> Mutation {
        let mut m = m.clone();
        if let Mutation::SetCell { timestamp_us, .. }
        | Mutation::AddToCell { timestamp_us, .. }
        | Mutation::MergeToCell { timestamp_us, .. } = &mut m
        {
            *timestamp_us = self.ts(*timestamp_us);
        }
        m
    }

    fn ts(&self, ts_us: i64) -> i64 {
        if ts_us == SERVER_TIME {
            self.now_us
        } else {
            ts_us
        }
    }

    /// Keys currently present in `[lo, hi)`, as this batch sees them.
    fn present_keys(&self, entry: &Overlay, lo: &[u8], hi: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut keys: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        for g in self.snapshot.range(&self.engine.inner.cells, lo..hi) {
            keys.insert(g.key()?.to_vec(), true);
        }
        let range = (Bound::Included(lo.to_vec()), Bound::Excluded(hi.to_vec()));
        for layer in [&self.batch, entry] {
            for (k, v) in layer.range::<Vec<u8>, _>(range.clone()) {
                keys.insert(k.clone(), v.is_some());
            }
        }
        Ok(keys
            .into_iter()
            .filter(|(_, live)| *live)
            .map(|(k, _)| k)
            .collect())
    }

    /// The value at exactly `key`, as this batch sees it.
    fn value_at(&self, entry: &Overlay, key: &[u8]) -> Result<Option<Vec<u8>>> {
        for layer in [entry, &self.batch] {
            if let Some(v) = layer.get(key) {
                return Ok(v.clone());
            }
        }
        Ok(self
            .snapshot
            .get(&self.engine.inner.cells, key)?
            .map(|v| v.to_vec()))
    }

    /// Applies one row's mutations into a fresh entry overlay; merges it into the
    /// batch only if every mutation succeeded.
    fn apply_row(&mut self, key: &[u8], muts: &[Mutation]) -> Result<()> {
        let rp = keys::row_prefix(self.meta.id, key);
        let mut entry = Overlay::new();
        let mut stored = 0u64;
        for m in muts {
            stored += self.apply_one(&rp, key, m, &mut entry)?;
        }
        self.check_row_size(&rp, key, &entry, stored)?;
        for v in entry.values().flatten() {
            if v.len() > RECOMMENDED_VALUE_BYTES {
                self.warnings.push(Warning::LargeValue {
                    table: self.meta.resource_name(),
                    row: key.to_vec(),
                    bytes: v.len(),
                });
            }
        }
        self.batch.extend(entry);
        for m in muts {
            if let Mutation::SetCell { timestamp_us, .. }
            | Mutation::AddToCell { timestamp_us, .. }
            | Mutation::MergeToCell { timestamp_us, .. } = m
            {
                self.oldest_us = self.oldest_us.min(self.ts(*timestamp_us));
            }
        }
        self.count(key, muts.len() as u64, stored);
        if self.changes.is_some() {
            let resolved = muts.iter().map(|m| self.resolved(m)).collect();
            if let Some(changes) = &mut self.changes {
                changes.push((key.to_vec(), resolved));
            }
        }
        Ok(())
    }

    /// Counts one row written: engine-wide and by key range.
    fn count(&self, key: &[u8], cells: u64, stored: u64) {
        let totals = &self.engine.inner.access.totals;
        let bytes = key.len() as u64 + stored;
        totals.rows_written.fetch_add(1, Relaxed);
        totals.cells_written.fetch_add(cells, Relaxed);
        totals.bytes_written.fetch_add(bytes, Relaxed);
        if let Some(a) = &self.access {
            a.add(key, [1, 0, bytes, 0, 0]);
        }
    }

    /// Refuses the row's entry if it would take the stored row past
    /// [`crate::limits::MAX_ROW_BYTES`]; reports a crossing of the recommended size.
    /// Steps in [`rowsize`].
    /// `added`: the qualifier and value bytes the row's mutations store (an overwrite
    /// within the request counts twice, which only loosens the bound).
    fn check_row_size(&mut self, rp: &[u8], key: &[u8], entry: &Overlay, added: u64) -> Result<()> {
        if added == 0 {
            return Ok(());
        }
        let sizes = &self.engine.inner.row_sizes;
        let rowsize::Check::Measure(slots) = sizes.check(rp, added) else {
            return Ok(());
        };
        let size = self.measure_row(rp, key, entry)?;
        if size > rowsize::MAX_ROW {
            return Err(Error::limit(
                "row size in bytes after this write",
                size,
                rowsize::MAX_ROW,
            ));
        }
        if sizes.measured(rp, slots, added, size) {
            self.warnings.push(Warning::LargeRow {
                table: self.meta.resource_name(),
                row: key.to_vec(),
                bytes: size,
            });
        }
        Ok(())
    }

    /// The row's exact size as this batch and `entry` would leave it (see [`rowsize`]).
    fn measure_row(&self, rp: &[u8], key: &[u8], entry: &Overlay) -> Result<u64> {
        let end = keys::row_end(self.meta.id, key);
        let range = (Bound::Included(rp.to_vec()), Bound::Excluded(end.clone()));
        // Pending changes decide over stored cells: the entry's over the batch's.
        let mut pending: BTreeMap<&[u8], Option<usize>> = BTreeMap::new();
        for layer in [&self.batch, entry] {
            for (k, v) in layer.range::<Vec<u8>, _>(range.clone()) {
                pending.insert(k, v.as_ref().map(Vec::len));
            }
        }
        let mut cells = 0u64;
        let mut any = false;
        rowsize::for_each_cell(
            &self.snapshot,
            &self.engine.inner.cells,
            rp,
            Some(&end),
            |k, p, size| {
                if !pending.contains_key(k) && self.meta.family_by_id(p.family_id).is_some() {
                    cells += p.qualifier_len(k) as u64 + size;
                    any = true;
                }
                Ok(true)
            },
        )?;
        for (k, v) in pending {
            if let Some(len) = v {
                cells += cell_bytes(k, len)?;
                any = true;
            }
        }
        Ok(if any { key.len() as u64 + cells } else { 0 })
    }

    fn delete_range(
        &self,
        entry: &mut Overlay,
        lo: &[u8],
        hi: &[u8],
        keep: impl Fn(&[u8]) -> bool,
    ) -> Result<()> {
        for k in self.present_keys(entry, lo, hi)? {
            if !keep(&k) {
                entry.insert(k, None);
            }
        }
        Ok(())
    }

    /// Applies one mutation into the entry; returns the qualifier and value bytes it
    /// stores (0 for deletes), for the row size check.
    fn apply_one(&self, rp: &[u8], row: &[u8], m: &Mutation, entry: &mut Overlay) -> Result<u64> {
        let fid = |name: &str| {
            self.meta
                .family(name)
                .map(|f| f.id)
                .ok_or_else(|| Error::no_family(name))
        };
        match m {
            Mutation::SetCell {
                family,
                qualifier,
                timestamp_us,
                value,
            } => {
                let k = keys::cell_key(rp, fid(family)?, qualifier, self.ts(*timestamp_us));
                entry.insert(k, Some(value.clone()));
                return Ok((qualifier.len() + value.len()) as u64);
            }
            Mutation::DeleteFromColumn {
                family,
                qualifier,
                start_us,
                end_us,
            } => {
                let f = fid(family)?;
                // A range of one timestamp unit (a microsecond; a millisecond on a
                // MILLIS table, whose cells all sit on whole milliseconds) names one
                // cell: its tombstone needs no look at what is stored (a seal pass
                // deletes its row-form points this way).
                let unit = match self.meta.granularity {
                    Granularity::Millis => MICROS_PER_MILLI,
                    Granularity::Micros => 1,
                };
                if start_us % unit == 0 && *end_us == start_us.checked_add(unit) {
                    entry.insert(keys::cell_key(rp, f, qualifier, *start_us), None);
                    return Ok(0);
                }
                // Newest first: the range [start, end) is keys from ts_desc(end-1) to ts_desc(start).
                let lo = match end_us {
                    Some(e) if *e > i64::MIN => keys::cell_key(rp, f, qualifier, e - 1),
                    _ => keys::column_prefix(rp, f, qualifier),
                };
                let mut hi = keys::cell_key(rp, f, qualifier, *start_us);
                hi.push(0);
                if end_us.is_some_and(|e| e <= *start_us) {
                    return Ok(0);
                }
                self.delete_range(entry, &lo, &hi, |_| false)?;
            }
            Mutation::DeleteFromFamily { family } => {
                let fp = keys::family_prefix(rp, fid(family)?);
                let hi = keys::family_prefix(rp, fid(family)? + 1);
                self.delete_range(entry, &fp, &hi, |_| false)?;
            }
            Mutation::DeleteFromRow => {
                let hi = keys::row_end(self.meta.id, row);
                self.delete_range(entry, rp, &hi, |_| false)?;
            }
            Mutation::AddToCell {
                family,
                qualifier,
                timestamp_us,
                input,
            }
            | Mutation::MergeToCell {
                family,
                qualifier,
                timestamp_us,
                input,
            } => {
                let fam = self
                    .meta
                    .family(family)
                    .ok_or_else(|| Error::no_family(family))?;
                let ValueType::Aggregate(kind) = fam.spec.value_type else {
                    return Err(Error::Invalid(format!(
                        "family {family:?} is not an aggregate family"
                    )));
                };
                let ts = self.ts(*timestamp_us);
                let k = keys::cell_key(rp, fam.id, qualifier, ts);
                let mut existing = self.value_at(entry, &k)?;
                // A cell the family's GC rule collects is gone for reads, swept or not, so
                // the fold starts from nothing rather than from its hidden value.
                let rule = &fam.spec.gc_rule;
                if existing.is_some() && !rule.is_keep_all() {
                    let newer = if rule.counts_versions() {
                        let column = keys::column_prefix(rp, fam.id, qualifier);
                        self.present_keys(entry, &column, &k)?.len()
                    } else {
                        0
                    };
                    if rule.collects(newer, ts, self.gc_now_us) {
                        existing = None;
                    }
                }
                let merge = matches!(m, Mutation::MergeToCell { .. });
                let v = aggregate::fold(kind, family, merge, existing.as_deref(), input)?;
                let bytes = (qualifier.len() + v.len()) as u64;
                entry.insert(k, Some(v));
                return Ok(bytes);
            }
        }
        Ok(0)
    }

    /// Writes the batch overlay as one fjall batch.
    fn commit(self) -> Result<Committed> {
        let changes = self.changes.unwrap_or_default();
        let written = !self.batch.is_empty() || !changes.is_empty();
        let mut reservation = None;
        if written {
            let inner = &self.engine.inner;
            inner.space.check()?;
            let mut b = inner.db.batch();
            for (k, v) in self.batch {
                match v {
                    Some(v) => b.insert(&inner.cells, k, v),
                    None => b.remove(&inner.cells, k),
                }
            }
            // In flight until the write is durable (the low watermark waits for it).
            reservation = if changes.is_empty() {
                None
            } else {
                let r = inner.change_clock.reserve(self.gc_now_us, changes.len())?;
                for (i, (row, muts)) in changes.iter().enumerate() {
                    b.insert(
                        &inner.changes,
                        crate::changes::change_key(self.meta.id, r.first + i as i64),
                        crate::changes::encode(row, false, muts),
                    );
                }
                Some(r)
            };
            b.commit()?;
            if self.oldest_us != i64::MAX {
                inner.oldest.written(self.meta.id, self.oldest_us);
            }
        }
        Ok(Committed {
            written,
            warnings: self.warnings,
            _changes: reservation,
        })
    }
}

/// Bytes one cell adds to its row's size: its qualifier and its value.
fn cell_bytes(key: &[u8], value_len: usize) -> Result<u64> {
    let p = keys::KeyParts::parse(key)?;
    Ok((p.qualifier_len(key) + value_len) as u64)
}

/// What is left of a commit once the locks are released: waiting for durability, then
/// reporting the warnings ([`Unsynced`]).
struct Committed {
    written: bool,
    warnings: Vec<Warning>,
    /// The change-stream timestamps of the write, in flight until it is durable.
    _changes: Option<crate::changes::Reservation>,
}

/// The result of a write that is in the journal (visible to readers) but not yet
/// durable by the fsync policy. It must not be acknowledged before
/// [`Unsynced::sync`], or [`Engine::sync`] called after it, returns; its warnings are
/// reported when the result is taken.
#[must_use = "a write is not durable until it is synced"]
pub struct Unsynced<T> {
    value: T,
    committed: Committed,
}

impl<T> std::fmt::Debug for Unsynced<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsynced")
            .field("wrote", &self.committed.written)
            .finish_non_exhaustive()
    }
}

impl<T> Unsynced<T> {
    fn new(value: T, committed: Committed) -> Self {
        Self { value, committed }
    }

    /// Whether the call wrote anything (a write that changed nothing needs no sync).
    pub fn wrote(&self) -> bool {
        self.committed.written
    }

    /// Waits for the fsync policy (group commit), reports the warnings, gives the result.
    pub fn sync(self, engine: &Engine) -> Result<T> {
        if self.committed.written {
            engine.sync()?;
        }
        Ok(self.synced_by_caller(engine))
    }

    /// The result, for a caller that has called [`Engine::sync`] since the write
    /// (reports the warnings).
    pub fn synced_by_caller(self, engine: &Engine) -> T {
        engine.warn(&self.committed.warnings);
        self.value
    }
}

impl Engine {
    /// Applies `mutations` to one row atomically.
    pub fn mutate_row(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        mutations: &[Mutation],
    ) -> Result<()> {
        self.mutate_row_unsynced(instance, table, key, mutations)?
            .sync(self)
    }

    /// [`Engine::mutate_row`] without waiting for the fsync policy.
    pub fn mutate_row_unsynced(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        mutations: &[Mutation],
    ) -> Result<Unsynced<()>> {
        let cat = self.catalog()?;
        let meta = cat.get(instance, table)?;
        validate::mutations(meta, key, mutations)?;
        let committed = {
            let _row = self.inner.locks.lock(meta.id, key);
            let mut a = Applier::new(self, meta);
            a.apply_row(key, mutations)?;
            a.commit()?
        };
        drop(cat);
        Ok(Unsynced::new((), committed))
    }

    /// Applies a MutateRows batch: each entry is atomic on its own; the result has
    /// one status per entry. The whole batch shares one journal write and one fsync.
    /// The outer error is for the request as a whole (missing table, too many mutations).
    pub fn mutate_rows(
        &self,
        instance: &str,
        table: &str,
        entries: &[RowMutations],
    ) -> Result<Vec<Result<()>>> {
        self.mutate_rows_unsynced(instance, table, entries)?
            .sync(self)
    }

    /// [`Engine::mutate_rows`] without waiting for the fsync policy.
    pub fn mutate_rows_unsynced(
        &self,
        instance: &str,
        table: &str,
        entries: &[RowMutations],
    ) -> Result<Unsynced<Vec<Result<()>>>> {
        let total: usize = entries.iter().map(|e| e.mutations.len()).sum();
        if total > crate::limits::MAX_MUTATIONS_PER_REQUEST {
            return Err(Error::limit(
                "mutations in one request",
                total,
                crate::limits::MAX_MUTATIONS_PER_REQUEST,
            ));
        }
        if entries.is_empty() {
            return Err(Error::Invalid("MutateRows needs at least one entry".into()));
        }
        let cat = self.catalog()?;
        let meta = cat.get(instance, table)?;
        let mut statuses: Vec<Result<()>> = entries
            .iter()
            .map(|e| validate::mutations(meta, &e.key, &e.mutations).map(|_| ()))
            .collect();
        let committed = {
            let _rows = self.inner.locks.lock_many(
                meta.id,
                entries
                    .iter()
                    .zip(&statuses)
                    .filter(|(_, s)| s.is_ok())
                    .map(|(e, _)| e.key.as_slice()),
            );
            let mut a = Applier::new(self, meta);
            for (e, s) in entries.iter().zip(statuses.iter_mut()) {
                if s.is_ok() {
                    *s = a.apply_row(&e.key, &e.mutations);
                }
            }
            a.commit()?
        };
        drop(cat);
        Ok(Unsynced::new(statuses, committed))
    }

    /// Reads the row with `predicate` (on the whole row, GC applied); applies
    /// `on_match` if it outputs any cell, else `on_miss`; atomically. With no
    /// predicate, the row matches if it has any cell. Returns whether it matched.
    pub fn check_and_mutate(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> Result<bool> {
        self.check_and_mutate_unsynced(instance, table, key, predicate, on_match, on_miss)?
            .sync(self)
    }

    /// [`Engine::check_and_mutate`] without waiting for the fsync policy.
    pub fn check_and_mutate_unsynced(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> Result<Unsynced<bool>> {
        validate::row_key(key)?;
        if on_match.is_empty() && on_miss.is_empty() {
            return Err(Error::Invalid(
                "CheckAndMutateRow needs at least one true or false mutation".into(),
            ));
        }
        let compiled = predicate.map(CompiledFilter::compile).transpose()?;
        let cat = self.catalog()?;
        let meta = cat.get(instance, table)?;
        if let Some(p) = predicate {
            validate::filter_timestamps(meta, p)?;
        }
        for muts in [on_match, on_miss] {
            if !muts.is_empty() {
                validate::mutations(meta, key, muts)?;
            }
        }
        let (matched, committed) = {
            let _row = self.inner.locks.lock(meta.id, key);
            let row = self.read_row_locked(meta, key, compiled.as_ref())?;
            let matched = row.is_some_and(|r| !r.cells.is_empty());
            let muts = if matched { on_match } else { on_miss };
            let mut a = Applier::new(self, meta);
            if !muts.is_empty() {
                a.apply_row(key, muts)?;
            }
            (matched, a.commit()?)
        };
        drop(cat);
        Ok(Unsynced::new(matched, committed))
    }

    /// Applies append / increment rules to the latest cells of their columns,
    /// atomically; returns the new cells. The new timestamp of each cell is the
    /// later of its old timestamp and now.
    pub fn read_modify_write(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> Result<Row> {
        self.read_modify_write_unsynced(instance, table, key, rules)?
            .sync(self)
    }

    /// [`Engine::read_modify_write`] without waiting for the fsync policy.
    pub fn read_modify_write_unsynced(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> Result<Unsynced<Row>> {
        validate::row_key(key)?;
        if rules.is_empty() {
            return Err(Error::Invalid(
                "ReadModifyWriteRow needs at least one rule".into(),
            ));
        }
        if rules.len() > MAX_READ_MODIFY_WRITE_RULES {
            return Err(Error::limit(
                "ReadModifyWrite rules in one request",
                rules.len(),
                MAX_READ_MODIFY_WRITE_RULES,
            ));
        }
        let cat = self.catalog()?;
        let meta = cat.get(instance, table)?;
        for r in rules {
            validate::qualifier(&r.qualifier)?;
            let f = meta
                .family(&r.family)
                .ok_or_else(|| Error::no_family(&r.family))?;
            if f.spec.value_type != ValueType::Bytes {
                return Err(Error::Invalid(format!(
                    "ReadModifyWrite on aggregate family {:?}: use AddToCell",
                    r.family
                )));
            }
        }
        let out = {
            let _row = self.inner.locks.lock(meta.id, key);
            let current = self.read_row_locked(meta, key, None)?.unwrap_or_default();
            let mut latest: BTreeMap<(String, Vec<u8>), (i64, Vec<u8>)> = BTreeMap::new();
            for c in current.cells {
                latest
                    .entry((c.family.to_string(), c.qualifier.to_vec()))
                    .or_insert((c.timestamp_us, c.value));
            }
            let mut a = Applier::new(self, meta);
            let now = a.now_us;
            let mut muts = Vec::with_capacity(rules.len());
            let mut touched = Vec::new();
            for r in rules {
                let slot = (r.family.clone(), r.qualifier.clone());
                let (old_ts, old) = latest
                    .get(&slot)
                    .map_or((i64::MIN, None), |(t, v)| (*t, Some(v.as_slice())));
                let value = match &r.op {
                    ReadModifyWriteOp::Append(suffix) => {
                        let mut v = old.unwrap_or_default().to_vec();
                        v.extend_from_slice(suffix);
                        v
                    }
                    ReadModifyWriteOp::Increment(by) => {
                        let cur = match old {
                            None => 0,
                            Some(b) => i64::from_be_bytes(b.try_into().map_err(|_| {
                                Error::Invalid(format!(
                                    "cannot increment {}:{}: its value is {} bytes, not a 64-bit big-endian integer",
                                    r.family,
                                    String::from_utf8_lossy(&r.qualifier),
                                    b.len()
                                ))
                            })?),
                        };
                        cur.wrapping_add(*by).to_be_bytes().to_vec()
                    }
                };
                if value.len() > crate::limits::MAX_VALUE_BYTES {
                    return Err(Error::limit(
                        "cell value size in bytes",
                        value.len(),
                        crate::limits::MAX_VALUE_BYTES,
                    ));
                }
                let ts = old_ts.max(now);
                latest.insert(slot.clone(), (ts, value.clone()));
                if !touched.contains(&slot) {
                    touched.push(slot);
                }
                muts.push(Mutation::SetCell {
                    family: r.family.clone(),
                    qualifier: r.qualifier.clone(),
                    timestamp_us: ts,
                    value,
                });
            }
            a.apply_row(key, &muts)?;
            let committed = a.commit()?;
            let mut cells: Vec<(u32, Cell)> = touched
                .into_iter()
                .filter_map(|(f, q)| {
                    let fam = meta.family(&f)?;
                    let (ts, v) = latest.remove(&(f, q.clone()))?;
                    let cell = Cell {
                        family: fam.name.clone(),
                        qualifier: q.into(),
                        timestamp_us: ts,
                        value: v,
                        labels: vec![],
                    };
                    Some((fam.id, cell))
                })
                .collect();
            cells.sort_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| a.1.qualifier.cmp(&b.1.qualifier))
            });
            let cells = cells.into_iter().map(|(_, c)| c).collect();
            let row = Row {
                key: key.to_vec(),
                cells,
            };
            (row, committed)
        };
        drop(cat);
        let (row, committed) = out;
        Ok(Unsynced::new(row, committed))
    }
}
