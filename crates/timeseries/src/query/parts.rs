//! How the partitions of one parallel scan share its series.
//!
//! A scan that goes series by series finds each series with a short read (the first
//! row at or after a cursor, or the last before it). Partitions that share a
//! [`SeriesQueue`] share that cursor: each series is found once, by whichever
//! partition asks next, and read by it. Without a queue, every partition finds every
//! series and reads those of its [`Part`] (ordinal modulo the partition count).

use std::ops::Bound;
use std::sync::{Arc, Mutex, PoisonError};

use almanac_engine::Row;
use almanac_engine::filter::RowFilter;
use almanac_engine::rowset::{RowRange, prefix_successor};

use super::{edge_row, series_of};
use crate::catalog::TableMeta;
use crate::error::Result;
use crate::store::WideColumnStore;

/// One of `count` partitions of the series a selection reads.
///
/// With a [`SeriesQueue`] the partitions take series from it as they go; without one,
/// the partition reads the series whose ordinal in key order is `index` modulo `count`,
/// and every partition still finds every series (one short probe each). Reads of a
/// table's series directory split its list by ordinal either way.
#[derive(Debug, Clone)]
pub struct Part {
    /// This partition, `0..count`.
    pub index: usize,
    /// Partitions in all (at least 1).
    pub count: usize,
    /// The series cursor the partitions of one run of the scan share, if they share one.
    pub queue: Option<Arc<SeriesQueue>>,
}

impl PartialEq for Part {
    fn eq(&self, other: &Self) -> bool {
        let same_queue = match (&self.queue, &other.queue) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.index == other.index && self.count == other.count && same_queue
    }
}

impl Part {
    /// Whether the series with `ordinal` in key order is this partition's to read
    /// when the partitions share no queue (every series without a part).
    pub(super) fn owns(part: Option<&Part>, ordinal: usize) -> bool {
        part.is_none_or(|p| ordinal % p.count.max(1) == p.index)
    }

    /// Whether this is the partition that reads what is not split among them.
    pub(super) fn is_first(part: Option<&Part>) -> bool {
        part.is_none_or(|p| p.index == 0)
    }
}

/// The series cursor of one run of a scan, shared by its partitions: a series is found
/// by one probe, whoever asks, instead of once by each partition.
#[derive(Debug, Default)]
pub struct SeriesQueue {
    position: Mutex<Position>,
}

/// How far a walk over a selection's key ranges has got.
#[derive(Debug, Default)]
pub(super) struct Position {
    /// Ranges finished (counted from the walk's first range).
    range: usize,
    /// Where the current range continues; its own bound when `None`.
    bound: Option<Bound<Vec<u8>>>,
}

/// What a partition's [`Walk`] goes over: the series of `ranges`, in key order
/// (`reversed`: from the last), each found as its first row (last, reversed) that
/// passes `filter`, taken from `part`'s queue when it has one.
pub(super) struct Over<'a, S> {
    pub store: &'a S,
    pub meta: &'a TableMeta,
    pub ranges: &'a [RowRange],
    pub filter: Option<RowFilter>,
    pub reversed: bool,
    pub part: Option<&'a Part>,
}

impl<'a, S> Over<'a, S> {
    /// A walk from the start.
    pub fn walk(self) -> Walk<'a, S> {
        Walk {
            over: self,
            local: Position::default(),
            found: 0,
        }
    }
}

/// A partition's walk over the series of [`Over`]. Its position is its part's queue
/// when there is one, else its own.
pub(super) struct Walk<'a, S> {
    over: Over<'a, S>,
    /// The position of a walk without a queue.
    local: Position,
    /// Series found by this walk.
    found: usize,
}

/// A series a [`Walk`] found.
pub(super) struct Found {
    /// Its first row (last, reversed) that passed the walk's filter.
    pub row: Row,
    /// Its series prefix.
    pub series: Vec<u8>,
    /// Whether this partition reads it: always when it came from the queue.
    pub owned: bool,
}

impl<S: WideColumnStore> Walk<'_, S> {
    /// The next series; `None` at the end of the ranges.
    pub fn next(&mut self) -> Result<Option<Found>> {
        let next = match self.over.part.and_then(|p| p.queue.as_ref()) {
            Some(queue) => {
                let mut position = queue
                    .position
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                self.step(&mut position)?
                    .map(|(row, series)| (row, series, true))
            }
            None => {
                let mut position = std::mem::take(&mut self.local);
                let next = self.step(&mut position);
                self.local = position;
                next?.map(|(row, series)| (row, series, Part::owns(self.over.part, self.found)))
            }
        };
        Ok(next.map(|(row, series, owned)| {
            self.found += 1;
            Found { row, series, owned }
        }))
    }

    fn step(&self, position: &mut Position) -> Result<Option<(Row, Vec<u8>)>> {
        let over = &self.over;
        let count = over.ranges.len();
        while position.range < count {
            let index = if over.reversed {
                count - 1 - position.range
            } else {
                position.range
            };
            let range = &over.ranges[index];
            let (start, end) = match (&position.bound, over.reversed) {
                (Some(b), false) => (b.clone(), range.end.clone()),
                (Some(b), true) => (range.start.clone(), b.clone()),
                (None, _) => (range.start.clone(), range.end.clone()),
            };
            let found = edge_row(
                over.store,
                over.meta,
                &start,
                &end,
                over.filter.clone(),
                over.reversed,
            )?;
            let Some(row) = found else {
                position.range += 1;
                position.bound = None;
                continue;
            };
            let series = series_of(&row.key)?;
            if over.reversed {
                // Every key of the series starts with it: what is before it is the
                // series before.
                position.bound = Some(Bound::Excluded(series.clone()));
            } else if let Some(next) = prefix_successor(&series) {
                position.bound = Some(Bound::Included(next));
            } else {
                position.range += 1;
                position.bound = None;
            }
            return Ok(Some((row, series)));
        }
        Ok(None)
    }
}
