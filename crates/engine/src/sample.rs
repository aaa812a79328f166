//! SampleRowKeys: row keys that split a table into pieces of roughly equal size.
//!
//! One pass over the table's keys sums the stored size of every cell (key plus value).
//! Each time about [`SAMPLE_PIECE_BYTES`] have passed, the next row's key is a sample,
//! with the bytes of the rows before it (the proto's `offset_bytes`). The table's last
//! row is always a sample (as the official emulator answers, so a client that drops
//! the empty key, like Google's Go client, still gets one key from a small table),
//! and the last sample is the empty key with the table's total size, as the service
//! returns. Value sizes come from the index ([`rowsize::for_each_cell`]): values
//! stored apart from their keys (large ones) are never read. (A full pass over the
//! keys: fine for the sizes one machine holds; an index of row sizes would make it
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
    /// `(row key, bytes of the rows before it)` pairs over `range`, ending with the
    /// range's last row and then the range's end (the empty key for the end of the
    /// table) with the total; offsets strictly increase.
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
        let (mut total, mut last_emit, mut before_row) = (0u64, 0u64, 0u64);
        let mut row: Vec<u8> = Vec::new();
        let mut row_emitted = false;
        rowsize::for_each_cell(
            &snapshot,
            &self.inner.cells,
            &lo,
            Some(&hi),
            |k, p, size| {
                if k[..p.row_end] != row[..] {
                    row = k[..p.row_end].to_vec();
                    before_row = total;
                    row_emitted = total - last_emit >= SAMPLE_PIECE_BYTES;
                    if row_emitted {
                        out.push((keys::row_of_prefix(&row), total));
                        last_emit = total;
                    }
                }
                total += k.len() as u64 + size;
                Ok(true)
            },
        )?;
        if !row.is_empty() && !row_emitted {
            out.push((keys::row_of_prefix(&row), before_row));
        }
        let end = match &range.end {
            Bound::Included(k) | Bound::Excluded(k) => k.clone(),
            Bound::Unbounded => Vec::new(),
        };
        out.retain(|(k, _)| end.is_empty() || *k < end);
        out.push((end, total));
        Ok(out)
    }
}
