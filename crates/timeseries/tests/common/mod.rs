//! Helpers shared by the time-series integration tests: a service on a temporary
//! engine with a manual clock, tables of every pattern, records, and sorted scans.
#![allow(dead_code, reason = "each test file uses its own subset")]

pub use std::ops::ControlFlow;
use std::path::Path;
pub use std::sync::Arc;

pub use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options};
pub use almanac_timeseries::{
    Dimension, EmbeddedStore, Error, Layout, MeasureValue, Measures, NewTable, Pattern, Point,
    Record, Retention, Selection, SharedStore, TimeSeries, Value,
};

pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `HOST:PORT` of a Bigtable (another `almanac serve`, or the Cloud SDK's emulator) the
/// fixtures keep their tables in, one instance each, instead of an embedded engine.
pub const REMOTE_ENV: &str = "ALMANAC_TEST_BIGTABLE";

/// The fixtures' starting time: 2023-11-14T22:13:20Z on an embedded engine; over a
/// remote Bigtable, the present whole second, since the remote judges cell ages by its
/// own clock.
pub fn now_ms() -> i64 {
    static NOW: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *NOW.get_or_init(|| match std::env::var(REMOTE_ENV) {
        Ok(_) => {
            use almanac_engine::clock::Clock;
            almanac_engine::clock::SystemClock.now_us() / 1_000_000 * 1000
        }
        Err(_) => 1_700_000_000_000,
    })
}

pub struct Fixture {
    pub ts: TimeSeries<SharedStore>,
    pub clock: Arc<ManualClock>,
    pub _dir: tempdir::Dir,
}

pub mod tempdir {
    //! A temporary directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new(tag: &str) -> Self {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let p =
                std::env::temp_dir().join(format!("almanac-ts-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn open_at(path: &Path, clock: Arc<ManualClock>) -> Result<TimeSeries<SharedStore>> {
    if let Ok(endpoint) = std::env::var(REMOTE_ENV) {
        // One instance a fixture directory: a reopen finds the same tables.
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let instance = format!("projects/test/instances/{name}");
        let store =
            almanac_remote::RemoteStore::connect(&instance, &endpoint)?.with_clock(clock.clone());
        let store: SharedStore = Arc::new(store);
        return Ok(TimeSeries::open(Arc::new(store), clock)?);
    }
    let options = || Options {
        durability: Durability::None,
        clock: clock.clone(),
        sweep_interval: None,
        ..Options::default()
    };
    // A just-dropped engine releases its directory lock when fjall's background
    // threads finish; wait for that rather than fail the reopen.
    let mut engine = Engine::open(path, options());
    for _ in 0..500 {
        match &engine {
            Err(almanac_engine::Error::Storage(m)) if m.contains("Locked") => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                engine = Engine::open(path, options());
            }
            _ => break,
        }
    }
    let store = EmbeddedStore::new(Arc::new(engine?), almanac_timeseries::DEFAULT_INSTANCE);
    Ok(TimeSeries::open(store.shared(), clock)?)
}

pub fn fixture(tag: &str) -> Result<Fixture> {
    let dir = tempdir::Dir::new(tag);
    let clock = Arc::new(ManualClock::new(now_ms() * 1000));
    let ts = open_at(&dir.0, clock.clone())?;
    Ok(Fixture {
        ts,
        clock,
        _dir: dir,
    })
}

pub fn table(f: &Fixture, pattern: Pattern, reverse_time: bool) -> Result<String> {
    let name = format!(
        "{}{}",
        pattern.as_str(),
        if reverse_time { "-rev" } else { "" }
    );
    if f.ts.describe_database("db1").is_err() {
        f.ts.create_database("db1", None)?;
    }
    f.ts.create_table(
        "db1",
        &name,
        NewTable {
            layout: Layout {
                pattern,
                bucket_secs: 3600,
                reverse_time,
                seal: true,
            },
            retention: Some(Retention {
                memory_hours: 24,
                magnetic_days: 30,
            }),
            ..NewTable::default()
        },
    )?;
    Ok(name)
}

pub fn dims(pairs: &[(&str, &str)]) -> Vec<Dimension<'static>> {
    pairs
        .iter()
        .map(|(n, v)| Dimension::new(n.to_string(), v.to_string()))
        .collect()
}

pub fn single(
    d: &[(&str, &str)],
    measure: &str,
    kind: &str,
    value: &str,
    time_ms: i64,
) -> Record<'static> {
    Record::single(
        dims(d),
        measure.to_string(),
        kind.to_string(),
        value.to_string(),
        time_ms,
    )
}

pub fn multi(d: &[(&str, &str)], values: &[(&str, &str, &str)], time_ms: i64) -> Record<'static> {
    let values = values
        .iter()
        .map(|(n, v, k)| MeasureValue::new(n.to_string(), v.to_string(), k.to_string()))
        .collect();
    Record::multi(dims(d), "readings", values, time_ms)
}

pub fn all(
    ts: &TimeSeries<SharedStore>,
    table: &str,
    sel: &Selection,
) -> Result<Vec<Point<'static>>> {
    let mut out = Vec::new();
    ts.scan("db1", table, sel, &mut |p| {
        out.push(p);
        ControlFlow::Continue(())
    })?;
    out.sort_by(|a, b| {
        (&a.measure_name, &a.dimensions, a.time_ns).cmp(&(
            &b.measure_name,
            &b.dimensions,
            b.time_ns,
        ))
    });
    Ok(out)
}

pub fn rejected(
    r: std::result::Result<almanac_timeseries::Ingested, Error>,
) -> Vec<(usize, Option<i64>)> {
    match r {
        Err(Error::Rejected(v)) => v.iter().map(|r| (r.index, r.existing_version)).collect(),
        other => panic!("expected rejections, got {other:?}"),
    }
}
