//! The schema advisor: checks a live table against the warnings of Bigtable's
//! schema design guides ("Schema design best practices", "Schema design for time
//! series data") and Timestream's data-modeling guidance, each finding with its
//! evidence and the fix the guides recommend.
//!
//! ## A check, step by step
//! 1. Sample the table ([`sample`]): up to [`SAMPLE_ROWS`] rows spread over its key
//!    space (from SampleRowKeys' split points), every cell of each.
//! 2. Read the access counters of the last hour ([`almanac_engine::access`]).
//! 3. Run every rule of the table's kind: row keys ([`keys`]), families and cells
//!    ([`cells`]), write skew ([`skew`]); for a time-series table, its series and
//!    records ([`series`]) over the catalog and a sample of points.
//! 4. A rule fires only past a clear threshold (a named constant beside it), so a
//!    table that follows the guides gets no finding.

mod cells;
mod keys;
mod sample;
mod series;
mod skew;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use serde::Serialize;
use serde_json::Value;

use crate::api::{TableRef, blocking};
use crate::{Console, Result};

pub use sample::SAMPLE_ROWS;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Costs performance or money now, or will as the table grows.
    Warning,
    /// Worth knowing; may be deliberate.
    Info,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Rule id (`timestamp-first-key`, …).
    pub rule: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// What in the table shows it.
    pub evidence: String,
    /// What the guides recommend.
    pub fix: String,
    /// Which guide says so.
    pub guide: &'static str,
}

/// A table's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The table.
    pub table: String,
    /// Every rule run.
    pub checked: Vec<&'static str>,
    /// What fired.
    pub findings: Vec<Finding>,
}

const BIGTABLE_GUIDE: &str = "Bigtable: Schema design best practices";
const SERIES_GUIDE: &str = "Bigtable: Schema design for time series data";
const TIMESTREAM_GUIDE: &str = "Timestream: data modeling";

/// Checks `table`.
pub fn lint(c: &Console, table: &TableRef) -> Result<Report> {
    let (instance, storage) = table.storage(c)?;
    let mut findings = Vec::new();
    let mut checked = Vec::new();
    match table {
        TableRef::Bigtable { .. } => {
            let info = c.engine.get_table(&instance, &storage)?;
            let rows = sample::rows(&c.engine, &instance, &storage)?;
            let skew = skew::WriteSkew::last_hour(&c.engine, &instance, &storage)?;
            keys::check(&rows, skew.as_ref(), &mut findings, &mut checked);
            cells::check(&info, &rows, &mut findings, &mut checked);
            skew::check(
                skew.as_ref(),
                &findings.clone(),
                &mut findings,
                &mut checked,
            );
        }
        TableRef::Series { database, table } => {
            series::check(c, database, table, &mut findings, &mut checked)?;
        }
    }
    Ok(Report {
        table: table.label(),
        checked,
        findings,
    })
}

/// `/api/lint`.
pub async fn lint_handler(
    State(c): State<Arc<Console>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>> {
    let table = TableRef::from_query(&q, &c.default_instance)?;
    let console = Arc::clone(&c);
    let report = blocking(move || lint(&console, &table)).await?;
    Ok(Json(serde_json::to_value(report).unwrap_or(Value::Null)))
}

/// `part` of `whole` as a whole percentage.
fn percent(part: usize, whole: usize) -> usize {
    (part * 100).checked_div(whole).unwrap_or(0)
}
