//! GoogleSQL's calls and operators DataFusion plans under other spellings, rewritten in
//! the parsed statement:
//! - a lambda argument `e -> body` (which the parser reads as the JSON operator `->`)
//!   becomes a lambda, so `ARRAY_FILTER(a, e -> e > 1)` and
//!   `ARRAY_TRANSFORM(a, e -> e + 1)` run as DataFusion's higher-order functions;
//!   `ARRAY_INCLUDES(a, e -> …)` is `array_any_match`;
//! - `ARRAY_AGG(x … LIMIT n)` is `ARRAY_SLICE(ARRAY_AGG(x …), 0, n - 1)`;
//!   `ARRAY_CONCAT_AGG(a …)` is `FLATTEN(ARRAY_AGG(a …))`, limited likewise;
//! - `ANY_VALUE(x HAVING MAX y)` is `FIRST_VALUE(x ORDER BY y DESC NULLS LAST)` (`MIN`:
//!   ascending);
//! - `APPROX_QUANTILES(x, n)`, `APPROX_TOP_COUNT(x, n)`, `APPROX_TOP_SUM(x, w, n)`
//!   aggregate with `ARRAY_AGG` and finish in `__approx_quantiles`, …
//!   (see `googlesql/arrays.rs`);
//! - unary `~x` is `x ^ -1`;
//! - `x LIKE b'…'` with a UTF-8 BYTES pattern takes the pattern as STRING, which
//!   DataFusion matches against BYTES.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArguments, HavingBoundKind, Ident, LambdaFunction,
    LambdaFunctionParameter, LambdaSyntax, ObjectName, OneOrManyWithParens, UnaryOperator, Value,
    VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The visitor of the module docs.
pub(super) struct Calls;

impl VisitorMut for Calls {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        let replacement = match expr {
            SqlExpr::UnaryOp {
                op: UnaryOperator::BitwiseNot,
                expr: inner,
            } => parse(&format!("(({inner}) ^ -1)")),
            SqlExpr::Like { pattern, .. } | SqlExpr::ILike { pattern, .. } => {
                text_pattern(pattern);
                None
            }
            SqlExpr::Function(f) => {
                lambdas(f);
                call(f)
            }
            _ => None,
        };
        if let Some(r) = replacement {
            *expr = r;
        }
        ControlFlow::Continue(())
    }
}

/// Parses one expression written by this module (None if it does not parse, which
/// leaves the original for the planner to report).
fn parse(sql: &str) -> Option<SqlExpr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// `b'…'` (a hex literal by now) as a STRING pattern when it is UTF-8.
fn text_pattern(pattern: &mut SqlExpr) {
    let SqlExpr::Value(v) = pattern else {
        return;
    };
    let Value::HexStringLiteral(hex) = &v.value else {
        return;
    };
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    if let Some(text) = bytes.and_then(|b| String::from_utf8(b).ok()) {
        v.value = Value::SingleQuotedString(text);
    }
}

/// `name -> body` arguments become lambdas.
fn lambdas(f: &mut Function) {
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let mut any = false;
    for arg in &mut list.args {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg else {
            continue;
        };
        let SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::Arrow,
            right,
        } = e
        else {
            continue;
        };
        let SqlExpr::Identifier(name) = left.as_ref() else {
            continue;
        };
        *e = SqlExpr::Lambda(LambdaFunction {
            params: OneOrManyWithParens::One(LambdaFunctionParameter {
                name: name.clone(),
                data_type: None,
            }),
            body: right.clone(),
            syntax: LambdaSyntax::Arrow,
        });
        any = true;
    }
    if any && f.name.to_string().eq_ignore_ascii_case("array_includes") {
        f.name = ObjectName::from(vec![Ident::new("array_any_match")]);
    }
}

/// The rewritten call, for the aggregate forms of the module docs.
fn call(f: &mut Function) -> Option<SqlExpr> {
    let name = f.name.to_string().to_ascii_lowercase();
    let FunctionArguments::List(list) = &mut f.args else {
        return None;
    };
    let arg = |i: usize| list.args.get(i).map(ToString::to_string);
    match name.as_str() {
        "array_agg" | "array_concat_agg" => {
            let limit = list
                .clauses
                .iter()
                .position(|c| matches!(c, FunctionArgumentClause::Limit(_)));
            let limit = limit.map(|i| list.clauses.remove(i));
            if name == "array_concat_agg" {
                f.name = ObjectName::from(vec![Ident::new("array_agg")]);
            }
            let mut sql = f.to_string();
            if let Some(FunctionArgumentClause::Limit(n)) = limit {
                sql = format!("array_slice({sql}, 0, ({n}) - 1)");
            }
            if name == "array_concat_agg" {
                sql = format!("flatten({sql})");
            }
            parse(&sql)
        }
        "any_value" => {
            let having = list.clauses.iter().find_map(|c| match c {
                FunctionArgumentClause::Having(h) => Some(h),
                _ => None,
            })?;
            let order = match having.0 {
                HavingBoundKind::Max => "DESC",
                HavingBoundKind::Min => "ASC",
            };
            parse(&format!(
                "first_value({} ORDER BY {} {order} NULLS LAST)",
                arg(0)?,
                having.1
            ))
        }
        "approx_quantiles" | "approx_top_count" if list.args.len() == 2 => {
            parse(&format!("__{name}(array_agg({}), {})", arg(0)?, arg(1)?))
        }
        "approx_top_sum" if list.args.len() == 3 => parse(&format!(
            "__approx_top_sum(array_agg(struct({}, {})), {})",
            arg(0)?,
            arg(1)?,
            arg(2)?
        )),
        _ => None,
    }
}
