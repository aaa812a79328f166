//! The five TSBS devops queries ([`almanac_bench::devops`]) give the same answers as a
//! naive evaluation over the raw records, on every storage pattern.
#![expect(
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

/// What the test returns: any error stops it.
type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use almanac_bench::devops::{self, CPU_FIELDS, HIGH_CPU, HOUR_NS};
use almanac_engine::Durability;
use almanac_engine::clock::ManualClock;
use almanac_sql::{QueryOutput, Scope, SqlEngine};
use almanac_timeseries::{Dimension, Layout, MeasureValue, NewTable, Pattern, Record, Retention};
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Float64Type, TimeUnit, TimestampNanosecondType};

/// The clock's "now": 2023-11-14T22:13:20Z.
const NOW_MS: i64 = 1_700_000_000_000;
const HOSTS: usize = 12;
/// Seconds between a host's readings.
const INTERVAL_S: i64 = 60;
/// Hours of data (the twelve-hour queries start an hour in).
const HOURS: i64 = 14;
const MINUTE_NS: i64 = 60_000_000_000;

/// One raw record.
struct Reading {
    host: String,
    time_ns: i64,
    values: [f64; 10],
}

/// Deterministic values in [0, 100), some above the high-cpu threshold.
fn value(host: usize, step: i64, field: usize) -> f64 {
    let mut z = (host as u64) << 40 ^ (step as u64) << 8 ^ field as u64;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % 10_000) as f64 / 100.0
}

fn readings(start_ns: i64) -> Vec<Reading> {
    let steps = HOURS * 3600 / INTERVAL_S;
    let mut out = Vec::new();
    for h in 0..HOSTS {
        // The last host stops early, so lastpoint has different times.
        let last = if h == HOSTS - 1 { steps - 7 } else { steps };
        for step in 0..last {
            let mut values = [0.0; 10];
            for (f, v) in values.iter_mut().enumerate() {
                *v = value(h, step, f);
            }
            out.push(Reading {
                host: format!("host_{h}"),
                time_ns: start_ns + step * INTERVAL_S * 1_000_000_000,
                values,
            });
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Time(i64),
    Text(String),
    Number(f64),
}

fn same(a: &Cell, b: &Cell) -> bool {
    match (a, b) {
        (Cell::Number(x), Cell::Number(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
        _ => a == b,
    }
}

fn rows_of(out: &QueryOutput) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    for batch in &out.batches {
        for r in 0..batch.num_rows() {
            let row = batch
                .columns()
                .iter()
                .map(|c| match c.data_type() {
                    DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                        Cell::Time(c.as_primitive::<TimestampNanosecondType>().value(r))
                    }
                    DataType::Float64 => Cell::Number(c.as_primitive::<Float64Type>().value(r)),
                    DataType::Utf8 => Cell::Text(c.as_string::<i32>().value(r).to_string()),
                    DataType::Utf8View => Cell::Text(c.as_string_view().value(r).to_string()),
                    other => panic!("unexpected column type {other}"),
                })
                .collect();
            rows.push(row);
        }
    }
    rows
}

fn assert_same(name: &str, got: &[Vec<Cell>], want: &[Vec<Cell>]) {
    assert_eq!(got.len(), want.len(), "{name}: row count");
    assert!(
        !want.is_empty(),
        "{name}: the naive answer is empty; the test proves nothing"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| same(a, b)),
            "{name}: row {i}: got {g:?}, want {w:?}"
        );
    }
}

fn floor(t: i64, step: i64) -> i64 {
    t - t.rem_euclid(step)
}

fn in_window(r: &Reading, start_ns: i64, hours: i64) -> bool {
    r.time_ns >= start_ns && r.time_ns < start_ns + hours * HOUR_NS
}

fn naive_single_groupby(data: &[Reading], host: &str, start: i64) -> Vec<Vec<Cell>> {
    let mut by: BTreeMap<i64, f64> = BTreeMap::new();
    for r in data
        .iter()
        .filter(|r| r.host == host && in_window(r, start, 1))
    {
        let m = by.entry(floor(r.time_ns, MINUTE_NS)).or_insert(f64::MIN);
        *m = m.max(r.values[0]);
    }
    by.into_iter()
        .map(|(t, m)| vec![Cell::Time(t), Cell::Number(m)])
        .collect()
}

fn naive_cpu_max_all(data: &[Reading], hosts: &[String], start: i64) -> Vec<Vec<Cell>> {
    let mut by: BTreeMap<i64, [f64; 10]> = BTreeMap::new();
    for r in data
        .iter()
        .filter(|r| hosts.contains(&r.host) && in_window(r, start, 8))
    {
        let m = by
            .entry(floor(r.time_ns, HOUR_NS))
            .or_insert([f64::MIN; 10]);
        for (a, v) in m.iter_mut().zip(r.values) {
            *a = a.max(v);
        }
    }
    by.into_iter()
        .map(|(t, m)| {
            let mut row = vec![Cell::Time(t)];
            row.extend(m.into_iter().map(Cell::Number));
            row
        })
        .collect()
}

fn naive_double_groupby(data: &[Reading], start: i64) -> Vec<Vec<Cell>> {
    let mut by: BTreeMap<(i64, String), (f64, f64)> = BTreeMap::new();
    for r in data.iter().filter(|r| in_window(r, start, 12)) {
        let e = by
            .entry((floor(r.time_ns, HOUR_NS), r.host.clone()))
            .or_insert((0.0, 0.0));
        e.0 += r.values[0];
        e.1 += 1.0;
    }
    by.into_iter()
        .map(|((t, h), (s, n))| vec![Cell::Time(t), Cell::Text(h), Cell::Number(s / n)])
        .collect()
}

fn naive_high_cpu(data: &[Reading], start: i64) -> Vec<Vec<Cell>> {
    let mut rows: Vec<(String, i64, f64)> = data
        .iter()
        .filter(|r| r.values[0] > HIGH_CPU && in_window(r, start, 12))
        .map(|r| (r.host.clone(), r.time_ns, r.values[0]))
        .collect();
    rows.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    rows.into_iter()
        .map(|(h, t, v)| vec![Cell::Text(h), Cell::Time(t), Cell::Number(v)])
        .collect()
}

fn naive_lastpoint(data: &[Reading]) -> Vec<Vec<Cell>> {
    let mut by: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    for r in data {
        let e = by.entry(r.host.clone()).or_insert((i64::MIN, 0.0));
        if r.time_ns > e.0 {
            *e = (r.time_ns, r.values[0]);
        }
    }
    by.into_iter()
        .map(|(h, (t, v))| vec![Cell::Text(h), Cell::Time(t), Cell::Number(v)])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devops_queries_match_a_naive_evaluation() -> Result {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(NOW_MS * 1000));
    let (engine, ts) = almanac_bench::store::open_embedded_at(
        dir.path(),
        almanac_timeseries::DEFAULT_INSTANCE,
        Durability::None,
        clock,
    )?;
    let ts = Arc::new(ts);
    let start_ns = (NOW_MS - HOURS * 3_600_000) * 1_000_000;
    let data = readings(start_ns);
    ts.create_database("tsbs", None)?;
    let patterns = [
        ("cpu", Pattern::RowSerialized),
        ("cpu_bucket_cells", Pattern::BucketCells),
        ("cpu_row_columns", Pattern::RowColumns),
    ];
    for (table, pattern) in patterns {
        ts.create_table(
            "tsbs",
            table,
            NewTable {
                layout: Layout {
                    pattern,
                    bucket_secs: 3600,
                    reverse_time: false,
                    seal: true,
                },
                retention: Some(Retention {
                    memory_hours: 48,
                    magnetic_days: 30,
                }),
                ..NewTable::default()
            },
        )?;
        for chunk in data.chunks(100) {
            let records: Vec<_> = chunk
                .iter()
                .map(|r| {
                    let region = if r.host.ends_with('1') {
                        "us-east-1"
                    } else {
                        "eu-west-1"
                    };
                    let values = CPU_FIELDS
                        .iter()
                        .zip(r.values)
                        .map(|(f, v)| {
                            MeasureValue::new(f.to_string(), format!("{v}"), "DOUBLE".to_string())
                        })
                        .collect();
                    let dims = vec![
                        Dimension::new("hostname", r.host.clone()),
                        Dimension::new("region", region),
                    ];
                    Record::multi(dims, "cpu", values, r.time_ns / 1_000_000)
                })
                .collect();
            ts.write_records("tsbs", table, None, &records)?;
        }
    }
    let sql = SqlEngine::new(engine, ts.clone())?;
    let scope = Scope::default();
    let window = start_ns + HOUR_NS + 17 * MINUTE_NS;
    let eight: Vec<String> = (2..10).map(|h| format!("host_{h}")).collect();
    // The same answers before and after the closed hours are sealed into blocks.
    for sealed in [false, true] {
        if sealed {
            let stats = ts.seal_all()?;
            assert!(stats.buckets > 0, "nothing was sealed");
        }
        for (table, _) in patterns {
            let t = format!("tsbs.{table}");
            let run = |q: String| {
                let sql = &sql;
                let scope = &scope;
                async move { sql.query(&q, scope).await.map(|o| rows_of(&o)) }
            };
            assert_same(
                &format!("{table} sealed={sealed} single-groupby-1-1-1"),
                &run(devops::single_groupby_1_1_1(&t, "host_3", window)).await?,
                &naive_single_groupby(&data, "host_3", window),
            );
            assert_same(
                &format!("{table} sealed={sealed} cpu-max-all-8"),
                &run(devops::cpu_max_all_8(&t, &eight, window)).await?,
                &naive_cpu_max_all(&data, &eight, window),
            );
            assert_same(
                &format!("{table} sealed={sealed} double-groupby-1"),
                &run(devops::double_groupby_1(&t, window)).await?,
                &naive_double_groupby(&data, window),
            );
            assert_same(
                &format!("{table} sealed={sealed} high-cpu-all"),
                &run(devops::high_cpu_all(&t, window)).await?,
                &naive_high_cpu(&data, window),
            );
            assert_same(
                &format!("{table} sealed={sealed} lastpoint"),
                &run(devops::lastpoint(&t)).await?,
                &naive_lastpoint(&data),
            );
            let all = sql.query(&devops::scan_all(&t), &scope).await?;
            assert_eq!(
                all.scan.rows_produced,
                data.len() as u64,
                "{table} sealed={sealed}: a full scan produces every record"
            );
        }
        if !sealed {
            // Pushdown: one host's hour reads about an hour of that host, not the table.
            let one = sql
                .query(
                    &devops::single_groupby_1_1_1("tsbs.cpu", "host_3", window),
                    &scope,
                )
                .await?;
            assert!(
                one.scan.rows_produced <= 61,
                "single-groupby read {} records for one host-hour",
                one.scan.rows_produced
            );
        }
    }
    Ok(())
}
