//! Counters of one query: what the providers read from storage against what they
//! handed to DataFusion, so pushdown can be seen working (`cells read` vs `rows`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Storage counters shared by every scan of one query.
#[derive(Debug, Default)]
pub struct ScanCounters {
    rows_read: AtomicU64,
    cells_read: AtomicU64,
    rows_produced: AtomicU64,
}

/// A snapshot of [`ScanCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanTotals {
    /// Rows read from storage.
    pub rows_read: u64,
    /// Cells read from storage.
    pub cells_read: u64,
    /// Table rows handed to the query (after decoding; points for time-series tables).
    pub rows_produced: u64,
}

impl ScanCounters {
    /// Adds one scan's progress.
    pub fn add(&self, rows_read: u64, cells_read: u64, rows_produced: u64) {
        self.rows_read.fetch_add(rows_read, Ordering::Relaxed);
        self.cells_read.fetch_add(cells_read, Ordering::Relaxed);
        self.rows_produced
            .fetch_add(rows_produced, Ordering::Relaxed);
    }

    /// The totals so far.
    pub fn totals(&self) -> ScanTotals {
        ScanTotals {
            rows_read: self.rows_read.load(Ordering::Relaxed),
            cells_read: self.cells_read.load(Ordering::Relaxed),
            rows_produced: self.rows_produced.load(Ordering::Relaxed),
        }
    }
}
