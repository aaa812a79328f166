//! `almanac ts import` of UNLOAD-shaped directories against a live server: a CSV
//! UNLOAD (no header, gzip and plain files, a partition folder, a manifest and a
//! metadata file) into a multi-measure table, a single-measure table's UNLOAD, a
//! Parquet file, and a resumed import that skips what its kept position says is done.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use common::Server;

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn`, as UNLOAD writes a TIMESTAMP.
fn unload_time(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .expect("a time")
        .format("%Y-%m-%d %H:%M:%S%.9f")
        .to_string()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
    std::fs::write(path, text).expect("write");
}

fn count(server: &Server, sql: &str) -> String {
    server.ok("sql", &["-e", sql, "--format", "csv"])
}

#[test]
fn unload_directories_import_and_resume() {
    let server = Server::start("ts-import");
    server.ok("ts", &["create-database", "moved"]);
    for t in ["multi", "single", "fromparquet"] {
        server.ok("ts", &["create-table", "moved", t, "--memory-hours", "48"]);
    }
    let root = tempfile::tempdir().expect("temp dir");
    let t0 = now_secs() - 3600;

    // A CSV UNLOAD of a multi-measure table, partitioned by region.
    let dir = root.path().join("multi");
    let metadata = serde_json::json!({"ColumnInfo": [
        {"Name": "hostname", "Type": {"ScalarType": "VARCHAR"}},
        {"Name": "measure_name", "Type": {"ScalarType": "VARCHAR"}},
        {"Name": "time", "Type": {"ScalarType": "TIMESTAMP"}},
        {"Name": "cpu", "Type": {"ScalarType": "DOUBLE"}},
        {"Name": "mem", "Type": {"ScalarType": "BIGINT"}},
        {"Name": "note", "Type": {"ScalarType": "VARCHAR"}},
        {"Name": "samples", "Type": {"ArrayColumnInfo": {"Type": {"ScalarType": "DOUBLE"}}}},
        {"Name": "region", "Type": {"ScalarType": "VARCHAR"}}
    ], "Author": {"Name": "Amazon Timestream", "MetadataFileVersion": "1.0"}});
    write(&dir.join("Q_1_metadata.json"), &metadata.to_string());
    let manifest = serde_json::json!({"result_files": [
        {"url": "s3://bucket/multi/results/region=eu/Q_1_a.gz", "file_metadata": {"row_count": 3}},
        {"url": "s3://bucket/multi/results/region=us/Q_1_b.csv", "file_metadata": {"row_count": 2}}
    ]});
    write(&dir.join("Q_1_manifest.json"), &manifest.to_string());
    let eu = format!(
        "h1,cpu,{},0.5,10,\"said \\\"hi\\\", twice\",\"[1.0,2.0]\"\nh2,cpu,{},1.5,,,\"[]\"\nh1,cpu,not a time,1,1,,\n",
        unload_time(t0),
        unload_time(t0 + 10)
    );
    let path = dir.join("results/region=eu/Q_1_a.gz");
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dirs");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).expect("create"),
        flate2::Compression::fast(),
    );
    gz.write_all(eu.as_bytes()).expect("gzip");
    gz.finish().expect("gzip");
    write(
        &dir.join("results/region=us/Q_1_b.csv"),
        &format!(
            "h3,cpu,{},2.5,30,,\nh3,cpu,{},3.5,31,,\n",
            unload_time(t0),
            unload_time(t0 + 10)
        ),
    );
    let d = dir.to_str().expect("utf-8");
    let out = server.ok("ts", &["import", "moved", "multi", d]);
    assert!(
        out.contains("ingested 4 records from 2 files, rejected 1"),
        "{out}"
    );
    assert!(out.contains("results/region=eu/Q_1_a.gz:3:"), "{out}");
    assert!(out.contains("\"not a time\" is not a timestamp"), "{out}");
    let rows = count(
        &server,
        "SELECT region, hostname, cpu, mem, note FROM \"moved\".\"multi\" ORDER BY hostname, time",
    );
    assert_eq!(
        rows,
        "region,hostname,cpu,mem,note\neu,h1,0.5,10,\"said \"\"hi\"\", twice\"\neu,h2,1.5,,\nus,h3,2.5,30,\nus,h3,3.5,31,\n"
    );
    // Done files are not read again.
    let again = server.ok("ts", &["import", "moved", "multi", d]);
    assert!(again.contains("ingested 0 records"), "{again}");

    // A single-measure table's UNLOAD, with a header, resumed after line 2.
    let dir = root.path().join("single");
    write(
        &dir.join("Q_2_metadata.json"),
        &serde_json::json!({"ColumnInfo": [
            {"Name": "host", "Type": {"ScalarType": "VARCHAR"}},
            {"Name": "measure_name", "Type": {"ScalarType": "VARCHAR"}},
            {"Name": "time", "Type": {"ScalarType": "TIMESTAMP"}},
            {"Name": "measure_value::double", "Type": {"ScalarType": "DOUBLE"}},
            {"Name": "measure_value::varchar", "Type": {"ScalarType": "VARCHAR"}}
        ]})
        .to_string(),
    );
    write(
        &dir.join("results/Q_2_x.csv"),
        &format!(
            "host,measure_name,time,measure_value::double,measure_value::varchar\nh1,temp,{},20.5,\nh1,state,{},,up\nh2,temp,{},21.5,\n",
            unload_time(t0),
            unload_time(t0),
            unload_time(t0 + 5)
        ),
    );
    write(
        &dir.join(".almanac-import.json"),
        r#"{"target":"moved.single","files":{"results/Q_2_x.csv":2}}"#,
    );
    let d = dir.to_str().expect("utf-8");
    let out = server.ok("ts", &["import", "moved", "single", d]);
    assert!(out.contains("ingested 2 records"), "{out}");
    let rows = count(
        &server,
        "SELECT measure_name, measure_value::double, measure_value::varchar FROM \"moved\".\"single\" ORDER BY measure_name",
    );
    // Line 2 (h1's 20.5) was done before the run.
    assert_eq!(
        rows,
        "measure_name,measure_value::double,measure_value::varchar\nstate,,up\ntemp,21.5,\n"
    );
    let wrong = server.fails("ts", &["import", "moved", "multi", d]);
    assert!(wrong.contains("--restart"), "{wrong}");
    let out = server.ok("ts", &["import", "moved", "single", d, "--restart"]);
    assert!(out.contains("ingested 3 records"), "{out}");

    // Parquet, as Arrow writes it.
    use almanac_sql::arrow::array::{
        ArrayRef, Float64Array, RecordBatch, StringArray, TimestampNanosecondArray,
    };
    let dir = root.path().join("parquet");
    std::fs::create_dir_all(dir.join("results")).expect("dirs");
    let batch = RecordBatch::try_from_iter(vec![
        (
            "hostname",
            Arc::new(StringArray::from(vec!["p1", "p2"])) as ArrayRef,
        ),
        (
            "measure_name",
            Arc::new(StringArray::from(vec!["cpu", "cpu"])) as ArrayRef,
        ),
        (
            "time",
            Arc::new(TimestampNanosecondArray::from(vec![
                t0 * 1_000_000_000,
                (t0 + 1) * 1_000_000_000,
            ])) as ArrayRef,
        ),
        (
            "usage",
            Arc::new(Float64Array::from(vec![Some(0.25), None])) as ArrayRef,
        ),
        (
            "idle",
            Arc::new(Float64Array::from(vec![0.75, 0.5])) as ArrayRef,
        ),
    ])
    .expect("a batch");
    let file = std::fs::File::create(dir.join("results/Q_3_y.parquet")).expect("create");
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    let out = server.ok(
        "ts",
        &[
            "import",
            "moved",
            "fromparquet",
            dir.to_str().expect("utf-8"),
        ],
    );
    assert!(out.contains("ingested 2 records"), "{out}");
    let rows = count(
        &server,
        "SELECT hostname, usage, idle FROM \"moved\".\"fromparquet\" ORDER BY hostname",
    );
    assert_eq!(rows, "hostname,usage,idle\np1,0.25,0.75\np2,,0.5\n");
}
