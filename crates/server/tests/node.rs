//! A whole node in this process: started on free loopback ports, driven through its
//! Bigtable gRPC and Timestream HTTP listeners the way clients drive it, stopped, and
//! started again on the same directory.
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

use std::net::SocketAddr;
use std::path::Path;

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::v2 as data;
use almanac_client::grpc::{admin_client, connect, data_client};
use almanac_client::http::{Client, Endpoint};
use almanac_engine::Durability;
use almanac_server::{Node, NodeConfig, ServeError};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const INSTANCE: &str = "projects/almanac/instances/almanac";

/// A node serving in the background until [`Running::stop`].
struct Running {
    grpc: SocketAddr,
    timestream: SocketAddr,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<Result<(), ServeError>>,
}

impl Running {
    async fn start(dir: &Path) -> Running {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let node = Node::start(NodeConfig {
            durability: Durability::Sync,
            seal_interval: None,
            ..NodeConfig::new(dir.to_path_buf(), any, any)
        })
        .await
        .expect("start a node");
        let (grpc, timestream) = (node.grpc_addr(), node.timestream_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(node.run(async {
            let _ = stopped.await;
        }));
        Running {
            grpc,
            timestream,
            stop,
            serving,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.serving
            .await
            .expect("join the node")
            .expect("the node stops cleanly");
    }

    /// Calls a Timestream operation; returns the HTTP status and the JSON answer.
    async fn timestream(&self, op: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let url = format!("http://{}", self.timestream);
        let target = format!("Timestream_20181101.{op}");
        let response = tokio::task::spawn_blocking(move || {
            let mut client = Client::new(Endpoint::parse(&url).expect("endpoint"));
            client.post(
                "/",
                &[
                    ("Content-Type", "application/x-amz-json-1.0"),
                    ("X-Amz-Target", &target),
                ],
                body.to_string().as_bytes(),
            )
        })
        .await
        .expect("join")
        .expect("HTTP exchange");
        let json = serde_json::from_slice(&response.body).expect("a JSON answer");
        (response.status, json)
    }
}

fn table_name(table: &str) -> String {
    format!("{INSTANCE}/tables/{table}")
}

async fn create_table(grpc: SocketAddr, table: &str) {
    let mut admin = admin_client(connect(&grpc.to_string()).await.expect("connect"));
    let family = admin::ColumnFamily::default();
    admin
        .create_table(admin::CreateTableRequest {
            parent: INSTANCE.into(),
            table_id: table.into(),
            table: Some(admin::Table {
                column_families: [("cf".to_string(), family)].into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("CreateTable");
}

async fn set_cell(grpc: SocketAddr, table: &str, key: &str, value: &str) {
    let mut client = data_client(connect(&grpc.to_string()).await.expect("connect"));
    let set = data::mutation::SetCell {
        family_name: "cf".into(),
        column_qualifier: "q".into(),
        timestamp_micros: 1_000,
        value: value.to_string().into(),
    };
    client
        .mutate_row(data::MutateRowRequest {
            table_name: table_name(table),
            row_key: key.to_string().into(),
            mutations: vec![data::Mutation {
                mutation: Some(data::mutation::Mutation::SetCell(set)),
                ..Default::default()
            }],
            ..Default::default()
        })
        .await
        .expect("MutateRow");
}

/// Every (row key, value) of `table`, reassembled from the ReadRows chunks.
async fn read_all(grpc: SocketAddr, table: &str) -> Vec<(String, String)> {
    read(grpc, table, None).await
}

/// The (row key, value) pairs `rows` selects (all rows for `None`), reassembled from
/// the ReadRows chunks, checking as Google's Go client does that every response
/// ends at the end of a row.
async fn read(grpc: SocketAddr, table: &str, rows: Option<data::RowSet>) -> Vec<(String, String)> {
    let mut client = data_client(connect(&grpc.to_string()).await.expect("connect"));
    let mut stream = client
        .read_rows(data::ReadRowsRequest {
            table_name: table_name(table),
            rows,
            ..Default::default()
        })
        .await
        .expect("ReadRows")
        .into_inner();
    let (mut out, mut key, mut value) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(response) = stream.message().await.expect("a ReadRows response") {
        let ends_row = response.chunks.last().map(|c| c.row_status.is_some());
        assert_ne!(ends_row, Some(false), "a response ends inside a row");
        for chunk in response.chunks {
            if !chunk.row_key.is_empty() {
                key = chunk.row_key.to_vec();
            }
            value.extend_from_slice(&chunk.value);
            if chunk.value_size == 0 {
                out.push((
                    String::from_utf8_lossy(&key).into_owned(),
                    String::from_utf8_lossy(&value).into_owned(),
                ));
                value.clear();
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bigtable_writes_survive_a_restart() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let node = Running::start(dir.path()).await;
    create_table(node.grpc, "t").await;
    set_cell(node.grpc, "t", "row-b", "two").await;
    set_cell(node.grpc, "t", "row-a", "one").await;
    let want = vec![
        ("row-a".to_string(), "one".to_string()),
        ("row-b".to_string(), "two".to_string()),
    ];
    assert_eq!(read_all(node.grpc, "t").await, want);
    node.stop().await;

    let node = Running::start(dir.path()).await;
    assert_eq!(read_all(node.grpc, "t").await, want, "after a restart");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestream_records_are_written_and_queried() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let node = Running::start(dir.path()).await;
    let (status, _) = node
        .timestream(
            "CreateDatabase",
            serde_json::json!({"DatabaseName": "weather"}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = node
        .timestream(
            "CreateTable",
            serde_json::json!({"DatabaseName": "weather", "TableName": "balloons"}),
        )
        .await;
    assert_eq!(status, 200);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let records: Vec<_> = (0..3)
        .map(|i| {
            serde_json::json!({
                "Dimensions": [{"Name": "balloon", "Value": format!("b{i}")}],
                "MeasureName": "altitude",
                "MeasureValue": format!("{}", 100 + i),
                "MeasureValueType": "BIGINT",
                "Time": format!("{}", now_ms - i),
            })
        })
        .collect();
    let (status, answer) = node
        .timestream(
            "WriteRecords",
            serde_json::json!({
                "DatabaseName": "weather",
                "TableName": "balloons",
                "Records": records,
            }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["RecordsIngested"]["Total"], 3, "{answer}");

    let (status, answer) = node
        .timestream(
            "Query",
            serde_json::json!({
                "QueryString": "SELECT sum(measure_value::bigint) AS s FROM \"weather\".\"balloons\""
            }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["Rows"][0]["Data"][0]["ScalarValue"], "303",
        "{answer}"
    );

    // A table that does not exist is the AWS exception, not a crash.
    let (status, answer) = node
        .timestream(
            "Query",
            serde_json::json!({"QueryString": "SELECT * FROM \"weather\".\"nope\""}),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(
        answer["__type"], "com.amazonaws.timestreamquery#ResourceNotFoundException",
        "{answer}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_is_a_bind_error() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address");
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let Err(error) = Node::start(NodeConfig::new(dir.path().to_path_buf(), addr, any)).await else {
        panic!("a node started on a taken port");
    };
    assert!(
        matches!(&error, ServeError::Bind { addr: a, .. } if *a == addr),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_reads_of_large_cells_arrive_whole() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let node = Running::start(dir.path()).await;
    create_table(node.grpc, "t").await;
    // Past the point-read path's inline budget, not a multiple of the value pieces.
    let big = "x".repeat(5_000_000);
    set_cell(node.grpc, "t", "a", "small").await;
    set_cell(node.grpc, "t", "big", &big).await;
    set_cell(node.grpc, "t", "c", &big[..300_000]).await;
    let keys = |keys: &[&str]| data::RowSet {
        row_keys: keys.iter().map(|k| k.to_string().into()).collect(),
        ..Default::default()
    };
    let got = read(node.grpc, "t", Some(keys(&["big"]))).await;
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].0.as_str(), got[0].1.len()), ("big", big.len()));
    let got = read(node.grpc, "t", Some(keys(&["a", "big", "c"]))).await;
    let sizes: Vec<_> = got.iter().map(|(k, v)| (k.as_str(), v.len())).collect();
    assert_eq!(sizes, [("a", 5), ("big", 5_000_000), ("c", 300_000)]);
    assert_eq!(read_all(node.grpc, "t").await, got, "a scan reads the same");

    // gRPC's Python library keeps a 4 MiB receive limit on emulator channels: it gets
    // the large row in responses of about 1 MiB, each naming the row.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", node.grpc))
        .expect("endpoint")
        .user_agent("grpc-python/1.66.1")
        .expect("user agent")
        .connect()
        .await
        .expect("connect");
    let mut stream = data_client(channel)
        .read_rows(data::ReadRowsRequest {
            table_name: table_name("t"),
            rows: Some(keys(&["big"])),
            ..Default::default()
        })
        .await
        .expect("ReadRows")
        .into_inner();
    let (mut responses, mut value) = (0, 0);
    while let Some(response) = stream.message().await.expect("a ReadRows response") {
        responses += 1;
        let bytes: usize = response.chunks.iter().map(|c| c.value.len()).sum();
        assert!(bytes <= 2 * 1024 * 1024, "a response of {bytes} bytes");
        assert_eq!(&response.chunks[0].row_key[..], b"big");
        value += bytes;
    }
    assert_eq!((value, responses > 4), (big.len(), true));
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_row_keys_of_a_small_table_ends_with_its_last_row_and_the_empty_key() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let node = Running::start(dir.path()).await;
    create_table(node.grpc, "t").await;
    for key in ["a", "b", "c"] {
        set_cell(node.grpc, "t", key, "v").await;
    }
    let mut client = data_client(connect(&node.grpc.to_string()).await.expect("connect"));
    let mut stream = client
        .sample_row_keys(data::SampleRowKeysRequest {
            table_name: table_name("t"),
            ..Default::default()
        })
        .await
        .expect("SampleRowKeys")
        .into_inner();
    let mut samples = Vec::new();
    while let Some(s) = stream.message().await.expect("a sample") {
        samples.push((s.row_key.to_vec(), s.offset_bytes));
    }
    let keys: Vec<&[u8]> = samples.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, [&b"c"[..], b""], "{samples:?}");
    assert!(
        0 < samples[0].1 && samples[0].1 < samples[1].1,
        "{samples:?}"
    );
    node.stop().await;
}
