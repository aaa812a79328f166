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
    let mut client = data_client(connect(&grpc.to_string()).await.expect("connect"));
    let mut stream = client
        .read_rows(data::ReadRowsRequest {
            table_name: table_name(table),
            ..Default::default()
        })
        .await
        .expect("ReadRows")
        .into_inner();
    let (mut rows, mut key, mut value) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(response) = stream.message().await.expect("a ReadRows response") {
        for chunk in response.chunks {
            if !chunk.row_key.is_empty() {
                key = chunk.row_key.to_vec();
            }
            value.extend_from_slice(&chunk.value);
            if chunk.value_size == 0 {
                rows.push((
                    String::from_utf8_lossy(&key).into_owned(),
                    String::from_utf8_lossy(&value).into_owned(),
                ));
                value.clear();
            }
        }
    }
    rows
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
