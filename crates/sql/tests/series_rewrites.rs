//! The time-series rewrites of the SQL planner give the answers of the plain plan.
//!
//! - Aggregates answered from block summaries (`bucket_aggregates`): the same records go
//!   into a table that seals (most buckets sealed, the newest still in rows, one sealed
//!   bucket rewritten by a late write) and into one that does not, in every storage
//!   pattern, and each query's rows must match between the two. `EXPLAIN` shows which
//!   queries the rule rewrote, so a rule that silently stops applying fails too.
//! - The newest row of each group as a join with `max(time)` (`latest_join`): against
//!   the same question asked with `rank()`, and the rows read show the rewrite.
//! - `max(time)` of groups of series and `DISTINCT` keys (`newest_max`): against the
//!   same query over a subquery the rule does not see through, and the rows read show
//!   the rewrite.
//! - Comparisons of a measure with a literal applied in the scan (`value_filter`):
//!   against the same comparison OR-ed with a condition the scan cannot take, in
//!   every pattern, sealed and not; `EXPLAIN` shows which comparisons the scan took.

mod common;

use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{Layout, NewTable, Pattern, Retention, SharedStore, TimeSeries};
use common::{Result, TempDir, multi, single};
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::record_batch::RecordBatch;

/// The fixture's "now": 2023-11-14T22:13:20Z.
const NOW_MS: i64 = 1_700_000_000_000;
/// Bucket of the sealed tables: ten minutes.
const BUCKET_MS: i64 = 600_000;
/// The data: three hours up to now.
const START_MS: i64 = NOW_MS - 3 * 3_600_000;

fn layout(pattern: Pattern, seal: bool) -> Layout {
    Layout {
        pattern,
        bucket_secs: BUCKET_MS / 1000,
        reverse_time: false,
        seal,
    }
}

/// Deterministic values: a small LCG.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn records() -> Vec<almanac_timeseries::Record<'static>> {
    let mut rng = Lcg(7);
    let mut out = Vec::new();
    for (host, region) in [("h1", "eu"), ("h2", "eu"), ("h3", "us"), ("h4", "us")] {
        let mut t = START_MS + (rng.next() % 30_000) as i64;
        while t < NOW_MS {
            let user = (rng.next() % 10_000) as f64 / 100.0 - 20.0;
            let mut values = vec![("usage_user", format!("{user}"), "DOUBLE")];
            if !rng.next().is_multiple_of(3) {
                values.push((
                    "usage_system",
                    format!("{}", (rng.next() % 1000) as f64 / 8.0),
                    "DOUBLE",
                ));
            }
            if rng.next().is_multiple_of(4) {
                values.push((
                    "procs",
                    format!("{}", rng.next() as i64 - (1 << 30)),
                    "BIGINT",
                ));
            }
            let d = [("hostname", host), ("region", region)];
            out.push(multi(&d, "cpu", &values, t));
            if rng.next().is_multiple_of(5) {
                let v = format!("{}", (rng.next() % 400) as f64 / 4.0);
                out.push(single(&d, "temperature", "DOUBLE", &v, t));
            }
            if rng.next().is_multiple_of(7) {
                let v = format!("{}", rng.next() % 100);
                out.push(single(&d, "errors", "BIGINT", &v, t));
            }
            t += 20_000 + (rng.next() % 40_000) as i64;
        }
    }
    out
}

async fn load(ts: &TimeSeries<SharedStore>) -> Result<Vec<String>> {
    ts.create_database("devops", None)?;
    let retention = Some(Retention {
        memory_hours: 24,
        magnetic_days: 30,
    });
    let records = records();
    let mut tables = Vec::new();
    for pattern in [
        Pattern::RowColumns,
        Pattern::RowSerialized,
        Pattern::BucketCells,
        Pattern::BucketColumns,
    ] {
        for seal in [true, false] {
            let name = format!("{}_{}", pattern.as_str().replace('-', "_"), seal);
            ts.create_table(
                "devops",
                &name,
                NewTable {
                    layout: layout(pattern, seal),
                    retention,
                    ..NewTable::default()
                },
            )?;
            for chunk in records.chunks(100) {
                ts.write_records("devops", &name, None, chunk)?;
            }
            tables.push(name);
        }
    }
    let sealed = ts.seal_all()?;
    assert!(sealed.buckets > 50, "buckets sealed: {sealed:?}");
    // A late point into a sealed bucket rewrites its block and summary.
    let late = multi(
        &[("hostname", "h2"), ("region", "eu")],
        "cpu",
        &[("usage_user", "1000.5".into(), "DOUBLE")],
        START_MS + 3_600_000 + 1,
    );
    for t in &tables {
        ts.write_records("devops", t, None, std::slice::from_ref(&late))?;
    }
    Ok(tables)
}

/// An SQL engine over [`load`]'s tables, its scope, the tables (in pairs: sealed, then
/// not) and the store's directory.
async fn fixture(tag: &str) -> Result<(SqlEngine, Scope, Vec<String>, TempDir)> {
    let (engine, ts, dir) = common::open(tag, NOW_MS)?;
    let tables = load(&ts).await?;
    let sql = SqlEngine::new(engine, ts)?;
    Ok((sql, Scope::instance("projects/p/instances/i"), tables, dir))
}

/// The rows of a result, one line each, floats to 9 significant digits (sums of
/// whole buckets add in another order than sums of points).
fn render(batches: &[RecordBatch]) -> Result<Vec<String>> {
    common::rows_with(batches, |c, r| {
        (c.data_type() == &DataType::Float64 && !c.is_null(r))
            .then(|| format!("{:.9e}", c.as_primitive::<Float64Type>().value(r)))
    })
}

/// A window whose edges fall inside buckets, and one on bucket edges.
const INSIDE: (i64, i64) = (START_MS + 1_234_567, NOW_MS - 2_345_678);
const ALIGNED: (i64, i64) = (
    START_MS - START_MS % BUCKET_MS + BUCKET_MS,
    NOW_MS - NOW_MS % BUCKET_MS - BUCKET_MS,
);

fn window((a, b): (i64, i64)) -> String {
    format!("time >= from_milliseconds({a}) AND time < from_milliseconds({b})")
}

/// `(query with {t} for the table, whether the rule applies)`.
fn queries() -> Vec<(String, bool)> {
    let inside = window(INSIDE);
    let aligned = window(ALIGNED);
    vec![
        (
            "SELECT count(*), count(usage_system), max(time), min(time) FROM {t}".into(),
            true,
        ),
        (
            format!(
                "SELECT bin(time, 1h) AS h, hostname, avg(usage_user), max(usage_user), \
                 min(usage_system), sum(procs), count(procs) FROM {{t}} WHERE {inside} \
                 GROUP BY 1, 2"
            ),
            true,
        ),
        (
            format!(
                "SELECT bin(time, 10m), max(usage_user), avg(procs) FROM {{t}} \
                 WHERE hostname IN ('h1', 'h3') AND {aligned} GROUP BY 1"
            ),
            true,
        ),
        (
            "SELECT date_trunc('hour', time), region, measure_name, count(*), \
             avg(measure_value::double), sum(measure_value::bigint) FROM {t} GROUP BY 1, 2, 3"
                .into(),
            true,
        ),
        (
            format!(
                "SELECT hostname, max(time) AS newest, count(time) FROM {{t}} \
                 WHERE measure_name = 'cpu' AND time > from_milliseconds({}) GROUP BY hostname",
                INSIDE.0
            ),
            true,
        ),
        (
            format!(
                "SELECT region, min(measure_value::bigint), max(measure_value::double) \
                 FROM {{t}} WHERE time BETWEEN from_milliseconds({}) AND from_milliseconds({}) \
                 GROUP BY region",
                INSIDE.0, INSIDE.1
            ),
            true,
        ),
        (
            "SELECT hostname, sum(usage_user) FROM {t} WHERE region = 'nowhere' GROUP BY 1".into(),
            true,
        ),
        (
            "SELECT count(*), sum(usage_user) FROM {t} WHERE hostname = 'nobody'".into(),
            true,
        ),
        // A window inside one bucket: only an edge bucket, summarized from its columns.
        (
            format!(
                "SELECT measure_name, count(*), sum(measure_value::double), \
                 max(measure_value::bigint), avg(usage_user) FROM {{t}} \
                 WHERE time >= from_milliseconds({}) AND time < from_milliseconds({}) \
                 GROUP BY measure_name",
                ALIGNED.0 + 60_000,
                ALIGNED.0 + 540_000
            ),
            true,
        ),
        // Not whole buckets: rows, by minute, a filter on a measure, DISTINCT, a time
        // filter the scan does not capture.
        (
            format!(
                "SELECT hostname, measure_name, time, measure_value::double, \
                 measure_value::bigint, usage_system FROM {{t}} WHERE {inside}"
            ),
            false,
        ),
        (
            "SELECT bin(time, 1m), max(usage_user) FROM {t} GROUP BY 1".into(),
            false,
        ),
        (
            "SELECT hostname, count(*) FROM {t} WHERE usage_user > 50 GROUP BY 1".into(),
            false,
        ),
        ("SELECT count(DISTINCT usage_user) FROM {t}".into(), false),
        (
            "SELECT count(*) FROM {t} WHERE extract(minute FROM time) = 3".into(),
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_answer_as_points_do() -> Result {
    let (sql, scope, tables, _dir) = fixture("series-rewrites").await?;
    for pair in tables.chunks(2) {
        let [sealed, plain] = pair else { continue };
        for (q, rewritten) in queries() {
            let on = |t: &str| q.replace("{t}", &format!("devops.{t}"));
            let plain_out = sql.query(&on(plain), &scope).await?;
            let sealed_out = sql.query(&on(sealed), &scope).await?;
            let want = render(&plain_out.batches)?;
            assert_eq!(render(&sealed_out.batches)?, want, "{}", on(sealed));
            if rewritten && plain_out.scan.cells_read > 1000 {
                // Summaries, not points: a cell per bucket instead of cells per point.
                assert!(
                    sealed_out.scan.cells_read * 4 < plain_out.scan.cells_read,
                    "{}: {:?} against {:?}",
                    on(sealed),
                    sealed_out.scan,
                    plain_out.scan
                );
            }
            let plan = render(
                &sql.query(&format!("EXPLAIN {}", on(sealed)), &scope)
                    .await?
                    .batches,
            )?
            .join("\n");
            assert_eq!(plan.contains("#agg"), rewritten, "{}\n{plan}", on(sealed));
        }
    }
    Ok(())
}

/// `(join query, the same question with rank(), whether the rule applies)`, with `{t}`
/// for the table.
fn newest_queries() -> Vec<(String, String, bool)> {
    let cut = format!("time < from_milliseconds({})", INSIDE.1);
    let rank = |cols: &str, part: &str, filter: &str| {
        format!(
            "SELECT {cols} FROM (SELECT {cols}, rank() OVER (PARTITION BY {part} \
             ORDER BY time DESC) AS r FROM {{t}} {filter}) WHERE r = 1"
        )
    };
    vec![
        (
            "SELECT c.hostname, c.time, c.usage_user FROM {t} c JOIN (SELECT hostname, \
             max(time) AS newest FROM {t} GROUP BY hostname) l \
             ON c.hostname = l.hostname AND c.time = l.newest"
                .into(),
            rank("hostname, time, usage_user", "hostname", ""),
            true,
        ),
        (
            format!(
                "SELECT l.region, c.hostname, c.measure_name, c.time, c.usage_system \
                 FROM (SELECT region, max(time) AS newest FROM {{t}} \
                 WHERE measure_name = 'cpu' AND {cut} GROUP BY region) l \
                 JOIN (SELECT * FROM {{t}} WHERE measure_name = 'cpu' AND {cut}) c \
                 ON l.newest = c.time AND l.region = c.region"
            ),
            rank(
                "region, hostname, measure_name, time, usage_system",
                "region",
                &format!("WHERE measure_name = 'cpu' AND {cut}"),
            ),
            true,
        ),
        (
            "SELECT c.hostname, c.measure_name, c.time FROM {t} c JOIN (SELECT hostname, \
             measure_name, max(time) AS newest FROM {t} GROUP BY hostname, measure_name) l \
             ON c.hostname = l.hostname AND c.measure_name = l.measure_name \
             AND c.time = l.newest"
                .into(),
            rank("hostname, measure_name, time", "hostname, measure_name", ""),
            true,
        ),
        // Not the newest of each group: the two sides filter differently, the join
        // misses a group key, or a filter on a measure decides which point is newest.
        (
            "SELECT c.hostname, c.time, c.usage_user FROM {t} c JOIN (SELECT hostname, \
             max(time) AS newest FROM {t} WHERE usage_user > 50 GROUP BY hostname) l \
             ON c.hostname = l.hostname AND c.time = l.newest WHERE c.usage_user > 50"
                .into(),
            rank(
                "hostname, time, usage_user",
                "hostname",
                "WHERE usage_user > 50",
            ),
            false,
        ),
        (
            format!(
                "SELECT c.hostname, c.time FROM {{t}} c JOIN (SELECT hostname, max(time) AS \
                 newest FROM {{t}} WHERE {cut} GROUP BY hostname) l \
                 ON c.hostname = l.hostname AND c.time = l.newest"
            ),
            rank("hostname, time", "hostname", &format!("WHERE {cut}")),
            false,
        ),
        (
            "SELECT c.hostname, c.time FROM {t} c JOIN (SELECT hostname, region, \
             max(time) AS newest FROM {t} GROUP BY hostname, region) l \
             ON c.hostname = l.hostname AND c.time = l.newest"
                .into(),
            rank("hostname, time", "hostname, region", ""),
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_rows_per_group_come_from_the_newest_row_of_each_series() -> Result {
    let (sql, scope, tables, _dir) = fixture("newest-join").await?;
    for t in &tables {
        let table = format!("devops.{t}");
        let all = sql
            .query(&format!("SELECT count(*) FROM {table}"), &scope)
            .await?;
        let total = all.batches[0]
            .column(0)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .value(0);
        for (join, reference, rewritten) in newest_queries() {
            let join = join.replace("{t}", &table);
            let out = sql.query(&join, &scope).await?;
            let want = render(
                &sql.query(&reference.replace("{t}", &table), &scope)
                    .await?
                    .batches,
            )?;
            assert_eq!(render(&out.batches)?, want, "{join}");
            // Rewritten, each side reads one point per series (twelve series here);
            // otherwise the row side reads every point it selects.
            let read = out.scan.rows_produced;
            assert_eq!(
                read <= 24,
                rewritten,
                "{join}: {read} points produced of {total}"
            );
        }
    }
    Ok(())
}

/// `(query with {t} for the table, {where} for its filter, whether `newest_max` applies)`.
fn newest_max_queries() -> Vec<(String, String, bool)> {
    let q = |sql: &str, filter: &str, rewritten| (sql.to_string(), filter.to_string(), rewritten);
    let inside = window(INSIDE);
    vec![
        q(
            "SELECT hostname, max(time) AS newest FROM {t} {where} GROUP BY hostname",
            "",
            true,
        ),
        q("SELECT DISTINCT region FROM {t} {where}", "", true),
        q("SELECT max(time) FROM {t} {where}", "", true),
        q(
            "SELECT measure_name, upper(hostname), max(time) AS a, max(time) AS b FROM {t} {where} \
             GROUP BY 1, 2",
            &format!("WHERE hostname IN ('h1', 'h3') AND {inside}"),
            true,
        ),
        q(
            "SELECT region, max(time) FROM {t} {where} GROUP BY region",
            "WHERE measure_name = 'cpu' AND hostname LIKE 'h%'",
            true,
        ),
        // A filter on a measure, another aggregate, a group over a measure, a time
        // filter the scan does not fold.
        q(
            "SELECT hostname, max(time) FROM {t} {where} GROUP BY hostname",
            "WHERE usage_user > 50",
            false,
        ),
        q(
            "SELECT hostname, max(time), count(*) FROM {t} {where} GROUP BY hostname",
            "",
            false,
        ),
        q(
            "SELECT procs, max(time) FROM {t} {where} GROUP BY procs",
            "",
            false,
        ),
        q(
            "SELECT hostname, max(time) FROM {t} {where} GROUP BY hostname",
            "WHERE extract(minute FROM time) = 3",
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_times_come_from_the_newest_point_of_each_series() -> Result {
    let (sql, scope, tables, _dir) = fixture("newest-max").await?;
    for t in &tables {
        let table = format!("devops.{t}");
        for (query, filter, rewritten) in newest_max_queries() {
            let direct = query.replace("{t}", &table).replace("{where}", &filter);
            // The same rows through a LIMIT, which neither rule sees through.
            let reference = query.replace("{where}", "").replace(
                "{t}",
                &format!("(SELECT * FROM {table} {filter} LIMIT 1000000000)"),
            );
            let out = sql.query(&direct, &scope).await?;
            let want = render(&sql.query(&reference, &scope).await?.batches)?;
            assert!(!want.is_empty(), "{reference}");
            assert_eq!(render(&out.batches)?, want, "{direct}");
            // Twelve series: four hosts, three measures.
            let read = out.scan.rows_produced;
            assert_eq!(read <= 12, rewritten, "{direct}: {read} rows produced");
        }
    }
    Ok(())
}

/// A query whose every scan reads in one partition (narrowed by a dimension to a
/// window within two buckets) is planned for one partition, with no exchange between
/// partitions, and answers as the same question over every series, split among the
/// cores, does; a window over more buckets, or without an end (a scan that cannot be
/// split, its rows dealt out after it), is planned for every core.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_narrowed_by_a_dimension_to_a_bucket_is_planned_for_one_partition() -> Result {
    let (sql, scope, tables, _dir) = fixture("one-partition").await?;
    let split = std::thread::available_parallelism().map_or(1, usize::from) > 1;
    let bucket = window((ALIGNED.0, ALIGNED.0 + BUCKET_MS));
    let longer = window(INSIDE);
    let open = format!("time >= from_milliseconds({})", INSIDE.0);
    // Closed at both ends: a bucket and the first millisecond of the next.
    let between = format!(
        "time BETWEEN from_milliseconds({}) AND from_milliseconds({})",
        ALIGNED.0,
        ALIGNED.0 + BUCKET_MS
    );
    for t in &tables {
        let query = |filter: &str, window: &str| {
            format!(
                "SELECT bin(time, 1m) AS m, max(usage_user), count(*) FROM devops.{t} \
                 WHERE {filter} AND {window} GROUP BY 1 ORDER BY 1"
            )
        };
        // `lower(hostname)`: a filter the scan cannot take, so it reads every series.
        for (window, one) in [
            (&bucket, true),
            (&between, true),
            (&longer, false),
            (&open, false),
        ] {
            let narrowed = query("hostname = 'h2'", window);
            let everything = query("lower(hostname) = 'h2'", window);
            let mut plans = Vec::new();
            for q in [&narrowed, &everything] {
                let explained = sql.query(&format!("EXPLAIN {q}"), &scope).await?;
                plans.push(render(&explained.batches)?.join("\n"));
            }
            let exchanges = |plan: &str| plan.contains("RepartitionExec");
            assert_eq!(
                exchanges(&plans[0]),
                split && !one,
                "{narrowed}\n{}",
                plans[0]
            );
            assert_eq!(exchanges(&plans[1]), split, "{everything}\n{}", plans[1]);
            let got = sql.query(&narrowed, &scope).await?;
            let want = sql.query(&everything, &scope).await?;
            assert!(got.num_rows() > 3, "{narrowed}: {} rows", got.num_rows());
            assert_eq!(render(&got.batches)?, render(&want.batches)?, "{narrowed}");
        }
    }
    Ok(())
}

/// The line of `EXPLAIN q` with the logical plan's table scan.
async fn scan_line(sql: &SqlEngine, scope: &Scope, q: &str) -> Result<String> {
    let explained = sql.query(&format!("EXPLAIN {q}"), scope).await?;
    Ok(render(&explained.batches)?
        .into_iter()
        .flat_map(|l| l.lines().map(str::to_owned).collect::<Vec<_>>())
        .find(|l| l.contains("TableScan"))
        .unwrap_or_default())
}

#[tokio::test]
async fn measure_comparisons_drop_points_in_the_scan_as_the_filter_does() -> Result {
    let (sql, scope, tables, _dir) = fixture("value-filters").await?;
    let inside = window(INSIDE);
    // `(comparison, the comparison the scan takes, if any)`; each is also asked OR-ed
    // with a dimension no row has, which the scan cannot take.
    let comparisons = [
        ("usage_user > 50", Some("usage_user > Float64(50)")),
        ("usage_user <= -5.5", Some("usage_user <= Float64(-5.5)")),
        ("50 < usage_user", None),
        (
            "usage_system <> 62.5",
            Some("usage_system != Float64(62.5)"),
        ),
        ("procs >= 0", Some("procs >= Int64(0)")),
        ("usage_user > 30 AND procs < 0", Some("procs < Int64(0)")),
        ("measure_value::double > 40", Some("Float64(40)")),
    ];
    for t in &tables {
        for (cmp, pushed) in comparisons {
            let query = |filter: &str| {
                format!(
                    "SELECT hostname, time, measure_name, usage_user, usage_system, procs, \
                     measure_value::double FROM devops.{t} WHERE ({filter}) AND {inside}"
                )
            };
            let taken = query(cmp);
            let not_taken = query(&format!("{cmp} OR hostname = 'nobody'"));
            let got = sql.query(&taken, &scope).await?;
            let want = sql.query(&not_taken, &scope).await?;
            assert!(want.num_rows() > 3, "{not_taken}: {} rows", want.num_rows());
            assert_eq!(render(&got.batches)?, render(&want.batches)?, "{taken}");
            if let Some(p) = pushed {
                let line = scan_line(&sql, &scope, &taken).await?;
                assert!(line.contains(p), "{taken}: {line}");
            }
            let line = scan_line(&sql, &scope, &not_taken).await?;
            assert!(!line.contains("nobody"), "{not_taken}: {line}");
        }
    }
    Ok(())
}

/// A recursive query runs its term again, round after round, within one execution: a
/// time-series scan split among the cores inside the term reads every series each
/// round (the partitions' shared series cursor is made anew for each round).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_scan_in_a_recursive_term_reads_every_series_each_round() -> Result {
    let (sql, scope, tables, _dir) = fixture("recursive").await?;
    let inside = window(INSIDE);
    for t in &tables {
        let counts = format!(
            "SELECT count(*) AS c, count(DISTINCT hostname) AS h FROM devops.{t} WHERE {inside}"
        );
        let once = render(&sql.query(&counts, &scope).await?.batches)?;
        let recursive = format!(
            "WITH RECURSIVE r(n, c, h) AS (SELECT 0 AS n, CAST(0 AS BIGINT) AS c, \
             CAST(0 AS BIGINT) AS h \
             UNION ALL SELECT r.n + 1, x.c, x.h FROM r CROSS JOIN ({counts}) x WHERE r.n < 3) \
             SELECT c, h FROM r WHERE n > 0"
        );
        let rounds = render(&sql.query(&recursive, &scope).await?.batches)?;
        assert_eq!(
            rounds,
            [&once[..], &once[..], &once[..]].concat(),
            "{recursive}"
        );
    }
    Ok(())
}
