//! Functions users port from Timestream and GoogleSQL for Bigtable, beside
//! DataFusion's own (`date_trunc`, `now`, `count(DISTINCT …)`, `approx_distinct`, …):
//! - `bin(time, interval)`: the time rounded down to a multiple of the interval
//!   (DataFusion's `date_bin` with Timestream's argument order);
//! - `ago(interval)`: the query's start time minus a duration;
//! - `from_milliseconds`, `from_nanoseconds`, `to_milliseconds`, `to_nanoseconds`;
//! - `approx_percentile(x, p)`: `approx_percentile_cont`;
//! - gap filling and interpolation ([`crate::interpolate`]);
//! - `be_int64(bytes)`, `be_float64(bytes)`: Bigtable's common big-endian encodings
//!   (NULL when the value is not 8 bytes), beside `CAST(x AS STRING)` for UTF-8.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int64Type, IntervalMonthDayNano, TimeUnit,
};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    AggregateUDF, ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::googlesql::big_endian;
use crate::interpolate::{CreateTimeSeries, Interpolate, Method};

/// Nanoseconds in a day.
const DAY_NS: i128 = 86_400_000_000_000;

/// The timestamp type of the time-series `time` column.
fn ts_ns() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, None)
}

/// Registers every function of this module in `state`.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for f in [
        ScalarUDF::from(Bin::new()),
        ScalarUDF::from(Ago::new()),
        ScalarUDF::from(Epoch::new("to_milliseconds", TimeUnit::Millisecond)),
        ScalarUDF::from(Epoch::new("to_nanoseconds", TimeUnit::Nanosecond)),
        ScalarUDF::from(FromEpoch::new("from_milliseconds", 1_000_000)),
        ScalarUDF::from(FromEpoch::new("from_nanoseconds", 1)),
        ScalarUDF::from(BigEndian::new("be_int64", DataType::Int64)),
        ScalarUDF::from(BigEndian::new("be_float64", DataType::Float64)),
        ScalarUDF::from(Interpolate::new(Method::Linear)),
        ScalarUDF::from(Interpolate::new(Method::Locf)),
        ScalarUDF::from(Interpolate::new(Method::Fill)),
        ScalarUDF::from(Interpolate::new(Method::SplineCubic)),
    ] {
        state.register_udf(Arc::new(f))?;
    }
    let series = datafusion::functions_nested::range::gen_series_udf();
    state.register_udf(Arc::new(series.as_ref().clone().with_aliases(["sequence"])))?;
    state.register_udaf(Arc::new(AggregateUDF::from(CreateTimeSeries::new())))?;
    let percentile =
        datafusion::functions_aggregate::approx_percentile_cont::approx_percentile_cont_udaf();
    state.register_udaf(Arc::new(
        percentile
            .as_ref()
            .clone()
            .with_aliases(["approx_percentile"]),
    ))?;
    Ok(())
}

/// A duration in nanoseconds; months have no fixed length and are refused.
pub(crate) fn interval_ns(v: &ScalarValue) -> DfResult<i64> {
    let ns: i128 = match v {
        ScalarValue::IntervalMonthDayNano(Some(IntervalMonthDayNano {
            months: 0,
            days,
            nanoseconds,
        })) => i128::from(*days) * DAY_NS + i128::from(*nanoseconds),
        ScalarValue::IntervalDayTime(Some(d)) => {
            i128::from(d.days) * DAY_NS + i128::from(d.milliseconds) * 1_000_000
        }
        ScalarValue::DurationNanosecond(Some(n)) => i128::from(*n),
        ScalarValue::DurationMicrosecond(Some(n)) => i128::from(*n) * 1_000,
        ScalarValue::DurationMillisecond(Some(n)) => i128::from(*n) * 1_000_000,
        ScalarValue::DurationSecond(Some(n)) => i128::from(*n) * 1_000_000_000,
        other => {
            return exec_err!("expected a duration such as 15m or INTERVAL '1' HOUR, got {other}");
        }
    };
    i64::try_from(ns).or_else(|_| exec_err!("duration out of range: {ns} ns"))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Bin {
    signature: Signature,
}

impl Bin {
    fn new() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Bin {
    fn name(&self) -> &str {
        "bin"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(t @ DataType::Timestamp(_, _)) => Ok(t.clone()),
            other => plan_err!("bin(time, interval) takes a timestamp first, got {other:?}"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let step = match &args.args[1] {
            ColumnarValue::Scalar(s) => interval_ns(s)?,
            ColumnarValue::Array(_) => return exec_err!("bin(): the interval must be a constant"),
        };
        if step <= 0 {
            return exec_err!("bin(): the interval must be positive");
        }
        let unit_ns = match args.return_field.data_type() {
            DataType::Timestamp(u, _) => unit_ns(*u),
            _ => 1,
        };
        if step % unit_ns != 0 {
            return exec_err!("bin(): the interval is finer than the timestamp's unit");
        }
        let step = step / unit_ns;
        let floor = |t: i64| t - t.rem_euclid(step);
        match &args.args[0] {
            ColumnarValue::Scalar(s) => Ok(ColumnarValue::Scalar(map_timestamp_scalar(s, floor))),
            ColumnarValue::Array(a) => Ok(ColumnarValue::Array(map_timestamps(a, floor)?)),
        }
    }
}

fn unit_ns(u: TimeUnit) -> i64 {
    match u {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

fn map_timestamp_scalar(s: &ScalarValue, f: impl Fn(i64) -> i64) -> ScalarValue {
    match s {
        ScalarValue::TimestampNanosecond(v, tz) => {
            ScalarValue::TimestampNanosecond(v.map(&f), tz.clone())
        }
        ScalarValue::TimestampMicrosecond(v, tz) => {
            ScalarValue::TimestampMicrosecond(v.map(&f), tz.clone())
        }
        ScalarValue::TimestampMillisecond(v, tz) => {
            ScalarValue::TimestampMillisecond(v.map(&f), tz.clone())
        }
        ScalarValue::TimestampSecond(v, tz) => ScalarValue::TimestampSecond(v.map(&f), tz.clone()),
        other => other.clone(),
    }
}

/// Applies `f` to the raw values of a timestamp array, keeping its type.
fn map_timestamps(a: &ArrayRef, f: impl Fn(i64) -> i64) -> DfResult<ArrayRef> {
    let t = a.data_type().clone();
    let raw = cast(a, &DataType::Int64)?;
    let mapped: Int64Array = raw
        .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
        .unary(f);
    Ok(cast(&(Arc::new(mapped) as ArrayRef), &t)?)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Ago {
    signature: Signature,
}

impl Ago {
    fn new() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for Ago {
    fn name(&self) -> &str {
        "ago"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(ts_ns())
    }

    /// Becomes `now() - duration`, which folds to a constant at the query's start time
    /// (so time filters using it push down, and every use in a query agrees).
    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        let [duration] =
            <[Expr; 1]>::try_from(args).or_else(|_| plan_err!("ago() takes one duration"))?;
        let now = datafusion::functions::datetime::now(info.config_options()).call(vec![]);
        Ok(ExprSimplifyResult::Simplified(Expr::Cast(
            datafusion::logical_expr::Cast::new(Box::new(now - duration), ts_ns()),
        )))
    }

    /// Never runs: the plan's simplification rewrites every `ago(d)`. Failing here
    /// (as `now()` does) keeps constant folding from evaluating it at the clock's
    /// time rather than the query's start, so `ago(1h) = ago(1h)`.
    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        exec_err!(
            "ago() becomes now() - duration when the plan is simplified; simplify the plan first"
        )
    }
}

/// `to_milliseconds` / `to_nanoseconds`: a timestamp as an integer since the epoch.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Epoch {
    name: &'static str,
    unit: TimeUnit,
    signature: Signature,
}

impl Epoch {
    fn new(name: &'static str, unit: TimeUnit) -> Self {
        Self {
            name,
            unit,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Epoch {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args.first() {
            Some(DataType::Timestamp(_, _)) => Ok(DataType::Int64),
            other => plan_err!("{}() takes a timestamp, got {other:?}", self.name),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].clone().into_array(args.number_rows)?;
        let converted = cast(&a, &DataType::Timestamp(self.unit, None))?;
        let ints = cast(&converted, &DataType::Int64)?;
        scalar_if_scalar(&args.args[0], ints)
    }
}

/// `from_milliseconds` / `from_nanoseconds`: an integer since the epoch as a timestamp.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FromEpoch {
    name: &'static str,
    ns_per_unit: i64,
    signature: Signature,
}

impl FromEpoch {
    fn new(name: &'static str, ns_per_unit: i64) -> Self {
        Self {
            name,
            ns_per_unit,
            signature: Signature::exact(vec![DataType::Int64], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for FromEpoch {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(ts_ns())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].clone().into_array(args.number_rows)?;
        let ints = a.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let ns: Int64Array = ints.try_unary(|v| {
            v.checked_mul(self.ns_per_unit).ok_or_else(|| {
                datafusion::arrow::error::ArrowError::ComputeError(format!(
                    "{}(): {v} is out of the timestamp range",
                    self.name
                ))
            })
        })?;
        let out = cast(&(Arc::new(ns) as ArrayRef), &ts_ns())?;
        scalar_if_scalar(&args.args[0], out)
    }
}

/// `be_int64` / `be_float64`: 8 big-endian bytes as a number.
#[derive(Debug, PartialEq, Eq, Hash)]
struct BigEndian {
    name: &'static str,
    output: DataType,
    signature: Signature,
}

impl BigEndian {
    fn new(name: &'static str, output: DataType) -> Self {
        Self {
            name,
            output,
            signature: Signature::exact(vec![DataType::Binary], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for BigEndian {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.output.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let a = args.args[0].clone().into_array(args.number_rows)?;
        let bytes = a.as_binary::<i32>();
        let out = if self.output == DataType::Int64 {
            big_endian::<8, Int64Type>(self.name, bytes, false, i64::from_be_bytes)?
        } else {
            big_endian::<8, Float64Type>(self.name, bytes, false, f64::from_be_bytes)?
        };
        scalar_if_scalar(&args.args[0], out)
    }
}

/// Runs `eval` over the arguments as arrays of `args.number_rows` rows; the result is
/// a scalar when every argument was one.
pub(crate) fn invoke_rowwise(
    args: ScalarFunctionArgs,
    eval: impl FnOnce(&[ArrayRef], usize) -> DfResult<ArrayRef>,
) -> DfResult<ColumnarValue> {
    let all_scalar = args
        .args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)));
    // Constants make one row, whatever the batch (even an empty one).
    let rows = if all_scalar { 1 } else { args.number_rows };
    let arrays = args
        .args
        .iter()
        .map(|a| a.clone().into_array(rows))
        .collect::<DfResult<Vec<_>>>()?;
    let out = eval(&arrays, rows)?;
    Ok(if all_scalar {
        ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
    } else {
        ColumnarValue::Array(out)
    })
}

/// A one-row result back as a scalar when the input was a scalar.
fn scalar_if_scalar(input: &ColumnarValue, out: ArrayRef) -> DfResult<ColumnarValue> {
    match input {
        ColumnarValue::Scalar(_) => {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        }
        ColumnarValue::Array(_) => Ok(ColumnarValue::Array(out)),
    }
}
