//! The buckets a seal pass has to look at: every (series, bucket) that holds row-form
//! points, with when it was last written, kept in memory by the write path so a pass
//! costs what was written since the last one, not the table's size ([`crate::seal`]).
//!
//! After an open the set is unknown until the first seal pass walks the table's keys
//! once; writes add to it all along, so nothing written meanwhile is lost. A table this
//! process creates, on a store no other process writes, starts known and empty.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A bucket: the series prefix of its row keys and its start, ns.
pub type BucketKey = (Vec<u8>, i64);

/// See the module docs.
#[derive(Debug, Default)]
pub struct Unsealed {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Whether `buckets` lists every bucket with row-form points (false until the first
    /// pass after an open has walked the table).
    known: bool,
    /// Series → bucket start → the time of its last write (ns, the service clock);
    /// `i64::MIN` when found by the walk. Keyed by series first, so a write to a series
    /// already listed allocates nothing.
    buckets: HashMap<Vec<u8>, HashMap<i64, i64>>,
}

impl Unsealed {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records row-form writes into these buckets at `now_ns`.
    pub fn written<'a>(&self, buckets: impl IntoIterator<Item = (&'a [u8], i64)>, now_ns: i64) {
        let mut g = self.lock();
        for (series, start) in buckets {
            let starts = match g.buckets.get_mut(series) {
                Some(starts) => starts,
                None => g.buckets.entry(series.to_vec()).or_default(),
            };
            let last = starts.entry(start).or_insert(now_ns);
            *last = (*last).max(now_ns);
        }
    }

    /// Whether the set is complete (a pass has walked the table since the open).
    pub fn is_known(&self) -> bool {
        self.lock().known
    }

    /// Adds the buckets a walk of the table found, and marks the set complete.
    pub fn found(&self, buckets: impl IntoIterator<Item = BucketKey>) {
        let mut g = self.lock();
        for (series, start) in buckets {
            g.buckets
                .entry(series)
                .or_default()
                .entry(start)
                .or_insert(i64::MIN);
        }
        g.known = true;
    }

    /// The buckets for which `due(start, last write)` holds, sorted.
    pub fn due(&self, due: impl Fn(i64, i64) -> bool) -> Vec<BucketKey> {
        let g = self.lock();
        let mut out: Vec<BucketKey> = g
            .buckets
            .iter()
            .flat_map(|(series, starts)| {
                starts
                    .iter()
                    .filter(|(start, last)| due(**start, **last))
                    .map(|(start, _)| (series.clone(), *start))
            })
            .collect();
        out.sort();
        out
    }

    /// Forgets a bucket (sealed, or left in rows for good).
    pub fn remove(&self, series: &[u8], start: i64) {
        let mut g = self.lock();
        if let Some(starts) = g.buckets.get_mut(series) {
            starts.remove(&start);
            if starts.is_empty() {
                g.buckets.remove(series);
            }
        }
    }

    /// Buckets listed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().buckets.values().map(HashMap::len).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_write_and_what_a_walk_found() {
        let u = Unsealed::default();
        assert!(!u.is_known());
        u.written([(&b"a@"[..], 0), (&b"a@"[..], 3600)], 100);
        u.written([(&b"a@"[..], 0)], 50);
        u.found([(b"a@".to_vec(), 0), (b"b@".to_vec(), 0)]);
        assert!(u.is_known());
        assert_eq!(u.len(), 3);
        // The walk does not hide a write's time.
        assert_eq!(
            u.due(|_, last| last >= 100),
            vec![(b"a@".to_vec(), 0), (b"a@".to_vec(), 3600)]
        );
        assert_eq!(
            u.due(|start, last| start == 0 && last < 100),
            vec![(b"b@".to_vec(), 0)]
        );
        u.remove(b"a@", 0);
        assert_eq!(u.due(|_, _| true).len(), 2);
    }
}
