//! A lower bound, in memory, on the timestamp of every cell of each table, so the GC
//! sweep ([`crate::gc`]) skips a table whose age rules cannot collect anything yet
//! instead of walking all its keys every interval (a time-series table with years of
//! retention would be walked every minute for nothing).
//!
//! - A sweep's walk of a table sets the bound to the oldest cell it kept, lowered by
//!   every write the walk may not have seen: writes report their oldest cell after
//!   they commit, and a walk starts listening before it takes its snapshot, so a write
//!   is either in the snapshot or heard.
//! - Every write lowers the bound to its oldest cell; deletes leave it (it only gets
//!   looser). Cells copied in wholesale ([`crate::copies`]) make it unknown again.
//! - A table created (or emptied onto a fresh id) since the open starts with no cells;
//!   any other table's bound is unknown until the first walk: nothing is persisted.
//!
//! When two walks of one table overlap, only the newest one's result is kept.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct OldestCells {
    tables: Mutex<HashMap<u32, Entry>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Every cell of the table has a timestamp at or after this (µs); `None`: unknown.
    bound: Option<i64>,
    /// The oldest cell written since the newest walk started.
    since_walk: i64,
    /// Walks started, to tell the newest one.
    walks: u64,
}

impl Default for Entry {
    fn default() -> Self {
        Self {
            bound: None,
            since_walk: i64::MAX,
            walks: 0,
        }
    }
}

impl OldestCells {
    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Entry>> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A committed write into `table` whose oldest cell is at `ts_us`.
    pub(crate) fn written(&self, table: u32, ts_us: i64) {
        if let Some(e) = self.lock().get_mut(&table) {
            e.bound = e.bound.map(|b| b.min(ts_us));
            e.since_walk = e.since_walk.min(ts_us);
        }
    }

    /// `table` was given a fresh id, with no cells.
    pub(crate) fn created(&self, table: u32) {
        self.lock().insert(
            table,
            Entry {
                bound: Some(i64::MAX),
                ..Entry::default()
            },
        );
    }

    /// A walk of `table` is about to take its snapshot; returns its token.
    pub(crate) fn walk_started(&self, table: u32) -> u64 {
        let mut g = self.lock();
        let e = g.entry(table).or_default();
        e.walks += 1;
        e.since_walk = i64::MAX;
        e.walks
    }

    /// The walk `token` kept no cell older than `oldest_kept_us` (`i64::MAX`: none).
    pub(crate) fn walk_finished(&self, table: u32, token: u64, oldest_kept_us: i64) {
        if let Some(e) = self.lock().get_mut(&table)
            && e.walks == token
        {
            e.bound = Some(oldest_kept_us.min(e.since_walk));
        }
    }

    /// The bound, if a walk has set one.
    pub(crate) fn bound(&self, table: u32) -> Option<i64> {
        self.lock().get(&table).and_then(|e| e.bound)
    }

    /// Cells arrived in `table` without a write reporting them.
    pub(crate) fn forget(&self, table: u32) {
        if let Some(e) = self.lock().get_mut(&table) {
            e.bound = None;
            // A walk under way cannot have seen them either.
            e.walks += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_sets_the_bound_and_writes_lower_it() {
        let o = OldestCells::default();
        o.written(1, 5);
        assert_eq!(o.bound(1), None, "unknown before a walk");
        o.created(3);
        o.written(3, 8);
        assert_eq!(o.bound(3), Some(8), "a new table holds what was written");
        let t = o.walk_started(1);
        // Committed after the walk's snapshot: the walk did not see it.
        o.written(1, 40);
        o.walk_finished(1, t, 100);
        assert_eq!(o.bound(1), Some(40));
        o.written(1, 7);
        assert_eq!(o.bound(1), Some(7));
        o.written(1, 90);
        assert_eq!(o.bound(1), Some(7));
        let t = o.walk_started(1);
        o.walk_finished(1, t, i64::MAX);
        assert_eq!(o.bound(1), Some(i64::MAX), "an empty table");
        assert_eq!(o.bound(2), None);
    }

    #[test]
    fn only_the_newest_walk_counts_and_a_copy_forgets() {
        let o = OldestCells::default();
        let first = o.walk_started(1);
        let second = o.walk_started(1);
        o.walk_finished(1, first, 10);
        assert_eq!(o.bound(1), None);
        o.walk_finished(1, second, 20);
        assert_eq!(o.bound(1), Some(20));
        let t = o.walk_started(1);
        o.forget(1);
        o.walk_finished(1, t, 30);
        assert_eq!(o.bound(1), None);
    }
}
