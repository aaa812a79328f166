//! Row locks: read-modify-write operations (aggregates, deletes, ReadModifyWrite,
//! CheckAndMutate) on one row are serialized by a striped lock keyed by a hash of
//! the table id and row key. Writers to different stripes never wait on each other.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};

/// Number of stripes: enough that unrelated rows rarely share one on a small machine.
const STRIPES: usize = 1024;

/// A fixed set of mutexes indexed by row.
#[derive(Debug)]
pub struct RowLocks {
    stripes: Vec<Mutex<()>>,
    hasher: std::hash::RandomState,
}

impl Default for RowLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: std::hash::RandomState::new(),
        }
    }
}

impl RowLocks {
    /// Locks the stripe of `(table_id, row)`. A poisoned stripe is still usable: the
    /// data it guards lives in storage, not in the mutex.
    pub fn lock(&self, table_id: u32, row: &[u8]) -> MutexGuard<'_, ()> {
        self.lock_stripe(self.stripe(table_id, row))
    }

    /// Locks the stripes of many rows of one table, in stripe order so two callers
    /// can never deadlock.
    pub fn lock_many<'a>(
        &self,
        table_id: u32,
        rows: impl Iterator<Item = &'a [u8]>,
    ) -> Vec<MutexGuard<'_, ()>> {
        let mut idx: Vec<usize> = rows.map(|r| self.stripe(table_id, r)).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter().map(|i| self.lock_stripe(i)).collect()
    }

    fn stripe(&self, table_id: u32, row: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_u32(table_id);
        h.write(row);
        (h.finish() as usize) % STRIPES
    }

    fn lock_stripe(&self, i: usize) -> MutexGuard<'_, ()> {
        self.stripes[i]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
