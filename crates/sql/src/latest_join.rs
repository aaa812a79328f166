//! "The newest row of each group", written the way Timestream users (and TSBS's own
//! Timestream queries) write it, read from the newest row of each series instead of
//! every row: a logical optimizer rule.
//!
//! ```sql
//! SELECT c.hostname, c.time, c.usage_user FROM t c
//! JOIN (SELECT hostname, max(time) AS newest FROM t GROUP BY hostname) l
//!   ON c.hostname = l.hostname AND c.time = l.newest
//! ```
//!
//! A row of `c` survives the join only if its time is the newest of its group, so it is
//! the newest row of its own series (a series lies in one group: the group keys are
//! dimensions or `measure_name`). The rule swaps the scan of `c` for the same table read
//! as the newest point of each series ([`crate::series::SeriesTable::newest_only`]);
//! the join itself is unchanged and drops the series whose newest point is older than
//! their group's. It applies when:
//! - the join is inner, and its keys pair `c.time` with the `max(time)` of the
//!   aggregate and `c.g` with each group key `g` of it;
//! - both sides read the same table, through filters, aliases and plain-column
//!   projections only, with the same filters (so "newest" means the same on both),
//!   each exact for a series ([`SeriesTable::filter_is_exact`]: under a filter on a
//!   measure, the newest point that passes need not be the newest point);
//! - the aggregate groups by plain dimension or `measure_name` columns.

use std::sync::Arc;

use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan, Projection, TableScanBuilder};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};

use crate::series::{Column, SeriesTable};

/// The rule (see the module docs).
#[derive(Debug, Default)]
pub struct LatestJoin;

impl OptimizerRule for LatestJoin {
    fn name(&self) -> &str {
        "latest_join"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(join) = &plan else {
            return Ok(Transformed::no(plan));
        };
        if join.join_type != JoinType::Inner {
            return Ok(Transformed::no(plan));
        }
        for rows_on_left in [true, false] {
            if let Some(p) = rewrite(join, rows_on_left)? {
                return Ok(Transformed::yes(p));
            }
        }
        Ok(Transformed::no(plan))
    }
}

/// A series table scan under filters, aliases and plain-column projections.
struct Source {
    table: SeriesTable,
    /// Every filter conjunct above the scan and pushed into it, unqualified.
    filters: Vec<Expr>,
}

/// The name a projection's output column `name` has in its input, if it is a plain
/// column (or an alias of one).
fn projected(p: &Projection, name: &str) -> Option<String> {
    let i = p.schema.fields().iter().position(|f| f.name() == name)?;
    match p.expr.get(i)? {
        Expr::Column(c) => Some(c.name.clone()),
        Expr::Alias(a) => match &*a.expr {
            Expr::Column(c) => Some(c.name.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// A filter without its table qualifiers (the two sides name the table differently).
fn unqualified(e: Expr) -> Option<Expr> {
    e.transform(|e| match e {
        Expr::Column(mut c) => {
            c.relation = None;
            Ok(Transformed::yes(Expr::Column(c)))
        }
        other => Ok(Transformed::no(other)),
    })
    .ok()
    .map(|t| t.data)
}

/// Walks down from `plan` through filters, aliases and projections, following the
/// column `name` (a plain column in every projection); stops at the first other node,
/// with the name there. A filter above a projection is refused: it could name a
/// computed column, which the other side may define differently.
fn descend<'p>(
    mut plan: &'p LogicalPlan,
    name: &str,
    filters: &mut Vec<Expr>,
) -> Option<(&'p LogicalPlan, String)> {
    let mut name = name.to_string();
    let mut filtered = false;
    loop {
        match plan {
            LogicalPlan::Filter(f) => {
                filters.extend(split_conjunction(&f.predicate).into_iter().cloned());
                filtered = true;
                plan = &f.input;
            }
            LogicalPlan::SubqueryAlias(a) => plan = &a.input,
            LogicalPlan::Projection(_) if filtered => return None,
            LogicalPlan::Projection(p) => {
                name = projected(p, &name)?;
                plan = &p.input;
            }
            other => return Some((other, name)),
        }
    }
}

/// The series table (read in full) under `plan`, and what `column` is in it.
fn source(plan: &LogicalPlan, column: &str) -> Option<(Source, Column)> {
    let mut filters = Vec::new();
    let (LogicalPlan::TableScan(scan), name) = descend(plan, column, &mut filters)? else {
        return None;
    };
    if scan.fetch.is_some() {
        return None;
    }
    let provider = source_as_provider(&scan.source).ok()?;
    let table = provider.downcast_ref::<SeriesTable>()?;
    if table.is_newest_only() {
        return None;
    }
    let col = table.column(&name)?.clone();
    filters.extend(scan.filters.iter().flat_map(split_conjunction).cloned());
    let source = Source {
        table: table.clone(),
        filters: filters
            .into_iter()
            .map(unqualified)
            .collect::<Option<_>>()?,
    };
    Some((source, col))
}

/// What a column of the aggregate side is.
#[derive(Debug, PartialEq)]
enum Newest {
    /// `max(time)`.
    MaxTime,
    /// A group key: this dimension or `measure_name` column.
    Group(Column),
}

/// The aggregate under `plan` (groups of plain key columns) and what its output
/// column `column` is, with the table under it.
fn newest(plan: &LogicalPlan, column: &str) -> Option<(Source, Newest, Vec<Column>)> {
    let mut above = Vec::new();
    let (LogicalPlan::Aggregate(agg), name) = descend(plan, column, &mut above)? else {
        return None;
    };
    let (source, _) = source(&agg.input, "time")?;
    let groups: Vec<Column> = agg
        .group_expr
        .iter()
        .map(|g| match g {
            Expr::Column(c) => match source.table.column(&c.name)? {
                k @ (Column::Dimension(_) | Column::MeasureName) => Some(k.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<_>>()?;
    let i = agg.schema.fields().iter().position(|f| f.name() == &name)?;
    let what = if let Some(g) = groups.get(i) {
        Newest::Group(g.clone())
    } else {
        let e = agg.aggr_expr.get(i - groups.len())?;
        let e = match e {
            Expr::Alias(a) => &*a.expr,
            other => other,
        };
        let Expr::AggregateFunction(f) = e else {
            return None;
        };
        let p = &f.params;
        let plain = !p.distinct && p.filter.is_none() && p.order_by.is_empty();
        match p.args.as_slice() {
            [Expr::Column(c)]
                if plain
                    && f.func.name().eq_ignore_ascii_case("max")
                    && source.table.column(&c.name) == Some(&Column::Time) =>
            {
                Newest::MaxTime
            }
            _ => return None,
        }
    };
    // Filters above the aggregate act on groups, not on what "newest" means.
    if !above.is_empty() {
        return None;
    }
    Some((source, what, groups))
}

fn same_filters(a: &[Expr], b: &[Expr]) -> bool {
    a.iter().all(|e| b.contains(e)) && b.iter().all(|e| a.contains(e))
}

/// The join with its rows side read newest-only, when the rule applies.
fn rewrite(join: &Join, rows_on_left: bool) -> DfResult<Option<LogicalPlan>> {
    let (rows, agg) = if rows_on_left {
        (&join.left, &join.right)
    } else {
        (&join.right, &join.left)
    };
    let mut time_paired = false;
    let mut paired_groups: Vec<Column> = Vec::new();
    let mut sides: Option<(Source, Source, Vec<Column>)> = None;
    for (l, r) in &join.on {
        let (Expr::Column(a), Expr::Column(b)) = (l, r) else {
            continue;
        };
        let (a, b) = if rows_on_left { (a, b) } else { (b, a) };
        let (Some((rs, rc)), Some((ns, what, groups))) =
            (source(rows, &a.name), newest(agg, &b.name))
        else {
            continue;
        };
        match what {
            Newest::MaxTime if rc == Column::Time => time_paired = true,
            Newest::Group(g) if g == rc => paired_groups.push(g),
            _ => continue,
        }
        sides.get_or_insert((rs, ns, groups));
    }
    let Some((rows_source, agg_source, groups)) = sides else {
        return Ok(None);
    };
    let same_table = rows_source.table.meta().store_table == agg_source.table.meta().store_table;
    if !(time_paired
        && same_table
        && groups.iter().all(|g| paired_groups.contains(g))
        && same_filters(&rows_source.filters, &agg_source.filters)
        && rows_source
            .filters
            .iter()
            .all(|f| rows_source.table.filter_is_exact(f)))
    {
        return Ok(None);
    }
    let newest_only = Arc::new(rows_source.table.newest_only());
    let new_rows = Arc::unwrap_or_clone(rows.clone())
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
    let (left, right) = if rows_on_left {
        (new_rows, Arc::unwrap_or_clone(join.right.clone()))
    } else {
        (Arc::unwrap_or_clone(join.left.clone()), new_rows)
    };
    let plan = LogicalPlan::Join(join.clone());
    Ok(Some(
        plan.with_new_exprs(plan.expressions(), vec![left, right])?,
    ))
}
