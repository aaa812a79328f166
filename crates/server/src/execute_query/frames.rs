//! Rows to ExecuteQuery's `PartialResultSet` messages.
//!
//! Rows gather into *batches*: a batch is one serialized `ProtoRows` (its values,
//! row-major, as repeated field 2) and closes after [`BATCH_MAX_ROWS`] rows or once
//! it holds [`BATCH_TARGET_BYTES`]. A closed batch leaves as one or more messages of
//! at most [`MESSAGE_MAX_BYTES`] of `batch_data`; the first carries
//! `estimated_batch_size`, the last the batch's CRC-32C (`batch_checksum`) and a
//! `resume_token`. The client yields a batch's rows only once the token arrives, so a
//! batch is also the unit a retry repeats.
//!
//! A resume token records the rows sent before it and the CRC-32C of their values
//! ([`ResumePoint`]). A call resumed from one runs the query again, re-encodes the rows
//! up to that point without sending them, and refuses to go on
//! (`FAILED_PRECONDITION`) unless they checksum to the same value: the rows that follow
//! are then exactly the ones the client lacks, whatever order the query produced them
//! in. Its first message sets `reset`; if no rows follow, it re-sends the token alone.
//!
//! Byte layout of the token: docs/format.md#resume_token

use almanac_api::google::bigtable::v2 as pb;
use bytes::Bytes;
use tonic::Status;

use super::token::ResumePoint;
use crate::crc32c;

/// Most rows in one batch: the client buffers a whole batch before it yields any row
/// of it, so this bounds how long the first rows of a scan wait.
pub const BATCH_MAX_ROWS: usize = 1_000;
/// A batch closes once its encoded values reach this size (a single larger row makes a
/// larger batch): big enough to amortize the checksum and token, small enough that a
/// retry repeats little.
pub const BATCH_TARGET_BYTES: usize = 4 * 1024 * 1024;
/// Most `batch_data` bytes in one message, a quarter of the 4 MiB receive limit gRPC
/// clients default to.
pub const MESSAGE_MAX_BYTES: usize = 1024 * 1024;
/// Field number of `ProtoRows.values`.
const PROTO_ROWS_VALUES_FIELD: u32 = 2;

/// Frames the rows of one ExecuteQuery call.
#[derive(Debug)]
pub struct Framer {
    /// Encoded values of the open batch.
    batch: Vec<u8>,
    batch_rows: usize,
    /// Rows delivered (or, while resuming, skipped) so far, and their checksum.
    delivered: ResumePoint,
    /// While resuming: the point the client is at, not reached yet.
    skip: Option<ResumePoint>,
    /// Whether the next message must set `reset` (the first one of a resumed call).
    reset: bool,
    /// Whether this call resumed from a token.
    resumed: bool,
    /// Whether a batch has been sent.
    sent: bool,
    /// Scratch for one row's encoding.
    row: Vec<u8>,
}

impl Framer {
    /// A framer for a fresh call (`resume` = `None`) or one resumed from a token.
    pub fn new(resume: Option<ResumePoint>) -> Self {
        Self {
            batch: Vec::new(),
            batch_rows: 0,
            delivered: ResumePoint { rows: 0, crc: 0 },
            skip: resume.filter(|r| r.rows > 0),
            reset: resume.is_some(),
            resumed: resume.is_some(),
            sent: false,
            row: Vec::new(),
        }
    }

    /// Adds rows given column by column (`columns[c][r]` is row `r` of column `c`),
    /// appending the messages of every batch that closes to `out`.
    pub fn push(
        &mut self,
        columns: &[Vec<pb::Value>],
        out: &mut Vec<pb::PartialResultSet>,
    ) -> Result<(), Status> {
        let rows = columns.first().map_or(0, Vec::len);
        if columns.iter().any(|c| c.len() != rows) {
            return Err(Status::internal("result columns of different lengths"));
        }
        for r in 0..rows {
            self.row.clear();
            for column in columns {
                prost::encoding::message::encode(
                    PROTO_ROWS_VALUES_FIELD,
                    &column[r],
                    &mut self.row,
                );
            }
            if let Some(skip) = self.skip {
                self.delivered.rows += 1;
                self.delivered.crc = crc32c::append(self.delivered.crc, &self.row);
                if self.delivered.rows == skip.rows {
                    if self.delivered.crc != skip.crc {
                        return Err(changed(skip));
                    }
                    self.skip = None;
                }
                continue;
            }
            self.batch.extend_from_slice(&self.row);
            self.batch_rows += 1;
            if self.batch_rows >= BATCH_MAX_ROWS || self.batch.len() >= BATCH_TARGET_BYTES {
                self.close_batch(out);
            }
        }
        Ok(())
    }

    /// The messages after the last row.
    pub fn finish(mut self, out: &mut Vec<pb::PartialResultSet>) -> Result<(), Status> {
        if let Some(skip) = self.skip {
            return Err(changed(skip));
        }
        self.close_batch(out);
        if self.resumed && !self.sent {
            out.push(pb::PartialResultSet {
                resume_token: Bytes::from(self.delivered.seal()),
                reset: std::mem::take(&mut self.reset),
                ..Default::default()
            });
        }
        Ok(())
    }

    fn close_batch(&mut self, out: &mut Vec<pb::PartialResultSet>) {
        if self.batch_rows == 0 {
            return;
        }
        let data = Bytes::from(std::mem::take(&mut self.batch));
        let checksum = crc32c::checksum(&data);
        self.delivered.crc = crc32c::append(self.delivered.crc, &data);
        self.delivered.rows += self.batch_rows as u64;
        self.batch_rows = 0;
        self.sent = true;
        let token = Bytes::from(self.delivered.seal());
        let mut start = 0;
        while start < data.len() {
            let end = (start + MESSAGE_MAX_BYTES).min(data.len());
            let last = end == data.len();
            out.push(pb::PartialResultSet {
                partial_rows: Some(pb::partial_result_set::PartialRows::ProtoRowsBatch(
                    pb::ProtoRowsBatch {
                        batch_data: data.slice(start..end),
                    },
                )),
                batch_checksum: last.then_some(checksum),
                resume_token: if last { token.clone() } else { Bytes::new() },
                reset: std::mem::take(&mut self.reset),
                estimated_batch_size: if start == 0 {
                    i32::try_from(data.len()).unwrap_or(i32::MAX)
                } else {
                    0
                },
            });
            start = end;
        }
    }
}

fn changed(at: ResumePoint) -> Status {
    Status::failed_precondition(format!(
        "cannot resume: the query's first {} rows are not the ones already sent (the data \
         changed since); run the query again",
        at.rows
    ))
}

#[cfg(test)]
mod tests;
