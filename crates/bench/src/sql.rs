//! `almanac-bench sql`: the TSBS devops queries ([`crate::devops`]) on a TSBS-like
//! cpu data set (hosts × 10 measures every 10 s), loaded straight into an embedded
//! engine through the time-series layer, sealed (unless `--no-seal`) and compacted, then
//! each query run several times.
//! Prints each query's median latency, the rows it returned, and the records and cells
//! storage read for them (pushdown at work), then the full-scan rate.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use almanac_engine::Durability;
use almanac_engine::clock::{Clock, SystemClock};
use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{
    Dimension, Layout, MeasureValue, NewTable, Record, Retention, SharedStore, TimeSeries,
};
use anyhow::Context as _;

use crate::devops;
use crate::tsbs::data::{FIELDS, MEASUREMENT, Spec, TAG_KEYS};

/// Records per WriteRecords call, as the service allows.
const BATCH: usize = 100;
/// The database and table the data set goes to.
const DATABASE: &str = "tsbs";
const TABLE: &str = "cpu";

/// Arguments of `almanac-bench sql`.
#[derive(Debug, clap::Args)]
pub struct SqlBenchArgs {
    /// Hosts.
    #[arg(long, default_value_t = 100)]
    hosts: u64,
    /// Hours of data.
    #[arg(long, default_value_t = 72)]
    hours: u64,
    /// Seconds between a host's readings.
    #[arg(long, default_value_t = 10)]
    interval_secs: u64,
    /// Runs of each query (the median is printed).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Storage pattern of the table.
    #[arg(long, default_value = "row-serialized")]
    layout: String,
    /// Keep the data here (and reuse it when the table is already there) instead of a
    /// temporary directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Leave every record in its row (by default the closed hours are sealed into
    /// blocks after the load, as `serve` does in the background).
    #[arg(long)]
    no_seal: bool,
    /// Run only the queries whose name contains this (e.g. `lastpoint`).
    #[arg(long)]
    only: Option<String>,
}

fn load(ts: &TimeSeries<SharedStore>, args: &SqlBenchArgs, spec: &Spec) -> anyhow::Result<()> {
    ts.create_database(DATABASE, None)?;
    let layout = Layout::from_tags([("almanac:layout", args.layout.as_str())])?;
    ts.create_table(
        DATABASE,
        TABLE,
        NewTable {
            layout,
            retention: Some(Retention {
                memory_hours: args.hours as i64 + 24,
                magnetic_days: 3650,
            }),
            ..NewTable::default()
        },
    )?;
    let t0 = Instant::now();
    let mut stream = spec.stream(0, 1);
    let mut batch = Vec::with_capacity(BATCH);
    let mut rows = 0u64;
    while let Some((host, time_ns)) = stream.next_row() {
        batch.push(Record::multi(
            TAG_KEYS
                .iter()
                .zip(host.tags())
                .map(|(k, v)| Dimension::new(*k, v.to_string()))
                .collect(),
            MEASUREMENT,
            FIELDS
                .iter()
                .zip(host.values)
                .map(|(n, v)| MeasureValue::new(*n, v.to_string(), "DOUBLE"))
                .collect(),
            time_ns / 1_000_000,
        ));
        if batch.len() == BATCH {
            ts.write_records(DATABASE, TABLE, None, &batch)?;
            rows += batch.len() as u64;
            batch.clear();
            if rows.is_multiple_of(200_000) {
                eprint!("\rloaded {rows} of {} records", spec.rows());
            }
        }
    }
    if !batch.is_empty() {
        rows += batch.len() as u64;
        ts.write_records(DATABASE, TABLE, None, &batch)?;
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "\rloaded {rows} records ({} points) in {secs:.1} s: {:.0} points/s",
        rows * FIELDS.len() as u64,
        (rows * FIELDS.len() as u64) as f64 / secs
    );
    Ok(())
}

/// Runs `sql` `runs` times; the median latency and the last run's output.
async fn measure(
    sql: &SqlEngine,
    query: &str,
    runs: usize,
) -> anyhow::Result<(Duration, almanac_sql::QueryOutput)> {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs.max(1) {
        let t0 = Instant::now();
        let out = sql
            .query(query, &Scope::default())
            .await
            .with_context(|| format!("query failed: {query}"))?;
        times.push(t0.elapsed());
        last = Some(out);
    }
    times.sort();
    let out = last.context("no run")?;
    Ok((crate::measure::percentile(&times, 0.5), out))
}

/// Runs the benchmark.
pub fn run(args: SqlBenchArgs) -> anyhow::Result<()> {
    let temp;
    let dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => {
            temp = std::env::temp_dir().join(format!("almanac-bench-sql-{}", std::process::id()));
            temp.clone()
        }
    };
    let (engine, ts) = crate::store::open_embedded(
        &dir,
        almanac_timeseries::DEFAULT_INSTANCE,
        Durability::Buffer,
    )?;
    let ts = Arc::new(ts);
    let readings = args.hours * 3600 / args.interval_secs.max(1);
    let interval_ns = args.interval_secs.max(1) as i64 * 1_000_000_000;
    let now_ns = SystemClock.now_us() * 1000;
    let start_ns = (now_ns - readings as i64 * interval_ns) / 60_000_000_000 * 60_000_000_000;
    let spec = Spec {
        seed: 123,
        hosts: args.hosts,
        readings,
        start_ns,
        interval_ns,
    };
    let table = format!("{DATABASE}.{TABLE}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let sql = SqlEngine::new(engine.clone(), ts.clone())?;
    let start_ns = if ts.describe_table(DATABASE, TABLE).is_ok() {
        eprintln!("reusing {table} in {}", dir.display());
        let out = runtime.block_on(sql.query(
            &format!("SELECT to_nanoseconds(min(time)) AS t FROM {table}"),
            &Scope::default(),
        ))?;
        let col = out
            .batches
            .first()
            .map(|b| b.column(0).clone())
            .context("empty table")?;
        use almanac_sql::arrow::array::AsArray as _;
        col.as_primitive::<almanac_sql::arrow::datatypes::Int64Type>()
            .value(0)
    } else {
        load(&ts, &args, &spec)?;
        if !args.no_seal {
            let t0 = Instant::now();
            let s = ts.seal(DATABASE, TABLE)?;
            eprintln!(
                "sealed {} hours of series ({} points) in {:.1} s",
                s.buckets,
                s.points,
                t0.elapsed().as_secs_f64()
            );
        }
        let t0 = Instant::now();
        engine.compact()?;
        eprintln!(
            "compacted in {:.1} s: {} bytes in tables",
            t0.elapsed().as_secs_f64(),
            engine.disk_space()?.saturating_sub(engine.journal_space()?)
        );
        start_ns
    };
    let hosts: Vec<String> = (0..8.min(args.hosts))
        .map(|h| format!("host_{}", h * 7 % args.hosts))
        .collect();
    // Query windows start an hour in, so every window is full.
    let window = start_ns + devops::HOUR_NS;
    let queries = [
        (
            "single-groupby-1-1-1",
            devops::single_groupby_1_1_1(&table, "host_3", window),
        ),
        (
            "cpu-max-all-8",
            devops::cpu_max_all_8(&table, &hosts, window),
        ),
        ("double-groupby-1", devops::double_groupby_1(&table, window)),
        ("high-cpu-all", devops::high_cpu_all(&table, window)),
        ("lastpoint", devops::lastpoint(&table)),
        ("full scan (count, avg)", devops::scan_all(&table)),
    ];
    println!("| query | median latency | rows returned | records read | cells read |");
    println!("|---|---|---|---|---|");
    let chosen = queries
        .iter()
        .filter(|(name, _)| args.only.as_ref().is_none_or(|o| name.contains(o.as_str())));
    for (name, query) in chosen {
        let (median, out) = runtime.block_on(measure(&sql, query, args.runs))?;
        println!(
            "| {name} | {} | {} | {} | {} |",
            crate::measure::fmt_latency(median),
            out.num_rows(),
            out.scan.rows_produced,
            out.scan.cells_read
        );
        if name.starts_with("full scan") {
            println!(
                "\nfull scan: {:.0} records/s ({:.0} points/s)",
                out.scan.rows_produced as f64 / median.as_secs_f64(),
                (out.scan.rows_produced * FIELDS.len() as u64) as f64 / median.as_secs_f64()
            );
        }
    }
    engine.shutdown()?;
    if args.data_dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
