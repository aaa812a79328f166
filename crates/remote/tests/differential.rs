//! The time-series layer over a remote Bigtable answers exactly as over the embedded
//! engine: the same random writes (new points, late points, upserts, equal and lower
//! versions) and seal passes go to both, and every scan, window, newest point and
//! rejection must match. The remote side is an Almanac node in this process, and the
//! Cloud SDK's Go emulator (`cbtemulator`) when it is installed. Reproducible from the
//! printed seed (ALMANAC_REMOTE_SEED).
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::net::TcpListener;
use std::ops::ControlFlow;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use almanac_engine::clock::{Clock, ManualClock, SystemClock};
use almanac_engine::{Durability, Engine, Options};
use almanac_remote::RemoteStore;
use almanac_timeseries::query::scan_partials;
use almanac_timeseries::{
    Dimension, EmbeddedStore, Layout, MeasureValue, NewTable, Pattern, Point, Record, Retention,
    Selection, SharedStore, TimeSeries,
};

use common::{Backend, Dir};

const INSTANCE: &str = "projects/remote/instances/series";
const HOUR_MS: i64 = 3_600_000;
const HOSTS: [&str; 3] = ["h1", "h2", "h3"];
const EMULATOR: &str = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator";

/// xorshift64*: small and reproducible.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The Cloud SDK's emulator on a free port, killed on drop.
struct Emulator {
    addr: String,
    child: Child,
}

impl Emulator {
    fn start() -> Option<Self> {
        if !Path::new(EMULATOR).exists() {
            println!("{EMULATOR} is not installed: the emulator round is skipped");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new(EMULATOR)
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cbtemulator");
        let addr = format!("127.0.0.1:{port}");
        for _ in 0..100 {
            if std::net::TcpStream::connect(&addr).is_ok() {
                return Some(Self { addr, child });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("cbtemulator did not listen on {addr}");
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The layer over the embedded engine in `dir`.
fn embedded(dir: &Path, clock: Arc<ManualClock>) -> TimeSeries<SharedStore> {
    let engine = Engine::open(
        dir,
        Options {
            durability: Durability::None,
            clock: clock.clone(),
            sweep_interval: None,
            ..Options::default()
        },
    )
    .expect("open an engine");
    let store = EmbeddedStore::new(Arc::new(engine), INSTANCE);
    TimeSeries::open(store.shared(), clock).expect("open the layer")
}

/// The layer over the remote instance at `endpoint`.
fn remote(endpoint: &str, clock: Arc<ManualClock>) -> TimeSeries<SharedStore> {
    let store: SharedStore = Arc::new(RemoteStore::connect(INSTANCE, endpoint).expect("connect"));
    TimeSeries::open(Arc::new(store), clock).expect("open the layer over the remote store")
}

fn record(measure: &str, host: &str, time_ms: i64, version: i64, value: &str) -> Record<'static> {
    let dims = vec![Dimension::new("host".to_string(), host.to_string())];
    let mut r = if measure == "cpu" {
        Record::single(
            dims,
            "cpu".to_string(),
            "DOUBLE".to_string(),
            value.to_string(),
            time_ms,
        )
    } else {
        let values = vec![
            MeasureValue::new("a".to_string(), value.to_string(), "DOUBLE".to_string()),
            MeasureValue::new("b".to_string(), "7".to_string(), "BIGINT".to_string()),
        ];
        Record::multi(dims, "readings", values, time_ms)
    };
    r.version = Some(version);
    r
}

fn sorted(ts: &TimeSeries<SharedStore>, table: &str, sel: &Selection) -> Vec<String> {
    let mut out = Vec::new();
    ts.scan("db1", table, sel, &mut |p: Point<'_>| {
        out.push(format!("{p:?}"));
        ControlFlow::Continue(())
    })
    .expect("scan");
    out.sort();
    out
}

/// What an aggregate over whole buckets reads ([`scan_partials`]): sealed buckets by
/// their summaries, edge buckets summarized, other points as they are.
fn partials(ts: &TimeSeries<SharedStore>, table: &str, sel: &Selection) -> Vec<String> {
    let meta = ts.describe_table("db1", table).expect("describe");
    let mut out = Vec::new();
    scan_partials(ts.store().as_ref(), &meta, sel, &mut |piece| {
        out.push(format!("{piece:?}"));
        ControlFlow::Continue(())
    })
    .expect("scan_partials");
    out.sort();
    out
}

fn latest(ts: &TimeSeries<SharedStore>, table: &str, sel: &Selection) -> Vec<String> {
    let (points, _) = ts.latest("db1", table, sel).expect("latest");
    let mut out: Vec<String> = points.iter().map(|p| format!("{p:?}")).collect();
    out.sort();
    out
}

/// Both layers answer every read alike.
fn same_reads(
    pair: [&TimeSeries<SharedStore>; 2],
    table: &str,
    now_ms: i64,
    rng: &mut Rng,
    ctx: &str,
) {
    let start = now_ms - 22 * HOUR_MS + rng.below((22 * HOUR_MS) as u64) as i64;
    let window = Selection {
        measure_name: Some("cpu".into()),
        start_ns: start * 1_000_000,
        end_ns: (start + 3 * HOUR_MS) * 1_000_000,
        ..Selection::default()
    };
    let pinned = Selection {
        dimensions: vec![("host".into(), HOSTS[rng.below(3) as usize].into())],
        ..window.clone()
    };
    for sel in [Selection::default(), window, pinned] {
        let want = sorted(pair[0], table, &sel);
        assert_eq!(sorted(pair[1], table, &sel), want, "{ctx}: scan {sel:?}");
        assert_eq!(
            partials(pair[1], table, &sel),
            partials(pair[0], table, &sel),
            "{ctx}: partials {sel:?}"
        );
        assert_eq!(
            latest(pair[1], table, &sel),
            latest(pair[0], table, &sel),
            "{ctx}: latest {sel:?}"
        );
    }
}

/// A seal pass over both layers, which must seal as many buckets.
fn seal_both(pair: [&TimeSeries<SharedStore>; 2], table: &str, ctx: &str) -> u64 {
    let a = pair[0].seal("db1", table).expect("seal the reference");
    let b = pair[1]
        .seal("db1", table)
        .expect("seal over the remote store");
    assert_eq!(a.buckets, b.buckets, "{ctx}: buckets sealed");
    b.buckets
}

/// Random writes and seal passes to both layers, reads compared along the way.
fn run(endpoint: &str, pattern: Pattern, seed: u64) {
    let ctx = format!("{endpoint} {pattern:?} seed={seed}");
    let dir = Dir::new("reference");
    let clock = Arc::new(ManualClock::new(SystemClock.now_us()));
    let reference = embedded(&dir.0, clock.clone());
    let remote = remote(endpoint, clock.clone());
    let table = format!("t{}{seed}", pattern.as_str().replace('-', ""));
    for ts in [&reference, &remote] {
        if ts.describe_database("db1").is_err() {
            ts.create_database("db1", None)
                .expect("create the database");
        }
        ts.create_table(
            "db1",
            &table,
            NewTable {
                layout: Layout {
                    pattern,
                    bucket_secs: 3600,
                    reverse_time: seed % 2 == 1,
                    seal: true,
                },
                retention: Some(Retention {
                    memory_hours: 24,
                    magnetic_days: 30,
                }),
                ..NewTable::default()
            },
        )
        .expect("create the table");
    }
    let mut rng = Rng(seed | 1);
    let mut written: Vec<(String, String, i64)> = Vec::new();
    let mut sealed = 0;
    for step in 0..80 {
        match rng.below(10) {
            0 => sealed += seal_both([&reference, &remote], &table, &format!("{ctx} step {step}")),
            1 => clock.advance(rng.below(20 * 60_000_000) as i64),
            _ => {
                let now_ms = clock.now_us() / 1000;
                let records: Vec<Record> = (0..1 + rng.below(5))
                    .map(|_| {
                        let age = match rng.below(4) {
                            0 => rng.below((20 * HOUR_MS) as u64),
                            _ => rng.below((2 * HOUR_MS) as u64),
                        } as i64;
                        let fresh = (
                            if rng.below(2) == 0 { "cpu" } else { "readings" }.to_string(),
                            HOSTS[rng.below(3) as usize].to_string(),
                            (now_ms - age) / 1000 * 1000,
                        );
                        let key = match rng.below(3) {
                            0 if !written.is_empty() => {
                                written[rng.below(written.len() as u64) as usize].clone()
                            }
                            _ => fresh,
                        };
                        written.push(key.clone());
                        let value = format!("{}.5", rng.below(4));
                        record(&key.0, &key.1, key.2, 1 + rng.below(3) as i64, &value)
                    })
                    .collect();
                let a = reference.write_records("db1", &table, None, &records);
                let b = remote.write_records("db1", &table, None, &records);
                assert_eq!(
                    format!("{b:?}"),
                    format!("{a:?}"),
                    "{ctx} step {step}: write outcome"
                );
            }
        }
        if step % 20 == 19 {
            same_reads(
                [&reference, &remote],
                &table,
                clock.now_us() / 1000,
                &mut rng,
                &ctx,
            );
        }
    }
    clock.advance(2 * HOUR_MS * 1000);
    sealed += seal_both([&reference, &remote], &table, &format!("{ctx} last"));
    assert!(sealed > 0, "{ctx}: nothing was sealed");
    same_reads(
        [&reference, &remote],
        &table,
        clock.now_us() / 1000,
        &mut rng,
        &ctx,
    );
    // The table goes away remotely with its rows.
    remote
        .delete_table("db1", &table)
        .expect("delete over the remote store");
    assert!(
        remote.describe_table("db1", &table).is_err(),
        "{ctx}: deleted"
    );
}

fn seed() -> u64 {
    let seed = std::env::var("ALMANAC_REMOTE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7e40_u64);
    println!("seed {seed} (ALMANAC_REMOTE_SEED reproduces a run)");
    seed
}

#[test]
fn the_layer_over_an_almanac_node_answers_as_over_the_engine() {
    let backend = Backend::start();
    let seed = seed();
    for (i, pattern) in Pattern::ALL.into_iter().enumerate() {
        run(&backend.addr.to_string(), pattern, seed + i as u64);
    }
    drop(backend);
}

#[test]
fn the_layer_over_the_go_emulator_answers_as_over_the_engine() {
    let Some(emulator) = Emulator::start() else {
        return;
    };
    let seed = seed();
    for (i, pattern) in Pattern::ALL.into_iter().enumerate() {
        run(&emulator.addr, pattern, seed + i as u64);
    }
}
