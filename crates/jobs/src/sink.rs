//! Writes mapped rows into a table, [`MAX_RECORDS_PER_WRITE`] records at a time, and
//! keeps what was written and what was rejected by row, for run summaries, task
//! progress and error reports.

use almanac_timeseries::limits::MAX_RECORDS_PER_WRITE;
use almanac_timeseries::{Error as SeriesError, Record, SharedStore, TimeSeries};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::mapping::Model;

/// A row that was not written, or not wholly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Rows the mapping could not read (no time, no measure name).
    pub parse_failures: u64,
    /// Records the table refused (bad values, outside retention, version conflicts).
    pub ingestion_failures: u64,
    /// The first [`MAX_REJECTIONS_KEPT`] refusals of either kind, with their reasons.
    pub rejected: Vec<Rejection>,
}

/// Most rejections kept for a report: enough to fix a file or a query by, bounded so
/// that a wholly wrong mapping does not fill the memory.
pub const MAX_REJECTIONS_KEPT: usize = 1000;

impl Written {
    /// Whether anything was refused.
    pub fn any_refused(&self) -> bool {
        self.parse_failures + self.ingestion_failures > 0
    }

    /// The refusals in one sentence.
    pub fn refusals(&self) -> String {
        format!(
            "{} rows could not be mapped to records and {} records were refused",
            self.parse_failures, self.ingestion_failures
        )
    }

    fn reject(&mut self, row: u64, reason: String) {
        if self.rejected.len() < MAX_REJECTIONS_KEPT {
            self.rejected.push(Rejection { row, reason });
        }
    }
}

/// Where rows go: a table, the mapping into it, and the version of every record
/// (`None`: the default of 1).
#[derive(Debug, Clone, Copy)]
pub struct Destination<'a> {
    /// Database.
    pub database: &'a str,
    /// Table.
    pub table: &'a str,
    /// The mapping.
    pub model: &'a Model,
    /// Version of every record.
    pub version: Option<i64>,
}

/// Writes `rows` (cells as text, `None` for null; `numbers[i]` is row `i`'s line or
/// position, for reports) into `to`. Adds to `out`; fails only when the table cannot
/// be written at all.
pub fn write_rows(
    ts: &TimeSeries<SharedStore>,
    to: Destination<'_>,
    rows: &[Vec<Option<String>>],
    numbers: &[u64],
    out: &mut Written,
) -> Result<()> {
    let mut records: Vec<Record<'_>> = Vec::new();
    let mut origin: Vec<u64> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let n = numbers.get(i).copied().unwrap_or_default();
        out.rows += 1;
        match to.model.records(row) {
            Ok(rs) => {
                for mut r in rs {
                    r.version = to.version;
                    records.push(r);
                    origin.push(n);
                }
            }
            Err(reason) => {
                out.parse_failures += 1;
                out.reject(n, reason);
            }
        }
    }
    for (chunk, rows_of) in records
        .chunks(MAX_RECORDS_PER_WRITE)
        .zip(origin.chunks(MAX_RECORDS_PER_WRITE))
    {
        let outcome = match ts.write_records_outcome(to.database, to.table, None, chunk) {
            Ok(o) => o,
            Err(SeriesError::Rejected(list)) => almanac_timeseries::WriteOutcome {
                ingested: Default::default(),
                rejected: list,
            },
            Err(e) => return Err(e.into()),
        };
        out.records += outcome.ingested.total;
        for r in outcome.rejected {
            out.ingestion_failures += 1;
            out.reject(rows_of.get(r.index).copied().unwrap_or_default(), r.reason);
        }
    }
    Ok(())
}
