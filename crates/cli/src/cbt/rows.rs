//! Rows out of `ReadRows`: reassembling cell chunks into rows, and printing a row
//! the way `cbt` does.
//!
//! The server streams `CellChunk`s. A chunk with a row key starts a row; family and
//! qualifier carry over until a chunk names new ones; a value split across chunks
//! has `value_size > 0` on every piece but the last; `commit_row` ends the row and
//! `reset_row` throws away what was gathered of it.

use almanac_api::google::bigtable::v2 as data;
use almanac_api::google::bigtable::v2::bigtable_client::BigtableClient;
use almanac_api::google::bigtable::v2::read_rows_response::CellChunk;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use tonic::transport::Channel;

use super::status_error;

/// One cell of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Column family.
    pub family: String,
    /// Column qualifier.
    pub qualifier: Vec<u8>,
    /// Version, microseconds since the epoch.
    pub timestamp_us: i64,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A whole row as the server sent it (cells in family, qualifier, newest-first order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Row key.
    pub key: Vec<u8>,
    /// The row's cells.
    pub cells: Vec<Cell>,
}

/// Turns a stream of chunks into rows.
#[derive(Debug, Default)]
pub struct RowAssembler {
    key: Vec<u8>,
    family: String,
    qualifier: Vec<u8>,
    timestamp_us: i64,
    value: Vec<u8>,
    /// A value is split and more pieces of it are to come.
    in_value: bool,
    cells: Vec<Cell>,
}

impl RowAssembler {
    /// Takes one chunk; returns the row it completes, if any.
    pub fn push(&mut self, chunk: CellChunk) -> anyhow::Result<Option<Row>> {
        if chunk.row_status == Some(RowStatus::ResetRow(true)) {
            *self = Self::default();
            return Ok(None);
        }
        if !chunk.row_key.is_empty() {
            anyhow::ensure!(!self.in_value, "row key changed inside a split value");
            if chunk.row_key.as_ref() != self.key.as_slice() {
                anyhow::ensure!(
                    self.cells.is_empty(),
                    "new row started before the previous one committed"
                );
                self.key = chunk.row_key.to_vec();
            }
        }
        anyhow::ensure!(!self.key.is_empty(), "cell chunk before any row key");
        if let Some(f) = chunk.family_name {
            self.family = f;
        }
        if let Some(q) = chunk.qualifier {
            self.qualifier = q;
        }
        if !self.in_value {
            self.timestamp_us = chunk.timestamp_micros;
            self.value.clear();
        }
        self.value.extend_from_slice(&chunk.value);
        self.in_value = chunk.value_size > 0;
        if !self.in_value {
            self.cells.push(Cell {
                family: self.family.clone(),
                qualifier: self.qualifier.clone(),
                timestamp_us: self.timestamp_us,
                value: std::mem::take(&mut self.value),
            });
        }
        if chunk.row_status == Some(RowStatus::CommitRow(true)) {
            anyhow::ensure!(!self.in_value, "row committed inside a split value");
            let row = Row {
                key: std::mem::take(&mut self.key),
                cells: std::mem::take(&mut self.cells),
            };
            *self = Self::default();
            return Ok(Some(row));
        }
        Ok(None)
    }

    /// Whether a row is half gathered (the stream must not end here).
    pub fn is_mid_row(&self) -> bool {
        !self.key.is_empty()
    }
}

/// Sends `req` and calls `each` with every row, in the order the server sends them.
pub async fn for_each_row(
    client: &mut BigtableClient<Channel>,
    req: data::ReadRowsRequest,
    mut each: impl FnMut(Row) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut stream = client
        .read_rows(req)
        .await
        .map_err(|s| status_error("ReadRows", s))?
        .into_inner();
    let mut assembler = RowAssembler::default();
    while let Some(resp) = stream
        .message()
        .await
        .map_err(|s| status_error("ReadRows", s))?
    {
        for chunk in resp.chunks {
            if let Some(row) = assembler.push(chunk)? {
                each(row)?;
            }
        }
    }
    anyhow::ensure!(
        !assembler.is_mid_row(),
        "ReadRows stream ended inside a row"
    );
    Ok(())
}

/// Bytes as text when they are printable UTF-8, else quoted with escapes.
pub fn printable(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.is_empty() && !s.chars().any(char::is_control) => s.to_string(),
        Ok(s) => format!("{s:?}"),
        Err(_) => format!("\"{}\"", bytes.escape_ascii()),
    }
}

/// A row as `cbt read` prints it: dashes, the key, then per cell
/// `  fam:qual @ time` and the value indented by four spaces.
pub fn format_row(row: &Row) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", "-".repeat(40));
    let _ = writeln!(out, "{}", printable(&row.key));
    for c in &row.cells {
        let column = format!(
            "{}:{}",
            c.family,
            String::from_utf8_lossy(&c.qualifier).escape_debug()
        );
        let _ = writeln!(out, "  {column:<40} @ {}", format_timestamp(c.timestamp_us));
        let _ = writeln!(out, "    {}", printable(&c.value));
    }
    out
}

/// Microseconds since the epoch as `YYYY/MM/DD-HH:MM:SS.uuuuuu` (UTC), cbt's layout.
pub fn format_timestamp(us: i64) -> String {
    let t = almanac_engine::calendar::CivilTime::from_unix_nanos(i128::from(us) * 1000);
    format!(
        "{:04}/{:02}/{:02}-{:02}:{:02}:{:02}.{:06}",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.nanos / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(
        key: &str,
        fam: Option<&str>,
        qual: Option<&str>,
        value: &str,
        value_size: i32,
        status: Option<RowStatus>,
    ) -> CellChunk {
        CellChunk {
            row_key: key.as_bytes().to_vec().into(),
            family_name: fam.map(str::to_string),
            qualifier: qual.map(|q| q.as_bytes().to_vec()),
            timestamp_micros: 7_000,
            value: value.as_bytes().to_vec().into(),
            value_size,
            row_status: status,
            ..Default::default()
        }
    }

    #[test]
    fn split_values_and_resets_reassemble() -> anyhow::Result<()> {
        let mut a = RowAssembler::default();
        assert_eq!(
            a.push(chunk(
                "r1",
                Some("cf"),
                Some("a"),
                "x",
                0,
                Some(RowStatus::ResetRow(true))
            ))?,
            None
        );
        assert_eq!(
            a.push(chunk("r1", Some("cf"), Some("a"), "he", 5, None))?,
            None
        );
        assert_eq!(a.push(chunk("", None, None, "llo", 0, None))?, None);
        let row = a.push(chunk(
            "",
            None,
            Some("b"),
            "v",
            0,
            Some(RowStatus::CommitRow(true)),
        ))?;
        let row = row.ok_or_else(|| anyhow::anyhow!("row not committed"))?;
        assert_eq!(row.key, b"r1");
        assert_eq!(row.cells.len(), 2);
        assert_eq!(row.cells[0].value, b"hello");
        assert_eq!(
            (
                row.cells[1].family.as_str(),
                row.cells[1].qualifier.as_slice()
            ),
            ("cf", b"b".as_slice())
        );
        assert!(!a.is_mid_row());
        Ok(())
    }

    #[test]
    fn timestamps_and_quoting_print_like_cbt() {
        assert_eq!(format_timestamp(0), "1970/01/01-00:00:00.000000");
        assert_eq!(
            format_timestamp(1_700_000_000_123_456),
            "2023/11/14-22:13:20.123456"
        );
        assert_eq!(
            format_timestamp(951_782_400_000_000),
            "2000/02/29-00:00:00.000000"
        );
        assert_eq!(printable(b"plain text"), "plain text");
        assert_eq!(printable(b"tab\there"), "\"tab\\there\"");
        assert_eq!(printable(&[0xA5, b'a']), "\"\\xa5a\"");
        assert_eq!(printable(b""), "\"\"");
    }
}
