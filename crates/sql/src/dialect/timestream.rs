//! Timestream's forms DataFusion plans under other spellings, rewritten in the parsed
//! statement (Timestream's dialect only):
//! - a lambda argument, `x -> body` or `(s, x) -> body` (which the parser reads as the
//!   JSON operator `->`; [`crate::rewrite`] has put the body in parentheses), becomes
//!   a lambda, and `x.field` inside it becomes `x['field']`, so `filter(series, x ->
//!   x.value > 70)` and `reduce(series, 0.0, (s, x) -> s + x.value, s -> s)` run as
//!   higher-order functions ([`crate::timeseries_fns`]);
//! - `CAST(ROW(a, b) AS ROW(x T, y U))`, the typed row Timestream's `reduce` examples
//!   keep their state in, becomes `named_struct('x', CAST(a AS T), 'y', CAST(b AS U))`;
//! - `FROM q CROSS JOIN UNNEST(series) AS t (time_alias, value_alias)` (or `FROM q,
//!   UNNEST(…)`), a lateral UNNEST DataFusion has no plan for, becomes a derived
//!   table that repeats each row of `q` once per point of its series:
//!
//!   ```sql
//!   (SELECT * EXCLUDE (__point), __point['time'] AS time_alias,
//!           __point['value'] AS value_alias
//!    FROM (SELECT q.*, unnest(series) AS __point FROM q) AS q) AS q
//!   ```
//!
//!   and `t.time_alias` elsewhere in the SELECT is `q.time_alias`. Without column
//!   aliases the columns are `time` and `value`; with one alias, the element itself
//!   (an array of anything). The left side must be one table, CTE or subquery (a join
//!   before the UNNEST is left as it is, and DataFusion refuses it).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, DataType, Expr as SqlExpr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, JoinOperator, LambdaFunction, LambdaFunctionParameter, LambdaSyntax,
    OneOrManyWithParens, OrderByKind, Query, Select, SetExpr, Subscript, TableFactor,
    TableWithJoins, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The column the rewritten UNNEST holds each point in, before it is split.
const POINT_COLUMN: &str = "__point";
/// The alias a left side without a name gets.
const LEFT_ALIAS: &str = "__left";

/// Rewrites the forms of the module docs.
pub(crate) fn rewrite(statement: &mut datafusion::sql::sqlparser::ast::Statement) {
    let _ = statement.visit(&mut Lambdas);
    let _ = statement.visit(&mut LateralUnnest);
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

/// The UNNEST visitor of the module docs.
struct LateralUnnest;

impl VisitorMut for LateralUnnest {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let Query { body, order_by, .. } = query;
        let mut renames = Vec::new();
        unnest_in(body, &mut renames);
        if let Some(order_by) = order_by
            && let OrderByKind::Expressions(items) = &mut order_by.kind
        {
            for item in items {
                rename(&mut item.expr, &renames);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Rewrites the lateral UNNESTs of the SELECTs of `body`; notes each (UNNEST alias,
/// new qualifier) pair.
fn unnest_in(body: &mut SetExpr, renames: &mut Vec<(Ident, Ident)>) {
    match body {
        SetExpr::Select(select) => {
            let found = unnest_select(select);
            for (from, to) in &found {
                rename_select(select, from, to);
            }
            renames.extend(found);
        }
        SetExpr::SetOperation { left, right, .. } => {
            unnest_in(left, renames);
            unnest_in(right, renames);
        }
        _ => {}
    }
}

/// The rewrite of one SELECT's FROM; the qualifier renames it needs.
fn unnest_select(select: &mut Select) -> Vec<(Ident, Ident)> {
    let mut renames = Vec::new();
    // `FROM q, UNNEST(…)`: the UNNEST as a cross join of the relation before it.
    let mut i = 1;
    while i < select.from.len() {
        if matches!(select.from[i].relation, TableFactor::UNNEST { .. })
            && select.from[i].joins.is_empty()
            && select.from[i - 1].joins.is_empty()
        {
            let unnest = select.from.remove(i);
            select.from[i - 1]
                .joins
                .push(datafusion::sql::sqlparser::ast::Join {
                    relation: unnest.relation,
                    global: false,
                    join_operator: JoinOperator::CrossJoin(
                        datafusion::sql::sqlparser::ast::JoinConstraint::None,
                    ),
                });
            continue;
        }
        i += 1;
    }
    for twj in &mut select.from {
        if let Some(rename) = unnest_first_join(twj) {
            renames.extend(rename);
        }
    }
    renames
}

/// `relation CROSS JOIN UNNEST(…)` as the first join of `twj`, rewritten; the
/// rename of the UNNEST's alias, if it has one.
fn unnest_first_join(twj: &mut TableWithJoins) -> Option<Option<(Ident, Ident)>> {
    let first = twj.joins.first()?;
    let TableFactor::UNNEST {
        alias,
        array_exprs,
        with_offset: false,
        with_ordinality: false,
        ..
    } = &first.relation
    else {
        return None;
    };
    if !matches!(
        first.join_operator,
        JoinOperator::CrossJoin(_) | JoinOperator::Join(_) | JoinOperator::Inner(_)
    ) {
        return None;
    }
    let [series] = array_exprs.as_slice() else {
        return None;
    };
    let (alias, series) = (alias.clone(), series.clone());
    let (left_text, qualifier) = left_side(&twj.relation)?;
    let columns: Vec<Ident> = alias
        .as_ref()
        .map(|a| a.columns.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let point = POINT_COLUMN;
    let split = match columns.as_slice() {
        [] => format!("{point}['time'] AS \"time\", {point}['value'] AS \"value\""),
        [one] => format!("{point} AS {one}"),
        [time, value] => format!("{point}['time'] AS {time}, {point}['value'] AS {value}"),
        _ => return None,
    };
    let text = format!(
        "(SELECT * EXCLUDE ({point}), {split} FROM (SELECT {qualifier}.*, unnest({series}) AS {point} \
         FROM {left_text}) AS {qualifier}) AS {qualifier}"
    );
    let factor = Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_table_factor())
        .ok()?;
    twj.relation = factor;
    twj.joins.remove(0);
    Some(alias.as_ref().map(|a| (a.name.clone(), qualifier)))
}

/// The text of the left side of a lateral UNNEST (with an alias) and the qualifier of
/// its columns, for one table, CTE or subquery.
fn left_side(relation: &TableFactor) -> Option<(String, Ident)> {
    match relation {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived {
            lateral: false,
            alias: Some(a),
            ..
        } => Some((relation.to_string(), a.name.clone())),
        TableFactor::Table {
            name, alias: None, ..
        } => {
            let last = name.0.last()?.as_ident()?.clone();
            Some((format!("{relation} AS {last}"), last))
        }
        TableFactor::Derived {
            lateral: false,
            alias: None,
            ..
        } => Some((
            format!("{relation} AS {LEFT_ALIAS}"),
            Ident::new(LEFT_ALIAS),
        )),
        _ => None,
    }
}

/// `from.x` becomes `to.x` in the SELECT's expressions.
fn rename_select(select: &mut Select, from: &Ident, to: &Ident) {
    let renames = [(from.clone(), to.clone())];
    let _ = select.projection.visit(&mut Renamer(&renames));
    if let Some(w) = &mut select.selection {
        rename(w, &renames);
    }
    let _ = select.group_by.visit(&mut Renamer(&renames));
    if let Some(h) = &mut select.having {
        rename(h, &renames);
    }
}

fn rename(expr: &mut SqlExpr, renames: &[(Ident, Ident)]) {
    if !renames.is_empty() {
        let _ = expr.visit(&mut Renamer(renames));
    }
}

struct Renamer<'a>(&'a [(Ident, Ident)]);

impl VisitorMut for Renamer<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if let SqlExpr::CompoundIdentifier(parts) = expr
            && parts.len() >= 2
            && let Some((_, to)) = self.0.iter().find(|(from, _)| parts[0].value == from.value)
        {
            parts[0] = to.clone();
        }
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

    #[test]
    fn lateral_unnest_becomes_a_derived_table() {
        assert_eq!(
            rewritten(
                "SELECT h, avg(t.v) FROM q CROSS JOIN UNNEST(series) AS t (tm, v) \
                 GROUP BY h ORDER BY avg(t.v)"
            ),
            "SELECT h, avg(q.v) FROM (SELECT * EXCLUDE (__point), __point['time'] AS tm, \
             __point['value'] AS v FROM (SELECT q.*, unnest(series) AS __point FROM q AS q) AS q) \
             AS q GROUP BY h ORDER BY avg(q.v)"
        );
        assert_eq!(
            rewritten("SELECT time, value FROM db.tbl AS x, UNNEST(x.s)"),
            "SELECT time, value FROM (SELECT * EXCLUDE (__point), __point['time'] AS \"time\", \
             __point['value'] AS \"value\" FROM (SELECT x.*, unnest(x.s) AS __point FROM db.tbl AS x) \
             AS x) AS x"
        );
        // UNNEST on its own stays DataFusion's.
        assert_eq!(
            rewritten("SELECT * FROM UNNEST([1, 2])"),
            "SELECT * FROM UNNEST([1, 2])"
        );
    }
}
