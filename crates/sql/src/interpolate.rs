//! Timestream's time series functions, for gap filling and interpolation:
//! - `create_time_series(time, value)`: aggregate the readings of a group into one
//!   time series, an array of `{time, value}` structs in time order, of any measure
//!   type (DOUBLE, BIGINT, VARCHAR, BOOLEAN, TIMESTAMP);
//! - `sequence(start, end, step)`: the timestamps to fill (DataFusion's inclusive
//!   `generate_series`);
//! - `interpolate_linear(series, timestamps)`, `interpolate_locf(series, timestamps)`
//!   (last observation carried forward), `interpolate_fill(series, timestamps,
//!   value)` and `interpolate_spline_cubic(series, timestamps)` (a natural cubic
//!   spline through the readings, which needs three): the series at exactly the given
//!   timestamps; linear interpolation, the spline and LOCF leave out timestamps before
//!   the first reading (and, but for LOCF, after the last). With one timestamp instead
//!   of an array, each gives the DOUBLE value there, NULL where the array form leaves
//!   the timestamp out.
//!
//! `unnest(...)` turns a series back into rows.

use std::sync::Arc;

use crate::timeseries_fns::Spline;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, ListArray, ListBuilder, StructBuilder,
    TimestampNanosecondBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Fields, Float64Type, TimeUnit, TimestampNanosecondType,
};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

pub(crate) fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, None)
}

fn point_fields() -> Fields {
    points_of_type(DataType::Float64)
}

/// The `{time, value}` fields of a series of `value` values.
fn points_of_type(value: DataType) -> Fields {
    Fields::from(vec![
        Field::new("time", time_type(), false),
        Field::new("value", value, true),
    ])
}

/// The type of a numeric time series: `ARRAY<STRUCT<time TIMESTAMP, value DOUBLE>>`
/// (what the interpolations take and give).
pub fn series_type() -> DataType {
    series_of(DataType::Float64)
}

/// The type of a time series of `value` values.
fn series_of(value: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(
        DataType::Struct(points_of_type(value)),
        true,
    )))
}

/// The value type a series keeps for readings of type `t`: Timestream's measure types
/// (integers as BIGINT, other numbers as DOUBLE, text as VARCHAR, times in
/// nanoseconds), or `None` for a type a measure cannot have.
fn value_type(t: &DataType) -> Option<DataType> {
    use DataType as D;
    Some(match t {
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 => D::Int64,
        D::Null => D::Float64,
        t if t.is_numeric() => D::Float64,
        D::Utf8 | D::LargeUtf8 | D::Utf8View => D::Utf8,
        D::Boolean => D::Boolean,
        D::Timestamp(..) => time_type(),
        _ => return None,
    })
}

pub(crate) fn series_builder() -> ListBuilder<StructBuilder> {
    ListBuilder::new(StructBuilder::from_fields(point_fields(), 0))
}

/// Appends one series (sorted points) as a list entry.
pub(crate) fn append_series(
    b: &mut ListBuilder<StructBuilder>,
    points: &[(i64, Option<f64>)],
) -> DfResult<()> {
    let values = b.values();
    for (t, v) in points {
        let Some(tb) = values.field_builder::<TimestampNanosecondBuilder>(0) else {
            return exec_err!("time series builder has the wrong shape");
        };
        tb.append_value(*t);
        let Some(vb) = values.field_builder::<Float64Builder>(1) else {
            return exec_err!("time series builder has the wrong shape");
        };
        vb.append_option(*v);
        values.append(true);
    }
    b.append(true);
    Ok(())
}

/// `create_time_series(time, value)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CreateTimeSeries {
    signature: Signature,
}

impl CreateTimeSeries {
    /// The aggregate.
    pub fn new() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl Default for CreateTimeSeries {
    fn default() -> Self {
        Self::new()
    }
}

impl AggregateUDFImpl for CreateTimeSeries {
    fn name(&self) -> &str {
        "create_time_series"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args {
            [DataType::Timestamp(_, _), v] => match value_type(v) {
                Some(t) => Ok(series_of(t)),
                None => plan_err!(
                    "create_time_series(time, value) takes a measure value (DOUBLE, BIGINT, VARCHAR, BOOLEAN or TIMESTAMP), got {v}"
                ),
            },
            other => plan_err!(
                "create_time_series(time, value) takes a timestamp and a measure value, got {other:?}"
            ),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let value = args
            .input_fields
            .get(1)
            .and_then(|f| value_type(f.data_type()))
            .unwrap_or(DataType::Float64);
        Ok(vec![
            Arc::new(Field::new(
                format!("{}_times", args.name),
                DataType::List(Arc::new(Field::new_list_field(time_type(), true))),
                true,
            )),
            Arc::new(Field::new(
                format!("{}_values", args.name),
                DataType::List(Arc::new(Field::new_list_field(value, true))),
                true,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        let value = args
            .exprs
            .get(1)
            .map(|e| e.data_type(args.schema))
            .transpose()?
            .and_then(|t| value_type(&t))
            .unwrap_or(DataType::Float64);
        Ok(Box::new(SeriesAccumulator {
            value,
            times: Vec::new(),
            values: Vec::new(),
            value_bytes: 0,
        }))
    }
}

#[derive(Debug)]
struct SeriesAccumulator {
    /// The type the values are kept in.
    value: DataType,
    times: Vec<i64>,
    values: Vec<ScalarValue>,
    /// Bytes the values hold, kept as they come (DataFusion asks after every batch).
    value_bytes: usize,
}

impl SeriesAccumulator {
    fn add(&mut self, times: &ArrayRef, values: &ArrayRef) -> DfResult<()> {
        let times = cast(times, &time_type())?;
        let values = cast(values, &self.value)?;
        let t = times.as_primitive::<TimestampNanosecondType>();
        for i in 0..t.len() {
            if t.is_valid(i) {
                self.times.push(t.value(i));
                let v = ScalarValue::try_from_array(&values, i)?;
                self.value_bytes += v.size();
                self.values.push(v);
            }
        }
        Ok(())
    }

    fn list(values: Vec<ScalarValue>, t: &DataType) -> ScalarValue {
        ScalarValue::List(ScalarValue::new_list_nullable(&values, t))
    }
}

impl Accumulator for SeriesAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        match values {
            [t, v] => self.add(t, v),
            _ => exec_err!("create_time_series takes two arguments"),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let [times, values] = states else {
            return exec_err!("create_time_series state has two columns");
        };
        let (times, values) = (times.as_list::<i32>(), values.as_list::<i32>());
        for i in 0..times.len() {
            if times.is_valid(i) {
                self.add(&times.value(i), &values.value(i))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        let times: Vec<ScalarValue> = self
            .times
            .iter()
            .map(|t| ScalarValue::TimestampNanosecond(Some(*t), None))
            .collect();
        Ok(vec![
            Self::list(times, &time_type()),
            Self::list(self.values.clone(), &self.value),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let mut order: Vec<usize> = (0..self.times.len()).collect();
        order.sort_by_key(|&i| self.times[i]);
        let times: ArrayRef = Arc::new(datafusion::arrow::array::TimestampNanosecondArray::from(
            order.iter().map(|&i| self.times[i]).collect::<Vec<_>>(),
        ));
        let values = if order.is_empty() {
            datafusion::arrow::array::new_empty_array(&self.value)
        } else {
            ScalarValue::iter_to_array(order.iter().map(|&i| self.values[i].clone()))?
        };
        let points = datafusion::arrow::array::StructArray::try_new(
            points_of_type(self.value.clone()),
            vec![times, values],
            None,
        )?;
        let item = Arc::new(Field::new_list_field(points.data_type().clone(), true));
        let list = ListArray::try_new(
            item,
            datafusion::arrow::buffer::OffsetBuffer::from_lengths([points.len()]),
            Arc::new(points),
            None,
        )?;
        Ok(ScalarValue::List(Arc::new(list)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.times.capacity() * std::mem::size_of::<i64>()
            + self.value_bytes
    }
}

/// How an interpolation fills a timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Between the neighbouring readings, on the straight line.
    Linear,
    /// The last reading at or before the timestamp.
    Locf,
    /// The reading at exactly the timestamp, else a given value.
    Fill,
    /// On the natural cubic spline through the readings.
    SplineCubic,
}

/// `interpolate_linear`, `interpolate_locf`, `interpolate_fill`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Interpolate {
    method: Method,
    signature: Signature,
}

impl Interpolate {
    /// The function for `method`.
    pub fn new(method: Method) -> Self {
        let arity = if method == Method::Fill { 3 } else { 2 };
        Self {
            method,
            signature: Signature::any(arity, Volatility::Immutable),
        }
    }
}

/// The value of a sorted series at `t`, by `method`.
fn value_at(
    series: &[(i64, Option<f64>)],
    t: i64,
    method: Method,
    fill: Option<f64>,
) -> Option<Option<f64>> {
    let after = series.partition_point(|(st, _)| *st < t);
    if let Some((st, v)) = series.get(after)
        && *st == t
    {
        return Some(*v);
    }
    match method {
        Method::Fill => Some(fill),
        Method::Locf => after.checked_sub(1).map(|i| series[i].1),
        // The spline's values come from the fitted spline ([`fill_row`]).
        Method::Linear | Method::SplineCubic => {
            let (t0, v0) = *series.get(after.checked_sub(1)?)?;
            let (t1, v1) = *series.get(after)?;
            let (v0, v1) = (v0?, v1?);
            let f = (t - t0) as f64 / (t1 - t0) as f64;
            Some(Some(v0 + (v1 - v0) * f))
        }
    }
}

pub(crate) fn points_of(list: &ListArray, row: usize) -> DfResult<Vec<(i64, Option<f64>)>> {
    if list.is_null(row) {
        return Ok(Vec::new());
    }
    let entries = list.value(row);
    let s = entries.as_struct();
    let times = cast(s.column(0), &time_type())?;
    let values = cast(s.column(1), &DataType::Float64)?;
    let (t, v) = (
        times.as_primitive::<TimestampNanosecondType>(),
        values.as_primitive::<Float64Type>(),
    );
    let mut out: Vec<(i64, Option<f64>)> = (0..t.len())
        .filter(|i| t.is_valid(*i))
        .map(|i| (t.value(i), v.is_valid(i).then(|| v.value(i))))
        .collect();
    out.sort_by_key(|(t, _)| *t);
    Ok(out)
}

impl ScalarUDFImpl for Interpolate {
    fn name(&self) -> &str {
        match self.method {
            Method::Linear => "interpolate_linear",
            Method::Locf => "interpolate_locf",
            Method::Fill => "interpolate_fill",
            Method::SplineCubic => "interpolate_spline_cubic",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        match args {
            [DataType::List(_), DataType::List(_), ..] => Ok(series_type()),
            [
                DataType::List(_),
                DataType::Timestamp(..) | DataType::Null,
                ..,
            ] => Ok(DataType::Float64),
            other => plan_err!(
                "{}(series, timestamps) takes a time series and an array of timestamps (or one timestamp), got {other:?}",
                self.name()
            ),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let one = matches!(
            args.arg_fields[1].data_type(),
            DataType::Timestamp(..) | DataType::Null
        );
        let series = args.args[0].clone().into_array(rows)?;
        let stamps = args.args[1].clone().into_array(rows)?;
        let stamps = if one {
            let single = cast(&stamps, &time_type())?;
            let single = single.as_primitive::<TimestampNanosecondType>();
            // Each row's timestamp as a one-element array (a NULL one as none).
            let mut lists = ListBuilder::new(TimestampNanosecondBuilder::new());
            for i in 0..rows {
                if single.is_valid(i) {
                    lists.values().append_value(single.value(i));
                }
                lists.append(true);
            }
            Arc::new(lists.finish()) as ArrayRef
        } else {
            cast(
                &stamps,
                &DataType::List(Arc::new(Field::new_list_field(time_type(), true))),
            )?
        };
        let fill = match args.args.get(2) {
            Some(v) => Some(cast(&v.clone().into_array(rows)?, &DataType::Float64)?),
            None => None,
        };
        let (series, stamps) = (series.as_list::<i32>(), stamps.as_list::<i32>());
        let mut out = series_builder();
        let mut values = Float64Builder::with_capacity(rows);
        for row in 0..rows {
            let points = points_of(series, row)?;
            let fill_value = fill
                .as_ref()
                .map(|f| f.as_primitive::<Float64Type>())
                .and_then(|f| f.is_valid(row).then(|| f.value(row)));
            let mut wanted = Vec::new();
            if stamps.is_valid(row) && !series.is_null(row) {
                let ts = stamps.value(row);
                let ts = ts.as_primitive::<TimestampNanosecondType>();
                wanted.extend(
                    (0..ts.len())
                        .filter(|i| ts.is_valid(*i))
                        .map(|i| ts.value(i)),
                );
            }
            let filled = fill_row(self.name(), &points, &wanted, self.method, fill_value)?;
            if one {
                values.append_option(filled.first().and_then(|(_, v)| *v));
            } else {
                append_series(&mut out, &filled)?;
            }
        }
        let array: ArrayRef = if one {
            Arc::new(values.finish())
        } else {
            Arc::new(out.finish())
        };
        Ok(match &args.args[0] {
            ColumnarValue::Scalar(_) if rows == 1 => {
                ColumnarValue::Scalar(ScalarValue::try_from_array(&array, 0)?)
            }
            _ => ColumnarValue::Array(array),
        })
    }
}

/// The series `points` at the `wanted` timestamps, by `method` (the timestamps it
/// leaves out are missing from the result).
fn fill_row(
    name: &str,
    points: &[(i64, Option<f64>)],
    wanted: &[i64],
    method: Method,
    fill: Option<f64>,
) -> DfResult<Vec<(i64, Option<f64>)>> {
    if method != Method::SplineCubic {
        return Ok(wanted
            .iter()
            .filter_map(|&t| value_at(points, t, method, fill).map(|v| (t, v)))
            .collect());
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let readings: Vec<(i64, f64)> = points
        .iter()
        .filter_map(|(t, v)| v.map(|v| (*t, v)))
        .collect();
    let spline = Spline::fit(&readings).or_else(|e| exec_err!("{name}: {e}"))?;
    Ok(wanted
        .iter()
        .filter_map(|&t| spline.at(t).map(|v| (t, Some(v))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: [(i64, Option<f64>); 3] = [(10, Some(1.0)), (20, Some(3.0)), (40, Some(7.0))];

    #[test]
    fn linear_fills_between_readings_only() {
        assert_eq!(value_at(&S, 15, Method::Linear, None), Some(Some(2.0)));
        assert_eq!(value_at(&S, 30, Method::Linear, None), Some(Some(5.0)));
        assert_eq!(value_at(&S, 20, Method::Linear, None), Some(Some(3.0)));
        assert_eq!(value_at(&S, 5, Method::Linear, None), None);
        assert_eq!(value_at(&S, 45, Method::Linear, None), None);
    }

    #[test]
    fn locf_and_fill() {
        assert_eq!(value_at(&S, 39, Method::Locf, None), Some(Some(3.0)));
        assert_eq!(value_at(&S, 5, Method::Locf, None), None);
        assert_eq!(value_at(&S, 50, Method::Locf, None), Some(Some(7.0)));
        assert_eq!(value_at(&S, 15, Method::Fill, Some(0.0)), Some(Some(0.0)));
        assert_eq!(value_at(&S, 10, Method::Fill, Some(0.0)), Some(Some(1.0)));
    }
}
