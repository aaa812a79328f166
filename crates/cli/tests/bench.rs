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
