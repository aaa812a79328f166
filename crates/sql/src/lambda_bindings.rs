//! A physical optimizer rule that binds each lambda's parameters again once the plan is
//! final (DataFusion 55 does not: apache/datafusion#24372).
//!
//! DataFusion numbers a lambda's parameters after the columns of the input the
//! expression was planned over (`x@1` over one column). When a later rule moves the
//! expression over a wider input (collapsing a projection of column references into the
//! projection above it, as `SELECT filter(s, x -> …) FROM (SELECT … GROUP BY host)`
//! does), `x@1` names a real column there, which the lambda then takes as a captured
//! column, and evaluation fails. This rule, run after DataFusion's, renumbers the
//! parameters of every lambda in a projection or filter after its input's columns
//! (and a nested lambda's after its enclosing lambdas'), as the planner would have.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::expressions::{LambdaExpr, LambdaVariable};
use datafusion::physical_expr::{HigherOrderFunctionExpr, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};

/// The rule of the module docs.
#[derive(Debug, Default)]
pub struct LambdaBindings;

impl PhysicalOptimizerRule for LambdaBindings {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if let Some(p) = node.downcast_ref::<ProjectionExec>() {
                let width = p.input().schema().fields().len();
                let mut changed = false;
                let mut exprs = Vec::with_capacity(p.expr().len());
                for e in p.expr() {
                    let bound = bind(&e.expr, width, &[])?;
                    changed |= bound.transformed;
                    exprs.push(ProjectionExpr {
                        expr: bound.data,
                        alias: e.alias.clone(),
                    });
                }
                if changed {
                    let rebuilt: Arc<dyn ExecutionPlan> =
                        Arc::new(ProjectionExec::try_new(exprs, p.input().clone())?);
                    return Ok(Transformed::yes(rebuilt));
                }
            } else if let Some(f) = node.downcast_ref::<FilterExec>() {
                let width = f.input().schema().fields().len();
                let bound = bind(f.predicate(), width, &[])?;
                if bound.transformed {
                    let rebuilt = FilterExecBuilder::from(f)
                        .with_predicate(bound.data)
                        .build()?;
                    return Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>));
                }
            }
            Ok(Transformed::no(node))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "lambda_bindings"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `expr` over an input of `width` columns, with the lambda parameters in `scope`
/// (name, index; the innermost last) bound where they are used.
fn bind(
    expr: &Arc<dyn PhysicalExpr>,
    width: usize,
    scope: &[(String, usize)],
) -> DfResult<Transformed<Arc<dyn PhysicalExpr>>> {
    if let Some(v) = expr.downcast_ref::<LambdaVariable>() {
        let index = scope
            .iter()
            .rev()
            .find(|(name, _)| name == v.name())
            .map(|(_, i)| *i);
        return Ok(match index {
            Some(i) if i != v.index() => {
                Transformed::yes(Arc::new(LambdaVariable::new(i, Arc::clone(v.field())))
                    as Arc<dyn PhysicalExpr>)
            }
            _ => Transformed::no(Arc::clone(expr)),
        });
    }
    let is_higher_order = expr.downcast_ref::<HigherOrderFunctionExpr>().is_some();
    let mut changed = false;
    let mut children = Vec::new();
    for child in expr.children() {
        let bound = match child.downcast_ref::<LambdaExpr>() {
            // A lambda's own parameters follow the columns it is evaluated over (the
            // input's, then the enclosing lambdas' parameters).
            Some(lambda) if is_higher_order => {
                let mut inner: Vec<(String, usize)> = scope.to_vec();
                let base = width;
                inner.extend(
                    lambda
                        .params()
                        .iter()
                        .enumerate()
                        .map(|(i, name)| (name.clone(), base + i)),
                );
                let body = bind(lambda.body(), base + lambda.params().len(), &inner)?;
                if body.transformed {
                    Transformed::yes(Arc::clone(child).with_new_children(vec![body.data])?)
                } else {
                    Transformed::no(Arc::clone(child))
                }
            }
            _ => bind(child, width, scope)?,
        };
        changed |= bound.transformed;
        children.push(bound.data);
    }
    if changed {
        Ok(Transformed::yes(
            Arc::clone(expr).with_new_children(children)?,
        ))
    } else {
        Ok(Transformed::no(Arc::clone(expr)))
    }
}
