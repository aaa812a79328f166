//! Timestream's functions over a time series (`create_time_series`'s array of `{time,
//! value}` points, [`crate::interpolate`]), in Timestream's dialect:
//!
//! | function | result |
//! |---|---|
//! | `derivative_linear(series, interval)` | a DOUBLE series: at each point after the first, `(v_i − v_{i−1}) / ((t_i − t_{i−1}) / interval)` |
//! | `non_negative_derivative_linear(series, interval)` | the same without its negative points (a rate of 0 stays) |
//! | `integral_trapezoidal(series[, interval])` | DOUBLE: the trapezoidal rule, time counted in `interval` (default `1s`); NULL for fewer than two points |
//! | `correlate_pearson(a, b)`, `correlate_spearman(a, b)`, `correlate_kendall(a, b)` | DOUBLE: the coefficient (Kendall's tau-b) over the points of `a` and `b` at equal times |
//! | `filter(series, x -> …)`, `reduce(series, initial, (s, x) -> …, s -> …)` | [`lambdas`] |
//!
//! The series must be numeric (DOUBLE or BIGINT values); the interval is a constant
//! duration (`5m`, `INTERVAL '1' HOUR`). Points whose value is NULL are left out
//! first. Two points at one time have no derivative (the later one is left out of the
//! result). The correlations pair the points of the two series that share a
//! timestamp (Timestream asks for series with the same timestamps; a point without a
//! partner is left out rather than failing the query) and are NULL for fewer than two
//! pairs or when either side is constant. The kernels are in [`numeric`]; the
//! natural cubic spline of `interpolate_spline_cubic` ([`Spline`]) too.

mod lambdas;
mod numeric;

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

pub(crate) use numeric::Spline;

use crate::functions::interval_ns;
use crate::interpolate::{append_series, points_of, series_builder, series_type};

/// `integral_trapezoidal`'s interval when none is given: one second.
const DEFAULT_INTEGRAL_NS: i64 = 1_000_000_000;

/// Registers the module's functions in Timestream's session.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for op in [
        Op::Derivative {
            non_negative: false,
        },
        Op::Derivative { non_negative: true },
        Op::Integral,
        Op::Correlate(Coefficient::Pearson),
        Op::Correlate(Coefficient::Spearman),
        Op::Correlate(Coefficient::Kendall),
    ] {
        state.register_udf(Arc::new(ScalarUDF::from(SeriesFn {
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        })))?;
    }
    lambdas::register(state)?;
    Ok(())
}

/// A correlation coefficient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Coefficient {
    Pearson,
    Spearman,
    Kendall,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Derivative { non_negative: bool },
    Integral,
    Correlate(Coefficient),
}

/// One function of the module's table.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SeriesFn {
    op: Op,
    signature: Signature,
}

/// Whether `t` is a numeric time series (or NULL).
fn numeric_series(t: &DataType) -> bool {
    match t {
        DataType::Null => true,
        DataType::List(f) => match f.data_type() {
            DataType::Struct(fields) => {
                fields.len() == 2
                    && matches!(fields[0].data_type(), DataType::Timestamp(..))
                    && (fields[1].data_type().is_numeric() || fields[1].data_type().is_null())
            }
            _ => false,
        },
        _ => false,
    }
}

fn is_interval(t: &DataType) -> bool {
    matches!(t, DataType::Interval(_) | DataType::Duration(_))
}

impl ScalarUDFImpl for SeriesFn {
    fn name(&self) -> &str {
        match self.op {
            Op::Derivative {
                non_negative: false,
            } => "derivative_linear",
            Op::Derivative { non_negative: true } => "non_negative_derivative_linear",
            Op::Integral => "integral_trapezoidal",
            Op::Correlate(Coefficient::Pearson) => "correlate_pearson",
            Op::Correlate(Coefficient::Spearman) => "correlate_spearman",
            Op::Correlate(Coefficient::Kendall) => "correlate_kendall",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, t: &[DataType]) -> DfResult<Vec<DataType>> {
        let name = self.name();
        let series = |i: usize| {
            if numeric_series(&t[i]) {
                Ok(t[i].clone())
            } else {
                plan_err!(
                    "{name} takes a time series of DOUBLE or BIGINT values (create_time_series), got {}",
                    t[i]
                )
            }
        };
        let interval = |i: usize| {
            if is_interval(&t[i]) {
                Ok(t[i].clone())
            } else {
                plan_err!("{name} takes an interval such as 5m, got {}", t[i])
            }
        };
        match (self.op, t.len()) {
            (Op::Derivative { .. }, 2) | (Op::Integral, 2) => Ok(vec![series(0)?, interval(1)?]),
            (Op::Integral, 1) => Ok(vec![series(0)?]),
            (Op::Correlate(_), 2) => Ok(vec![series(0)?, series(1)?]),
            (Op::Derivative { .. }, n) => {
                plan_err!("{name}(series, interval) takes 2 arguments, got {n}")
            }
            (Op::Integral, n) => {
                plan_err!("{name}(series[, interval]) takes 1 or 2 arguments, got {n}")
            }
            (Op::Correlate(_), n) => plan_err!("{name}(series, series) takes 2 arguments, got {n}"),
        }
    }

    fn return_type(&self, _t: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::Derivative { .. } => series_type(),
            Op::Integral | Op::Correlate(_) => DataType::Float64,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let name = self.name();
        let interval = match (self.op, args.args.get(1)) {
            (Op::Correlate(_), _) | (Op::Integral, None) => DEFAULT_INTEGRAL_NS,
            (_, Some(ColumnarValue::Scalar(s))) => match interval_ns(s) {
                Ok(ns) => ns,
                Err(_) => {
                    return exec_err!(
                        "{name}: the interval must be a duration such as 5m (days and shorter units, no months), got {s}"
                    );
                }
            },
            (_, Some(ColumnarValue::Array(_))) => {
                return exec_err!("{name}: the interval must be a constant");
            }
            (_, None) => return exec_err!("{name} takes an interval"),
        };
        if interval <= 0 {
            return exec_err!("{name}: the interval must be positive");
        }
        let op = self.op;
        let series_args = match op {
            Op::Correlate(_) => 2,
            _ => 1,
        };
        let mut only_series = args;
        only_series.args.truncate(series_args);
        crate::functions::invoke_rowwise(only_series, |arrays, rows| {
            let lists: Vec<_> = arrays
                .iter()
                .map(|a| {
                    let a = datafusion::arrow::compute::cast(a, &series_type())?;
                    Ok(a.as_list::<i32>().clone())
                })
                .collect::<DfResult<_>>()?;
            let readings = |i: usize, row: usize| -> DfResult<Option<Vec<(i64, f64)>>> {
                if lists[i].is_null(row) {
                    return Ok(None);
                }
                Ok(Some(
                    points_of(&lists[i], row)?
                        .into_iter()
                        .filter_map(|(t, v)| v.map(|v| (t, v)))
                        .collect(),
                ))
            };
            if let Op::Derivative { non_negative } = op {
                let mut out = series_builder();
                for row in 0..rows {
                    match readings(0, row)? {
                        Some(p) => {
                            let rates = numeric::derivative(&p, interval, non_negative);
                            let rates: Vec<_> =
                                rates.into_iter().map(|(t, v)| (t, Some(v))).collect();
                            append_series(&mut out, &rates)?;
                        }
                        None => out.append(false),
                    }
                }
                return Ok(Arc::new(out.finish()) as ArrayRef);
            }
            let mut out = Float64Builder::with_capacity(rows);
            for row in 0..rows {
                let value = match op {
                    Op::Integral => {
                        readings(0, row)?.and_then(|p| numeric::trapezoid(&p, interval))
                    }
                    Op::Correlate(c) => match (readings(0, row)?, readings(1, row)?) {
                        (Some(a), Some(b)) => correlate(c, &a, &b),
                        _ => None,
                    },
                    Op::Derivative { .. } => None,
                };
                out.append_option(value);
            }
            Ok(Arc::new(out.finish()) as ArrayRef)
        })
    }
}

/// The coefficient over the readings of `a` and `b` at equal times (both sorted).
fn correlate(c: Coefficient, a: &[(i64, f64)], b: &[(i64, f64)]) -> Option<f64> {
    let mut pairs = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                pairs.push((a[i].1, b[j].1));
                i += 1;
                j += 1;
            }
        }
    }
    match c {
        Coefficient::Pearson => numeric::pearson(&pairs),
        Coefficient::Spearman => numeric::spearman(&pairs),
        Coefficient::Kendall => numeric::kendall_tau_b(&pairs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correlations_pair_equal_times_only() {
        // b has no point at 2 and an extra one at 5: the pairs are at 1, 3, 4.
        let a = [(1, 1.0), (2, 100.0), (3, 2.0), (4, 3.0)];
        let b = [(1, 10.0), (3, 20.0), (4, 30.0), (5, -1.0)];
        for c in [
            Coefficient::Pearson,
            Coefficient::Spearman,
            Coefficient::Kendall,
        ] {
            let r = correlate(c, &a, &b).unwrap_or(f64::NAN);
            assert!((r - 1.0).abs() < 1e-12, "{c:?}: {r}");
        }
        assert_eq!(correlate(Coefficient::Pearson, &a[..1], &b), None);
    }
}
