//! # almanac-server
//!
//! The network front of Almanac: the Cloud Bigtable gRPC APIs (Data API v2, Table
//! Admin, enough Instance Admin for clients and `cbt`) over one embedded
//! [`almanac_engine::Engine`], and the Timestream-compatible HTTP endpoint
//! ([`timestream`]). A [`Node`] assembles both over one data directory: `almanac
//! serve` is its flags, and tests start one in process.
//!
//! ## A request, step by step
//! 0. Its connection was handed to one shard when accepted ([`shards`]: a one-worker
//!    runtime per core); everything below runs on that shard's worker unless it says
//!    otherwise.
//! 1. tonic decodes the protobuf ([`serve`] allows messages up to
//!    [`MAX_MESSAGE_BYTES`], room for a 256 MiB row, and HTTP/2 windows of
//!    [`STREAM_WINDOW_BYTES`] so a batch arrives without waiting for window updates).
//! 2. The handler ([`data`], [`admin`], [`instance`]) parses the resource name
//!    ([`names`]) and converts the request to engine types ([`convert`]).
//! 3. Point reads run on the shard's worker, scans on its blocking pool
//!    ([`read_rows`]); writes go to the committer thread, which applies them in
//!    groups and hands each group to the syncer thread, which answers after one fsync
//!    per group while the next is applied ([`committer`]); admin calls run on the
//!    blocking pool.
//!    PrepareQuery / ExecuteQuery plan and stream SQL through [`almanac_sql`] on the
//!    caller's multi-threaded runtime ([`execute_query`]).
//! 4. Results go back as protobuf; ReadRows frames rows into chunks ([`chunks`]),
//!    ExecuteQuery frames them into checksummed `ProtoRows` batches.
//! 5. Engine and SQL errors become gRPC statuses in exactly one place ([`status`]); RPCs
//!    Almanac lacks answer `UNIMPLEMENTED` naming the method ([`unimplemented`]).
//! 6. When the response stream ends, the call is counted with its status and latency
//!    ([`measured`], `/metrics`).

mod admin;
pub mod auth;
mod backups;
mod change_stream;
mod chunks;
mod coalesce;
mod committer;
mod convert;
mod crc32c;
mod data;
mod execute_query;
mod forwarded;
mod grants;
mod iam;
mod instance;
mod measured;
mod names;
mod namespaces;
pub mod node;
mod operations;
mod read_rows;
mod shards;
mod snapshots;
mod status;
pub mod timestream;
mod unimplemented;
mod views;

use std::future::Future;
use std::net::SocketAddr;

use almanac_api::google::bigtable::admin::v2::bigtable_instance_admin_server::BigtableInstanceAdminServer;
use almanac_api::google::bigtable::admin::v2::bigtable_table_admin_server::BigtableTableAdminServer;
use almanac_api::google::bigtable::v2::bigtable_server::BigtableServer;
use almanac_engine::Engine;
use tokio::net::TcpListener;

use crate::auth::Authenticated;
/// The Data API's service, for the fuzz targets in `fuzz/` (not an API).
#[doc(hidden)]
pub use crate::data::DataService;
use crate::measured::Measured;
pub use crate::node::{Compaction, Node, NodeConfig, compact};
pub use crate::shards::ShardError;
use crate::shards::Shards;
use crate::unimplemented::NameUnimplemented;
pub use almanac_console::TlsIdentity;

pub use almanac_engine::limits::MAX_MESSAGE_BYTES;
/// The instance whose tables bare names mean on the console's SQL page (the CLI's
/// default instance).
pub const DEFAULT_CONSOLE_INSTANCE: &str = "projects/almanac/instances/almanac";
/// HTTP/2 flow-control window of one stream: how much of a request a client may send
/// before the server acknowledges it. h2's default, 64 KiB, made every 100 KiB
/// MutateRows wait a round trip for a WINDOW_UPDATE midway.
pub const STREAM_WINDOW_BYTES: u32 = 2 * 1024 * 1024;
/// HTTP/2 flow-control window of a connection, shared by its streams.
pub const CONNECTION_WINDOW_BYTES: u32 = 8 * 1024 * 1024;
/// Largest HTTP/2 frame a client may send: a 100 KiB request in one frame, not seven.
pub const MAX_FRAME_BYTES: u32 = 256 * 1024;

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The write committer thread could not start.
    #[error("cannot start the write committer: {0}")]
    Committer(std::io::Error),
    /// A shard thread could not start, or its transport failed.
    #[error(transparent)]
    Shard(#[from] shards::ShardError),
    /// The data directory could not be opened.
    #[error("opening data directory {}", dir.display())]
    Open {
        /// The directory.
        dir: std::path::PathBuf,
        /// The engine's error.
        source: almanac_engine::Error,
    },
    /// The store failed (flushing at shutdown, compacting, measuring).
    #[error("the store failed")]
    Store(#[from] almanac_engine::Error),
    /// The time-series catalog could not be opened, or a seal pass failed.
    #[error("the time-series layer failed")]
    TimeSeries(#[from] almanac_timeseries::Error),
    /// The SQL engine could not start.
    #[error("starting the SQL engine")]
    Sql(#[from] almanac_sql::Error),
    /// The scheduled queries could not be loaded.
    #[error("loading the scheduled queries")]
    Jobs(#[from] almanac_jobs::Error),
    /// The Timestream endpoint's transport failed.
    #[error("timestream endpoint: {0}")]
    Timestream(std::io::Error),
    /// The console's transport failed.
    #[error("console: {0}")]
    Console(std::io::Error),
    /// The principals file could not be read.
    #[error("reading the principals")]
    Auth(#[from] almanac_auth::Error),
    /// A task of the node panicked or was cancelled.
    #[error("a server task failed")]
    Task(#[from] tokio::task::JoinError),
}

/// A bound listener, ready to serve.
pub struct Bound {
    listener: TcpListener,
}

impl Bound {
    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Binds `addr` without serving yet, so callers can report the real port.
pub async fn bind(addr: SocketAddr) -> Result<Bound, ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(Bound { listener })
}

/// Serves the Bigtable APIs over `engine` until `shutdown` completes; in-flight
/// requests finish before this returns. Connections are spread over [`shards`], one
/// thread each; SQL runs on the caller's runtime.
pub async fn serve(
    engine: Engine,
    sql: std::sync::Arc<almanac_sql::SqlEngine>,
    bound: Bound,
    tls: Option<&almanac_console::TlsIdentity>,
    gate: &std::sync::Arc<auth::Gate>,
    metrics: std::sync::Arc<almanac_console::Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let tls = tls.map(almanac_console::TlsIdentity::grpc_acceptor);
    let (data, table_admin, instance_admin) = engine_services(engine, sql, gate, &metrics)?;
    serve_apis(
        (data, table_admin, instance_admin),
        bound,
        tls,
        metrics,
        shutdown,
    )
    .await
}

/// Serves the Bigtable APIs of a front-end over a remote Bigtable until `shutdown`
/// completes: every call passed on to the remote instance ([`almanac_remote::forward`]),
/// after the caller is authenticated and, with principals defined, found to be an
/// administrator of everything ([`forwarded::AdminsOnly`]), since the remote sees the
/// front-end's credentials, not the caller's.
pub async fn serve_forwarded(
    forwarder: &almanac_remote::forward::Forwarder,
    bound: Bound,
    tls: Option<&almanac_console::TlsIdentity>,
    gate: &std::sync::Arc<auth::Gate>,
    metrics: std::sync::Arc<almanac_console::Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let tls = tls.map(almanac_console::TlsIdentity::grpc_acceptor);
    let apis = (
        guarded(forwarder.data(), gate, &metrics),
        guarded(forwarder.table_admin(), gate, &metrics),
        guarded(forwarder.instance_admin(), gate, &metrics),
    );
    serve_apis(apis, bound, tls, metrics, shutdown).await
}

/// A forwarded API measured, its caller authenticated, then held to administrators.
fn guarded<S>(
    api: S,
    gate: &std::sync::Arc<auth::Gate>,
    metrics: &std::sync::Arc<almanac_console::Metrics>,
) -> Measured<Authenticated<forwarded::AdminsOnly<S>>> {
    Measured::new(
        Authenticated::new(forwarded::AdminsOnly::new(api), gate),
        metrics,
    )
}

/// A gRPC service the server can host.
trait Api:
    tonic::codegen::Service<
        tonic::codegen::http::Request<tonic::body::Body>,
        Response = tonic::codegen::http::Response<tonic::body::Body>,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + tonic::server::NamedService
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Api for S where
    S: tonic::codegen::Service<
            tonic::codegen::http::Request<tonic::body::Body>,
            Response = tonic::codegen::http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Serves the Data, Table Admin and Instance Admin APIs on `bound`'s connections,
/// spread over [`shards`], until `shutdown` completes.
async fn serve_apis(
    (data, table_admin, instance_admin): (impl Api, impl Api, impl Api),
    bound: Bound,
    tls: Option<tokio_rustls::TlsAcceptor>,
    metrics: std::sync::Arc<almanac_console::Metrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let shards = Shards::start(shards::shard_count(), tls, move |incoming, stop| {
        tonic::transport::Server::builder()
            .initial_stream_window_size(STREAM_WINDOW_BYTES)
            .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
            .max_frame_size(MAX_FRAME_BYTES)
            .add_service(data.clone())
            .add_service(table_admin.clone())
            .add_service(instance_admin.clone())
            .serve_with_incoming_shutdown(incoming, stop)
    })?
    .with_metrics(metrics);
    shards.accept(bound.listener, shutdown).await;
    shards.join().await?;
    Ok(())
}

/// The engine's Bigtable services, each measured and authenticated.
#[expect(clippy::type_complexity, reason = "three concrete service stacks")]
fn engine_services(
    engine: Engine,
    sql: std::sync::Arc<almanac_sql::SqlEngine>,
    gate: &std::sync::Arc<auth::Gate>,
    metrics: &std::sync::Arc<almanac_console::Metrics>,
) -> Result<
    (
        Measured<Authenticated<NameUnimplemented<BigtableServer<data::DataService>>>>,
        Measured<
            Authenticated<NameUnimplemented<BigtableTableAdminServer<admin::TableAdminService>>>,
        >,
        Measured<
            Authenticated<
                NameUnimplemented<BigtableInstanceAdminServer<instance::InstanceAdminService>>,
            >,
        >,
    ),
    ServeError,
> {
    let metrics = metrics.clone();
    let data = data::DataService::new(engine.clone(), sql, tokio::runtime::Handle::current())
        .map_err(ServeError::Committer)?;
    let data = Measured::new(
        Authenticated::new(
            NameUnimplemented::new(
                BigtableServer::new(data)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES),
            ),
            gate,
        ),
        &metrics,
    );
    let registry = namespaces::Registry::new(engine.clone());
    let table_admin = Measured::new(
        Authenticated::new(
            NameUnimplemented::new(
                BigtableTableAdminServer::new(admin::TableAdminService::new(
                    engine.clone(),
                    registry.clone(),
                ))
                .max_decoding_message_size(MAX_MESSAGE_BYTES),
            ),
            gate,
        ),
        &metrics,
    );
    let instance_admin = Measured::new(
        Authenticated::new(
            NameUnimplemented::new(BigtableInstanceAdminServer::new(
                instance::InstanceAdminService::new(engine, registry),
            )),
            gate,
        ),
        &metrics,
    );
    Ok((data, table_admin, instance_admin))
}
