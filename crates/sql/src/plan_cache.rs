//! Optimized plans kept for reuse, so a query run again with other times or names (a
//! dashboard's refresh, the next host) skips parsing, planning and optimizing.
//!
//! A query's [`shape`] is its text with its times (`from_nanoseconds(n)`) and compared
//! names (`hostname = 'h'`, `IN ('a', 'b')`) taken out. A plan is kept for a shape
//! only once two runs of it with different values have shown that their optimized
//! plans differ in exactly those values:
//! 1. the first run of a shape keeps its optimized plan and values ([`Entry::Seen`]);
//! 2. a later run with other values is planned as usual, and the first plan with the
//!    first values replaced by the later ones must equal the later plan, scan for scan
//!    ([`verify`]); the values that differed become variable, the others fixed
//!    ([`Entry::Kept`]); if they are not equal, the later plan is kept as seen instead;
//! 3. a run whose fixed values match takes the kept plan with its variable values
//!    replaced ([`substitute`]) and each table read again through the query's own
//!    catalog ([`fresh_tables`]: access is checked, and the scan counts into this
//!    query's counters); a table whose columns, layout or summaries changed since makes
//!    the run plan as usual and offer its plan again.
//!
//! Only plans of Timestream tables alone are kept, of queries without `now()` or other
//! functions whose answer changes between runs, and without bound parameters.
//! Physical planning still runs for every query: the scan's ranges, partitions and
//! read placement follow each run's values. Measured: docs/benchmarks.md.

mod shape;

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, ScalarValue, TableReference};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlan, TableScan, Volatility};

pub(crate) use self::shape::{Param, Shape, shape};
use crate::partials::{Partial, PartialsTable};
use crate::series::SeriesTable;

/// How many query shapes the cache holds (kept, seen once or refused); the least
/// recently used goes first.
pub const PLAN_CACHE_SHAPES: usize = 256;

/// What the cache knows of one shape.
enum Entry {
    /// Planned once: its values and optimized plan, waiting for a run with others.
    Seen {
        params: Vec<Param>,
        plan: LogicalPlan,
    },
    /// Reusable: the values it was planned with, which of them a run may change, and
    /// the optimized plan.
    Kept {
        params: Vec<Param>,
        variable: Vec<bool>,
        plan: LogicalPlan,
    },
    /// Never reusable: it reads other tables or asks for the time.
    Refused,
}

/// The plans of [`PLAN_CACHE_SHAPES`] shapes.
pub(crate) struct PlanCache {
    entries: quick_cache::sync::Cache<String, Arc<Entry>>,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanCache")
            .field("shapes", &self.entries.len())
            .finish()
    }
}

/// One scan of a kept plan, as [`verify`] compares them.
#[derive(Debug, PartialEq, Eq)]
enum ScanKind {
    Series { newest_only: bool },
    Partials(Vec<Partial>),
}

impl PlanCache {
    pub(crate) fn new() -> Self {
        Self {
            entries: quick_cache::sync::Cache::new(PLAN_CACHE_SHAPES),
        }
    }

    /// The kept plan of `shape` for its values, its tables read again through `ctx`;
    /// `None` when there is none for them, or a table changed.
    pub(crate) async fn reuse(
        &self,
        shape: &Shape,
        ctx: &SessionContext,
    ) -> DfResult<Option<LogicalPlan>> {
        let Some(entry) = self.entries.get(&shape.key) else {
            return Ok(None);
        };
        let Entry::Kept {
            params,
            variable,
            plan,
        } = &*entry
        else {
            return Ok(None);
        };
        if !params
            .iter()
            .zip(&shape.params)
            .zip(variable)
            .all(|((kept, now), variable)| *variable || kept == now)
            || !consistent(params, &shape.params, variable)
        {
            return Ok(None);
        }
        let map = changes(params, &shape.params);
        let plan = substitute(plan.clone(), &map)?;
        fresh_tables(plan, ctx).await
    }

    /// Offers the optimized plan of a run of `shape` that was planned as usual
    /// (`unoptimized` is its plan before the optimizer, which folds `now()` away).
    pub(crate) fn offer(&self, shape: &Shape, unoptimized: &LogicalPlan, optimized: &LogicalPlan) {
        let refused = || Arc::new(Entry::Refused);
        if !reusable(unoptimized) || scan_kinds(optimized).is_none() {
            self.entries.insert(shape.key.clone(), refused());
            return;
        }
        let seen = || {
            Arc::new(Entry::Seen {
                params: shape.params.clone(),
                plan: optimized.clone(),
            })
        };
        let entry = match self.entries.get(&shape.key).as_deref() {
            Some(Entry::Refused) => return,
            Some(Entry::Seen { params, plan }) => {
                match verify(params, plan, &shape.params, optimized) {
                    Some(variable) => kept(shape, variable, optimized),
                    None => seen(),
                }
            }
            Some(Entry::Kept {
                params,
                variable: before,
                plan,
            }) => match verify(params, plan, &shape.params, optimized) {
                Some(variable) => {
                    let variable = variable.iter().zip(before).map(|(a, b)| *a || *b);
                    kept(shape, variable.collect(), optimized)
                }
                None => seen(),
            },
            None => seen(),
        };
        self.entries.insert(shape.key.clone(), entry);
    }
}

/// Whether two optimized plans are the same, scan for scan.
pub(crate) fn same_plans(a: &LogicalPlan, b: &LogicalPlan) -> bool {
    a == b && scan_kinds(a) == scan_kinds(b)
}

fn kept(shape: &Shape, variable: Vec<bool>, plan: &LogicalPlan) -> Arc<Entry> {
    Arc::new(Entry::Kept {
        params: shape.params.clone(),
        variable,
        plan: plan.clone(),
    })
}

/// Which values of `before` differ in `after` (the variable ones), if `plan_before`
/// with them replaced by `after`'s is `plan_after`, and replacing is unambiguous
/// ([`consistent`]).
fn verify(
    before: &[Param],
    plan_before: &LogicalPlan,
    after: &[Param],
    plan_after: &LogicalPlan,
) -> Option<Vec<bool>> {
    if before.len() != after.len() {
        return None;
    }
    let variable: Vec<bool> = before.iter().zip(after).map(|(a, b)| a != b).collect();
    if !consistent(before, after, &variable) || !consistent(after, before, &variable) {
        return None;
    }
    let replaced = substitute(plan_before.clone(), &changes(before, after)).ok()?;
    same_plans(&replaced, plan_after).then_some(variable)
}

/// Whether replacing each variable value of `from` by its value in `to` is one
/// replacement per value: a variable value that occurs twice in `from` (a window
/// written twice) becomes one value in `to`, and is no fixed value.
fn consistent(from: &[Param], to: &[Param], variable: &[bool]) -> bool {
    (0..from.len()).all(|i| {
        !variable[i]
            || (0..from.len()).all(|j| from[i] != from[j] || (variable[j] && to[i] == to[j]))
    })
}

/// The replacements taking `from`'s values to `to`'s.
fn changes(from: &[Param], to: &[Param]) -> Vec<(Param, Param)> {
    from.iter()
        .zip(to)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (a.clone(), b.clone()))
        .collect()
}

/// `plan` with every literal equal to a value of `map` replaced by its new value.
fn substitute(plan: LogicalPlan, map: &[(Param, Param)]) -> DfResult<LogicalPlan> {
    if map.is_empty() {
        return Ok(plan);
    }
    plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::Literal(v, meta) => Ok(match replaced(&v, map) {
                    Some(new) => Transformed::yes(Expr::Literal(new, meta)),
                    None => Transformed::no(Expr::Literal(v, meta)),
                }),
                e => Ok(Transformed::no(e)),
            })
        })
    })
    .map(|t| t.data)
}

/// The new value of literal `v`, if it is an old value of `map` as a plan holds it.
fn replaced(v: &ScalarValue, map: &[(Param, Param)]) -> Option<ScalarValue> {
    map.iter().find_map(|(old, new)| match (v, old, new) {
        (ScalarValue::TimestampNanosecond(Some(x), tz), Param::Time(o), Param::Time(n))
            if x == o =>
        {
            Some(ScalarValue::TimestampNanosecond(Some(*n), tz.clone()))
        }
        (ScalarValue::Utf8(Some(s)), Param::Text(o), Param::Text(n)) if s == o => {
            Some(ScalarValue::Utf8(Some(n.clone())))
        }
        (ScalarValue::Utf8View(Some(s)), Param::Text(o), Param::Text(n)) if s == o => {
            Some(ScalarValue::Utf8View(Some(n.clone())))
        }
        (ScalarValue::LargeUtf8(Some(s)), Param::Text(o), Param::Text(n)) if s == o => {
            Some(ScalarValue::LargeUtf8(Some(n.clone())))
        }
        _ => None,
    })
}

/// Whether a plan (before the optimizer) gives the same answer whenever it runs: it
/// calls no function marked stable (`now()`, `ago()`) or volatile (`random()`), and is
/// a query, not an `EXPLAIN`.
fn reusable(plan: &LogicalPlan) -> bool {
    if matches!(plan, LogicalPlan::Explain(_) | LogicalPlan::Analyze(_)) {
        return false;
    }
    let mut fixed = true;
    let walked = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.func.signature().volatility != Volatility::Immutable
                {
                    fixed = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    walked.is_ok() && fixed
}

/// The scans of an optimized plan in order, if it scans Timestream tables only (and at
/// least one).
fn scan_kinds(plan: &LogicalPlan) -> Option<Vec<ScanKind>> {
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

/// `plan` with each table read again through `ctx` (the query's catalog, with its
/// access rules and counters); `None` if a table is gone, refused, or no longer plans
/// the same (its columns, layout or summaries changed).
async fn fresh_tables(plan: LogicalPlan, ctx: &SessionContext) -> DfResult<Option<LogicalPlan>> {
    let mut names: Vec<TableReference> = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node
            && !names.contains(&scan.table_name)
        {
            names.push(scan.table_name.clone());
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut tables = Vec::with_capacity(names.len());
    for name in names {
        let Ok(provider) = ctx.table_provider(name.clone()).await else {
            return Ok(None);
        };
        let Some(table) = provider.downcast_ref::<SeriesTable>() else {
            return Ok(None);
        };
        tables.push((name, table.clone()));
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
