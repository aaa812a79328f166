//! `PrepareQuery` and `ExecuteQuery`: GoogleSQL for Bigtable over [`almanac_sql`].
//!
//! A query, step by step:
//! 1. **PrepareQuery** checks the instance name and the text, binds every declared
//!    parameter to a NULL of its type ([`types::param_arrow_type`]), and plans the query
//!    (syntax, tables, columns and types are checked here) to learn its columns. It
//!    answers with their `ResultSetMetadata` ([`types::sql_type`]) and a
//!    `prepared_query` token ([`token`]): the instance, the text, the parameter types
//!    and a checksum of the metadata. Almanac keeps no state per prepared query.
//! 2. **ExecuteQuery** opens the token (anything else is `INVALID_ARGUMENT`), checks
//!    that the instance matches and that `params` are exactly the declared ones,
//!    converts them to DataFusion scalars ([`values::param_value`]) and plans again. If
//!    the columns no longer match what the client was told (a family was added or
//!    dropped in between) the call fails with `FAILED_PRECONDITION`.
//! 3. A task pulls record batches as DataFusion produces them, turns each column into
//!    `Value`s ([`values::column_values`]) and frames the rows into checksummed
//!    `ProtoRows` batches with resume tokens ([`frames`]), sent through a bounded
//!    channel: a slow client slows the query, a gone client stops it.
//! 4. A call with a `resume_token` (the client's retry) runs the query again and
//!    continues after the rows the client has ([`frames`] checks they are the same).
//! 5. SQL errors become statuses in [`crate::status::sql_status`]: syntax errors are
//!    `INVALID_ARGUMENT` with their line and column, unknown tables `NOT_FOUND`.
//!
//! The deprecated form (`query` instead of `prepared_query`, parameter types taken from
//! the values) also works; its stream starts with the `metadata` response.

pub mod frames;
pub mod token;
pub mod types;
pub mod values;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use crate::auth::Caller;
use almanac_api::google::bigtable::v2 as pb;
use almanac_sql::SqlEngine;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ParamValues;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codegen::BoxStream;

use self::frames::Framer;
use self::token::{PreparedQuery, ResumePoint};
use crate::crc32c;
use crate::names;
use crate::status::{IntoStatus, invalid, sql_status};

/// Longest query text accepted: far beyond any written query, it stops a runaway
/// generated one before the parser and planner spend time on it.
pub const MAX_QUERY_BYTES: usize = 1024 * 1024;
/// The `valid_until` a prepared query is given. Tokens do not actually expire
/// (ExecuteQuery plans again from the text); this only tells clients when to refresh.
pub const PREPARED_QUERY_VALID_FOR: Duration = Duration::from_secs(60 * 60);
/// Responses buffered per ExecuteQuery call: enough to keep the connection busy while
/// the next batch is computed, few enough that a slow client holds little memory.
const RESULT_CHANNEL_DEPTH: usize = 4;

type Item = Result<pb::ExecuteQueryResponse, Status>;

/// PrepareQuery at time `now` (see the module docs).
pub async fn prepare_query(
    sql: &SqlEngine,
    req: pb::PrepareQueryRequest,
    caller: Caller,
    now: SystemTime,
) -> Result<pb::PrepareQueryResponse, Status> {
    let instance = names::instance(&req.instance_name)?;
    check_text(&req.query)?;
    let param_types: BTreeMap<String, pb::Type> = req.param_types.into_iter().collect();
    let params = bind(&param_types, &HashMap::new(), Binding::TypedNulls)?;
    let prepared = sql
        .prepare(&req.query, &caller.sql_scope(instance.clone()), params)
        .await
        .status()?;
    check_declared(&req.query, &param_types)?;
    let metadata = metadata(&prepared.schema)?;
    let token = PreparedQuery {
        instance,
        query: req.query,
        param_types,
        metadata_crc: crc32c::checksum(&metadata.encode_to_vec()),
    };
    Ok(pb::PrepareQueryResponse {
        metadata: Some(metadata),
        prepared_query: token.seal().into(),
        valid_until: Some((now + PREPARED_QUERY_VALID_FOR).into()),
    })
}

/// ExecuteQuery (see the module docs).
pub async fn execute_query(
    sql: &SqlEngine,
    mut req: pb::ExecuteQueryRequest,
    caller: Caller,
) -> Result<BoxStream<pb::ExecuteQueryResponse>, Status> {
    let instance = names::instance(&req.instance_name)?;
    if !req.view_parameters.is_empty() {
        return Err(Status::unimplemented(
            "view_parameters (authorized views) are not supported by Almanac",
        ));
    }
    let resume = if req.resume_token.is_empty() {
        None
    } else {
        Some(ResumePoint::open(&req.resume_token)?)
    };
    let (query, param_types, prepared_crc) = if !req.prepared_query.is_empty() {
        let p = PreparedQuery::open(&req.prepared_query)?;
        if p.instance != instance {
            return Err(invalid(format!(
                "prepared_query was prepared for instance {}, not {instance}",
                p.instance
            )));
        }
        (p.query, p.param_types, Some(p.metadata_crc))
    } else if let Some(query) = legacy_query(&mut req) {
        (query, legacy_param_types(&req.params)?, None)
    } else {
        return Err(invalid("prepared_query is required"));
    };
    check_text(&query)?;
    let params = bind(&param_types, &req.params, Binding::Values)?;
    let prepared = sql
        .prepare(&query, &caller.sql_scope(instance), params)
        .await
        .status()?;
    if prepared_crc.is_none() {
        check_declared(&query, &param_types)?;
    }
    let metadata = metadata(&prepared.schema)?;
    if prepared_crc.is_some_and(|crc| crc != crc32c::checksum(&metadata.encode_to_vec())) {
        return Err(Status::failed_precondition(
            "the query's result columns changed since it was prepared (was a column family \
             added or dropped?); prepare it again",
        ));
    }
    let (rows, _scan) = prepared.stream().await.status()?;
    let (tx, rx) = mpsc::channel(RESULT_CHANNEL_DEPTH);
    let first = prepared_crc.is_none().then(|| pb::ExecuteQueryResponse {
        response: Some(pb::execute_query_response::Response::Metadata(metadata)),
    });
    tokio::spawn(pump(rows, Framer::new(resume), first, tx));
    Ok(Box::pin(ReceiverStream::new(rx)))
}

fn check_text(query: &str) -> Result<(), Status> {
    if query.trim().is_empty() {
        return Err(invalid("query is required"));
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(invalid(format!(
            "query is {} bytes, more than the {MAX_QUERY_BYTES} allowed",
            query.len()
        )));
    }
    Ok(())
}

/// Refuses a query that uses a parameter with no declared type. DataFusion would plan
/// it and only fail once run, as an internal error.
fn check_declared(query: &str, types: &BTreeMap<String, pb::Type>) -> Result<(), Status> {
    let text = almanac_sql::rewrite::rewrite_googlesql(query).status()?;
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, &text).tokenize() else {
        // The query was planned, so it tokenizes; if not, the planner has spoken.
        return Ok(());
    };
    for token in tokens {
        if let Token::Placeholder(p) = token {
            let name = p.strip_prefix('$').unwrap_or(&p);
            if !types.contains_key(name) {
                return Err(invalid(format!(
                    "query parameter @{name} has no declared type (param_types)"
                )));
            }
        }
    }
    Ok(())
}

/// The result columns as the client is told them.
fn metadata(schema: &Schema) -> Result<pb::ResultSetMetadata, Status> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            Ok(pb::ColumnMetadata {
                name: f.name().clone(),
                r#type: Some(types::sql_type(f.data_type())?),
            })
        })
        .collect::<Result<_, Status>>()?;
    Ok(pb::ResultSetMetadata {
        schema: Some(pb::result_set_metadata::Schema::ProtoSchema(
            pb::ProtoSchema { columns },
        )),
    })
}

/// What parameters are bound to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Binding {
    /// NULLs of the declared types (PrepareQuery: planning needs only the types).
    TypedNulls,
    /// The request's values, which must be exactly the declared parameters.
    Values,
}

/// DataFusion's parameters (`None` when there are none).
fn bind(
    types: &BTreeMap<String, pb::Type>,
    given: &HashMap<String, pb::Value>,
    binding: Binding,
) -> Result<Option<ParamValues>, Status> {
    if let Some(extra) = given.keys().find(|name| !types.contains_key(*name)) {
        return Err(invalid(format!(
            "parameter @{extra} has a value but was not declared when the query was prepared"
        )));
    }
    let null = pb::Value::default();
    let mut bound = Vec::with_capacity(types.len());
    for (name, t) in types {
        let v = match binding {
            Binding::TypedNulls => &null,
            Binding::Values => given
                .get(name)
                .ok_or_else(|| invalid(format!("no value for parameter @{name}")))?,
        };
        if let Some(said) = &v.r#type
            && said.kind.as_ref().map(types::kind_name) != t.kind.as_ref().map(types::kind_name)
        {
            return Err(invalid(format!(
                "parameter @{name}: the value's type is not the one it was prepared with"
            )));
        }
        bound.push((name.clone(), values::param_value(name, v, t)?));
    }
    Ok((!bound.is_empty()).then(|| ParamValues::from(bound)))
}

/// The text of a deprecated unprepared call, if it is one.
#[expect(deprecated, reason = "older clients still send the unprepared form")]
fn legacy_query(req: &mut pb::ExecuteQueryRequest) -> Option<String> {
    (!req.query.is_empty()).then(|| std::mem::take(&mut req.query))
}

/// Parameter types of a deprecated unprepared call: each value names its own.
fn legacy_param_types(
    params: &HashMap<String, pb::Value>,
) -> Result<BTreeMap<String, pb::Type>, Status> {
    params
        .iter()
        .map(|(name, v)| {
            let t = v
                .r#type
                .clone()
                .ok_or_else(|| invalid(format!("parameter @{name} has no type")))?;
            Ok((name.clone(), t))
        })
        .collect()
}

/// One `Value` per row for each column of `batch`.
fn batch_columns(batch: &RecordBatch) -> Result<Vec<Vec<pb::Value>>, Status> {
    batch
        .columns()
        .iter()
        .map(|c| values::column_values(c.as_ref()))
        .collect()
}

/// Streams the query's rows to the client until the end, an error, or the client
/// leaving (which drops the query).
async fn pump(
    mut rows: SendableRecordBatchStream,
    mut framer: Framer,
    first: Option<pb::ExecuteQueryResponse>,
    tx: mpsc::Sender<Item>,
) {
    if let Some(first) = first
        && tx.send(Ok(first)).await.is_err()
    {
        return;
    }
    let mut out = Vec::new();
    let end = loop {
        let next = tokio::select! {
            next = rows.next() => next,
            () = tx.closed() => return,
        };
        let Some(batch) = next else {
            break framer.finish(&mut out);
        };
        let pushed = batch
            .map_err(|e| sql_status(&almanac_sql::Error::from(e)))
            .and_then(|b| batch_columns(&b))
            .and_then(|columns| framer.push(&columns, &mut out));
        if let Err(e) = pushed {
            break Err(e);
        }
        if !send(&tx, &mut out).await {
            return;
        }
    };
    if !send(&tx, &mut out).await {
        return;
    }
    if let Err(e) = end {
        // The client may be gone already; nothing more to do either way.
        let _ = tx.send(Err(e)).await;
    }
}

/// Sends the framed messages; `false` if the client is gone.
async fn send(tx: &mpsc::Sender<Item>, out: &mut Vec<pb::PartialResultSet>) -> bool {
    for results in out.drain(..) {
        let response = pb::ExecuteQueryResponse {
            response: Some(pb::execute_query_response::Response::Results(results)),
        };
        if tx.send(Ok(response)).await.is_err() {
            return false;
        }
    }
    true
}
