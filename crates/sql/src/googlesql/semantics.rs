//! Where GoogleSQL's meaning differs from DataFusion's for the same plan, an analyzer
//! rule ([`Semantics`], GoogleSQL's session only) rewrites the planned expressions,
//! keeping their names:
//! - `+`, `-` and `*` on two INT64 fail on overflow ("INT64 overflow") instead of
//!   wrapping;
//! - `CAST(x AS INT64)` of a FLOAT64 rounds half away from zero (DataFusion truncates);
//! - `CAST(t AS STRING)` of a TIMESTAMP writes GoogleSQL's canonical form,
//!   `2008-12-25 15:30:00+00`, as `STRING(t)` does;
//! - `SAFE.f(…)`, which the rewrite before parsing turns into `__safe(f(…))`, becomes `f`
//!   answering NULL for a row where it would fail.

use std::cell::OnceCell;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, new_null_array};
use datafusion::arrow::compute::concat;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult as _, TreeNode as _};
use datafusion::common::{DFSchema, DFSchemaRef, ScalarValue, exec_err};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable as _, LogicalPlan, Operator,
    ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// The name of the marker `SAFE.f(…)` is rewritten to before parsing.
pub const SAFE_MARKER: &str = "__safe";

/// The analyzer rule of the module docs.
#[derive(Debug, Default)]
pub struct Semantics;

impl AnalyzerRule for Semantics {
    fn name(&self) -> &str {
        "googlesql_semantics"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let schema = InputSchema::of(&node);
            let names = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = names.save(&e);
                let out = e.transform_up(|x| rewrite(x, &schema))?;
                Ok(if out.transformed {
                    Transformed::yes(saved.restore(out.data))
                } else {
                    out
                })
            })
        })
        .data()
    }
}

/// The schema a node's expressions are typed against: its inputs' together (its own
/// for a leaf), merged only when an expression that may change needs its type.
struct InputSchema {
    parts: Vec<DFSchemaRef>,
    merged: OnceCell<DFSchema>,
}

impl InputSchema {
    fn of(node: &LogicalPlan) -> Self {
        let mut parts: Vec<DFSchemaRef> = node
            .inputs()
            .iter()
            .map(|i| Arc::clone(i.schema()))
            .collect();
        if parts.is_empty() {
            parts.push(Arc::clone(node.schema()));
        }
        Self {
            parts,
            merged: OnceCell::new(),
        }
    }

    fn get(&self) -> &DFSchema {
        if let [only] = self.parts.as_slice() {
            return only;
        }
        self.merged.get_or_init(|| {
            let mut schema = DFSchema::empty();
            for part in &self.parts {
                schema.merge(part);
            }
            schema
        })
    }
}

fn is_int64(e: &Expr, schema: &InputSchema) -> bool {
    matches!(e.get_type(schema.get()), Ok(DataType::Int64))
}

fn rewrite(e: Expr, schema: &InputSchema) -> DfResult<Transformed<Expr>> {
    Ok(match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply)
                && is_int64(&left, schema)
                && is_int64(&right, schema) =>
        {
            let f = Arc::new(ScalarUDF::from(Checked::new(op)));
            Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                f,
                vec![*left, *right],
            )))
        }
        Expr::Cast(Cast { expr, field }) => match retyped(*expr, field.data_type(), schema) {
            Ok(x) => Transformed::yes(x),
            Err(x) => Transformed::no(Expr::Cast(Cast::new_from_field(Box::new(x), field))),
        },
        Expr::TryCast(TryCast { expr, field }) => match retyped(*expr, field.data_type(), schema) {
            Ok(Expr::Cast(Cast { expr, field })) => {
                Transformed::yes(Expr::TryCast(TryCast::new_from_field(expr, field)))
            }
            Ok(other) => Transformed::yes(other),
            Err(x) => Transformed::no(Expr::TryCast(TryCast::new_from_field(Box::new(x), field))),
        },
        Expr::ScalarFunction(ScalarFunction { func, mut args })
            if func.name() == SAFE_MARKER && args.len() == 1 =>
        {
            match args.pop() {
                Some(Expr::ScalarFunction(inner)) => {
                    let safe = Arc::new(ScalarUDF::from(Safe::new(inner.func)));
                    Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                        safe, inner.args,
                    )))
                }
                Some(other) => Transformed::yes(other),
                None => Transformed::no(Expr::ScalarFunction(ScalarFunction::new_udf(func, args))),
            }
        }
        other => Transformed::no(other),
    })
}

/// A cast GoogleSQL does differently, rewritten (`Ok`), or the operand back (`Err`).
fn retyped(x: Expr, to: &DataType, schema: &InputSchema) -> Result<Expr, Expr> {
    let Ok(from) = x.get_type(schema.get()) else {
        return Err(x);
    };
    if from.is_floating() && to.is_integer() {
        let rounded = datafusion::functions::math::round().call(vec![x]);
        return Ok(Expr::Cast(Cast::new(Box::new(rounded), to.clone())));
    }
    if matches!(from, DataType::Timestamp(..))
        && matches!(
            to,
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
        )
    {
        let text = super::time::string_udf().call(vec![x]);
        return Ok(Expr::Cast(Cast::new(Box::new(text), to.clone())));
    }
    Err(x)
}

/// INT64 `+`, `-`, `*` that fail on overflow.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Checked {
    op: Operator,
    signature: Signature,
}

impl Checked {
    fn new(op: Operator) -> Self {
        Self {
            op,
            signature: Signature::exact(vec![DataType::Int64; 2], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Checked {
    fn name(&self) -> &str {
        match self.op {
            Operator::Plus => "int64_add",
            Operator::Minus => "int64_subtract",
            _ => "int64_multiply",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let op = self.op;
        crate::functions::invoke_rowwise(args, |a, _| {
            let out = match op {
                Operator::Plus => numeric::add(&a[0], &a[1]),
                Operator::Minus => numeric::sub(&a[0], &a[1]),
                _ => numeric::mul(&a[0], &a[1]),
            };
            out.map_err(|e| DataFusionError::Execution(format!("INT64 overflow: {e}")))
        })
    }
}

/// A function answering NULL for the rows where it fails (`SAFE.` prefix).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Safe {
    name: String,
    inner: Arc<ScalarUDF>,
}

impl Safe {
    fn new(inner: Arc<ScalarUDF>) -> Self {
        Self {
            name: format!("safe.{}", inner.name()),
            inner,
        }
    }
}

impl ScalarUDFImpl for Safe {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(args)
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(args)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let f = self.inner.return_field_from_args(args)?;
        Ok(Arc::new(Field::new(
            self.name.clone(),
            f.data_type().clone(),
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        if let Ok(out) = self.inner.invoke_with_args(args.clone()) {
            return Ok(out);
        }
        let out_type = args.return_field.data_type().clone();
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        if all_scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from(&out_type)?));
        }
        // Row by row, NULL where the function fails.
        let mut rows: Vec<ArrayRef> = Vec::with_capacity(args.number_rows);
        for r in 0..args.number_rows {
            let one = ScalarFunctionArgs {
                args: args
                    .args
                    .iter()
                    .map(|a| match a {
                        ColumnarValue::Array(a) => ColumnarValue::Array(a.slice(r, 1)),
                        scalar => scalar.clone(),
                    })
                    .collect(),
                number_rows: 1,
                ..args.clone()
            };
            let value = match self.inner.invoke_with_args(one) {
                Ok(v) => v.into_array(1)?,
                Err(_) => new_null_array(&out_type, 1),
            };
            rows.push(value);
        }
        if rows.is_empty() {
            return exec_err!("{}: no rows", self.name);
        }
        let parts: Vec<&dyn datafusion::arrow::array::Array> =
            rows.iter().map(|a| a.as_ref()).collect();
        Ok(ColumnarValue::Array(concat(&parts)?))
    }
}

/// `__safe(x)`: `x`, marking a `SAFE.` call for [`Semantics`] to rewrite.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SafeMarker {
    signature: Signature,
}

impl Default for SafeMarker {
    fn default() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for SafeMarker {
    fn name(&self) -> &str {
        SAFE_MARKER
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(args.first().cloned().unwrap_or(DataType::Null))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        match args.args.pop() {
            Some(v) => Ok(v),
            None => exec_err!("SAFE. takes a function call"),
        }
    }
}
