//! Scheduled queries under a manual clock: a query on `rate(1 minute)` runs when its
//! time comes, with `@scheduled_runtime` bound, writes its rows into the target
//! table, and keeps its run summary across a reopen.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests stop at the first surprise"
)]

use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options};
use almanac_jobs::scheduled::CreateRequest;
use almanac_jobs::{ScheduledQueries, ScheduledQueryState};
use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{
    Dimension, EmbeddedStore, MagneticWrites, MeasureValue, NewTable, Record, Retention,
    SharedStore, TimeSeries,
};
use serde_json::json;

/// 2026-01-01T00:00:00Z.
const T0_MS: i64 = 1_767_225_600_000;

struct Env {
    engine: Arc<Engine>,
    ts: Arc<TimeSeries<SharedStore>>,
    sql: Arc<SqlEngine>,
    clock: Arc<ManualClock>,
}

fn open(dir: &std::path::Path, clock: Arc<ManualClock>) -> Env {
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
    let store = EmbeddedStore::new(engine.clone(), almanac_timeseries::DEFAULT_INSTANCE);
    let ts = Arc::new(TimeSeries::open(store.shared(), clock.clone()).unwrap());
    let sql = Arc::new(SqlEngine::new(engine.clone(), ts.clone()).unwrap());
    Env {
        engine,
        ts,
        sql,
        clock,
    }
}

fn table(ts: &TimeSeries<SharedStore>, db: &str, name: &str) {
    ts.create_table(
        db,
        name,
        NewTable {
            retention: Some(Retention {
                memory_hours: 24,
                magnetic_days: 365,
            }),
            magnetic_writes: MagneticWrites {
                enabled: true,
                ..MagneticWrites::default()
            },
            ..NewTable::default()
        },
    )
    .unwrap();
}

fn request(name: &str, expression: &str, bucket: &str) -> CreateRequest {
    serde_json::from_value(json!({
        "Name": name,
        "QueryString": "SELECT bin(time, 1m) AS minute, hostname, avg(cpu) AS avg_cpu, count(*) AS n \
            FROM \"ops\".\"src\" \
            WHERE time > @scheduled_runtime - 10m AND time <= @scheduled_runtime \
            GROUP BY bin(time, 1m), hostname",
        "ScheduleConfiguration": {"ScheduleExpression": expression},
        "NotificationConfiguration": {"SnsConfiguration": {"TopicArn": "arn:aws:sns:us-east-1:0:t"}},
        "ScheduledQueryExecutionRoleArn": "arn:aws:iam::0:role/r",
        "ErrorReportConfiguration": {"S3Configuration": {"BucketName": bucket, "ObjectKeyPrefix": "errors"}},
        "TargetConfiguration": {"TimestreamConfiguration": {
            "DatabaseName": "ops",
            "TableName": "rollup",
            "TimeColumn": "minute",
            "DimensionMappings": [{"Name": "hostname", "DimensionValueType": "VARCHAR"}],
            "MultiMeasureMappings": {
                "TargetMultiMeasureName": "cpu_1m",
                "MultiMeasureAttributeMappings": [
                    {"SourceColumn": "avg_cpu", "MeasureValueType": "DOUBLE"},
                    {"SourceColumn": "n", "TargetMultiMeasureAttributeName": "samples", "MeasureValueType": "BIGINT"}
                ]
            }
        }}
    }))
    .unwrap()
}

async fn rollup(env: &Env) -> Vec<(String, String)> {
    let out = env
        .sql
        .query(
            "SELECT hostname, CAST(avg_cpu AS VARCHAR) || '/' || CAST(samples AS VARCHAR) AS v \
             FROM \"ops\".\"rollup\" ORDER BY time, hostname",
            &Scope::default(),
        )
        .await
        .unwrap();
    let mut rows = Vec::new();
    for b in &out.batches {
        let text = almanac_jobs::rows::text_rows(b.columns()).unwrap();
        for r in text {
            rows.push((r[0].clone().unwrap(), r[1].clone().unwrap()));
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_query_runs_when_due_and_writes_its_rollup() {
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0_MS * 1000));
    let env = open(dir.path(), clock.clone());
    env.ts.create_database("ops", None).unwrap();
    table(&env.ts, "ops", "src");
    table(&env.ts, "ops", "rollup");
    // Two hosts, one reading every 20 s over the first two minutes.
    let records: Vec<Record> = (0..6)
        .flat_map(|i| {
            ["a", "b"].into_iter().map(move |h| {
                let cpu = if h == "a" { 10.0 * f64::from(i) } else { 1.0 };
                Record::multi(
                    vec![Dimension::new("hostname", h)],
                    "m",
                    vec![MeasureValue::new("cpu", cpu.to_string(), "DOUBLE")],
                    T0_MS + 20_000 * i64::from(i),
                )
            })
        })
        .collect();
    env.ts.write_records("ops", "src", None, &records).unwrap();

    let queries = ScheduledQueries::open(
        env.sql.clone(),
        env.ts.clone(),
        env.clock.clone(),
        reports.path().to_path_buf(),
    )
    .unwrap();
    let arn = queries
        .create("us-east-1", request("rollup-1m", "rate(1 minute)", "b"))
        .await
        .unwrap();
    let d = queries.describe(&arn).unwrap();
    assert_eq!(d["State"], "ENABLED");
    assert_eq!(
        d["NextInvocationTime"],
        json!((T0_MS + 60_000) as f64 / 1000.0)
    );
    assert!(d.get("LastRunSummary").is_none());

    // Not due yet.
    clock.set((T0_MS + 59_000) * 1000);
    assert_eq!(queries.run_due().await, 0);
    // Due at T0 + 1 min and again at T0 + 2 min (the tick comes late, at 2:30).
    clock.set((T0_MS + 60_000) * 1000);
    assert_eq!(queries.run_due().await, 1);
    clock.set((T0_MS + 150_000) * 1000);
    assert_eq!(queries.run_due().await, 1);
    assert_eq!(queries.run_due().await, 0);

    let d = queries.describe(&arn).unwrap();
    let last = &d["LastRunSummary"];
    assert_eq!(last["RunStatus"], "AUTO_TRIGGER_SUCCESS", "{d}");
    assert_eq!(
        last["InvocationTime"],
        json!((T0_MS + 120_000) as f64 / 1000.0)
    );
    assert_eq!(last["ExecutionStats"]["QueryResultRows"], 4);
    assert_eq!(last["ExecutionStats"]["RecordsIngested"], 4);
    assert_eq!(
        d["PreviousInvocationTime"],
        json!((T0_MS + 120_000) as f64 / 1000.0)
    );
    assert_eq!(
        d["NextInvocationTime"],
        json!((T0_MS + 180_000) as f64 / 1000.0)
    );

    // Minute 0 holds a's 0, 10, 20 and b's three 1s; minute 1 a's 30, 40, 50.
    // The window (runtime − 10 min, runtime] leaves out the reading at T0 exactly
    // only when the runtime is T0 + 10 min or later.
    assert_eq!(
        rollup(&env).await,
        vec![
            ("a".into(), "10.0/3".into()),
            ("b".into(), "1.0/3".into()),
            ("a".into(), "40.0/3".into()),
            ("b".into(), "1.0/3".into()),
        ]
    );

    // Disabled: nothing runs; ExecuteScheduledQuery still does.
    queries.update(&arn, ScheduledQueryState::Disabled).unwrap();
    clock.set((T0_MS + 600_000) * 1000);
    assert_eq!(queries.run_due().await, 0);
    queries.execute(&arn, T0_MS + 60_000).await.unwrap();
    let d = queries.describe(&arn).unwrap();
    assert_eq!(d["LastRunSummary"]["RunStatus"], "MANUAL_TRIGGER_SUCCESS");
    assert!(d.get("NextInvocationTime").is_none(), "{d}");

    // Kept across a reopen.
    drop(queries);
    let queries = ScheduledQueries::open(
        env.sql.clone(),
        env.ts.clone(),
        env.clock.clone(),
        reports.path().to_path_buf(),
    )
    .unwrap();
    let d = queries.describe(&arn).unwrap();
    assert_eq!(d["State"], "DISABLED");
    assert_eq!(d["LastRunSummary"]["RunStatus"], "MANUAL_TRIGGER_SUCCESS");
    let (list, next) = queries.list(None, None).unwrap();
    assert_eq!(list.len(), 1);
    assert!(next.is_none());
    assert_eq!(
        list[0]["TargetDestination"]["TimestreamDestination"]["TableName"],
        "rollup"
    );
    drop(env.engine);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_rows_are_refused_fails_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0_MS * 1000));
    let env = open(dir.path(), clock.clone());
    env.ts.create_database("ops", None).unwrap();
    table(&env.ts, "ops", "src");
    // The rollup table keeps one hour in memory and takes no older writes.
    env.ts
        .create_table(
            "ops",
            "rollup",
            NewTable {
                retention: Some(Retention {
                    memory_hours: 1,
                    magnetic_days: 1,
                }),
                ..NewTable::default()
            },
        )
        .unwrap();
    let rec = Record::multi(
        vec![Dimension::new("hostname", "a")],
        "m",
        vec![MeasureValue::new("cpu", "5", "DOUBLE")],
        T0_MS,
    );
    env.ts.write_records("ops", "src", None, &[rec]).unwrap();
    let queries = ScheduledQueries::open(
        env.sql.clone(),
        env.ts.clone(),
        env.clock.clone(),
        reports.path().to_path_buf(),
    )
    .unwrap();
    let arn = queries
        .create("us-east-1", request("late", "cron(0 * * * ? *)", "bucket"))
        .await
        .unwrap();
    // Three hours later the reading is older than the rollup's memory store.
    clock.set((T0_MS + 3 * 3_600_000) * 1000);
    queries.execute(&arn, T0_MS + 60_000).await.unwrap();
    let d = queries.describe(&arn).unwrap();
    let last = &d["LastRunSummary"];
    assert_eq!(last["RunStatus"], "MANUAL_TRIGGER_FAILURE", "{d}");
    assert_eq!(last["ExecutionStats"]["QueryResultRows"], 1);
    assert_eq!(last["ExecutionStats"]["RecordsIngested"], 0);
    let key = last["ErrorReportLocation"]["S3ReportLocation"]["ObjectKey"]
        .as_str()
        .unwrap();
    assert!(key.starts_with("errors/late/"), "{key}");
    let report = std::fs::read_to_string(reports.path().join("bucket").join(key)).unwrap();
    assert!(report.contains("\"row\":1"), "{report}");
    assert_eq!(d["RecentlyFailedRuns"].as_array().unwrap().len(), 1);

    // Bad definitions are refused before anything is kept.
    let mut bad = request("bad", "rate(1 minute)", "b");
    bad.query_string = "SELECT 1 AS x".into();
    let e = queries.create("us-east-1", bad).await.unwrap_err();
    assert!(e.to_string().contains("\"minute\""), "{e}");
    let e = queries
        .create("us-east-1", request("bad", "rate(30 seconds)", "b"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ScheduleExpression"), "{e}");
    let e = queries
        .create("us-east-1", request("late", "rate(1 hour)", "b"))
        .await
        .unwrap_err();
    assert!(matches!(e, almanac_jobs::Error::Conflict(_)), "{e}");
    let e = queries
        .create("us-east-1", request("esc", "rate(1 hour)", ".."))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("BucketName"), "{e}");
    assert_eq!(queries.list(None, None).unwrap().0.len(), 1);
}
