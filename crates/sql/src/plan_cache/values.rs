//! The values of a shape as a plan holds them: finding them, telling whether they
//! stand only where a value compared with a column stands, and replacing them.

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Volatility};

use super::shape::{NS_PER_MS, Param};
use crate::value_filter::is_comparison;

/// `plan` with every literal equal to a value of `map` replaced by its new value.
pub(super) fn substitute(plan: LogicalPlan, map: &[(Param, Param)]) -> DfResult<LogicalPlan> {
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
pub(super) fn replaced(v: &ScalarValue, map: &[(Param, Param)]) -> Option<ScalarValue> {
    map.iter().find_map(|(old, new)| match (v, new) {
        _ if !is_value(v, old) => None,
        (ScalarValue::TimestampNanosecond(_, tz), Param::Time(n)) => {
            Some(ScalarValue::TimestampNanosecond(Some(*n), tz.clone()))
        }
        (ScalarValue::Utf8(_), Param::Text(n)) => Some(ScalarValue::Utf8(Some(n.clone()))),
        (ScalarValue::Utf8View(_), Param::Text(n)) => Some(ScalarValue::Utf8View(Some(n.clone()))),
        (ScalarValue::LargeUtf8(_), Param::Text(n)) => {
            Some(ScalarValue::LargeUtf8(Some(n.clone())))
        }
        _ => None,
    })
}

/// Whether literal `v` is `p` as a plan holds it.
pub(super) fn is_value(v: &ScalarValue, p: &Param) -> bool {
    match (v, p) {
        (ScalarValue::TimestampNanosecond(Some(x), _), Param::Time(t)) => x == t,
        (
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            Param::Text(t),
        ) => s == t,
        _ => false,
    }
}

/// Whether `e` is one of `params` as a plan holds it: a literal, or before the
/// optimizer, `from_nanoseconds(n)` / `from_milliseconds(n)`.
fn is_param(e: &Expr, params: &[Param]) -> bool {
    match e {
        Expr::Literal(v, _) => params.iter().any(|p| is_value(v, p)),
        Expr::ScalarFunction(f) => {
            let per_unit = match f.name() {
                "from_nanoseconds" => 1,
                "from_milliseconds" => NS_PER_MS,
                _ => return false,
            };
            let [Expr::Literal(ScalarValue::Int64(Some(n)), _)] = f.args.as_slice() else {
                return false;
            };
            let Some(ns) = n.checked_mul(per_unit) else {
                return false;
            };
            params.contains(&Param::Time(ns))
        }
        _ => false,
    }
}

/// Whether `plan` holds value `p` anywhere.
pub(super) fn holds(plan: &LogicalPlan, p: &Param) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                found = matches!(e, Expr::Literal(v, _) if is_value(v, p));
                Ok(if found {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })
        })
    });
    found
}

/// Whether every value of `params` in `plan` stands where a value compared with a
/// column stands (`c = v`, `c < v`, `c BETWEEN v AND w`, `c IN (v, w)`), so that the
/// optimizer can only have kept it, moved it, or dropped it, never folded it.
pub(super) fn clean(plan: &LogicalPlan, params: &[Param]) -> bool {
    let mut clean = true;
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            clean = clean_expr(e, params);
            Ok(if clean {
                TreeNodeRecursion::Continue
            } else {
                TreeNodeRecursion::Stop
            })
        })
    });
    clean
}

fn clean_expr(e: &Expr, params: &[Param]) -> bool {
    let column = |e: &Expr| match e {
        Expr::Column(_) => true,
        Expr::Cast(c) => matches!(*c.expr, Expr::Column(_)),
        Expr::TryCast(c) => matches!(*c.expr, Expr::Column(_)),
        _ => false,
    };
    let value = |e: &Expr| matches!(e, Expr::Literal(..)) || is_param(e, params);
    let compared = match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if is_comparison(*op) => {
            (column(left) && value(right)) || (column(right) && value(left))
        }
        Expr::Between(b) => column(&b.expr) && value(&b.low) && value(&b.high),
        Expr::InList(l) => column(&l.expr) && l.list.iter().all(value),
        _ => false,
    };
    if compared {
        return true;
    }
    if is_param(e, params) {
        return false;
    }
    let mut clean = true;
    let _ = e.apply_children(|c| {
        clean = clean_expr(c, params);
        Ok(if clean {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    clean
}

/// Whether a plan (before the optimizer) gives the same answer whenever it runs: it
/// calls no function marked stable (`now()`, `ago()`) or volatile (`random()`), and is
/// a query, not an `EXPLAIN`.
pub(super) fn reusable(plan: &LogicalPlan) -> bool {
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
