//! `almanac-bench keyvis`: what Key Visualizer's access counters cost, in process.
//!
//! Steps:
//! 1. Open two embedded engines on one simulated clock: counters on and counters off
//!    ([`almanac_engine::Options::count_access`]), each with one table `kv` of one
//!    family, preloaded with `--keys` rows.
//! 2. `--minutes` simulated minutes. In each, both engines (taking turns which goes
//!    first) take `--ops` single-row writes, then `--ops` point reads, of random keys;
//!    this process's CPU time is summed per engine and operation. Then the clock moves
//!    a minute and each engine closes its step ([`Engine::roll_access`]).
//! 3. Print CPU per write and per read with counters on and off, and what the counters
//!    keep for the table ([`Engine::access_footprint`]): ranges, stored bytes per day
//!    (the stored steps' bytes scaled to 1,440 minutes), memory.

use std::sync::Arc;

use almanac_engine::access::STEP_MS;
use almanac_engine::clock::{ManualClock, Rng};
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilySpec, TableSpec};
use almanac_engine::{Durability, Engine, Options};

use crate::measure::process_cpu_secs;

const INSTANCE: &str = "projects/bench/instances/keyvis";
const TABLE: &str = "kv";

/// Flags of `almanac-bench keyvis`.
#[derive(Debug, clap::Args)]
pub struct KeyvisArgs {
    /// Rows preloaded, and the key space of the timed operations.
    #[arg(long, default_value_t = 200_000)]
    keys: u64,
    /// Simulated minutes.
    #[arg(long, default_value_t = 20)]
    minutes: u64,
    /// Writes, and reads, per engine per minute.
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
}

fn key(i: u64) -> Vec<u8> {
    format!("device#{:08}#reading", i).into_bytes()
}

fn open(
    dir: &std::path::Path,
    clock: &Arc<ManualClock>,
    count_access: bool,
) -> anyhow::Result<Engine> {
    let e = Engine::open(
        dir,
        Options {
            durability: Durability::None,
            sweep_interval: None,
            clock: Arc::clone(clock) as _,
            count_access,
            ..Options::default()
        },
    )?;
    e.create_table(
        INSTANCE,
        TABLE,
        TableSpec {
            families: vec![("cf".into(), FamilySpec::default())],
            ..TableSpec::default()
        },
    )?;
    Ok(e)
}

fn set(value: &[u8]) -> Mutation {
    Mutation::SetCell {
        family: "cf".into(),
        qualifier: b"q".to_vec(),
        timestamp_us: 1000,
        value: value.to_vec(),
    }
}

/// CPU seconds of `ops` writes and of `ops` reads of random keys.
fn minute(e: &Engine, rng: &Rng, args: &KeyvisArgs, value: &[u8]) -> anyhow::Result<(f64, f64)> {
    let me = std::process::id();
    let t0 = process_cpu_secs(me)?;
    for _ in 0..args.ops {
        let k = key(rng.next_u64() % args.keys);
        e.mutate_row(INSTANCE, TABLE, &k, &[set(value)])?;
    }
    let t1 = process_cpu_secs(me)?;
    for _ in 0..args.ops {
        let k = key(rng.next_u64() % args.keys);
        let _ = e.read_row(INSTANCE, TABLE, &k, None)?;
    }
    let t2 = process_cpu_secs(me)?;
    Ok((t1 - t0, t2 - t1))
}

/// Runs the benchmark and prints its numbers.
pub fn run(args: KeyvisArgs) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let clock = Arc::new(ManualClock::new(1_764_237_600_000_000));
    let on = open(&dir.path().join("on"), &clock, true)?;
    let off = open(&dir.path().join("off"), &clock, false)?;
    let value = vec![b'v'; args.value_bytes];
    for e in [&on, &off] {
        for chunk in (0..args.keys).collect::<Vec<_>>().chunks(1000) {
            let rows: Vec<almanac_engine::RowMutations> = chunk
                .iter()
                .map(|&i| almanac_engine::RowMutations {
                    key: key(i),
                    mutations: vec![set(&value)],
                })
                .collect();
            e.mutate_rows(INSTANCE, TABLE, &rows)?;
        }
    }
    let rng = Rng::new(7);
    let (mut w_on, mut r_on, mut w_off, mut r_off) = (0.0, 0.0, 0.0, 0.0);
    for m in 0..args.minutes {
        let order: [(&Engine, bool); 2] = if m % 2 == 0 {
            [(&on, true), (&off, false)]
        } else {
            [(&off, false), (&on, true)]
        };
        for (e, counted) in order {
            let (w, r) = minute(e, &rng, &args, &value)?;
            if counted {
                w_on += w;
                r_on += r;
            } else {
                w_off += w;
                r_off += r;
            }
        }
        clock.advance(STEP_MS * 1000);
        on.roll_access(false)?;
        off.roll_access(false)?;
    }
    let n = (args.ops * args.minutes) as f64;
    let us = |s: f64| s / n * 1e6;
    println!(
        "keyvis: {} rows, {} simulated minutes, {} writes and {} reads per engine per minute",
        args.keys, args.minutes, args.ops, args.ops
    );
    println!(
        "  single-row write: {:.2} µs CPU with counters, {:.2} µs without ({:+.2} µs, {:+.1}%)",
        us(w_on),
        us(w_off),
        us(w_on) - us(w_off),
        (w_on / w_off - 1.0) * 100.0
    );
    println!(
        "  point read:       {:.2} µs CPU with counters, {:.2} µs without ({:+.2} µs, {:+.1}%)",
        us(r_on),
        us(r_off),
        us(r_on) - us(r_off),
        (r_on / r_off - 1.0) * 100.0
    );
    let f = on.access_footprint(INSTANCE, TABLE)?;
    let per_day = f.stored_bytes as f64 / f.steps.max(1) as f64 * 1440.0;
    println!(
        "  footprint: {} key ranges, {} steps stored in {} bytes ({:.1} MB a day at this activity), {} KiB in memory",
        f.ranges,
        f.steps,
        f.stored_bytes,
        per_day / 1e6,
        f.memory_bytes / 1024
    );
    on.shutdown()?;
    off.shutdown()?;
    Ok(())
}
