//! Kept plans: a query run again with other times and names reuses its optimized plan
//! and answers as a query planned afresh does (in debug builds every reuse is also
//! planned afresh and the plans compared), and no plan is reused where it could be
//! wrong: a value that never changed, a query asking for the time, a table that grew
//! a column or was made again, a caller who may not read the table.

use std::sync::Arc;

mod common;

use almanac_sql::catalog::{TableAccess, TableRef};
use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{Layout, NewTable, Pattern, Retention, SharedStore, TimeSeries};
use common::{Result, multi, rows as render, single};

/// The fixture's "now": 2023-11-14T22:13:20Z.
const NOW_MS: i64 = 1_700_000_000_000;
/// Bucket of the table: ten minutes.
const BUCKET_MS: i64 = 600_000;
/// The data: three hours up to now, a point a host every 30 s.
const START_MS: i64 = NOW_MS - 3 * 3_600_000;
const STEP_MS: i64 = 30_000;
const HOSTS: [(&str, &str); 4] = [("h1", "eu"), ("h2", "eu"), ("h3", "us"), ("h4", "us")];

fn load(ts: &TimeSeries<SharedStore>) -> Result {
    ts.create_database("devops", None)?;
    ts.create_table(
        "devops",
        "cpu",
        NewTable {
            layout: Layout {
                pattern: Pattern::RowSerialized,
                bucket_secs: BUCKET_MS / 1000,
                reverse_time: false,
                seal: true,
            },
            retention: Some(Retention {
                memory_hours: 24,
                magnetic_days: 30,
            }),
            ..NewTable::default()
        },
    )?;
    let mut records = Vec::new();
    for (i, (host, region)) in HOSTS.iter().enumerate() {
        let mut t = START_MS + i as i64 * 1_000;
        let mut n = i as i64;
        while t < NOW_MS {
            let d = [("hostname", *host), ("region", *region)];
            let user = format!("{}", (n * 37) % 100);
            let system = format!("{}", (n * 11) % 50);
            records.push(multi(
                &d,
                "cpu",
                &[
                    ("usage_user", user, "DOUBLE"),
                    ("usage_system", system, "DOUBLE"),
                ],
                t,
            ));
            if n % 3 == 0 {
                records.push(single(&d, "temperature", "DOUBLE", &format!("{n}"), t));
            }
            t += STEP_MS;
            n += 1;
        }
    }
    for chunk in records.chunks(100) {
        ts.write_records("devops", "cpu", None, chunk)?;
    }
    // Most buckets sealed (with summaries), the newest still in rows.
    ts.seal_all()?;
    Ok(())
}

fn scope() -> Scope {
    Scope::instance("projects/p/instances/i")
}

/// The answer of `sql` from an engine that has never seen it.
async fn planned_afresh(ts: &Arc<TimeSeries<SharedStore>>, sql: &str) -> Result<Vec<String>> {
    let (engine, _, _dir) = common::open("afresh", NOW_MS)?;
    let fresh = SqlEngine::new(engine, ts.clone())?;
    render(&fresh.query(sql, &scope()).await?.batches)
}

/// Runs `text` on `sql` and checks that it answers rows, as an engine that never saw
/// it does (`what` names the run in a failure).
async fn answers_as_afresh(
    sql: &SqlEngine,
    ts: &Arc<TimeSeries<SharedStore>>,
    text: &str,
    what: &str,
) -> Result {
    let got = render(&sql.query(text, &scope()).await?.batches)?;
    assert_eq!(got, planned_afresh(ts, text).await?, "{what}");
    assert!(!got.is_empty(), "{what}: no rows");
    Ok(())
}

fn window(i: i64) -> String {
    let a = START_MS + 1_234_567 + i * 611_111;
    let b = a + 3_600_000 + i * 7_777;
    format!("time >= from_milliseconds({a}) AND time < from_nanoseconds({b}000000)")
}

/// A query's text for instance `i`.
type Instance = fn(i64) -> String;

/// The shapes of the TSBS devops queries, by instance number.
fn shapes() -> Vec<(&'static str, Instance)> {
    vec![
        ("one host, max by minute", |i| {
            format!(
                "SELECT bin(time, 1m) AS m, max(usage_user) FROM \"devops\".\"cpu\" \
                 WHERE measure_name = 'cpu' AND hostname = 'h{}' AND {} GROUP BY 1 ORDER BY 1",
                i % 4 + 1,
                window(i)
            )
        }),
        ("two hosts, maxima by bucket (partials)", |i| {
            format!(
                "SELECT bin(time, 10m), hostname, max(usage_user), avg(usage_system) \
                 FROM \"devops\".\"cpu\" WHERE hostname IN ('h{}', 'h{}') AND {} \
                 GROUP BY 1, 2 ORDER BY 1, 2",
                i % 4 + 1,
                (i + 1) % 4 + 1,
                window(i)
            )
        }),
        ("three hosts, max by minute (an IN list)", |i| {
            // Four names: DataFusion turns a list of three or fewer into ORs.
            format!(
                "SELECT bin(time, 1m), hostname, max(usage_user) FROM \"devops\".\"cpu\" \
                 WHERE measure_name = 'cpu' AND hostname IN ('h{}', 'h{}', 'h{}', 'x{i}') \
                 AND {} GROUP BY 1, 2 ORDER BY 1, 2",
                i % 4 + 1,
                (i + 1) % 4 + 1,
                (i + 2) % 4 + 1,
                window(i)
            )
        }),
        ("every host, mean by hour", |i| {
            format!(
                "SELECT bin(time, 1h), hostname, avg(usage_user) FROM \"devops\".\"cpu\" \
                 WHERE {} GROUP BY 1, 2",
                window(i)
            )
        }),
        ("every field above a threshold", |i| {
            format!(
                "SELECT * FROM \"devops\".\"cpu\" WHERE usage_user > 90 AND region = '{}' \
                 AND {}",
                ["eu", "us"][i as usize % 2],
                window(i)
            )
        }),
        ("a host's highest points (top k)", |i| {
            format!(
                "SELECT time, usage_user FROM \"devops\".\"cpu\" WHERE measure_name = 'cpu' \
                 AND hostname = 'h{}' AND {} ORDER BY usage_user DESC, time LIMIT 5",
                i % 4 + 1,
                window(i)
            )
        }),
        ("newest row of each host (join)", |i| {
            format!(
                "WITH latest AS (SELECT hostname, max(time) AS t FROM \"devops\".\"cpu\" \
                 WHERE measure_name = 'cpu' AND {w} GROUP BY hostname) \
                 SELECT c.hostname, c.time, c.usage_user FROM \"devops\".\"cpu\" c \
                 JOIN latest l ON c.hostname = l.hostname AND c.time = l.t \
                 WHERE c.measure_name = 'cpu' AND {w}",
                w = window(i)
            )
        }),
    ]
}

#[tokio::test]
async fn a_shape_run_again_with_other_values_reuses_its_plan() -> Result {
    let (engine, ts, _dir) = common::open("reuse", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    for (what, instance) in shapes() {
        let before = sql.load();
        for i in 0..7 {
            answers_as_afresh(&sql, &ts, &instance(i), &format!("{what}, run {i}")).await?;
        }
        // Runs 0 and 1 are planned (the second shows the shape's values vary alone);
        // 2 to 6 reuse the optimized plan. Run 2's physical plan is kept, run 3 shows
        // that it rebuilds to its own, and 4, 5 and 6 take it rebuilt.
        let after = sql.load();
        assert_eq!(after.reused_plans - before.reused_plans, 5, "{what}");
        assert_eq!(
            after.reused_physical_plans - before.reused_physical_plans,
            3,
            "{what}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn runs_planned_for_one_partition_and_for_every_core_keep_their_own_physical_plan() -> Result
{
    let (engine, ts, _dir) = common::open("partitions", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    // Even runs read one host over five minutes (one partition), odd runs over an hour
    // (every core): each kind of run keeps, adopts and rebuilds its own plan.
    for i in 0..12 {
        let a = START_MS + 1_234_567 + i * 611_111;
        let b = a + if i % 2 == 0 { 300_000 } else { 3_600_000 };
        let text = format!(
            "SELECT bin(time, 1m), max(usage_user) FROM \"devops\".\"cpu\" WHERE \
             measure_name = 'cpu' AND hostname = 'h{}' AND time >= from_milliseconds({a}) \
             AND time < from_milliseconds({b}) GROUP BY 1 ORDER BY 1",
            i % 4 + 1
        );
        answers_as_afresh(&sql, &ts, &text, &format!("run {i}")).await?;
    }
    // Runs 2 to 11 reuse the optimized plan; of each kind, the first reuse keeps its
    // physical plan, the second adopts it, the three after take it rebuilt.
    let load = sql.load();
    assert_eq!(load.reused_plans, 10);
    assert_eq!(load.reused_physical_plans, 6);
    Ok(())
}

#[tokio::test]
async fn a_physical_plan_that_does_not_fit_other_values_is_planned_each_time() -> Result {
    let (engine, ts, _dir) = common::open("misfit", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    // A window from 1970 is read in one partition (nothing to split it by series), a
    // later one in one per core: alternate runs' scans never fit each other's kept
    // plan.
    for i in 0..10 {
        let a = if i % 2 == 0 {
            START_MS + i * 611_111
        } else {
            0
        };
        let b = START_MS + 3_600_000 + i * 611_111;
        let text = format!(
            "SELECT bin(time, 1h), hostname, avg(usage_user) FROM \"devops\".\"cpu\" WHERE \
             time >= from_milliseconds({a}) AND time < from_milliseconds({b}) GROUP BY 1, 2"
        );
        answers_as_afresh(&sql, &ts, &text, &format!("run {i}")).await?;
    }
    let load = sql.load();
    assert_eq!(load.reused_plans, 8);
    assert_eq!(load.reused_physical_plans, 0);
    Ok(())
}

#[tokio::test]
async fn a_value_that_never_changed_is_part_of_the_plan() -> Result {
    let (engine, ts, _dir) = common::open("fixed", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    let text = |measure: &str, host: &str| {
        format!(
            "SELECT count(*), max(time) FROM \"devops\".\"cpu\" WHERE measure_name = '{measure}' \
             AND hostname = '{host}' AND {}",
            window(1)
        )
    };
    for host in ["h1", "h2", "h3"] {
        sql.query(&text("cpu", host), &scope()).await?;
    }
    assert_eq!(sql.load().reused_plans, 1);
    // The measure name was the same in every run: a run with another is planned.
    let other = text("temperature", "h4");
    let got = render(&sql.query(&other, &scope()).await?.batches)?;
    assert_eq!(sql.load().reused_plans, 1);
    assert_eq!(got, planned_afresh(&ts, &other).await?);
    assert_ne!(
        got,
        render(&sql.query(&text("cpu", "h4"), &scope()).await?.batches)?
    );
    Ok(())
}

#[tokio::test]
async fn a_query_asking_for_the_time_is_planned_every_run() -> Result {
    let (engine, ts, _dir) = common::open("time", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts)?;
    for host in ["h1", "h2", "h3", "h4"] {
        let text = format!(
            "SELECT count(*) FROM \"devops\".\"cpu\" WHERE hostname = '{host}' \
             AND time > ago(1h) AND time > from_milliseconds({START_MS})"
        );
        sql.query(&text, &scope()).await?;
        let text = format!(
            "SELECT count(*) FROM \"devops\".\"cpu\" WHERE hostname = '{host}' \
             AND time BETWEEN from_milliseconds({START_MS}) AND now()"
        );
        sql.query(&text, &scope()).await?;
    }
    assert_eq!(sql.load().reused_plans, 0);
    Ok(())
}

#[tokio::test]
async fn a_table_that_grew_a_column_or_was_made_again_is_planned_again() -> Result {
    let (engine, ts, _dir) = common::open("grew", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    let text = |host: &str| {
        format!(
            "SELECT * FROM \"devops\".\"cpu\" WHERE hostname = '{host}' AND time >= \
             from_milliseconds({}) ORDER BY time DESC LIMIT 1",
            NOW_MS - 60_000
        )
    };
    for host in ["h1", "h2", "h3"] {
        sql.query(&text(host), &scope()).await?;
    }
    assert_eq!(sql.load().reused_plans, 1);
    let d = [("hostname", "h4"), ("region", "us")];
    let grown = multi(
        &d,
        "cpu",
        &[("steal", "7".into(), "DOUBLE")],
        NOW_MS - 1_000,
    );
    ts.write_records("devops", "cpu", None, &[grown])?;
    let out = sql.query(&text("h4"), &scope()).await?;
    assert!(
        out.schema.field_with_name("steal").is_ok(),
        "{:?}",
        out.schema
    );
    assert_eq!(
        render(&out.batches)?,
        planned_afresh(&ts, &text("h4")).await?
    );
    assert_eq!(sql.load().reused_plans, 1, "the grown table is planned");

    // Made again under its name, with other columns: the kept plan is not used.
    sql.query(&text("h1"), &scope()).await?;
    ts.delete_table("devops", "cpu")?;
    ts.create_table("devops", "cpu", NewTable::default())?;
    let d = [("hostname", "h2")];
    let rec = single(&d, "load", "BIGINT", "3", NOW_MS - 2_000);
    ts.write_records("devops", "cpu", None, &[rec])?;
    let reused = sql.load().reused_plans;
    let out = sql.query(&text("h2"), &scope()).await?;
    assert_eq!(sql.load().reused_plans, reused);
    assert_eq!(out.num_rows(), 1);
    assert!(out.schema.field_with_name("usage_user").is_err());
    Ok(())
}

/// Refuses to let the caller read the table named `refused`.
#[derive(Debug)]
struct Gate {
    refused: &'static str,
}

impl TableAccess for Gate {
    fn check(&self, table: TableRef<'_>) -> std::result::Result<(), String> {
        match table {
            TableRef::TimeSeries { table, .. } if table == self.refused => {
                Err(format!("no reading {table}"))
            }
            _ => Ok(()),
        }
    }
}

fn gated(refused: &'static str) -> Scope {
    Scope {
        access: Some(Arc::new(Gate { refused })),
        ..scope()
    }
}

#[tokio::test]
async fn a_reused_plan_asks_whether_the_caller_may_read_its_tables() -> Result {
    let (engine, ts, _dir) = common::open("access", NOW_MS)?;
    load(&ts)?;
    ts.create_table("devops", "secret", NewTable::default())?;
    let sql = SqlEngine::new(engine, ts)?;
    let text = |host: &str| {
        format!(
            "SELECT count(*) FROM \"devops\".\"cpu\" WHERE hostname = '{host}' AND {}",
            window(2)
        )
    };
    // A table the optimizer takes out of the plan is looked up all the same.
    let union = |host: &str| {
        format!(
            "{} UNION ALL SELECT count(*) FROM \"devops\".\"secret\" WHERE 1 = 0",
            text(host)
        )
    };
    for host in ["h1", "h2", "h3"] {
        sql.query(&text(host), &gated("nothing")).await?;
        sql.query(&union(host), &gated("nothing")).await?;
    }
    assert_eq!(sql.load().reused_plans, 2);
    for (query, refused) in [(text("h4"), "cpu"), (union("h4"), "secret")] {
        let err = match sql.query(&query, &gated(refused)).await {
            Err(err) => err.to_string(),
            Ok(out) => format!("{} rows", out.num_rows()),
        };
        assert!(
            err.contains(&format!("no reading {refused}")),
            "the caller may not read {refused}: {err}"
        );
    }
    assert_eq!(sql.load().reused_plans, 2);
    Ok(())
}

#[tokio::test]
async fn a_value_the_optimizer_folds_merges_or_drops_makes_no_plan_reusable() -> Result {
    let (engine, ts, _dir) = common::open("folded", NOW_MS)?;
    load(&ts)?;
    let sql = SqlEngine::new(engine, ts.clone())?;
    let t = |ms: i64| START_MS + ms;
    let h = 3_600_000;
    let runs: Vec<Vec<String>> =
        vec![
        // Folded into another constant: the hour of each time.
        [t(h + 60_000), t(h + 120_000), t(2 * h + 60_000), t(h + 180_000)]
            .iter()
            .map(|a| {
                format!(
                    "SELECT count(*) FROM \"devops\".\"cpu\" WHERE hostname = 'h1' \
                     AND time >= bin(from_milliseconds({a}), 1h)"
                )
            })
            .collect(),
        // Two lower bounds merged into the larger.
        [(1, 2), (3, 4), (5, 6), (9, 7)]
            .iter()
            .map(|(a, b)| {
                format!(
                    "SELECT count(*) FROM \"devops\".\"cpu\" WHERE time > from_milliseconds({}) \
                     AND time > from_milliseconds({})",
                    t(a * h / 4),
                    t(b * h / 4)
                )
            })
            .collect(),
        // Two IN lists intersected.
        [("h1", "h2", "h2", "h3"), ("h3", "h4", "h4", "h1"), ("h2", "h1", "h1", "h2")]
            .iter()
            .map(|(a, b, c, d)| {
                format!(
                    "SELECT count(*) FROM \"devops\".\"cpu\" WHERE hostname IN ('{a}', '{b}') \
                     AND hostname IN ('{c}', '{d}')"
                )
            })
            .collect(),
        // A value that is also a constant of the answer.
        ["eu", "us", "eu", "us"]
            .iter()
            .map(|r| {
                format!(
                    "SELECT 'us' AS home, count(*) FROM \"devops\".\"cpu\" WHERE region = '{r}'"
                )
            })
            .collect(),
    ];
    for texts in runs {
        for text in texts {
            let got = render(&sql.query(&text, &scope()).await?.batches)?;
            assert_eq!(got, planned_afresh(&ts, &text).await?, "{text}");
        }
    }
    assert_eq!(sql.load().reused_plans, 0);
    Ok(())
}
