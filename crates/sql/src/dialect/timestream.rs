//! Timestream's forms DataFusion plans under other spellings, rewritten in the parsed
//! statement (Timestream's dialect only):
//! - a lambda argument, `x -> body` or `(s, x) -> body` (which the parser reads as the
//!   JSON operator `->`; [`crate::rewrite`] has put the body in parentheses), becomes
//!   a lambda, and `x.field` inside it becomes `x['field']`, so `filter(series, x ->
//!   x.value > 70)` and `reduce(series, 0.0, (s, x) -> s + x.value, s -> s)` run as
//!   higher-order functions ([`crate::timeseries_fns`]);
//! - `CAST(ROW(a, b) AS ROW(x T, y U))`, the typed row Timestream's `reduce` examples
//!   keep their state in, becomes `named_struct('x', CAST(a AS T), 'y', CAST(b AS U))`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, DataType, Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, LambdaFunction, LambdaFunctionParameter, LambdaSyntax,
    OneOrManyWithParens, Subscript, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Rewrites the forms of the module docs.
pub(crate) fn rewrite(statement: &mut datafusion::sql::sqlparser::ast::Statement) {
    let _ = statement.visit(&mut Lambdas);
}

/// The lambda and `ROW` visitor of the module docs.
struct Lambdas;

impl VisitorMut for Lambdas {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if let SqlExpr::Function(f) = expr {
            lambdas(f);
        }
        if let Some(row) = typed_row(expr) {
            *expr = row;
        }
        ControlFlow::Continue(())
    }
}

/// `CAST(ROW(a, b) AS ROW(x T, y U))` as `named_struct('x', CAST(a AS T), 'y', CAST(b
/// AS U))`: DataFusion has no ROW type to cast to.
fn typed_row(expr: &SqlExpr) -> Option<SqlExpr> {
    let SqlExpr::Cast {
        expr: value,
        data_type: DataType::Custom(type_name, modifiers),
        format: None,
        ..
    } = expr
    else {
        return None;
    };
    if !type_name.to_string().eq_ignore_ascii_case("row") || modifiers.len() % 2 != 0 {
        return None;
    }
    let SqlExpr::Function(f) = value.as_ref() else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case("row") {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.args.len() * 2 != modifiers.len() {
        return None;
    }
    let fields: Vec<String> = list
        .args
        .iter()
        .zip(modifiers.chunks(2))
        .map(|(arg, pair)| {
            format!(
                "'{}', CAST(({arg}) AS {})",
                pair[0].replace('\'', "''"),
                pair[1]
            )
        })
        .collect();
    Parser::new(&GenericDialect {})
        .try_with_sql(&format!("named_struct({})", fields.join(", ")))
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// The parameter names of a lambda's head: `x`, `(x)` or `(s, x)`.
fn lambda_params(head: &SqlExpr) -> Option<Vec<Ident>> {
    match head {
        SqlExpr::Identifier(name) => Some(vec![name.clone()]),
        SqlExpr::Nested(inner) => lambda_params(inner),
        SqlExpr::Tuple(items) => items
            .iter()
            .map(|i| match i {
                SqlExpr::Identifier(name) => Some(name.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// `head -> body` arguments of `f` become lambdas.
fn lambdas(f: &mut Function) {
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
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
        let Some(params) = lambda_params(left) else {
            continue;
        };
        let mut body = right.clone();
        let _ = body.visit(&mut FieldsOf(&params));
        let mut params: Vec<LambdaFunctionParameter> = params
            .into_iter()
            .map(|name| LambdaFunctionParameter {
                name,
                data_type: None,
            })
            .collect();
        let params = if params.len() == 1
            && let Some(one) = params.pop()
        {
            OneOrManyWithParens::One(one)
        } else {
            OneOrManyWithParens::Many(params)
        };
        *e = SqlExpr::Lambda(LambdaFunction {
            params,
            body,
            syntax: LambdaSyntax::Arrow,
        });
    }
}

/// `p.field.more` for a lambda parameter `p` becomes `p['field']['more']` (DataFusion
/// resolves a dotted name against the tables only).
struct FieldsOf<'a>(&'a [Ident]);

impl VisitorMut for FieldsOf<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        let SqlExpr::CompoundIdentifier(parts) = expr else {
            return ControlFlow::Continue(());
        };
        let Some((first, fields)) = parts.split_first() else {
            return ControlFlow::Continue(());
        };
        if !self.0.iter().any(|p| p.value == first.value) {
            return ControlFlow::Continue(());
        }
        let access_chain = fields
            .iter()
            .map(|f| {
                AccessExpr::Subscript(Subscript::Index {
                    index: SqlExpr::Value(Value::SingleQuotedString(f.value.clone()).into()),
                })
            })
            .collect();
        *expr = SqlExpr::CompoundFieldAccess {
            root: Box::new(SqlExpr::Identifier(first.clone())),
            access_chain,
        };
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let text = match crate::rewrite::rewrite(sql) {
            Ok(text) => text,
            Err(e) => return format!("rewrite error: {e}"),
        };
        let mut statements = match Parser::parse_sql(&GenericDialect {}, &text) {
            Ok(s) => s,
            Err(e) => return format!("parse error: {e}"),
        };
        let Some(s) = statements.first_mut() else {
            return "no statement".to_string();
        };
        rewrite(s);
        s.to_string()
    }

    #[test]
    fn arrows_become_lambdas_with_field_access() {
        assert_eq!(
            rewritten("SELECT filter(ts, x -> x.value > 70 AND x.time > t.a) FROM t"),
            "SELECT filter(ts, x -> (x['value'] > 70 AND x['time'] > t.a)) FROM t"
        );
        assert_eq!(
            rewritten("SELECT reduce(ts, 0, (s, x) -> s.n + x.value, s -> s) FROM t"),
            "SELECT reduce(ts, 0, (s, x) -> (s['n'] + x['value']), s -> (s)) FROM t"
        );
    }

    #[test]
    fn typed_rows_become_named_structs() {
        assert_eq!(
            rewritten("SELECT CAST(ROW(0.0, 0) AS ROW(sum DOUBLE, count INTEGER))"),
            "SELECT named_struct('sum', CAST((0.0) AS DOUBLE), 'count', CAST((0) AS INTEGER))"
        );
    }
}
