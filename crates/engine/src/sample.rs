//! SampleRowKeys: row keys that split a table into pieces of roughly equal size.
//!
//! One pass over the table's keys sums the stored size of every cell (key plus value)
//! and emits the last row key of each piece of about [`SAMPLE_PIECE_BYTES`], with the
//! bytes up to it. The last sample is the empty key with the table's total size, as
//! the service returns. Value sizes come from the index ([`rowsize::for_each_cell`]):
//! values stored apart from their keys (large ones) are never read. (A full pass over
//! the keys: fine for the sizes one machine holds; an index of row sizes would make it
//! constant-time and is future work.)

use std::ops::Bound;

use crate::db::{Engine, encoded_range};
use crate::error::Result;
use crate::keys;
use crate::rowset::RowRange;
use crate::rowsize;

/// Target bytes between two samples: small enough that a modest table still splits
/// into several pieces for parallel readers, large enough that the list stays short.
pub const SAMPLE_PIECE_BYTES: u64 = 4 * 1024 * 1024;

impl Engine {
    /// `(row key, bytes up to and including that row)` pairs over `range`; the last
    /// key is the range's end (empty for the end of the table).
    pub fn sample_row_keys(
        &self,
        instance: &str,
        table: &str,
        range: &RowRange,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let meta = self.table(instance, table)?;
        let (lo, hi) = encoded_range(meta.id, range);
        let snapshot = self.inner.db.snapshot();
        let mut out = Vec::new();
        let (mut total, mut last_emit) = (0u64, 0u64);
        let mut row: Vec<u8> = Vec::new();
        rowsize::for_each_cell(
            &snapshot,
            &self.inner.cells,
            &lo,
            Some(&hi),
            |k, p, size| {
                if k[..p.row_end] != row[..] {
                    if !row.is_empty() && total - last_emit >= SAMPLE_PIECE_BYTES {
                        out.push((keys::row_of_prefix(&row), total));
                        last_emit = total;
                    }
                    row = k[..p.row_end].to_vec();
                }
                total += k.len() as u64 + size;
                Ok(true)
            },
        )?;
        let end = match &range.end {
            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
            Bound::Unbounded => Vec::new(),
        };
        out.retain(|(k, _)| end.is_empty() || *k < end);
        out.push((end, total));
        Ok(out)
    }
}
