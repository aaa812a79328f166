//! GoogleSQL's names for what DataFusion has under others, its map functions, and its
//! division (GoogleSQL's session only):
//! - aliases: `LOGICAL_AND`/`LOGICAL_OR` (`bool_and`/`bool_or`), `ARRAY_INCLUDES`,
//!   `ARRAY_INCLUDES_ANY`, `ARRAY_INCLUDES_ALL` (`array_has…`), `APPROX_COUNT_DISTINCT`
//!   (`approx_distinct`), `IFNULL` (`nvl`), `CEILING` (`ceil`),
//!   `GENERATE_ARRAY` (`generate_series`), `VARIANCE` (`var_samp`);
//! - `MAP_CONTAINS_KEY(m, k)`, `MAP_EMPTY(m)`, `MAP_ENTRIES(m)` (an array of
//!   `STRUCT<key, value>` in key order);
//! - `/` on two integers gives FLOAT64, as GoogleSQL's division always does
//!   ([`FloatDivision`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, ListArray, StructArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::{DFSchema, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility, cast,
};

/// Registers the aliases and the map functions.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    use datafusion::functions::core::nvl;
    use datafusion::functions::math;
    use datafusion::functions_aggregate::{approx_distinct, bool_and_or, variance};
    use datafusion::functions_nested::{array_has, range};
    for (udf, alias) in [
        (array_has::array_has_udf(), "array_includes"),
        (array_has::array_has_any_udf(), "array_includes_any"),
        (array_has::array_has_all_udf(), "array_includes_all"),
        (nvl(), "ifnull"),
        (math::ceil(), "ceiling"),
        (range::gen_series_udf(), "generate_array"),
    ] {
        state.register_udf(Arc::new(udf.as_ref().clone().with_aliases([alias])))?;
    }
    for (udaf, alias) in [
        (bool_and_or::bool_and_udaf(), "logical_and"),
        (bool_and_or::bool_or_udaf(), "logical_or"),
        (
            approx_distinct::approx_distinct_udaf(),
            "approx_count_distinct",
        ),
        (variance::var_samp_udaf(), "variance"),
    ] {
        state.register_udaf(Arc::new(udaf.as_ref().clone().with_aliases([alias])))?;
    }
    for op in [MapOp::ContainsKey, MapOp::Empty, MapOp::Entries] {
        state.register_udf(Arc::new(ScalarUDF::from(MapFn {
            op,
            signature: Signature::any(op.arity(), Volatility::Immutable),
        })))?;
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum MapOp {
    ContainsKey,
    Empty,
    Entries,
}

impl MapOp {
    fn name(self) -> &'static str {
        match self {
            Self::ContainsKey => "map_contains_key",
            Self::Empty => "map_empty",
            Self::Entries => "map_entries",
        }
    }

    fn arity(self) -> usize {
        if self == Self::ContainsKey { 2 } else { 1 }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MapFn {
    op: MapOp,
    signature: Signature,
}

/// The key and value fields of a map type.
fn entry_fields(t: &DataType) -> Option<&Fields> {
    match t {
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(f) if f.len() == 2 => Some(f),
            _ => None,
        },
        _ => None,
    }
}

/// GoogleSQL's `STRUCT<key, value>` of a map's entries.
fn entry_struct(kv: &Fields) -> Fields {
    Fields::from(vec![
        Field::new("key", kv[0].data_type().clone(), false),
        Field::new("value", kv[1].data_type().clone(), true),
    ])
}

impl ScalarUDFImpl for MapFn {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let Some(kv) = args.first().and_then(entry_fields) else {
            return plan_err!("{} takes a MAP first", self.op.name());
        };
        let mut out = vec![args[0].clone()];
        if self.op == MapOp::ContainsKey {
            out.push(kv[0].data_type().clone());
        }
        Ok(out)
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match self.op {
            MapOp::ContainsKey | MapOp::Empty => Ok(DataType::Boolean),
            MapOp::Entries => match args.first().and_then(entry_fields) {
                Some(kv) => Ok(DataType::List(Arc::new(Field::new_list_field(
                    DataType::Struct(entry_struct(kv)),
                    true,
                )))),
                None => plan_err!("map_entries takes a MAP"),
            },
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let op = self.op;
        crate::functions::invoke_rowwise(args, |a, rows| map_eval(op, a, rows))
    }
}

fn map_eval(op: MapOp, a: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let map = a[0].as_map();
    let offsets = map.value_offsets();
    Ok(match op {
        MapOp::Empty => Arc::new(
            (0..rows)
                .map(|i| (!map.is_null(i)).then(|| offsets[i] == offsets[i + 1]))
                .collect::<BooleanArray>(),
        ),
        MapOp::ContainsKey => {
            let keys = map.keys();
            let wanted = &a[1];
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if map.is_null(i) || wanted.is_null(i) {
                    out.push(None);
                    continue;
                }
                let want = datafusion::common::ScalarValue::try_from_array(wanted, i)?;
                let mut found = false;
                for j in offsets[i] as usize..offsets[i + 1] as usize {
                    if datafusion::common::ScalarValue::try_from_array(keys, j)? == want {
                        found = true;
                        break;
                    }
                }
                out.push(Some(found));
            }
            Arc::new(BooleanArray::from(out))
        }
        MapOp::Entries => {
            let entries = map.entries();
            let DataType::Map(field, _) = a[0].data_type() else {
                return plan_err!("map_entries takes a MAP");
            };
            let DataType::Struct(kv) = field.data_type() else {
                return plan_err!("map_entries takes a MAP");
            };
            let fields = entry_struct(kv);
            let structs = StructArray::try_new(
                fields.clone(),
                entries.columns().to_vec(),
                entries.nulls().cloned(),
            )?;
            Arc::new(ListArray::try_new(
                Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
                map.offsets().clone(),
                Arc::new(structs),
                map.nulls().cloned(),
            )?)
        }
    })
}

/// GoogleSQL's `/`: FLOAT64 even when both sides are integers (`5 / 2` is 2.5).
#[derive(Debug, Default)]
pub struct FloatDivision;

impl ExprPlanner for FloatDivision {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        let is_divide = matches!(
            expr.op,
            datafusion::sql::sqlparser::ast::BinaryOperator::Divide
        );
        if !is_divide {
            return Ok(PlannerResult::Original(expr));
        }
        let integer = |e: &Expr| e.get_type(schema).is_ok_and(|t| t.is_integer());
        if !(integer(&expr.left) && integer(&expr.right)) {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(Expr::BinaryExpr(BinaryExpr::new(
            Box::new(cast(expr.left, DataType::Float64)),
            Operator::Divide,
            Box::new(cast(expr.right, DataType::Float64)),
        ))))
    }
}
