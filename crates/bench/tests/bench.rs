//! The benchmarks end to end: `almanac-bench grpc` against a node started in this
//! process prints one line per phase, each with a rate and the server's CPU per
//! operation, and leaves no table behind; `almanac-bench ingest` writes every point.
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

use std::process::Command;

use almanac_engine::Durability;
use almanac_server::{Node, NodeConfig};

const BIN: &str = env!("CARGO_BIN_EXE_almanac-bench");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_grpc_prints_every_phase_and_cleans_up() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let any = "127.0.0.1:0".parse().expect("address");
    let node = Node::start(NodeConfig {
        durability: Durability::Buffer,
        ..NodeConfig::new(dir.path().to_path_buf(), any, any)
    })
    .await
    .expect("start a node");
    let addr = node.grpc_addr().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(node.run(async {
        let _ = stopped.await;
    }));
    // The node runs in this process: its CPU time is the test's.
    let pid = std::process::id().to_string();
    let args: Vec<String> = [
        "grpc",
        "--addr",
        &addr,
        "--secs",
        "1",
        "--rows",
        "300",
        "--concurrency",
        "4",
        "--server-pid",
        &pid,
    ]
    .map(String::from)
    .into();
    let out = tokio::task::spawn_blocking(move || Command::new(BIN).args(args).output())
        .await
        .expect("join")
        .expect("run almanac-bench grpc");
    let out_text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{out_text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = out_text;
    let phases = [
        ("preload (MutateRows x100)", "rows/s", "µs/row"),
        ("no-op RPC floor (PingAndWarm)", "calls/s", "µs/call"),
        ("point reads (ReadRows)", "reads/s", "µs/read"),
        ("single-row writes (MutateRow)", "writes/s", "µs/write"),
        ("batched writes (MutateRows x100)", "rows/s", "µs/row"),
        ("full scan (ReadRows)", "MB/s", "µs/row"),
    ];
    for (name, unit, cpu) in phases {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} line in:\n{out}"));
        let rate: f64 = line[name.len()..]
            .split_whitespace()
            .next()
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no rate in {line:?}"));
        assert!(rate > 0.0, "{line}");
        assert!(line.contains(unit) && line.contains(cpu), "{line}");
    }
    let mut admin = almanac_client::grpc::admin_client(
        almanac_client::grpc::connect(&addr).await.expect("connect"),
    );
    let tables = admin
        .list_tables(
            almanac_api::google::bigtable::admin::v2::ListTablesRequest {
                parent: "projects/almanac/instances/almanac".into(),
                ..Default::default()
            },
        )
        .await
        .expect("ListTables")
        .into_inner()
        .tables;
    assert!(
        tables.is_empty(),
        "the bench tables are deleted: {tables:?}"
    );
    let _ = stop.send(());
    serving
        .await
        .expect("join")
        .expect("the node stops cleanly");
}

/// `almanac-bench ingest` runs the WriteRecords path in process: every point is
/// written (none rejected), each stage is timed, and its directory is removed.
#[test]
fn bench_ingest_times_every_stage_and_cleans_up() {
    let dir = std::env::temp_dir().join(format!("almanac-test-ingest-{}", std::process::id()));
    let out = Command::new(BIN)
        .args(["ingest", "--hosts", "7", "--days", "0.02", "--writers", "2"])
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("run almanac-bench ingest");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 7 hosts x 173 readings (0.02 days every 10 s) x 10 measures.
    assert!(
        text.contains("(12110 points in"),
        "not every point was written:\n{text}"
    );
    let rate = |name: &str, column: usize| -> f64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} line in:\n{text}"));
        line.split_whitespace()
            .nth(column)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number in {line:?}"))
    };
    assert!(rate("points/s", 1) > 0.0);
    for stage in ["generate", "parse", "write", "sync"] {
        assert!(rate(stage, 1) > 0.0, "{stage} took no time:\n{text}");
    }
    assert!(!dir.exists(), "{} is left behind", dir.display());
}
