//! # almanac-console
//!
//! The web console `almanac serve` serves on its own listener (`--console-addr`):
//! the pages (static assets embedded in the binary, [`assets`]), the JSON they draw
//! ([`api`]), Key Visualizer's heatmaps over the engine's access counters
//! ([`almanac_engine::access`]), the schema advisor ([`advisor`]), and `/metrics` in
//! Prometheus' text format ([`metrics`]). Contract: docs/console.md.
//!
//! ## A request, step by step
//! 1. axum routes it ([`router`]); each connection is counted while open.
//! 2. Static paths answer embedded bytes; `/metrics` reads the engine's counters and
//!    renders the recorder on the blocking pool.
//! 3. `/api/…` handlers parse their parameters ([`api`]), run engine and advisor work
//!    on the blocking pool (SQL plans on the runtime and scans there), and answer
//!    JSON.
//! 4. Every failure is an [`Error`], mapped to an HTTP status in one place
//!    ([`error`]) with `{"error": message}`.

pub mod advisor;
pub mod api;
mod assets;
mod backup;
pub mod error;
mod keys;
pub mod metrics;
pub mod tls;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use almanac_engine::Engine;
use almanac_sql::SqlEngine;
use almanac_timeseries::{SharedStore, TimeSeries};
use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use error::{Error, Result};
pub use metrics::{ConnectionGuard, Listener, Metrics};
pub use tls::{TlsError, TlsIdentity};

/// What the console reads.
pub struct Console {
    /// The engine (Bigtable tables, access counters, sizes).
    pub engine: Engine,
    /// The time-series layer (its catalog).
    pub ts: Arc<TimeSeries<SharedStore>>,
    /// SQL.
    pub sql: Arc<SqlEngine>,
    /// The server's metrics.
    pub metrics: Arc<Metrics>,
    /// The data directory, as shown on the overview.
    pub data_dir: PathBuf,
    /// The instance SQL's bare table names resolve in when a request names none.
    pub default_instance: String,
    /// Who may use the API and `/metrics` (the server's principals).
    pub gatekeeper: Arc<dyn Gatekeeper>,
    /// Files of the data directory a backup carries besides the store (the
    /// principals file); a missing one is left out.
    pub backup_files: Vec<PathBuf>,
}

/// Who may use the console's API and `/metrics`: the pages and assets are static and
/// open; every `/api/…` call and `/metrics` presents `authorization: Bearer TOKEN`
/// once the server has principals.
pub trait Gatekeeper: Send + Sync {
    /// The visitor presenting `authorization` (a header value), or why not.
    fn admit(&self, authorization: Option<&str>) -> std::result::Result<Visitor, String>;
}

/// An admitted visitor.
#[derive(Clone)]
pub struct Visitor {
    /// Whether it may see the whole server: every table's metadata, Key Visualizer,
    /// the advisor, the metrics (a principal of scope `All`, or anyone while
    /// authentication is off).
    pub whole_server: bool,
    /// Whether it may take a backup: an administrator of the whole server (or
    /// anyone while authentication is off).
    pub admin: bool,
    /// Which tables its SQL may read (`None`: all).
    pub tables: Option<Arc<dyn almanac_sql::catalog::TableAccess>>,
}

/// Admits the visitor of `request` and hands it to the handler; a visitor without
/// the whole server reaches only `/api/sql`.
async fn admitted(
    axum::extract::State(c): axum::extract::State<Arc<Console>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let header = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let visitor = match c.gatekeeper.admit(header) {
        Ok(v) => v,
        Err(m) => return Error::Unauthenticated(m).into_response(),
    };
    if !visitor.whole_server && request.uri().path() != "/api/sql" {
        return Error::Forbidden(
            "this page shows every table of the server: it needs a principal whose scope is everything; SQL over the tables in your scope works".into(),
        )
        .into_response();
    }
    request.extensions_mut().insert(visitor);
    next.run(request).await
}

/// The console's routes.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{*path}", get(assets::asset))
        .merge(
            Router::new()
                .route("/metrics", get(api::metrics))
                .route("/api/overview", get(api::overview))
                .route("/api/stats", get(api::stats))
                .route("/api/sql", post(api::sql))
                .route("/api/keyvis", get(api::keyvis))
                .route("/api/lint", get(advisor::lint_handler))
                .route("/api/backup", get(backup::backup))
                .route_layer(axum::middleware::from_fn_with_state(
                    Arc::clone(&console),
                    admitted,
                )),
        )
        .with_state(console)
}

/// Serves the console on `listener` (through TLS with `tls`) until `shutdown` resolves.
pub async fn serve(
    console: Arc<Console>,
    listener: TcpListener,
    tls: Option<TlsIdentity>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics = Arc::clone(&console.metrics);
    let app = router(console);
    let listener = CountedListener::new(listener, tls.as_ref(), metrics, Listener::Console)?;
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// An axum listener, plain or TLS ([`tls`]), whose connections count in
/// `almanac_open_connections`.
pub struct CountedListener {
    inner: tls::Accepting,
    metrics: Arc<Metrics>,
    which: Listener,
}

impl CountedListener {
    /// Counts the connections of `inner` as `which`; through TLS with `tls`.
    pub fn new(
        inner: TcpListener,
        tls: Option<&TlsIdentity>,
        metrics: Arc<Metrics>,
        which: Listener,
    ) -> std::io::Result<Self> {
        Ok(Self {
            inner: tls::Accepting::new(inner, tls.map(TlsIdentity::http_acceptor))?,
            metrics,
            which,
        })
    }
}

impl axum::serve::Listener for CountedListener {
    type Io = metrics::Counted<tls::Conn>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = self.inner.accept().await;
        let guard = self.metrics.connection(self.which);
        (metrics::Counted::new(io, guard), addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}
