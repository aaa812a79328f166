//! Column and parameter types: Arrow's (what DataFusion plans with) against Bigtable's
//! `google.bigtable.v2.Type` (what the client is told).
//!
//! Results: Arrow types without a Bigtable counterpart are first *normalized*
//! ([`normal_type`]): narrower integers widen to INT64, large and view strings, bytes
//! and lists become the plain ones, dictionaries their values, and decimals, times,
//! durations and intervals become their STRING rendering. [`sql_type`] and
//! [`super::values::column_values`] both apply it, so a column's declared type and its
//! values always agree.
//!
//! Parameters: [`param_arrow_type`] gives the Arrow type a declared parameter type
//! plans as (PrepareQuery binds each parameter to a NULL of that type).

use almanac_api::google::bigtable::v2 as pb;
use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
use pb::r#type::Kind;
use tonic::Status;

use crate::status::invalid;

/// The time zone of TIMESTAMP parameters, the one the Bigtable tables' `_timestamp`
/// column carries.
pub const PARAM_TIME_ZONE: &str = "UTC";

/// The type a column of `dt` is cast to before it is sent, or `None` if it is sent as
/// it is. Only the outermost type is looked at; nested types normalize as they are
/// reached.
pub fn normal_type(dt: &DataType) -> Option<DataType> {
    use DataType as D;
    match dt {
        D::Int8 | D::Int16 | D::Int32 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => {
            Some(D::Int64)
        }
        D::Float16 => Some(D::Float32),
        D::LargeUtf8 | D::Utf8View => Some(D::Utf8),
        D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => Some(D::Binary),
        D::Date64 => Some(D::Date32),
        D::LargeList(f) | D::FixedSizeList(f, _) | D::ListView(f) | D::LargeListView(f) => {
            Some(D::List(f.clone()))
        }
        D::Dictionary(_, values) => Some(values.as_ref().clone()),
        D::Decimal32(..)
        | D::Decimal64(..)
        | D::Decimal128(..)
        | D::Decimal256(..)
        | D::Time32(_)
        | D::Time64(_)
        | D::Duration(_)
        | D::Interval(_) => Some(D::Utf8),
        _ => None,
    }
}

fn of(kind: Kind) -> pb::Type {
    pb::Type { kind: Some(kind) }
}

/// The Bigtable type of a result column of Arrow type `dt`.
pub fn sql_type(dt: &DataType) -> Result<pb::Type, Status> {
    use DataType as D;
    use pb::r#type as t;
    if let Some(normal) = normal_type(dt) {
        if !can_cast_types(dt, &normal) {
            return Err(unsupported(dt));
        }
        return sql_type(&normal);
    }
    Ok(match dt {
        // A column of nothing but NULLs (`SELECT NULL`): any type will do.
        D::Null | D::Utf8 => of(Kind::StringType(t::String { encoding: None })),
        D::Binary => of(Kind::BytesType(t::Bytes { encoding: None })),
        D::Int64 => of(Kind::Int64Type(t::Int64 { encoding: None })),
        D::Float32 => of(Kind::Float32Type(t::Float32 {})),
        D::Float64 => of(Kind::Float64Type(t::Float64 {})),
        D::Boolean => of(Kind::BoolType(t::Bool {})),
        D::Timestamp(_, _) => of(Kind::TimestampType(t::Timestamp { encoding: None })),
        D::Date32 => of(Kind::DateType(t::Date {})),
        D::List(f) => of(Kind::ArrayType(Box::new(t::Array {
            element_type: Some(Box::new(sql_type(f.data_type())?)),
        }))),
        D::Map(entries, _) => {
            let D::Struct(kv) = entries.data_type() else {
                return Err(unsupported(dt));
            };
            let [k, v] = kv.iter().collect::<Vec<_>>()[..] else {
                return Err(unsupported(dt));
            };
            of(Kind::MapType(Box::new(t::Map {
                key_type: Some(Box::new(sql_type(k.data_type())?)),
                value_type: Some(Box::new(sql_type(v.data_type())?)),
            })))
        }
        D::Struct(fields) => of(Kind::StructType(t::Struct {
            fields: fields
                .iter()
                .map(|f| {
                    Ok(t::r#struct::Field {
                        field_name: f.name().clone(),
                        r#type: Some(sql_type(f.data_type())?),
                    })
                })
                .collect::<Result<_, Status>>()?,
            encoding: None,
        })),
        other => return Err(unsupported(other)),
    })
}

fn unsupported(dt: &DataType) -> Status {
    invalid(format!(
        "a result column of type {dt} cannot be returned by ExecuteQuery; CAST it to STRING"
    ))
}

/// The Arrow type parameter `name`, declared as `t`, plans as.
pub fn param_arrow_type(name: &str, t: &pb::Type) -> Result<DataType, Status> {
    use DataType as D;
    Ok(match &t.kind {
        Some(Kind::BytesType(_)) => D::Binary,
        Some(Kind::StringType(_)) => D::Utf8,
        Some(Kind::Int64Type(_)) => D::Int64,
        Some(Kind::Float32Type(_)) => D::Float32,
        Some(Kind::Float64Type(_)) => D::Float64,
        Some(Kind::BoolType(_)) => D::Boolean,
        Some(Kind::TimestampType(_)) => {
            D::Timestamp(TimeUnit::Microsecond, Some(PARAM_TIME_ZONE.into()))
        }
        Some(Kind::DateType(_)) => D::Date32,
        Some(Kind::ArrayType(a)) => {
            let Some(element) = &a.element_type else {
                return Err(invalid(format!(
                    "parameter @{name}: ARRAY type without an element type"
                )));
            };
            if matches!(element.kind, Some(Kind::ArrayType(_))) {
                return Err(invalid(format!(
                    "parameter @{name}: arrays of arrays are not supported"
                )));
            }
            D::List(Field::new_list_field(param_arrow_type(name, element)?, true).into())
        }
        Some(other) => {
            return Err(invalid(format!(
                "parameter @{name}: type {} is not supported as a query parameter",
                kind_name(other)
            )));
        }
        None => {
            return Err(invalid(format!("parameter @{name}: type has no kind set")));
        }
    })
}

/// The name of a type kind, for messages.
pub fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::BytesType(_) => "BYTES",
        Kind::StringType(_) => "STRING",
        Kind::Int64Type(_) => "INT64",
        Kind::Float32Type(_) => "FLOAT32",
        Kind::Float64Type(_) => "FLOAT64",
        Kind::BoolType(_) => "BOOL",
        Kind::TimestampType(_) => "TIMESTAMP",
        Kind::DateType(_) => "DATE",
        Kind::AggregateType(_) => "AGGREGATE",
        Kind::StructType(_) => "STRUCT",
        Kind::ArrayType(_) => "ARRAY",
        Kind::MapType(_) => "MAP",
        Kind::ProtoType(_) => "PROTO",
        Kind::EnumType(_) => "ENUM",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic, reason = "tests")]
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{Fields, IntervalUnit};

    use super::*;

    fn kind(dt: &DataType) -> &'static str {
        match sql_type(dt) {
            Ok(pb::Type { kind: Some(k) }) => kind_name(&k),
            Ok(_) => "none",
            Err(_) => "error",
        }
    }

    #[test]
    fn scalar_columns() {
        use DataType as D;
        let cases = [
            (D::Binary, "BYTES"),
            (D::LargeBinary, "BYTES"),
            (D::FixedSizeBinary(4), "BYTES"),
            (D::Utf8, "STRING"),
            (D::Utf8View, "STRING"),
            (D::Int8, "INT64"),
            (D::UInt64, "INT64"),
            (D::Float16, "FLOAT32"),
            (D::Float32, "FLOAT32"),
            (D::Float64, "FLOAT64"),
            (D::Boolean, "BOOL"),
            (D::Timestamp(TimeUnit::Nanosecond, None), "TIMESTAMP"),
            (D::Date64, "DATE"),
            (D::Decimal128(10, 2), "STRING"),
            (D::Interval(IntervalUnit::MonthDayNano), "STRING"),
            (
                D::Dictionary(Box::new(D::Int32), Box::new(D::Utf8)),
                "STRING",
            ),
        ];
        for (dt, want) in cases {
            assert_eq!(kind(&dt), want, "{dt}");
        }
    }

    #[test]
    fn nested_columns() {
        let map = DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(Fields::from(vec![
                    Field::new("keys", DataType::Binary, false),
                    Field::new("values", DataType::Int64, true),
                ])),
                false,
            )),
            false,
        );
        let Ok(pb::Type {
            kind: Some(Kind::MapType(m)),
        }) = sql_type(&map)
        else {
            panic!("map type expected");
        };
        assert!(matches!(
            m.key_type.as_deref(),
            Some(pb::Type {
                kind: Some(Kind::BytesType(_))
            })
        ));
        assert!(matches!(
            m.value_type.as_deref(),
            Some(pb::Type {
                kind: Some(Kind::Int64Type(_))
            })
        ));
        let list = DataType::LargeList(Arc::new(Field::new_list_field(DataType::Int32, true)));
        assert_eq!(kind(&list), "ARRAY");
        let strukt = DataType::Struct(Fields::from(vec![Field::new("a", DataType::Utf8, true)]));
        assert_eq!(kind(&strukt), "STRUCT");
    }

    #[test]
    fn parameter_types() {
        let bytes = of(Kind::BytesType(pb::r#type::Bytes { encoding: None }));
        assert_eq!(param_arrow_type("k", &bytes).ok(), Some(DataType::Binary));
        let array = of(Kind::ArrayType(Box::new(pb::r#type::Array {
            element_type: Some(Box::new(of(Kind::Int64Type(pb::r#type::Int64 {
                encoding: None,
            })))),
        })));
        assert_eq!(
            param_arrow_type("a", &array).ok(),
            Some(DataType::List(
                Field::new_list_field(DataType::Int64, true).into()
            ))
        );
        let map = of(Kind::MapType(Box::new(pb::r#type::Map {
            key_type: None,
            value_type: None,
        })));
        let err = param_arrow_type("m", &map)
            .err()
            .map(|s| s.message().to_owned());
        assert!(err.is_some_and(|m| m.contains("@m") && m.contains("MAP")));
        assert!(param_arrow_type("n", &pb::Type { kind: None }).is_err());
    }
}
