//! A task stopped by a restart resumes from its kept position; a finished task
//! answers Describe with its counts.

use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options};
use almanac_timeseries::{EmbeddedStore, NewTable, SharedStore, TimeSeries};
use serde_json::json;

use super::*;

const T0_MS: i64 = 1_767_225_600_000;

fn open(dir: &std::path::Path) -> Arc<TimeSeries<SharedStore>> {
    let clock = Arc::new(ManualClock::new(T0_MS * 1000));
    let engine = Arc::new(
        Engine::open(
            dir,
            Options {
                durability: Durability::None,
                clock: clock.clone(),
                sweep_interval: None,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let store = EmbeddedStore::new(engine, almanac_timeseries::DEFAULT_INSTANCE);
    Arc::new(TimeSeries::open(store.shared(), clock).unwrap())
}

fn request() -> CreateRequest {
    serde_json::from_value(json!({
        "TargetDatabaseName": "ops",
        "TargetTableName": "load",
        "DataModelConfiguration": {"DataModel": {
            "TimeColumn": "t",
            "TimeUnit": "SECONDS",
            "DimensionMappings": [{"SourceColumn": "host"}],
            "MeasureNameColumn": "m",
            "MixedMeasureMappings": [
                {"MeasureName": "cpu", "SourceColumn": "v", "MeasureValueType": "DOUBLE"},
                {"MeasureName": "up", "SourceColumn": "flag", "TargetMeasureName": "is_up", "MeasureValueType": "BOOLEAN"}
            ]
        }},
        "DataSourceConfiguration": {
            "DataSourceS3Configuration": {"BucketName": "src"},
            "CsvConfiguration": {"ColumnSeparator": ";"},
            "DataFormat": "CSV"
        },
        "ReportConfiguration": {"ReportS3Configuration": {"BucketName": "rep"}},
        "RecordVersion": 3
    }))
    .unwrap()
}

fn wait(loads: &BatchLoads, id: &str) -> Json {
    for _ in 0..500 {
        let d = loads.describe(id).unwrap();
        if !matches!(
            d["TaskStatus"].as_str(),
            Some("CREATED" | "IN_PROGRESS" | "PENDING_RESUME")
        ) {
            return d;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    unreachable!("the task did not finish");
}

#[test]
fn mixed_mappings_load_and_a_stopped_task_resumes_where_it_was() {
    let data = tempfile::tempdir().unwrap();
    let buckets = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(buckets.path().join("src")).unwrap();
    let t = T0_MS / 1000;
    let mut csv = String::from("t;host;m;v;flag\n");
    for i in 0..6 {
        csv.push_str(&format!("{};h{};cpu;{}.5;\n", t + i, i % 2, i));
    }
    csv.push_str(&format!("{t};h0;up;;true\n"));
    csv.push_str(&format!("{t};h0;other;1;\n"));
    std::fs::write(buckets.path().join("src/a.csv"), &csv).unwrap();

    let ts = open(data.path());
    ts.create_database("ops", None).unwrap();
    ts.create_table("ops", "load", NewTable::default()).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(T0_MS * 1000));
    let loads = Arc::new(
        BatchLoads::open(ts.clone(), clock.clone(), buckets.path().to_path_buf()).unwrap(),
    );
    let id = loads.create(request()).unwrap();
    let d = wait(&loads, &id);
    assert_eq!(d["TaskStatus"], "SUCCEEDED", "{d}");
    // Six cpu rows, one up row; the "other" row matches no mapping.
    assert_eq!(d["ProgressReport"]["RecordsProcessed"], 8);
    assert_eq!(d["ProgressReport"]["RecordsIngested"], 7);
    assert_eq!(d["RecordVersion"], 3);
    assert_eq!(
        d["DataModelConfiguration"]["DataModel"]["DimensionMappings"][0]["DestinationColumn"],
        "host"
    );

    // A task the server was running when it stopped: kept at line 4 of a.csv (the
    // header is line 1, so rows 1 to 3 are done).
    let mut stopped = loads.task(&id).unwrap();
    stopped.id = "STOPPED00000000000000000000000001".into();
    stopped.table = "load".into();
    stopped.status = Status::InProgress;
    stopped.progress = Progress::default();
    stopped.next_file = 0;
    stopped.lines_done = 4;
    loads.save(&stopped).unwrap();
    drop(loads);
    ts.delete_table("ops", "load").unwrap();
    ts.create_table("ops", "load", NewTable::default()).unwrap();

    let loads =
        Arc::new(BatchLoads::open(ts.clone(), clock, buckets.path().to_path_buf()).unwrap());
    let d = loads.describe(&stopped.id).unwrap();
    assert_eq!(d["TaskStatus"], "PROGRESS_STOPPED", "{d}");
    assert!(
        d["ErrorMessage"].as_str().unwrap().contains("line 5"),
        "{d}"
    );
    assert!(d.get("ResumableUntil").is_some());
    let (list, _) = loads
        .list(None, None, Some(Status::ProgressStopped))
        .unwrap();
    assert_eq!(list.len(), 1);
    assert!(
        loads.resume(&id).is_err(),
        "a finished task does not resume"
    );
    loads.resume(&stopped.id).unwrap();
    let d = wait(&loads, &stopped.id);
    assert_eq!(d["TaskStatus"], "SUCCEEDED", "{d}");
    // Lines 5 to 9: three cpu rows, the up row and the unmapped one.
    assert_eq!(d["ProgressReport"]["RecordsProcessed"], 5);
    assert_eq!(d["ProgressReport"]["RecordsIngested"], 4);
}

#[test]
fn bad_tasks_are_refused_before_anything_is_kept() {
    let data = tempfile::tempdir().unwrap();
    let buckets = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(buckets.path().join("src")).unwrap();
    std::fs::write(buckets.path().join("src/a.csv"), "t;host;m;v;flag\n").unwrap();
    let ts = open(data.path());
    ts.create_database("ops", None).unwrap();
    ts.create_table("ops", "load", NewTable::default()).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(T0_MS * 1000));
    let loads = Arc::new(BatchLoads::open(ts, clock, buckets.path().to_path_buf()).unwrap());
    type Edit = fn(&mut CreateRequest);
    let cases: Vec<(Edit, &str)> = vec![
        (|r| r.target_table_name = "nope".into(), "nope"),
        (
            |r| r.data_source_configuration.data_format = "PARQUET".into(),
            "DataFormat",
        ),
        (
            |r| {
                r.data_source_configuration
                    .data_source_s3_configuration
                    .object_key_prefix = Some("zzz".into())
            },
            "prefix",
        ),
        (
            |r| {
                r.data_source_configuration
                    .data_source_s3_configuration
                    .bucket_name = "../etc".into()
            },
            "BucketName",
        ),
        (|r| r.report_configuration = None, "ReportS3Configuration"),
        (
            |r| {
                if let Some(m) = r
                    .data_model_configuration
                    .as_mut()
                    .and_then(|c| c.data_model.as_mut())
                {
                    m.time_unit = Some("HOURS".into());
                }
            },
            "TimeUnit",
        ),
    ];
    for (edit, needle) in cases {
        let mut req = request();
        edit(&mut req);
        let e = loads.create(req).unwrap_err();
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    assert!(loads.list(None, None, None).unwrap().0.is_empty());
}
