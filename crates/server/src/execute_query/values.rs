//! Values: Arrow columns to `google.bigtable.v2.Value`s (results), and request
//! `Value`s to DataFusion scalars (parameters).
//!
//! The encoding is the one Google's clients parse: a NULL is a `Value` with no kind;
//! BYTES, STRING, INT64, BOOL, FLOAT32/64, TIMESTAMP and DATE use their own `kind`;
//! ARRAY is an `array_value` of the elements, STRUCT an `array_value` of the fields in
//! order, and MAP an `array_value` of two-element `array_value`s (key, value). Nested
//! values carry no `type`: the column's type in the metadata covers them.

use almanac_api::google::bigtable::v2 as pb;
use almanac_api::google::r#type::Date;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::ScalarValue;
use pb::r#type::Kind as TypeKind;
use pb::value::Kind;
use tonic::Status;

use super::types::{PARAM_TIME_ZONE, kind_name, normal_type, param_arrow_type};
use crate::convert::{MICROS_PER_SEC, NANOS_PER_SEC, timestamp_of};
use crate::status::invalid;

fn value(kind: Option<Kind>) -> pb::Value {
    pb::Value { r#type: None, kind }
}

fn array_value(values: Vec<pb::Value>) -> pb::Value {
    value(Some(Kind::ArrayValue(pb::ArrayValue { values })))
}

/// One `Value` per row of `column` (see the module docs for the encoding).
pub fn column_values(column: &dyn Array) -> Result<Vec<pb::Value>, Status> {
    use DataType as D;
    let dt = column.data_type();
    if let Some(normal) = normal_type(dt) {
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let cast = cast_with_options(column, &normal, &options)
            .map_err(|e| invalid(format!("cannot return a {dt} value as {normal}: {e}")))?;
        return column_values(cast.as_ref());
    }
    let mismatch = || Status::internal(format!("an array of type {dt} has another layout"));
    Ok(match dt {
        D::Null => vec![value(None); column.len()],
        D::Boolean => each(
            column.as_boolean_opt().ok_or_else(mismatch)?,
            Kind::BoolValue,
        ),
        D::Int64 => each(
            column
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(mismatch)?,
            Kind::IntValue,
        ),
        D::Float32 => each(
            column
                .as_primitive_opt::<Float32Type>()
                .ok_or_else(mismatch)?,
            |v| Kind::FloatValue(f64::from(v)),
        ),
        D::Float64 => each(
            column
                .as_primitive_opt::<Float64Type>()
                .ok_or_else(mismatch)?,
            Kind::FloatValue,
        ),
        D::Utf8 => each(column.as_string_opt::<i32>().ok_or_else(mismatch)?, |s| {
            Kind::StringValue(s.to_owned())
        }),
        D::Binary => each(column.as_binary_opt::<i32>().ok_or_else(mismatch)?, |b| {
            Kind::BytesValue(bytes::Bytes::copy_from_slice(b))
        }),
        D::Timestamp(unit, _) => timestamps(column, *unit).ok_or_else(mismatch)?,
        D::Date32 => each(
            column
                .as_primitive_opt::<Date32Type>()
                .ok_or_else(mismatch)?,
            |days| Kind::DateValue(date_of_days(i64::from(days))),
        ),
        D::List(_) => {
            let list = column.as_list_opt::<i32>().ok_or_else(mismatch)?;
            let elements = column_values(list.values().as_ref())?;
            nest(list.value_offsets(), elements, |i| list.is_null(i))
        }
        D::Map(_, _) => {
            let map = column.as_map_opt().ok_or_else(mismatch)?;
            let keys = column_values(map.keys().as_ref())?;
            let values = column_values(map.values().as_ref())?;
            let entries = keys
                .into_iter()
                .zip(values)
                .map(|(k, v)| array_value(vec![k, v]))
                .collect();
            nest(map.value_offsets(), entries, |i| map.is_null(i))
        }
        D::Struct(_) => {
            let strukt = column.as_struct_opt().ok_or_else(mismatch)?;
            let mut fields = strukt
                .columns()
                .iter()
                .map(|c| column_values(c.as_ref()).map(Vec::into_iter))
                .collect::<Result<Vec<_>, _>>()?;
            (0..strukt.len())
                .map(|i| {
                    let row = fields.iter_mut().map(|f| f.next().unwrap_or_default());
                    let row: Vec<pb::Value> = row.collect();
                    if strukt.is_null(i) {
                        value(None)
                    } else {
                        array_value(row)
                    }
                })
                .collect()
        }
        other => {
            return Err(invalid(format!(
                "a result column of type {other} cannot be returned by ExecuteQuery; CAST it to STRING"
            )));
        }
    })
}

/// One ARRAY value per row of a list-like column: row `i` holds `children` from
/// `offsets[i]` to `offsets[i + 1]`; a NULL row is a NULL value. Offsets only grow, so
/// the children are moved out in one pass, not cloned.
fn nest(
    offsets: &[i32],
    children: Vec<pb::Value>,
    is_null: impl Fn(usize) -> bool,
) -> Vec<pb::Value> {
    let first = offsets.first().map_or(0, |&o| o as usize);
    let mut children = children.into_iter().skip(first);
    offsets
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let items: Vec<pb::Value> = children.by_ref().take((w[1] - w[0]) as usize).collect();
            if is_null(i) {
                value(None)
            } else {
                array_value(items)
            }
        })
        .collect()
}

/// Values of an array whose `iter()` yields `Option<T>`, NULL where it yields `None`.
fn each<A, T>(array: A, kind: impl Fn(T) -> Kind) -> Vec<pb::Value>
where
    A: IntoIterator<Item = Option<T>>,
{
    array.into_iter().map(|v| value(v.map(&kind))).collect()
}

fn timestamps(column: &dyn Array, unit: TimeUnit) -> Option<Vec<pb::Value>> {
    let per_sec = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => MICROS_PER_SEC,
        TimeUnit::Nanosecond => NANOS_PER_SEC,
    };
    let kind = |v: i64| Kind::TimestampValue(timestamp_of(v, per_sec));
    Some(match unit {
        TimeUnit::Second => each(column.as_primitive_opt::<TimestampSecondType>()?, kind),
        TimeUnit::Millisecond => each(column.as_primitive_opt::<TimestampMillisecondType>()?, kind),
        TimeUnit::Microsecond => each(column.as_primitive_opt::<TimestampMicrosecondType>()?, kind),
        TimeUnit::Nanosecond => each(column.as_primitive_opt::<TimestampNanosecondType>()?, kind),
    })
}

/// The civil date `days` after 1970-01-01.
fn date_of_days(days: i64) -> Date {
    let (year, month, day) = almanac_engine::calendar::civil_from_days(days);
    Date {
        year: year as i32,
        month: month as i32,
        day: day as i32,
    }
}

/// Days from 1970-01-01 to a valid civil date, `None` if the date does not exist.
fn days_of_date(d: &Date) -> Option<i64> {
    let (y, m, day) = (i64::from(d.year), i64::from(d.month), i64::from(d.day));
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let days = almanac_engine::calendar::days_from_civil(y, m, day);
    // 31 February is not a date: it must come back as itself.
    (date_of_days(days) == *d).then_some(days)
}

/// The scalar parameter `name`, declared as `t`, is bound to; a `Value` with no kind
/// is a NULL of the declared type.
pub fn param_value(name: &str, v: &pb::Value, t: &pb::Type) -> Result<ScalarValue, Status> {
    let declared = t.kind.as_ref().map_or("(none)", kind_name);
    let Some(kind) = &v.kind else {
        let dt = param_arrow_type(name, t)?;
        return ScalarValue::try_from(&dt).map_err(|e| invalid(format!("parameter @{name}: {e}")));
    };
    let wrong = || {
        invalid(format!(
            "parameter @{name}: the value does not match its declared type {declared}"
        ))
    };
    Ok(match (&t.kind, kind) {
        (Some(TypeKind::BytesType(_)), Kind::BytesValue(b)) => {
            ScalarValue::Binary(Some(b.to_vec()))
        }
        (Some(TypeKind::StringType(_)), Kind::StringValue(s)) => ScalarValue::Utf8(Some(s.clone())),
        (Some(TypeKind::Int64Type(_)), Kind::IntValue(i)) => ScalarValue::Int64(Some(*i)),
        (Some(TypeKind::Float32Type(_)), Kind::FloatValue(f)) => {
            ScalarValue::Float32(Some(*f as f32))
        }
        (Some(TypeKind::Float64Type(_)), Kind::FloatValue(f)) => ScalarValue::Float64(Some(*f)),
        (Some(TypeKind::BoolType(_)), Kind::BoolValue(b)) => ScalarValue::Boolean(Some(*b)),
        (Some(TypeKind::TimestampType(_)), Kind::TimestampValue(ts)) => {
            let micros = ts
                .seconds
                .checked_mul(MICROS_PER_SEC)
                .and_then(|us| us.checked_add(i64::from(ts.nanos) / 1_000))
                .ok_or_else(|| invalid(format!("parameter @{name}: timestamp out of range")))?;
            ScalarValue::TimestampMicrosecond(Some(micros), Some(PARAM_TIME_ZONE.into()))
        }
        (Some(TypeKind::DateType(_)), Kind::DateValue(d)) => {
            let days = days_of_date(d)
                .and_then(|days| i32::try_from(days).ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "parameter @{name}: {}-{}-{} is not a date",
                        d.year, d.month, d.day
                    ))
                })?;
            ScalarValue::Date32(Some(days))
        }
        (Some(TypeKind::ArrayType(a)), Kind::ArrayValue(values)) => {
            let element = a.element_type.as_deref().ok_or_else(wrong)?;
            let element_dt = param_arrow_type(name, element)?;
            let elements = values
                .values
                .iter()
                .map(|e| param_value(name, e, element))
                .collect::<Result<Vec<_>, _>>()?;
            ScalarValue::List(ScalarValue::new_list(&elements, &element_dt, true))
        }
        (Some(_), _) => return Err(wrong()),
        (None, _) => return Err(invalid(format!("parameter @{name}: type has no kind set"))),
    })
}

#[cfg(test)]
mod tests;
