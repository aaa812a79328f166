//! `almanac serve` and `almanac compact`: flags, then [`almanac_server::Node`] does the
//! work. `serve` runs until SIGINT/SIGTERM, then finishes in-flight requests, flushes,
//! and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use almanac_engine::Durability;
use almanac_engine::limits::DEFAULT_UNDELETE_WINDOW_SECS;
use almanac_remote::{RemoteStore, Target};
use almanac_server::node::{DEFAULT_SEAL_QUIET_SECS, DEFAULT_SEAL_SECS, DEFAULT_SWEEP_SECS};
use almanac_server::{Node, NodeConfig, TlsIdentity};
use almanac_sql::{QueryLimits, budget};
use almanac_timeseries::{DEFAULT_INSTANCE, SharedStore, WideColumnStore};
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
    /// The Timestream endpoint's address as clients reach it, which DescribeEndpoints
    /// returns (HOST:PORT, served as http://HOST:PORT, or a URL with its scheme).
    /// Default: the bound address; with a wildcard bind, this machine's routable one.
    #[arg(long)]
    timestream_advertise: Option<String>,
    /// Data directory (created on first run). Default: $XDG_DATA_HOME/almanac or ./almanac-data.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// When an acknowledged write is on disk: sync (fdatasync, group commit), buffer
    /// (OS buffers: survives a process crash), none.
    #[arg(long, default_value = "sync")]
    fsync: Durability,
    /// Seconds between background GC sweeps.
    #[arg(long, default_value_t = DEFAULT_SWEEP_SECS)]
    sweep_secs: u64,
    /// Seconds between passes that seal closed buckets of time-series tables into
    /// compressed blocks (0: never).
    #[arg(long, default_value_t = DEFAULT_SEAL_SECS)]
    seal_secs: u64,
    /// Seconds a closed bucket must go unwritten before a pass seals it (so a
    /// historical backfill is not sealed while it is still being written).
    #[arg(long, default_value_t = DEFAULT_SEAL_QUIET_SECS)]
    seal_quiet_secs: u64,
    /// Seconds a deleted table can be undeleted (UndeleteTable); its data stays on
    /// disk that long. 0 deletes at once.
    #[arg(long, default_value_t = DEFAULT_UNDELETE_WINDOW_SECS)]
    undelete_window_secs: u64,
    /// The directory that stands in for S3: bucket B is its subdirectory B. Batch
    /// loads read their CSV files there (or from a BucketName of file:///DIR), and
    /// scheduled queries and batch loads write their error reports there.
    /// Default: DATA_DIR/buckets.
    #[arg(long)]
    bucket_dir: Option<PathBuf>,
    /// Address of the web console, Key Visualizer, the advisor's API and /metrics
    /// (Prometheus); `off` serves none.
    #[arg(long, default_value = "127.0.0.1:8088")]
    console_addr: String,
    /// Count reads and writes by key range for Key Visualizer (on, or off: its history
    /// stays, nothing new is counted; /metrics is unaffected).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    key_visualizer: String,
    /// MiB of memory all running SQL queries may reserve together (sorts, aggregates,
    /// joins); one query may reserve half. A query past it fails naming the limit.
    #[arg(long, default_value_t = (budget::DEFAULT_QUERY_MEMORY_BYTES >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    query_memory_mib: u64,
    /// Seconds one SQL query may run before it is stopped (Timestream's Query API
    /// stops at 60).
    #[arg(long, default_value_t = budget::DEFAULT_TIME_LIMIT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    query_time_limit_secs: u64,
    /// MiB the data directory's filesystem keeps free: writes are refused (gRPC
    /// RESOURCE_EXHAUSTED, Timestream ThrottlingException) while less is free, and
    /// resume once space is freed; reads go on. 0 never refuses.
    #[arg(long, default_value_t = almanac_engine::limits::DEFAULT_MIN_FREE_DISK_BYTES >> 20)]
    min_free_disk_mib: u64,
    /// PEM certificate chain (leaf first) every listener serves TLS with: gRPC,
    /// Timestream and the console. Needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain text on an address other than loopback (without it, serve refuses
    /// to: anyone on the network could read the traffic).
    #[arg(long)]
    insecure: bool,
    /// Keep the time-series tables (the Timestream endpoint, its SQL, scheduled
    /// queries and batch loads) in this remote Bigtable instance,
    /// projects/PROJECT/instances/INSTANCE, instead of the data directory: Cloud
    /// Bigtable itself (over TLS, with Google credentials from
    /// GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login or the
    /// metadata server), or the endpoint of --bigtable-endpoint.
    #[arg(long, value_name = "projects/P/instances/I")]
    bigtable: Option<String>,
    /// The Bigtable holding --bigtable's instance, instead of Cloud Bigtable's own
    /// endpoints. HOST:PORT: plain text without credentials, as clients speak to an
    /// emulator through BIGTABLE_EMULATOR_HOST (the Cloud SDK's emulator, another
    /// Almanac's --addr). https://HOST[:PORT]: TLS with Google credentials.
    #[arg(
        long,
        requires = "bigtable",
        value_name = "HOST:PORT|https://HOST:PORT"
    )]
    bigtable_endpoint: Option<String>,
    /// PEM file of the root certificates to trust for --bigtable's TLS endpoint,
    /// instead of the system's.
    #[arg(long, requires = "bigtable", value_name = "FILE")]
    bigtable_ca_cert: Option<PathBuf>,
}

/// The remote store `--bigtable` names, if any.
fn series_store(
    bigtable: Option<&String>,
    bigtable_endpoint: Option<&str>,
    bigtable_ca_cert: Option<&PathBuf>,
) -> anyhow::Result<Option<RemoteStore>> {
    let Some(instance) = bigtable else {
        return Ok(None);
    };
    let valid = instance
        .strip_prefix("projects/")
        .and_then(|rest| rest.split_once("/instances/"))
        .is_some_and(|(p, i)| {
            !p.is_empty() && !i.is_empty() && !p.contains('/') && !i.contains('/')
        });
    if !valid {
        anyhow::bail!("--bigtable {instance:?} is not projects/PROJECT/instances/INSTANCE");
    }
    let ca_pem = match bigtable_ca_cert {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("reading --bigtable-ca-cert {}", path.display()))?,
        ),
        None => None,
    };
    let target = match bigtable_endpoint {
        None => Target::cloud(ca_pem),
        Some(tls) if tls.starts_with("https://") => Target::Google {
            data: tls.to_string(),
            admin: tls.to_string(),
            ca_pem,
        },
        Some(plain) => {
            if ca_pem.is_some() {
                anyhow::bail!(
                    "--bigtable-ca-cert is for a TLS endpoint (--bigtable-endpoint \
                     https://HOST:PORT, or Cloud Bigtable's own); {plain} is plain text"
                );
            }
            Target::Plain(plain.to_string())
        }
    };
    let described = target.to_string();
    let store = RemoteStore::connect_to(instance, target)
        .with_context(|| format!("connecting to --bigtable {instance} at {described}"))?;
    Ok(Some(store))
}

/// Refuses plain text on any listener reachable from other machines, unless told
/// `--insecure`.
fn check_plain_text(
    addrs: &[(&str, Option<SocketAddr>)],
    tls: bool,
    insecure: bool,
) -> anyhow::Result<()> {
    if tls || insecure {
        return Ok(());
    }
    for (flag, addr) in addrs {
        if let Some(addr) = addr
            && !addr.ip().is_loopback()
        {
            anyhow::bail!(
                "refusing to serve plain text on {addr} ({flag}), which other machines can reach: \
                 give --tls-cert and --tls-key, or --insecure to serve plain text anyway"
            );
        }
    }
    Ok(())
}

/// `--console-addr`: an address, or `off`.
fn console_addr(text: &str) -> anyhow::Result<Option<SocketAddr>> {
    if text == "off" {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .with_context(|| format!("--console-addr {text:?} is neither HOST:PORT nor off"))
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let console_addr = console_addr(&args.console_addr)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(TlsIdentity::load(cert, key).context("loading --tls-cert and --tls-key")?)
        }
        _ => None,
    };
    check_plain_text(
        &[
            ("--addr", Some(args.addr)),
            ("--timestream-addr", Some(args.timestream_addr)),
            ("--console-addr", console_addr),
        ],
        tls.is_some(),
        args.insecure,
    )?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let remote = series_store(
        args.bigtable.as_ref(),
        args.bigtable_endpoint.as_deref(),
        args.bigtable_ca_cert.as_ref(),
    )?;
    let series_instance = remote
        .as_ref()
        .map_or(DEFAULT_INSTANCE.to_string(), |s| s.instance().to_string());
    let series_where = match (&args.bigtable, &args.bigtable_endpoint) {
        (Some(_), Some(endpoint)) => format!("{series_instance} at {endpoint}"),
        (Some(_), None) => format!("{series_instance} on Cloud Bigtable"),
        (None, _) => series_instance,
    };
    let forward_bigtable = remote.as_ref().map(RemoteStore::forwarder);
    let config = NodeConfig {
        series_store: remote.map(|s| Arc::new(s) as SharedStore),
        forward_bigtable,
        durability: args.fsync,
        sweep_interval: Duration::from_secs(args.sweep_secs),
        seal_interval: (args.seal_secs > 0).then(|| Duration::from_secs(args.seal_secs)),
        seal_quiet: Duration::from_secs(args.seal_quiet_secs),
        undelete_window: Duration::from_secs(args.undelete_window_secs),
        timestream_advertise: args.timestream_advertise,
        bucket_dir: args.bucket_dir,
        console_addr,
        tls,
        key_visualizer: args.key_visualizer == "on",
        min_free_bytes: args.min_free_disk_mib.saturating_mul(1 << 20),
        query_limits: QueryLimits {
            time_limit: Duration::from_secs(args.query_time_limit_secs),
            ..QueryLimits::with_memory(
                usize::try_from(args.query_memory_mib.saturating_mul(1 << 20))
                    .unwrap_or(usize::MAX),
            )
        },
        on_warning: Some(Arc::new(|w: &almanac_engine::warning::Warning| {
            eprintln!("almanac: warning: {w}");
        })),
        ..NodeConfig::new(dir.clone(), args.addr, args.timestream_addr)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let node = Node::start(config).await?;
        let (grpc, ts) = (node.grpc_addr(), node.timestream_addr());
        let mut how = if args.tls_cert.is_some() {
            "Bigtable gRPC over TLS".to_string()
        } else {
            format!("Bigtable gRPC; export BIGTABLE_EMULATOR_HOST={grpc}")
        };
        if args.bigtable.is_some() {
            how.push_str(&format!("; every call passed to {series_where}"));
        }
        eprintln!(
            "almanac: listening on {grpc} ({how}), data in {}, fsync={:?}",
            dir.display(),
            args.fsync
        );
        eprintln!(
            "almanac: timestream listening on {ts} (timestream-write and timestream-query; boto3 endpoint_url={scheme}://{ts}); tables in instance {series_where}"
        );
        if let Some(console) = node.console_addr() {
            eprintln!(
                "almanac: console on {scheme}://{console}/ (metrics at {scheme}://{console}/metrics)"
            );
        }
        node.run(shutdown_signal()).await
    })?;
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

/// Flags of `almanac compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The data directory of a stopped server (default as for `serve`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// Compacts a stopped server's data directory ([`almanac_server::compact`]) and prints
/// the bytes before and after.
pub fn compact(args: CompactArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let done = almanac_server::compact(&dir)
        .with_context(|| format!("compacting {} (is a server using it?)", dir.display()))?;
    let sealed = done.sealed;
    if sealed.buckets > 0 {
        println!(
            "sealed {} closed buckets ({} points; {} rows folded into blocks)",
            sealed.buckets, sealed.points, sealed.rows_removed
        );
    }
    println!(
        "{}: {} bytes before, {} bytes after compaction ({} in tables, {} in the journal)",
        dir.display(),
        done.bytes_before,
        done.bytes_after,
        done.bytes_after.saturating_sub(done.journal_bytes),
        done.journal_bytes
    );
    Ok(())
}
