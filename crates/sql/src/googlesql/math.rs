//! GoogleSQL's arithmetic and array functions whose meaning differs from DataFusion's
//! functions of the same name, or which DataFusion lacks (GoogleSQL's session only):
//!
//! | function | what |
//! |---|---|
//! | `LOG(x[, base])` | natural log, or log in `base` (DataFusion's `log(base, x)` is the other way round); `x` ≤ 0 fails |
//! | `DIV(x, y)` | INT64 division rounded toward zero; `y` = 0 fails |
//! | `IEEE_DIVIDE(x, y)` | FLOAT64 division: ±inf or NaN for `y` = 0 |
//! | `SAFE_DIVIDE`, `SAFE_ADD`, `SAFE_SUBTRACT`, `SAFE_MULTIPLY`, `SAFE_NEGATE` | NULL where the plain operation fails (division by 0, INT64 overflow) |
//! | `ARRAY_SLICE(a, start, end)` | elements `start..=end`, counted from 0, negative from the end |
//! | `ARRAY_FIRST(a)`, `ARRAY_LAST(a)` | an empty array fails |

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, ListArray, UInt32Array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Log,
    Div,
    IeeeDivide,
    SafeDivide,
    SafeAdd,
    SafeSubtract,
    SafeMultiply,
    SafeNegate,
    ArraySlice,
    ArrayFirst,
    ArrayLast,
}

const OPS: [(&str, Op); 11] = [
    ("log", Op::Log),
    ("div", Op::Div),
    ("ieee_divide", Op::IeeeDivide),
    ("safe_divide", Op::SafeDivide),
    ("safe_add", Op::SafeAdd),
    ("safe_subtract", Op::SafeSubtract),
    ("safe_multiply", Op::SafeMultiply),
    ("safe_negate", Op::SafeNegate),
    ("array_slice", Op::ArraySlice),
    ("array_first", Op::ArrayFirst),
    ("array_last", Op::ArrayLast),
];

/// Registers the module's functions (over DataFusion's `log`, `array_slice`).
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for (name, op) in OPS {
        state.register_udf(Arc::new(ScalarUDF::from(MathFn {
            name,
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        })))?;
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct MathFn {
    name: &'static str,
    op: Op,
    signature: Signature,
}

fn is_list(t: &DataType) -> bool {
    matches!(
        t,
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    )
}

/// Integer arithmetic stays INT64 when every argument is an integer.
fn all_integers(args: &[DataType]) -> bool {
    args.iter().all(|t| t.is_integer() || t.is_null())
}

impl ScalarUDFImpl for MathFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let name = self.name;
        let (lo, hi) = match self.op {
            Op::Log => (1, 2),
            Op::SafeNegate | Op::ArrayFirst | Op::ArrayLast => (1, 1),
            Op::ArraySlice => (3, 3),
            _ => (2, 2),
        };
        if args.len() < lo || args.len() > hi {
            return plan_err!("{name} takes {lo} to {hi} arguments, got {}", args.len());
        }
        Ok(match self.op {
            Op::ArraySlice | Op::ArrayFirst | Op::ArrayLast => {
                if !is_list(&args[0]) {
                    return plan_err!("{name} takes an ARRAY first, got {}", args[0]);
                }
                let list = match &args[0] {
                    DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                        DataType::List(Arc::clone(f))
                    }
                    other => other.clone(),
                };
                let mut v = vec![list];
                v.extend(args.iter().skip(1).map(|_| DataType::Int64));
                v
            }
            Op::Div => vec![DataType::Int64; args.len()],
            Op::SafeAdd | Op::SafeSubtract | Op::SafeMultiply | Op::SafeNegate
                if all_integers(args) =>
            {
                vec![DataType::Int64; args.len()]
            }
            _ => vec![DataType::Float64; args.len()],
        })
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::ArrayFirst | Op::ArrayLast => match args.first() {
                Some(DataType::List(f)) => f.data_type().clone(),
                _ => return plan_err!("{} takes an ARRAY", self.name),
            },
            Op::ArraySlice => args.first().cloned().unwrap_or(DataType::Null),
            Op::Div => DataType::Int64,
            _ => args.first().cloned().unwrap_or(DataType::Float64),
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let (name, op) = (self.name, self.op);
        crate::functions::invoke_rowwise(args, |a, rows| eval(name, op, a, rows))
    }
}

fn floats(a: &ArrayRef) -> DfResult<Float64Array> {
    Ok(cast(a, &DataType::Float64)?
        .as_primitive::<Float64Type>()
        .clone())
}

fn ints(a: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(a, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

fn eval(name: &str, op: Op, a: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    Ok(match op {
        Op::Log => {
            let x = floats(&a[0])?;
            let base = a.get(1).map(floats).transpose()?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if x.is_null(i) || base.as_ref().is_some_and(|b| b.is_null(i)) {
                    out.push(None);
                    continue;
                }
                let v = x.value(i);
                if v <= 0.0 {
                    return exec_err!("{name}: X must be greater than 0, got {v}");
                }
                out.push(Some(match &base {
                    None => v.ln(),
                    Some(b) if b.value(i) <= 0.0 || b.value(i) == 1.0 => {
                        return exec_err!(
                            "{name}: the base must be greater than 0 and not 1, got {}",
                            b.value(i)
                        );
                    }
                    Some(b) => v.ln() / b.value(i).ln(),
                }));
            }
            Arc::new(Float64Array::from(out))
        }
        Op::Div => {
            let (x, y) = (ints(&a[0])?, ints(&a[1])?);
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if x.is_null(i) || y.is_null(i) {
                    out.push(None);
                    continue;
                }
                match x.value(i).checked_div(y.value(i)) {
                    Some(q) => out.push(Some(q)),
                    None if y.value(i) == 0 => return exec_err!("{name}: division by zero"),
                    None => return exec_err!("{name}: INT64 overflow"),
                }
            }
            Arc::new(Int64Array::from(out))
        }
        Op::IeeeDivide | Op::SafeDivide => {
            let (x, y) = (floats(&a[0])?, floats(&a[1])?);
            Arc::new(
                (0..rows)
                    .map(|i| {
                        if x.is_null(i)
                            || y.is_null(i)
                            || (op == Op::SafeDivide && y.value(i) == 0.0)
                        {
                            None
                        } else {
                            Some(x.value(i) / y.value(i))
                        }
                    })
                    .collect::<Float64Array>(),
            )
        }
        Op::SafeAdd | Op::SafeSubtract | Op::SafeMultiply | Op::SafeNegate => {
            if a[0].data_type() == &DataType::Int64 {
                let x = ints(&a[0])?;
                let y = a.get(1).map(ints).transpose()?;
                Arc::new(
                    (0..rows)
                        .map(|i| {
                            let l = (!x.is_null(i)).then(|| x.value(i))?;
                            let r = match &y {
                                Some(y) => Some((!y.is_null(i)).then(|| y.value(i))?),
                                None => None,
                            };
                            match (op, r) {
                                (Op::SafeAdd, Some(r)) => l.checked_add(r),
                                (Op::SafeSubtract, Some(r)) => l.checked_sub(r),
                                (Op::SafeMultiply, Some(r)) => l.checked_mul(r),
                                (Op::SafeNegate, None) => l.checked_neg(),
                                _ => None,
                            }
                        })
                        .collect::<Int64Array>(),
                )
            } else {
                let x = floats(&a[0])?;
                let y = a.get(1).map(floats).transpose()?;
                Arc::new(
                    (0..rows)
                        .map(|i| {
                            let l = (!x.is_null(i)).then(|| x.value(i))?;
                            let r = match &y {
                                Some(y) => (!y.is_null(i)).then(|| y.value(i))?,
                                None => 0.0,
                            };
                            let v = match op {
                                Op::SafeAdd => l + r,
                                Op::SafeSubtract => l - r,
                                Op::SafeMultiply => l * r,
                                _ => -l,
                            };
                            v.is_finite().then_some(v)
                        })
                        .collect::<Float64Array>(),
                )
            }
        }
        Op::ArraySlice | Op::ArrayFirst | Op::ArrayLast => {
            let list = a[0].as_list::<i32>();
            let bounds = if op == Op::ArraySlice {
                Some((ints(&a[1])?, ints(&a[2])?))
            } else {
                None
            };
            let offsets = list.value_offsets();
            let (mut picked, mut out_offsets, mut nulls) = (Vec::new(), vec![0i32], Vec::new());
            let mut singles: Vec<Option<u32>> = Vec::with_capacity(rows);
            for i in 0..rows {
                let (start, end) = (offsets[i] as i64, offsets[i + 1] as i64);
                let len = end - start;
                let null_row = list.is_null(i)
                    || bounds
                        .as_ref()
                        .is_some_and(|(s, e)| s.is_null(i) || e.is_null(i));
                match op {
                    Op::ArraySlice => {
                        nulls.push(!null_row);
                        if !null_row && let Some((s, e)) = &bounds {
                            let at = |v: i64| if v < 0 { len + v } else { v };
                            let from = at(s.value(i)).max(0);
                            let to = at(e.value(i)).min(len - 1);
                            for k in from..=to {
                                picked.push((start + k) as u32);
                            }
                        }
                        out_offsets.push(picked.len() as i32);
                    }
                    _ => {
                        if null_row {
                            singles.push(None);
                        } else if len == 0 {
                            return exec_err!("{name} of an empty array");
                        } else {
                            singles.push(Some(
                                if op == Op::ArrayFirst { start } else { end - 1 } as u32
                            ));
                        }
                    }
                }
            }
            if op == Op::ArraySlice {
                let values = take(list.values(), &UInt32Array::from(picked), None)?;
                let DataType::List(field) = list.data_type() else {
                    return exec_err!("{name} takes an ARRAY");
                };
                Arc::new(ListArray::try_new(
                    Arc::<Field>::clone(field),
                    OffsetBuffer::new(out_offsets.into()),
                    values,
                    Some(nulls.into()),
                )?)
            } else {
                take(list.values(), &UInt32Array::from(singles), None)?
            }
        }
    })
}
