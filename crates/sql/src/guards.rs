//! Bounds on the functions whose output size is an argument: `sequence` (and
//! DataFusion's `generate_series`, `range`), `array_repeat`, `array_resize`, `repeat`,
//! `lpad`, `rpad`.
//! Their output is allocated in one piece, outside any memory pool, so each call's
//! arguments are checked before it runs: `sequence(1, 1000000000)` would otherwise ask
//! for 8 GB at once.
//!
//! Each function keeps its own behaviour; the wrapper only refuses, naming the limit:
//! - a list of more than [`MAX_LIST_ENTRIES`] entries, Presto's limit for `sequence`
//!   (Timestream's SQL is Presto's);
//! - more than [`MAX_CALL_ENTRIES`] list entries or [`MAX_CALL_BYTES`] bytes of text
//!   (or of repeated elements) from one call over a batch of rows.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, FieldRef, Int64Type, IntervalMonthDayNanoType, TimeUnit,
};
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::FunctionRegistry as _;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature,
};

/// Entries one list may have: Presto's limit for `sequence` ("result of sequence
/// function must not have more than 10000 entries").
pub const MAX_LIST_ENTRIES: u64 = 10_000;
/// List entries one call may produce over a batch of rows: 64 MiB of 8-byte values.
pub const MAX_CALL_ENTRIES: u64 = 8 << 20;
/// Bytes of text one call may produce over a batch of rows. A row of a Timestream
/// result holds at most 1 MB; this leaves room for many such rows in a batch.
pub const MAX_CALL_BYTES: u64 = 64 << 20;

/// Nanoseconds in a day.
const DAY_NS: i128 = 86_400_000_000_000;

/// Which size a function's arguments set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Size {
    /// A list from start, stop and step (`sequence`, `generate_series`, `range`).
    Series,
    /// A list of `count` copies: `array_repeat(element, count)`.
    Copies,
    /// Text of `count` copies of a string: `repeat(text, count)`.
    Repeat,
    /// Text padded to `length` characters: `lpad`, `rpad`.
    Pad,
}

/// Wraps every bounded function registered in `state` (run after they all are).
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for (name, size) in [
        ("generate_series", Size::Series),
        ("range", Size::Series),
        ("array_repeat", Size::Copies),
        ("array_resize", Size::Copies),
        ("repeat", Size::Repeat),
        ("lpad", Size::Pad),
        ("rpad", Size::Pad),
    ] {
        if let Ok(inner) = state.udf(name) {
            let guarded = Guarded {
                inner: inner.as_ref().clone(),
                size,
            };
            state.register_udf(Arc::new(ScalarUDF::from(guarded)))?;
        }
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Guarded {
    inner: ScalarUDF,
    size: Size,
}

impl ScalarUDFImpl for Guarded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        self.inner.inner().simplify(args, info)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        if rows > 0 {
            let arrays = args
                .args
                .iter()
                .map(|a| a.to_array(rows))
                .collect::<DfResult<Vec<_>>>()?;
            self.check(&arrays, rows)?;
        }
        self.inner.invoke_with_args(args)
    }
}

impl Guarded {
    /// Refuses arguments whose output would pass a limit.
    fn check(&self, args: &[ArrayRef], rows: usize) -> DfResult<()> {
        let name = self.inner.name();
        let mut total: u64 = 0;
        let (per_row, per_call, unit) = match self.size {
            Size::Series | Size::Copies => (MAX_LIST_ENTRIES, MAX_CALL_ENTRIES, "entries"),
            Size::Repeat | Size::Pad => (u64::MAX, MAX_CALL_BYTES, "bytes"),
        };
        let mut bytes: u64 = 0;
        for row in 0..rows.min(args.iter().map(|a| a.len()).min().unwrap_or(0)) {
            let n = match self.size {
                Size::Series => series_len(args, row)?,
                Size::Copies => {
                    let count = int_at(args.get(1), row)?.unwrap_or(0).max(0) as u64;
                    // Each copy holds the element (array_repeat's first argument,
                    // array_resize's fill value): count its bytes too.
                    let element = args.get(if self.inner.name() == "array_resize" {
                        2
                    } else {
                        0
                    });
                    let each = element.map_or(8, |e| element_bytes(e, row).max(8));
                    bytes = bytes.saturating_add(count.saturating_mul(each));
                    if bytes > MAX_CALL_BYTES {
                        return Err(DataFusionError::ResourcesExhausted(format!(
                            "{name}: the call would produce more than {MAX_CALL_BYTES} bytes over {rows} rows, the most one call may; narrow the query"
                        )));
                    }
                    count
                }
                Size::Repeat => {
                    let count = int_at(args.get(1), row)?.unwrap_or(0).max(0) as u64;
                    count.saturating_mul(text_len_at(args.first(), row)?)
                }
                Size::Pad => int_at(args.get(1), row)?.unwrap_or(0).max(0) as u64,
            };
            if n > per_row {
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "{name}: the result would have {n} {unit}; a list may have at most {per_row} (Presto's limit)"
                )));
            }
            total = total.saturating_add(n);
            if total > per_call {
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "{name}: the call would produce more than {per_call} {unit} over {rows} rows, the most one call may; narrow the query"
                )));
            }
        }
        Ok(())
    }
}

/// Bytes row `row` of an argument holds (its slice of the buffers).
fn element_bytes(arg: &ArrayRef, row: usize) -> u64 {
    arg.slice(row, 1)
        .to_data()
        .get_slice_memory_size()
        .unwrap_or(0) as u64
}

/// Row `row` of an integer argument (NULL as `None`).
fn int_at(arg: Option<&ArrayRef>, row: usize) -> DfResult<Option<i64>> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    if arg.is_null(row) {
        return Ok(None);
    }
    let ints = cast(&arg.slice(row, 1), &DataType::Int64)?;
    Ok(Some(ints.as_primitive::<Int64Type>().value(0)))
}

/// Bytes of row `row` of a text argument.
fn text_len_at(arg: Option<&ArrayRef>, row: usize) -> DfResult<u64> {
    let Some(arg) = arg else {
        return Ok(0);
    };
    if arg.is_null(row) {
        return Ok(0);
    }
    let text = cast(&arg.slice(row, 1), &DataType::Utf8)?;
    Ok(text.as_string::<i32>().value(0).len() as u64)
}

/// Entries of the list `sequence(start, stop[, step])` or `range(stop)` makes for
/// `row`: integers, dates or timestamps, with an integer or interval step. Months
/// count as 28 days, so the estimate never falls short.
fn series_len(args: &[ArrayRef], row: usize) -> DfResult<u64> {
    let (start, stop, step) = match args {
        [stop] => (Some(0), point_at(stop, row)?, Some(1)),
        [start, stop] => {
            let unit = if is_temporal(start.data_type()) {
                DAY_NS
            } else {
                1
            };
            (point_at(start, row)?, point_at(stop, row)?, Some(unit))
        }
        [start, stop, step] => (
            point_at(start, row)?,
            point_at(stop, row)?,
            step_at(step, row)?,
        ),
        _ => return Ok(0),
    };
    let (Some(start), Some(stop), Some(step)) = (start, stop, step) else {
        return Ok(0);
    };
    if step == 0 || (stop - start).signum() * step.signum() < 0 {
        return Ok(0); // the function itself refuses a zero step; a backward range is empty
    }
    Ok(u64::try_from((stop - start) / step + 1).unwrap_or(u64::MAX))
}

fn is_temporal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
    )
}

/// An endpoint as an integer, or a date or timestamp in nanoseconds.
fn point_at(arg: &ArrayRef, row: usize) -> DfResult<Option<i128>> {
    if arg.is_null(row) {
        return Ok(None);
    }
    let one = arg.slice(row, 1);
    let ns = match one.data_type() {
        DataType::Date32 => i128::from(one.as_primitive::<Date32Type>().value(0)) * DAY_NS,
        DataType::Timestamp(unit, _) => {
            let per = match unit {
                TimeUnit::Second => 1_000_000_000,
                TimeUnit::Millisecond => 1_000_000,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1,
            };
            let raw = cast(&one, &DataType::Int64)?;
            i128::from(raw.as_primitive::<Int64Type>().value(0)) * per
        }
        _ => {
            let raw = cast(&one, &DataType::Int64)?;
            i128::from(raw.as_primitive::<Int64Type>().value(0))
        }
    };
    Ok(Some(ns))
}

/// A step as an integer, or an interval in nanoseconds.
fn step_at(arg: &ArrayRef, row: usize) -> DfResult<Option<i128>> {
    if arg.is_null(row) {
        return Ok(None);
    }
    if let DataType::Interval(_) = arg.data_type() {
        let one = cast(
            &arg.slice(row, 1),
            &DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano),
        )?;
        let v = one.as_primitive::<IntervalMonthDayNanoType>().value(0);
        let ns = i128::from(v.months) * 28 * DAY_NS
            + i128::from(v.days) * DAY_NS
            + i128::from(v.nanoseconds);
        return Ok(Some(ns));
    }
    point_at(arg, row)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "test")]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};

    fn ints(v: &[i64]) -> ArrayRef {
        Arc::new(Int64Array::from(v.to_vec()))
    }

    #[test]
    fn series_length_follows_start_stop_and_step() {
        assert_eq!(series_len(&[ints(&[1]), ints(&[10])], 0).unwrap(), 10);
        assert_eq!(
            series_len(&[ints(&[1]), ints(&[10]), ints(&[3])], 0).unwrap(),
            4
        );
        assert_eq!(
            series_len(&[ints(&[10]), ints(&[1]), ints(&[-1])], 0).unwrap(),
            10
        );
        assert_eq!(
            series_len(&[ints(&[10]), ints(&[1]), ints(&[1])], 0).unwrap(),
            0
        );
        assert_eq!(series_len(&[ints(&[5])], 0).unwrap(), 6);
        let huge = series_len(&[ints(&[1]), ints(&[1_000_000_000])], 0).unwrap();
        assert_eq!(huge, 1_000_000_000);
    }

    #[test]
    fn text_length_is_counted_before_repeating() {
        let text: ArrayRef = Arc::new(StringArray::from(vec!["abc"]));
        assert_eq!(text_len_at(Some(&text), 0).unwrap(), 3);
        assert_eq!(int_at(Some(&ints(&[7])), 0).unwrap(), Some(7));
    }
}
