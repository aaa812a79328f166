//! Row sizes: the 256 MiB hard limit ([`MAX_ROW_BYTES`]) holds for the stored row, not
//! just for one request, and a row passing the 100 MiB recommendation
//! ([`RECOMMENDED_ROW_BYTES`]) is reported as a [`crate::Warning`].
//!
//! ## What counts
//! A row's size is its key plus, for every stored cell, the qualifier and value bytes:
//! the measure [`crate::validate`] applies to one request. Cells a GC rule collects count
//! until the sweep removes them, since they can reappear (a relaxed rule, deleted newer
//! versions); cells of dropped families do not, since no read can return them again.
//!
//! ## An upper bound instead of a measurement on every write
//! Measuring a row means walking all its keys, so the write path keeps an upper bound
//! instead. The `rows` keyspace holds one record per non-empty row, keyed by the row
//! prefix of [`crate::keys`] (table id and escaped row key):
//! ```text
//! bound    u64 big-endian   at least the row's size
//! warn_at  u64 big-endian   measure once the bound passes this (u64::MAX: warned already)
//! ```
//! **Invariant**: every row with stored cells has a record whose bound is at least its
//! size; a row without a record is empty.
//!
//! ## A write, step by step ([`crate::write`], under the row lock)
//! 1. Read the row's record: this batch's pending one, else the snapshot's (none: empty).
//! 2. Add the qualifier and value bytes of every cell the write stores. An overwrite
//!    counts again and a delete subtracts nothing, so the bound only drifts up. After a
//!    DeleteFromRow the bound is exact: the key plus the cells written after it.
//! 3. Only if the new bound passes [`MAX_ROW_BYTES`] or `warn_at`, measure the row as the
//!    write would leave it: stored keys merged with the pending changes, value sizes
//!    from the index (values stored apart from their keys are not read). Over the limit:
//!    the row's mutations fail with `Invalid` naming the size and the limit, and nothing
//!    of them is written. Past the recommendation for the first time: a `LargeRow`
//!    warning. The bound becomes the measured size.
//! 4. The record goes into the same fjall batch as the cells (removed once the row is
//!    empty), so a crash never separates them.
//!
//! A write that stores no cell (only deletes) cannot grow the row: it is never refused
//! and leaves the record as it is.
//!
//! ## Everything else that removes cells
//! - The sweep ([`crate::gc`]) re-measures each row it touches and writes the exact size,
//!   or removes the record of a row it empties.
//! - Deleting a table or dropping all rows retires the table id; the sweep purges its
//!   records with its cells.
//! - Dropping a row prefix purges the prefix's records before its cells (without row
//!   locks), so a write racing with it leaves a record at least as large as what survives.
//!
//! ## Cost
//! The common write pays one point read and one 16-byte write per row. A row whose bound
//! drifted past a threshold through overwrites and deletes is measured once and its bound
//! reset to the truth. A row within one write of the hard limit is measured on every
//! write that could cross it; such rows are far past Bigtable's recommendation.
//!
//! Data directories written before records existed get them on open (one scan of all
//! cells; the `s` meta key of [`crate::catalog`] marks them complete).

use std::ops::Bound;

use fjall::{Database, Keyspace, Readable};

use crate::catalog::ROW_SIZES_KEY;
use crate::error::{Error, Result};
use crate::keys::KeyParts;
use crate::limits::{MAX_ROW_BYTES, RECOMMENDED_ROW_BYTES};

/// [`MAX_ROW_BYTES`] in the unit of records.
pub(crate) const MAX_ROW: u64 = MAX_ROW_BYTES as u64;
/// [`RECOMMENDED_ROW_BYTES`] in the unit of records.
const RECOMMENDED_ROW: u64 = RECOMMENDED_ROW_BYTES as u64;
/// After a measurement finds a row under the recommended size, the next measurement for
/// the warning waits until the bound has grown this much more, so a row just under
/// 100 MiB whose cells are rewritten in place is not walked on every write. The warning
/// can come this many bytes late.
const REMEASURE_AFTER_BYTES: u64 = 8 * 1024 * 1024;
/// Version byte of the `s` meta marker.
const RECORDS_VERSION: u8 = 1;
/// Records per batch when building them for an older data directory.
const BUILD_BATCH_ROWS: usize = 10_000;

/// A row's size record (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowSize {
    /// At least the row's size in bytes; 0 for an empty row.
    pub bound: u64,
    /// Measure once the bound passes this.
    pub warn_at: u64,
}

impl RowSize {
    /// The record of an empty row (none is stored).
    pub const EMPTY: Self = Self {
        bound: 0,
        warn_at: RECOMMENDED_ROW,
    };

    /// The stored form.
    pub fn encode(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.bound.to_be_bytes());
        out[8..].copy_from_slice(&self.warn_at.to_be_bytes());
        out
    }

    /// Decodes a stored record; a wrong length is corruption.
    pub fn decode(v: &[u8]) -> Result<Self> {
        let corrupt = || Error::Corrupt(format!("row size record of {} bytes, not 16", v.len()));
        let bound: [u8; 8] = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(corrupt)?;
        let warn_at: [u8; 8] = v
            .get(8..)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(corrupt)?;
        Ok(Self {
            bound: u64::from_be_bytes(bound),
            warn_at: u64::from_be_bytes(warn_at),
        })
    }

    /// Whether a row with this record and a new bound of `bound` must be measured.
    pub fn needs_measuring(self, bound: u64) -> bool {
        bound > MAX_ROW || bound > self.warn_at
    }

    /// The record once the row is measured at `size` bytes, and whether this is the
    /// row's crossing of the recommended size (to report).
    pub fn measured(self, size: u64) -> (Self, bool) {
        if size > RECOMMENDED_ROW {
            let first = self.warn_at != u64::MAX;
            let record = Self {
                bound: size,
                warn_at: u64::MAX,
            };
            return (record, first);
        }
        let record = Self {
            bound: size,
            warn_at: RECOMMENDED_ROW.max(size.saturating_add(REMEASURE_AFTER_BYTES)),
        };
        (record, false)
    }
}

/// Bytes one cell adds to its row's size: its qualifier and its value.
pub(crate) fn cell_bytes(key: &[u8], value_len: usize) -> Result<u64> {
    let p = KeyParts::parse(key)?;
    Ok((p.qualifier_len(key) + value_len) as u64)
}

/// The record of the row with prefix `row_prefix` in `snapshot`; none means empty.
pub(crate) fn stored(
    snapshot: &fjall::Snapshot,
    rows: &Keyspace,
    row_prefix: &[u8],
) -> Result<RowSize> {
    match snapshot.get(rows, row_prefix)? {
        Some(v) => RowSize::decode(&v),
        None => Ok(RowSize::EMPTY),
    }
}

/// Calls `f(key, parts, value size)` for every stored cell key in `[lo, hi)` (`hi`
/// `None`: to the end), in key order, without reading values stored apart from keys.
///
/// fjall's iterator guard yields a key or a value size, not both, so two iterators walk
/// the same snapshot range in lockstep: they see the same entries in the same order.
pub(crate) fn for_each_cell(
    snapshot: &fjall::Snapshot,
    cells: &Keyspace,
    lo: &[u8],
    hi: Option<&[u8]>,
    mut f: impl FnMut(&[u8], &KeyParts, usize) -> Result<()>,
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
        f(&key, &KeyParts::parse(&key)?, size as usize)?;
    }
    Ok(())
}

/// Gives every non-empty row a size record, once, in a data directory written before
/// records existed; then marks them complete. Safe to repeat after a crash.
pub(crate) fn ensure_records(
    db: &Database,
    cells: &Keyspace,
    rows: &Keyspace,
    meta: &Keyspace,
) -> Result<()> {
    let snapshot = db.snapshot();
    if snapshot.get(meta, ROW_SIZES_KEY)?.is_some() {
        return Ok(());
    }
    let mut batch = db.batch();
    let mut pending = 0usize;
    let mut current: Option<(Vec<u8>, u64)> = None;
    let mut flush = |batch: &mut fjall::OwnedWriteBatch, row: (Vec<u8>, u64)| -> Result<()> {
        let (prefix, bytes) = row;
        let key_len = crate::keys::row_of_prefix(&prefix).len() as u64;
        let record = RowSize::EMPTY.measured(key_len + bytes).0;
        batch.insert(rows, prefix, record.encode());
        pending += 1;
        if pending >= BUILD_BATCH_ROWS {
            std::mem::replace(batch, db.batch()).commit()?;
            pending = 0;
        }
        Ok(())
    };
    for_each_cell(&snapshot, cells, &[], None, |key, p, size| {
        let prefix = &key[..p.row_end];
        let bytes = (p.qualifier_len(key) + size) as u64;
        match current.as_mut() {
            Some((row, total)) if row.as_slice() == prefix => *total += bytes,
            _ => {
                if let Some(done) = current.replace((prefix.to_vec(), bytes)) {
                    flush(&mut batch, done)?;
                }
            }
        }
        Ok(())
    })?;
    if let Some(done) = current {
        flush(&mut batch, done)?;
    }
    batch.insert(meta, ROW_SIZES_KEY, [RECORDS_VERSION]);
    batch.commit()?;
    db.persist(fjall::PersistMode::SyncAll)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::db::DropRows;
    use crate::mutation::Mutation;
    use crate::schema::{FamilySpec, GcRule, TableSpec};
    use crate::{Durability, Engine, Options};

    const I: &str = "projects/p/instances/rowsize";

    fn tempdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("almanac-rowsize-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn set(q: &str, v: &str) -> Mutation {
        Mutation::SetCell {
            family: "f".into(),
            qualifier: q.into(),
            timestamp_us: -1,
            value: v.into(),
        }
    }

    /// Every size record: (row key, bound).
    fn records(e: &Engine) -> Vec<(Vec<u8>, u64)> {
        let snapshot = e.inner.db.snapshot();
        snapshot
            .iter(&e.inner.rows)
            .map(|g| {
                let (k, v) = g.into_inner().unwrap();
                (
                    crate::keys::row_of_prefix(&k),
                    RowSize::decode(&v).unwrap().bound,
                )
            })
            .collect()
    }

    #[test]
    fn records_follow_every_way_a_row_goes() {
        let clock = Arc::new(ManualClock::new(10_000_000_000));
        let e = Engine::open(
            tempdir("follow"),
            Options {
                durability: Durability::None,
                sweep_interval: None,
                clock: clock.clone(),
                ..Options::default()
            },
        )
        .unwrap();
        let spec = TableSpec {
            families: vec![(
                "f".into(),
                FamilySpec {
                    gc_rule: GcRule::MaxAge {
                        max_age_us: 1_000_000,
                    },
                    ..FamilySpec::default()
                },
            )],
            ..TableSpec::default()
        };
        e.create_table(I, "t", spec).unwrap();
        e.mutate_row(I, "t", b"a", &[set("q", "12345")]).unwrap();
        // Key 1 + qualifier 1 + value 5; an overwrite counts again (an upper bound).
        assert_eq!(records(&e), vec![(b"a".to_vec(), 7)]);
        e.mutate_row(I, "t", b"a", &[set("q", "12345")]).unwrap();
        assert_eq!(records(&e), vec![(b"a".to_vec(), 13)]);
        // DeleteFromRow makes the bound exact; emptying the row removes its record.
        e.mutate_row(I, "t", b"a", &[Mutation::DeleteFromRow, set("q", "1")])
            .unwrap();
        assert_eq!(records(&e), vec![(b"a".to_vec(), 3)]);
        e.mutate_row(I, "t", b"a", &[Mutation::DeleteFromRow])
            .unwrap();
        assert_eq!(records(&e), vec![]);
        // The sweep writes the exact size, or removes the record of a row it empties.
        e.mutate_row(I, "t", b"a", &[set("q", "1"), set("q", "1")])
            .unwrap();
        e.mutate_row(I, "t", b"b", &[set("q", "1")]).unwrap();
        clock.advance(2_000_000);
        e.mutate_row(I, "t", b"b", &[set("r", "22")]).unwrap();
        e.sweep().unwrap();
        assert_eq!(records(&e), vec![(b"b".to_vec(), 4)]);
        // Dropping a prefix, or all rows, drops the records with the cells.
        e.mutate_row(I, "t", b"c", &[set("q", "1")]).unwrap();
        e.drop_rows(I, "t", &DropRows::Prefix(b"b".to_vec()))
            .unwrap();
        assert_eq!(records(&e), vec![(b"c".to_vec(), 3)]);
        e.drop_rows(I, "t", &DropRows::All).unwrap();
        e.sweep().unwrap();
        assert_eq!(records(&e), vec![]);
    }

    #[test]
    fn older_directories_get_records_on_open() {
        let dir = tempdir("older");
        let e = Engine::open(
            &dir,
            Options {
                durability: Durability::None,
                sweep_interval: None,
                ..Options::default()
            },
        )
        .unwrap();
        let spec = TableSpec {
            families: vec![("f".into(), FamilySpec::default())],
            ..TableSpec::default()
        };
        e.create_table(I, "t", spec).unwrap();
        e.mutate_row(I, "t", b"a", &[set("q", "1"), set("qq", "22")])
            .unwrap();
        e.mutate_row(I, "t", b"b\0", &[set("", "")]).unwrap();
        // Make the directory look as if written before records existed.
        let mut b = e.inner.db.batch();
        for (row, _) in records(&e) {
            b.remove(&e.inner.rows, crate::keys::row_prefix(0, &row));
        }
        b.remove(&e.inner.meta, ROW_SIZES_KEY);
        b.commit().unwrap();
        assert_eq!(records(&e), vec![]);
        e.shutdown().unwrap();
        drop(e);
        let e = Engine::open(&dir, Options::default()).unwrap();
        assert_eq!(
            records(&e),
            vec![(b"a".to_vec(), 1 + (1 + 1) + (2 + 2)), (b"b\0".to_vec(), 2)]
        );
        e.shutdown().unwrap();
    }

    #[test]
    fn records_round_trip_and_warn_once() {
        let r = RowSize {
            bound: 5,
            warn_at: 7,
        };
        assert_eq!(RowSize::decode(&r.encode()).unwrap(), r);
        assert!(RowSize::decode(&[0; 15]).is_err());

        let (under, warn) = RowSize::EMPTY.measured(RECOMMENDED_ROW);
        assert!(!warn);
        assert_eq!(under.warn_at, RECOMMENDED_ROW + REMEASURE_AFTER_BYTES);
        let (over, warn) = under.measured(RECOMMENDED_ROW + 1);
        assert!(warn);
        assert!(!over.needs_measuring(MAX_ROW));
        assert!(over.needs_measuring(MAX_ROW + 1));
        let (again, warn) = over.measured(RECOMMENDED_ROW + 2);
        assert!(!warn, "a row warns once per crossing");
        let (shrunk, _) = again.measured(1);
        assert_eq!(shrunk.warn_at, RECOMMENDED_ROW);
    }
}
