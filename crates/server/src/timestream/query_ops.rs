//! The operations of `timestream-query`.
//!
//! `Query`, step by step:
//! 1. The members are checked ([`requests`]): `QueryString` (1..=[`requests::MAX_QUERY_STRING_BYTES`]),
//!    `MaxRows` (1..=[`MAX_ROWS`]; without it a page holds what fits in
//!    [`MAX_PAGE_BYTES`]), `ClientToken` (32..=128 characters, otherwise unused: every
//!    call without `NextToken` runs the query anew).
//! 2. With a `NextToken`, the page comes from the [`results`](super::results) cache
//!    and nothing runs.
//! 3. Otherwise [`almanac_sql::SqlEngine`] plans the query in the request's scope
//!    (`"db"."table"` names are time-series tables; bare names are the Bigtable tables
//!    of [`INSTANCE_HEADER`](super::INSTANCE_HEADER) when given) and streams it; every
//!    row is encoded as a `Row` as it arrives ([`query_wire`]). A result larger than
//!    [`MAX_RESULT_BYTES`] fails rather than fill the memory; at most
//!    [`MAX_CONCURRENT_QUERIES`] run at once, the others wait. The SQL engine bounds
//!    each query's memory and time ([`almanac_sql::budget`]; 60 s by default, as the
//!    service); a client that closes its connection drops this future, and with it the
//!    query.
//! 4. The first page is answered; the rest wait in the cache under the `NextToken`.
//!
//! `QueryStatus` says `ProgressPercentage` 100 (a query has finished by its first
//! page) and 0 bytes scanned and metered: storage counts rows and cells, not bytes.
//! Those counts come in an extra member, `Almanac` (`RowsRead`, `CellsRead`,
//! `RowsProduced`, `ResultRows`), which SDKs ignore.
//!
//! `CancelQuery` drops a query's waiting pages; it is idempotent, and a token of a
//! cancelled query then fails with `ConflictException` (the model's "unable to poll
//! results for a cancelled query").
//!
//! `PrepareQuery` with `ValidateOnly` (the only form the service accepts) plans the
//! query without running it and answers its `Columns` (`Name`, `Type`; not `Aliased`,
//! which the plan does not keep)
//! and `Parameters`: `@scheduled_runtime`, a TIMESTAMP, when the query names it (it
//! is planned with the current time in its place).
//!
//! Scheduled queries and account settings are served by
//! [`scheduled_ops`](super::scheduled_ops).

use std::time::Instant;

use almanac_sql::Scope;
use serde_json::json;
use tokio_stream::StreamExt;

use super::query_wire::{self, QueryRequest};
use super::results::{Ended, Header, Page, ResultCache, Rows};
use super::{App, OpError, RequestContext};
use crate::auth::Caller;

/// Largest `MaxRows`, per the service model.
pub const MAX_ROWS: i64 = 1000;
/// Rows of a page stay under this many bytes of JSON: the service pages at 1 MB.
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Largest result a query may produce (encoded rows): the whole result is held in
/// memory for its pages, so a runaway `SELECT *` fails instead of exhausting it.
pub const MAX_RESULT_BYTES: usize = 64 * 1024 * 1024;
/// Queries running at once; more wait their turn. With [`MAX_RESULT_BYTES`] this
/// bounds the memory of results being built (8 × 64 MiB).
pub const MAX_CONCURRENT_QUERIES: usize = 8;

/// A `timestream-query` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryOp {
    /// `Query`.
    Query,
    /// `CancelQuery`.
    CancelQuery,
    /// `PrepareQuery`.
    PrepareQuery,
}

impl QueryOp {
    /// The query operation named `op`, if it is one (`DescribeEndpoints` is served
    /// by the write side for both).
    pub fn named(op: &str) -> Option<Self> {
        match op {
            "Query" => Some(Self::Query),
            "CancelQuery" => Some(Self::CancelQuery),
            "PrepareQuery" => Some(Self::PrepareQuery),
            _ => None,
        }
    }
}

/// Runs `op`; the answer is the response body.
pub async fn handle(
    app: &App,
    cx: &RequestContext,
    caller: &Caller,
    op: QueryOp,
    body: &[u8],
) -> Result<String, OpError> {
    let req = request(body)?;
    match op {
        QueryOp::Query => query(app, cx, caller, &req).await,
        QueryOp::CancelQuery => cancel_query(app, caller, &req),
        QueryOp::PrepareQuery => prepare_query(app, cx, caller, &req).await,
    }
}

/// The members of a body (an empty body has none).
fn request(body: &[u8]) -> Result<QueryRequest, OpError> {
    if body.is_empty() {
        return Ok(QueryRequest::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| OpError::Request(format!("Malformed request body: {e}")))
}

/// `Query` and `CancelQuery` as far as they go without SQL, for the fuzz target
/// `fuzz/fuzz_targets/timestream_query.rs` (not an API): the body read and checked as
/// [`handle`] and [`query`] read it, then the page at its `NextToken` answered from
/// `cache`, or without one, its `QueryId` cancelled there.
#[doc(hidden)]
pub fn answer_from_cache(
    cache: &mut ResultCache,
    body: &[u8],
    owner: &str,
    now: Instant,
) -> Result<String, OpError> {
    let req = request(body)?;
    if req.next_token.is_none()
        && let Some(id) = &req.query_id
    {
        let ended = cache.cancel(id, owner, now)?;
        return Ok(json!({ "Ended": ended.map(Ended::reason) }).to_string());
    }
    let sql = query_string(&req)?;
    let max_rows = page_rows(req.max_rows)?;
    requests::check_client_token(req.client_token.as_deref())?;
    let token = req.next_token.as_deref().unwrap_or_default();
    let page = cache.page(token, sql, owner, max_rows, MAX_PAGE_BYTES, now)?;
    Ok(render(&page))
}

use almanac_jobs::requests;
use almanac_jobs::scheduled::run::SCHEDULED_RUNTIME;

/// `PrepareQuery` (see the module docs).
async fn prepare_query(
    app: &App,
    cx: &RequestContext,
    caller: &Caller,
    req: &QueryRequest,
) -> Result<String, OpError> {
    let sql = query_string(req)?;
    if req.validate_only != Some(true) {
        return Err(OpError::Request(
            "PrepareQuery takes ValidateOnly = true only (as the service does): prepared queries are not stored.".into(),
        ));
    }
    let scope = Scope {
        instance: cx.instance.clone(),
        dialect: almanac_sql::Dialect::Timestream,
        access: caller.table_access(),
    };
    let scheduled = sql.contains(SCHEDULED_RUNTIME);
    let params = scheduled.then(|| {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        almanac_jobs::scheduled::run::parameters(now_ms)
    });
    let prepared = app.sql.prepare(sql, &scope, params).await?;
    let columns = query_wire::column_infos(&prepared.schema).map_err(OpError::Result)?;
    let parameters: Vec<serde_json::Value> = if scheduled {
        vec![json!({ "Name": SCHEDULED_RUNTIME, "Type": { "ScalarType": "TIMESTAMP" } })]
    } else {
        Vec::new()
    };
    Ok(json!({ "QueryString": sql, "Columns": columns, "Parameters": parameters }).to_string())
}

/// `MaxRows`: rows per page, or unbounded (the byte cap still applies).
fn page_rows(max_rows: Option<i64>) -> Result<usize, OpError> {
    match max_rows {
        None => Ok(usize::MAX),
        Some(n) if (1..=MAX_ROWS).contains(&n) => Ok(n as usize),
        Some(n) => Err(OpError::Request(format!(
            "MaxRows {n} is outside [1, {MAX_ROWS}]."
        ))),
    }
}

fn query_string(req: &QueryRequest) -> Result<&str, OpError> {
    let sql = req
        .query_string
        .as_deref()
        .ok_or_else(|| OpError::Request("Missing required member QueryString.".into()))?;
    requests::check_query_string(sql)?;
    Ok(sql)
}

/// `Query`.
pub async fn query(
    app: &App,
    cx: &RequestContext,
    caller: &Caller,
    req: &QueryRequest,
) -> Result<String, OpError> {
    let sql = query_string(req)?;
    let max_rows = page_rows(req.max_rows)?;
    requests::check_client_token(req.client_token.as_deref())?;
    if let Some(token) = &req.next_token {
        let page = app.results().page(
            token,
            sql,
            caller.name(),
            max_rows,
            MAX_PAGE_BYTES,
            Instant::now(),
        )?;
        return Ok(render(&page));
    }

    // Held until the result is encoded: bounds the memory of results in the making.
    let _slot = app
        .query_slots
        .acquire()
        .await
        .map_err(|e| OpError::Internal(format!("query slots: {e}")))?;
    let scope = Scope {
        instance: cx.instance.clone(),
        dialect: almanac_sql::Dialect::Timestream,
        access: caller.table_access(),
    };
    let prepared = app.sql.prepare(sql, &scope, None).await?;
    let columns = query_wire::column_infos(&prepared.schema).map_err(OpError::Result)?;
    let (mut stream, counters) = prepared.stream().await?;
    let mut rows = Rows::default();
    let mut row = String::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(almanac_sql::Error::from)?;
        let arrays = query_wire::decoded_columns(&batch).map_err(OpError::Result)?;
        for i in 0..batch.num_rows() {
            row.clear();
            query_wire::push_row(&mut row, &arrays, i).map_err(OpError::Result)?;
            if row.len() > MAX_PAGE_BYTES {
                return Err(OpError::Result(
                    "Query aborted as max page response size has been exceeded by the output result row.".into(),
                ));
            }
            if rows.bytes() + row.len() > MAX_RESULT_BYTES {
                return Err(OpError::Result(format!(
                    "The result exceeds {MAX_RESULT_BYTES} bytes, the most Almanac keeps for pagination; add a LIMIT or narrow the query."
                )));
            }
            rows.push(&row);
        }
    }
    let scan = counters.totals();
    let extension = json!({
        "RowsRead": scan.rows_read,
        "CellsRead": scan.cells_read,
        "RowsProduced": scan.rows_produced,
        "ResultRows": rows.len(),
    });

    let mut cache = app.results();
    let header = Header {
        query_id: cache.new_query_id(),
        owner: caller.name().into(),
        columns: columns.to_string().into(),
        extension: format!("\"Almanac\":{extension}").into(),
    };
    let end = rows.page_end(0, max_rows, MAX_PAGE_BYTES);
    let first = rows.slice(0, end);
    let next_token = if end < rows.len() {
        let token = cache
            .insert(header.clone(), sql, rows, end, Instant::now())
            .map_err(|bytes| {
                OpError::Result(format!(
                    "The result needs {bytes} bytes, more than the results cache holds; add a LIMIT or narrow the query."
                ))
            })?;
        Some(token)
    } else {
        cache.finished(&header);
        None
    };
    drop(cache);
    Ok(render(&Page {
        header,
        rows: first,
        row_count: end,
        next_token,
    }))
}

/// The `QueryResponse` JSON of a page.
fn render(page: &Page) -> String {
    let h = &page.header;
    let mut out = String::with_capacity(page.rows.len() + h.columns.len() + 256);
    out.push_str("{\"QueryId\":");
    out.push_str(&json!(h.query_id).to_string());
    out.push_str(",\"Rows\":[");
    out.push_str(&page.rows);
    out.push_str("],\"ColumnInfo\":");
    out.push_str(&h.columns);
    out.push_str(
        ",\"QueryStatus\":{\"ProgressPercentage\":100.0,\"CumulativeBytesScanned\":0,\"CumulativeBytesMetered\":0}",
    );
    if let Some(t) = &page.next_token {
        out.push_str(",\"NextToken\":");
        out.push_str(&json!(t).to_string());
    }
    if !h.extension.is_empty() {
        out.push(',');
        out.push_str(&h.extension);
    }
    out.push('}');
    out
}

/// `CancelQuery`.
pub fn cancel_query(app: &App, caller: &Caller, req: &QueryRequest) -> Result<String, OpError> {
    let id = req
        .query_id
        .as_deref()
        .ok_or_else(|| OpError::Request("Missing required member QueryId.".into()))?;
    let message = match app.results().cancel(id, caller.name(), Instant::now())? {
        None => format!("Query {id} was cancelled; its remaining pages were dropped."),
        Some(Ended::Cancelled) => format!("Query {id} has already been cancelled."),
        Some(how) => format!(
            "Query {id} had already finished (its results {}); nothing to cancel.",
            how.reason()
        ),
    };
    Ok(json!({ "CancellationMessage": message }).to_string())
}
