//! `almanac-bench tsbs`: the TSBS `cpu-only` write load against Almanac's Timestream
//! write API, InfluxDB 1.x or VictoriaMetrics (the anchors), over plain HTTP/1.1,
//! then optionally the TSBS devops queries with every answer checked ([`queries`],
//! [`victoria`]).
//!
//! Steps:
//! 1. Describe the data set: `--hosts` hosts, one reading every `--interval-secs` for
//!    `--days` from `--start` (default: now minus the span, rounded down to the
//!    interval, so the data falls inside a recent retention window). A reading (row)
//!    is ten float measures of one host; a point is one measure, so a row is ten
//!    points. The data comes from [`data`], deterministic from `--seed`.
//! 2. Prepare the target: InfluxDB gets `CREATE DATABASE` (POST /query);
//!    VictoriaMetrics nothing; Almanac gets CreateDatabase and CreateTable (memory
//!    store hours covering the span, magnetic store days [`MAGNETIC_DAYS`] with
//!    magnetic-store writes on), a ConflictException meaning it already exists.
//! 3. Start `--writers` threads, each with its own keep-alive connection ([`http`])
//!    and its own share of the hosts (host `i` goes to writer `i % writers`), so the
//!    same rows are sent to either target. Each writer fills a request body with
//!    `--batch` rows and POSTs it, one request in flight per writer:
//!    - influx: line protocol `cpu,hostname=host_0,... usage_user=58.1,... <ns>`
//!      to `/write?db=DB&precision=ns`; default batch [`INFLUX_BATCH`] lines, the
//!      TSBS loader's default `--batch-size`.
//!    - almanac: `Timestream_20181101.WriteRecords` with one MULTI record per row
//!      (the ten tags as dimensions, measure `cpu`, ten DOUBLE measure values, time
//!      in milliseconds); default batch [`TIMESTREAM_BATCH`] records, the Timestream
//!      maximum.
//!
//!    A 2xx answer counts the rows as written; any other answer is printed (the
//!    first few) and its rows counted as failed, except that a Timestream
//!    RejectedRecordsException fails only the records it lists.
//! 4. Print points written, seconds, points/s, requests/s, p50 and p99 request
//!    latency; with `--server-pid`, the server's CPU seconds over the load
//!    (utime+stime from /proc) and points per server CPU-second; with `--data-dir`,
//!    the bytes of the files under it and bytes per point.
//! 5. With `--settle-secs`, poll `--data-dir` until its size has not changed for
//!    `--settle-quiet-secs` (background compaction done) or the limit passes, and
//!    print the size, bytes per point and server CPU again.
//! 6. With `--queries N`, run N instances of every TSBS devops query type through the
//!    target's query API and check every answer ([`queries`]; `--no-load` skips steps
//!    2 to 5).
//!
//! `--dry-run` skips steps 2 and 5 and only generates the request bodies, to show
//! the generator is not the bottleneck.

pub mod data;
pub mod queries;
pub mod victoria;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use almanac_client::http::{Client, Endpoint, Response, query_escape};

use crate::measure::{fmt_latency, server_cpu_secs as server_cpu};
use data::{Format, Spec};

/// Rows per InfluxDB request: the TSBS loader's default `--batch-size`.
const INFLUX_BATCH: usize = 10_000;
/// Records per WriteRecords request: the Timestream maximum.
const TIMESTREAM_BATCH: usize = 100;
/// Magnetic store retention of the Timestream table: Timestream's maximum (200
/// years), so historical data (TSBS's default 2016 start) is inside it.
pub(crate) const MAGNETIC_DAYS: i64 = *almanac_timeseries::limits::MAGNETIC_RETENTION_DAYS.end();
/// Memory store hours added to the span, for the time between "now" and the load.
const MEMORY_SLACK_HOURS: u64 = 1;
const DEFAULT_ALMANAC_URL: &str = "http://127.0.0.1:8087";
const DEFAULT_INFLUX_URL: &str = "http://127.0.0.1:8086";
/// VictoriaMetrics' default HTTP listener (`-httpListenAddr`).
const DEFAULT_VICTORIA_URL: &str = "http://127.0.0.1:8428";
/// The Timestream write API's JSON protocol.
const AMZ_JSON: &str = "application/x-amz-json-1.0";
const TARGET_PREFIX: &str = "Timestream_20181101";
/// Failed responses printed in full; later ones are only counted.
const MAX_PRINTED_FAILURES: usize = 5;
/// Characters of a failed response's body printed.
const MAX_PRINTED_BODY: usize = 2000;
/// How often `--settle-secs` looks at the data directory.
const SETTLE_POLL: Duration = Duration::from_secs(5);
const SECS_PER_DAY: f64 = 86_400.0;
use almanac_engine::calendar::NANOS_PER_SEC;

/// The server under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// Almanac's Timestream-compatible write API (WriteRecords, AWS JSON 1.0).
    Almanac,
    /// InfluxDB 1.x (line protocol on /write).
    Influx,
    /// VictoriaMetrics (InfluxDB line protocol on /write; no database to create).
    Victoria,
}

/// Flags of `almanac-bench tsbs`.
#[derive(Debug, clap::Args)]
pub struct TsbsArgs {
    /// The server to load.
    #[arg(long, value_enum, default_value_t = Target::Almanac)]
    target: Target,
    /// Base URL of the server [default: http://127.0.0.1:8087 for almanac,
    /// http://127.0.0.1:8086 for influx]. Several, comma-separated (front-ends of one
    /// store): writer `w` writes through the `w mod n`-th; the queries go to the first.
    #[arg(long)]
    url: Option<String>,
    /// Simulated hosts (TSBS `--scale`).
    #[arg(long, default_value_t = 100)]
    hosts: u64,
    /// Days of readings.
    #[arg(long, default_value_t = 1.0)]
    days: f64,
    /// Seconds between a host's readings (TSBS `--log-interval`).
    #[arg(long, default_value_t = 10)]
    interval_secs: u64,
    /// Time of the first reading: RFC 3339 (`2024-01-01T00:00:00Z`) or epoch seconds
    /// [default: now minus the span, rounded down to the interval].
    #[arg(long)]
    start: Option<String>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rows per request [default: 10000 lines for influx (the TSBS loader's default),
    /// 100 records for almanac (the Timestream maximum)].
    #[arg(long)]
    batch: Option<usize>,
    /// Writer threads, each with its own connection and share of the hosts.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Database (InfluxDB database, Timestream database).
    #[arg(long, default_value = "benchmark")]
    db: String,
    /// Timestream table (almanac only).
    #[arg(long, default_value = "cpu")]
    table: String,
    /// The server's process id, to report its CPU time.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The server's data directory, to report bytes on disk per point.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// After the load, wait up to this many seconds for `--data-dir` to stop
    /// changing (compaction), then report its size again (0: do not wait).
    #[arg(long, default_value_t = 0)]
    settle_secs: u64,
    /// Seconds `--data-dir` must stay the same size to count as settled.
    #[arg(long, default_value_t = 60)]
    settle_quiet_secs: u64,
    /// Almanac: the table's storage pattern (`almanac:layout` tag), default the server's.
    #[arg(long)]
    layout: Option<String>,
    /// Almanac: the bucket of a bucketed layout (`almanac:bucket` tag, e.g. 1h).
    #[arg(long)]
    bucket: Option<String>,
    /// Only generate the request bodies (no server), to measure the generator.
    #[arg(long)]
    dry_run: bool,
    /// After the load, run this many instances of every TSBS devops query type (drawn
    /// from `--seed`) through the target's query API, each answer checked against the
    /// data (almanac and victoria).
    #[arg(long, default_value_t = 0)]
    queries: usize,
    /// Skip the load: the same data set (`--hosts`, `--days`, `--start` (required),
    /// `--seed`) is already in the target; with `--queries`, only query.
    #[arg(long)]
    no_load: bool,
}

/// What one writer did.
#[derive(Debug, Default)]
struct Tally {
    rows_ok: u64,
    rows_failed: u64,
    requests: u64,
    bytes: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.rows_ok += other.rows_ok;
        self.rows_failed += other.rows_failed;
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.latencies.extend(other.latencies);
    }

    fn percentile(&self, q: f64) -> Duration {
        crate::measure::percentile(&self.latencies, q)
    }
}

/// What every writer shares.
struct Shared<'a> {
    args: &'a TsbsArgs,
    format: Format,
    batch: usize,
    /// The writers' endpoints, writer `w` on the `w mod n`-th (none in a dry run).
    endpoints: Vec<Endpoint>,
    /// Request path (with query) of a write.
    path: String,
    /// Headers of a write.
    headers: Vec<(&'static str, String)>,
    /// Set when a writer fails, so the others stop early.
    stop: AtomicBool,
    printed_failures: AtomicUsize,
}

/// Runs the benchmark.
pub fn run(args: TsbsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.writers > 0, "--writers must be positive");
    let start = args.start.as_deref().map(parse_start).transpose()?;
    let spec = data_spec(args.hosts, args.days, args.interval_secs, args.seed, start)?;
    let start_secs = spec.start_ns.div_euclid(NANOS_PER_SEC);
    let batch = args.batch.unwrap_or(match args.target {
        Target::Influx | Target::Victoria => INFLUX_BATCH,
        Target::Almanac => TIMESTREAM_BATCH,
    });
    anyhow::ensure!(batch > 0, "--batch must be positive");
    let writers = args.writers.min(args.hosts as usize);
    let url = args.url.clone().unwrap_or_else(|| {
        match args.target {
            Target::Almanac => DEFAULT_ALMANAC_URL,
            Target::Influx => DEFAULT_INFLUX_URL,
            Target::Victoria => DEFAULT_VICTORIA_URL,
        }
        .to_string()
    });

    println!(
        "almanac-bench tsbs: cpu-only, {} hosts x {} readings every {} s from {} (seed {}) = {} rows, {} points",
        spec.hosts,
        spec.readings,
        args.interval_secs,
        almanac_engine::calendar::rfc3339_secs(start_secs),
        spec.seed,
        spec.rows(),
        spec.points()
    );
    let (format, path, headers, unit) = match args.target {
        Target::Influx | Target::Victoria => (
            Format::Line,
            format!("/write?db={}&precision=ns", query_escape(&args.db)),
            vec![("Content-Type", "text/plain; charset=utf-8".to_string())],
            "lines",
        ),
        Target::Almanac => (
            Format::write_records(&args.db, &args.table),
            "/".to_string(),
            vec![
                ("Content-Type", AMZ_JSON.to_string()),
                ("X-Amz-Target", format!("{TARGET_PREFIX}.WriteRecords")),
            ],
            "records",
        ),
    };
    println!(
        "{} {}, batches of {batch} {unit}, {writers} writers{}",
        if args.dry_run {
            "dry run for"
        } else {
            "target"
        },
        match args.target {
            Target::Influx => format!("influx {url} db {}", args.db),
            Target::Victoria => format!("victoria-metrics {url} db label {}", args.db),
            Target::Almanac => format!("almanac {url} table {}.{}", args.db, args.table),
        },
        if args.target == Target::Almanac && batch > TIMESTREAM_BATCH {
            " (above the Timestream maximum of 100)"
        } else {
            ""
        },
    );

    anyhow::ensure!(
        args.queries == 0 || args.target != Target::Influx,
        "--queries runs against --target almanac or victoria"
    );
    if args.no_load {
        anyhow::ensure!(
            args.start.is_some(),
            "--no-load needs the --start of the load, or the data set is made anew from now"
        );
        let first = url.split(',').next().unwrap_or_default();
        return query_phase(&args, &Endpoint::parse(first)?, &spec);
    }
    let endpoints = if args.dry_run {
        Vec::new()
    } else {
        let endpoints = url
            .split(',')
            .map(Endpoint::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(first) = endpoints.first() {
            prepare(&args, first, memory_hours(&spec))?;
        }
        endpoints
    };
    let shared = Shared {
        args: &args,
        format,
        batch,
        endpoints,
        path,
        headers,
        stop: AtomicBool::new(false),
        printed_failures: AtomicUsize::new(0),
    };

    let cpu0 = server_cpu(args.server_pid)?;
    let t0 = Instant::now();
    let results = run_writers(writers, |w| {
        let r = write_share(&shared, w, spec.stream(w as u64, writers as u64));
        if r.is_err() {
            shared.stop.store(true, Ordering::Relaxed);
        }
        r
    });
    let wall = t0.elapsed();
    let cpu1 = server_cpu(args.server_pid)?;
    let mut total = Tally::default();
    for r in results {
        total.add(r?);
    }
    total.latencies.sort_unstable();
    report(&args, &total, wall, cpu0.zip(cpu1).map(|(a, b)| b - a));

    if !args.dry_run
        && args.settle_secs > 0
        && let Some(dir) = &args.data_dir
    {
        settle(&args, dir, total.rows_ok * data::FIELDS.len() as u64)?;
    }
    match shared.endpoints.first() {
        Some(endpoint) => query_phase(&args, endpoint, &spec),
        None => Ok(()),
    }
}

/// Runs `--queries` instances of every query type and prints their timings.
fn query_phase(args: &TsbsArgs, endpoint: &Endpoint, spec: &Spec) -> anyhow::Result<()> {
    if args.queries == 0 {
        return Ok(());
    }
    let instances = queries::instances(spec, args.queries, args.seed);
    let table = format!(
        "\"{}\".\"{}\"",
        args.db.replace('"', "\"\""),
        args.table.replace('"', "\"\"")
    );
    let timings = if args.target == Target::Victoria {
        println!(
            "queries            {} instances in MetricsQL (/api/v1/query_range), every answer checked",
            instances.len()
        );
        victoria::run_all(endpoint, spec, &instances, args.server_pid)?
    } else {
        println!(
            "queries            {} instances through the Query API, every answer checked",
            instances.len()
        );
        queries::run_all(endpoint, &table, spec, &instances, args.server_pid)?
    };
    for t in timings {
        println!("  {}", t.line());
    }
    Ok(())
}

/// The data set of `hosts` hosts reading every `interval_secs` for `days` from
/// `start_secs` (default: now minus the span, rounded down to the interval), with the
/// flags checked.
pub(crate) fn data_spec(
    hosts: u64,
    days: f64,
    interval_secs: u64,
    seed: u64,
    start_secs: Option<i64>,
) -> anyhow::Result<Spec> {
    anyhow::ensure!(hosts > 0, "--hosts must be positive");
    anyhow::ensure!(interval_secs > 0, "--interval-secs must be positive");
    anyhow::ensure!(days.is_finite() && days > 0.0, "--days must be positive");
    let readings = (days * SECS_PER_DAY / interval_secs as f64).round() as u64;
    anyhow::ensure!(readings > 0, "--days is shorter than one interval");
    let interval = interval_secs as i64;
    let start_secs = match start_secs {
        Some(s) => s,
        None => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .context("the clock is before 1970")?
                .as_secs() as i64;
            (now - readings as i64 * interval).div_euclid(interval) * interval
        }
    };
    Ok(Spec {
        seed,
        hosts,
        readings,
        start_ns: start_secs
            .checked_mul(NANOS_PER_SEC)
            .context("--start out of range")?,
        interval_ns: interval * NANOS_PER_SEC,
    })
}

/// Runs `writer(0..writers)` on as many threads and gathers their results in order (a
/// thread that panicked gives an error).
pub(crate) fn run_writers<T: Send>(
    writers: usize,
    writer: impl Fn(usize) -> anyhow::Result<T> + Sync,
) -> Vec<anyhow::Result<T>> {
    std::thread::scope(|s| {
        let writer = &writer;
        let handles: Vec<_> = (0..writers).map(|w| s.spawn(move || writer(w))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a writer thread panicked"))?
            })
            .collect()
    })
}

/// Memory store hours of the table a load of `spec` writes to: its span, rounded up,
/// and [`MEMORY_SLACK_HOURS`].
pub(crate) fn memory_hours(spec: &Spec) -> u64 {
    let span_secs = spec
        .readings
        .saturating_mul(spec.interval_ns.unsigned_abs())
        / NANOS_PER_SEC.unsigned_abs();
    span_secs.div_ceil(3600) + MEMORY_SLACK_HOURS
}

/// Creates the database (and table, `memory_hours` in its memory store) the load
/// writes to.
fn prepare(args: &TsbsArgs, endpoint: &Endpoint, memory_hours: u64) -> anyhow::Result<()> {
    let mut client = Client::new(endpoint.clone());
    match args.target {
        Target::Influx => {
            let q = format!("CREATE DATABASE \"{}\"", args.db.replace('"', "\\\""));
            let r = client.post(&format!("/query?q={}", query_escape(&q)), &[], b"")?;
            let text = r.text();
            if r.status != 200 || text.contains("\"error\"") {
                bail!("{q}: HTTP {}: {text}", r.status);
            }
            println!("created influx database {}", args.db);
        }
        // VictoriaMetrics takes the database as a label of every series: nothing to create.
        Target::Victoria => {}
        Target::Almanac => {
            let db = data::json_str(&args.db);
            let calls = [
                ("CreateDatabase", format!(r#"{{"DatabaseName":{db}}}"#)),
                (
                    "CreateTable",
                    format!(
                        r#"{{"DatabaseName":{db},"TableName":{},"RetentionProperties":{{"MemoryStoreRetentionPeriodInHours":{memory_hours},"MagneticStoreRetentionPeriodInDays":{MAGNETIC_DAYS}}},"MagneticStoreWriteProperties":{{"EnableMagneticStoreWrites":true}},"Tags":[{}]}}"#,
                        data::json_str(&args.table),
                        [
                            ("almanac:layout", &args.layout),
                            ("almanac:bucket", &args.bucket)
                        ]
                        .iter()
                        .filter_map(|(k, v)| v
                            .as_ref()
                            .map(|v| format!(r#"{{"Key":"{k}","Value":{}}}"#, data::json_str(v))))
                        .collect::<Vec<_>>()
                        .join(",")
                    ),
                ),
            ];
            for (op, body) in calls {
                let target = format!("{TARGET_PREFIX}.{op}");
                let r = client.post(
                    "/",
                    &[("Content-Type", AMZ_JSON), ("X-Amz-Target", &target)],
                    body.as_bytes(),
                )?;
                let text = r.text();
                if r.status == 200 {
                    println!("{op}: created");
                } else if text.contains("ConflictException") {
                    println!("{op}: already exists");
                } else {
                    bail!("{op}: HTTP {}: {text}", r.status);
                }
            }
        }
    }
    Ok(())
}

/// Writer `w`: fills and sends batches from its stream until it runs out.
fn write_share(shared: &Shared<'_>, w: usize, mut stream: data::Stream) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    let mut body = Vec::with_capacity(1 << 20);
    let n = shared.endpoints.len().max(1);
    let mut client = shared.endpoints.get(w % n).cloned().map(Client::new);
    let headers: Vec<(&str, &str)> = shared
        .headers
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .collect();
    while !shared.stop.load(Ordering::Relaxed) {
        let rows = shared.format.fill(&mut stream, shared.batch, &mut body) as u64;
        if rows == 0 {
            break;
        }
        tally.bytes += body.len() as u64;
        let Some(client) = client.as_mut() else {
            tally.rows_ok += rows; // dry run
            continue;
        };
        let t = Instant::now();
        let response = client.post(&shared.path, &headers, &body)?;
        tally.latencies.push(t.elapsed());
        tally.requests += 1;
        let failed = failed_rows(shared.args.target, &response, rows);
        if failed > 0 {
            let n = shared.printed_failures.fetch_add(1, Ordering::Relaxed);
            if n < MAX_PRINTED_FAILURES {
                let text: String = response.text().chars().take(MAX_PRINTED_BODY).collect();
                eprintln!(
                    "almanac-bench tsbs: HTTP {}, {failed} of {rows} rows failed: {text}",
                    response.status
                );
            } else if n == MAX_PRINTED_FAILURES {
                eprintln!("almanac-bench tsbs: (further failures are only counted)");
            }
        }
        tally.rows_failed += failed;
        tally.rows_ok += rows - failed;
    }
    Ok(tally)
}

/// Rows of a `rows`-row request that `response` says were not written.
fn failed_rows(target: Target, response: &Response, rows: u64) -> u64 {
    if (200..300).contains(&response.status) {
        return 0;
    }
    let text = response.text();
    if target == Target::Almanac && text.contains("RejectedRecordsException") {
        // The body lists each rejected record with its RecordIndex; the rest were written.
        let listed = text.matches("\"RecordIndex\"").count() as u64;
        if listed > 0 {
            return listed.min(rows);
        }
    }
    rows
}

fn report(args: &TsbsArgs, t: &Tally, wall: Duration, server_cpu_secs: Option<f64>) {
    let fields = data::FIELDS.len() as u64;
    let points = t.rows_ok * fields;
    let secs = wall.as_secs_f64().max(f64::MIN_POSITIVE);
    if args.dry_run {
        println!(
            "generated {points} points ({} rows, {:.1} MB of request bodies) in {secs:.2} s: {:.0} points/s, {:.0} rows/s, {:.1} MB/s",
            t.rows_ok,
            t.bytes as f64 / 1e6,
            points as f64 / secs,
            t.rows_ok as f64 / secs,
            t.bytes as f64 / 1e6 / secs
        );
        return;
    }
    println!(
        "points written     {points} ({} rows); failed: {} points",
        t.rows_ok,
        t.rows_failed * fields
    );
    println!("seconds            {secs:.2}");
    println!(
        "points/s           {:.0} ({:.0} rows/s)",
        points as f64 / secs,
        t.rows_ok as f64 / secs
    );
    println!(
        "requests/s         {:.1} ({} requests, {:.1} MB sent, {:.1} MB/s)",
        t.requests as f64 / secs,
        t.requests,
        t.bytes as f64 / 1e6,
        t.bytes as f64 / 1e6 / secs
    );
    println!(
        "request latency    p50 {}   p99 {}",
        fmt_latency(t.percentile(0.50)),
        fmt_latency(t.percentile(0.99))
    );
    if let Some(cpu) = server_cpu_secs {
        println!(
            "server CPU         {cpu:.2} s ({:.0}% of one core); {:.0} points per server CPU-second",
            cpu / secs * 100.0,
            points as f64 / cpu.max(f64::MIN_POSITIVE)
        );
    }
    if let Some(dir) = &args.data_dir {
        match dir_bytes(dir) {
            Ok(size) => println!(
                "data dir           right after the load: {}",
                size.describe(points)
            ),
            Err(e) => eprintln!("almanac-bench tsbs: {e:#}"),
        }
    }
}

/// Waits for the data directory to stop changing, then reports its size.
fn settle(args: &TsbsArgs, dir: &Path, points: u64) -> anyhow::Result<()> {
    let cpu0 = server_cpu(args.server_pid)?;
    let t0 = Instant::now();
    let limit = Duration::from_secs(args.settle_secs);
    let quiet = Duration::from_secs(args.settle_quiet_secs);
    let mut last = dir_bytes(dir)?;
    let mut last_change = t0;
    let mut smallest = last;
    while t0.elapsed() < limit && last_change.elapsed() < quiet {
        std::thread::sleep(SETTLE_POLL);
        let now = dir_bytes(dir)?;
        if now.files < smallest.files {
            smallest = now;
        }
        if now != last {
            last = now;
            last_change = Instant::now();
        }
    }
    let settled = last_change.elapsed() >= quiet;
    println!(
        "after settling     {:.0} s ({}): {}",
        t0.elapsed().as_secs_f64(),
        if settled {
            format!("unchanged for {} s", args.settle_quiet_secs)
        } else {
            "limit reached, still changing".to_string()
        },
        last.describe(points)
    );
    if smallest.files < last.files {
        println!(
            "                   (smallest seen while settling: {})",
            smallest.describe(points)
        );
    }
    if let (Some(a), Some(b)) = (cpu0, server_cpu(args.server_pid)?) {
        println!("server CPU         {:.2} s while settling", b - a);
    }
    Ok(())
}

/// Bytes under a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirSize {
    /// The files' lengths added up.
    files: u64,
    /// Blocks the files take on disk (less than `files` for sparse or preallocated-
    /// but-unwritten files, more for small files).
    allocated: u64,
}

impl DirSize {
    fn describe(self, points: u64) -> String {
        let per_point = |b: u64| b as f64 / points.max(1) as f64;
        format!(
            "{} bytes in files ({:.1} MB, {:.2} bytes/point); {} bytes allocated ({:.2} bytes/point)",
            self.files,
            self.files as f64 / 1e6,
            per_point(self.files),
            self.allocated,
            per_point(self.allocated)
        )
    }
}

/// Sizes of the files under `dir` (symlinks not followed).
fn dir_bytes(dir: &Path) -> anyhow::Result<DirSize> {
    use std::os::unix::fs::MetadataExt as _;
    /// `st_blocks` counts 512-byte units.
    const BLOCK: u64 = 512;
    let mut total = DirSize {
        files: 0,
        allocated: 0,
    };
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            // A directory removed while walking (a compaction's temp dir) counts as empty.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", d.display())),
        };
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue }; // removed meanwhile
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total.files += meta.len();
                total.allocated += meta.blocks() * BLOCK;
            }
        }
    }
    Ok(total)
}

/// Epoch seconds from `s`: digits (epoch seconds) or RFC 3339 with whole seconds
/// (`2024-01-01T00:00:00Z`, `2024-01-01T02:00:00+02:00`).
fn parse_start(s: &str) -> anyhow::Result<i64> {
    s.parse::<i64>()
        .ok()
        .or_else(|| almanac_engine::calendar::parse_rfc3339_secs(s))
        .with_context(|| format!("--start {s:?}: expected epoch seconds or YYYY-MM-DDTHH:MM:SSZ"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_table_keeps_the_whole_span_in_its_memory_store() {
        let hours = |days: f64| memory_hours(&data_spec(100, days, 10, 1, Some(0)).unwrap());
        assert_eq!(hours(1.0), 24 + MEMORY_SLACK_HOURS);
        assert_eq!(hours(0.02), 1 + MEMORY_SLACK_HOURS);
        assert_eq!(hours(0.25), 6 + MEMORY_SLACK_HOURS);
        assert_eq!(hours(0.26), 7 + MEMORY_SLACK_HOURS);
    }

    #[test]
    fn parses_and_formats_start_times() {
        assert_eq!(parse_start("1451606400").unwrap(), 1_451_606_400);
        assert_eq!(parse_start("2016-01-01T00:00:00Z").unwrap(), 1_451_606_400);
        assert_eq!(
            parse_start("2016-01-01T02:00:00+02:00").unwrap(),
            1_451_606_400
        );
        assert_eq!(parse_start("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_start("2024-02-29T12:34:56Z").unwrap(), 1_709_210_096);
        assert!(parse_start("2016-01-01").is_err());
        assert!(parse_start("2016-13-01T00:00:00Z").is_err());
        assert!(parse_start("2016-01-01T00:00:00.5Z").is_err());
        assert!(parse_start("2016-01-01T00:00:0é+02:00").is_err());
        assert!(parse_start("2016-01-01T00:00:00é1:00").is_err());
        for secs in [0, 1_451_606_400, 1_709_210_096, 4_102_444_799, -86_401] {
            assert_eq!(
                parse_start(&almanac_engine::calendar::rfc3339_secs(secs)).unwrap(),
                secs
            );
        }
        assert_eq!(
            almanac_engine::calendar::rfc3339_secs(1_709_210_096),
            "2024-02-29T12:34:56Z"
        );
    }

    #[test]
    fn counts_rejected_records() {
        let resp = |status, body: &str| Response {
            status,
            body: body.as_bytes().to_vec(),
        };
        let rejected = r#"{"__type":"com.amazonaws.timestream.v20181101#RejectedRecordsException","message":"m","RejectedRecords":[{"RecordIndex":3,"Reason":"r"},{"RecordIndex":7,"Reason":"r"}]}"#;
        assert_eq!(failed_rows(Target::Almanac, &resp(200, ""), 100), 0);
        assert_eq!(failed_rows(Target::Influx, &resp(204, ""), 100), 0);
        assert_eq!(failed_rows(Target::Almanac, &resp(419, rejected), 100), 2);
        assert_eq!(
            failed_rows(Target::Almanac, &resp(400, "ValidationException"), 100),
            100
        );
        assert_eq!(
            failed_rows(Target::Influx, &resp(400, "partial write"), 10),
            10
        );
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: TsbsArgs,
    }

    /// Requests a fake server saw: the X-Amz-Target header and the body.
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

    /// A fake Timestream write endpoint: CreateDatabase succeeds, CreateTable answers
    /// ConflictException, and every third WriteRecords rejects records 0 and 5.
    fn fake_timestream() -> (String, Seen) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Seen::default();
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let seen = seen2.clone();
                std::thread::spawn(move || {
                    let conn = conn.unwrap();
                    conn.set_nodelay(true).unwrap();
                    let mut r = BufReader::new(conn);
                    loop {
                        let (mut target, mut len, mut json) = (String::new(), 0, false);
                        loop {
                            let mut line = String::new();
                            if r.read_line(&mut line).unwrap() == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if line.starts_with("POST ") {
                                assert_eq!(line, "POST / HTTP/1.1\r\n");
                                continue;
                            }
                            let (k, v) = line.trim_end().split_once(": ").unwrap();
                            match k {
                                "X-Amz-Target" => target = v.to_string(),
                                "Content-Length" => len = v.parse().unwrap(),
                                "Content-Type" => json = v == AMZ_JSON,
                                _ => {}
                            }
                        }
                        assert!(json);
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).unwrap();
                        let mut seen = seen.lock().unwrap();
                        seen.push((target.clone(), String::from_utf8(body).unwrap()));
                        let (status, reply) = match target.rsplit('.').next().unwrap() {
                            "CreateTable" => (
                                400,
                                r#"{"__type":"com.amazonaws.timestream.v20181101#ConflictException","message":"exists"}"#,
                            ),
                            "WriteRecords" if seen.len() % 3 == 0 => (
                                419,
                                r#"{"__type":"com.amazonaws.timestream.v20181101#RejectedRecordsException","message":"m","RejectedRecords":[{"RecordIndex":0,"Reason":"r"},{"RecordIndex":5,"Reason":"r"}]}"#,
                            ),
                            _ => (200, "{}"),
                        };
                        drop(seen);
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n",
                            reply.len()
                        );
                        r.get_mut().write_all(head.as_bytes()).unwrap();
                        r.get_mut().write_all(reply.as_bytes()).unwrap();
                    }
                });
            }
        });
        (url, seen)
    }

    #[test]
    fn loads_a_timestream_endpoint() {
        use clap::Parser as _;
        let (url, seen) = fake_timestream();
        // 7 hosts x 30 readings = 210 records, in batches of 100 per writer.
        let cli = Cli::try_parse_from([
            "tsbs",
            "--url",
            &url,
            "--hosts",
            "7",
            "--days",
            "0.003472",
            "--interval-secs",
            "10",
            "--start",
            "2024-01-01T00:00:00Z",
            "--writers",
            "2",
        ])
        .unwrap();
        run(cli.args).unwrap();
        let seen = seen.lock().unwrap();
        let targets: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            targets[..2],
            [
                "Timestream_20181101.CreateDatabase",
                "Timestream_20181101.CreateTable"
            ]
        );
        assert!(
            seen[1].1.contains(
                r#""MemoryStoreRetentionPeriodInHours":2,"MagneticStoreRetentionPeriodInDays":73000},"MagneticStoreWriteProperties":{"EnableMagneticStoreWrites":true}"#
            ),
            "{}",
            seen[1].1
        );
        let writes: Vec<&String> = seen[2..]
            .iter()
            .map(|(t, b)| {
                assert_eq!(t, "Timestream_20181101.WriteRecords");
                b
            })
            .collect();
        // Writer 0 has hosts 0, 2, 4, 6 (120 rows: 100 + 20), writer 1 hosts 1, 3, 5 (90).
        assert_eq!(writes.len(), 3);
        let records: usize = writes
            .iter()
            .map(|b| b.matches(r#""MeasureValueType":"MULTI""#).count())
            .sum();
        assert_eq!(records, 210);
        // 2024-01-01T00:00:00Z, then 29 readings 10 s apart, in milliseconds.
        let has = |t: &str| {
            writes
                .iter()
                .any(|b| b.contains(&format!(r#""Time":"{t}""#)))
        };
        assert!(has("1704067200000") && has("1704067490000") && !has("1704067500000"));
    }

    #[test]
    fn measures_directories() {
        let dir = std::env::temp_dir().join(format!("almanac-tsbs-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("x"), [0u8; 10]).unwrap();
        std::fs::write(dir.join("a/b/y"), [0u8; 32]).unwrap();
        let size = dir_bytes(&dir).unwrap();
        assert_eq!(size.files, 42);
        assert!(size.allocated >= 42 || size.allocated == 0, "{size:?}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(dir_bytes(&dir).is_err());
    }
}
