//! A sample of a table's rows, spread over its key space.

use std::ops::Bound;

use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::{Engine, ReadRequest, Row};

use crate::Result;

/// Most rows sampled.
pub const SAMPLE_ROWS: usize = 2000;
/// Sampling stops once the rows read hold this many bytes (a row may hold 256 MB).
pub const SAMPLE_BYTES: u64 = 64 * 1024 * 1024;

/// Up to [`SAMPLE_ROWS`] rows: from the start of each piece SampleRowKeys splits the
/// table into, an equal share of the rows each; no more once they hold
/// [`SAMPLE_BYTES`] (the row that crosses it is kept, so a large row is still seen).
pub fn rows(engine: &Engine, instance: &str, table: &str) -> Result<Vec<Row>> {
    let splits = engine.sample_row_keys(instance, table, &RowRange::all())?;
    let starts: Vec<Vec<u8>> = std::iter::once(Vec::new())
        .chain(
            splits
                .iter()
                .map(|(k, _)| k.clone())
                .filter(|k| !k.is_empty()),
        )
        .collect();
    let per_piece = (SAMPLE_ROWS / starts.len()).max(1);
    let mut out: Vec<Row> = Vec::new();
    let mut bytes = 0u64;
    for start in starts {
        if out.len() >= SAMPLE_ROWS || bytes >= SAMPLE_BYTES {
            break;
        }
        if out.last().is_some_and(|r| r.key >= start) {
            continue;
        }
        let from = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(start)
        };
        let req = ReadRequest {
            rows: RowSet {
                keys: Vec::new(),
                ranges: vec![RowRange {
                    start: from,
                    end: Bound::Unbounded,
                }],
            },
            limit: Some(per_piece as u64),
            ..ReadRequest::default()
        };
        for row in engine.read_rows(instance, table, req)? {
            let row = row?;
            bytes += row.bytes();
            out.push(row);
            if bytes >= SAMPLE_BYTES {
                break;
            }
        }
    }
    Ok(out)
}
