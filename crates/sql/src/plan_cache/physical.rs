//! Physical plans kept beside a kept optimized plan, so a reused query also skips
//! physical planning (the planner and DataFusion's physical optimizer rules).
//!
//! A physical plan holds a run's values in two places only: the scan, which the table
//! builds from its filters (key ranges, partitions, read placement), and the predicates
//! of filters above it. A kept physical plan (a template) is never run; each run gets
//! a copy ([`rebuild`]):
//! - each scan is asked of its table again with the run's filters, exactly as the
//!   planner asks it, and takes the place of the template's scan with the same columns
//!   (keeping the projection and limit the physical optimizer pushed into it) if it has
//!   as many partitions;
//! - each filter's predicate has the template's values replaced by the run's, and an
//!   `IN` list is built again (it keeps a set of its values);
//! - every other operator is copied over its new inputs with its state reset, and must
//!   hold none of the values in its expressions, nor a dynamic filter that a reset
//!   does not renew.
//!
//! Only plans whose scans differ in their columns are kept (the newest-row join reads
//! the table twice, for different columns), none with scalar subqueries or recursion. A
//! template is adopted once a run with other values has been planned as usual and
//! equals the template rebuilt for its values, operator for operator as EXPLAIN shows
//! them; debug builds (every test) plan each rebuilt run afresh too and fail on any
//! difference.

use std::sync::{Arc, Mutex, PoisonError};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::ScanArgs;
use datafusion::common::Result as DfResult;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::expr_rewriter::unnormalize_cols;
use datafusion::logical_expr::{LogicalPlan, TableScan};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, InListExpr, Literal};
use datafusion::physical_plan::execution_plan::{
    ChildrenPropertiesMode, ReplaceChildrenOptions, reset_plan_states,
};
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::streaming::StreamingTableExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, displayable};

use super::changes;
use super::shape::Param;
use super::values::{is_value, replaced};

/// Operators that are never copied: they keep results or shared tables across runs.
const REFUSED: [&str; 3] = ["ScalarSubqueryExec", "RecursiveQueryExec", "WorkTableExec"];

/// How many runs may fail to adopt a kept physical plan before that kind of run (one
/// partition or every core) of the shape stops keeping one: each try plans the run,
/// rebuilds the kept plan and compares the two.
pub const PHYSICAL_ADOPTION_TRIES: u8 = 3;

/// A kept physical plan (never run) and the values it was planned with.
struct Template {
    params: Vec<Param>,
    /// `None` once refused.
    plan: Option<Arc<dyn ExecutionPlan>>,
    stage: Stage,
}

/// Where a template stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Kept; `misses` runs with other values did not show the same plan.
    Candidate { misses: u8 },
    /// A run with other values has shown that [`rebuild`] gives its plan.
    Adopted,
    /// Never kept again: not [`keepable`], or [`PHYSICAL_ADOPTION_TRIES`] misses.
    Refused,
}

/// The templates of one kept plan: one for runs planned for one partition, one for
/// runs planned for every core (`crate::parallelism`).
#[derive(Default)]
pub(crate) struct Templates {
    slots: Mutex<[Option<Arc<Template>>; 2]>,
}

impl Templates {
    fn slot(&self, one_partition: bool) -> Option<Arc<Template>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)[usize::from(one_partition)]
            .clone()
    }

    fn keep(
        &self,
        one_partition: bool,
        params: &[Param],
        plan: Option<Arc<dyn ExecutionPlan>>,
        stage: Stage,
    ) {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)[usize::from(one_partition)] =
            Some(Arc::new(Template {
                params: params.to_vec(),
                plan,
                stage,
            }));
    }

    /// The physical plan of `logical` (the kept plan with the run's values `params`) in
    /// `state`: the adopted template rebuilt for them, or else planned as usual and
    /// offered as a template. `true` with a rebuilt plan.
    pub(crate) async fn plan(
        &self,
        one_partition: bool,
        params: &[Param],
        logical: &LogicalPlan,
        state: &SessionState,
    ) -> DfResult<(Arc<dyn ExecutionPlan>, bool)> {
        let template = self.slot(one_partition);
        if let Some(t) = template.as_deref().filter(|t| t.stage == Stage::Adopted)
            && let Some(plan) = rebuild(t, params, logical, state).await
        {
            return Ok((plan, true));
        }
        let planned = state
            .query_planner()
            .create_physical_plan(logical, state)
            .await?;
        let misses = match template.as_deref() {
            None => 0,
            Some(t) => match t.stage {
                Stage::Adopted | Stage::Refused => return Ok((planned, false)),
                Stage::Candidate { .. } if t.params == params => return Ok((planned, false)),
                Stage::Candidate { misses } => {
                    if rebuild(t, params, logical, state)
                        .await
                        .is_some_and(|rebuilt| same(&rebuilt, &planned))
                    {
                        self.keep(one_partition, &t.params, t.plan.clone(), Stage::Adopted);
                        return Ok((planned, false));
                    }
                    misses + 1
                }
            },
        };
        // A copy of its own, so the template never shares state with this run.
        match reset_plan_states(planned.clone()) {
            Ok(copy) if misses < PHYSICAL_ADOPTION_TRIES && keepable(&planned) => {
                self.keep(
                    one_partition,
                    params,
                    Some(copy),
                    Stage::Candidate { misses },
                );
            }
            _ => self.keep(one_partition, params, None, Stage::Refused),
        }
        Ok((planned, false))
    }
}

/// Whether two physical plans are the same, operator for operator, as EXPLAIN shows
/// them (every expression, projection, partitioning and limit).
pub(crate) fn same(a: &Arc<dyn ExecutionPlan>, b: &Arc<dyn ExecutionPlan>) -> bool {
    shown(a) == shown(b)
}

fn shown(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

/// Whether `plan` may become a template: no refused operator, and scans that their
/// columns tell apart (a rebuilt plan finds each new scan's place by them).
fn keepable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut scans: Vec<SchemaRef> = Vec::new();
    let mut refused = false;
    let _ = plan.apply(|node| {
        if let Some(scan) = node.downcast_ref::<StreamingTableExec>() {
            refused |= scans.contains(scan.partition_schema());
            scans.push(scan.partition_schema().clone());
        } else if node.children().is_empty() && !is_empty_source(node.as_ref()) {
            refused = true;
        }
        refused |= REFUSED.contains(&node.name());
        Ok(if refused {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    !scans.is_empty() && !refused
}

/// Leaves that read nothing.
fn is_empty_source(node: &dyn ExecutionPlan) -> bool {
    matches!(node.name(), "EmptyExec" | "PlaceholderRowExec")
}

/// `t` rebuilt for a run of `logical` with values `params`; `None` if the run's scan
/// does not fit the template's, an operator holds a value outside a filter, or
/// anything fails (the run is then planned as usual, which reports its own errors).
async fn rebuild(
    t: &Template,
    params: &[Param],
    logical: &LogicalPlan,
    state: &SessionState,
) -> Option<Arc<dyn ExecutionPlan>> {
    rebuilt(t, params, logical, state).await.ok().flatten()
}

async fn rebuilt(
    t: &Template,
    params: &[Param],
    logical: &LogicalPlan,
    state: &SessionState,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let Some(template) = &t.plan else {
        return Ok(None);
    };
    let Some(scans) = scans(logical) else {
        return Ok(None);
    };
    let mut leaves: Vec<Arc<dyn ExecutionPlan>> = Vec::with_capacity(scans.len());
    for scan in scans {
        let provider = source_as_provider(&scan.source)?;
        let filters: Vec<_> = unnormalize_cols(scan.filters.iter().cloned());
        let args = ScanArgs::default()
            .with_projection(scan.projection.as_deref())
            .with_filters(Some(&filters))
            .with_limit(scan.fetch);
        let fresh = provider.scan_with_args(state, args).await?;
        leaves.push(Arc::clone(fresh.plan()));
    }
    let mut leaves: Vec<&StreamingTableExec> = leaves
        .iter()
        .map(|l| l.downcast_ref::<StreamingTableExec>())
        .collect::<Option<_>>()
        .unwrap_or_default();
    if leaves.len() != scan_count(logical) {
        return Ok(None);
    }
    let copied = copy(template, &changes(&t.params, params), &mut leaves)?;
    // Every new scan must have found its place.
    Ok(copied.filter(|_| leaves.is_empty()))
}

/// The table scans of `plan`, if none is in a subquery (a scalar subquery's plan runs
/// apart).
fn scans(plan: &LogicalPlan) -> Option<Vec<&TableScan>> {
    let mut out = Vec::new();
    scans_in(plan, &mut out);
    (out.len() == scan_count(plan)).then_some(out)
}

fn scans_in<'a>(plan: &'a LogicalPlan, out: &mut Vec<&'a TableScan>) {
    match plan {
        LogicalPlan::TableScan(scan) => out.push(scan),
        _ => plan.inputs().into_iter().for_each(|p| scans_in(p, out)),
    }
}

/// The table scans of `plan`, subqueries included.
fn scan_count(plan: &LogicalPlan) -> usize {
    let mut n = 0;
    let _ = plan.apply_with_subqueries(|node| {
        n += usize::from(matches!(node, LogicalPlan::TableScan(_)));
        Ok(TreeNodeRecursion::Continue)
    });
    n
}

/// `node` over fresh inputs, each scan reading the new scan of `leaves` with its
/// columns (taken out of `leaves`), and `map`'s values in its filters (see the module
/// docs).
fn copy(
    node: &Arc<dyn ExecutionPlan>,
    map: &[(Param, Param)],
    leaves: &mut Vec<&StreamingTableExec>,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = node.downcast_ref::<StreamingTableExec>() {
        let Some(i) = leaves
            .iter()
            .position(|l| l.partition_schema() == scan.partition_schema())
        else {
            return Ok(None);
        };
        return rescan(scan, leaves.swap_remove(i));
    }
    if REFUSED.contains(&node.name()) {
        return Ok(None);
    }
    let mut children = Vec::with_capacity(node.children().len());
    for child in node.children() {
        match copy(child, map, leaves)? {
            Some(c) => children.push(c),
            None => return Ok(None),
        }
    }
    if let Some(filter) = node.downcast_ref::<FilterExec>() {
        let Some(input) = children.pop() else {
            return Ok(None);
        };
        let Some(predicate) = with_values(filter.predicate(), map, &input)? else {
            return Ok(None);
        };
        let rebuilt = FilterExecBuilder::from(filter)
            .with_predicate(predicate)
            .with_input(input)
            .build()?;
        return Ok(Some(Arc::new(rebuilt)));
    }
    if holds_run_state(node.as_ref(), map)? {
        return Ok(None);
    }
    let copied = node.clone().replace_children(
        children,
        ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
    )?;
    copied.reset_state().map(Some)
}

/// The template's scan reading `leaf`'s partitions, if they are as many.
fn rescan(
    scan: &StreamingTableExec,
    leaf: &StreamingTableExec,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if leaf.partitions().len() != scan.partitions().len()
        || leaf.partition_schema() != scan.partition_schema()
        || leaf.projection().is_some()
        || leaf.limit().is_some_and(|n| scan.limit() != Some(n))
    {
        return Ok(None);
    }
    let projection = scan.projection().as_ref().map(|p| p.to_vec());
    let rebuilt = StreamingTableExec::try_new(
        leaf.partition_schema().clone(),
        leaf.partitions().clone(),
        projection.as_ref(),
        scan.projected_output_ordering(),
        scan.is_infinite(),
        scan.limit(),
    )?;
    // Scans declare no partitioning of their own (and unknown partitionings are never
    // equal): as many partitions suffices.
    if !matches!(
        scan.properties().partitioning,
        Partitioning::UnknownPartitioning(_)
    ) {
        return Ok(None);
    }
    Ok(Some(Arc::new(rebuilt)))
}

/// Whether an operator other than a filter holds one of the values, or a dynamic
/// filter that its reset does not renew (sorts and hash joins renew theirs).
fn holds_run_state(node: &dyn ExecutionPlan, map: &[(Param, Param)]) -> DfResult<bool> {
    let renews =
        node.downcast_ref::<SortExec>().is_some() || node.downcast_ref::<HashJoinExec>().is_some();
    let mut held = false;
    node.apply_expressions(&mut |root| {
        root.apply(|e| {
            held = e
                .downcast_ref::<Literal>()
                .is_some_and(|l| map.iter().any(|(old, _)| is_value(l.value(), old)))
                || (!renews && e.downcast_ref::<DynamicFilterPhysicalExpr>().is_some());
            Ok(if held {
                TreeNodeRecursion::Stop
            } else {
                TreeNodeRecursion::Continue
            })
        })
    })?;
    Ok(held)
}

/// `predicate` with `map`'s values replaced, over `input`; `None` if a replaced
/// literal carries metadata, or the predicate holds a dynamic filter (pushed into it
/// by an operator above, whose reset would renew its own copy only).
fn with_values(
    predicate: &Arc<dyn PhysicalExpr>,
    map: &[(Param, Param)],
    input: &Arc<dyn ExecutionPlan>,
) -> DfResult<Option<Arc<dyn PhysicalExpr>>> {
    let schema = input.schema();
    let mut plain = true;
    let replaced_expr = Arc::clone(predicate).transform_up(|e| {
        plain &= e.downcast_ref::<DynamicFilterPhysicalExpr>().is_none();
        if let Some(l) = e.downcast_ref::<Literal>()
            && let Some(new) = replaced(l.value(), map)
        {
            plain &= l.return_field(&schema)?.metadata().is_empty();
            return Ok(Transformed::yes(
                Arc::new(Literal::new(new)) as Arc<dyn PhysicalExpr>
            ));
        }
        if let Some(list) = e.downcast_ref::<InListExpr>() {
            // Built again: `with_new_children` keeps the old list's value set.
            let rebuilt = InListExpr::try_new(
                Arc::clone(list.expr()),
                list.list().to_vec(),
                list.negated(),
                &schema,
            )?;
            return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn PhysicalExpr>));
        }
        Ok(Transformed::no(e))
    })?;
    Ok(plain.then_some(replaced_expr.data))
}
