//! ReadRows: point reads answered on the async worker, scans on the blocking pool.
//!
//! A ReadRows call, step by step:
//! 1. [`crate::data`] converts the request; the engine opens the read right here
//!    (schema lookup, filter compile, storage snapshot: no I/O), so a bad request
//!    fails the call itself.
//! 2. A *point read* (only row keys, at most [`INLINE_MAX_KEYS`] of them) is walked
//!    on the async worker: reading a few rows from the memtable or block cache takes
//!    microseconds, far less than handing the work to another thread and waking the
//!    worker again. The framed responses go back as a ready stream (no channel). If
//!    the rows turn out large, once [`INLINE_MAX_BYTES`] are framed the rest of the
//!    read moves to the blocking pool like a scan.
//! 3. Anything else (ranges, the whole table, many keys) may walk far between two
//!    rows, so a blocking task walks it and sends framed responses ([`crate::chunks`])
//!    through a bounded channel: a slow client slows the scan instead of filling
//!    memory.
//! 4. The last response carries the request stats when the client asked for them.

use almanac_api::google::bigtable::v2 as pb;
use almanac_engine::read::ReadRequest;
use almanac_engine::{Engine, RowStream};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codegen::BoxStream;

use crate::chunks::{Framer, Framing};
use crate::names::TableName;
use crate::status::{IntoStatus, to_status};

/// Responses buffered per streamed ReadRows call.
const READ_CHANNEL_DEPTH: usize = 4;
/// Most row keys a read may name and still be walked on the async worker.
pub const INLINE_MAX_KEYS: usize = 64;
/// Response bytes framed on the async worker before the rest of a read moves to the
/// blocking pool (one large row is still read whole where it started).
pub const INLINE_MAX_BYTES: usize = 256 * 1024;

type Item = Result<pb::ReadRowsResponse, Status>;

/// Opens the read and answers it; see the module docs.
pub fn read_rows(
    engine: &Engine,
    name: &TableName,
    read: ReadRequest,
    full_stats: bool,
    framing: Framing,
) -> Result<BoxStream<pb::ReadRowsResponse>, Status> {
    let point = read.rows.ranges.is_empty()
        && !read.rows.keys.is_empty()
        && read.rows.keys.len() <= INLINE_MAX_KEYS;
    let rows = engine
        .read_rows(&name.instance, &name.table, read)
        .status()?;
    let mut walk = Walk {
        rows,
        framer: Framer::new(framing),
        full_stats,
    };
    if !point {
        return Ok(Box::pin(walk.spawn()));
    }
    let mut ready = Vec::new();
    if walk.fill(&mut ready, INLINE_MAX_BYTES) {
        return Ok(Box::pin(tokio_stream::iter(ready)));
    }
    Ok(Box::pin(tokio_stream::iter(ready).chain(walk.spawn())))
}

/// A read being walked into framed responses.
struct Walk {
    rows: RowStream,
    framer: Framer,
    full_stats: bool,
}

impl Walk {
    /// Frames rows into `out` until the read is over (true) or at least `budget`
    /// bytes of responses are waiting (false). An error ends the read.
    fn fill(&mut self, out: &mut Vec<Item>, budget: usize) -> bool {
        let mut bytes = 0usize;
        while bytes < budget {
            match self.rows.next() {
                Some(Ok(row)) => {
                    bytes += row.size_bytes();
                    out.extend(self.framer.push_row(row).into_iter().map(Ok));
                }
                Some(Err(e)) => {
                    out.push(Err(to_status(&e)));
                    return true;
                }
                None => {
                    out.extend(self.last().map(Ok));
                    return true;
                }
            }
        }
        false
    }

    /// The final response: chunks still pending, and the stats if asked for.
    fn last(&mut self) -> Option<pb::ReadRowsResponse> {
        if self.framer.is_empty() && !self.full_stats {
            return None;
        }
        let mut last = self.framer.take();
        if self.full_stats {
            let stats = self.rows.stats();
            last.request_stats = Some(pb::RequestStats {
                stats_view: Some(pb::request_stats::StatsView::FullReadStatsView(
                    pb::FullReadStatsView {
                        read_iteration_stats: Some(pb::ReadIterationStats {
                            rows_seen_count: stats.rows_returned as i64,
                            rows_returned_count: stats.rows_returned as i64,
                            cells_seen_count: stats.cells_seen as i64,
                            cells_returned_count: stats.cells_returned as i64,
                        }),
                        request_latency_stats: None,
                    },
                )),
            });
        }
        Some(last)
    }

    /// Walks the rest of the read on the blocking pool, streaming its responses.
    fn spawn(mut self) -> ReceiverStream<Item> {
        let (tx, rx) = mpsc::channel(READ_CHANNEL_DEPTH);
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            loop {
                // One row at a time: responses leave as soon as they are framed.
                let done = self.fill(&mut out, 1);
                for item in out.drain(..) {
                    if tx.blocking_send(item).is_err() {
                        return;
                    }
                }
                if done {
                    return;
                }
            }
        });
        ReceiverStream::new(rx)
    }
}
