//! What the SQL integration tests share: a temporary engine with its time-series layer,
//! and record builders.
#![allow(dead_code, reason = "each test binary uses part of this")]

use std::path::PathBuf;
use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options};
use almanac_timeseries::{Dimension, EmbeddedStore, MeasureValue, Record, SharedStore, TimeSeries};

pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An engine in a fresh directory, its clock at `now_ms`, and the time-series layer.
pub fn open(
    tag: &str,
    now_ms: i64,
) -> Result<(Arc<Engine>, Arc<TimeSeries<SharedStore>>, TempDir)> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir =
        TempDir(std::env::temp_dir().join(format!("almanac-sql-{tag}-{}-{n}", std::process::id())));
    let clock = Arc::new(ManualClock::new(now_ms * 1000));
    let engine = Arc::new(Engine::open(
        &dir.0,
        Options {
            durability: Durability::None,
            clock: clock.clone(),
            sweep_interval: None,
            ..Options::default()
        },
    )?);
    let store = EmbeddedStore::new(engine.clone(), almanac_timeseries::DEFAULT_INSTANCE);
    let ts = Arc::new(TimeSeries::open(store.shared(), clock)?);
    Ok((engine, ts, dir))
}

pub fn dims(pairs: &[(&str, &str)]) -> Vec<Dimension<'static>> {
    pairs
        .iter()
        .map(|(n, v)| Dimension::new(n.to_string(), v.to_string()))
        .collect()
}

/// A MULTI record of measure `measure` with `(name, value, type)` attributes.
pub fn multi(
    d: &[(&str, &str)],
    measure: &str,
    values: &[(&str, String, &str)],
    time_ms: i64,
) -> Record<'static> {
    let values = values
        .iter()
        .map(|(n, v, k)| MeasureValue::new(n.to_string(), v.clone(), k.to_string()))
        .collect();
    Record::multi(dims(d), measure.to_string(), values, time_ms)
}

/// A single-measure record.
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

/// The rows of a result, one line each (`NULL` for nulls), sorted.
pub fn rows(batches: &[datafusion::arrow::record_batch::RecordBatch]) -> Result<Vec<String>> {
    rows_with(batches, |_, _| None)
}

/// [`rows`], with the cells `cell` gives text for (column, row) written its way.
pub fn rows_with(
    batches: &[datafusion::arrow::record_batch::RecordBatch],
    cell: impl Fn(&datafusion::arrow::array::ArrayRef, usize) -> Option<String>,
) -> Result<Vec<String>> {
    use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
    use std::fmt::Write as _;
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let mut line = String::new();
            for c in b.columns() {
                match cell(c, r) {
                    Some(text) => write!(line, "{text} | ")?,
                    None => write!(
                        line,
                        "{} | ",
                        ArrayFormatter::try_new(c, &options)?.value(r)
                    )?,
                }
            }
            rows.push(line);
        }
    }
    rows.sort();
    Ok(rows)
}
