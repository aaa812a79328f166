//! The tables of a kept plan: what its scans read, and each table looked up again
//! for a run that reuses it.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{LogicalPlan, TableScan};

use crate::partials::{Partial, PartialsTable};
use crate::series::SeriesTable;

/// One scan of a kept plan, as `plan_cache::verify` compares them.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ScanKind {
    Series { newest_only: bool },
    Partials(Vec<Partial>),
}

/// The scans of an optimized plan in order, if it scans Timestream tables only (and at
/// least one).
pub(super) fn scan_kinds(plan: &LogicalPlan) -> Option<Vec<ScanKind>> {
    let mut kinds = Vec::new();
    let mut only_series = true;
    let walked = plan.apply_with_subqueries(|node| {
        let LogicalPlan::TableScan(scan) = node else {
            return Ok(TreeNodeRecursion::Continue);
        };
        let provider = source_as_provider(&scan.source)?;
        if let Some(t) = provider.downcast_ref::<SeriesTable>() {
            kinds.push(ScanKind::Series {
                newest_only: t.is_newest_only(),
            });
        } else if let Some(p) = provider.downcast_ref::<PartialsTable>() {
            kinds.push(ScanKind::Partials(p.partials().to_vec()));
        } else {
            only_series = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    (walked.is_ok() && only_series && !kinds.is_empty()).then_some(kinds)
}

/// Every table a plan scans, once each.
pub(super) fn named_tables(plan: &LogicalPlan) -> Vec<TableReference> {
    let mut names: Vec<TableReference> = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && !names.contains(&scan.table_name)
        {
            names.push(scan.table_name.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    });
    names
}

/// `plan` with each table read again through `ctx` (the query's catalog, with its
/// access rules and counters), after every table of `named` (all the query names,
/// some perhaps gone from the optimized plan) was looked up there; `None` if a table
/// is gone, refused, or no longer plans the same (its columns, layout or summaries
/// changed).
pub(super) async fn fresh_tables(
    plan: LogicalPlan,
    named: &[TableReference],
    ctx: &SessionContext,
) -> DfResult<Option<LogicalPlan>> {
    let mut tables = Vec::with_capacity(named.len());
    for name in named {
        let Ok(provider) = ctx.table_provider(name.clone()).await else {
            return Ok(None);
        };
        if let Some(table) = provider.downcast_ref::<SeriesTable>() {
            tables.push((name.clone(), table.clone()));
        }
    }
    let mut same = true;
    let plan = plan
        .transform_up_with_subqueries(|node| {
            let LogicalPlan::TableScan(scan) = node else {
                return Ok(Transformed::no(node));
            };
            let fresh = tables
                .iter()
                .find(|(name, _)| *name == scan.table_name)
                .map(|(_, t)| t);
            match fresh.and_then(|t| rebound(&scan, t)) {
                Some(source) => Ok(Transformed::yes(LogicalPlan::TableScan(TableScan {
                    source,
                    ..scan
                }))),
                None => {
                    same = false;
                    Ok(Transformed::no(LogicalPlan::TableScan(scan)))
                }
            }
        })?
        .data;
    Ok(same.then_some(plan))
}
/// The source of `scan` over `fresh`, the table read again, if the table still plans
/// as it did.
fn rebound(
    scan: &TableScan,
    fresh: &SeriesTable,
) -> Option<Arc<dyn datafusion::logical_expr::TableSource>> {
    let provider = source_as_provider(&scan.source).ok()?;
    let (kept, partials) = match provider.downcast_ref::<SeriesTable>() {
        Some(t) => (t, None),
        None => {
            let p = provider.downcast_ref::<PartialsTable>()?;
            (p.base(), Some(p.partials()))
        }
    };
    if !kept.plans_as(fresh) {
        return None;
    }
    let table = if kept.is_newest_only() {
        fresh.newest_only()
    } else {
        fresh.clone()
    };
    Some(match partials {
        Some(p) => provider_as_source(Arc::new(PartialsTable::new(table, p.to_vec()))),
        None => provider_as_source(Arc::new(table)),
    })
}
