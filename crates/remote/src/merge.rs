//! ReadRows response chunks merged into rows: the client half of the framing that
//! `ReadRowsResponse.CellChunk` describes in `google/bigtable/v2/bigtable.proto`.
//!
//! A stream is a sequence of chunks, each one cell or a piece of one:
//!
//! - a row starts with a chunk that has a non-empty `row_key`, a `family_name` and a
//!   `qualifier`; its key must come after the resume point (see
//!   [`RowMerger::resume_key`]) in the scan's direction;
//! - later chunks of the row may leave `row_key` empty (or repeat it); a missing
//!   `family_name` or `qualifier` carries over from the previous cell, and a new
//!   family must come with a qualifier;
//! - every chunk outside a split value starts a cell, even one that carries nothing
//!   but `commit_row` (an empty value at timestamp 0);
//! - a chunk with `value_size > 0` starts or continues a split value, which the next
//!   chunk with `value_size == 0` ends; the pieces after the first carry only `value`;
//! - `reset_row` (on a chunk that carries nothing else) drops the row in progress,
//!   which the server then sends again from its start;
//! - `commit_row` ends the row, unless a split value is still open.

use std::sync::Arc;

use almanac_api::google::bigtable::v2::ReadRowsResponse;
use almanac_api::google::bigtable::v2::read_rows_response::CellChunk;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use almanac_engine::{Cell, Row};

#[cfg(test)]
mod tests;

/// The most a split value's announced `value_size` pre-allocates: the server's word
/// is a hint, not a reason to reserve gigabytes up front.
const MAX_PREALLOC: usize = 16 << 20;

/// Why a response broke the framing rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ReadRows response: {0}")]
pub(crate) struct MergeError(pub(crate) String);

/// `Err(MergeError)` with `msg`.
fn fail<T>(msg: impl Into<String>) -> Result<T, MergeError> {
    Err(MergeError(msg.into()))
}

/// A row whose chunks are arriving.
#[derive(Debug)]
struct PartialRow {
    /// The row's key.
    key: Vec<u8>,
    /// The cells so far; while a split value is open, it is the last one's.
    cells: Vec<Cell>,
}

/// Where the merger is in the stream.
#[derive(Debug)]
enum State {
    /// Between rows: the next chunk starts a row (or the stream ends).
    NewRow,
    /// Inside a row, between cells: the next chunk starts a cell, resets or commits.
    NewCell(PartialRow),
    /// Inside a split value: the next chunk carries more of it, or resets the row.
    CellValue(PartialRow),
}

/// Merges a ReadRows stream's chunks into rows, checking the framing as it goes.
#[derive(Debug)]
pub(crate) struct RowMerger {
    /// Whether rows come in descending key order (`ReadRowsRequest.reversed`).
    reversed: bool,
    /// The last committed row's key, or a later `last_scanned_row_key`.
    resume: Option<Vec<u8>>,
    /// Where the stream is.
    state: State,
    /// The family of the latest cell, shared by the cells that follow in it.
    family: Arc<str>,
    /// The qualifier of the latest cell, shared by the cells that follow in it.
    qualifier: Arc<[u8]>,
}

impl RowMerger {
    /// A merger for a fresh read; `reversed` as in the request.
    pub(crate) fn new(reversed: bool) -> Self {
        Self {
            reversed,
            resume: None,
            state: State::NewRow,
            family: Arc::from(""),
            qualifier: Arc::from(&[][..]),
        }
    }

    /// Feeds one response; pushes each committed row onto `out` in order.
    ///
    /// On an error, rows committed by earlier chunks of the response are already in
    /// `out` (and [`Self::resume_key`] counts them), and the row in progress is dropped.
    pub(crate) fn push(
        &mut self,
        resp: ReadRowsResponse,
        out: &mut Vec<Row>,
    ) -> Result<(), MergeError> {
        for chunk in resp.chunks {
            self.chunk(chunk, out)?;
        }
        if !resp.last_scanned_row_key.is_empty() {
            self.scanned(&resp.last_scanned_row_key)?;
        }
        Ok(())
    }

    /// The stream ended: an error if a row was left uncommitted.
    pub(crate) fn finish(&self) -> Result<(), MergeError> {
        match &self.state {
            State::NewRow => Ok(()),
            State::NewCell(row) | State::CellValue(row) => fail(format!(
                "stream ended inside row \"{}\" (no commit_row)",
                row.key.escape_ascii()
            )),
        }
    }

    /// The key a retry resumes after: the last committed row, or a later
    /// `last_scanned_row_key`.
    pub(crate) fn resume_key(&self) -> Option<&[u8]> {
        self.resume.as_deref()
    }

    /// Before a retry: drops any row in progress, keeps [`Self::resume_key`] and the
    /// order check.
    pub(crate) fn discard_partial(&mut self) {
        self.state = State::NewRow;
    }

    /// Whether `key` comes after the resume point in the scan's direction.
    fn after_resume(&self, key: &[u8]) -> bool {
        match &self.resume {
            None => true,
            Some(last) if self.reversed => key < last.as_slice(),
            Some(last) => key > last.as_slice(),
        }
    }

    /// One chunk, in whatever state the stream is in.
    fn chunk(&mut self, chunk: CellChunk, out: &mut Vec<Row>) -> Result<(), MergeError> {
        let reset = matches!(chunk.row_status, Some(RowStatus::ResetRow(true)));
        let commit = matches!(chunk.row_status, Some(RowStatus::CommitRow(true)));
        // Taking the state out leaves `NewRow` behind should the chunk be invalid.
        let (mut row, in_value) = match std::mem::replace(&mut self.state, State::NewRow) {
            State::NewRow if reset => return fail("reset_row with no row in progress"),
            State::NewRow => (self.start_row(&chunk)?, false),
            State::NewCell(row) => (row, false),
            State::CellValue(row) => (row, true),
        };
        if reset {
            return check_bare_reset(&chunk);
        }
        if !chunk.row_key.is_empty() && chunk.row_key != row.key {
            return fail(format!(
                "row \"{}\" started before row \"{}\" was committed",
                chunk.row_key.escape_ascii(),
                row.key.escape_ascii()
            ));
        }
        let open = match usize::try_from(chunk.value_size) {
            Ok(size) => size > 0,
            Err(_) => return fail(format!("negative value_size {}", chunk.value_size)),
        };
        if in_value {
            append_value(&mut row, chunk)?;
        } else {
            let cell = self.start_cell(chunk)?;
            row.cells.push(cell);
        }
        self.state = match (commit, open) {
            (true, true) => return fail("commit_row inside a split value"),
            (true, false) => {
                self.commit(row, out);
                State::NewRow
            }
            (false, true) => State::CellValue(row),
            (false, false) => State::NewCell(row),
        };
        Ok(())
    }

    /// Checks a row's first chunk and opens the row (its cell comes next).
    fn start_row(&self, chunk: &CellChunk) -> Result<PartialRow, MergeError> {
        if chunk.row_key.is_empty() {
            return fail("a chunk outside any row has no row_key");
        }
        if !self.after_resume(&chunk.row_key) {
            return fail(format!(
                "row \"{}\" is out of order: not {} than \"{}\"",
                chunk.row_key.escape_ascii(),
                if self.reversed { "less" } else { "greater" },
                self.resume.as_deref().unwrap_or_default().escape_ascii()
            ));
        }
        if chunk.family_name.is_none() || chunk.qualifier.is_none() {
            return fail("a row's first chunk lacks a family_name or qualifier");
        }
        Ok(PartialRow {
            key: chunk.row_key.to_vec(),
            cells: Vec::new(),
        })
    }

    /// The cell that a chunk outside a split value starts, sharing the family and
    /// qualifier allocations of the cell before it where they are the same.
    fn start_cell(&mut self, chunk: CellChunk) -> Result<Cell, MergeError> {
        if chunk.family_name.is_some() && chunk.qualifier.is_none() {
            return fail("a new family_name without a qualifier");
        }
        if let Some(family) = chunk.family_name
            && *self.family != *family
        {
            self.family = Arc::from(family);
        }
        if let Some(qualifier) = chunk.qualifier
            && *self.qualifier != *qualifier
        {
            self.qualifier = Arc::from(qualifier);
        }
        let value = match usize::try_from(chunk.value_size) {
            Ok(size) if size > 0 => {
                let mut value = Vec::with_capacity(size.min(MAX_PREALLOC).max(chunk.value.len()));
                value.extend_from_slice(&chunk.value);
                value
            }
            _ => Vec::from(chunk.value),
        };
        Ok(Cell {
            family: Arc::clone(&self.family),
            qualifier: Arc::clone(&self.qualifier),
            timestamp_us: chunk.timestamp_micros,
            value,
            labels: chunk.labels,
        })
    }

    /// Ends `row`: onto `out`, and the resume point moves to it.
    fn commit(&mut self, row: PartialRow, out: &mut Vec<Row>) {
        let resume = self.resume.get_or_insert_with(Vec::new);
        resume.clear();
        resume.extend_from_slice(&row.key);
        out.push(Row {
            key: row.key,
            cells: row.cells,
        });
    }

    /// A response's `last_scanned_row_key`: the resume point moves on without a row.
    fn scanned(&mut self, key: &[u8]) -> Result<(), MergeError> {
        if !matches!(self.state, State::NewRow) {
            self.state = State::NewRow;
            return fail("last_scanned_row_key inside a row");
        }
        if self.resume.as_deref() == Some(key) {
            return Ok(());
        }
        if !self.after_resume(key) {
            return fail(format!(
                "last_scanned_row_key \"{}\" goes back",
                key.escape_ascii()
            ));
        }
        self.resume = Some(key.to_vec());
        Ok(())
    }
}

/// A `reset_row` chunk must carry nothing else.
fn check_bare_reset(chunk: &CellChunk) -> Result<(), MergeError> {
    if chunk.row_key.is_empty()
        && chunk.family_name.is_none()
        && chunk.qualifier.is_none()
        && chunk.timestamp_micros == 0
        && chunk.labels.is_empty()
        && chunk.value.is_empty()
        && chunk.value_size == 0
    {
        Ok(())
    } else {
        fail("a reset_row chunk carries data")
    }
}

/// A later piece of a split value: only `value` (and `value_size`, and the row's
/// key again) may be set.
fn append_value(row: &mut PartialRow, chunk: CellChunk) -> Result<(), MergeError> {
    if chunk.family_name.is_some()
        || chunk.qualifier.is_some()
        || chunk.timestamp_micros != 0
        || !chunk.labels.is_empty()
    {
        return fail("a split value's later chunk sets more than the value");
    }
    match row.cells.last_mut() {
        Some(cell) => {
            cell.value.extend_from_slice(&chunk.value);
            Ok(())
        }
        None => fail("a split value continues with no cell"),
    }
}
