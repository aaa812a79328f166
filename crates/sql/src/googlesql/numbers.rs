//! GoogleSQL's numeric functions DataFusion lacks or types differently (GoogleSQL's
//! session only):
//!
//! | function | result |
//! |---|---|
//! | `SIGN(x)` | -1, 0 or 1, of `x`'s type (INT64 stays INT64; NaN stays NaN) |
//! | `BIT_COUNT(x)` | set bits of an INT64 (two's complement) or of BYTES |
//! | `COTH`, `CSC`, `CSCH`, `SEC`, `SECH` | hyperbolic cotangent, cosecant, hyperbolic cosecant, secant, hyperbolic secant |
//! | `BIT_CAST_TO_INT64(x)` | an INT64's bits as INT64 (Bigtable has no unsigned type to cast from) |
//! | `EUCLIDEAN_DISTANCE(a, b)` | the distance between two ARRAY<FLOAT64> (or ARRAY<INT64>) vectors of one length |

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;

use super::rowwise::{self, Def, arity, bytes_type, element_type, elements, int_type, number_type};

const DEFS: [Def; 9] = [
    ("bit_cast_to_int64", bit_cast_types, bit_cast),
    ("sign", sign_types, sign),
    ("bit_count", bit_count_types, bit_count),
    ("coth", trig_types, trig),
    ("csc", trig_types, trig),
    ("csch", trig_types, trig),
    ("sec", trig_types, trig),
    ("sech", trig_types, trig),
    ("euclidean_distance", distance_types, euclidean_distance),
];

/// Registers the numeric functions (over DataFusion's `sign` alias of `signum`).
pub fn register(state: &mut SessionState) -> DfResult<()> {
    rowwise::register(state, &DEFS)
}

fn sign_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    let t = if int_type(&args[0]) {
        DataType::Int64
    } else if number_type(&args[0]) {
        DataType::Float64
    } else {
        return plan_err!("{name} takes a number, got {}", args[0]);
    };
    Ok((vec![t.clone()], t))
}

fn bit_count_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    let t = if int_type(&args[0]) {
        DataType::Int64
    } else if bytes_type(&args[0]) {
        DataType::Binary
    } else {
        return plan_err!("{name} takes an INT64 or BYTES, got {}", args[0]);
    };
    Ok((vec![t], DataType::Int64))
}

fn bit_cast_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    if !int_type(&args[0]) {
        return plan_err!("{name} takes an INT64, got {}", args[0]);
    }
    Ok((vec![DataType::Int64], DataType::Int64))
}

fn bit_cast(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(args[0].clone())
}

fn trig_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    if !number_type(&args[0]) {
        return plan_err!("{name} takes a number, got {}", args[0]);
    }
    Ok((vec![DataType::Float64], DataType::Float64))
}

fn distance_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    for t in args {
        if !(t.is_null() || element_type(t).is_some_and(number_type)) {
            return plan_err!("{name} takes two ARRAY<FLOAT64> vectors, got {t}");
        }
    }
    Ok((
        vec![rowwise::list_of(DataType::Float64); 2],
        DataType::Float64,
    ))
}

fn sign(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(match &args[0] {
        ScalarValue::Int64(x) => ScalarValue::Int64(x.map(i64::signum)),
        ScalarValue::Float64(x) => ScalarValue::Float64(x.map(|x| {
            if x == 0.0 || x.is_nan() {
                x
            } else {
                x.signum()
            }
        })),
        other => other.clone(),
    })
}

fn bit_count(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Int64(match &args[0] {
        ScalarValue::Int64(x) => x.map(|x| i64::from(x.count_ones())),
        other => rowwise::bytes(other).map(|b| b.iter().map(|c| i64::from(c.count_ones())).sum()),
    }))
}

fn trig(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(x) = rowwise::float(&args[0]) else {
        return Ok(ScalarValue::Float64(None));
    };
    let y = match name {
        "coth" => 1.0 / x.tanh(),
        "csc" => 1.0 / x.sin(),
        "csch" => 1.0 / x.sinh(),
        "sec" => 1.0 / x.cos(),
        _ => 1.0 / x.cosh(),
    };
    if !y.is_finite() && x.is_finite() {
        return exec_err!(
            "{}: {x} is outside the function's domain",
            name.to_uppercase()
        );
    }
    Ok(ScalarValue::Float64(Some(y)))
}

fn euclidean_distance(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(a), Some(b)) = (elements(&args[0])?, elements(&args[1])?) else {
        return Ok(ScalarValue::Float64(None));
    };
    if a.len() != b.len() {
        return exec_err!(
            "{}: the vectors have different lengths ({} and {})",
            name.to_uppercase(),
            a.len(),
            b.len()
        );
    }
    let mut sum = 0.0;
    for (x, y) in a.iter().zip(&b) {
        let (Some(x), Some(y)) = (rowwise::float(x), rowwise::float(y)) else {
            return exec_err!("{}: a vector has a NULL element", name.to_uppercase());
        };
        sum += (x - y) * (x - y);
    }
    Ok(ScalarValue::Float64(Some(sum.sqrt())))
}
