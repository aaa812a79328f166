//! `almanac serve`: open the data directory, bind, serve until SIGINT/SIGTERM, then
//! finish in-flight requests, flush, and exit 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use almanac_engine::{Durability, Engine, Options};
use anyhow::Context;

/// Flags of `almanac serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address of the Bigtable gRPC listener (point BIGTABLE_EMULATOR_HOST here).
    #[arg(long, default_value = "127.0.0.1:8086")]
    addr: SocketAddr,
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
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let engine = Engine::open(
        &dir,
        Options {
            durability: args.fsync,
            sweep_interval: Some(Duration::from_secs(args.sweep_secs.max(1))),
            ..Options::default()
        },
    )
    .with_context(|| format!("opening data directory {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let bound = almanac_server::bind(args.addr).await?;
        let local = bound.local_addr()?;
        eprintln!(
            "almanac: listening on {local} (Bigtable gRPC; export BIGTABLE_EMULATOR_HOST={local}), data in {}, fsync={:?}",
            dir.display(),
            args.fsync
        );
        almanac_server::serve(engine.clone(), bound, shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    engine.shutdown().context("flushing on shutdown")?;
    eprintln!("almanac: stopped cleanly");
    Ok(())
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
