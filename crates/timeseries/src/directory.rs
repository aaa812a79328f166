//! The series directory of a table kept in a remote Bigtable ([`TableMeta::indexed`]):
//! one row per series, so that a query finds the series it reads in one ReadRows
//! instead of probing the table for them one by one (a round trip each).
//!
//! ```text
//! row key  = '@' series        (no point's key starts with '@': a measure name is
//!                               never empty and '@' inside it is escaped)
//! cell     = x:s, empty value, timestamp = the end of the hour of the newest point
//!            this front-end has written to the series (µs, whole milliseconds)
//! ```
//!
//! 1. A write registers its series before it writes their points: a series this
//!    front-end has not registered, or whose point is newer than the hour it
//!    registered, gets a cell (one unconditional MutateRows for the request); writes
//!    within the hour cost nothing more.
//! 2. The cell's timestamp is never older than a point of the series, so the table's
//!    retention (the family's GC rule) collects a directory row only after every
//!    point it stood for; a series whose points all expired drops out by itself.
//! 3. A query reads the directory rows under its selection's key ranges (the same
//!    ranges, '@' in front), then every series' window in one read.
//!
//! A front-end killed between registering and writing leaves a series with no point,
//! which costs a query an empty range. Byte layout: docs/format.md.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Mutex;

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::{ReadRequest, RowMutations};

use crate::catalog::{META_FAMILY, TableMeta};
use crate::error::{Error, Result};
use crate::store::WideColumnStore;

/// The first byte of every directory row's key.
pub const DIRECTORY_PREFIX: u8 = b'@';
/// The byte after [`DIRECTORY_PREFIX`]: the end of the directory's key range.
const AFTER_DIRECTORY: u8 = DIRECTORY_PREFIX + 1;
/// The qualifier of a directory cell (family [`META_FAMILY`]).
const QUALIFIER: &[u8] = b"s";
/// A directory cell covers the points of its series up to the end of this span: a
/// series is registered again at most once per span of its points' times.
pub const DIRECTORY_SPAN_US: i64 = 3_600_000_000;
/// Series a front-end remembers having registered, per table; past it the memory is
/// cleared, and series are registered again as they are written.
pub const MAX_REMEMBERED_SERIES: usize = 1_000_000;

/// What a front-end has registered in a table's directory: series → the timestamp of
/// its cell.
#[derive(Debug, Default)]
pub(crate) struct Directory {
    registered: Mutex<HashMap<Vec<u8>, i64>>,
}

/// The directory row of `series`.
fn row_key(series: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(series.len() + 1);
    key.push(DIRECTORY_PREFIX);
    key.extend_from_slice(series);
    key
}

/// The timestamp of the cell that covers a point at `time_ns`: the end of its span.
fn covering_ts_us(time_ns: i64) -> i64 {
    let us = time_ns.div_euclid(1000);
    us.div_euclid(DIRECTORY_SPAN_US)
        .saturating_add(1)
        .saturating_mul(DIRECTORY_SPAN_US)
}

impl Directory {
    /// Registers the series of `points` (series, time in ns) that need it, in one
    /// MutateRows; returns once the cells are stored.
    pub(crate) fn register<'p, S: WideColumnStore + ?Sized>(
        &self,
        store: &S,
        meta: &TableMeta,
        points: impl Iterator<Item = (&'p [u8], i64)>,
    ) -> Result<()> {
        let mut needed: HashMap<&[u8], i64> = HashMap::new();
        {
            let registered = self.lock();
            for (series, time_ns) in points {
                let ts = covering_ts_us(time_ns);
                if registered.get(series).is_some_and(|&have| have >= ts) {
                    continue;
                }
                let want = needed.entry(series).or_insert(ts);
                *want = (*want).max(ts);
            }
        }
        if needed.is_empty() {
            return Ok(());
        }
        let rows: Vec<RowMutations> = needed
            .iter()
            .map(|(series, &ts)| RowMutations {
                key: row_key(series),
                mutations: vec![Mutation::SetCell {
                    family: META_FAMILY.to_string(),
                    qualifier: QUALIFIER.to_vec(),
                    timestamp_us: ts,
                    value: Vec::new(),
                }],
            })
            .collect();
        for result in store.mutate_rows(&meta.store_table, &rows)? {
            result?;
        }
        let mut registered = self.lock();
        if registered.len() + needed.len() > MAX_REMEMBERED_SERIES {
            registered.clear();
        }
        for (series, ts) in needed {
            let have = registered.entry(series.to_vec()).or_insert(ts);
            *have = (*have).max(ts);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, i64>> {
        self.registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Every row of a table but its directory: what a read of "everything" means.
pub fn all_points() -> RowSet {
    RowSet {
        keys: Vec::new(),
        ranges: vec![
            RowRange {
                start: Bound::Unbounded,
                end: Bound::Excluded(vec![DIRECTORY_PREFIX]),
            },
            RowRange {
                start: Bound::Included(vec![AFTER_DIRECTORY]),
                end: Bound::Unbounded,
            },
        ],
    }
}

/// The directory rows of the series whose points lie in `range`.
fn directory_range(range: &RowRange) -> RowRange {
    let shift = |bound: &Bound<Vec<u8>>, open: Bound<Vec<u8>>| match bound {
        Bound::Included(k) => Bound::Included(row_key(k)),
        Bound::Excluded(k) => Bound::Excluded(row_key(k)),
        Bound::Unbounded => open,
    };
    RowRange {
        start: shift(&range.start, Bound::Included(vec![DIRECTORY_PREFIX])),
        end: shift(&range.end, Bound::Excluded(vec![AFTER_DIRECTORY])),
    }
}

/// The series under `points` (ranges of point rows), in key order: one read of the
/// directory.
pub(crate) fn series_under<S: WideColumnStore + ?Sized>(
    store: &S,
    meta: &TableMeta,
    points: &RowSet,
) -> Result<Vec<Vec<u8>>> {
    let req = ReadRequest {
        rows: RowSet {
            keys: Vec::new(),
            ranges: points.normalized().iter().map(directory_range).collect(),
        },
        filter: Some(RowFilter::Chain(vec![
            RowFilter::CellsPerRowLimit(1),
            RowFilter::StripValue,
        ])),
        ..ReadRequest::default()
    };
    let mut series = Vec::new();
    store.read_rows(&meta.store_table, req, &mut |row| {
        series.push(row.key[1..].to_vec());
        std::ops::ControlFlow::Continue(())
    })?;
    if series.iter().any(Vec::is_empty) {
        return Err(Error::Corrupt(format!(
            "table {}: a directory row names no series",
            meta.store_table
        )));
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_covers_every_point_of_its_hour() {
        let hour_ns = DIRECTORY_SPAN_US * 1000;
        assert_eq!(covering_ts_us(0), DIRECTORY_SPAN_US);
        assert_eq!(covering_ts_us(hour_ns - 1), DIRECTORY_SPAN_US);
        assert_eq!(covering_ts_us(hour_ns), 2 * DIRECTORY_SPAN_US);
        assert_eq!(covering_ts_us(-1), 0);
        assert_eq!(covering_ts_us(i64::MAX) % 1000, 0);
    }

    #[test]
    fn directory_ranges_mirror_point_ranges() {
        let r = directory_range(&RowRange::prefix(b"cpu#"));
        assert!(r.contains(b"@cpu#h1@"));
        assert!(!r.contains(b"@cpu@"));
        assert!(!r.contains(b"cpu#h1@"));
        let all = directory_range(&RowRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        });
        assert!(all.contains(b"@"));
        assert!(all.contains(b"@\xff\xff"));
        assert!(!all.contains(b"A"));
        assert!(!all.contains(b"?"));
        let points = all_points();
        assert!(points.ranges.iter().all(|r| !r.contains(b"@cpu@")));
        assert!(points.ranges.iter().any(|r| r.contains(b"cpu@0000000001")));
        assert!(points.ranges.iter().any(|r| r.contains(b"\\@x@1")));
    }
}
