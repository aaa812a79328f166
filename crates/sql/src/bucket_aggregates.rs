//! Aggregates over whole sealed buckets, answered from block summaries instead of
//! points: a logical optimizer rule.
//!
//! `SELECT bin(time, 1h), hostname, avg(usage_user) … GROUP BY 1, 2` over a table
//! sealed by the hour needs, per series and hour, only the count and sum of one
//! column, and every sealed bucket keeps those in its summary
//! ([`almanac_timeseries::block::BlockSummary`]). The rule rewrites
//!
//! ```text
//! Aggregate(groups, aggs) ← [Filter | SubqueryAlias]* ← TableScan(series table)
//! ```
//!
//! into
//!
//! ```text
//! Projection(groups, finals) ← Aggregate(groups, partial aggs)
//!     ← the same Filters and aliases ← TableScan(its partials, crate::partials)
//! ```
//!
//! where each partials row is a sealed bucket's points in the window (by their
//! summary) or one row-form point, and the finals re-aggregate the partials: `max` of
//! maxima, `min` of minima, `sum` of sums, `count` as the sum of counts, `avg` as the
//! sum of sums over the sum of counts.
//!
//! It applies only when that gives the same answer (otherwise the plan is left alone):
//! - the table seals and all its blocks have summaries;
//! - every filter is on dimensions and `measure_name` only, or is a time comparison
//!   the scan turns into its time window exactly (so a bucket is a whole-bucket row
//!   only when all its points pass, and a time filter holds for the row as for them);
//! - every group key is over dimensions and `measure_name` only, or bins `time` into
//!   whole buckets: `bin`/`date_bin` by a multiple of the bucket, or `date_trunc` to
//!   a unit that is a multiple of it;
//! - every aggregate is `count(*)`, `count`/`min`/`max` of `time` or of a measure, or
//!   `sum`/`avg` of a DOUBLE or BIGINT measure, without DISTINCT, FILTER or ORDER BY.

use std::sync::Arc;

use almanac_timeseries::model::MeasureType;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column as DfColumn, Result as DfResult, ScalarValue, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::functions::expr_fn::{coalesce, nullif};
use datafusion::functions_aggregate::expr_fn::{max, min, sum};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    Aggregate, Expr, Filter, LogicalPlan, Projection, SubqueryAlias, TableScan, TableScanBuilder,
    cast, lit,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use crate::functions::interval_ns;
use crate::partials::{Partial, PartialsTable};
use crate::series::{Column, SeriesTable};

const NS_PER_SEC: i64 = 1_000_000_000;
/// Seconds in a day: `date_trunc` to a day or any longer unit gives whole days.
const DAY_SECS: i64 = 86_400;

/// The rule (see the module docs).
#[derive(Debug, Default)]
pub struct BucketAggregates;

impl OptimizerRule for BucketAggregates {
    fn name(&self) -> &str {
        "bucket_aggregates"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        on_aggregate(plan, rewrite)
    }
}

/// An optimizer rule's step on one node: an Aggregate becomes what `rewrite` makes of
/// it (`None`: left as it is); any other node is left as it is.
pub(crate) fn on_aggregate(
    plan: LogicalPlan,
    rewrite: impl FnOnce(&Aggregate) -> DfResult<Option<LogicalPlan>>,
) -> DfResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Aggregate(agg) = &plan else {
        return Ok(Transformed::no(plan));
    };
    match rewrite(agg)? {
        Some(p) => Ok(Transformed::yes(p)),
        None => Ok(Transformed::no(plan)),
    }
}

/// A node between the aggregate and the scan, kept as it is.
pub(crate) enum Wrapper {
    Filter(Expr),
    Alias(TableReference),
    /// A projection of plain columns (it passes the partial columns through too).
    Columns(Vec<Expr>),
}

/// What one aggregate becomes.
enum Final {
    Max(Partial),
    Min(Partial),
    Sum(Partial),
    /// A count: the sum of partial counts, 0 over no rows.
    Count(Partial),
    /// The sum of sums over the sum of counts.
    Avg(Partial, Partial),
}

impl Final {
    fn partials(&self) -> Vec<&Partial> {
        match self {
            Self::Max(p) | Self::Min(p) | Self::Sum(p) | Self::Count(p) => vec![p],
            Self::Avg(s, c) => vec![s, c],
        }
    }
}

/// The wrappers from the aggregate's input down to a table scan, if that is all there is.
pub(crate) fn wrappers(mut plan: &LogicalPlan) -> Option<(Vec<Wrapper>, &TableScan)> {
    let mut out = Vec::new();
    loop {
        match plan {
            LogicalPlan::Filter(f) => {
                out.push(Wrapper::Filter(f.predicate.clone()));
                plan = &f.input;
            }
            LogicalPlan::SubqueryAlias(a) => {
                out.push(Wrapper::Alias(a.alias.clone()));
                plan = &a.input;
            }
            LogicalPlan::Projection(p) if p.expr.iter().all(|e| matches!(e, Expr::Column(_))) => {
                out.push(Wrapper::Columns(p.expr.clone()));
                plan = &p.input;
            }
            LogicalPlan::TableScan(s) => return Some((out, s)),
            _ => return None,
        }
    }
}

pub(crate) fn is_key(c: &Column) -> bool {
    matches!(c, Column::Dimension(_) | Column::MeasureName)
}

fn is_time(table: &SeriesTable, e: &Expr) -> bool {
    matches!(e, Expr::Column(c) if table.column(&c.name) == Some(&Column::Time))
}

/// Whether a group key puts every point of a bucket in the same group.
fn groups_whole_buckets(table: &SeriesTable, e: &Expr, bucket_secs: i64) -> bool {
    if let Expr::Alias(a) = e {
        return groups_whole_buckets(table, &a.expr, bucket_secs);
    }
    if table
        .columns_in(e)
        .is_some_and(|cols| cols.iter().all(|c| is_key(c)))
    {
        return true;
    }
    let Expr::ScalarFunction(f) = e else {
        return false;
    };
    let bucket_ns = bucket_secs.saturating_mul(NS_PER_SEC);
    let whole = |v: &ScalarValue| {
        interval_ns(v).is_ok_and(|ns| ns > 0 && bucket_ns > 0 && ns % bucket_ns == 0)
    };
    match (f.func.name(), f.args.as_slice()) {
        ("bin", [t, Expr::Literal(v, _)]) | ("date_bin", [Expr::Literal(v, _), t]) => {
            is_time(table, t) && whole(v)
        }
        ("date_trunc", [Expr::Literal(unit, _), t]) => {
            let secs = match unit {
                ScalarValue::Utf8(Some(u))
                | ScalarValue::Utf8View(Some(u))
                | ScalarValue::LargeUtf8(Some(u)) => match u.to_ascii_lowercase().as_str() {
                    "minute" => 60,
                    "hour" => 3_600,
                    "day" | "week" | "month" | "quarter" | "year" => DAY_SECS,
                    _ => return false,
                },
                _ => return false,
            };
            is_time(table, t) && bucket_secs > 0 && secs % bucket_secs == 0
        }
        _ => false,
    }
}

/// What an aggregate becomes, if it can be answered from partials.
fn final_of(table: &SeriesTable, e: &Expr) -> Option<Final> {
    let Expr::AggregateFunction(f) = e else {
        return match e {
            Expr::Alias(a) => final_of(table, &a.expr),
            _ => None,
        };
    };
    let AggregateFunctionParams {
        args,
        distinct: false,
        filter: None,
        order_by,
        null_treatment: None,
    } = &f.params
    else {
        return None;
    };
    let ([arg], true) = (args.as_slice(), order_by.is_empty()) else {
        return None;
    };
    let name = f.func.name().to_ascii_lowercase();
    // DataFusion's avg of a BIGINT reads it cast to DOUBLE.
    let arg = match arg {
        Expr::Cast(c) if name == "avg" && *c.field.data_type() == DataType::Float64 => &*c.expr,
        other => other,
    };
    let column = match arg {
        Expr::Literal(v, _) if name == "count" && !v.is_null() => {
            return Some(Final::Count(Partial::Records));
        }
        Expr::Column(c) => table.column(&c.name)?.clone(),
        _ => return None,
    };
    let numeric = matches!(
        &column,
        Column::Single(MeasureType::Double | MeasureType::Bigint)
            | Column::Attribute(_, MeasureType::Double | MeasureType::Bigint)
    );
    match (name.as_str(), &column) {
        ("count", Column::Time) => Some(Final::Count(Partial::Records)),
        ("min", Column::Time) => Some(Final::Min(Partial::MinTime)),
        ("max", Column::Time) => Some(Final::Max(Partial::MaxTime)),
        (_, Column::Time | Column::Dimension(_) | Column::MeasureName) => None,
        ("count", _) => Some(Final::Count(Partial::Count(column))),
        ("min", _) if numeric => Some(Final::Min(Partial::Min(column))),
        ("max", _) if numeric => Some(Final::Max(Partial::Max(column))),
        ("sum", _) if numeric => Some(Final::Sum(Partial::Sum(column))),
        ("avg", _) if numeric => Some(Final::Avg(
            Partial::Sum(column.clone()),
            Partial::Count(column),
        )),
        _ => None,
    }
}

/// The column `name` of `plan`'s output, with its qualifier.
fn column_in(plan: &LogicalPlan, name: &str) -> DfResult<Expr> {
    let (q, _) = plan.schema().qualified_field_with_unqualified_name(name)?;
    Ok(Expr::Column(DfColumn::new(q.cloned(), name)))
}

/// The rewritten plan, or `None` when the rule does not apply.
fn rewrite(agg: &Aggregate) -> DfResult<Option<LogicalPlan>> {
    let Some((wrappers, scan)) = wrappers(&agg.input) else {
        return Ok(None);
    };
    let Ok(provider) = source_as_provider(&scan.source) else {
        return Ok(None);
    };
    let Some(table) = provider.downcast_ref::<SeriesTable>() else {
        return Ok(None);
    };
    let meta = table.meta();
    if !(meta.layout.seal && meta.summarized) || scan.fetch.is_some() || table.is_newest_only() {
        return Ok(None);
    }
    let predicates = wrappers
        .iter()
        .filter_map(|w| match w {
            Wrapper::Filter(p) => Some(p),
            Wrapper::Alias(_) | Wrapper::Columns(_) => None,
        })
        .chain(&scan.filters);
    if !predicates
        .flat_map(split_conjunction)
        .all(|c| table.filter_is_exact(c))
    {
        return Ok(None);
    }
    let bucket_secs = meta.layout.bucket_secs;
    if !agg
        .group_expr
        .iter()
        .all(|g| !matches!(g, Expr::GroupingSet(_)) && groups_whole_buckets(table, g, bucket_secs))
    {
        return Ok(None);
    }
    let Some(finals) = agg
        .aggr_expr
        .iter()
        .map(|e| final_of(table, e))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let mut partials: Vec<Partial> = Vec::new();
    for p in finals.iter().flat_map(Final::partials) {
        if !partials.contains(p) {
            partials.push(p.clone());
        }
    }
    if partials
        .iter()
        .any(|p| meta.schema.dimension_index(&p.name()).is_some())
    {
        return Ok(None);
    }

    // The scan of the partials, with the key columns the original scan read.
    let source = PartialsTable::new(table.clone(), partials.clone());
    let schema = datafusion::datasource::TableProvider::schema(&source);
    let mut projection: Vec<usize> = scan
        .projected_schema
        .fields()
        .iter()
        .filter_map(|f| schema.index_of(f.name()).ok())
        .collect();
    for p in &partials {
        projection.extend(schema.index_of(&p.name()).ok());
    }
    projection.sort_unstable();
    projection.dedup();
    let mut input = LogicalPlan::TableScan(
        TableScanBuilder::new(
            scan.table_name.clone(),
            provider_as_source(Arc::new(source)),
        )
        .with_projection(Some(projection))
        .with_filters(scan.filters.clone())
        .build()?,
    );
    for w in wrappers.into_iter().rev() {
        input = match w {
            Wrapper::Filter(p) => LogicalPlan::Filter(Filter::try_new(p, Arc::new(input))?),
            Wrapper::Alias(a) => {
                LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(input), a)?)
            }
            Wrapper::Columns(exprs) => {
                // The measure columns are gone; only their partials are read.
                let mut exprs: Vec<Expr> = exprs
                    .into_iter()
                    .filter(|e| match e {
                        Expr::Column(c) => input.schema().has_column(c),
                        _ => false,
                    })
                    .collect();
                for p in &partials {
                    exprs.push(column_in(&input, &p.name())?);
                }
                LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input))?)
            }
        };
    }

    let partial_column = |p: &Partial| column_in(&input, &p.name());
    let output = |name: &str| Expr::Column(DfColumn::new_unqualified(name));
    let mut aggs = Vec::new();
    let mut outs = Vec::new();
    for (i, f) in finals.iter().enumerate() {
        let a = format!("#agg{i}");
        let out = match f {
            Final::Max(p) => {
                aggs.push(max(partial_column(p)?).alias(&a));
                output(&a)
            }
            Final::Min(p) => {
                aggs.push(min(partial_column(p)?).alias(&a));
                output(&a)
            }
            Final::Sum(p) => {
                aggs.push(sum(partial_column(p)?).alias(&a));
                output(&a)
            }
            Final::Count(p) => {
                aggs.push(sum(partial_column(p)?).alias(&a));
                coalesce(vec![output(&a), lit(0i64)])
            }
            Final::Avg(s, c) => {
                let (sa, ca) = (format!("{a}s"), format!("{a}c"));
                aggs.push(sum(partial_column(s)?).alias(&sa));
                aggs.push(sum(partial_column(c)?).alias(&ca));
                cast(output(&sa), DataType::Float64)
                    / cast(nullif(output(&ca), lit(0i64)), DataType::Float64)
            }
        };
        outs.push(out);
    }
    let groups = agg.group_expr.len();
    let partial_agg = Aggregate::try_new(Arc::new(input), agg.group_expr.clone(), aggs)?;
    let mut exprs = Vec::with_capacity(groups + outs.len());
    for j in 0..groups {
        let (q, f) = partial_agg.schema.qualified_field(j);
        exprs.push(Expr::Column(DfColumn::new(q.cloned(), f.name())));
    }
    for (j, out) in outs.into_iter().enumerate() {
        let (q, f) = agg.schema.qualified_field(groups + j);
        exprs.push(out.alias_qualified(q.cloned(), f.name()));
    }
    let top = Projection::try_new(exprs, Arc::new(LogicalPlan::Aggregate(partial_agg)))?;
    Ok(Some(LogicalPlan::Projection(top)))
}
