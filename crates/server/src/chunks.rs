//! ReadRows response framing: rows become `CellChunk`s as the Data API specifies.
//!
//! For each row: the first chunk carries the row key; a chunk carries the family
//! name when it changes and the qualifier when it or the family changes; values
//! larger than [`VALUE_PIECE_BYTES`] are split across chunks, every piece but the
//! last stating the whole `value_size`; the row's last chunk has `commit_row`.
//! Chunks are packed into responses of about [`RESPONSE_BYTES`] (clients refuse
//! messages over 4 MiB by default, so a large cell spans responses). A response
//! that starts in the middle of a row repeats the row key on its first chunk:
//! Google's Python client checks each response's first key against the last row
//! it yielded, and accepts a repeated key that equals the current one.

use almanac_api::google::bigtable::v2::ReadRowsResponse;
use almanac_api::google::bigtable::v2::read_rows_response::CellChunk;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use almanac_engine::Row;
use bytes::Bytes;

/// Largest value piece in one chunk: large cells stream in pieces so no message
/// grows with the cell (clients reassemble them using `value_size`).
pub const VALUE_PIECE_BYTES: usize = 1024 * 1024;
/// Target size of one ReadRows response message.
pub const RESPONSE_BYTES: usize = 1024 * 1024;

/// Accumulates chunks into responses.
#[derive(Debug, Default)]
pub struct Framer {
    chunks: Vec<CellChunk>,
    bytes: usize,
}

impl Framer {
    /// Appends a row's chunks; returns finished responses, if any are full.
    pub fn push_row(&mut self, row: Row) -> Vec<ReadRowsResponse> {
        let mut out = Vec::new();
        let key = Bytes::from(row.key);
        let n = row.cells.len();
        let mut prev: Option<(std::sync::Arc<str>, std::sync::Arc<[u8]>)> = None;
        for (i, cell) in row.cells.into_iter().enumerate() {
            let family_changed = prev.as_ref().is_none_or(|(f, _)| *f != cell.family);
            let qualifier_changed =
                family_changed || prev.as_ref().is_none_or(|(_, q)| *q != cell.qualifier);
            let value = Bytes::from(cell.value);
            let total = value.len();
            let pieces = total.div_ceil(VALUE_PIECE_BYTES).max(1);
            for p in 0..pieces {
                let first_piece = p == 0;
                let last_piece = p + 1 == pieces;
                let piece =
                    value.slice(p * VALUE_PIECE_BYTES..((p + 1) * VALUE_PIECE_BYTES).min(total));
                let starts_response = self.chunks.is_empty();
                let chunk = CellChunk {
                    row_key: if (i == 0 && first_piece) || starts_response {
                        key.clone()
                    } else {
                        Bytes::new()
                    },
                    family_name: (first_piece && family_changed).then(|| cell.family.to_string()),
                    qualifier: (first_piece && qualifier_changed).then(|| cell.qualifier.to_vec()),
                    timestamp_micros: if first_piece { cell.timestamp_us } else { 0 },
                    labels: if first_piece {
                        cell.labels.clone()
                    } else {
                        Vec::new()
                    },
                    value_size: if last_piece {
                        0
                    } else {
                        i32::try_from(total).unwrap_or(i32::MAX)
                    },
                    row_status: (i + 1 == n && last_piece).then_some(RowStatus::CommitRow(true)),
                    value: piece,
                };
                self.bytes += chunk.value.len() + chunk.row_key.len() + 64;
                self.chunks.push(chunk);
                if self.bytes >= RESPONSE_BYTES {
                    out.push(self.take());
                }
            }
            prev = Some((cell.family, cell.qualifier));
        }
        out
    }

    /// Whether chunks are waiting.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The pending chunks as one response.
    pub fn take(&mut self) -> ReadRowsResponse {
        self.bytes = 0;
        ReadRowsResponse {
            chunks: std::mem::take(&mut self.chunks),
            last_scanned_row_key: Bytes::new(),
            request_stats: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use almanac_engine::Cell;

    fn cell(f: &str, q: &str, ts: i64, v: Vec<u8>) -> Cell {
        Cell {
            family: f.into(),
            qualifier: q.as_bytes().into(),
            timestamp_us: ts,
            value: v,
            labels: vec![],
        }
    }

    #[test]
    fn frames_like_the_spec() {
        let mut f = Framer::default();
        let big = vec![7u8; VALUE_PIECE_BYTES * 2 + 5];
        let out = f.push_row(Row {
            key: b"r".to_vec(),
            cells: vec![
                cell("a", "x", 2, b"1".to_vec()),
                cell("a", "x", 1, b"2".to_vec()),
                cell("b", "x", 1, big),
            ],
        });
        let mut chunks: Vec<CellChunk> = out.into_iter().flat_map(|r| r.chunks).collect();
        chunks.extend(f.take().chunks);
        assert_eq!(chunks.len(), 5);
        assert_eq!(&chunks[0].row_key[..], b"r");
        assert_eq!(chunks[0].family_name.as_deref(), Some("a"));
        assert!(
            chunks[1].row_key.is_empty()
                && chunks[1].family_name.is_none()
                && chunks[1].qualifier.is_none()
        );
        assert_eq!(chunks[2].family_name.as_deref(), Some("b"));
        assert_eq!(chunks[2].qualifier.as_deref(), Some(&b"x"[..]));
        assert_eq!(chunks[2].value_size as usize, VALUE_PIECE_BYTES * 2 + 5);
        assert_eq!(chunks[4].value_size, 0);
        assert_eq!(chunks[4].value.len(), 5);
        assert!(chunks[4].row_status.is_some() && chunks[3].row_status.is_none());
    }
}
