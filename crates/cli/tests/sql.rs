//! `almanac sql` end to end against a live server's Query API: records written with
//! `almanac ts write`, read back with `-e` in each format (and across pages), from
//! piped stdin, from a Bigtable table with `--instance`, and refused statements that
//! print the service's exception and exit non-zero.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use common::Server;

/// The `almanac ts write` input: three rows, one without a note.
fn write_usage(server: &Server, start: u64) {
    server.ok("ts", &["create-database", "metrics"]);
    server.ok(
        "ts",
        &["create-table", "metrics", "usage", "--memory-hours", "48"],
    );
    let dir = std::env::temp_dir().join(format!("almanac-sql-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("usage.csv");
    std::fs::write(
        &path,
        format!(
            "time,host,cpu,note\n{},h1,1.5,\"hello, world\"\n{},h2,2.5,plain\n{},h1,0.5,\n",
            start,
            start + 10,
            start + 20
        ),
    )
    .expect("write csv");
    let out = server.ok(
        "ts",
        &[
            "write",
            "metrics",
            "usage",
            path.to_str().expect("utf-8 path"),
            "--dimensions",
            "host",
            "--measure-name",
            "usage",
            "--time-unit",
            "SECONDS",
        ],
    );
    assert!(out.contains("ingested 3 records, rejected 0"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

const SELECT: &str = r#"SELECT host, cpu, note FROM "metrics"."usage" ORDER BY time"#;

#[test]
fn sql_against_a_live_server() {
    let server = Server::start("sql");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    write_usage(&server, now - 600);

    // Table: aligned, numbers right-aligned, NULL shown, a row count.
    assert_eq!(
        server.ok("sql", &["-e", SELECT]),
        " host | cpu | note\n\
         ------+-----+--------------\n \
         h1   | 1.5 | hello, world\n \
         h2   | 2.5 | plain\n \
         h1   | 0.5 | NULL\n\
         (3 rows)\n"
    );
    // CSV: header, RFC 4180 quoting, empty for NULL.
    assert_eq!(
        server.ok("sql", &["-e", SELECT, "--format", "csv"]),
        "host,cpu,note\nh1,1.5,\"hello, world\"\nh2,2.5,plain\nh1,0.5,\n"
    );
    // JSON lines: typed values in column order.
    assert_eq!(
        server.ok("sql", &["-e", SELECT, "--format", "json"]),
        "{\"host\":\"h1\",\"cpu\":1.5,\"note\":\"hello, world\"}\n\
         {\"host\":\"h2\",\"cpu\":2.5,\"note\":\"plain\"}\n\
         {\"host\":\"h1\",\"cpu\":0.5,\"note\":null}\n"
    );
    // One row per page: the pages are followed to the end.
    assert_eq!(
        server.ok("sql", &["-e", SELECT, "--format", "csv", "--max-rows", "1"]),
        "host,cpu,note\nh1,1.5,\"hello, world\"\nh2,2.5,plain\nh1,0.5,\n"
    );
    let grouped = server.ok(
        "sql",
        &[
            "-e",
            r#"SELECT host, count(*) AS n, max(cpu) AS top FROM "metrics"."usage" WHERE time > ago(1h) GROUP BY host ORDER BY host"#,
            "--format",
            "json",
        ],
    );
    assert_eq!(
        grouped,
        "{\"host\":\"h1\",\"n\":2,\"top\":1.5}\n{\"host\":\"h2\",\"n\":1,\"top\":2.5}\n"
    );

    // Refused statements: the exception and message on stderr, exit code 1.
    let err = server.fails("sql", &["-e", "SELEC 1"]);
    assert!(
        err.contains("ValidationException") && err.contains("line 1:1:"),
        "{err}"
    );
    let err = server.fails("sql", &["-e", r#"SELECT * FROM "metrics"."nope""#]);
    assert!(
        err.contains("ResourceNotFoundException") && err.contains("metrics.nope"),
        "{err}"
    );

    // Statements from stdin: each ends at ';' outside quotes; a failure does not stop
    // the rest, but makes the exit code 1.
    let out = server.run_with_stdin(
        "sql",
        &["--format", "csv"],
        "SELECT 1 AS a;\nSELECT 'x;y' AS b\n  ;\nSELEC 2;\n-- the last needs no ';'\nSELECT 3 AS c",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a\n1\nb\nx;y\nc\n3\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ValidationException"), "{stderr}");
    assert_eq!(out.status.code(), Some(1));
    let out = server.run_with_stdin("sql", &[], "SELECT 42 AS answer;\n");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        " answer\n--------\n     42\n(1 rows)\n"
    );

    // --instance: bare names are that Bigtable instance's tables.
    server.ok("createtable", &["events", "families=cf"]);
    server.ok("set", &["events", "row-1", "cf:a=hello"]);
    let instance = "projects/almanac/instances/almanac";
    assert_eq!(
        server.ok(
            "sql",
            &[
                "--instance",
                instance,
                "--format",
                "csv",
                "-e",
                "SELECT CAST(_key AS VARCHAR) AS k, _key FROM events",
            ],
        ),
        "k,_key\nrow-1,cm93LTE=\n",
        "keys are bytes: base64 unless cast"
    );
    let err = server.fails("sql", &["-e", "SELECT * FROM events"]);
    assert!(err.contains("ResourceNotFoundException"), "{err}");
    let err = server.fails("sql", &["--instance", "nonsense", "-e", "SELECT 1"]);
    assert!(err.contains("x-almanac-instance"), "{err}");

    let (status, stderr) = server.stop();
    assert!(status.success(), "server exit {status}: {stderr}");
}
