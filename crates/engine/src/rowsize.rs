//! Row sizes: the 256 MiB hard limit ([`MAX_ROW_BYTES`]) holds for the stored row, not
//! just for one request, and a row passing the 100 MiB recommendation
//! ([`RECOMMENDED_ROW_BYTES`]) is reported as a [`crate::Warning`].
//!
//! ## What counts
//! A row's size is its key plus, for every stored cell, the qualifier and value bytes:
//! the measure [`crate::validate`] applies to one request. Cells a GC rule collects count
//! until the sweep removes them, since they can reappear (a relaxed rule, deleted newer
//! versions); cells of dropped families do not when a write measures its row.
//!
//! ## An upper bound kept in memory, measured only near a threshold
//! Measuring a row walks all its keys, far too slow for every write, and a persisted
//! per-row record costs a point read and a write per row (measured: +55% CPU on bulk
//! loads). Instead the engine keeps, in memory only:
//! - a count-min sketch of the bytes written to each row since the engine opened
//!   ([`SKETCH_WIDTH`] counters in each of two rows, indexed by two hashes of the row
//!   prefix). An estimate is at least the true count, so `estimate(now) -
//!   estimate(then)` is at least what was written to the row in between;
//! - the rows measured lately: exact size, the sketch estimate at that moment, and
//!   whether the row was reported as large ([`Measured`]);
//! - whether the **survey** has finished: one walk over all stored keys after open
//!   (a background thread, or inline when the engine runs no background threads) that
//!   remembers every row of at least [`SURVEY_FLOOR_BYTES`].
//!
//! A row's bound is then `measured + (estimate - estimate_then)` if it was measured,
//! else `SURVEY_FLOOR_BYTES + estimate` once the survey has finished (the row was under
//! the floor when the survey passed it, or did not exist), else unknown.
//!
//! ## A write, step by step ([`crate::write`], under the row lock)
//! 1. Add up the qualifier and value bytes of every cell the row's mutations store. A
//!    write that stores nothing cannot grow the row and is never refused.
//! 2. Bound the row as above with those bytes added. If the bound is under the row's
//!    trigger (the recommendation, or 8 MiB past the last measurement, or the hard
//!    limit once the row was reported), add the bytes to the sketch: done.
//! 3. Otherwise (or while the survey runs) measure the row exactly as this write would
//!    leave it: stored keys merged with the batch's pending changes, value sizes from
//!    the index. Past [`MAX_ROW_BYTES`]: the row's mutations fail with `Invalid`
//!    naming the size and the limit, and nothing of them is written. Past the
//!    recommendation for the first time: a `LargeRow` warning. The measurement is
//!    remembered.
//!
//! Deletes, GC sweeps and drops only shrink rows, so they leave every bound valid.
//!
//! ## Cost
//! The common write hashes its row key and adds to two counters: no I/O. A row is
//! measured once per 8 MiB written to it past 100 MiB of writes since open; a row within
//! one write of the hard limit is measured on every write that could cross it (such
//! rows are far past Bigtable's recommendation). Until the survey finishes (about one
//! second per few million cells), every write measures its row.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use fjall::{Keyspace, Readable};

use crate::db::Inner;
use crate::error::Result;
use crate::keys::KeyParts;
use crate::limits::{MAX_ROW_BYTES, RECOMMENDED_ROW_BYTES};

/// [`MAX_ROW_BYTES`] as a byte count.
pub(crate) const MAX_ROW: u64 = MAX_ROW_BYTES as u64;
/// [`RECOMMENDED_ROW_BYTES`] as a byte count.
const RECOMMENDED_ROW: u64 = RECOMMENDED_ROW_BYTES as u64;
/// Rows the survey finds at or above this size are remembered by key; every other row
/// is bounded by this plus what was written to it since open. Low enough that a row
/// needs 84 MiB of writes before its first measurement, high enough that few rows
/// are remembered.
pub(crate) const SURVEY_FLOOR_BYTES: u64 = 16 * 1024 * 1024;
/// After a measurement finds a row under the recommended size, the next measurement
/// waits until the bound has grown this much more, so a row just under 100 MiB whose
/// cells are rewritten in place is not walked on every write. The warning can come this
/// many bytes late.
const REMEASURE_AFTER_BYTES: u64 = 8 * 1024 * 1024;
/// Counters in each of the sketch's two rows (16 bytes of memory per slot). Collisions
/// only inflate estimates: with 64 Ki slots, terabytes written since open add well
/// under the 84 MiB that would cost a measurement.
pub(crate) const SKETCH_WIDTH: usize = 1 << 16;
/// Rows remembered at most; past this, the measurements of rows under
/// [`SURVEY_FLOOR_BYTES`] are forgotten (the floor bound covers them again).
const MAX_MEASURED_ROWS: usize = 1 << 16;
/// Cells the survey walks under one snapshot before it lets go of the engine.
const SURVEY_CHUNK_CELLS: usize = 100_000;

/// The last exact measurement of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Measured {
    /// The row's size then.
    bytes: u64,
    /// The sketch's estimate for the row then (after adding that write's bytes).
    written_at: u64,
    /// Whether the row was past the recommendation and reported (or found so by the
    /// survey): it is not reported again until a measurement finds it back under.
    warned: bool,
}

impl Measured {
    /// The bound past which the row is measured again.
    fn trigger(self) -> u64 {
        if self.warned {
            MAX_ROW
        } else {
            RECOMMENDED_ROW.max(self.bytes.saturating_add(REMEASURE_AFTER_BYTES))
        }
    }
}

/// What [`RowSizes::check`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The row stays under its trigger; the bytes were added to the sketch.
    Fits,
    /// The caller must measure the row and call [`RowSizes::measured`] (or refuse).
    Measure(Slots),
}

/// The sketch counters of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slots([usize; 2]);

/// The in-memory row-size state of an open engine (see the module docs).
pub(crate) struct RowSizes {
    sketch: [Box<[AtomicU64]>; 2],
    measured: Mutex<HashMap<Vec<u8>, Measured>>,
    /// `measured.len()`, readable without the lock (most engines remember no row).
    measured_len: AtomicUsize,
    surveyed: AtomicBool,
}

impl std::fmt::Debug for RowSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowSizes")
            .field("measured", &self.measured_len.load(Ordering::Relaxed))
            .field("surveyed", &self.surveyed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for RowSizes {
    fn default() -> Self {
        let counters = || (0..SKETCH_WIDTH).map(|_| AtomicU64::new(0)).collect();
        Self {
            sketch: [counters(), counters()],
            measured: Mutex::new(HashMap::new()),
            measured_len: AtomicUsize::new(0),
            surveyed: AtomicBool::new(false),
        }
    }
}

impl RowSizes {
    fn slots(row_prefix: &[u8]) -> Slots {
        let h = hash(row_prefix);
        let mask = (SKETCH_WIDTH - 1) as u64;
        Slots([(h & mask) as usize, ((h >> 32) & mask) as usize])
    }

    fn estimate(&self, slots: Slots) -> u64 {
        let [a, b] = slots.0;
        let a = self.sketch[0]
            .get(a)
            .map_or(0, |c| c.load(Ordering::Acquire));
        let b = self.sketch[1]
            .get(b)
            .map_or(0, |c| c.load(Ordering::Acquire));
        a.min(b)
    }

    fn add(&self, slots: Slots, bytes: u64) {
        for (row, slot) in self.sketch.iter().zip(slots.0) {
            if let Some(c) = row.get(slot) {
                c.fetch_add(bytes, Ordering::AcqRel);
            }
        }
    }

    fn remembered(&self, row_prefix: &[u8]) -> Option<Measured> {
        if self.measured_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.measured.lock().ok()?.get(row_prefix).copied()
    }

    /// Step 2 of the module docs for a write storing `added` bytes into the row.
    pub fn check(&self, row_prefix: &[u8], added: u64) -> Check {
        let slots = Self::slots(row_prefix);
        let written = self.estimate(slots).saturating_add(added);
        let (bound, trigger) = match self.remembered(row_prefix) {
            Some(m) => (
                m.bytes.saturating_add(written.saturating_sub(m.written_at)),
                m.trigger(),
            ),
            None if self.surveyed.load(Ordering::Acquire) => {
                (SURVEY_FLOOR_BYTES.saturating_add(written), RECOMMENDED_ROW)
            }
            None => return Check::Measure(slots),
        };
        if bound > trigger {
            return Check::Measure(slots);
        }
        self.add(slots, added);
        Check::Fits
    }

    /// Step 3 of the module docs: the row measured `bytes` with the write's `added`
    /// bytes, which fit. Returns whether to report the row as large.
    pub fn measured(&self, row_prefix: &[u8], slots: Slots, added: u64, bytes: u64) -> bool {
        self.add(slots, added);
        let written_at = self.estimate(slots);
        let before = self.remembered(row_prefix);
        let large = bytes > RECOMMENDED_ROW;
        let report = large && !before.is_some_and(|m| m.warned);
        let m = Measured {
            bytes,
            written_at,
            warned: large,
        };
        if self.surveyed.load(Ordering::Acquire) || bytes >= SURVEY_FLOOR_BYTES {
            self.remember(row_prefix, m, true);
        }
        report
    }

    /// A row written whole by a table copy ([`crate::copies`]) measured `bytes`: rows
    /// the survey would remember are remembered, so the copy's rows keep exact bounds.
    pub fn note_copied_row(&self, row_prefix: &[u8], bytes: u64) {
        if row_prefix.is_empty() || bytes < SURVEY_FLOOR_BYTES {
            return;
        }
        let m = Measured {
            bytes,
            written_at: self.estimate(Self::slots(row_prefix)),
            warned: bytes > RECOMMENDED_ROW,
        };
        self.remember(row_prefix, m, true);
    }

    /// Remembers a measurement; `replace`: over an older one.
    fn remember(&self, row_prefix: &[u8], m: Measured, replace: bool) {
        let Ok(mut map) = self.measured.lock() else {
            return;
        };
        if map.len() >= MAX_MEASURED_ROWS && !map.contains_key(row_prefix) {
            map.retain(|_, m| m.bytes >= SURVEY_FLOOR_BYTES);
        }
        if replace {
            map.insert(row_prefix.to_vec(), m);
        } else {
            map.entry(row_prefix.to_vec()).or_insert(m);
        }
        self.measured_len.store(map.len(), Ordering::Release);
    }
}

/// A fast 64-bit hash of a row prefix (FxHash-style word folding, then SplitMix64's
/// finalizer so that every output bit depends on every input bit): the sketch needs
/// two well-spread indices, not resistance to chosen keys (a collision only loosens a
/// bound).
fn hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Calls `f(key, parts, value size)` for every stored cell key in `[lo, hi)` (`hi`
/// `None`: to the end) of `snapshot`, in key order, without reading values stored
/// apart from keys, until `f` returns false.
///
/// fjall's iterator guard yields a key or a value size, not both, so two iterators walk
/// the same snapshot range in lockstep: they see the same entries in the same order.
pub(crate) fn for_each_cell(
    snapshot: &fjall::Snapshot,
    cells: &Keyspace,
    lo: &[u8],
    hi: Option<&[u8]>,
    mut f: impl FnMut(&[u8], &KeyParts, u64) -> Result<bool>,
) -> Result<()> {
    let range = || -> (Bound<&[u8]>, Bound<&[u8]>) {
        let end = hi.map_or(Bound::Unbounded, Bound::Excluded);
        (Bound::Included(lo), end)
    };
    let keys = snapshot.range::<&[u8], _>(cells, range());
    let sizes = snapshot.range::<&[u8], _>(cells, range());
    for (k, n) in keys.zip(sizes) {
        let key = k.key()?;
        let size = n.size()?;
        if !f(&key, &KeyParts::parse(&key)?, u64::from(size))? {
            break;
        }
    }
    Ok(())
}

/// Surveys up to about [`SURVEY_CHUNK_CELLS`] cells from row prefix `from` under one
/// snapshot, remembering rows of at least [`SURVEY_FLOOR_BYTES`]. Returns where the
/// next chunk starts, or `None` at the end (the survey is then finished).
fn survey_chunk(inner: &Inner, from: &[u8]) -> Result<Option<Vec<u8>>> {
    let snapshot = inner.db.snapshot();
    let mut row: Vec<u8> = Vec::new();
    let mut bytes = 0u64;
    let mut cells = 0usize;
    let mut next = None;
    let sizes = &inner.row_sizes;
    let finish = |row: &[u8], bytes: u64| {
        if !row.is_empty() && bytes >= SURVEY_FLOOR_BYTES {
            let m = Measured {
                bytes,
                written_at: 0,
                warned: bytes > RECOMMENDED_ROW,
            };
            sizes.remember(row, m, false);
        }
    };
    for_each_cell(&snapshot, &inner.cells, from, None, |key, p, size| {
        let prefix = &key[..p.row_end];
        if prefix != row.as_slice() {
            finish(&row, bytes);
            if cells >= SURVEY_CHUNK_CELLS {
                next = Some(prefix.to_vec());
                return Ok(false);
            }
            row = prefix.to_vec();
            bytes = crate::keys::row_of_prefix(prefix).len() as u64;
        }
        bytes += p.qualifier_len(key) as u64 + size;
        cells += 1;
        Ok(true)
    })?;
    if next.is_none() {
        finish(&row, bytes);
        sizes.surveyed.store(true, Ordering::Release);
    }
    Ok(next)
}

/// Runs the whole survey now, on this thread.
pub(crate) fn survey(inner: &Inner) -> Result<()> {
    let mut from = Vec::new();
    while let Some(next) = survey_chunk(inner, &from)? {
        from = next;
    }
    Ok(())
}

/// Runs the survey on a background thread that holds the engine only while it walks a
/// chunk, and gives up once the engine is dropped or shut down.
pub(crate) fn spawn_survey(inner: &Arc<Inner>) {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let spawned = std::thread::Builder::new()
        .name("almanac-rowsize".into())
        .spawn(move || {
            let mut from = Vec::new();
            loop {
                let Some(inner) = weak.upgrade() else { return };
                if inner.sweeper.stopped() {
                    return;
                }
                match survey_chunk(&inner, &from) {
                    Ok(Some(next)) => from = next,
                    Ok(None) => return,
                    Err(e) => {
                        // Writes keep measuring their rows: slower, never wrong.
                        eprintln!("almanac: row size survey failed: {e}");
                        return;
                    }
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("almanac: could not start the row size survey: {e}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn unsurveyed_rows_are_measured_and_small_ones_forgotten() {
        let s = RowSizes::default();
        let Check::Measure(slots) = s.check(b"r", 10) else {
            panic!("an unsurveyed row must be measured");
        };
        assert!(!s.measured(b"r", slots, 10, 11));
        assert_eq!(s.measured_len.load(Ordering::Relaxed), 0);
        assert!(matches!(s.check(b"r", 10), Check::Measure(_)));
        // A large row is remembered even before the survey ends.
        assert!(!s.measured(b"r", slots, 10, 20 * MIB));
        assert_eq!(s.remembered(b"r").map(|m| m.bytes), Some(20 * MIB));
        assert_eq!(s.check(b"r", MIB), Check::Fits);
    }

    #[test]
    fn surveyed_rows_measure_near_the_thresholds() {
        let s = RowSizes::default();
        s.surveyed.store(true, Ordering::Release);
        // Floor + written: 16 + 84 MiB fits, one byte more is measured.
        assert_eq!(s.check(b"r", 84 * MIB), Check::Fits);
        let Check::Measure(slots) = s.check(b"r", 1) else {
            panic!("past the recommendation the row must be measured");
        };
        // Measured small (rewrites in place): measured again at the recommendation...
        assert!(!s.measured(b"r", slots, 1, MIB));
        assert_eq!(s.check(b"r", 99 * MIB), Check::Fits);
        assert!(matches!(s.check(b"r", 1), Check::Measure(_)));
        // ... or, just under it, 8 MiB later.
        assert!(!s.measured(b"r", slots, 0, 95 * MIB));
        assert_eq!(s.check(b"r", 8 * MIB), Check::Fits);
        assert!(matches!(s.check(b"r", 1), Check::Measure(_)));
        // Past 100 MiB: reported once, then measured again only near the hard limit.
        assert!(s.measured(b"r", slots, 1, 101 * MIB));
        assert_eq!(s.check(b"r", 155 * MIB), Check::Fits);
        let Check::Measure(slots) = s.check(b"r", MIB) else {
            panic!("near the hard limit the row must be measured");
        };
        assert!(!s.measured(b"r", slots, MIB, 200 * MIB), "reported once");
        // Back under the recommendation, the next crossing is reported again.
        assert!(!s.measured(b"r", slots, 0, MIB));
        assert!(s.measured(b"r", slots, 0, 101 * MIB));
        // Other rows are unaffected (their counters are apart).
        assert_eq!(s.check(b"other", 84 * MIB), Check::Fits);
    }

    #[test]
    fn estimates_never_undercount() {
        let s = RowSizes::default();
        let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
        for i in 0..200_000u64 {
            let row = (i % 5_000).to_be_bytes().to_vec();
            let slots = RowSizes::slots(&row);
            s.add(slots, i % 7 + 1);
            *truth.entry(row).or_default() += i % 7 + 1;
        }
        for (row, n) in truth {
            assert!(s.estimate(RowSizes::slots(&row)) >= n);
        }
    }

    #[test]
    fn the_map_of_measured_rows_stays_bounded() {
        let s = RowSizes::default();
        s.surveyed.store(true, Ordering::Release);
        let slots = RowSizes::slots(b"big");
        s.measured(b"big", slots, 0, 20 * MIB);
        for i in 0..MAX_MEASURED_ROWS as u64 + 10 {
            s.measured(&i.to_be_bytes(), slots, 0, 5);
        }
        assert!(s.measured_len.load(Ordering::Relaxed) <= MAX_MEASURED_ROWS);
        assert_eq!(s.remembered(b"big").map(|m| m.bytes), Some(20 * MIB));
    }
}
