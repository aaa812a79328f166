//! ReadRows response framing: rows become `CellChunk`s as the Data API specifies.
//!
//! For each row: the first chunk carries the row key; a chunk carries the family
//! name when it changes and the qualifier when it or the family changes; values
//! larger than [`VALUE_PIECE_BYTES`] are split across chunks, every piece but the
//! last stating the whole `value_size`; the row's last chunk has `commit_row`.
//! Chunks are packed into responses of about [`RESPONSE_BYTES`], in one of two
//! [`Framing`]s:
//! - [`Framing::WholeRows`] (the default): a response ends only at the end of a row,
//!   so a larger row is one response of its own (up to the row limit; the server
//!   allows messages of [`almanac_engine::limits::MAX_MESSAGE_BYTES`]). Cloud Bigtable
//!   frames this way, and Google's Go client relies on it: after every response it
//!   checks that no row or cell is left open.
//! - [`Framing::Split`]: a response ends once full, inside a row if need be, so no
//!   message passes gRPC's default 4 MiB receive limit, which Google's Python client
//!   keeps on its emulator channel. A response that starts inside a row repeats the
//!   row key on its first chunk; the Python client accepts a repeated key equal to
//!   the current one.

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
/// Bytes a chunk costs beyond its value, key and names: timestamp, sizes, labels and
/// protobuf framing, rounded up.
const CHUNK_OVERHEAD_BYTES: usize = 64;

/// Where a response may end; see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Framing {
    /// Only at the end of a row.
    #[default]
    WholeRows,
    /// Once about [`RESPONSE_BYTES`] are waiting, even inside a row.
    Split,
}

impl Framing {
    /// The framing for a client: [`Framing::Split`] for gRPC's Python library (whose
    /// channel to an emulator keeps the 4 MiB receive limit), else whole rows.
    pub fn for_user_agent(user_agent: Option<&str>) -> Self {
        if user_agent.is_some_and(|ua| ua.contains("grpc-python/")) {
            Self::Split
        } else {
            Self::WholeRows
        }
    }
}

/// Accumulates chunks into responses.
#[derive(Debug, Default)]
pub struct Framer {
    framing: Framing,
    chunks: Vec<CellChunk>,
    bytes: usize,
}

impl Framer {
    /// A framer that ends responses as `framing` allows.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            ..Self::default()
        }
    }

    /// Appends a row's chunks; returns the responses that are full.
    pub fn push_row(&mut self, row: Row) -> Vec<ReadRowsResponse> {
        let split = self.framing == Framing::Split;
        let mut out = Vec::new();
        if !split && !self.chunks.is_empty() && self.bytes + row_bytes(&row) > RESPONSE_BYTES {
            // Whole rows: the rows waiting leave first, so a large row is alone.
            out.push(self.take());
        }
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
                    row_key: if (i == 0 && first_piece) || (split && starts_response) {
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
                self.bytes += chunk_bytes(&chunk);
                self.chunks.push(chunk);
                if split && self.bytes >= RESPONSE_BYTES {
                    out.push(self.take());
                }
            }
            prev = Some((cell.family, cell.qualifier));
        }
        if self.bytes >= RESPONSE_BYTES {
            out.push(self.take());
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

/// About how many bytes a chunk takes in a response: its value, key and names, and
/// [`CHUNK_OVERHEAD_BYTES`].
fn chunk_bytes(chunk: &CellChunk) -> usize {
    chunk.value.len()
        + chunk.row_key.len()
        + chunk.family_name.as_ref().map_or(0, String::len)
        + chunk.qualifier.as_ref().map_or(0, Vec::len)
        + CHUNK_OVERHEAD_BYTES
}

/// About how many bytes `row` takes in a response.
fn row_bytes(row: &Row) -> usize {
    row.key.len()
        + row
            .cells
            .iter()
            .map(|c| c.value.len() + c.family.len() + c.qualifier.len() + CHUNK_OVERHEAD_BYTES)
            .sum::<usize>()
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
        // Past RESPONSE_BYTES: the whole row leaves as one response.
        assert_eq!(out.len(), 1);
        let chunks = out.into_iter().flat_map(|r| r.chunks).collect::<Vec<_>>();
        assert!(f.is_empty());
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

    #[test]
    fn responses_end_only_at_row_ends() {
        let mut f = Framer::default();
        let mut responses = Vec::new();
        for i in 0..40u8 {
            // Rows of 100 KiB in two cells; a 3 MiB row in the middle.
            let size = if i == 20 { 3 * 1024 * 1024 } else { 50 * 1024 };
            let row = Row {
                key: vec![b'r', i],
                cells: vec![
                    cell("a", "x", 2, vec![i; size]),
                    cell("a", "y", 1, vec![i; size]),
                ],
            };
            responses.extend(f.push_row(row));
        }
        responses.push(f.take());
        assert!(responses.len() > 3, "{} responses", responses.len());
        let mut rows = 0;
        for r in &responses {
            let last = r.chunks.last().map(|c| c.row_status.is_some());
            assert_eq!(last, Some(true), "a response ends inside a row");
            rows += r.chunks.iter().filter(|c| c.row_status.is_some()).count();
            // Every response but the big row's stays near the target size.
            let bytes: usize = r.chunks.iter().map(|c| c.value.len()).sum();
            let holds_the_big_row = bytes >= 6 * 1024 * 1024;
            if holds_the_big_row {
                let rows_in_it = r.chunks.iter().filter(|c| c.row_status.is_some()).count();
                assert_eq!(rows_in_it, 1, "the large row has a response of its own");
            }
            assert!(
                holds_the_big_row || bytes < RESPONSE_BYTES + 200 * 1024,
                "{bytes}"
            );
        }
        assert_eq!(rows, 40);
    }

    #[test]
    fn split_framing_keeps_responses_small_and_repeats_the_key() {
        let mut f = Framer::new(Framing::Split);
        let big = vec![7u8; VALUE_PIECE_BYTES * 3 + 5];
        let mut responses = f.push_row(Row {
            key: b"r".to_vec(),
            cells: vec![cell("a", "x", 1, big)],
        });
        responses.push(f.take());
        assert_eq!(responses.len(), 4);
        for r in &responses {
            let bytes: usize = r.chunks.iter().map(|c| c.value.len()).sum();
            assert!(bytes <= VALUE_PIECE_BYTES, "{bytes}");
            assert_eq!(
                &r.chunks[0].row_key[..],
                b"r",
                "each response names its row"
            );
        }
        let committed = responses
            .iter()
            .flat_map(|r| &r.chunks)
            .filter(|c| c.row_status.is_some());
        assert_eq!(committed.count(), 1);
    }

    #[test]
    fn python_clients_get_split_framing() {
        let python = "grpc-python/1.66.1 grpc-c/43.0.0 (linux; chttp2)";
        assert_eq!(Framing::for_user_agent(Some(python)), Framing::Split);
        for other in [Some("grpc-go/1.67.1"), Some("tonic/0.14"), None] {
            assert_eq!(Framing::for_user_agent(other), Framing::WholeRows);
        }
    }
}
