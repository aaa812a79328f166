//! ReadRows against the remote Bigtable, as rows handed to a synchronous visitor.
//!
//! 1. A task on the store's runtime sends the request and merges each response's chunks
//!    into rows ([`RowMerger`]), passing them over a bounded channel.
//! 2. The caller's thread takes rows from the channel and visits them; when the visitor
//!    stops, the channel closes, the task stops and the stream is cancelled.
//! 3. After a retryable failure the task asks again for what is left: the rows after
//!    the last one merged (or the last key the server scanned), the limit less the
//!    rows already delivered. A partial row is discarded and read again whole.
//! 4. A reversed read that the server does not implement (the Cloud SDK's emulator) is
//!    read forward, its last `limit` rows kept in memory and handed over in reverse.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};

use almanac_api::google::bigtable::v2 as data;
use almanac_engine::{Error, ReadRequest, Row};
use almanac_timeseries::StoreResult;
use tokio::runtime::Handle;
use tonic::Status;

use crate::merge::RowMerger;
use crate::retry::{self, ATTEMPT_TIMEOUT, Backoff, Call};
use crate::store::{DataClient, routed};
use crate::wire;

/// Rows merged ahead of the visitor: enough to keep the stream flowing while the
/// caller works, few enough that a stopped visitor wastes little.
const ROW_BUFFER: usize = 256;

/// Reads `req` from `table_name`, visiting each row in order until `visit` breaks.
pub(crate) fn read_rows(
    handle: &Handle,
    client: DataClient,
    table_name: String,
    req: ReadRequest,
    visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
) -> StoreResult<()> {
    for row in stream(handle, client, table_name, req) {
        if visit(row?).is_break() {
            break;
        }
    }
    Ok(())
}

/// Reads `req` from `table_name` as rows the caller pulls; dropping the iterator
/// closes the channel, which stops the task and cancels the stream.
pub(crate) fn stream(
    handle: &Handle,
    client: DataClient,
    table_name: String,
    req: ReadRequest,
) -> Rows {
    let (tx, rx) = mpsc::sync_channel(ROW_BUFFER);
    handle.spawn(stream_rows(client, table_name.clone(), req, tx));
    Rows {
        rx,
        table_name,
        done: false,
    }
}

/// The rows of one read, as the task sends them.
pub(crate) struct Rows {
    rx: Receiver<Item>,
    table_name: String,
    /// The end or an error was handed out: nothing follows.
    done: bool,
}

impl Iterator for Rows {
    type Item = StoreResult<Row>;

    fn next(&mut self) -> Option<StoreResult<Row>> {
        if self.done {
            return None;
        }
        let item = match self.rx.recv() {
            Ok(Ok(Some(row))) => return Some(Ok(row)),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => Some(Err(e)),
            // A channel closed without the end marker is a task that stopped short
            // (its runtime shut down), which must not pass for a shorter table.
            Err(_) => Some(Err(Error::Storage(format!(
                "remote Bigtable: the read of {} stopped before its end",
                self.table_name
            )))),
        };
        self.done = true;
        item
    }
}

/// What the task hands the caller: rows, then `None` at the end, or an error.
type Item = StoreResult<Option<Row>>;

/// Why a read stopped short.
enum Failure {
    /// The remote Bigtable's last status, after any retries.
    Status(Status),
    /// A response that broke the framing rules.
    Broken(Error),
}

/// The task: reads `req` whole, sending each row to `tx`, and the error if it fails.
async fn stream_rows(
    client: DataClient,
    table_name: String,
    req: ReadRequest,
    tx: SyncSender<Item>,
) {
    let mut result = read_all(&client, &table_name, &req, &mut |row| send(&tx, row)).await;
    if req.reversed
        && matches!(&result, Err(Failure::Status(s)) if s.code() == tonic::Code::Unimplemented)
    {
        result = reversed_forward(&client, &table_name, &req, &tx).await;
    }
    let call = Call {
        rpc: "ReadRows",
        table: table_name,
    };
    let last = match result {
        Ok(()) => Ok(None),
        Err(Failure::Status(s)) => Err(retry::store_error(&s, &call)),
        Err(Failure::Broken(e)) => Err(e),
    };
    // The caller may have stopped reading already: then nobody waits for this.
    let _ = tokio::task::block_in_place(|| tx.send(last));
}

/// A reversed read from a server without reverse scans (the Cloud SDK's emulator): the
/// rows read forward, the last `limit` of them kept, handed over newest key first.
async fn reversed_forward(
    client: &DataClient,
    table_name: &str,
    req: &ReadRequest,
    tx: &SyncSender<Item>,
) -> Result<(), Failure> {
    let cap = req.limit.filter(|l| *l > 0).map(|l| l as usize);
    let forward = ReadRequest {
        reversed: false,
        limit: None,
        ..req.clone()
    };
    let mut kept = VecDeque::new();
    read_all(client, table_name, &forward, &mut |row| {
        if cap == Some(kept.len()) {
            kept.pop_front();
        }
        kept.push_back(row);
        true
    })
    .await?;
    for row in kept.into_iter().rev() {
        if !send(tx, row) {
            break;
        }
    }
    Ok(())
}

/// Tries the read until it is whole, handing each row to `sink` until it says stop.
async fn read_all(
    client: &DataClient,
    table_name: &str,
    req: &ReadRequest,
    sink: &mut (dyn FnMut(Row) -> bool + Send),
) -> Result<(), Failure> {
    let mut merger = RowMerger::new(req.reversed);
    let mut delivered: u64 = 0;
    let mut backoff = Backoff::new();
    let limit = req.limit.filter(|l| *l > 0);
    loop {
        let rows = match merger.resume_key() {
            None => wire::nonempty(&req.rows),
            Some(last) => wire::rows_after(&req.rows, last, req.reversed),
        };
        let remaining = limit.map(|l| l.saturating_sub(delivered));
        let (Some(rows), false) = (rows, remaining == Some(0)) else {
            return Ok(());
        };
        let request = data::ReadRowsRequest {
            table_name: table_name.to_string(),
            rows: wire::row_set(&rows),
            filter: req.filter.as_ref().map(wire::filter),
            rows_limit: remaining.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)),
            reversed: req.reversed,
            ..Default::default()
        };
        let status = match one_try(client.clone(), request, &mut merger, &mut delivered, sink).await
        {
            Ok(None) => return Ok(()),
            Ok(Some(s)) => s,
            Err(e) => return Err(Failure::Broken(e)),
        };
        let wait = if retry::retryable(&status) {
            backoff.next_wait()
        } else {
            None
        };
        let Some(wait) = wait else {
            return Err(Failure::Status(status));
        };
        merger.discard_partial();
        tokio::time::sleep(wait).await;
    }
}

/// One ReadRows call: merges rows and hands them to `sink` until the stream ends
/// (`None`), fails (its status) or the sink stops (`None`). An error is a response that
/// breaks the framing rules.
async fn one_try(
    mut client: DataClient,
    request: data::ReadRowsRequest,
    merger: &mut RowMerger,
    delivered: &mut u64,
    sink: &mut (dyn FnMut(Row) -> bool + Send),
) -> StoreResult<Option<Status>> {
    let table_name = request.table_name.clone();
    let broken = |e: crate::merge::MergeError| {
        Error::Corrupt(format!("remote Bigtable on {table_name}: {e}"))
    };
    let mut stream = match tokio::time::timeout(
        ATTEMPT_TIMEOUT,
        client.read_rows(routed(request, &table_name)),
    )
    .await
    {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => return Ok(Some(s)),
        Err(_) => return Ok(Some(retry::timed_out())),
    };
    let mut rows = Vec::new();
    loop {
        let response = match tokio::time::timeout(ATTEMPT_TIMEOUT, stream.message()).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => break,
            Ok(Err(s)) => return Ok(Some(s)),
            Err(_) => return Ok(Some(retry::timed_out())),
        };
        merger.push(response, &mut rows).map_err(broken)?;
        for row in rows.drain(..) {
            *delivered += 1;
            if !sink(row) {
                return Ok(None);
            }
        }
    }
    merger.finish().map_err(broken)?;
    Ok(None)
}

/// Hands a row to the visitor's thread, waiting (off the runtime's async work) while
/// the buffer is full; `false` once the visitor has stopped.
fn send(tx: &SyncSender<Item>, row: Row) -> bool {
    match tx.try_send(Ok(Some(row))) {
        Ok(()) => true,
        Err(TrySendError::Disconnected(_)) => false,
        Err(TrySendError::Full(item)) => tokio::task::block_in_place(|| tx.send(item).is_ok()),
    }
}
