//! A node: everything `almanac serve` runs, assembled in one place so the binary only
//! parses flags and tests can start a whole server in process.
//!
//! ## A node's life, step by step
//! 1. [`Node::start`] creates the server's metrics and binds the Bigtable gRPC
//!    listener, the Timestream HTTP listener and the console's (a taken port fails
//!    before anything is opened), then opens the data directory (the engine replays its
//!    journal on the blocking pool), the time-series catalog and the SQL engine over
//!    them. Nothing is served yet, so a caller can report the bound addresses (port 0
//!    picks free ones).
//! 2. [`Node::run`] serves the listeners and runs the background passes: the engine's
//!    GC sweep (its own thread, every [`NodeConfig::sweep_interval`]), the sealing of
//!    closed time-series buckets (every [`NodeConfig::seal_interval`], on the blocking
//!    pool), and every [`ROLL_ACCESS_SECS`] the closing of Key Visualizer's minutes and
//!    the metrics' upkeep.
//! 3. When the shutdown future resolves, the listeners stop accepting, requests in
//!    flight finish, a seal pass under way finishes, Key Visualizer's minute under way
//!    is saved, and the engine flushes its memtables and journal before `run`
//!    returns.
//!
//! [`compact`] is the offline counterpart: on a stopped server's directory it seals
//! closed buckets and rewrites the tables into one sorted run.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use almanac_console::Metrics;
use almanac_engine::clock::{Clock, SystemClock};
use almanac_engine::warning::WarningSink;
use almanac_engine::{Durability, Engine, Options};
use almanac_sql::{BigtableSources, SqlEngine};
use almanac_timeseries::{DEFAULT_INSTANCE, EmbeddedStore, SealStats, SharedStore, TimeSeries};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::{Bound, ServeError};

/// Default seconds between background GC sweeps.
pub const DEFAULT_SWEEP_SECS: u64 = 60;
/// Default seconds between passes that seal closed time-series buckets into blocks.
pub const DEFAULT_SEAL_SECS: u64 = 60;
/// Default seconds a closed bucket must go unwritten before a background pass seals it:
/// a backfill keeps writing the hour it is loading, and sealing that hour under it
/// would make each later write rewrite the block (the TSBS day loaded 6.5x slower).
pub const DEFAULT_SEAL_QUIET_SECS: u64 = 60;

/// What a node opens and where it listens.
#[derive(Clone)]
pub struct NodeConfig {
    /// The data directory (created on first start).
    pub data_dir: PathBuf,
    /// The Bigtable gRPC listener (`BIGTABLE_EMULATOR_HOST`).
    pub grpc_addr: SocketAddr,
    /// The Timestream-compatible HTTP listener (boto3's `endpoint_url`).
    pub timestream_addr: SocketAddr,
    /// When an acknowledged write is on disk.
    pub durability: Durability,
    /// Time between background GC sweeps.
    pub sweep_interval: Duration,
    /// Time between seal passes; `None` never seals in the background.
    pub seal_interval: Option<Duration>,
    /// How long a closed bucket must go unwritten before a background pass seals it.
    pub seal_quiet: Duration,
    /// How long a deleted table can be undeleted (its cells stay on disk that long).
    pub undelete_window: Duration,
    /// Where warnings about recommended limits go; `None` drops them.
    pub on_warning: Option<WarningSink>,
    /// The Timestream endpoint's address as clients should reach it, answered by
    /// DescribeEndpoints (`host:port`, or a URL with its scheme); `None`: the bound
    /// address ([`crate::timestream::advertised`]).
    pub timestream_advertise: Option<String>,
    /// The directory that stands in for S3: bucket `B` is its subdirectory `B`.
    /// Batch loads read there and error reports of scheduled queries and batch loads
    /// are written there. `None`: [`BUCKETS_DIR`] under the data directory.
    pub bucket_dir: Option<PathBuf>,
    /// The console's listener (pages, JSON API, `/metrics`); `None`: no console.
    pub console_addr: Option<SocketAddr>,
    /// Count reads and writes by key range for Key Visualizer.
    pub key_visualizer: bool,
    /// What one SQL query, and all of them together, may take.
    pub query_limits: almanac_sql::QueryLimits,
    /// The certificate and key every listener serves TLS with; plain text without.
    pub tls: Option<almanac_console::TlsIdentity>,
    /// Free space the data directory's filesystem keeps: data writes are refused
    /// below it.
    pub min_free_bytes: u64,
    /// Where the time-series layer keeps its tables (the Timestream endpoint, its SQL,
    /// scheduled queries and batch loads): a remote Bigtable's store, or `None` for
    /// the embedded engine in the data directory.
    pub series_store: Option<SharedStore>,
    /// The time the engine judges cell ages by and the time-series layer stamps and
    /// windows with (tests run a node at a fixed instant).
    pub clock: Arc<dyn Clock>,
    /// With a remote store: the Bigtable APIs on `grpc_addr` pass every call to the
    /// remote instance ([`crate::serve_forwarded`]) instead of serving the engine.
    pub forward_bigtable: Option<almanac_remote::forward::Forwarder>,
}

/// The bucket directory under a data directory, by default.
pub const BUCKETS_DIR: &str = "buckets";

impl NodeConfig {
    /// A node over `data_dir` on the given addresses, with the default durability
    /// (`sync`), sweep and seal intervals, and no warning sink.
    pub fn new(data_dir: PathBuf, grpc_addr: SocketAddr, timestream_addr: SocketAddr) -> Self {
        Self {
            data_dir,
            grpc_addr,
            timestream_addr,
            durability: Durability::Sync,
            sweep_interval: Duration::from_secs(DEFAULT_SWEEP_SECS),
            seal_interval: Some(Duration::from_secs(DEFAULT_SEAL_SECS)),
            seal_quiet: Duration::from_secs(DEFAULT_SEAL_QUIET_SECS),
            undelete_window: Duration::from_secs(
                almanac_engine::limits::DEFAULT_UNDELETE_WINDOW_SECS,
            ),
            on_warning: None,
            timestream_advertise: None,
            bucket_dir: None,
            console_addr: None,
            key_visualizer: true,
            query_limits: almanac_sql::QueryLimits::default(),
            tls: None,
            min_free_bytes: almanac_engine::limits::DEFAULT_MIN_FREE_DISK_BYTES,
            series_store: None,
            clock: Arc::new(SystemClock),
            forward_bigtable: None,
        }
    }
}

/// An opened store with both listeners bound; [`Node::run`] serves them.
pub struct Node {
    engine: Engine,
    ts: Arc<TimeSeries<SharedStore>>,
    sql: Arc<SqlEngine>,
    scheduled: Arc<almanac_jobs::ScheduledQueries>,
    batch: Arc<almanac_jobs::BatchLoads>,
    grpc: Bound,
    grpc_addr: SocketAddr,
    timestream: TcpListener,
    timestream_addr: SocketAddr,
    timestream_advertise: String,
    seal_interval: Option<Duration>,
    seal_quiet: Duration,
    compact_after_seal: bool,
    console: Option<(TcpListener, SocketAddr)>,
    data_dir: PathBuf,
    metrics: Arc<Metrics>,
    tls: Option<almanac_console::TlsIdentity>,
    gate: Arc<crate::auth::Gate>,
    forward_bigtable: Option<almanac_remote::forward::Forwarder>,
}

/// Seconds between two closings of Key Visualizer's steps ([`Engine::roll_access`]).
const ROLL_ACCESS_SECS: u64 = 5;

impl Node {
    /// Opens the store in `config.data_dir` and binds both listeners. Call it inside
    /// a multi-threaded tokio runtime: SQL and the Timestream endpoint run on it.
    pub async fn start(config: NodeConfig) -> Result<Self, ServeError> {
        let NodeConfig {
            data_dir,
            grpc_addr,
            timestream_addr,
            durability,
            sweep_interval,
            seal_interval,
            seal_quiet,
            undelete_window,
            on_warning,
            timestream_advertise,
            bucket_dir,
            console_addr,
            key_visualizer,
            query_limits,
            tls,
            min_free_bytes,
            series_store,
            clock,
            forward_bigtable,
        } = config;
        // Sealing deletes rows of the embedded engine only when the series live there.
        let compact_after_seal = series_store.is_none();
        let metrics = Metrics::new();
        let gate = crate::auth::Gate::open(&data_dir)?;
        let data_dir_shown = data_dir.clone();
        let bucket_dir = bucket_dir.unwrap_or_else(|| data_dir.join(BUCKETS_DIR));
        let options = Options {
            durability,
            sweep_interval: Some(sweep_interval.max(Duration::from_secs(1))),
            undelete_window,
            on_warning,
            clock: clock.clone(),
            count_access: key_visualizer,
            min_free_bytes,
            on_sync: Some({
                let m = Arc::clone(&metrics);
                Arc::new(move |took| m.group_commit(took))
            }),
            ..Options::default()
        };
        // Listeners first: a taken port fails before a long journal replay.
        let bind_error = |addr| move |source| ServeError::Bind { addr, source };
        let grpc = crate::bind(grpc_addr).await?;
        let grpc_addr = grpc.local_addr().map_err(bind_error(grpc_addr))?;
        let timestream = TcpListener::bind(timestream_addr)
            .await
            .map_err(bind_error(timestream_addr))?;
        let timestream_addr = timestream
            .local_addr()
            .map_err(bind_error(timestream_addr))?;
        let console = match console_addr {
            Some(addr) => {
                let l = TcpListener::bind(addr).await.map_err(bind_error(addr))?;
                let bound = l.local_addr().map_err(bind_error(addr))?;
                Some((l, bound))
            }
            None => None,
        };
        let (engine, ts, sql, scheduled, batch) = tokio::task::spawn_blocking(move || {
            let remote = series_store.clone();
            let (engine, ts) = open_store(&data_dir, options, series_store, clock.clone())?;
            // A remote instance's Bigtable tables are read from it, others from the engine.
            let mut tables = BigtableSources::embedded(Arc::new(engine.clone()));
            if let Some(store) = remote {
                tables = tables.with_remote(store);
            }
            let sql = Arc::new(SqlEngine::over(tables, ts.clone())?.with_limits(query_limits));
            let scheduled = Arc::new(almanac_jobs::ScheduledQueries::open(
                sql.clone(),
                ts.clone(),
                clock.clone(),
                bucket_dir.clone(),
            )?);
            let batch = Arc::new(almanac_jobs::BatchLoads::open(
                ts.clone(),
                clock.clone(),
                bucket_dir,
            )?);
            Ok::<_, ServeError>((engine, ts, sql, scheduled, batch))
        })
        .await??;
        gate.consult_policies(engine.clone());
        Ok(Self {
            engine,
            ts,
            sql,
            scheduled,
            batch,
            grpc,
            grpc_addr,
            timestream,
            timestream_addr,
            timestream_advertise: crate::timestream::advertised(
                timestream_advertise.as_deref(),
                timestream_addr,
                tls.is_some(),
            ),
            seal_interval,
            seal_quiet,
            compact_after_seal,
            console,
            data_dir: data_dir_shown,
            metrics,
            tls,
            gate,
            forward_bigtable,
        })
    }

    /// The bound console address, if the node serves a console.
    pub fn console_addr(&self) -> Option<SocketAddr> {
        self.console.as_ref().map(|(_, a)| *a)
    }

    /// The bound Bigtable gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The bound Timestream HTTP address.
    pub fn timestream_addr(&self) -> SocketAddr {
        self.timestream_addr
    }

    /// Serves until `shutdown` resolves, then finishes what is in flight and flushes
    /// the engine.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let sealer = tokio::spawn(seal_periodically(
            self.compact_after_seal.then(|| self.engine.clone()),
            self.ts.clone(),
            self.seal_interval,
            self.seal_quiet,
            Arc::clone(&self.metrics),
            stop_rx.clone(),
        ));
        let roller = tokio::spawn(roll_access_periodically(
            self.engine.clone(),
            Arc::clone(&self.metrics),
            stop_rx.clone(),
        ));
        let console = self.console.map(|(listener, _)| {
            let console = Arc::new(almanac_console::Console {
                engine: self.engine.clone(),
                ts: self.ts.clone(),
                sql: self.sql.clone(),
                metrics: Arc::clone(&self.metrics),
                data_dir: self.data_dir.clone(),
                default_instance: crate::DEFAULT_CONSOLE_INSTANCE.to_owned(),
                gatekeeper: Arc::clone(&self.gate) as Arc<dyn almanac_console::Gatekeeper>,
                backup_files: vec![self.data_dir.join(almanac_auth::PRINCIPALS_FILE)],
            });
            tokio::spawn(almanac_console::serve(
                console,
                listener,
                self.tls.clone(),
                stopped(stop_rx.clone()),
            ))
        });
        let http = tokio::spawn(crate::timestream::serve(
            self.ts,
            self.sql.clone(),
            self.scheduled,
            self.batch,
            self.timestream,
            self.tls.clone(),
            Arc::clone(&self.gate),
            self.timestream_advertise,
            Arc::clone(&self.metrics),
            stopped(stop_rx),
        ));
        let stop = &stop_tx;
        let shutdown = async move {
            shutdown.await;
            let _ = stop.send(true);
        };
        let grpc = match &self.forward_bigtable {
            Some(forwarder) => {
                crate::serve_forwarded(
                    forwarder,
                    self.grpc,
                    self.tls.as_ref(),
                    &self.gate,
                    self.metrics,
                    shutdown,
                )
                .await
            }
            None => {
                crate::serve(
                    self.engine.clone(),
                    self.sql,
                    self.grpc,
                    self.tls.as_ref(),
                    &self.gate,
                    self.metrics,
                    shutdown,
                )
                .await
            }
        };
        // gRPC also ends on a transport failure: stop the rest too, and flush whatever
        // happened before reporting the first failure.
        let _ = stop_tx.send(true);
        let http = http.await;
        let sealer = sealer.await;
        let roller = roller.await;
        let console = match console {
            Some(c) => Some(c.await),
            None => None,
        };
        let engine = self.engine;
        let flushed = tokio::task::spawn_blocking(move || {
            // Key Visualizer's minute under way is history for display: a failure to
            // keep it is reported, and never stands in the way of the flush.
            if let Err(e) = engine.roll_access(true) {
                eprintln!("almanac: saving access counters failed: {e}");
            }
            engine.shutdown()
        })
        .await;
        grpc?;
        http?.map_err(ServeError::Timestream)?;
        if let Some(c) = console {
            c?.map_err(ServeError::Console)?;
        }
        sealer?;
        roller?;
        Ok(flushed??)
    }
}

/// The engine over `dir`, and the time-series layer over `series_store` or the engine.
fn open_store(
    dir: &Path,
    options: Options,
    series_store: Option<SharedStore>,
    clock: Arc<dyn Clock>,
) -> Result<(Engine, Arc<TimeSeries<SharedStore>>), ServeError> {
    let engine = Engine::open(dir, options).map_err(|source| ServeError::Open {
        dir: dir.to_path_buf(),
        source,
    })?;
    let store: SharedStore = series_store.unwrap_or_else(|| {
        Arc::new(EmbeddedStore::new(
            Arc::new(engine.clone()),
            DEFAULT_INSTANCE,
        ))
    });
    let ts = Arc::new(TimeSeries::open(Arc::new(store), clock)?);
    Ok((engine, ts))
}

/// Compact once the row-form bytes sealing deleted since the last compaction reach
/// 1/this of the store: compaction costs the store's size, so it runs after deletions
/// of a proportional size, and its cost per sealed point stays bounded.
const COMPACT_WHEN_DELETED_FRACTION: u64 = 4;

/// Seals the closed buckets of every time-series table every `interval`, until `stop`
/// turns true (a pass under way finishes first). A failed pass is reported on stderr
/// and retried at the next interval.
///
/// A seal deletes the row-form cells of its buckets, and each deletion leaves a marker
/// that every read of the range walks until a compaction drops it (double-groupby-1 on
/// a sealed TSBS day took 4.5× longer through them; docs/benchmarks.md). So once the row-form bytes
/// deleted since the last compaction make up a quarter of the store, the engine
/// flushes and compacts after the pass, which also empties the journal.
async fn seal_periodically(
    engine: Option<Engine>,
    ts: Arc<TimeSeries<SharedStore>>,
    interval: Option<Duration>,
    quiet: Duration,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(interval) = interval else {
        return;
    };
    let mut deleted_bytes = 0u64;
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let ts = ts.clone();
        let engine = engine.clone();
        let metrics = Arc::clone(&metrics);
        let pass = tokio::task::spawn_blocking(move || {
            let sealed = ts.seal_all_quiet(quiet)?;
            metrics.seal_pass(sealed.points);
            let deleted = deleted_bytes.saturating_add(sealed.bytes_removed);
            // A remote store compacts by itself: only the embedded engine is compacted.
            let store = match &engine {
                Some(engine) => engine
                    .disk_space()
                    .map_err(almanac_timeseries::Error::from)?,
                None => u64::MAX,
            };
            let compact =
                deleted > 0 && deleted.saturating_mul(COMPACT_WHEN_DELETED_FRACTION) >= store;
            if sealed.buckets > 0 && engine.is_some() {
                eprintln!(
                    "almanac: sealed {} closed buckets ({} points, {} row-form bytes deleted; {deleted} since the last compaction, store {store} bytes{})",
                    sealed.buckets,
                    sealed.points,
                    sealed.bytes_removed,
                    if compact { "; compacting" } else { "" }
                );
            } else if sealed.buckets > 0 {
                eprintln!(
                    "almanac: sealed {} closed buckets ({} points, {} row-form bytes deleted)",
                    sealed.buckets, sealed.points, sealed.bytes_removed,
                );
            }
            if let (true, Some(engine)) = (compact, &engine) {
                engine.compact().map_err(almanac_timeseries::Error::from)?;
                metrics.compaction();
                return Ok(0);
            }
            Ok::<_, almanac_timeseries::Error>(deleted)
        });
        match pass.await {
            Ok(Ok(d)) => deleted_bytes = d,
            Ok(Err(e)) => eprintln!("almanac: sealing closed buckets failed: {e}"),
            Err(e) => eprintln!("almanac: sealing closed buckets failed: {e}"),
        }
    }
}

/// Every [`ROLL_ACCESS_SECS`] until `stop` turns true: closes Key Visualizer's steps
/// whose minute has passed, and drains the metrics' histogram samples (kept until
/// then, scraped or not). A failure is reported on stderr.
async fn roll_access_periodically(
    engine: Engine,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(ROLL_ACCESS_SECS)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let engine = engine.clone();
        let metrics = Arc::clone(&metrics);
        let pass = tokio::task::spawn_blocking(move || {
            metrics.upkeep();
            engine.roll_access(false)
        });
        match pass.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("almanac: saving access counters failed: {e}"),
            Err(e) => eprintln!("almanac: saving access counters failed: {e}"),
        }
    }
}

/// What [`compact`] did.
#[derive(Debug, Clone, Copy)]
pub struct Compaction {
    /// Closed buckets sealed first.
    pub sealed: SealStats,
    /// Bytes of the directory before.
    pub bytes_before: u64,
    /// Bytes of the directory after.
    pub bytes_after: u64,
    /// Of those, bytes in the journal.
    pub journal_bytes: u64,
}

/// Opens a stopped server's data directory, seals the closed buckets of time-series
/// tables, rewrites the cell tables into one sorted run (dropping overwritten,
/// deleted and collected data) and closes it.
pub fn compact(dir: &Path) -> Result<Compaction, ServeError> {
    let options = Options {
        sweep_interval: None,
        ..Options::default()
    };
    let (engine, ts) = open_store(dir, options, None, Arc::new(SystemClock))?;
    let bytes_before = engine.disk_space()?;
    let sealed = ts.seal_all()?;
    engine.compact()?;
    let bytes_after = engine.disk_space()?;
    let journal_bytes = engine.journal_space()?;
    engine.shutdown()?;
    Ok(Compaction {
        sealed,
        bytes_before,
        bytes_after,
        journal_bytes,
    })
}
