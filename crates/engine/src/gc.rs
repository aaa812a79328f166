//! Reclaiming space: the sweep deletes cells that GC rules collect, and the cells of
//! deleted tables and dropped families.
//!
//! Reads never depend on the sweep: every read applies the family's GC rule itself
//! (see [`crate::read`]), so a cell a rule collects is invisible from the moment the
//! rule collects it. The sweep only makes the collection physical. It works row by
//! row under the row lock, re-reading the row from a fresh snapshot, so it can never
//! delete a cell written after it looked.
//!
//! One consequence, as on Cloud Bigtable: a cell hidden by `max_versions` becomes
//! visible again if the newer versions are deleted before the sweep collects it; once
//! swept it is gone.
//!
//! A table whose families all collect by age only is walked only when its oldest cell
//! may be old enough ([`crate::oldest`]); until then the walk would find nothing.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use fjall::Readable;

use crate::catalog::TableMeta;
use crate::db::{Engine, Inner, PURGE_BATCH_KEYS};
use crate::error::{Error, Result};
use crate::keys::{self, KeyParts};
use crate::mutation::Mutation;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Cells removed because a GC rule collects them.
    pub collected: u64,
    /// Cells removed because their table or family was dropped.
    pub purged: u64,
}

/// Start/stop signals for the background sweeper thread.
#[derive(Debug, Default)]
pub struct SweeperControl {
    state: Mutex<(bool, bool)>, // (wake requested, stop requested)
    cv: Condvar,
}

impl SweeperControl {
    /// Asks the sweeper to run soon.
    pub fn wake(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.0 = true;
            self.cv.notify_all();
        }
    }

    /// Asks the sweeper to exit.
    pub fn stop(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = true;
            self.cv.notify_all();
        }
    }

    /// Whether stop was requested (other background work checks this too).
    pub fn stopped(&self) -> bool {
        self.state.lock().map_or(true, |s| s.1)
    }

    /// Waits up to `every` or until woken; false once stop was requested.
    fn wait(&self, every: Duration) -> bool {
        let Ok(guard) = self.state.lock() else {
            return false;
        };
        let Ok((mut s, _)) = self.cv.wait_timeout_while(guard, every, |s| !s.0 && !s.1) else {
            return false;
        };
        s.0 = false;
        !s.1
    }
}

pub(crate) fn spawn_sweeper(inner: &Arc<Inner>, every: Duration) {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let spawned = std::thread::Builder::new()
        .name("almanac-sweep".into())
        .spawn(move || {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let engine = Engine { inner };
                if !engine.inner.sweeper.wait(every) {
                    return;
                }
                if let Err(e) = engine.sweep() {
                    eprintln!("almanac: background sweep failed: {e}");
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("almanac: could not start the background sweep: {e}");
    }
}

impl Engine {
    /// Runs one sweep now: purges dropped tables and families and deletes the cells
    /// GC rules collect. Safe to run concurrently with reads and writes.
    pub fn sweep(&self) -> Result<SweepStats> {
        let mut stats = SweepStats::default();
        self.expire_deleted()?;
        self.expire_copies()?;
        let undeletable = self.undeletable_ids()?;
        let snapshot = self.inner.db.snapshot();
        let mut dead_tables = Vec::new();
        let mut dead_families: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        for g in snapshot.prefix(&self.inner.meta, b"x") {
            let k = g.key()?;
            let id: [u8; 4] = k[1..]
                .try_into()
                .map_err(|_| Error::Corrupt("dead table marker".into()))?;
            dead_tables.push((u32::from_be_bytes(id), k.to_vec()));
        }
        for g in snapshot.prefix(&self.inner.meta, b"y") {
            let k = g.key()?;
            if k.len() != 9 {
                return Err(Error::Corrupt("dead family marker".into()));
            }
            let t = u32::from_be_bytes([k[1], k[2], k[3], k[4]]);
            let f = u32::from_be_bytes([k[5], k[6], k[7], k[8]]);
            dead_families.push((t, f, k.to_vec()));
        }
        drop(snapshot);
        for (id, marker) in dead_tables {
            stats.purged +=
                self.purge_range(&keys::table_prefix(id), &keys::table_end(id), |_| true)?;
            self.purge_changes(id, i64::MAX)?;
            self.forget_marker(&marker)?;
        }
        let tables: Vec<Arc<TableMeta>> = self
            .catalog()?
            .tables
            .values()
            .flat_map(|t| t.values().cloned())
            .collect();
        for meta in &tables {
            // Changes past the retention (all of them once the stream is off).
            let keep_from = meta
                .change_retention_us
                .map_or(i64::MAX, |r| self.now_us().saturating_sub(r));
            self.purge_changes(meta.id, keep_from)?;
        }
        for meta in tables {
            let dead: Vec<u32> = dead_families
                .iter()
                .filter(|(t, _, _)| *t == meta.id)
                .map(|(_, f, _)| *f)
                .collect();
            let gc_families = meta.families.iter().any(|f| !f.spec.gc_rule.is_keep_all());
            if dead.is_empty() && (!gc_families || self.too_young_to_collect(&meta)) {
                continue;
            }
            let token = self.inner.oldest.walk_started(meta.id);
            let (c, p, oldest_kept) = self.sweep_table(&meta, &dead)?;
            self.inner.oldest.walk_finished(meta.id, token, oldest_kept);
            stats.collected += c;
            stats.purged += p;
            for (_, _, marker) in dead_families.iter().filter(|(t, _, _)| *t == meta.id) {
                self.forget_marker(marker)?;
            }
        }
        // Markers of families whose table is gone for good were covered by the table purge.
        for (t, _, marker) in &dead_families {
            if !undeletable.contains(t)
                && self
                    .catalog()?
                    .tables
                    .values()
                    .all(|ts| ts.values().all(|m| m.id != *t))
            {
                self.forget_marker(marker)?;
            }
        }
        Ok(stats)
    }

    fn forget_marker(&self, marker: &[u8]) -> Result<()> {
        let mut b = self.inner.db.batch();
        b.remove(&self.inner.meta, marker.to_vec());
        self.commit(b)
    }

    /// Whether every cell of the table is younger than any of its families' GC rules
    /// needs before it collects ([`crate::oldest`]): then a walk would find nothing.
    fn too_young_to_collect(&self, meta: &TableMeta) -> bool {
        let Some(oldest) = self.inner.oldest.bound(meta.id) else {
            return false;
        };
        let ages: Option<Vec<i64>> = meta
            .families
            .iter()
            .map(|f| f.spec.gc_rule.min_age_to_collect_us())
            .collect();
        let Some(youngest) = ages.and_then(|a| a.into_iter().min()) else {
            return false;
        };
        oldest >= self.now_us().saturating_sub(youngest)
    }

    /// Sweeps one table row by row. Returns (collected, purged, the oldest timestamp
    /// of a cell it kept, `i64::MAX` for none).
    fn sweep_table(&self, meta: &TableMeta, dead: &[u32]) -> Result<(u64, u64, i64)> {
        let (mut collected, mut purged) = (0u64, 0u64);
        let mut oldest_kept = i64::MAX;
        let end = keys::table_end(meta.id);
        let mut from = keys::table_prefix(meta.id);
        loop {
            // Find the next row with anything to delete, from a cheap key-only walk.
            let snapshot = self.inner.db.snapshot();
            let mut next_row: Option<Vec<u8>> = None;
            let mut candidate_row: Option<Vec<u8>> = None;
            let mut current_row: Vec<u8> = Vec::new();
            let mut judge = RowJudge::new(meta, self.now_us(), dead);
            for g in snapshot.range(&self.inner.cells, from.as_slice()..end.as_slice()) {
                let k = g.key()?;
                let p = KeyParts::parse(&k)?;
                let rp = &k[..p.row_end];
                if rp != current_row.as_slice() {
                    if candidate_row.is_some() {
                        next_row = Some(rp.to_vec());
                        break;
                    }
                    current_row = rp.to_vec();
                    judge.reset();
                }
                if judge.doomed(&k, &p).is_some() {
                    candidate_row = Some(current_row.clone());
                } else {
                    oldest_kept = oldest_kept.min(p.timestamp_us);
                }
            }
            drop(snapshot);
            let Some(rp) = candidate_row else {
                return Ok((collected, purged, oldest_kept));
            };
            let (c, p) = self.sweep_row(meta, dead, &rp)?;
            collected += c;
            purged += p;
            match next_row {
                Some(n) => from = n,
                None => return Ok((collected, purged, oldest_kept)),
            }
        }
    }

    fn sweep_row(&self, meta: &TableMeta, dead: &[u32], row_prefix: &[u8]) -> Result<(u64, u64)> {
        let row = keys::row_of_prefix(row_prefix);
        let _lock = self.inner.locks.lock(meta.id, &row);
        let snapshot = self.inner.db.snapshot();
        let mut judge = RowJudge::new(meta, self.now_us(), dead);
        let mut batch = self.inner.db.batch();
        let (mut collected, mut purged, mut n) = (0u64, 0u64, 0usize);
        // With a change stream, collected cells are recorded as GC deletions.
        let mut gc_changes: Option<Vec<Mutation>> = meta.change_retention_us.map(|_| Vec::new());
        let end = keys::row_end(meta.id, &row);
        for g in snapshot.range(&self.inner.cells, row_prefix..end.as_slice()) {
            let k = g.key()?;
            let p = KeyParts::parse(&k)?;
            match judge.doomed(&k, &p) {
                Some(Doom::Collected) => {
                    collected += 1;
                    if let (Some(changes), Some(f)) =
                        (&mut gc_changes, meta.family_by_id(p.family_id))
                    {
                        changes.push(Mutation::DeleteFromColumn {
                            family: f.name.to_string(),
                            qualifier: p.qualifier(&k),
                            start_us: p.timestamp_us,
                            end_us: Some(p.timestamp_us.saturating_add(1)),
                        });
                    }
                }
                Some(Doom::Purged) => purged += 1,
                None => continue,
            }
            batch.remove(&self.inner.cells, k);
            n += 1;
            if n >= PURGE_BATCH_KEYS {
                let b = std::mem::replace(&mut batch, self.inner.db.batch());
                self.commit_collected(meta, &row, b, gc_changes.as_mut())?;
                n = 0;
            }
        }
        self.commit_collected(meta, &row, batch, gc_changes.as_mut())?;
        Ok((collected, purged))
    }

    /// Commits a sweep batch of one row, with the GC deletions it makes as one
    /// garbage-collection change when there are any.
    fn commit_collected(
        &self,
        meta: &TableMeta,
        row: &[u8],
        mut batch: fjall::OwnedWriteBatch,
        changes: Option<&mut Vec<Mutation>>,
    ) -> Result<()> {
        let Some(changes) = changes else {
            return self.commit(batch);
        };
        if changes.is_empty() {
            return self.commit(batch);
        }
        let reservation = self.inner.change_clock.reserve(self.now_us(), 1)?;
        let record = crate::changes::encode(row, true, changes.as_slice());
        batch.insert(
            &self.inner.changes,
            crate::changes::change_key(meta.id, reservation.first),
            record,
        );
        changes.clear();
        self.commit(batch)?;
        drop(reservation);
        Ok(())
    }
}

enum Doom {
    Collected,
    Purged,
}

/// Decides which keys of one row the sweep deletes, fed keys in order.
struct RowJudge<'a> {
    meta: &'a TableMeta,
    now_us: i64,
    dead: &'a [u32],
    column: Vec<u8>,
    version_index: usize,
}

impl<'a> RowJudge<'a> {
    fn new(meta: &'a TableMeta, now_us: i64, dead: &'a [u32]) -> Self {
        Self {
            meta,
            now_us,
            dead,
            column: Vec::new(),
            version_index: 0,
        }
    }

    fn reset(&mut self) {
        self.column.clear();
        self.version_index = 0;
    }

    fn doomed(&mut self, key: &[u8], p: &KeyParts) -> Option<Doom> {
        let Some(family) = self.meta.family_by_id(p.family_id) else {
            // A family id the schema does not know: dropped (marker) or left over.
            return (self.dead.contains(&p.family_id) || p.family_id < self.meta.next_family_id)
                .then_some(Doom::Purged);
        };
        let column = p.column(key);
        if column != self.column.as_slice() {
            self.column = column.to_vec();
            self.version_index = 0;
        }
        let idx = self.version_index;
        self.version_index += 1;
        family
            .spec
            .gc_rule
            .collects(idx, p.timestamp_us, self.now_us)
            .then_some(Doom::Collected)
    }
}
