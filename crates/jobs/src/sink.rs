//! Writes mapped rows into a table, [`MAX_RECORDS_PER_WRITE`] records at a time, and
//! keeps what was written and what was rejected by row, for run summaries, task
//! progress and error reports.

use almanac_timeseries::limits::MAX_RECORDS_PER_WRITE;
use almanac_timeseries::{EmbeddedStore, Error as SeriesError, Record, TimeSeries};
use serde::Serialize;

use crate::error::Result;
use crate::mapping::Model;

/// A row that was not written, or not wholly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// The row's number: its line in a file, its position in a result (from 1).
    pub row: u64,
    /// Why.
    pub reason: String,
}

/// What a sink has written so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Records written.
    pub records: u64,
    /// Rows read.
    pub rows: u64,
    /// Rows refused, wholly or in part (counted even past [`MAX_REJECTIONS_KEPT`]).
    pub rejected_rows: u64,
    /// The first [`MAX_REJECTIONS_KEPT`] of them, with their reasons.
    pub rejected: Vec<Rejection>,
}

/// Most rejections kept for a report: enough to fix a file or a query by, bounded so
/// that a wholly wrong mapping does not fill the memory.
pub const MAX_REJECTIONS_KEPT: usize = 1000;

impl Written {
    fn reject(&mut self, row: u64, reason: String) {
        if self.rejected.len() < MAX_REJECTIONS_KEPT {
            self.rejected.push(Rejection { row, reason });
        }
    }
}

/// Writes `rows` (cells as text, `None` for null; row numbers from `first_row`)
/// into `db.table` through `model`, with `version` on every record (`None`: the
/// default of 1). Adds to `out`; fails only when the table cannot be written at all.
#[expect(
    clippy::too_many_arguments,
    reason = "the target, the rows and the tally of one write"
)]
pub fn write_rows(
    ts: &TimeSeries<EmbeddedStore>,
    db: &str,
    table: &str,
    model: &Model,
    rows: &[Vec<Option<String>>],
    first_row: u64,
    version: Option<i64>,
    out: &mut Written,
) -> Result<()> {
    let mut records: Vec<Record<'_>> = Vec::new();
    let mut origin: Vec<u64> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let n = first_row + i as u64;
        out.rows += 1;
        match model.records(row) {
            Ok(rs) => {
                for mut r in rs {
                    r.version = version;
                    records.push(r);
                    origin.push(n);
                }
            }
            Err(reason) => {
                out.rejected_rows += 1;
                out.reject(n, reason);
            }
        }
    }
    let mut last_rejected = None;
    for (chunk, rows_of) in records
        .chunks(MAX_RECORDS_PER_WRITE)
        .zip(origin.chunks(MAX_RECORDS_PER_WRITE))
    {
        let outcome = match ts.write_records_outcome(db, table, None, chunk) {
            Ok(o) => o,
            Err(SeriesError::Rejected(list)) => almanac_timeseries::WriteOutcome {
                ingested: Default::default(),
                rejected: list,
            },
            Err(e) => return Err(e.into()),
        };
        out.records += outcome.ingested.total;
        for r in outcome.rejected {
            let n = rows_of.get(r.index).copied().unwrap_or(first_row);
            if last_rejected != Some(n) {
                out.rejected_rows += 1;
                last_rejected = Some(n);
            }
            out.reject(n, r.reason);
        }
    }
    Ok(())
}
