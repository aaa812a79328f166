//! GoogleSQL for Bigtable's `UNPACK`: `FROM UNPACK((SELECT … FROM t(with_history =>
//! TRUE) …))` turns each input row into one row per timestamp its history columns hold,
//! newest first, with that timestamp in a `_timestamp` column (after `_key`, else
//! first). A family of versions (`MAP<qualifier, ARRAY<STRUCT<timestamp, value>>>`)
//! becomes the map of the value each qualifier has at that timestamp (qualifiers
//! without one left out); one column's versions (`ARRAY<STRUCT<timestamp, value>>`)
//! become its value at that timestamp (NULL without one); other columns repeat. A row
//! with no version gives no row.
//!
//! Step by step ([`replace`], before the statement is planned):
//! 1. Each `UNPACK((query))` in a FROM clause is taken out of the statement and
//!    `__unpack(n)` put in its place.
//! 2. The query is planned, then extended: `unpack_times(history columns…)` lists the
//!    row's timestamps, `unnest` makes a row of each, and `unpack_at(column,
//!    timestamp)` picks each history column's values at it.
//! 3. `__unpack(n)` is a table function that hands back plan n as a view.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, ListArray, ListBuilder, MapArray, StructArray,
    TimestampMicrosecondBuilder, UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit, TimestampMicrosecondType};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{Column, ScalarValue, plan_err};
use datafusion::datasource::ViewTable;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, LogicalPlanBuilder, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, FunctionArg, FunctionArgExpr, Ident, ObjectName, ObjectNamePart, Query,
    Statement as SqlStatement, TableFactor, Value, VisitMut, VisitorMut,
};

use crate::bigtable::TIMESTAMP_COLUMN;

/// The table function `UNPACK((query))` becomes.
const UNPACK_FUNCTION: &str = "__unpack";
/// The column of each row's timestamps while the plan unnests them.
const TIMES_COLUMN: &str = "__unpack_times";
/// The key column `_timestamp` follows.
const KEY_COLUMN: &str = "_key";

/// Takes each `UNPACK((query))` out of `statement`, plans it, and registers the
/// `__unpack` function on `ctx` that serves the plans.
pub(crate) async fn replace(statement: &mut DfStatement, ctx: &SessionContext) -> DfResult<()> {
    let DfStatement::Statement(s) = statement else {
        return Ok(());
    };
    let mut found = TakeQueries(Vec::new());
    let _ = s.visit(&mut found);
    if found.0.is_empty() {
        return Ok(());
    }
    let state = ctx.state();
    let mut plans = Vec::with_capacity(found.0.len());
    for query in found.0 {
        let inner = DfStatement::Statement(Box::new(SqlStatement::Query(Box::new(query))));
        plans.push(unpack_plan(state.statement_to_plan(inner).await?)?);
    }
    ctx.register_udtf(UNPACK_FUNCTION, Arc::new(Unpacked(plans)));
    Ok(())
}

/// Replaces `UNPACK((query))` table factors by `__unpack(n)`, keeping the queries.
struct TakeQueries(Vec<Query>);

impl VisitorMut for TakeQueries {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let Some((name, args)) = crate::dialect::table_call(factor) else {
            return ControlFlow::Continue(());
        };
        let is_unpack = matches!(name.0.as_slice(), [ObjectNamePart::Identifier(i)]
            if i.value.eq_ignore_ascii_case("unpack"));
        if !is_unpack {
            return ControlFlow::Continue(());
        }
        let single_query = matches!(
            args.args.as_slice(),
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(
                SqlExpr::Subquery(_)
            ))]
        );
        if !single_query {
            return ControlFlow::Continue(());
        }
        let n = Value::Number(self.0.len().to_string(), false);
        let taken = std::mem::replace(
            &mut args.args,
            vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::value(
                n,
            )))],
        );
        if let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::Subquery(query)))) =
            taken.into_iter().next()
        {
            self.0.push(*query);
        }
        *name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
            UNPACK_FUNCTION,
        ))]);
        ControlFlow::Continue(())
    }
}

/// `__unpack(n)`: plan n as a view.
#[derive(Debug)]
struct Unpacked(Vec<LogicalPlan>);

impl TableFunctionImpl for Unpacked {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let n = match args.exprs() {
            [Expr::Literal(ScalarValue::Int64(Some(n)), _)] => usize::try_from(*n).ok(),
            _ => None,
        };
        match n.and_then(|n| self.0.get(n)) {
            Some(plan) => Ok(Arc::new(ViewTable::new(plan.clone(), None))),
            None => plan_err!("UNPACK takes one query in parentheses: UNPACK((SELECT …))"),
        }
    }
}

/// How a column holds versions, with the type of its values.
enum Shape {
    /// `MAP<qualifier, ARRAY<STRUCT<timestamp, value>>>` (a family).
    Family { key: DataType, value: DataType },
    /// `ARRAY<STRUCT<timestamp, value>>` (one column).
    Column { value: DataType },
}

/// The value type of a `{timestamp, value}` version list.
fn versions_value(t: &DataType) -> Option<DataType> {
    let DataType::List(item) = t else { return None };
    let DataType::Struct(fields) = item.data_type() else {
        return None;
    };
    match fields.iter().map(|f| f.name().as_str()).collect::<Vec<_>>()[..] {
        ["timestamp", "value"]
            if matches!(
                fields[0].data_type(),
                DataType::Timestamp(TimeUnit::Microsecond, _)
            ) =>
        {
            Some(fields[1].data_type().clone())
        }
        _ => None,
    }
}

fn shape(t: &DataType) -> Option<Shape> {
    if let DataType::Map(entries, _) = t {
        let DataType::Struct(kv) = entries.data_type() else {
            return None;
        };
        let value = versions_value(kv.get(1)?.data_type())?;
        return Some(Shape::Family {
            key: kv[0].data_type().clone(),
            value,
        });
    }
    versions_value(t).map(|value| Shape::Column { value })
}

fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The map type a family becomes: the same as a family read without history.
fn value_map_type(key: DataType, value: DataType) -> DataType {
    let entries = Fields::from(vec![
        Field::new("keys", key, false),
        Field::new("values", value, true),
    ]);
    DataType::Map(
        Arc::new(Field::new("entries", DataType::Struct(entries), false)),
        false,
    )
}

/// The plan of `UNPACK((input))`.
fn unpack_plan(input: LogicalPlan) -> DfResult<LogicalPlan> {
    let schema = Arc::clone(input.schema());
    let columns: Vec<(Expr, String, bool)> = schema
        .iter()
        .map(|(q, f)| {
            (
                Expr::Column(Column::new(q.cloned(), f.name())),
                f.name().clone(),
                shape(f.data_type()).is_some(),
            )
        })
        .collect();
    let history: Vec<Expr> = columns
        .iter()
        .filter(|c| c.2)
        .map(|c| c.0.clone())
        .collect();
    if history.is_empty() {
        return plan_err!(
            "UNPACK needs a query over a table read with with_history => TRUE; none of \
             its columns holds timestamped versions"
        );
    }
    if columns.iter().any(|c| c.1 == TIMESTAMP_COLUMN) {
        return plan_err!("UNPACK makes the {TIMESTAMP_COLUMN} column; its query already has one");
    }
    let times = call(&UNPACK_TIMES, history).alias(TIMES_COLUMN);
    let mut first: Vec<Expr> = columns.iter().map(|c| c.0.clone()).collect();
    first.push(times);
    let unnested = LogicalPlanBuilder::from(input)
        .project(first)?
        .unnest_column(TIMES_COLUMN)?
        .build()?;
    let at = Expr::Column(Column::from_name(TIMES_COLUMN));
    let mut out = Vec::with_capacity(columns.len() + 1);
    let stamp = at.clone().alias(TIMESTAMP_COLUMN);
    if !columns.iter().any(|c| c.1 == KEY_COLUMN) {
        out.push(stamp.clone());
    }
    for (expr, name, is_history) in columns {
        let key = name == KEY_COLUMN;
        out.push(if is_history {
            call(&UNPACK_AT, vec![expr, at.clone()]).alias(name)
        } else {
            expr
        });
        if key {
            out.push(stamp.clone());
        }
    }
    LogicalPlanBuilder::from(unnested).project(out)?.build()
}

fn call(udf: &std::sync::LazyLock<Arc<ScalarUDF>>, args: Vec<Expr>) -> Expr {
    Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(udf), args))
}

static UNPACK_TIMES: std::sync::LazyLock<Arc<ScalarUDF>> =
    std::sync::LazyLock::new(|| Arc::new(ScalarUDF::from(UnpackTimes::default())));
static UNPACK_AT: std::sync::LazyLock<Arc<ScalarUDF>> =
    std::sync::LazyLock::new(|| Arc::new(ScalarUDF::from(UnpackAt::default())));

/// The versions of one history column's rows.
struct Versions<'a> {
    /// A family's map (`None`: one column).
    map: Option<&'a MapArray>,
    /// The version lists: the map's values, or the column itself.
    lists: &'a ListArray,
    /// The versions: `{timestamp, value}`.
    versions: &'a StructArray,
}

impl<'a> Versions<'a> {
    fn of(a: &'a ArrayRef) -> DfResult<Self> {
        let (map, lists) = match a.data_type() {
            DataType::Map(..) => {
                let m = a.as_map();
                (Some(m), m.values().as_list::<i32>())
            }
            _ => (None, a.as_list::<i32>()),
        };
        Ok(Self {
            map,
            lists,
            versions: lists.values().as_struct(),
        })
    }

    /// The version lists of `row` (indices into `lists`).
    fn lists_of(&self, row: usize) -> std::ops::Range<usize> {
        match self.map {
            Some(m) if !m.is_null(row) => {
                let o = m.value_offsets();
                o[row] as usize..o[row + 1] as usize
            }
            Some(_) => 0..0,
            None if self.lists.is_null(row) => 0..0,
            None => row..row + 1,
        }
    }

    /// The versions of list `j` (indices into `versions`).
    fn versions_of(&self, j: usize) -> std::ops::Range<usize> {
        let o = self.lists.value_offsets();
        o[j] as usize..o[j + 1] as usize
    }

    fn time(&self, k: usize) -> i64 {
        self.versions
            .column(0)
            .as_primitive::<TimestampMicrosecondType>()
            .value(k)
    }
}

/// `unpack_times(history…)`: each row's distinct timestamps, newest first.
#[derive(Debug, PartialEq, Eq, Hash)]
struct UnpackTimes {
    signature: Signature,
}

impl Default for UnpackTimes {
    fn default() -> Self {
        Self {
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for UnpackTimes {
    fn name(&self) -> &str {
        "unpack_times"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::List(Arc::new(Field::new_list_field(
            timestamp_type(),
            true,
        ))))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let columns: Vec<Versions<'_>> =
            arrays.iter().map(Versions::of).collect::<DfResult<_>>()?;
        let mut out = ListBuilder::new(TimestampMicrosecondBuilder::new().with_timezone("UTC"));
        for row in 0..rows {
            let mut times = BTreeSet::new();
            for c in &columns {
                for j in c.lists_of(row) {
                    times.extend(c.versions_of(j).map(|k| c.time(k)));
                }
            }
            for t in times.into_iter().rev() {
                out.values().append_value(t);
            }
            out.append(true);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `unpack_at(history, timestamp)`: a family's values at the timestamp (a map), or one
/// column's (a value).
#[derive(Debug, PartialEq, Eq, Hash)]
struct UnpackAt {
    signature: Signature,
}

impl Default for UnpackAt {
    fn default() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for UnpackAt {
    fn name(&self) -> &str {
        "unpack_at"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first().and_then(shape) {
            Some(Shape::Family { key, value }) => Ok(value_map_type(key, value)),
            Some(Shape::Column { value }) => Ok(value),
            None => plan_err!("unpack_at takes a column of timestamped versions"),
        }
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (Some(history), Some(at)) = (arrays.first(), arrays.get(1)) else {
            return plan_err!("unpack_at takes two arguments");
        };
        let v = Versions::of(history)?;
        let at = at.as_primitive::<TimestampMicrosecondType>();
        let values = v.versions.column(1);
        let pick = |row: usize, j: usize| -> Option<u32> {
            if at.is_null(row) {
                return None;
            }
            let t = at.value(row);
            v.versions_of(j).find(|&k| v.time(k) == t).map(|k| k as u32)
        };
        match (v.map, return_shape(history.data_type())) {
            (Some(map), Some(DataType::Map(entries, sorted))) => {
                let (mut keys, mut picked, mut offsets) = (Vec::new(), Vec::new(), vec![0i32]);
                for row in 0..rows {
                    for j in v.lists_of(row) {
                        if let Some(k) = pick(row, j) {
                            keys.push(j as u32);
                            picked.push(k);
                        }
                    }
                    offsets.push(keys.len() as i32);
                }
                let DataType::Struct(fields) = entries.data_type() else {
                    return plan_err!("unpack_at: a map without entries");
                };
                let kv = StructArray::try_new(
                    fields.clone(),
                    vec![
                        take(map.keys(), &UInt32Array::from(keys), None)?,
                        take(values, &UInt32Array::from(picked), None)?,
                    ],
                    None,
                )?;
                let out = MapArray::try_new(
                    entries,
                    OffsetBuffer::new(offsets.into()),
                    kv,
                    None,
                    sorted,
                )?;
                Ok(ColumnarValue::Array(Arc::new(out)))
            }
            _ => {
                let idx: UInt32Array = (0..rows)
                    .map(|row| v.lists_of(row).next().and_then(|j| pick(row, j)))
                    .collect();
                Ok(ColumnarValue::Array(take(values, &idx, None)?))
            }
        }
    }
}

fn return_shape(t: &DataType) -> Option<DataType> {
    match shape(t)? {
        Shape::Family { key, value } => Some(value_map_type(key, value)),
        Shape::Column { value } => Some(value),
    }
}
