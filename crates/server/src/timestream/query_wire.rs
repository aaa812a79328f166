//! Shapes of `timestream-query` (botocore `timestream-query/2018-11-01`): the request
//! members, and Arrow results as `ColumnInfo` and `Row`s of `Datum`s.
//!
//! Arrow types map to Timestream's as follows (value texts: [`super::scalar`]):
//!
//! | Arrow | `ColumnInfo.Type` |
//! |---|---|
//! | Utf8, LargeUtf8, Utf8View | `VARCHAR` |
//! | Binary, LargeBinary, BinaryView, FixedSizeBinary | `VARCHAR` (base64) |
//! | Int8, Int16, Int32, UInt8, UInt16 | `INTEGER` |
//! | Int64, UInt32, UInt64 | `BIGINT` |
//! | Float16/32/64, Decimal | `DOUBLE` (decimals print exactly) |
//! | Boolean | `BOOLEAN` |
//! | Timestamp (any unit; a time zone is ignored, values are UTC) | `TIMESTAMP` |
//! | Date32, Date64 | `DATE` |
//! | Time32, Time64 | `TIME` |
//! | Interval(YearMonth) | `INTERVAL_YEAR_TO_MONTH` |
//! | Interval(DayTime, MonthDayNano), Duration | `INTERVAL_DAY_TO_SECOND` (a value with months fails the query) |
//! | Null | `UNKNOWN` (every value `NullValue`) |
//! | List of Struct `{time: Timestamp, value}` (what `CREATE_TIME_SERIES` and the interpolations return) | `TimeSeriesMeasureValueColumnInfo` of the value's type (`TimeSeriesValue`: `Time`, `Value` per point) |
//! | List, LargeList, FixedSizeList | `ArrayColumnInfo` (`ArrayValue`) |
//! | Struct | `RowColumnInfo` (`RowValue`) |
//! | Map | `ArrayColumnInfo` of a `RowColumnInfo` (`key`, `value`): an array of entry rows |
//! | Dictionary | its value type |
//!
//! Other types (unions, list views, run-end encoding) fail the query with a message
//! naming the column.
//!
//! Column names are the query's: an alias, a column's name, or for another expression
//! Timestream's `_col` and its position (named while planning, `almanac_sql`'s
//! dialect module).

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Field, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    IntervalDayTimeType, IntervalMonthDayNanoType, IntervalUnit, IntervalYearMonthType, Schema,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimeUnit,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::arrow::record_batch::RecordBatch;
use serde::Deserialize;
use serde_json::{Value as Json, json};

use super::scalar;

/// The members of `Query` and `CancelQuery`, all optional; each operation checks
/// what it needs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct QueryRequest {
    /// The SQL.
    pub query_string: Option<String>,
    /// Idempotency token (checked for length, otherwise unused).
    pub client_token: Option<String>,
    /// Pagination token of a previous page.
    pub next_token: Option<String>,
    /// Rows per page.
    pub max_rows: Option<i64>,
    /// QueryInsights settings (accepted, no insights are returned).
    pub query_insights: Option<Json>,
    /// CancelQuery: the query.
    pub query_id: Option<String>,
    /// PrepareQuery: only check the query (the only form the service accepts).
    pub validate_only: Option<bool>,
}

/// The `ColumnInfo` list of a result schema, or which column has no Timestream type.
pub fn column_infos(schema: &Schema) -> Result<Json, String> {
    schema
        .fields()
        .iter()
        .map(|f| column_info(f))
        .collect::<Result<Vec<_>, _>>()
        .map(Json::Array)
}

fn column_info(field: &Field) -> Result<Json, String> {
    let kind = column_type(field.data_type()).map_err(|t| {
        format!(
            "Column {:?} has type {t}, which has no Timestream equivalent; CAST it to VARCHAR, BIGINT, DOUBLE or TIMESTAMP.",
            field.name()
        )
    })?;
    Ok(json!({ "Name": field.name(), "Type": kind }))
}

/// The value type of a `timeseries` column: a list of `{time, value}` structs.
fn series_value(t: &DataType) -> Option<&DataType> {
    let DataType::List(item) = t else {
        return None;
    };
    let DataType::Struct(fields) = item.data_type() else {
        return None;
    };
    match fields.iter().as_slice() {
        [time, value]
            if time.name() == "time"
                && matches!(time.data_type(), DataType::Timestamp(..))
                && value.name() == "value" =>
        {
            Some(value.data_type())
        }
        _ => None,
    }
}

/// The `Type` of an Arrow type, or the type's name when there is none.
fn column_type(t: &DataType) -> Result<Json, String> {
    use DataType as D;
    let scalar = |name: &str| Ok(json!({ "ScalarType": name }));
    if let Some(value) = series_value(t) {
        return Ok(json!({ "TimeSeriesMeasureValueColumnInfo": { "Type": column_type(value)? } }));
    }
    match t {
        D::Utf8 | D::LargeUtf8 | D::Utf8View => scalar("VARCHAR"),
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => scalar("VARCHAR"),
        D::Int8 | D::Int16 | D::Int32 | D::UInt8 | D::UInt16 => scalar("INTEGER"),
        D::Int64 | D::UInt32 | D::UInt64 => scalar("BIGINT"),
        D::Float16 | D::Float32 | D::Float64 => scalar("DOUBLE"),
        D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..) | D::Decimal256(..) => {
            scalar("DOUBLE")
        }
        D::Boolean => scalar("BOOLEAN"),
        D::Timestamp(..) => scalar("TIMESTAMP"),
        D::Date32 | D::Date64 => scalar("DATE"),
        D::Time32(_) | D::Time64(_) => scalar("TIME"),
        D::Interval(IntervalUnit::YearMonth) => scalar("INTERVAL_YEAR_TO_MONTH"),
        D::Interval(_) | D::Duration(_) => scalar("INTERVAL_DAY_TO_SECOND"),
        D::Null => scalar("UNKNOWN"),
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) => {
            Ok(json!({ "ArrayColumnInfo": { "Type": column_type(f.data_type())? } }))
        }
        D::Struct(fields) => {
            let members = fields
                .iter()
                .map(|f| Ok(json!({ "Name": f.name(), "Type": column_type(f.data_type())? })))
                .collect::<Result<Vec<_>, String>>()?;
            Ok(json!({ "RowColumnInfo": members }))
        }
        D::Map(entries, _) => {
            Ok(json!({ "ArrayColumnInfo": { "Type": column_type(entries.data_type())? } }))
        }
        D::Dictionary(_, values) => column_type(values),
        other => Err(other.to_string()),
    }
}

/// Dictionary columns decoded to their values, so rows encode one way.
pub fn decoded_columns(batch: &RecordBatch) -> Result<Vec<ArrayRef>, String> {
    batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Dictionary(_, values) => cast(c, values).map_err(|e| e.to_string()),
            _ => Ok(c.clone()),
        })
        .collect()
}

/// Appends row `row` of `columns` as a `Row` object: `{"Data":[…]}`.
pub fn push_row(out: &mut String, columns: &[ArrayRef], row: usize) -> Result<(), String> {
    out.push_str("{\"Data\":[");
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_datum(out, c.as_ref(), row)?;
    }
    out.push_str("]}");
    Ok(())
}

fn push_scalar(out: &mut String, text: &str) {
    out.push_str("{\"ScalarValue\":");
    scalar::push_json_string(out, text);
    out.push('}');
}

/// A value whose text needs no JSON escaping (numbers, times).
fn push_plain(out: &mut String, text: impl std::fmt::Display) {
    let _ = write!(out, "{{\"ScalarValue\":\"{text}\"}}");
}

/// A value whose text `write` appends and which needs no JSON escaping.
fn push_with(out: &mut String, write: impl FnOnce(&mut String)) {
    out.push_str("{\"ScalarValue\":\"");
    write(out);
    out.push_str("\"}");
}

fn push_array(out: &mut String, values: &dyn Array) -> Result<(), String> {
    out.push_str("{\"ArrayValue\":[");
    for j in 0..values.len() {
        if j > 0 {
            out.push(',');
        }
        push_datum(out, values, j)?;
    }
    out.push_str("]}");
    Ok(())
}

/// A `timeseries` value: `{"TimeSeriesValue":[{"Time":…,"Value":…}, …]}`.
fn push_series(out: &mut String, points: &StructArray) -> Result<(), String> {
    let (times, values) = (points.column(0), points.column(1));
    out.push_str("{\"TimeSeriesValue\":[");
    for j in 0..points.len() {
        if j > 0 {
            out.push(',');
        }
        let DataType::Timestamp(unit, _) = times.data_type() else {
            return Err("a time series' times are not timestamps".into());
        };
        out.push_str("{\"Time\":\"");
        scalar::push_timestamp(out, raw_i64(times.as_ref(), j) * unit_ns(*unit));
        out.push_str("\",\"Value\":");
        push_datum(out, values.as_ref(), j)?;
        out.push('}');
    }
    out.push_str("]}");
    Ok(())
}

fn push_row_value(out: &mut String, columns: &[ArrayRef], row: usize) -> Result<(), String> {
    out.push_str("{\"RowValue\":");
    push_row(out, columns, row)?;
    out.push('}');
    Ok(())
}

/// Nanoseconds in one `unit`.
fn unit_ns(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

/// The raw integer of a timestamp, time or duration array of `unit`.
fn raw_i64(a: &dyn Array, i: usize) -> i128 {
    use DataType as D;
    match a.data_type() {
        D::Timestamp(TimeUnit::Second, _) => {
            a.as_primitive::<TimestampSecondType>().value(i).into()
        }
        D::Timestamp(TimeUnit::Millisecond, _) => {
            a.as_primitive::<TimestampMillisecondType>().value(i).into()
        }
        D::Timestamp(TimeUnit::Microsecond, _) => {
            a.as_primitive::<TimestampMicrosecondType>().value(i).into()
        }
        D::Timestamp(TimeUnit::Nanosecond, _) => {
            a.as_primitive::<TimestampNanosecondType>().value(i).into()
        }
        D::Duration(TimeUnit::Second) => a.as_primitive::<DurationSecondType>().value(i).into(),
        D::Duration(TimeUnit::Millisecond) => {
            a.as_primitive::<DurationMillisecondType>().value(i).into()
        }
        D::Duration(TimeUnit::Microsecond) => {
            a.as_primitive::<DurationMicrosecondType>().value(i).into()
        }
        D::Duration(TimeUnit::Nanosecond) => {
            a.as_primitive::<DurationNanosecondType>().value(i).into()
        }
        D::Time32(TimeUnit::Second) => a.as_primitive::<Time32SecondType>().value(i).into(),
        D::Time32(_) => a.as_primitive::<Time32MillisecondType>().value(i).into(),
        D::Time64(TimeUnit::Microsecond) => {
            a.as_primitive::<Time64MicrosecondType>().value(i).into()
        }
        D::Time64(_) => a.as_primitive::<Time64NanosecondType>().value(i).into(),
        _ => 0,
    }
}

/// Appends one value of `a` as a `Datum`.
fn push_datum(out: &mut String, a: &dyn Array, i: usize) -> Result<(), String> {
    use DataType as D;
    if a.is_null(i) || *a.data_type() == D::Null {
        out.push_str("{\"NullValue\":true}");
        return Ok(());
    }
    match a.data_type() {
        D::Utf8 => push_scalar(out, a.as_string::<i32>().value(i)),
        D::LargeUtf8 => push_scalar(out, a.as_string::<i64>().value(i)),
        D::Utf8View => push_scalar(out, a.as_string_view().value(i)),
        D::Binary => push_plain(out, scalar::bytes(a.as_binary::<i32>().value(i))),
        D::LargeBinary => push_plain(out, scalar::bytes(a.as_binary::<i64>().value(i))),
        D::BinaryView => push_plain(out, scalar::bytes(a.as_binary_view().value(i))),
        D::FixedSizeBinary(_) => push_plain(out, scalar::bytes(a.as_fixed_size_binary().value(i))),
        D::Boolean => push_plain(out, a.as_boolean().value(i)),
        D::Int8 => push_plain(out, a.as_primitive::<Int8Type>().value(i)),
        D::Int16 => push_plain(out, a.as_primitive::<Int16Type>().value(i)),
        D::Int32 => push_plain(out, a.as_primitive::<Int32Type>().value(i)),
        D::Int64 => push_plain(out, a.as_primitive::<Int64Type>().value(i)),
        D::UInt8 => push_plain(out, a.as_primitive::<UInt8Type>().value(i)),
        D::UInt16 => push_plain(out, a.as_primitive::<UInt16Type>().value(i)),
        D::UInt32 => push_plain(out, a.as_primitive::<UInt32Type>().value(i)),
        D::UInt64 => push_plain(out, a.as_primitive::<UInt64Type>().value(i)),
        D::Float16 => push_plain(
            out,
            scalar::float(a.as_primitive::<Float16Type>().value(i).to_f32()),
        ),
        D::Float32 => push_plain(out, scalar::float(a.as_primitive::<Float32Type>().value(i))),
        D::Float64 => push_with(out, |out| {
            scalar::push_double(out, a.as_primitive::<Float64Type>().value(i));
        }),
        D::Decimal32(..) => push_plain(out, a.as_primitive::<Decimal32Type>().value_as_string(i)),
        D::Decimal64(..) => push_plain(out, a.as_primitive::<Decimal64Type>().value_as_string(i)),
        D::Decimal128(..) => push_plain(out, a.as_primitive::<Decimal128Type>().value_as_string(i)),
        D::Decimal256(..) => push_plain(out, a.as_primitive::<Decimal256Type>().value_as_string(i)),
        D::Timestamp(unit, _) => push_with(out, |out| {
            scalar::push_timestamp(out, raw_i64(a, i) * unit_ns(*unit));
        }),
        D::Date32 => push_plain(
            out,
            scalar::date(a.as_primitive::<Date32Type>().value(i).into()),
        ),
        D::Date64 => push_plain(
            out,
            scalar::date(
                a.as_primitive::<Date64Type>()
                    .value(i)
                    .div_euclid(86_400_000),
            ),
        ),
        D::Time32(unit) | D::Time64(unit) => {
            push_plain(out, scalar::time(raw_i64(a, i) * unit_ns(*unit)))
        }
        D::Duration(unit) => push_plain(
            out,
            scalar::interval_day_to_second(raw_i64(a, i) * unit_ns(*unit)),
        ),
        D::Interval(IntervalUnit::YearMonth) => push_plain(
            out,
            scalar::interval_year_to_month(a.as_primitive::<IntervalYearMonthType>().value(i)),
        ),
        D::Interval(IntervalUnit::DayTime) => {
            let v = a.as_primitive::<IntervalDayTimeType>().value(i);
            let ns =
                i128::from(v.days) * 86_400_000_000_000 + i128::from(v.milliseconds) * 1_000_000;
            push_plain(out, scalar::interval_day_to_second(ns));
        }
        D::Interval(IntervalUnit::MonthDayNano) => {
            let v = a.as_primitive::<IntervalMonthDayNanoType>().value(i);
            if v.months != 0 {
                return Err(format!(
                    "The interval {} months {} days {} ns has months, which INTERVAL_DAY_TO_SECOND cannot hold.",
                    v.months, v.days, v.nanoseconds
                ));
            }
            let ns = i128::from(v.days) * 86_400_000_000_000 + i128::from(v.nanoseconds);
            push_plain(out, scalar::interval_day_to_second(ns));
        }
        D::List(_) if series_value(a.data_type()).is_some() => {
            push_series(out, a.as_list::<i32>().value(i).as_struct())?;
        }
        D::List(_) => push_array(out, a.as_list::<i32>().value(i).as_ref())?,
        D::LargeList(_) => push_array(out, a.as_list::<i64>().value(i).as_ref())?,
        D::FixedSizeList(..) => push_array(out, a.as_fixed_size_list().value(i).as_ref())?,
        D::Struct(_) => push_row_value(out, a.as_struct().columns(), i)?,
        D::Map(..) => {
            let entries = a.as_map().value(i);
            out.push_str("{\"ArrayValue\":[");
            for j in 0..entries.len() {
                if j > 0 {
                    out.push(',');
                }
                push_row_value(out, entries.columns(), j)?;
            }
            out.push_str("]}");
        }
        D::Dictionary(_, values) => {
            let one = cast(&a.slice(i, 1), values).map_err(|e| e.to_string())?;
            push_datum(out, one.as_ref(), 0)?;
        }
        other => {
            return Err(format!(
                "A value of type {other} has no Timestream equivalent."
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        BinaryArray, Float64Array, Int32Array, Int64Array, ListArray, MapBuilder, StringArray,
        StringBuilder, StructArray, TimestampMicrosecondArray,
    };
    use datafusion::arrow::datatypes::Int64Type;

    use super::*;

    fn row(columns: Vec<ArrayRef>, i: usize) -> Json {
        let mut out = String::new();
        push_row(&mut out, &columns, i).unwrap();
        serde_json::from_str(&out).unwrap()
    }

    #[test]
    fn scalars_and_nulls() {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a\"b"), None])),
            Arc::new(Float64Array::from(vec![Some(1.0), Some(0.25)])),
            Arc::new(Int64Array::from(vec![Some(-3), Some(4)])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![Some(1_500_000), None]).with_timezone("UTC"),
            ),
            Arc::new(BinaryArray::from(vec![Some(&b"k"[..]), Some(&b""[..])])),
        ];
        assert_eq!(
            row(cols.clone(), 0),
            json!({"Data": [
                {"ScalarValue": "a\"b"},
                {"ScalarValue": "1.0"},
                {"ScalarValue": "-3"},
                {"ScalarValue": "1970-01-01 00:00:01.500000000"},
                {"ScalarValue": "aw=="},
            ]})
        );
        assert_eq!(row(cols, 1)["Data"][0], json!({"NullValue": true}));
    }

    #[test]
    fn time_series_columns_are_timestream_time_series() {
        use datafusion::arrow::array::TimestampNanosecondArray;
        use datafusion::arrow::buffer::OffsetBuffer;
        let points = StructArray::from(vec![
            (
                Arc::new(Field::new(
                    "time",
                    DataType::Timestamp(TimeUnit::Nanosecond, None),
                    false,
                )),
                Arc::new(TimestampNanosecondArray::from(vec![
                    1_000_000_000,
                    2_000_000_001,
                ])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("value", DataType::Float64, true)),
                Arc::new(Float64Array::from(vec![Some(0.5), None])) as ArrayRef,
            ),
        ]);
        let item = Arc::new(Field::new_list_field(points.data_type().clone(), true));
        let series: ArrayRef = Arc::new(ListArray::new(
            item,
            OffsetBuffer::from_lengths([2]),
            Arc::new(points),
            None,
        ));
        assert_eq!(
            row(vec![series.clone()], 0)["Data"][0],
            json!({"TimeSeriesValue": [
                {"Time": "1970-01-01 00:00:01.000000000", "Value": {"ScalarValue": "0.5"}},
                {"Time": "1970-01-01 00:00:02.000000001", "Value": {"NullValue": true}},
            ]})
        );
        let schema = Schema::new(vec![Field::new("ts", series.data_type().clone(), true)]);
        assert_eq!(
            column_infos(&schema).unwrap()[0],
            json!({"Name": "ts", "Type": {"TimeSeriesMeasureValueColumnInfo":
                {"Type": {"ScalarType": "DOUBLE"}}}})
        );
    }

    #[test]
    fn lists_structs_and_maps() {
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None]),
        ]));
        let st: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int32, true)),
            Arc::new(Int32Array::from(vec![7])) as ArrayRef,
        )]));
        let mut mb = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        mb.keys().append_value("q");
        mb.values().append_value("v");
        mb.append(true).unwrap();
        let map: ArrayRef = Arc::new(mb.finish());
        let r = row(vec![list.clone(), st.clone(), map.clone()], 0);
        assert_eq!(
            r["Data"][0],
            json!({"ArrayValue": [{"ScalarValue": "1"}, {"NullValue": true}]})
        );
        assert_eq!(
            r["Data"][1],
            json!({"RowValue": {"Data": [{"ScalarValue": "7"}]}})
        );
        assert_eq!(
            r["Data"][2],
            json!({"ArrayValue": [{"RowValue": {"Data": [{"ScalarValue": "q"}, {"ScalarValue": "v"}]}}]})
        );
        let schema = Schema::new(vec![
            Field::new("l", list.data_type().clone(), true),
            Field::new("s", st.data_type().clone(), true),
            Field::new("m", map.data_type().clone(), true),
        ]);
        let info = column_infos(&schema).unwrap();
        assert_eq!(
            info[0],
            json!({"Name": "l", "Type": {"ArrayColumnInfo": {"Type": {"ScalarType": "BIGINT"}}}})
        );
        assert_eq!(
            info[1]["Type"],
            json!({"RowColumnInfo": [{"Name": "x", "Type": {"ScalarType": "INTEGER"}}]})
        );
        assert_eq!(
            info[2]["Type"]["ArrayColumnInfo"]["Type"]["RowColumnInfo"][0]["Name"],
            json!("keys")
        );
    }

    #[test]
    fn unsupported_types_name_the_column() {
        let schema = Schema::new(vec![Field::new(
            "u",
            DataType::RunEndEncoded(
                Arc::new(Field::new("r", DataType::Int32, false)),
                Arc::new(Field::new("v", DataType::Utf8, true)),
            ),
            true,
        )]);
        let e = column_infos(&schema).unwrap_err();
        assert!(e.contains("\"u\""), "{e}");
    }
}
