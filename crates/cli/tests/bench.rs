//! `almanac bench grpc` end to end: the load generator against a live server prints
//! one line per phase, each with a rate and the server's CPU per operation, and
//! leaves no table behind.
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use common::Server;

#[test]
fn bench_grpc_prints_every_phase_and_cleans_up() {
    let server = Server::start("bench");
    let pid = server.pid().to_string();
    let out = server.ok(
        "bench",
        &[
            "grpc",
            "--addr",
            &server.addr,
            "--secs",
            "1",
            "--rows",
            "300",
            "--concurrency",
            "4",
            "--server-pid",
            &pid,
        ],
    );
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
    assert_eq!(server.ok("ls", &[]), "", "the bench tables are deleted");
}

/// `almanac bench ingest` runs the WriteRecords path in process: every point is
/// written (none rejected), each stage is timed, and its directory is removed.
#[test]
fn bench_ingest_times_every_stage_and_cleans_up() {
    let dir = std::env::temp_dir().join(format!("almanac-test-ingest-{}", std::process::id()));
    let out = std::process::Command::new(common::BIN)
        .args([
            "bench",
            "ingest",
            "--hosts",
            "7",
            "--days",
            "0.02",
            "--writers",
            "2",
        ])
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("run almanac bench ingest");
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
