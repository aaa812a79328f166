//! The remote store against a Bigtable that fails on purpose: a ReadRows stream broken
//! by UNAVAILABLE mid-row resumes after the last whole row, with the limit less what
//! was delivered, and every row arrives once; MutateRows retries exactly the entries
//! that failed with a retryable status and may be sent twice.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use almanac_api::google::bigtable::v2 as data;
use almanac_api::google::bigtable::v2::bigtable_server::{Bigtable, BigtableServer};
use almanac_api::google::bigtable::v2::read_rows_response::CellChunk;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use almanac_engine::mutation::{Mutation, SERVER_TIME};
use almanac_engine::{Error, ReadRequest, RowMutations};
use almanac_remote::{RemoteStore, WideColumnStore};
use tonic::{Request, Response, Status};

type Stream<T> = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

const INSTANCE: &str = "projects/p/instances/i";
const ROWS: usize = 10;

/// What the fake server saw.
#[derive(Default)]
struct Seen {
    reads: Vec<data::ReadRowsRequest>,
    mutations: Vec<Vec<Vec<u8>>>,
}

/// A Bigtable of ROWS rows `r0`..`r9` (one cell each, value = key) whose first read
/// breaks after three rows and half of the fourth, and whose first MutateRows fails
/// entries 1 and 2 with UNAVAILABLE and entry 3 with INVALID_ARGUMENT.
#[derive(Clone, Default)]
struct Faulty(Arc<Mutex<Seen>>);

fn key(i: usize) -> Vec<u8> {
    format!("r{i}").into_bytes()
}

fn cell(i: usize, commit: bool) -> CellChunk {
    CellChunk {
        row_key: key(i).into(),
        family_name: Some("f".to_string()),
        qualifier: Some(b"q".to_vec()),
        timestamp_micros: 1000,
        value: key(i).into(),
        row_status: commit.then_some(RowStatus::CommitRow(true)),
        ..Default::default()
    }
}

fn response(chunks: Vec<CellChunk>) -> Result<data::ReadRowsResponse, Status> {
    Ok(data::ReadRowsResponse {
        chunks,
        ..Default::default()
    })
}

/// The rows of `req` in order, as the real service would pick them.
fn wanted(req: &data::ReadRowsRequest) -> Vec<usize> {
    use data::row_range::{EndKey, StartKey};
    let set = req.rows.clone().unwrap_or_default();
    let in_set = |k: &[u8]| {
        if set.row_keys.is_empty() && set.row_ranges.is_empty() {
            return true;
        }
        set.row_keys.iter().any(|x| x.as_ref() == k)
            || set.row_ranges.iter().any(|r| {
                let after = match &r.start_key {
                    Some(StartKey::StartKeyClosed(s)) => k >= s.as_ref(),
                    Some(StartKey::StartKeyOpen(s)) => k > s.as_ref(),
                    None => true,
                };
                let before = match &r.end_key {
                    Some(EndKey::EndKeyClosed(e)) => k <= e.as_ref(),
                    Some(EndKey::EndKeyOpen(e)) => k < e.as_ref(),
                    None => true,
                };
                after && before
            })
    };
    let mut rows: Vec<usize> = (0..ROWS).filter(|i| in_set(&key(*i))).collect();
    if req.reversed {
        rows.reverse();
    }
    if req.rows_limit > 0 {
        rows.truncate(req.rows_limit as usize);
    }
    rows
}

#[tonic::async_trait]
impl Bigtable for Faulty {
    async fn read_rows(
        &self,
        request: Request<data::ReadRowsRequest>,
    ) -> Result<Response<Stream<data::ReadRowsResponse>>, Status> {
        let req = request.into_inner();
        let first = {
            let mut seen = self.0.lock().expect("lock");
            seen.reads.push(req.clone());
            seen.reads.len() == 1
        };
        let rows = wanted(&req);
        let mut out = Vec::new();
        if first {
            // Three whole rows, then half of a fourth, then the connection "drops".
            out.extend(rows[..3].iter().map(|i| response(vec![cell(*i, true)])));
            out.push(response(vec![cell(rows[3], false)]));
            out.push(Err(Status::unavailable("injected: connection reset")));
        } else {
            // A split value on the first row of the retry, then the rest whole.
            let mut chunks = Vec::new();
            for (n, i) in rows.iter().enumerate() {
                if n == 0 {
                    let mut a = cell(*i, false);
                    a.value = key(*i)[..1].to_vec().into();
                    a.value_size = key(*i).len() as i32;
                    let b = CellChunk {
                        value: key(*i)[1..].to_vec().into(),
                        row_status: Some(RowStatus::CommitRow(true)),
                        ..Default::default()
                    };
                    chunks.extend([a, b]);
                } else {
                    chunks.push(cell(*i, true));
                }
            }
            out.push(response(chunks));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(out))))
    }

    async fn mutate_rows(
        &self,
        request: Request<data::MutateRowsRequest>,
    ) -> Result<Response<Stream<data::MutateRowsResponse>>, Status> {
        let req = request.into_inner();
        let first = {
            let mut seen = self.0.lock().expect("lock");
            seen.mutations
                .push(req.entries.iter().map(|e| e.row_key.to_vec()).collect());
            seen.mutations.len() == 1
        };
        let status = |code: tonic::Code| almanac_api::google::rpc::Status {
            code: code as i32,
            message: format!("injected {code:?}"),
            ..Default::default()
        };
        let entries = (0..req.entries.len())
            .map(|i| data::mutate_rows_response::Entry {
                index: i as i64,
                status: Some(match (first, i) {
                    (true, 1 | 2) => status(tonic::Code::Unavailable),
                    (true, 3) => status(tonic::Code::InvalidArgument),
                    _ => status(tonic::Code::Ok),
                }),
            })
            .collect();
        let out = vec![Ok(data::MutateRowsResponse {
            entries,
            ..Default::default()
        })];
        Ok(Response::new(Box::pin(tokio_stream::iter(out))))
    }
}

/// Serves `fake` on a free loopback port on its own runtime.
fn serve(fake: Faulty) -> (SocketAddr, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    runtime.spawn(
        tonic::transport::Server::builder()
            .add_service(BigtableServer::new(fake))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (addr, runtime)
}

/// A fresh fake, served, and a store connected to it (the runtime serves while held).
fn connected() -> (Faulty, RemoteStore, tokio::runtime::Runtime) {
    let fake = Faulty::default();
    let (addr, runtime) = serve(fake.clone());
    let store = RemoteStore::connect(INSTANCE, &addr.to_string()).expect("connect");
    (fake, store, runtime)
}

fn read(store: &RemoteStore, req: ReadRequest) -> Result<Vec<String>, Error> {
    let mut keys = Vec::new();
    store.read_rows("t", req, &mut |row| {
        assert_eq!(row.cells.len(), 1, "one cell a row");
        assert_eq!(row.cells[0].value, row.key, "value whole");
        keys.push(String::from_utf8_lossy(&row.key).into_owned());
        ControlFlow::Continue(())
    })?;
    Ok(keys)
}

#[test]
fn a_broken_read_resumes_after_the_last_whole_row() {
    let (fake, store, _rt) = connected();
    let keys = read(
        &store,
        ReadRequest {
            limit: Some(8),
            ..ReadRequest::default()
        },
    )
    .expect("read");
    let want: Vec<String> = (0..8).map(|i| format!("r{i}")).collect();
    assert_eq!(keys, want, "every row once, in order, the limit kept");
    let seen = fake.0.lock().expect("lock");
    assert_eq!(seen.reads.len(), 2, "one retry");
    let retry = &seen.reads[1];
    assert_eq!(retry.rows_limit, 5, "the limit less the 3 rows delivered");
    let range = &retry.rows.as_ref().expect("a row set").row_ranges[0];
    assert_eq!(
        range.start_key,
        Some(data::row_range::StartKey::StartKeyOpen(
            b"r2".to_vec().into()
        )),
        "resumes after the last whole row, not the half row"
    );
}

#[test]
fn a_broken_reversed_read_resumes_below_the_last_row() {
    let (fake, store, _rt) = connected();
    let keys = read(
        &store,
        ReadRequest {
            reversed: true,
            ..ReadRequest::default()
        },
    )
    .expect("read");
    let want: Vec<String> = (0..ROWS).rev().map(|i| format!("r{i}")).collect();
    assert_eq!(keys, want);
    let seen = fake.0.lock().expect("lock");
    let range = &seen.reads[1].rows.as_ref().expect("a row set").row_ranges[0];
    assert_eq!(
        range.end_key,
        Some(data::row_range::EndKey::EndKeyOpen(b"r7".to_vec().into()))
    );
}

#[test]
fn mutate_rows_retries_only_what_may_be_sent_twice() {
    let (fake, store, _rt) = connected();
    let set = |ts: i64| Mutation::SetCell {
        family: "f".into(),
        qualifier: b"q".to_vec(),
        timestamp_us: ts,
        value: b"v".to_vec(),
    };
    let rows: Vec<RowMutations> = [1000, 1000, SERVER_TIME, 1000]
        .iter()
        .enumerate()
        .map(|(i, ts)| RowMutations {
            key: key(i),
            mutations: vec![set(*ts)],
        })
        .collect();
    let results = store.mutate_rows("t", &rows).expect("the call");
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(
        matches!(&results[2], Err(Error::Storage(m)) if m.contains("Unavailable")),
        "a server-timestamped entry is not sent twice: {results:?}"
    );
    assert!(matches!(&results[3], Err(Error::Invalid(_))), "{results:?}");
    let seen = fake.0.lock().expect("lock");
    assert_eq!(
        seen.mutations,
        vec![(0..4).map(key).collect(), vec![key(1)]]
    );
}
