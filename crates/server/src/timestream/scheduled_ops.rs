//! The scheduled-query and account-settings operations of `timestream-query`, over
//! [`almanac_jobs::ScheduledQueries`]:
//! - `CreateScheduledQuery` → `{"Arn"}`; `DescribeScheduledQuery` →
//!   `{"ScheduledQuery"}`; `ListScheduledQueries` → `{"ScheduledQueries",
//!   "NextToken"}`; `UpdateScheduledQuery` (State), `DeleteScheduledQuery` and
//!   `ExecuteScheduledQuery` (which runs the query before it answers) → `{}`.
//! - `DescribeAccountSettings` answers what applies to a local server: queries are
//!   not metered (`QueryPricingModel` `COMPUTE_UNITS`, `ComputeMode` `ON_DEMAND`).
//!   `UpdateAccountSettings` checks its members as the service does and answers the
//!   same settings: nothing of pricing or capacity applies.

use almanac_jobs::ScheduledQueryState;
use almanac_jobs::scheduled::CreateRequest;
use serde::Deserialize;
use serde_json::{Value as Json, json};

use super::{App, OpError, RequestContext};

/// A scheduled-query operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduledOp {
    /// `CreateScheduledQuery`.
    Create,
    /// `DescribeScheduledQuery`.
    Describe,
    /// `ListScheduledQueries`.
    List,
    /// `UpdateScheduledQuery`.
    Update,
    /// `DeleteScheduledQuery`.
    Delete,
    /// `ExecuteScheduledQuery`.
    Execute,
    /// `DescribeAccountSettings`.
    DescribeAccount,
    /// `UpdateAccountSettings`.
    UpdateAccount,
}

impl ScheduledOp {
    /// The operation named `op`, if it is one of these.
    pub fn named(op: &str) -> Option<Self> {
        Some(match op {
            "CreateScheduledQuery" => Self::Create,
            "DescribeScheduledQuery" => Self::Describe,
            "ListScheduledQueries" => Self::List,
            "UpdateScheduledQuery" => Self::Update,
            "DeleteScheduledQuery" => Self::Delete,
            "ExecuteScheduledQuery" => Self::Execute,
            "DescribeAccountSettings" => Self::DescribeAccount,
            "UpdateAccountSettings" => Self::UpdateAccount,
            _ => return None,
        })
    }
}

/// The members of the operations that name a scheduled query.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ArnRequest {
    scheduled_query_arn: Option<String>,
    state: Option<ScheduledQueryState>,
    /// Seconds since the epoch, as AWS JSON 1.0 sends timestamps.
    invocation_time: Option<f64>,
    max_results: Option<i64>,
    next_token: Option<String>,
}

/// `MaxQueryTCU` bounds, per the service model.
const MAX_QUERY_TCU: std::ops::RangeInclusive<i64> = 4..=1000;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AccountRequest {
    #[serde(rename = "MaxQueryTCU")]
    max_query_tcu: Option<i64>,
    query_pricing_model: Option<String>,
}

fn parse<T: for<'de> Deserialize<'de> + Default>(body: &[u8]) -> Result<T, OpError> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| OpError::Request(format!("Malformed request body: {e}")))
}

fn arn(req: &ArnRequest) -> Result<&str, OpError> {
    req.scheduled_query_arn
        .as_deref()
        .ok_or_else(|| OpError::Request("Missing required member ScheduledQueryArn.".into()))
}

/// Runs `op`; the answer is the response body.
pub async fn handle(
    app: &App,
    cx: &RequestContext,
    op: ScheduledOp,
    body: &[u8],
) -> Result<String, OpError> {
    let queries = &app.scheduled;
    let out = match op {
        ScheduledOp::Create => {
            let req: CreateRequest = serde_json::from_slice(body)
                .map_err(|e| OpError::Request(format!("Malformed request body: {e}")))?;
            json!({ "Arn": queries.create(&cx.region, req).await? })
        }
        ScheduledOp::Describe => {
            let req: ArnRequest = parse(body)?;
            json!({ "ScheduledQuery": queries.describe(arn(&req)?)? })
        }
        ScheduledOp::List => {
            let req: ArnRequest = parse(body)?;
            let (items, next) = queries.list(req.max_results, req.next_token.as_deref())?;
            let mut o = json!({ "ScheduledQueries": items });
            if let (Some(t), Some(obj)) = (next, o.as_object_mut()) {
                obj.insert("NextToken".into(), json!(t));
            }
            o
        }
        ScheduledOp::Update => {
            let req: ArnRequest = parse(body)?;
            let state = req
                .state
                .ok_or_else(|| OpError::Request("Missing required member State.".into()))?;
            queries.update(arn(&req)?, state)?;
            json!({})
        }
        ScheduledOp::Delete => {
            let req: ArnRequest = parse(body)?;
            queries.delete(arn(&req)?)?;
            json!({})
        }
        ScheduledOp::Execute => {
            let req: ArnRequest = parse(body)?;
            let at = req.invocation_time.ok_or_else(|| {
                OpError::Request("Missing required member InvocationTime.".into())
            })?;
            queries
                .execute(arn(&req)?, (at * 1000.0).round() as i64)
                .await?;
            json!({})
        }
        ScheduledOp::DescribeAccount => account_settings(),
        ScheduledOp::UpdateAccount => {
            let req: AccountRequest = parse(body)?;
            if let Some(t) = req.max_query_tcu
                && (!MAX_QUERY_TCU.contains(&t) || t % 4 != 0)
            {
                return Err(OpError::Request(format!(
                    "MaxQueryTCU {t} must be a multiple of 4 from {} to {}.",
                    MAX_QUERY_TCU.start(),
                    MAX_QUERY_TCU.end()
                )));
            }
            if let Some(m) = &req.query_pricing_model
                && m != "BYTES_SCANNED"
                && m != "COMPUTE_UNITS"
            {
                return Err(OpError::Request(format!(
                    "QueryPricingModel {m:?} must be BYTES_SCANNED or COMPUTE_UNITS."
                )));
            }
            account_settings()
        }
    };
    Ok(out.to_string())
}

/// The settings of a local server: nothing is metered.
fn account_settings() -> Json {
    json!({
        "QueryPricingModel": "COMPUTE_UNITS",
        "QueryCompute": { "ComputeMode": "ON_DEMAND" },
    })
}
