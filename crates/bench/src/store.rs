//! Opening an embedded store for the in-process benchmarks: the engine in a scratch
//! directory, no background sweeper, and the time-series layer over it.

use std::path::Path;
use std::sync::Arc;

use almanac_engine::clock::{Clock, SystemClock};
use almanac_engine::{Durability, Engine, Options};
use almanac_timeseries::{EmbeddedStore, SharedStore, TimeSeries};

/// An embedded engine in `dir` with the fsync policy `durability` and no background
/// sweeper, and the time-series layer over it with its tables in `instance`.
pub fn open_embedded(
    dir: &Path,
    instance: &str,
    durability: Durability,
) -> anyhow::Result<(Arc<Engine>, TimeSeries<SharedStore>)> {
    open_embedded_at(dir, instance, durability, Arc::new(SystemClock))
}

/// [`open_embedded`] on `clock` (tests pin "now").
pub fn open_embedded_at(
    dir: &Path,
    instance: &str,
    durability: Durability,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<(Arc<Engine>, TimeSeries<SharedStore>)> {
    let engine = Arc::new(Engine::open(
        dir,
        Options {
            durability,
            clock: Arc::clone(&clock),
            sweep_interval: None,
            ..Options::default()
        },
    )?);
    let store = EmbeddedStore::new(Arc::clone(&engine), instance);
    let ts = TimeSeries::open(store.shared(), clock)?;
    Ok((engine, ts))
}
