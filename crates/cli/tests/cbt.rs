//! The cbt-like commands end to end: start the built `almanac` binary as a server on
//! a free loopback port (`--addr 127.0.0.1:0`; the bound address is read from its
//! `listening on ADDR` line), drive it with `almanac createtable/set/read/lookup/
//! count/deleterow/ls/setgcpolicy`, check what they print, then stop the server with
//! SIGTERM and check that it exits 0 after a clean shutdown.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::process::Command;

use common::{BIN, Server};

#[test]
fn cbt_commands_against_a_live_server() {
    let server = Server::start("cbt");

    // Schema: a table with two families, one with a GC policy.
    assert_eq!(
        server.ok("createtable", &["t", "families=cf1,cf2:maxversions=3"]),
        ""
    );
    assert_eq!(server.ok("ls", &[]), "t\n");
    let families = server.ok("ls", &["t"]);
    let lines: Vec<&str> = families.lines().collect();
    assert_eq!(lines.len(), 4, "{families}");
    assert!(
        lines[0].starts_with("Family Name") && lines[0].ends_with("GC Policy"),
        "{families}"
    );
    assert!(
        lines[2].starts_with("cf1") && lines[2].ends_with("<never>"),
        "{families}"
    );
    assert!(
        lines[3].starts_with("cf2") && lines[3].ends_with("versions() > 3"),
        "{families}"
    );

    // A server error prints the gRPC code and message and exits non-zero.
    let err = server.fails("createtable", &["t"]);
    assert!(
        err.contains("AlreadyExists (6)") && err.contains("already exists"),
        "{err}"
    );
    let err = server.fails("set", &["nope", "r", "cf1:a=1"]);
    assert!(err.contains("NotFound (5)"), "{err}");

    // Writes: server time by default, or an explicit µs timestamp (MILLIS granularity).
    server.ok("set", &["t", "r1", "cf1:a=hello", "cf2:x=tab\there"]);
    server.ok("set", &["t", "r2", "cf1:a=v@1700000000123000"]);
    server.ok("set", &["t", "user1", "cf1:a=u"]);

    let all = server.ok("read", &["t"]);
    let keys: Vec<&str> = all
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('-'))
        .collect();
    assert_eq!(keys, ["r1", "r2", "user1"], "{all}");
    assert_eq!(
        all.lines().filter(|l| *l == "-".repeat(40)).count(),
        3,
        "{all}"
    );
    assert!(
        all.contains("\n  cf1:a ") && all.contains("\n    hello\n"),
        "{all}"
    );
    assert!(
        all.contains("\n    \"tab\\there\"\n"),
        "control characters are quoted: {all}"
    );
    assert!(
        all.contains("@ 2023/11/14-22:13:20.123000\n    v\n"),
        "{all}"
    );

    assert_eq!(
        keys_of(&server.ok("read", &["t", "prefix=user"])),
        ["user1"]
    );
    assert_eq!(
        keys_of(&server.ok("read", &["t", "start=r2", "end=user1"])),
        ["r2"]
    );
    assert_eq!(
        keys_of(&server.ok("read", &["t", "count=2", "reversed=true"])),
        ["user1", "r2"]
    );
    let cf2_only = server.ok("read", &["t", "columns=cf2:x"]);
    assert_eq!(keys_of(&cf2_only), ["r1"]);
    assert!(!cf2_only.contains("cf1:"), "{cf2_only}");

    let one = server.ok("lookup", &["t", "r1"]);
    assert_eq!(keys_of(&one), ["r1"]);
    assert!(
        one.contains("  cf1:a ") && one.contains("  cf2:x "),
        "{one}"
    );
    let err = server.fails("lookup", &["t", "missing"]);
    assert!(err.contains("not found"), "{err}");

    assert_eq!(server.ok("count", &["t"]), "3\n");
    assert_eq!(server.ok("deleterow", &["t", "r1"]), "");
    assert_eq!(server.ok("count", &["t"]), "2\n");
    server.fails("lookup", &["t", "r1"]);

    // GC policies in cbt's syntax.
    assert_eq!(
        server.ok(
            "setgcpolicy",
            &["t", "cf1", "maxversions=3", "or", "maxage=1d"]
        ),
        "cf1: versions() > 3 || age() > 1d\n"
    );
    assert_eq!(
        server.ok("setgcpolicy", &["t", "cf2", "maxage=2h"]),
        "cf2: age() > 2h\n"
    );
    let families = server.ok("ls", &["t"]);
    assert!(
        families.contains("versions() > 3 || age() > 1d"),
        "{families}"
    );
    assert!(
        families
            .lines()
            .any(|l| l.starts_with("cf2") && l.ends_with("age() > 2h")),
        "{families}"
    );
    let err = server.fails("setgcpolicy", &["t", "cf1", "maxage=10"]);
    assert!(err.contains("bad duration"), "{err}");

    // The address can also come from $BIGTABLE_EMULATOR_HOST.
    let out = Command::new(BIN)
        .args(["ls"])
        .env("BIGTABLE_EMULATOR_HOST", &server.addr)
        .output()
        .expect("run almanac ls");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "t\n");

    let (status, stderr) = server.stop();
    assert!(status.success(), "server exit {status:?}: {stderr}");
    assert!(stderr.contains("stopped cleanly"), "{stderr}");
}

/// The row keys in `read`/`lookup` output: the line after each line of dashes.
fn keys_of(out: &str) -> Vec<&str> {
    let lines: Vec<&str> = out.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "-".repeat(40))
        .map(|w| w[1])
        .collect()
}
