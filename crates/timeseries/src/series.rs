//! Per-table state of the write path: striped locks over series, so the version check
//! (read the stored point, compare, write) is atomic against other writers of the same
//! series in this process; and each series' high-water mark, the newest time known to
//! be stored, so that appending newer points (the common case) needs no read at all.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock stripes per table.
const STRIPES: usize = 256;
/// Series whose high-water marks are remembered per table; past it the map is cleared
/// (marks are an optimization: a forgotten series costs one read to relearn).
pub const MAX_TRACKED_SERIES: usize = 1 << 20;

/// See the module doc.
#[derive(Debug)]
pub struct SeriesLocks {
    stripes: Vec<Mutex<()>>,
    hasher: RandomState,
    marks: Mutex<HashMap<Vec<u8>, i64>>,
}

impl Default for SeriesLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: RandomState::new(),
            marks: Mutex::new(HashMap::new()),
        }
    }
}

impl SeriesLocks {
    /// The stripe of a series.
    pub fn stripe(&self, series: &[u8]) -> usize {
        (self.hasher.hash_one(series) % STRIPES as u64) as usize
    }

    /// Locks the given stripes (deduplicated, in ascending order: no deadlock).
    pub fn lock(&self, mut stripes: Vec<usize>) -> Vec<MutexGuard<'_, ()>> {
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .map(|i| {
                self.stripes[i]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
            .collect()
    }

    fn marks(&self) -> MutexGuard<'_, HashMap<Vec<u8>, i64>> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The series' high-water mark, if known: nothing newer than it is stored.
    pub fn mark(&self, series: &[u8]) -> Option<i64> {
        self.marks().get(series).copied()
    }

    /// The marks of several series, under one lock (a request's points).
    pub fn marks_of<'k>(&self, series: impl IntoIterator<Item = &'k [u8]>) -> Vec<Option<i64>> {
        let m = self.marks();
        series.into_iter().map(|s| m.get(s).copied()).collect()
    }

    /// Raises (or learns) a series' high-water mark.
    pub fn raise(&self, series: &[u8], time_ns: i64) {
        self.raise_all([(series, time_ns)]);
    }

    /// [`SeriesLocks::raise`] for several series, under one lock.
    pub fn raise_all<'k>(&self, marks: impl IntoIterator<Item = (&'k [u8], i64)>) {
        let mut m = self.marks();
        for (series, time_ns) in marks {
            if let Some(t) = m.get_mut(series) {
                *t = (*t).max(time_ns);
                continue;
            }
            if m.len() >= MAX_TRACKED_SERIES {
                m.clear();
            }
            m.insert(series.to_vec(), time_ns);
        }
    }

    /// Forgets every mark (after rows were deleted behind the write path's back).
    #[cfg(test)]
    pub fn forget(&self) {
        self.marks().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_only_rise_and_come_back_in_order() {
        let s = SeriesLocks::default();
        assert_eq!(s.marks_of([&b"a@"[..], b"b@"]), [None, None]);
        s.raise_all([(&b"a@"[..], 5), (b"b@", 9), (b"a@", 3)]);
        s.raise(b"b@", 7);
        assert_eq!(
            s.marks_of([&b"b@"[..], b"c@", b"a@"]),
            [Some(9), None, Some(5)]
        );
        s.raise(b"a@", 6);
        assert_eq!(s.mark(b"a@"), Some(6));
        s.forget();
        assert_eq!(s.mark(b"a@"), None);
    }
}
