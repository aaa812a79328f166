//! One run of a scheduled query, step by step:
//! 1. The query is planned with `@scheduled_runtime` bound to the invocation time.
//! 2. Without a `TargetConfiguration` the rows are counted and dropped. With one, the
//!    mapping is resolved against the result's columns, and each batch of rows is
//!    turned into text cells ([`crate::rows::text_rows`]: times and TIMESTAMP measures as
//!    nanoseconds) and written ([`crate::sink`]), every record with the run's trigger
//!    time in milliseconds as its version, so that running an invocation again
//!    replaces what it wrote before.
//! 3. The summary holds the counts; a run that failed, or whose rows were refused,
//!    gets an error report ([`super::report`]).

use std::sync::Arc;

use almanac_sql::arrow::datatypes::DataType;
use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{MeasureType, SharedStore, TimeSeries};
use datafusion::common::{ParamValues, ScalarValue};
use tokio_stream::StreamExt;

use crate::error::{Error, Result};
use crate::mapping::Spec;
use crate::sink::{self, Written};

/// The parameter a scheduled query's text may name.
pub const SCHEDULED_RUNTIME: &str = "@scheduled_runtime";

/// The parameter values of a run at `invocation_ms`.
pub fn parameters(invocation_ms: i64) -> ParamValues {
    ParamValues::from(vec![(
        SCHEDULED_RUNTIME[1..].to_string(),
        ScalarValue::TimestampNanosecond(Some(invocation_ms.saturating_mul(1_000_000)), None),
    )])
}

/// Where a run writes.
#[derive(Debug, Clone)]
pub struct Target {
    /// Database.
    pub database: String,
    /// Table.
    pub table: String,
    /// The mapping.
    pub spec: Spec,
}

/// Plans `sql` for `invocation_ms` and checks `target`'s mapping against its
/// columns (the checks CreateScheduledQuery makes).
pub async fn check(
    sql_engine: &SqlEngine,
    sql: &str,
    target: Option<&Target>,
    invocation_ms: i64,
) -> Result<()> {
    let prepared = sql_engine
        .prepare(sql, &Scope::default(), Some(parameters(invocation_ms)))
        .await?;
    let Some(target) = target else {
        return Ok(());
    };
    for (column, kind) in target.spec.columns() {
        let field = prepared.schema.field_with_name(column).map_err(|_| {
            Error::invalid(format!(
                "The query has no column {column:?}, which TargetConfiguration maps; its columns are {}.",
                prepared
                    .schema
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !compatible(field.data_type(), kind) {
            return Err(Error::invalid(format!(
                "Column {column:?} is of type {}, which cannot be written as {}.",
                field.data_type(),
                kind.as_str()
            )));
        }
    }
    Ok(())
}

/// Whether a column of type `t` can be written as `kind`.
fn compatible(t: &DataType, kind: MeasureType) -> bool {
    match kind {
        MeasureType::Varchar => {
            matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
        }
        MeasureType::Timestamp => matches!(t, DataType::Timestamp(..)),
        MeasureType::Double => t.is_numeric(),
        MeasureType::Bigint => t.is_integer(),
        MeasureType::Boolean => matches!(t, DataType::Boolean),
        MeasureType::Multi => false,
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Rows the query produced.
    pub result_rows: u64,
    /// Records written, rows refused.
    pub written: Written,
}

/// Runs `sql` at `invocation_ms`, writing into `target` with `version`; `out` counts
/// what was done, also when the run fails part way.
pub async fn execute(
    sql_engine: &SqlEngine,
    ts: &Arc<TimeSeries<SharedStore>>,
    sql: &str,
    target: Option<&Target>,
    (invocation_ms, version): (i64, i64),
    out: &mut Outcome,
) -> Result<()> {
    let prepared = sql_engine
        .prepare(sql, &Scope::default(), Some(parameters(invocation_ms)))
        .await?;
    let header: Vec<String> = prepared
        .schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let model = match target {
        Some(t) => Some(t.spec.bind(&header).map_err(Error::invalid)?),
        None => None,
    };
    let (mut stream, _) = prepared.stream().await?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(almanac_sql::Error::from)?;
        let numbers: Vec<u64> =
            (out.result_rows + 1..=out.result_rows + batch.num_rows() as u64).collect();
        out.result_rows += batch.num_rows() as u64;
        let (Some(target), Some(model)) = (target, &model) else {
            continue;
        };
        let rows = crate::rows::text_rows(batch.columns())?;
        let (ts, target, model) = (Arc::clone(ts), target.clone(), model.clone());
        let mut written = std::mem::take(&mut out.written);
        let (written, result) = tokio::task::spawn_blocking(move || {
            let to = sink::Destination {
                database: &target.database,
                table: &target.table,
                model: &model,
                version: Some(version),
            };
            let result = sink::write_rows(&ts, to, &rows, &numbers, &mut written);
            (written, result)
        })
        .await
        .map_err(|e| Error::Internal(format!("a scheduled run's write task failed: {e}")))?;
        out.written = written;
        result?;
    }
    Ok(())
}
