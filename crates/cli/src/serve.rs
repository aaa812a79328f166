//! `almanac serve`: open the data directory, bind, serve until SIGINT/SIGTERM, then
//! finish in-flight requests, flush, and exit 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use almanac_engine::clock::SystemClock;
use almanac_engine::{Durability, Engine, Options};
use almanac_timeseries::{DEFAULT_INSTANCE, EmbeddedStore, TimeSeries};
use anyhow::Context;

/// Flags of `almanac serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address of the Bigtable gRPC listener (point BIGTABLE_EMULATOR_HOST here).
    #[arg(long, default_value = "127.0.0.1:8086")]
    addr: SocketAddr,
    /// Address of the Timestream-compatible HTTP endpoint (AWS JSON 1.0, boto3 with
    /// `endpoint_url=http://ADDR`).
    #[arg(long, default_value = "127.0.0.1:8087")]
    timestream_addr: SocketAddr,
    /// Data directory (created on first run). Default: $XDG_DATA_HOME/almanac or ./almanac-data.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// When an acknowledged write is on disk: sync (fdatasync, group commit), buffer
    /// (OS buffers: survives a process crash), none.
    #[arg(long, default_value = "sync")]
    fsync: Durability,
    /// Seconds between background GC sweeps.
    #[arg(long, default_value_t = 60)]
    sweep_secs: u64,
    /// Seconds between passes that seal closed buckets of time-series tables into
    /// compressed blocks (0: never).
    #[arg(long, default_value_t = 60)]
    seal_secs: u64,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let engine = Engine::open(
        &dir,
        Options {
            durability: args.fsync,
            sweep_interval: Some(Duration::from_secs(args.sweep_secs.max(1))),
            on_warning: Some(Arc::new(|w: &almanac_engine::warning::Warning| {
                eprintln!("almanac: warning: {w}");
            })),
            ..Options::default()
        },
    )
    .with_context(|| format!("opening data directory {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let store = EmbeddedStore::new(Arc::new(engine.clone()), DEFAULT_INSTANCE);
    let ts = Arc::new(
        TimeSeries::open(Arc::new(store), Arc::new(SystemClock))
            .context("opening the time-series catalog")?,
    );
    let sql = Arc::new(
        almanac_sql::SqlEngine::new(Arc::new(engine.clone()), ts.clone())
            .context("starting the SQL engine")?,
    );
    runtime.block_on(async {
        let bound = almanac_server::bind(args.addr).await?;
        let local = bound.local_addr()?;
        let ts_listener = tokio::net::TcpListener::bind(args.timestream_addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.timestream_addr))?;
        let ts_local = ts_listener.local_addr()?;
        eprintln!(
            "almanac: listening on {local} (Bigtable gRPC; export BIGTABLE_EMULATOR_HOST={local}), data in {}, fsync={:?}",
            dir.display(),
            args.fsync
        );
        eprintln!(
            "almanac: timestream listening on {ts_local} (timestream-write and timestream-query; boto3 endpoint_url=http://{ts_local}); tables in instance {DEFAULT_INSTANCE}"
        );
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let sealer = tokio::spawn(seal_periodically(ts.clone(), args.seal_secs, stop_rx.clone()));
        let http = tokio::spawn(almanac_server::timestream::serve(ts, sql.clone(), ts_listener, stopped(stop_rx.clone())));
        let grpc = almanac_server::serve(engine.clone(), sql, bound, async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        });
        grpc.await?;
        http.await.context("timestream endpoint task")?.context("timestream endpoint")?;
        sealer.await.context("seal task")?;
        anyhow::Ok(())
    })?;
    engine.shutdown().context("flushing on shutdown")?;
    eprintln!("almanac: stopped cleanly");
    Ok(())
}

/// Seals the closed buckets of every time-series table every `secs` seconds, until
/// `stop` turns true (a pass under way finishes first).
async fn seal_periodically(
    ts: Arc<TimeSeries<EmbeddedStore>>,
    secs: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    if secs == 0 {
        return;
    }
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(secs)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let ts = ts.clone();
        match tokio::task::spawn_blocking(move || ts.seal_all()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("almanac: sealing closed buckets failed: {e}"),
            Err(e) => eprintln!("almanac: sealing closed buckets failed: {e}"),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = ctrl_c => {},
            () = term => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    eprintln!("almanac: shutting down: finishing in-flight requests");
}

/// Flags of `almanac compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The data directory of a stopped server (default as for `serve`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// Opens the data directory, seals the closed buckets of time-series tables, rewrites
/// the cell tables into one sorted run (dropping overwritten, deleted and collected
/// data), and prints the bytes before and after.
pub fn compact(args: CompactArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let engine = Engine::open(
        &dir,
        Options {
            sweep_interval: None,
            ..Options::default()
        },
    )
    .with_context(|| {
        format!(
            "opening data directory {} (is a server using it?)",
            dir.display()
        )
    })?;
    let before = engine.disk_space()?;
    let store = EmbeddedStore::new(Arc::new(engine.clone()), DEFAULT_INSTANCE);
    let sealed = TimeSeries::open(Arc::new(store), Arc::new(SystemClock))
        .context("opening the time-series catalog")?
        .seal_all()
        .context("sealing closed buckets")?;
    if sealed.buckets > 0 {
        println!(
            "sealed {} closed buckets ({} points; {} rows folded into blocks)",
            sealed.buckets, sealed.points, sealed.rows_removed
        );
    }
    engine.compact().context("compacting")?;
    let after = engine.disk_space()?;
    let journal = engine.journal_space()?;
    engine.shutdown()?;
    println!(
        "{}: {before} bytes before, {after} bytes after compaction ({} in tables, {journal} in the journal)",
        dir.display(),
        after.saturating_sub(journal)
    );
    Ok(())
}
