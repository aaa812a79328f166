//! `max(time)` of groups of series, and the groups themselves (`SELECT DISTINCT
//! hostname`), read from the newest point of each series instead of every point: a
//! logical optimizer rule.
//!
//! ```sql
//! SELECT hostname, max(time) FROM t GROUP BY hostname
//! ```
//!
//! A series lies in one group when the group keys are dimensions and `measure_name`
//! only, so the newest time of a group is the newest of its series' newest points, and
//! a group exists when one of its series has a point in the window. The rule swaps the
//! scan for the same table read as the newest point of each series
//! ([`crate::series::SeriesTable::newest_only`]); the aggregate itself is unchanged. It
//! applies when:
//! - every group key reads dimensions and `measure_name` only, deterministically;
//! - every aggregate is a plain `max(time)` (none at all is `DISTINCT` of the keys);
//! - every filter between the aggregate and the scan is exact for a series
//!   ([`crate::series::SeriesTable::filter_is_exact`]), so the newest point that passes
//!   is the newest point of the window.
//!
//! It runs after [`crate::latest_join`], which matches the aggregate side of a join
//! on a full scan, and before [`crate::bucket_aggregates`], which would otherwise read
//! a summary per sealed bucket for the same answer.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::expr::AggregateFunctionParams;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Aggregate, Expr, LogicalPlan, TableScanBuilder};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use crate::bucket_aggregates::{Wrapper, is_key, on_aggregate, wrappers};
use crate::series::{Column, SeriesTable};

/// The rule (see the module docs).
#[derive(Debug, Default)]
pub struct NewestMax;

impl OptimizerRule for NewestMax {
    fn name(&self) -> &str {
        "newest_max"
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

/// Whether `e` is a plain `max(time)`.
fn is_max_time(table: &SeriesTable, e: &Expr) -> bool {
    let Expr::AggregateFunction(f) = e else {
        return matches!(e, Expr::Alias(a) if is_max_time(table, &a.expr));
    };
    let AggregateFunctionParams {
        args,
        distinct: false,
        filter: None,
        order_by,
        null_treatment: None,
    } = &f.params
    else {
        return false;
    };
    f.func.name().eq_ignore_ascii_case("max")
        && order_by.is_empty()
        && matches!(args.as_slice(), [Expr::Column(c)]
            if table.column(&c.name) == Some(&Column::Time))
}

/// The aggregate over the newest point of each series, or `None` when the rule does
/// not apply.
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
    if table.is_newest_only() || scan.fetch.is_some() {
        return Ok(None);
    }
    let groups_series = agg.group_expr.iter().all(|g| {
        !matches!(g, Expr::GroupingSet(_))
            && !g.is_volatile()
            && table
                .columns_in(g)
                .is_some_and(|cols| cols.iter().all(|c| is_key(c)))
    });
    let exact = wrappers
        .iter()
        .filter_map(|w| match w {
            Wrapper::Filter(p) => Some(p),
            Wrapper::Alias(_) | Wrapper::Columns(_) => None,
        })
        .chain(&scan.filters)
        .flat_map(split_conjunction)
        .all(|c| table.filter_is_exact(c));
    if !(groups_series && exact && agg.aggr_expr.iter().all(|e| is_max_time(table, e))) {
        return Ok(None);
    }
    let newest_only = Arc::new(table.newest_only());
    let input = Arc::unwrap_or_clone(agg.input.clone())
        .transform_up(|node| match node {
            LogicalPlan::TableScan(scan) => {
                let swapped = TableScanBuilder::new(
                    scan.table_name.clone(),
                    provider_as_source(newest_only.clone()),
                )
                .with_projection(scan.projection.clone())
                .with_filters(scan.filters.clone())
                .build()?;
                Ok(Transformed::yes(LogicalPlan::TableScan(swapped)))
            }
            other => Ok(Transformed::no(other)),
        })?
        .data;
    let plan = LogicalPlan::Aggregate(agg.clone());
    Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
}
