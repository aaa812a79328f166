//! The Timestream-compatible HTTP endpoint (`almanac serve --timestream-addr`): the
//! AWS JSON 1.0 protocols of `timestream-write` and `timestream-query` on one
//! listener, so boto3 clients of either, pointed at it with `endpoint_url`, work
//! unchanged.
//!
//! A request, step by step:
//! 1. axum accepts `POST /` (any path); the `X-Amz-Target` header names the operation
//!    (`Timestream_20181101.WriteRecords`, `Timestream_20181101.Query`: both services
//!    use the same target prefix, so operations are told apart by name). SigV4
//!    signatures are not checked: like the Bigtable emulator endpoint, this is a local
//!    server.
//! 2. The headers become a [`RequestContext`]: the region the request was signed for
//!    (named in ARNs) and the Almanac extension header [`INSTANCE_HEADER`].
//! 3. Scheduled-query and account-settings operations ([`scheduled_ops`]) and
//!    batch-load operations ([`batch_ops`]) go to [`almanac_jobs`]; `serve` also runs
//!    the scheduler's tick ([`almanac_jobs::scheduled`]).
//!    Query operations ([`query_ops`]) run on the async runtime: DataFusion plans and
//!    streams the query ([`almanac_sql`]); rows are encoded as `Datum`s
//!    ([`query_wire`], [`scalar`]) and pages beyond the first wait in the
//!    [`results`] cache. Write operations ([`write_ops`]) parse into
//!    [`wire::Request`] (a malformed body is a `ValidationException` naming serde's
//!    complaint and position) and run blocking against the
//!    [`almanac_timeseries::TimeSeries`] service: in place on the worker when a
//!    write slot is free, else on tokio's blocking pool (`run_blocking`).
//! 4. Success is HTTP 200 with the output shape. Every failure is an [`OpError`], and
//!    becomes the service's modeled exception in exactly one place ([`api_error`]):
//!    `{"__type": "com.amazonaws.timestreamwrite#<Name>", "Message": …}` (namespace
//!    `timestreamquery` for query operations) with its HTTP status, plus
//!    `RejectedRecords` for `RejectedRecordsException`.

mod access;
mod batch_ops;
mod query_ops;
mod query_wire;
pub mod records_json;
mod results;
mod scalar;
mod scheduled_ops;
mod wire;
mod write_ops;

#[doc(hidden)]
pub use query_ops::answer_from_cache;
#[doc(hidden)]
pub use results::{Header, Limits, ResultCache, Rows};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use almanac_timeseries::{Error, SharedStore, TimeSeries};
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;

/// Largest request body: 100 records of 2 KB dimensions and values fit many times over.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// `X-Amz-Target` service prefix of `timestream-write` and `timestream-query`.
pub const WRITE_TARGET: &str = "Timestream_20181101";
/// The region of unsigned requests (and the one the CLI signs nothing for).
pub const DEFAULT_REGION: &str = "us-east-1";
/// Almanac's extension to `Query`: the Bigtable instance
/// (`projects/{p}/instances/{i}`) whose tables bare table names in the SQL refer to.
/// Without it only `"database"."table"` time-series names resolve.
pub const INSTANCE_HEADER: &str = "x-almanac-instance";
/// Content type of AWS JSON 1.0.
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// Namespace of the error `__type`s of write operations.
const WRITE_ERROR_NAMESPACE: &str = "com.amazonaws.timestreamwrite";
/// Namespace of the error `__type`s of query operations.
const QUERY_ERROR_NAMESPACE: &str = "com.amazonaws.timestreamquery";

/// Shared state of the endpoint.
#[derive(Debug)]
pub struct App {
    /// The service.
    pub ts: Arc<TimeSeries<SharedStore>>,
    /// SQL over the same tables (the Query API).
    pub sql: Arc<almanac_sql::SqlEngine>,
    /// Scheduled queries.
    pub scheduled: Arc<almanac_jobs::ScheduledQueries>,
    /// Batch-load tasks.
    pub batch: Arc<almanac_jobs::BatchLoads>,
    /// The address DescribeEndpoints answers: a URL with its scheme
    /// ([`advertised`]).
    pub address: String,
    /// Pages of query results waiting for their `NextToken`.
    pub results: Mutex<results::ResultCache>,
    /// Permits of running queries ([`query_ops::MAX_CONCURRENT_QUERIES`]).
    pub query_slots: tokio::sync::Semaphore,
    /// Permits of write operations: the store's write concurrency (one per core for
    /// the embedded engine; more over a remote store, whose writes wait on the network).
    /// A WriteRecords request holds one while it parses and applies its records and
    /// gives it back before it waits for its fsync, so more requests in flight than
    /// cores overlap their fsyncs without taking turns on the cores.
    pub write_slots: Arc<tokio::sync::Semaphore>,
    /// The server's metrics.
    pub metrics: Arc<almanac_console::Metrics>,
    /// Principals, and the replay guard of signed requests.
    pub gate: Arc<crate::auth::Gate>,
}

impl App {
    /// The results cache, even after a panic elsewhere poisoned its lock (every
    /// operation on it leaves it consistent).
    pub fn results(&self) -> std::sync::MutexGuard<'_, results::ResultCache> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What one request brings besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The region the request was signed for (named in ARNs).
    pub region: String,
    /// [`INSTANCE_HEADER`], validated.
    pub instance: Option<String>,
}

impl RequestContext {
    /// The context of a request with `headers`.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, OpError> {
        let instance =
            match headers.get(INSTANCE_HEADER) {
                None => None,
                Some(v) => {
                    let v = v.to_str().map_err(|_| {
                        OpError::Request(format!("The {INSTANCE_HEADER} header is not ASCII."))
                    })?;
                    Some(crate::names::instance(v).map_err(|s| {
                        OpError::Request(format!("{INSTANCE_HEADER}: {}", s.message()))
                    })?)
                }
            };
        Ok(Self {
            region: region_of(headers).unwrap_or_else(|| DEFAULT_REGION.to_string()),
            instance,
        })
    }
}

/// Every way an operation fails, classified before it becomes an AWS exception in
/// [`api_error`].
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The time-series layer refused or failed.
    #[error(transparent)]
    Series(#[from] Error),
    /// The SQL engine refused or failed.
    #[error(transparent)]
    Sql(#[from] almanac_sql::Error),
    /// A scheduled query or batch-load task was refused or failed.
    #[error(transparent)]
    Jobs(#[from] almanac_jobs::Error),
    /// A `NextToken` or `QueryId` that cannot be served.
    #[error(transparent)]
    Page(#[from] results::PageError),
    /// A request member is missing, malformed or out of range.
    #[error("{0}")]
    Request(String),
    /// The query ran, but its result cannot be returned (too large, or a type
    /// Timestream lacks).
    #[error("{0}")]
    Result(String),
    /// An operation of the services that Almanac does not implement.
    #[error("Almanac does not implement the Timestream operation {0}.")]
    NotImplemented(String),
    /// The server failed (a task died).
    #[error("{0}")]
    Internal(String),
}

/// A modeled AWS error.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    name: &'static str,
    message: String,
    extra: Option<(&'static str, Json)>,
}

impl ApiError {
    fn new(status: StatusCode, name: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            name,
            message: message.into(),
            extra: None,
        }
    }

    /// A `ValidationException`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "ValidationException", message)
    }
}

/// The one mapping from failures to Timestream's exceptions and HTTP statuses.
pub fn api_error(e: OpError) -> ApiError {
    match e {
        OpError::Series(e) => series_error(e),
        OpError::Sql(e) => sql_error(e),
        OpError::Jobs(e) => jobs_error(e),
        OpError::Page(e @ results::PageError::Cancelled(_)) => {
            ApiError::new(StatusCode::CONFLICT, "ConflictException", e.to_string())
        }
        OpError::Page(e) => ApiError::validation(e.to_string()),
        OpError::Request(m) => ApiError::validation(m),
        e @ OpError::NotImplemented(_) => ApiError::validation(e.to_string()),
        OpError::Result(m) => query_execution(m),
        OpError::Internal(m) => internal(m),
    }
}

fn query_execution(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "QueryExecutionException", message)
}

fn internal(message: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalServerException",
        message,
    )
}

fn sql_error(e: almanac_sql::Error) -> ApiError {
    use almanac_sql::Error as S;
    match e {
        S::Syntax {
            message,
            line,
            column,
        } if line > 0 => ApiError::validation(format!(
            "line {line}:{column}: The query syntax is invalid: {message}"
        )),
        S::Syntax { message, .. } => {
            ApiError::validation(format!("The query syntax is invalid: {message}"))
        }
        S::TableNotFound(name) => {
            // DataFusion qualifies the name with Almanac's one catalog.
            let catalog = format!("{}.", almanac_sql::catalog::CATALOG);
            let name = name.strip_prefix(&catalog).unwrap_or(&name);
            ApiError::new(
                StatusCode::NOT_FOUND,
                "ResourceNotFoundException",
                format!("Table {name} does not exist."),
            )
        }
        S::Invalid(m) | S::Parameter(m) => ApiError::validation(m),
        S::PermissionDenied(m) => ApiError::new(StatusCode::FORBIDDEN, "AccessDeniedException", m),
        e @ S::Cancelled(_) => {
            ApiError::new(StatusCode::CONFLICT, "ConflictException", e.to_string())
        }
        // The service's word for a query it will not run as written: the message names
        // the limit and how to stay under it.
        S::ResourcesExhausted(m) => ApiError::validation(m),
        e @ S::TimedOut { .. } => ApiError::validation(e.to_string()),
        e @ S::Execution(_) => query_execution(e.to_string()),
        e @ S::Store(_) => internal(e.to_string()),
    }
}

fn jobs_error(e: almanac_jobs::Error) -> ApiError {
    use almanac_jobs::Error as J;
    match e {
        J::Validation(m) => ApiError::validation(m),
        e @ J::NotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            e.to_string(),
        ),
        J::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "ConflictException", m),
        J::Quota(m) => ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "ServiceQuotaExceededException",
            m,
        ),
        J::Series(e) => series_error(e),
        J::Sql(e) => sql_error(e),
        e @ (J::Store(_) | J::Internal(_)) => internal(e.to_string()),
    }
}

fn series_error(e: Error) -> ApiError {
    match e {
        Error::Validation(m) => ApiError::validation(m),
        e @ Error::NotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            e.to_string(),
        ),
        e @ Error::Conflict { .. } => {
            ApiError::new(StatusCode::CONFLICT, "ConflictException", e.to_string())
        }
        Error::Quota(m) => ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "ServiceQuotaExceededException",
            m,
        ),
        Error::Rejected(records) => {
            let list: Vec<Json> = records
                .iter()
                .map(|r| {
                    let mut o = json!({ "RecordIndex": r.index, "Reason": r.reason });
                    if let (Some(v), Some(obj)) = (r.existing_version, o.as_object_mut()) {
                        obj.insert("ExistingVersion".into(), json!(v));
                    }
                    o
                })
                .collect();
            let mut err = ApiError::new(
                StatusCode::from_u16(419).unwrap_or(StatusCode::BAD_REQUEST),
                "RejectedRecordsException",
                Error::Rejected(records).to_string(),
            );
            err.extra = Some(("RejectedRecords", Json::Array(list)));
            err
        }
        // botocore retries a ThrottlingException with backoff, as it should here.
        Error::Store(almanac_engine::Error::DiskFull(m)) | Error::Contended(m) => {
            ApiError::new(StatusCode::BAD_REQUEST, "ThrottlingException", m)
        }
        e @ (Error::Store(_) | Error::Corrupt(_)) => internal(e.to_string()),
    }
}

impl ApiError {
    /// The response, with `__type` in `namespace`.
    fn into_response_in(self, namespace: &str) -> Response {
        let mut body = json!({
            "__type": format!("{namespace}#{}", self.name),
            "Message": self.message,
            "message": self.message,
        });
        if let (Some((k, v)), Some(obj)) = (self.extra, body.as_object_mut()) {
            obj.insert(k.into(), v);
        }
        let mut response = json_response(self.status, body.to_string());
        if let Ok(v) = axum::http::HeaderValue::from_str(self.name) {
            response.headers_mut().insert(EXCEPTION_HEADER, v);
        }
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_in(WRITE_ERROR_NAMESPACE)
    }
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    resp
}

/// The region in a SigV4 `Authorization` header's credential scope.
fn region_of(headers: &HeaderMap) -> Option<String> {
    let auth = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let scope = auth.split("Credential=").nth(1)?.split(',').next()?;
    scope.split('/').nth(2).map(str::to_string)
}

/// Runs a `timestream-write` operation (or DescribeEndpoints, which both services
/// have), blocking ([`run_blocking`]), holding a write slot ([`App::write_slots`]).
fn dispatch_write(
    app: &App,
    cx: &RequestContext,
    caller: &crate::auth::Caller,
    op: &str,
    body: &[u8],
    slot: OwnedSemaphorePermit,
) -> Result<Json, OpError> {
    let malformed = |e: String| OpError::Request(format!("Malformed request body: {e}"));
    use write_ops as w;
    if op == "WriteRecords" {
        let req = records_json::parse_write_records(body).map_err(malformed)?;
        return Ok(w::write_records(app, req, slot)?);
    }
    let req: wire::Request = if body.is_empty() {
        wire::Request::default()
    } else {
        serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?
    };
    let out = match op {
        "DescribeEndpoints" => Ok(w::describe_endpoints(app)),
        "CreateDatabase" => w::create_database(app, cx, &req),
        "DescribeDatabase" => w::describe_database(app, cx, &req),
        "ListDatabases" => w::list_databases(app, cx, caller, &req),
        "UpdateDatabase" => w::update_database(app, cx, &req),
        "DeleteDatabase" => w::delete_database(app, &req),
        "CreateTable" => w::create_table(app, cx, &req),
        "DescribeTable" => w::describe_table(app, cx, &req),
        "ListTables" => w::list_tables(app, cx, caller, &req),
        "UpdateTable" => w::update_table(app, cx, &req),
        "DeleteTable" => w::delete_table(app, &req),
        "ListTagsForResource" => w::list_tags_for_resource(app, &req),
        "TagResource" => w::tag_resource(app, &req),
        "UntagResource" => w::untag_resource(app, &req),
        _ => return Err(OpError::NotImplemented(op.to_string())),
    };
    Ok(out?)
}

fn unknown_operation(message: String) -> Response {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "UnknownOperationException",
        message,
    )
    .into_response()
}

/// Serves one request and records it in the metrics: its operation, latency, and
/// the exception it ended with.
async fn handle(app: Arc<App>, signed: Signed, headers: HeaderMap, body: Bytes) -> Response {
    let started = std::time::Instant::now();
    let metrics = Arc::clone(&app.metrics);
    // Only operations the endpoint serves get a label of their own, so made-up
    // names cannot grow the metrics.
    let op = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split_once('.'))
        .map(|(_, op)| op)
        .filter(|op| {
            write_ops::OPERATIONS.contains(op)
                || batch_ops::OPERATIONS.contains(op)
                || query_ops::QueryOp::named(op).is_some()
                || scheduled_ops::ScheduledOp::named(op).is_some()
        })
        .unwrap_or("unknown")
        .to_owned();
    let response = handle_op(app, &signed, headers, body).await;
    let exception = response
        .headers()
        .get(EXCEPTION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    metrics.timestream(&op, exception.as_deref(), started.elapsed());
    response
}

/// Header naming the exception of a failed response (as the service sends it).
const EXCEPTION_HEADER: &str = "x-amzn-errortype";

/// The request line's parts a SigV4 signature covers.
struct Signed {
    method: axum::http::Method,
    uri: axum::http::Uri,
}

/// The caller who signed the request (SigV4), if it may call `op` with `body`.
fn authenticate(
    app: &App,
    signed: &Signed,
    headers: &HeaderMap,
    body: &[u8],
    op: &str,
    region: &str,
) -> Result<crate::auth::Caller, Box<ApiError>> {
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
        .collect();
    let request = almanac_auth::sigv4::Request {
        method: signed.method.as_str(),
        path: signed.uri.path(),
        query: signed.uri.query().unwrap_or(""),
        headers: &pairs,
        body,
    };
    let now_secs = almanac_engine::clock::Clock::now_us(&almanac_engine::clock::SystemClock)
        .div_euclid(1_000_000);
    let caller = app
        .gate
        .signed(&request, now_secs)
        .map_err(|e| Box::new(access::unauthenticated(&e)))?;
    access::authorize(&caller, op, body)
        .map_err(|d| Box::new(access::access_denied(&d, region)))?;
    Ok(caller)
}

async fn handle_op(app: Arc<App>, signed: &Signed, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some((service, op)) = target.split_once('.') else {
        return unknown_operation(format!(
            "X-Amz-Target {target:?} does not name an operation."
        ));
    };
    if service != WRITE_TARGET {
        return unknown_operation(format!(
            "Almanac does not serve {service} (only {WRITE_TARGET}: timestream-write and timestream-query)."
        ));
    }
    let query_op = query_ops::QueryOp::named(op);
    let scheduled_op = scheduled_ops::ScheduledOp::named(op);
    let cx = match RequestContext::from_headers(&headers) {
        Ok(cx) => cx,
        Err(e) if query_op.is_some() || scheduled_op.is_some() => {
            return api_error(e).into_response_in(QUERY_ERROR_NAMESPACE);
        }
        Err(e) => return api_error(e).into_response(),
    };
    let namespace = if query_op.is_some() || scheduled_op.is_some() {
        QUERY_ERROR_NAMESPACE
    } else {
        WRITE_ERROR_NAMESPACE
    };
    let caller = match authenticate(&app, signed, &headers, &body, op, &cx.region) {
        Ok(caller) => caller,
        Err(e) => return e.into_response_in(namespace),
    };
    if let Some(query_op) = query_op {
        return match query_ops::handle(&app, &cx, &caller, query_op, &body).await {
            Ok(text) => json_response(StatusCode::OK, text),
            Err(e) => api_error(e).into_response_in(QUERY_ERROR_NAMESPACE),
        };
    }
    if let Some(op) = scheduled_op {
        return match scheduled_ops::handle(&app, &cx, op, &body).await {
            Ok(text) => json_response(StatusCode::OK, text),
            Err(e) => api_error(e).into_response_in(QUERY_ERROR_NAMESPACE),
        };
    }
    if batch_ops::OPERATIONS.contains(&op) {
        return match batch_ops::handle(&app, op, &body) {
            Ok(text) => json_response(StatusCode::OK, text),
            Err(e) => api_error(e).into_response(),
        };
    }
    if !write_ops::OPERATIONS.contains(&op) {
        return unknown_operation(format!(
            "Almanac does not implement the Timestream operation {op}."
        ));
    }
    let op = op.to_string();
    // A request that finds every slot taken runs where it would have waited anyway,
    // on the blocking pool: moving a worker's core to another thread per request costs
    // CPU that a saturated machine does not have.
    let spare_core = app.write_slots.available_permits() > 0;
    let Ok(slot) = Arc::clone(&app.write_slots).acquire_owned().await else {
        return api_error(OpError::Internal("the write slots are closed".into())).into_response();
    };
    match run_blocking(spare_core, move || {
        dispatch_write(&app, &cx, &caller, &op, &body, slot)
    })
    .await
    {
        Ok(Ok(json)) => json_response(StatusCode::OK, json.to_string()),
        Ok(Err(e)) => api_error(e).into_response(),
        Err(join) => {
            api_error(OpError::Internal(format!("handler failed: {join}"))).into_response()
        }
    }
}

/// Runs a blocking operation from a handler. On a multi-thread runtime it runs in
/// place ([`tokio::task::block_in_place`]: the worker hands its other tasks to another
/// thread and carries on), which saves the two thread wake-ups of a trip through the
/// blocking pool (about 140 µs of a WriteRecords request on the 2-core machine);
/// elsewhere (a current-thread runtime, in tests) it goes to the blocking pool.
async fn run_blocking<T: Send + 'static>(
    in_place: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    if in_place
        && tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread
    {
        Ok(tokio::task::block_in_place(f))
    } else {
        tokio::task::spawn_blocking(f).await
    }
}

/// The address DescribeEndpoints gives for an endpoint bound to `bound`: `given` as
/// it is if it has a scheme, else `http://` (`https://` when the endpoint serves TLS)
/// and `given` or the bound address. A
/// wildcard bind (0.0.0.0, ::) advertises the address this machine routes from, and
/// loopback if it routes nowhere. AWS SDKs that always discover endpoints (Kotlin;
/// others unless told an endpoint) connect to this address, and take one without a
/// scheme as HTTPS.
pub fn advertised(given: Option<&str>, bound: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    match given {
        Some(g) if g.contains("://") => g.to_string(),
        Some(g) => format!("{scheme}://{g}"),
        None if bound.ip().is_unspecified() => {
            let ip = routable_ip(bound.is_ipv6()).unwrap_or(if bound.is_ipv6() {
                std::net::Ipv6Addr::LOCALHOST.into()
            } else {
                std::net::Ipv4Addr::LOCALHOST.into()
            });
            format!("{scheme}://{}", SocketAddr::new(ip, bound.port()))
        }
        None => format!("{scheme}://{bound}"),
    }
}

/// The local address of this machine's route to a documentation-range address:
/// connecting a UDP socket picks the route and sends nothing.
fn routable_ip(v6: bool) -> Option<std::net::IpAddr> {
    let (any, probe) = if v6 {
        ("[::]:0", "[2001:db8::1]:9")
    } else {
        ("0.0.0.0:0", "192.0.2.1:9")
    };
    let socket = std::net::UdpSocket::bind(any).ok()?;
    socket.connect(probe).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// Serves the endpoint on `listener` (through TLS with `tls`) until `shutdown` resolves; DescribeEndpoints
/// answers `address` ([`advertised`]). Scheduled queries run while it serves
/// ([`almanac_jobs::scheduled`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the node's parts the endpoint serves; Node::run is its one caller"
)]
pub async fn serve(
    ts: Arc<TimeSeries<SharedStore>>,
    sql: Arc<almanac_sql::SqlEngine>,
    scheduled: Arc<almanac_jobs::ScheduledQueries>,
    batch: Arc<almanac_jobs::BatchLoads>,
    listener: TcpListener,
    tls: Option<almanac_console::TlsIdentity>,
    gate: Arc<crate::auth::Gate>,
    address: String,
    metrics: Arc<almanac_console::Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let scheduler = tokio::spawn(run_scheduler(Arc::clone(&scheduled)));
    let write_slots = ts.store().write_concurrency();
    let app = Arc::new(App {
        ts,
        sql,
        scheduled,
        batch,
        address,
        results: Mutex::new(results::ResultCache::new(
            results::Limits::default(),
            results::random_seed(),
        )),
        query_slots: tokio::sync::Semaphore::new(query_ops::MAX_CONCURRENT_QUERIES),
        write_slots: Arc::new(tokio::sync::Semaphore::new(write_slots)),
        metrics: Arc::clone(&metrics),
        gate,
    });
    let router = Router::new()
        .fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: HeaderMap,
                  body: Bytes| {
                handle(Arc::clone(&app), Signed { method, uri }, headers, body)
            },
        )
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    let listener = almanac_console::CountedListener::new(
        listener,
        tls.as_ref(),
        metrics,
        almanac_console::Listener::Timestream,
    )?;
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await;
    scheduler.abort();
    served
}

/// Runs due scheduled queries every [`almanac_jobs::scheduled::TICK_MS`].
async fn run_scheduler(queries: Arc<almanac_jobs::ScheduledQueries>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(
        almanac_jobs::scheduled::TICK_MS,
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        queries.run_due().await;
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    fn mapped(e: OpError) -> (u16, &'static str, String) {
        let a = api_error(e);
        (a.status.as_u16(), a.name, a.message)
    }

    #[test]
    fn sql_errors_become_query_exceptions() {
        let (status, name, message) = mapped(OpError::Sql(almanac_sql::Error::Syntax {
            message: "Expected: an expression, found: )".into(),
            line: 2,
            column: 7,
        }));
        assert_eq!((status, name), (400, "ValidationException"));
        assert!(message.starts_with("line 2:7: "), "{message}");
        assert!(message.ends_with("found: )"), "{message}");
        let (status, name, message) = mapped(OpError::Sql(almanac_sql::Error::TableNotFound(
            "almanac.weather.balloons".into(),
        )));
        assert_eq!((status, name), (404, "ResourceNotFoundException"));
        assert_eq!(message, "Table weather.balloons does not exist.");
        let (status, name, _) = mapped(OpError::Sql(almanac_sql::Error::Execution(
            "Arrow error: Divide by zero error".into(),
        )));
        assert_eq!((status, name), (400, "QueryExecutionException"));
        let (status, name, _) = mapped(OpError::Sql(almanac_sql::Error::Store("io".into())));
        assert_eq!((status, name), (500, "InternalServerException"));
    }

    #[test]
    fn page_errors_become_validation_or_conflict() {
        let (_, name, message) = mapped(OpError::Page(results::PageError::Cancelled("Q1".into())));
        assert_eq!(name, "ConflictException");
        assert!(
            message.contains("Q1") && message.contains("cancelled"),
            "{message}"
        );
        let (_, name, _) = mapped(OpError::Page(results::PageError::Superseded));
        assert_eq!(name, "ValidationException");
        let (_, name, message) = mapped(OpError::NotImplemented("PrepareQuery".into()));
        assert_eq!(name, "ValidationException");
        assert!(message.contains("PrepareQuery"), "{message}");
    }

    #[test]
    fn request_context_reads_region_and_instance() {
        let mut h = HeaderMap::new();
        assert_eq!(
            RequestContext::from_headers(&h).unwrap(),
            RequestContext {
                region: DEFAULT_REGION.into(),
                instance: None
            }
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=x/20250101/eu-west-1/timestream/aws4_request, SignedHeaders=host, Signature=0",
            ),
        );
        h.insert(
            INSTANCE_HEADER,
            HeaderValue::from_static("projects/p/instances/i"),
        );
        let cx = RequestContext::from_headers(&h).unwrap();
        assert_eq!(cx.region, "eu-west-1");
        assert_eq!(cx.instance.as_deref(), Some("projects/p/instances/i"));
        h.insert(INSTANCE_HEADER, HeaderValue::from_static("instances/i"));
        assert!(matches!(
            RequestContext::from_headers(&h),
            Err(OpError::Request(m)) if m.contains(INSTANCE_HEADER)
        ));
    }
}
