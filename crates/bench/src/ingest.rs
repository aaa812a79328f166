//! `almanac-bench ingest`: the server's WriteRecords path in this process, on the
//! TSBS cpu-only bodies of `almanac-bench tsbs`, each stage timed on its own. Where
//! `tsbs` says how fast the whole server ingests, this says which stage of a request
//! the CPU goes to, without HTTP, sockets or a second process in the way (and it is
//! a steady loop to profile).
//!
//! Steps:
//! 1. Open an embedded engine in a fresh directory (`--dir`, default a temp dir)
//!    with the fsync policy of `--fsync` (default `sync`, as `serve`), the time-series
//!    layer over it, and a table with the default layout (or `--layout`) whose
//!    memory store covers the span.
//! 2. `--writers` threads (default 1), each with its share of the hosts as in `bench
//!    tsbs`, loop: generate a body of `--batch` records ([`crate::tsbs::data`]),
//!    parse it with the server's parser ([`records_json`]), write it
//!    (`write_records_unsynced`: checks, schema, rows), wait for its sync (group
//!    commit), drop the request. Each stage's wall time is summed per thread.
//! 3. Print points/s, the process's CPU per point (every thread: writers, syncs,
//!    flushes, compactions) and each stage's time per request and per point.
//! 4. Delete the directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use almanac_engine::Durability;
use almanac_server::timestream::records_json;
use almanac_timeseries::{Layout, NewTable, Pattern, Retention, SharedStore, TimeSeries};
use anyhow::Context;

use crate::measure::own_cpu_secs;
use crate::tsbs::data::{FIELDS, Format};

const INSTANCE: &str = "projects/bench/instances/ingest";
const DB: &str = "benchmark";
const TABLE: &str = "cpu";

/// Flags of `almanac-bench ingest`.
#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Simulated hosts (TSBS `--scale`).
    #[arg(long, default_value_t = 100)]
    hosts: u64,
    /// Days of readings.
    #[arg(long, default_value_t = 0.25)]
    days: f64,
    /// Seconds between a host's readings.
    #[arg(long, default_value_t = 10)]
    interval_secs: u64,
    /// Records per request (the Timestream maximum is 100).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Writer threads, each with its share of the hosts.
    #[arg(long, default_value_t = 1)]
    writers: usize,
    /// The table's storage pattern (default: the server's).
    #[arg(long)]
    layout: Option<String>,
    /// When a write is acknowledged: `sync` (fsync, group commit; as `serve`),
    /// `buffer` or `none`.
    #[arg(long, default_value = "sync")]
    fsync: Durability,
    /// Directory for the data (deleted first and after). Default: a temp dir.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Wall time of each stage, summed over one writer's requests.
#[derive(Debug, Default, Clone, Copy)]
struct Stages {
    requests: u64,
    records: u64,
    generate: Duration,
    parse: Duration,
    write: Duration,
    sync: Duration,
    drop: Duration,
}

impl Stages {
    fn add(&mut self, o: &Stages) {
        self.requests += o.requests;
        self.records += o.records;
        self.generate += o.generate;
        self.parse += o.parse;
        self.write += o.write;
        self.sync += o.sync;
        self.drop += o.drop;
    }
}

/// Runs `almanac-bench ingest`.
pub fn run(args: IngestArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.writers > 0, "--writers must be positive");
    anyhow::ensure!(args.batch > 0, "--batch must be positive");
    let spec = crate::tsbs::data_spec(args.hosts, args.days, args.interval_secs, 1, None)?;
    let readings = spec.readings;
    let layout = match &args.layout {
        Some(name) => Layout {
            pattern: Pattern::parse(name)?,
            ..Layout::default()
        },
        None => Layout::default(),
    };

    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("almanac-bench-ingest-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (engine, ts) = crate::store::open_embedded(&dir, INSTANCE, args.fsync)?;
    ts.create_database(DB, None)?;
    ts.create_table(
        DB,
        TABLE,
        NewTable {
            retention: Some(Retention {
                memory_hours: crate::tsbs::memory_hours(&spec).try_into()?,
                magnetic_days: crate::tsbs::MAGNETIC_DAYS,
            }),
            layout,
            ..NewTable::default()
        },
    )?;
    let writers = args.writers.min(args.hosts as usize);
    println!(
        "almanac-bench ingest: TSBS cpu-only, {} hosts x {readings} readings = {} points, \
         {} records a request, {writers} writer(s), layout {}, fsync {:?}, in process",
        spec.hosts,
        spec.points(),
        args.batch,
        layout.pattern.as_str(),
        args.fsync,
    );

    let format = Format::write_records(DB, TABLE);
    let cpu0 = own_cpu_secs()?;
    let t0 = Instant::now();
    let results = crate::tsbs::run_writers(writers, |w| {
        write_share(
            &ts,
            &format,
            spec.stream(w as u64, writers as u64),
            args.batch,
        )
    });
    let wall = t0.elapsed();
    let cpu = own_cpu_secs()? - cpu0;
    let mut total = Stages::default();
    for r in results {
        total.add(&r?);
    }
    report(&total, wall, cpu);
    drop(ts);
    drop(engine);
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
}

/// One writer's loop over its share of the rows.
fn write_share(
    ts: &TimeSeries<SharedStore>,
    format: &Format,
    mut stream: crate::tsbs::data::Stream,
    batch: usize,
) -> anyhow::Result<Stages> {
    let mut st = Stages::default();
    let mut body = Vec::with_capacity(1 << 20);
    loop {
        let t = Instant::now();
        let rows = format.fill(&mut stream, batch, &mut body);
        let t_gen = Instant::now();
        st.generate += t_gen - t;
        if rows == 0 {
            return Ok(st);
        }
        let req = records_json::parse_write_records(&body).map_err(anyhow::Error::msg)?;
        let t_parse = Instant::now();
        st.parse += t_parse - t_gen;
        let out =
            ts.write_records_unsynced(DB, TABLE, req.common_attributes.as_ref(), &req.records)?;
        let t_write = Instant::now();
        st.write += t_write - t_parse;
        ts.sync()?;
        let t_sync = Instant::now();
        st.sync += t_sync - t_write;
        anyhow::ensure!(
            out.rejected.is_empty(),
            "{} records rejected, the first: {:?}",
            out.rejected.len(),
            out.rejected.first()
        );
        drop(req);
        st.drop += t_sync.elapsed();
        st.requests += 1;
        st.records += rows as u64;
    }
}

fn report(t: &Stages, wall: Duration, cpu: f64) {
    let points = t.records * FIELDS.len() as u64;
    let secs = wall.as_secs_f64();
    println!(
        "points/s      {:>10.0} ({} points in {secs:.2} s, {} requests)",
        points as f64 / secs,
        points,
        t.requests
    );
    println!(
        "process CPU   {cpu:.2} s ({:.0}% of one core), {:.0} ns per point",
        100.0 * cpu / secs,
        cpu * 1e9 / points.max(1) as f64
    );
    let stages = [
        ("generate", t.generate),
        ("parse", t.parse),
        ("write", t.write),
        ("sync", t.sync),
        ("drop", t.drop),
    ];
    println!("stage         µs/request   ns/point   (wall time, summed over writers)");
    for (name, d) in stages {
        println!(
            "  {name:<10} {:>10.1} {:>10.0}",
            d.as_secs_f64() * 1e6 / t.requests.max(1) as f64,
            d.as_secs_f64() * 1e9 / points.max(1) as f64
        );
    }
}
