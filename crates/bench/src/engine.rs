//! `almanac-bench engine`: the embedded engine's speed and size, printed as numbers.
//!
//! Steps: bulk-load `--rows` rows of one `--value-bytes` cell (MutateRows batches of
//! 100), then measure durable single-row writes (fsync policy `sync`, 1 and
//! `--threads` writers: group commit), random point reads, a full scan, reversed
//! scan, and bytes on disk per logical byte after a flush. CPU time is the
//! process's user+system time over each phase.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use almanac_engine::clock::Rng;
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilySpec, TableSpec};
use almanac_engine::{Durability, Engine, Options, ReadRequest, RowMutations};
use anyhow::Context;

use crate::measure::{own_cpu_secs, spread_key};

const INSTANCE: &str = "projects/bench/instances/bench";

/// Flags of `almanac-bench engine`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Rows in the read/scan table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Seconds per timed phase.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Concurrent writers / readers in the multi-threaded phases.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Directory for the benchmark's data (deleted first). Default: a temp dir.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// This process's CPU seconds; 0 where `/proc` cannot tell (the phase then shows none).
fn cpu_secs() -> f64 {
    own_cpu_secs().unwrap_or(0.0)
}

fn key(i: u64) -> Vec<u8> {
    spread_key(i).into_bytes()
}

fn set(value: &[u8]) -> Mutation {
    Mutation::SetCell {
        family: "cf".into(),
        qualifier: b"v".to_vec(),
        timestamp_us: 0,
        value: value.to_vec(),
    }
}

struct Phase {
    name: &'static str,
    ops: u64,
    wall: Duration,
    cpu: f64,
}

impl Phase {
    fn print(&self, unit: &str) {
        let secs = self.wall.as_secs_f64();
        println!(
            "{:<34} {:>12.0} {unit}/s   {:>8.2} µs CPU/op   ({} ops in {:.2} s)",
            self.name,
            self.ops as f64 / secs,
            self.cpu * 1e6 / self.ops.max(1) as f64,
            self.ops,
            secs
        );
    }
}

fn timed(
    name: &'static str,
    threads: usize,
    secs: u64,
    work: impl Fn(usize, &Rng) -> anyhow::Result<u64> + Sync,
) -> anyhow::Result<Phase> {
    let ops = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (c0, t0) = (cpu_secs(), Instant::now());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ops = &ops;
                let work = &work;
                s.spawn(move || -> anyhow::Result<()> {
                    let rng = Rng::new(t as u64 * 7919 + 1);
                    while Instant::now() < deadline {
                        ops.fetch_add(work(t, &rng)?, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("bench thread panicked"))?
        })
    })?;
    Ok(Phase {
        name,
        ops: ops.into_inner(),
        wall: t0.elapsed(),
        cpu: cpu_secs() - c0,
    })
}

/// Runs the benchmark with `args` and prints what it did and measured.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("almanac-bench-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let engine = Engine::open(
        &dir,
        Options {
            durability: Durability::Sync,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .with_context(|| format!("opening {}", dir.display()))?;
    let spec = || TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        ..TableSpec::default()
    };
    engine.create_table(INSTANCE, "load", spec())?;
    engine.create_table(INSTANCE, "writes", spec())?;
    let value = vec![0xA5u8; args.value_bytes];
    println!(
        "almanac-bench engine: {} rows of {} B values, {} s phases, {} threads, data in {}",
        args.rows,
        args.value_bytes,
        args.secs,
        args.threads,
        dir.display()
    );

    // Load in MutateRows batches of 100 (one fsync per batch).
    let (c0, t0) = (cpu_secs(), Instant::now());
    let batch = 100u64;
    let mut i = 0;
    while i < args.rows {
        let entries: Vec<RowMutations> = (i..(i + batch).min(args.rows))
            .map(|j| RowMutations {
                key: key(j),
                mutations: vec![set(&value)],
            })
            .collect();
        for r in engine.mutate_rows(INSTANCE, "load", &entries)? {
            r?;
        }
        i += batch;
    }
    let load = Phase {
        name: "load (MutateRows x100, fsync)",
        ops: args.rows,
        wall: t0.elapsed(),
        cpu: cpu_secs() - c0,
    };
    load.print("rows");

    let logical = args.rows * (key(0).len() as u64 + 2 + 1 + args.value_bytes as u64 + 8);
    engine.flush()?;
    let disk = engine.disk_space()?;
    let journal = engine.journal_space()?;
    let tables = disk.saturating_sub(journal);
    println!(
        "{:<34} {:>12.3} bytes in tables per byte written ({} MB logical, {} MB in tables, {} MB journal not yet recycled)",
        "space",
        tables as f64 / logical as f64,
        logical / 1_000_000,
        tables / 1_000_000,
        journal / 1_000_000
    );

    let written = Arc::new(AtomicU64::new(0));
    for threads in [1, args.threads] {
        let name = if threads == 1 {
            "single-row writes, 1 writer"
        } else {
            "single-row writes, N writers"
        };
        let p = timed(name, threads, args.secs, |t, rng| {
            let n = written.fetch_add(1, Ordering::Relaxed);
            let k = format!("w{t}-{n}-{}", rng.next_u64() % 1000);
            engine.mutate_row(INSTANCE, "writes", k.as_bytes(), &[set(&value)])?;
            Ok(1)
        })?;
        p.print("writes");
    }
    for threads in [1, args.threads] {
        let name = if threads == 1 {
            "point reads, 1 reader"
        } else {
            "point reads, N readers"
        };
        let p = timed(name, threads, args.secs, |_, rng| {
            let k = key(rng.next_u64() % args.rows);
            let row = engine.read_row(INSTANCE, "load", &k, None)?;
            anyhow::ensure!(row.is_some(), "row {} missing", String::from_utf8_lossy(&k));
            Ok(1)
        })?;
        p.print("reads");
    }
    for reversed in [false, true] {
        let (c0, t0) = (cpu_secs(), Instant::now());
        let (mut rows, mut bytes) = (0u64, 0u64);
        for r in engine.read_rows(
            INSTANCE,
            "load",
            ReadRequest {
                reversed,
                ..ReadRequest::default()
            },
        )? {
            let r = r?;
            rows += 1;
            bytes += r.key.len() as u64
                + r.cells
                    .iter()
                    .map(|c| c.value.len() as u64 + c.qualifier.len() as u64)
                    .sum::<u64>();
        }
        let wall = t0.elapsed().as_secs_f64();
        anyhow::ensure!(
            rows == args.rows,
            "scan saw {rows} rows, expected {}",
            args.rows
        );
        println!(
            "{:<34} {:>12.1} MB/s   {:>8.2} µs CPU/row   ({rows} rows, {:.2} s)",
            if reversed {
                "reversed scan"
            } else {
                "forward scan"
            },
            bytes as f64 / 1e6 / wall,
            (cpu_secs() - c0) * 1e6 / rows as f64,
            wall
        );
    }
    engine.shutdown()?;
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
