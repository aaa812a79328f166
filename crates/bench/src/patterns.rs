//! `almanac-bench patterns`: the four Bigtable time-series patterns of Google's
//! "Schema design for time series data", on its own example (weather balloons
//! reporting pressure, temperature, humidity and altitude once a minute), through the
//! time-series layer.
//!
//! For each pattern, and for single-measure records (one record per measure) and
//! multi-measure records (one record per reading with four values):
//! 1. open a fresh embedded engine (fsync `buffer`: this measures layouts, not disks),
//!    create a table with that layout (bucket `--bucket`),
//! 2. write `--balloons` x `--days` x 1440 readings in WriteRecords batches of 100
//!    records, timed (points/s, CPU µs per point); a point is one measure value,
//! 3. compact and report bytes on disk per point,
//! 4. time the guide's typical reads, each `--reads` times over random balloons:
//!    one balloon's last hour, one measure across all balloons for a day, the latest
//!    reading of every balloon;
//! 5. seal every closed hour into blocks (points/s of the seal pass), compact, and
//!    report bytes and the same reads again (the `sealed` line).

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use almanac_engine::clock::{Clock, Rng, SystemClock};
use almanac_engine::{Durability, Engine};
use almanac_timeseries::{
    Dimension, Layout, MeasureValue, NewTable, Pattern, Record, Retention, Selection, SharedStore,
    TimeSeries,
};
use anyhow::Context;

use crate::measure::own_cpu_secs;
use crate::store::open_embedded;

/// Records per WriteRecords batch (Timestream's maximum).
const BATCH: usize = 100;
/// Regions the balloons fly over (the guide uses Google Cloud region names).
const LOCATIONS: [&str; 5] = [
    "us-west2",
    "asia-south2",
    "europe-west1",
    "us-east1",
    "asia-southeast1",
];
/// Measures of a reading, with their types.
const MEASURES: [(&str, &str); 4] = [
    ("pressure", "BIGINT"),
    ("temperature", "DOUBLE"),
    ("humidity", "BIGINT"),
    ("altitude", "BIGINT"),
];

/// Flags of `almanac-bench patterns`.
#[derive(Debug, clap::Args)]
pub struct PatternArgs {
    /// Balloons (series).
    #[arg(long, default_value_t = 100)]
    balloons: u32,
    /// Days of readings, one a minute.
    #[arg(long, default_value_t = 1)]
    days: u32,
    /// Bucket of the bucketed patterns (`1h`, `1d`, seconds…).
    #[arg(long, default_value = "1h")]
    bucket: String,
    /// Repetitions of each read.
    #[arg(long, default_value_t = 20)]
    reads: u32,
    /// Only these patterns (comma-separated); default all four.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Directory for the data (a subdirectory per run, deleted after). Default: temp.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// One run's numbers.
struct RunResult {
    points: u64,
    write: Duration,
    cpu: f64,
    /// Every point in its row, after a major compaction.
    rows: State,
    /// The seal pass over every closed hour.
    seal: Duration,
    /// After sealing and another major compaction.
    sealed: State,
}

/// Size and read latencies of one state of the data.
struct State {
    bytes: u64,
    last_hour: Duration,
    one_measure_day: Duration,
    latest: Duration,
}

fn below(rng: &mut Rng, n: u64) -> u64 {
    rng.next_u64() % n
}

fn readings(balloon: u32, minute: u64, rng: &mut Rng) -> [String; 4] {
    let base = f64::from(balloon % 17);
    [
        (94_000 + below(rng, 2000)).to_string(),
        format!("{:.1}", 5.0 + base + (below(rng, 100) as f64) / 10.0),
        (40 + below(rng, 50)).to_string(),
        (500 + (minute % 600) + below(rng, 10)).to_string(),
    ]
}

fn dims(balloon: u32) -> Vec<Dimension<'static>> {
    vec![
        Dimension::new("location", LOCATIONS[balloon as usize % LOCATIONS.len()]),
        Dimension::new("balloon", format!("{balloon:04}")),
    ]
}

/// The records of one minute of one balloon.
fn records_of(
    balloon: u32,
    minute: u64,
    time_ms: i64,
    multi: bool,
    rng: &mut Rng,
) -> Vec<Record<'static>> {
    let values = readings(balloon, minute, rng);
    if multi {
        let values = MEASURES
            .iter()
            .zip(values)
            .map(|((n, k), v)| MeasureValue::new(*n, v, *k))
            .collect();
        return vec![Record::multi(dims(balloon), "reading", values, time_ms)];
    }
    MEASURES
        .iter()
        .zip(values)
        .map(|((n, k), v)| Record::single(dims(balloon), *n, *k, v, time_ms))
        .collect()
}

fn timed<T>(reps: u32, mut f: impl FnMut(u32) -> anyhow::Result<T>) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    for i in 0..reps {
        f(i)?;
    }
    Ok(t0.elapsed() / reps.max(1))
}

fn run_one(
    args: &PatternArgs,
    dir: &std::path::Path,
    pattern: Pattern,
    multi: bool,
) -> anyhow::Result<RunResult> {
    let _ = std::fs::remove_dir_all(dir);
    let (engine, ts) = open_embedded(dir, "projects/bench/instances/patterns", Durability::Buffer)?;
    ts.create_database("weather", None)?;
    let layout = Layout::from_tags([
        ("almanac:layout", pattern.as_str()),
        ("almanac:bucket", args.bucket.as_str()),
    ])?;
    let hours = i64::from(args.days) * 24 + 1;
    ts.create_table(
        "weather",
        "balloons",
        NewTable {
            layout,
            retention: Some(Retention {
                memory_hours: hours,
                magnetic_days: 3650,
            }),
            ..NewTable::default()
        },
    )?;
    let minutes = u64::from(args.days) * 1440;
    let now_ms = SystemClock.now_us() / 1000;
    let start_ms = (now_ms - minutes as i64 * 60_000) / 60_000 * 60_000;
    let mut rng = Rng::new(7);
    let (c0, t0) = (own_cpu_secs()?, Instant::now());
    let mut batch: Vec<Record> = Vec::with_capacity(BATCH);
    let mut points = 0u64;
    let flush = |batch: &mut Vec<Record>| -> anyhow::Result<()> {
        if !batch.is_empty() {
            ts.write_records("weather", "balloons", None, batch)?;
            batch.clear();
        }
        Ok(())
    };
    for minute in 0..minutes {
        let time_ms = start_ms + minute as i64 * 60_000;
        for balloon in 0..args.balloons {
            for r in records_of(balloon, minute, time_ms, multi, &mut rng) {
                points += r.measure_values.len().max(1) as u64;
                batch.push(r);
                if batch.len() == BATCH {
                    flush(&mut batch)?;
                }
            }
        }
    }
    flush(&mut batch)?;
    let write = t0.elapsed();
    let cpu = own_cpu_secs()? - c0;
    let end_ns = (start_ms + minutes as i64 * 60_000) * 1_000_000;
    let rows = measure_state(args, &engine, &ts, multi, end_ns)?;
    // Then seal every closed hour into blocks and measure again.
    let t1 = Instant::now();
    let sealed_stats = ts.seal("weather", "balloons")?;
    let seal = t1.elapsed();
    anyhow::ensure!(sealed_stats.buckets > 0, "nothing was sealed");
    let sealed = measure_state(args, &engine, &ts, multi, end_ns)?;
    drop(ts);
    engine.shutdown()?;
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
    Ok(RunResult {
        points,
        write,
        cpu,
        rows,
        seal,
        sealed,
    })
}

/// Compacts, then measures bytes per point and times the guide's three reads.
fn measure_state(
    args: &PatternArgs,
    engine: &Engine,
    ts: &TimeSeries<SharedStore>,
    multi: bool,
    end_ns: i64,
) -> anyhow::Result<State> {
    engine.compact()?;
    let bytes = engine.disk_space()?.saturating_sub(engine.journal_space()?);
    let hour_ns = 3_600_000_000_000;
    let measure = if multi { "reading" } else { "temperature" };
    let count = |sel: &Selection| -> anyhow::Result<u64> {
        let mut n = 0;
        ts.scan("weather", "balloons", sel, &mut |_| {
            n += 1;
            ControlFlow::Continue(())
        })?;
        Ok(n)
    };
    let last_hour = timed(args.reads, |i| {
        let b = (i * 7919) % args.balloons;
        let d = dims(b);
        let sel = Selection {
            measure_name: None,
            dimensions: d
                .into_iter()
                .map(|d| (d.name.into_owned(), d.value.into_owned()))
                .collect(),
            start_ns: end_ns - hour_ns,
            end_ns,
            ..Selection::default()
        };
        let n = count(&sel)?;
        anyhow::ensure!(n > 0, "last hour of balloon {b} is empty");
        Ok(n)
    })?;
    let one_measure_day = timed(args.reads.div_ceil(4), |_| {
        let sel = Selection {
            measure_name: Some(measure.into()),
            start_ns: end_ns - 24 * hour_ns,
            end_ns,
            attributes: multi.then(|| vec!["temperature".to_string()]),
            ..Selection::default()
        };
        count(&sel)
    })?;
    let latest = timed(args.reads, |_| {
        let sel = Selection {
            measure_name: Some(measure.into()),
            ..Selection::default()
        };
        let (points, _) = ts.latest("weather", "balloons", &sel)?;
        anyhow::ensure!(
            points.len() == args.balloons as usize,
            "latest found {} balloons",
            points.len()
        );
        Ok(())
    })?;
    Ok(State {
        bytes,
        last_hour,
        one_measure_day,
        latest,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs the comparison and prints one line per pattern and record kind.
pub fn run(args: PatternArgs) -> anyhow::Result<()> {
    let base = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("almanac-patterns-{}", std::process::id()))
    });
    let patterns: Vec<Pattern> = if args.only.is_empty() {
        Pattern::ALL.to_vec()
    } else {
        args.only
            .iter()
            .map(|s| Pattern::parse(s))
            .collect::<Result<_, _>>()?
    };
    println!(
        "almanac-bench patterns: {} balloons x {} days x 1440 readings x 4 measures, bucket {}, WriteRecords batches of {BATCH}",
        args.balloons, args.days, args.bucket
    );
    println!(
        "| pattern | records | write points/s | CPU µs/point | bytes/point | last hour of one balloon | one measure, all balloons, 1 day | latest of every balloon |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for pattern in patterns {
        for multi in [false, true] {
            let dir = base.join(format!(
                "{}-{}",
                pattern.as_str(),
                if multi { "multi" } else { "single" }
            ));
            let r = run_one(&args, &dir, pattern, multi)
                .with_context(|| format!("pattern {}", pattern.as_str()))?;
            let kind = if multi { "multi" } else { "single" };
            let line = |name: String, write: String, cpu: String, st: &State| {
                println!(
                    "| {name} | {kind} | {write} | {cpu} | {:.2} | {:.2} ms | {:.1} ms | {:.2} ms |",
                    st.bytes as f64 / r.points as f64,
                    ms(st.last_hour),
                    ms(st.one_measure_day),
                    ms(st.latest),
                );
            };
            line(
                pattern.as_str().to_string(),
                format!("{:.0}", r.points as f64 / r.write.as_secs_f64()),
                format!("{:.2}", r.cpu * 1e6 / r.points as f64),
                &r.rows,
            );
            line(
                format!("{} sealed", pattern.as_str()),
                format!("(seal {:.0})", r.points as f64 / r.seal.as_secs_f64()),
                "".to_string(),
                &r.sealed,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}
