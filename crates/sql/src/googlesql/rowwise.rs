//! Functions evaluated one row at a time over [`ScalarValue`]s (GoogleSQL's, and some
//! of Timestream's in [`crate::presto`]): each is a name, a type rule (the argument
//! types it takes, coerced, and its result type) and an evaluation of one row. They are
//! the functions whose cost is in what they do per value (JSON, text, arrays), not in
//! moving columns, so a row at a time is enough.

use std::sync::Arc;

use datafusion::arrow::array::{Array, new_empty_array};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The argument types a function takes for the types it was given, and its result type.
pub(crate) type Types = fn(&str, &[DataType]) -> DfResult<(Vec<DataType>, DataType)>;
/// One row: the arguments, the result type; the result.
pub(crate) type Eval = fn(&str, &[ScalarValue], &DataType) -> DfResult<ScalarValue>;

/// A function of the table: name, type rule, evaluation.
pub(crate) type Def = (&'static str, Types, Eval);

/// Registers `defs`, over any function of the same name.
pub(crate) fn register(state: &mut SessionState, defs: &[Def]) -> DfResult<()> {
    for &(name, types, eval) in defs {
        state.register_udf(Arc::new(ScalarUDF::from(RowFn {
            name,
            types,
            eval,
            signature: Signature::user_defined(Volatility::Immutable),
        })))?;
    }
    Ok(())
}

#[derive(Debug)]
struct RowFn {
    name: &'static str,
    types: Types,
    eval: Eval,
    signature: Signature,
}

// One function per name: the name is the identity.
impl PartialEq for RowFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for RowFn {}

impl std::hash::Hash for RowFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for RowFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        Ok((self.types)(self.name, args)?.0)
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok((self.types)(self.name, args)?.1)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let out_type = args.return_field.data_type().clone();
        crate::functions::invoke_rowwise(args, |arrays, rows| {
            let mut values = Vec::with_capacity(rows);
            let mut row = Vec::with_capacity(arrays.len());
            for r in 0..rows {
                row.clear();
                for a in arrays {
                    row.push(ScalarValue::try_from_array(a, r)?);
                }
                values.push((self.eval)(self.name, &row, &out_type)?);
            }
            if values.is_empty() {
                return Ok(new_empty_array(&out_type));
            }
            ScalarValue::iter_to_array(values)
        })
    }
}

/// Whether `t` is GoogleSQL's STRING (or NULL).
pub(crate) fn text_type(t: &DataType) -> bool {
    super::is_text(t) || t.is_null()
}

/// Whether `t` is GoogleSQL's BYTES.
pub(crate) fn bytes_type(t: &DataType) -> bool {
    super::is_bytes(t)
}

/// Whether `t` is an integer (or NULL).
pub(crate) fn int_type(t: &DataType) -> bool {
    t.is_integer() || t.is_null()
}

/// Whether `t` is a number (or NULL).
pub(crate) fn number_type(t: &DataType) -> bool {
    t.is_numeric() || t.is_null()
}

/// The element type of an ARRAY type.
pub(crate) fn element_type(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// An ARRAY type of `element`.
pub(crate) fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// Checks an argument count against `lo..=hi`.
pub(crate) fn arity(name: &str, args: &[DataType], lo: usize, hi: usize) -> DfResult<()> {
    if args.len() < lo || args.len() > hi {
        if lo == hi {
            return plan_err!("{name} takes {lo} argument(s), got {}", args.len());
        }
        return plan_err!("{name} takes {lo} to {hi} arguments, got {}", args.len());
    }
    Ok(())
}

/// A STRING value (None for NULL).
pub(crate) fn text(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.as_deref(),
        _ => None,
    }
}

/// A BYTES value (None for NULL).
pub(crate) fn bytes(v: &ScalarValue) -> Option<&[u8]> {
    match v {
        ScalarValue::Binary(b)
        | ScalarValue::LargeBinary(b)
        | ScalarValue::BinaryView(b)
        | ScalarValue::FixedSizeBinary(_, b) => b.as_deref(),
        _ => None,
    }
}

/// An INT64 value (None for NULL).
pub(crate) fn int(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::Int64(x) => *x,
        ScalarValue::Int32(x) => x.map(i64::from),
        ScalarValue::Int16(x) => x.map(i64::from),
        ScalarValue::Int8(x) => x.map(i64::from),
        ScalarValue::UInt32(x) => x.map(i64::from),
        ScalarValue::UInt16(x) => x.map(i64::from),
        ScalarValue::UInt8(x) => x.map(i64::from),
        ScalarValue::UInt64(x) => x.and_then(|x| i64::try_from(x).ok()),
        _ => None,
    }
}

/// A FLOAT64 value (None for NULL).
pub(crate) fn float(v: &ScalarValue) -> Option<f64> {
    match v {
        ScalarValue::Float64(x) => *x,
        ScalarValue::Float32(x) => x.map(f64::from),
        other => int(other).map(|i| i as f64),
    }
}

/// The elements of an ARRAY value (None for NULL).
pub(crate) fn elements(v: &ScalarValue) -> DfResult<Option<Vec<ScalarValue>>> {
    let list: &dyn Array = match v {
        ScalarValue::List(a) => a.as_ref(),
        ScalarValue::LargeList(a) => a.as_ref(),
        ScalarValue::FixedSizeList(a) => a.as_ref(),
        _ => return Ok(None),
    };
    if list.is_null(0) {
        return Ok(None);
    }
    let values = match v {
        ScalarValue::List(a) => a.value(0),
        ScalarValue::LargeList(a) => a.value(0),
        ScalarValue::FixedSizeList(a) => a.value(0),
        _ => return Ok(None),
    };
    (0..values.len())
        .map(|i| ScalarValue::try_from_array(&values, i))
        .collect::<DfResult<Vec<_>>>()
        .map(Some)
}

/// An ARRAY value of `element`s.
pub(crate) fn array(values: &[ScalarValue], element: &DataType) -> ScalarValue {
    ScalarValue::List(ScalarValue::new_list_nullable(values, element))
}

/// The typed NULL of `t`.
pub(crate) fn null(t: &DataType) -> DfResult<ScalarValue> {
    ScalarValue::try_from(t)
}
