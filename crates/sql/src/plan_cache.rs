//! Optimized plans kept for reuse, so a query run again with other times or names (a
//! dashboard's refresh, the next host) skips parsing, planning and optimizing.
//!
//! A query's [`shape`] is its text with its times (`from_nanoseconds(n)`) and compared
//! names (`hostname = 'h'`, `IN ('a', 'b')`) taken out. A plan is kept for a shape
//! only once two runs of it with different values have shown that their optimized
//! plans differ in exactly those values:
//! 1. the first run of a shape keeps its optimized plan and values ([`Entry::Seen`]);
//! 2. a later run with other values is planned as usual, and the first plan with the
//!    first values replaced by the later ones must equal the later plan, scan for scan,
//!    and the other way round ([`verify`]); the values that differed become variable,
//!    the others fixed ([`Entry::Kept`]); if they are not equal, the later plan is kept
//!    as seen instead;
//! 3. a run whose fixed values match takes the kept plan with its variable values
//!    replaced ([`substitute`]) and each table read again through the query's own
//!    catalog ([`fresh_tables`]: access is checked, and the scan counts into this
//!    query's counters); a table whose columns, layout or summaries changed since makes
//!    the run plan as usual and offer its plan again.
//!
//! A run is offered only if its values stand, before and after the optimizer, only
//! where a value compared with a column stands ([`clean`]), and a variable value must
//! be found in both plans: a value folded into another constant (`bin(from_nanoseconds(
//! n), 1h)`), merged with another (`time > a AND time > b`) or dropped never makes a
//! plan reusable. Only plans of Timestream tables alone are kept, of queries without
//! `now()` or other functions whose answer changes between runs, and without bound
//! parameters; every table the query names, even one the optimizer took out, is looked
//! up again on reuse.
//! A reused run skips physical planning too once its kept physical plan is adopted
//! ([`physical`]): the scan is asked of the table again with the run's values (its
//! ranges, partitions and read placement follow them), and the filters above it take
//! the run's values. Measured: docs/benchmarks.md.

mod physical;
mod shape;
mod tables;
mod values;

use std::sync::Arc;

use datafusion::common::{Result as DfResult, TableReference};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::LogicalPlan;

pub(crate) use self::physical::Templates;
#[cfg(debug_assertions)]
pub(crate) use self::physical::same as same_physical;
pub(crate) use self::shape::{Param, Shape, shape};
use self::tables::{fresh_tables, named_tables, scan_kinds};
use self::values::{clean, holds, reusable, substitute};

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
    /// Reusable: the values it was planned with, which of them a run may change, the
    /// optimized plan, every table the query names, and its physical plans.
    Kept {
        params: Vec<Param>,
        variable: Vec<bool>,
        plan: LogicalPlan,
        tables: Vec<TableReference>,
        physical: Arc<Templates>,
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

impl PlanCache {
    pub(crate) fn new() -> Self {
        Self {
            entries: quick_cache::sync::Cache::new(PLAN_CACHE_SHAPES),
        }
    }

    /// The kept plan of `shape` for its values, its tables read again through `ctx`,
    /// with the kept physical plans; `None` when there is none for them, or a table
    /// changed.
    pub(crate) async fn reuse(
        &self,
        shape: &Shape,
        ctx: &SessionContext,
    ) -> DfResult<Option<(LogicalPlan, Arc<Templates>)>> {
        let Some(entry) = self.entries.get(&shape.key) else {
            return Ok(None);
        };
        let Entry::Kept {
            params,
            variable,
            plan,
            tables,
            physical,
        } = &*entry
        else {
            return Ok(None);
        };
        let now = &shape.params;
        if params.len() != now.len()
            || (0..now.len()).any(|i| !variable[i] && params[i] != now[i])
            || !consistent(params, now, variable)
            || !consistent(now, params, variable)
        {
            return Ok(None);
        }
        let plan = substitute(plan.clone(), &changes(params, now))?;
        Ok(fresh_tables(plan, tables, ctx)
            .await?
            .map(|plan| (plan, physical.clone())))
    }

    /// Offers the optimized plan of a run of `shape` that was planned as usual
    /// (`unoptimized` is its plan before the optimizer, which folds `now()` away).
    pub(crate) fn offer(&self, shape: &Shape, unoptimized: &LogicalPlan, optimized: &LogicalPlan) {
        if !reusable(unoptimized) || scan_kinds(optimized).is_none() {
            self.entries
                .insert(shape.key.clone(), Arc::new(Entry::Refused));
            return;
        }
        if !clean(unoptimized, &shape.params) || !clean(optimized, &shape.params) {
            return;
        }
        let seen = || {
            Arc::new(Entry::Seen {
                params: shape.params.clone(),
                plan: optimized.clone(),
            })
        };
        let kept = |variable: Vec<bool>| {
            Arc::new(Entry::Kept {
                params: shape.params.clone(),
                variable,
                plan: optimized.clone(),
                tables: named_tables(unoptimized),
                physical: Arc::default(),
            })
        };
        let entry = match self.entries.get(&shape.key).as_deref() {
            Some(Entry::Refused) => return,
            Some(Entry::Seen { params, plan }) => {
                verify(params, plan, &shape.params, optimized).map_or_else(seen, kept)
            }
            Some(Entry::Kept {
                params,
                variable: before,
                plan,
                ..
            }) => match verify(params, plan, &shape.params, optimized) {
                Some(variable) => {
                    kept(variable.iter().zip(before).map(|(a, b)| *a || *b).collect())
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

/// Which values of `before` differ in `after` (the variable ones), if each plan with
/// its values replaced by the other's is the other plan, every variable value is found
/// in its plan, and replacing is unambiguous ([`consistent`]).
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
    let found = (0..before.len())
        .all(|i| !variable[i] || (holds(plan_before, &before[i]) && holds(plan_after, &after[i])));
    let forth = substitute(plan_before.clone(), &changes(before, after)).ok()?;
    let back = substitute(plan_after.clone(), &changes(after, before)).ok()?;
    (found && same_plans(&forth, plan_after) && same_plans(&back, plan_before)).then_some(variable)
}

/// Whether replacing each variable value of `from` by its value in `to` is one
/// replacement per value: a variable value that occurs twice in `from` (a window
/// written twice) becomes one value in `to`, and is no fixed value.
fn consistent(from: &[Param], to: &[Param], variable: &[bool]) -> bool {
    from.len() == to.len()
        && (0..from.len()).all(|i| {
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
