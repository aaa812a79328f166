//! The two SQL dialects Almanac answers, and where they differ.
//!
//! - **Timestream** (the Query API, `almanac sql`): Presto's arrays count from 1;
//!   lambdas `x -> …`, `(s, x) -> …` and `CROSS JOIN UNNEST(series) AS t (time, value)`
//!   ([`timestream_forms`]).
//! - **GoogleSQL for Bigtable** (ExecuteQuery): arrays count from 0 — `a[0]`,
//!   `a[OFFSET(0)]`, `a[SAFE_OFFSET(0)]`, `a[ORDINAL(1)]`, `a[SAFE_ORDINAL(1)]`
//!   ([`ZeroBasedArrays`]); an index outside the array fails the query, but gives
//!   NULL with `SAFE_OFFSET` and `SAFE_ORDINAL`, as in GoogleSQL. `SELECT *` over one Bigtable table gives
//!   `_key` and the families, as GoogleSQL does; `_timestamp` (the row's newest cell)
//!   stays selectable by name ([`exclude_timestamp`]).
//! - In Timestream's, a select-list expression without an alias is named by its
//!   position, `_col0`, `_col1`, … ([`name_unnamed_columns`]), as Timestream names
//!   it; a plain column keeps its name. The position counts select items, so after a
//!   `*` it is not the output column's (Timestream counts the columns `*` expands to).

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ParamValues, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::GetFieldAccess;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, lit,
};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, ExcludeSelectItem, Expr as SqlExpr, Ident, ObjectName, Query, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement as SqlStatement, TableFactor,
    UnaryOperator, Value, VisitMut, VisitorMut,
};
use datafusion::sql::unparser::Unparser;

mod calls;
mod timestream;

use crate::bigtable::TIMESTAMP_COLUMN;
use crate::catalog::HISTORY_FUNCTION;

/// Which SQL a query is written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Timestream's (the Query API): arrays count from 1.
    #[default]
    Timestream,
    /// GoogleSQL for Bigtable (ExecuteQuery): arrays count from 0, `SELECT *` has no
    /// `_timestamp`.
    GoogleSql,
}

/// GoogleSQL's subscript markers: `OFFSET` and `SAFE_OFFSET` count from 0, `ORDINAL`
/// and `SAFE_ORDINAL` from 1. Outside a subscript each is its argument.
const MARKERS: [(&str, i64); 4] = [
    ("offset", 1),
    ("safe_offset", 1),
    ("ordinal", 0),
    ("safe_ordinal", 0),
];

/// An index marker of [`MARKERS`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct Marker {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for Marker {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(args.args[0].clone())
    }
}

/// The subscript markers as functions (GoogleSQL's session only).
pub(crate) fn markers() -> Vec<ScalarUDF> {
    MARKERS
        .iter()
        .map(|(name, _)| {
            ScalarUDF::from(Marker {
                name,
                signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable),
            })
        })
        .collect()
}

/// `a[i]` on an array, counted from 0, or with GoogleSQL's markers.
#[derive(Debug, Default)]
pub struct ZeroBasedArrays;

impl ExprPlanner for ZeroBasedArrays {
    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawFieldAccessExpr>> {
        let GetFieldAccess::ListIndex { key } = &expr.field_access else {
            return Ok(PlannerResult::Original(expr));
        };
        let is_list = matches!(
            expr.expr.get_type(schema)?,
            DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
        );
        if !is_list {
            return Ok(PlannerResult::Original(expr));
        }
        // The 1-based index DataFusion's array_element takes, and whether an index
        // outside the array gives NULL (SAFE_…) rather than an error.
        let (index, safe) = match key.as_ref() {
            Expr::ScalarFunction(f) if f.args.len() == 1 => {
                let name = f.func.name().to_ascii_lowercase();
                match MARKERS.iter().find(|(m, _)| *m == name) {
                    Some((m, add)) => (
                        f.args[0].clone() + lit(ScalarValue::Int64(Some(*add))),
                        m.starts_with("safe_"),
                    ),
                    None => (*key.clone() + lit(1i64), false),
                }
            }
            other => (other.clone() + lit(1i64), false),
        };
        let planned = if safe {
            datafusion::functions_nested::expr_fn::array_element(expr.expr, index)
        } else {
            Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
                Arc::new(ScalarUDF::from(CheckedElement::default())),
                vec![expr.expr, index],
            ))
        };
        Ok(PlannerResult::Planned(planned))
    }
}

/// `a[i]`, `a[OFFSET(i)]`, `a[ORDINAL(i)]`: DataFusion's `array_element` (1-based),
/// failing the query for an index outside the array, as GoogleSQL does.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedElement {
    signature: Signature,
}

impl Default for CheckedElement {
    fn default() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for CheckedElement {
    fn name(&self) -> &str {
        "array_offset"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) => {
                Ok(f.data_type().clone())
            }
            other => datafusion::common::plan_err!("array subscript on {other:?}"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        use datafusion::arrow::array::{Array, AsArray};
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (list, index) = (&arrays[0], &arrays[1]);
        let index = datafusion::arrow::compute::cast(index, &DataType::Int64)?;
        let index = index.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        for row in 0..rows {
            if list.is_null(row) || index.is_null(row) {
                continue;
            }
            let len = match list.data_type() {
                DataType::List(_) => list.as_list::<i32>().value_length(row) as i64,
                DataType::LargeList(_) => list.as_list::<i64>().value_length(row),
                DataType::FixedSizeList(_, n) => i64::from(*n),
                _ => continue,
            };
            let one_based = index.value(row);
            if one_based < 1 || one_based > len {
                return datafusion::common::exec_err!(
                    "Array index {} (counted from 0) is out of bounds: the array has {len} \
                     elements (SAFE_OFFSET and SAFE_ORDINAL give NULL instead)",
                    one_based - 1
                );
            }
        }
        datafusion::functions_nested::extract::array_element_udf().invoke_with_args(args)
    }
}

/// Whether a FROM relation is one Bigtable table (a bare name that is not a CTE, or
/// the history table function).
fn is_bigtable(factor: &TableFactor, ctes: &HashSet<String>) -> bool {
    match factor {
        // A bare name that is not a CTE, without arguments (another table function
        // has no `_timestamp`), or the history form.
        TableFactor::Table { name, args, .. } => match name.0.as_slice() {
            [part] => part.as_ident().is_some_and(|i| {
                !ctes.contains(&i.value)
                    && (args.is_none() || i.value.eq_ignore_ascii_case(HISTORY_FUNCTION))
            }),
            _ => false,
        },
        _ => false,
    }
}

/// Adds `EXCLUDE (_timestamp)` to `*` in the SELECTs of `body` that read one
/// Bigtable table.
fn exclude_in(body: &mut SetExpr, ctes: &HashSet<String>) {
    match body {
        SetExpr::Select(select) => {
            let one_table = matches!(select.from.as_slice(),
                [t] if t.joins.is_empty() && is_bigtable(&t.relation, ctes));
            if !one_table {
                return;
            }
            for item in &mut select.projection {
                // `*` and `t.*` alike (a qualifier can only name the one table).
                let options = match item {
                    SelectItem::Wildcard(options)
                    | SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(_),
                        options,
                    ) => options,
                    _ => continue,
                };
                let column = ObjectName::from(vec![Ident::new(TIMESTAMP_COLUMN)]);
                let named = |n: &ObjectName| n.to_string().eq_ignore_ascii_case(TIMESTAMP_COLUMN);
                let already = match &options.opt_exclude {
                    Some(ExcludeSelectItem::Single(one)) => named(one),
                    Some(ExcludeSelectItem::Multiple(many)) => many.iter().any(named),
                    None => false,
                };
                if already {
                    continue;
                }
                options.opt_exclude = match options.opt_exclude.take() {
                    None => Some(ExcludeSelectItem::Single(column)),
                    Some(ExcludeSelectItem::Single(one)) => {
                        Some(ExcludeSelectItem::Multiple(vec![one, column]))
                    }
                    Some(ExcludeSelectItem::Multiple(mut many)) => {
                        many.push(column);
                        Some(ExcludeSelectItem::Multiple(many))
                    }
                };
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            exclude_in(left, ctes);
            exclude_in(right, ctes);
        }
        // A parenthesized query is a Query of its own, which the visitor reaches.
        _ => {}
    }
}

struct CteNames(HashSet<String>);

impl VisitorMut for CteNames {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.0.insert(cte.alias.name.value.clone());
            }
        }
        ControlFlow::Continue(())
    }
}

struct Exclude(Arc<HashSet<String>>);

impl VisitorMut for Exclude {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        exclude_in(&mut query.body, &self.0);
        ControlFlow::Continue(())
    }
}

/// GoogleSQL's `x [NOT] IN UNNEST(array)`, which DataFusion does not plan, as
/// `[NOT] (x = ANY(array))`.
struct InUnnest;

impl VisitorMut for InUnnest {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if let SqlExpr::InUnnest {
            expr: x,
            array_expr,
            negated,
        } = expr
        {
            let any = SqlExpr::AnyOp {
                left: x.clone(),
                compare_op: BinaryOperator::Eq,
                right: array_expr.clone(),
                is_some: false,
            };
            *expr = if *negated {
                SqlExpr::UnaryOp {
                    op: UnaryOperator::Not,
                    expr: Box::new(SqlExpr::Nested(Box::new(any))),
                }
            } else {
                any
            };
        }
        ControlFlow::Continue(())
    }
}

/// GoogleSQL's forms DataFusion plans under another spelling: `IN UNNEST`, and the
/// calls and operators of [`calls`].
pub(crate) fn googlesql_forms(statement: &mut DfStatement) {
    if let DfStatement::Statement(s) = statement {
        let _ = s.visit(&mut InUnnest);
        let _ = s.visit(&mut calls::Calls);
    }
}

/// Timestream's forms of [`timestream`]: lambdas and lateral `UNNEST`.
pub(crate) fn timestream_forms(statement: &mut DfStatement) {
    match statement {
        DfStatement::Statement(s) => timestream::rewrite(s),
        DfStatement::Explain(e) => timestream_forms(&mut e.statement),
        _ => {}
    }
}

/// GoogleSQL's `SELECT *` over a Bigtable table: `_key` and the families, without
/// `_timestamp`.
pub(crate) fn exclude_timestamp(statement: &mut DfStatement) {
    let DfStatement::Statement(s) = statement else {
        return;
    };
    let mut ctes = CteNames(HashSet::new());
    let _ = s.visit(&mut ctes);
    let _ = s.visit(&mut Exclude(Arc::new(ctes.0)));
}

/// Timestream's names for unnamed select-list expressions of the outermost query:
/// `_col` and the position.
pub(crate) fn name_unnamed_columns(statement: &mut DfStatement) {
    let DfStatement::Statement(s) = statement else {
        return;
    };
    let SqlStatement::Query(query) = s.as_mut() else {
        return;
    };
    let mut body = query.body.as_mut();
    // A set operation takes its names from its first SELECT.
    loop {
        match body {
            SetExpr::SetOperation { left, .. } => body = left.as_mut(),
            SetExpr::Query(q) => body = q.body.as_mut(),
            _ => break,
        }
    }
    let SetExpr::Select(select) = body else {
        return;
    };
    for (i, item) in select.projection.iter_mut().enumerate() {
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        if matches!(
            expr,
            SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_)
        ) {
            continue;
        }
        let alias = Ident::new(format!("_col{i}"));
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias,
        };
    }
}

/// Query parameters in the arguments of a table in FROM (`t(latest_n => @n)`), which
/// are read while planning, before parameters are bound: each becomes its value's
/// literal. A NULL (PrepareQuery binds typed NULLs) leaves the argument out.
pub(crate) fn bind_table_arguments(statement: &mut DfStatement, params: &ParamValues) {
    if let DfStatement::Statement(s) = statement {
        let _ = s.visit(&mut TableArguments(params));
    }
}

/// A table in FROM written as a call, `name(args…)`: its name and arguments.
pub(crate) fn table_call(
    factor: &mut TableFactor,
) -> Option<(
    &mut ObjectName,
    &mut datafusion::sql::sqlparser::ast::TableFunctionArgs,
)> {
    match factor {
        TableFactor::Table {
            name,
            args: Some(args),
            ..
        } => Some((name, args)),
        _ => None,
    }
}

struct TableArguments<'a>(&'a ParamValues);

impl VisitorMut for TableArguments<'_> {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let Some((name, args)) = table_call(factor) else {
            return ControlFlow::Continue(());
        };
        if !name.to_string().eq_ignore_ascii_case(HISTORY_FUNCTION) {
            return ControlFlow::Continue(());
        }
        // (name, value) pairs after the table name; a NULL value drops its pair.
        let mut kept = Vec::with_capacity(args.args.len());
        let mut items = std::mem::take(&mut args.args).into_iter();
        if let Some(table) = items.next() {
            kept.push(table);
        }
        while let Some(arg_name) = items.next() {
            let Some(mut value) = items.next() else {
                kept.push(arg_name);
                break;
            };
            let mut null = false;
            let _ = value.visit(&mut Placeholders {
                params: self.0,
                null: &mut null,
            });
            if !null {
                kept.push(arg_name);
                kept.push(value);
            }
        }
        args.args = kept;
        ControlFlow::Continue(())
    }
}

/// Replaces each placeholder by its value's literal; notes whether one was NULL.
struct Placeholders<'a> {
    params: &'a ParamValues,
    null: &'a mut bool,
}

impl VisitorMut for Placeholders<'_> {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        let SqlExpr::Value(v) = expr else {
            return ControlFlow::Continue(());
        };
        let Value::Placeholder(id) = &v.value else {
            return ControlFlow::Continue(());
        };
        let Ok(bound) = self.params.get_placeholders_with_values(id) else {
            return ControlFlow::Continue(());
        };
        if bound.value.is_null() {
            *self.null = true;
            return ControlFlow::Continue(());
        }
        if let Ok(literal) = Unparser::default().expr_to_sql(&lit(bound.value)) {
            *expr = literal;
        }
        ControlFlow::Continue(())
    }
}
