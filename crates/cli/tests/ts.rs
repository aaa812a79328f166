//! `almanac ts` end to end against a live server's Timestream endpoint: create a
//! database and a table with a layout, write a CSV with one bad row and a JSON-lines
//! file, and check the summaries, the rejection with its line number, and what
//! describe / ls print (layout, inferred schema).
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use common::Server;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[test]
fn ts_commands_against_a_live_server() {
    let server = Server::start("ts");
    assert_eq!(
        server.ok("ts", &["create-database", "weather"]),
        "created database weather\n"
    );
    let created = server.ok(
        "ts",
        &[
            "create-table",
            "weather",
            "balloons",
            "--memory-hours",
            "48",
            "--layout",
            "row-serialized",
            "--reverse-time",
        ],
    );
    assert!(created.contains("layout row-serialized"), "{created}");
    assert!(created.contains("reverse time true"), "{created}");
    assert!(
        server
            .fails("ts", &["create-table", "weather", "balloons"])
            .contains("ConflictException")
    );

    let dir = std::env::temp_dir().join(format!("almanac-ts-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let start = now_secs() / 60 * 60 - 3600;
    let mut csv = String::from("time,location,balloon,pressure,temperature\n");
    for m in 0..150u64 {
        csv.push_str(&format!(
            "{},us-west2,{},{},{}\n",
            start + m * 20,
            3698 + m % 3,
            94_000 + m,
            9.5
        ));
    }
    csv.push_str(&format!("{start},us-west2,3698,not-a-number,1.0\n"));
    let csv_path = dir.join("balloons.csv");
    std::fs::write(&csv_path, csv).expect("write csv");
    let path = csv_path.to_str().expect("utf-8 path");
    let out = server.ok(
        "ts",
        &[
            "write",
            "weather",
            "balloons",
            path,
            "--dimensions",
            "location,balloon",
            "--measure-name",
            "reading",
            "--time-unit",
            "SECONDS",
        ],
    );
    assert!(
        out.contains("rejected line 152: Measure value 'not-a-number' is not a valid BIGINT."),
        "{out}"
    );
    assert!(out.contains("ingested 150 records, rejected 1"), "{out}");

    let jsonl_path = dir.join("extra.jsonl");
    let t = (start * 1000).to_string();
    std::fs::write(
        &jsonl_path,
        format!(
            "{{\"Dimensions\":[{{\"Name\":\"location\",\"Value\":\"eu\"}}],\"MeasureName\":\"wind\",\"MeasureValue\":\"3\",\"MeasureValueType\":\"BIGINT\",\"Time\":\"{t}\"}}\n\n\
             {{\"Dimensions\":[{{\"Name\":\"location\",\"Value\":\"eu\"}}],\"MeasureName\":\"wind\",\"MeasureValue\":\"4\",\"MeasureValueType\":\"BIGINT\",\"Time\":\"{t}\"}}\n"
        ),
    )
    .expect("write jsonl");
    let out = server.ok(
        "ts",
        &[
            "write",
            "weather",
            "balloons",
            jsonl_path.to_str().expect("utf-8"),
        ],
    );
    assert!(
        out.contains("ingested 1 records, rejected 1"),
        "a same-version rewrite with another value is rejected: {out}"
    );
    assert!(
        out.contains("rejected line 3: A record already exists"),
        "{out}"
    );

    let described = server.ok("ts", &["describe", "weather", "balloons"]);
    assert!(
        described.contains("dimensions (row-key order): location, balloon"),
        "{described}"
    );
    assert!(described.contains("measure reading: MULTI"), "{described}");
    assert!(described.contains("measure wind: BIGINT"), "{described}");
    assert!(
        described.contains("multi-measure attribute temperature: DOUBLE"),
        "{described}"
    );
    assert_eq!(server.ok("ts", &["ls"]), "weather\t1 tables\n");
    assert_eq!(server.ok("ts", &["ls", "weather"]), "balloons\n");
    assert!(
        server
            .fails("ts", &["delete-database", "weather"])
            .contains("ValidationException")
    );
    server.ok("ts", &["delete-table", "weather", "balloons"]);
    server.ok("ts", &["delete-database", "weather"]);
    assert_eq!(server.ok("ts", &["ls"]), "");
    let _ = std::fs::remove_dir_all(&dir);
    let (status, stderr) = server.stop();
    assert!(status.success(), "server exit {status}: {stderr}");
}
