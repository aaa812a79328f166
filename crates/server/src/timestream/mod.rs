//! The Timestream-compatible HTTP endpoint (`almanac serve --timestream-addr`): the
//! AWS JSON 1.0 protocol of `timestream-write`, so boto3 pointed at it with
//! `endpoint_url` works unchanged.
//!
//! A request, step by step:
//! 1. axum accepts `POST /` (any path); the `X-Amz-Target` header names the service
//!    and operation (`Timestream_20181101.WriteRecords`). SigV4 signatures are not
//!    checked: like the Bigtable emulator endpoint, this is a local server.
//! 2. The JSON body parses into [`wire::Request`] (a malformed body is a
//!    `ValidationException` naming serde's complaint and position).
//! 3. The operation ([`write_ops`]) runs on tokio's blocking pool against the
//!    [`almanac_timeseries::TimeSeries`] service.
//! 4. Success is HTTP 200 with the output shape; a [`almanac_timeseries::Error`]
//!    becomes the service's modeled exception in exactly one place ([`api_error`]):
//!    `{"__type": "com.amazonaws.timestreamwrite#<Name>", "Message": …}` with its HTTP
//!    status, plus `RejectedRecords` for `RejectedRecordsException`.

pub mod wire;
pub mod write_ops;

use std::future::Future;
use std::sync::Arc;

use almanac_timeseries::{EmbeddedStore, Error, TimeSeries};
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};
use tokio::net::TcpListener;

/// Largest request body: 100 records of 2 KB dimensions and values fit many times over.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// `X-Amz-Target` service prefix of `timestream-write`.
pub const WRITE_TARGET: &str = "Timestream_20181101";
/// Content type of AWS JSON 1.0.
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// Namespace of the error `__type`s.
const ERROR_NAMESPACE: &str = "com.amazonaws.timestreamwrite";

/// Shared state of the endpoint.
#[derive(Debug)]
pub struct App {
    /// The service.
    pub ts: Arc<TimeSeries<EmbeddedStore>>,
    /// SQL over the same tables (the Query API).
    pub sql: Arc<almanac_sql::SqlEngine>,
    /// `host:port` this endpoint answers on (DescribeEndpoints).
    pub address: String,
    /// Region named in ARNs.
    pub region: String,
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

/// The one mapping from time-series errors to Timestream's exceptions and statuses.
pub fn api_error(e: Error) -> ApiError {
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
        e @ (Error::Store(_) | Error::Corrupt(_)) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerException",
            e.to_string(),
        ),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "__type": format!("{ERROR_NAMESPACE}#{}", self.name),
            "Message": self.message,
            "message": self.message,
        });
        if let (Some((k, v)), Some(obj)) = (self.extra, body.as_object_mut()) {
            obj.insert(k.into(), v);
        }
        json_response(self.status, &body)
    }
}

fn json_response(status: StatusCode, body: &Json) -> Response {
    let mut resp = (status, body.to_string()).into_response();
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

fn dispatch(app: &App, op: &str, body: &[u8]) -> Result<Json, ApiError> {
    let req: wire::Request = if body.is_empty() {
        wire::Request::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::validation(format!("Malformed request body: {e}")))?
    };
    use write_ops as w;
    let out = match op {
        "DescribeEndpoints" => Ok(w::describe_endpoints(app)),
        "CreateDatabase" => w::create_database(app, &req),
        "DescribeDatabase" => w::describe_database(app, &req),
        "ListDatabases" => w::list_databases(app, &req),
        "UpdateDatabase" => w::update_database(app, &req),
        "DeleteDatabase" => w::delete_database(app, &req),
        "CreateTable" => w::create_table(app, &req),
        "DescribeTable" => w::describe_table(app, &req),
        "ListTables" => w::list_tables(app, &req),
        "UpdateTable" => w::update_table(app, &req),
        "DeleteTable" => w::delete_table(app, &req),
        "WriteRecords" => w::write_records(app, req),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "UnknownOperationException",
                format!("Almanac does not implement the timestream-write operation {op}."),
            ));
        }
    };
    out.map_err(api_error)
}

async fn handle(app: Arc<App>, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some((service, op)) = target.split_once('.') else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            format!("X-Amz-Target {target:?} does not name an operation."),
        )
        .into_response();
    };
    if service != WRITE_TARGET {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            format!("Almanac does not serve {service} (only {WRITE_TARGET}, timestream-write)."),
        )
        .into_response();
    }
    let op = op.to_string();
    let app = match region_of(&headers) {
        Some(r) if r != app.region => Arc::new(App {
            ts: Arc::clone(&app.ts),
            sql: Arc::clone(&app.sql),
            address: app.address.clone(),
            region: r,
        }),
        _ => app,
    };
    match tokio::task::spawn_blocking(move || dispatch(&app, &op, &body)).await {
        Ok(Ok(json)) => json_response(StatusCode::OK, &json),
        Ok(Err(e)) => e.into_response(),
        Err(join) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerException",
            format!("handler failed: {join}"),
        )
        .into_response(),
    }
}

/// Serves the endpoint on `listener` until `shutdown` resolves.
pub async fn serve(
    ts: Arc<TimeSeries<EmbeddedStore>>,
    sql: Arc<almanac_sql::SqlEngine>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let address = listener.local_addr()?.to_string();
    let app = Arc::new(App {
        ts,
        sql,
        address,
        region: "us-east-1".into(),
    });
    let router = Router::new()
        .fallback(move |headers: HeaderMap, body: Bytes| handle(Arc::clone(&app), headers, body))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
