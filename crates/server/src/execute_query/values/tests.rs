#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BinaryArray, BinaryBuilder, Date32Array, Decimal128Array, Int32Array, Int64Builder,
    ListArray, MapBuilder, StringArray, StructArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{Field, Int32Type};

use super::*;

fn kinds(column: &dyn Array) -> Vec<Option<Kind>> {
    match column_values(column) {
        Ok(values) => values.into_iter().map(|v| v.kind).collect(),
        Err(e) => panic!("conversion failed: {e}"),
    }
}

fn bytes(b: &[u8]) -> Option<Kind> {
    Some(Kind::BytesValue(bytes::Bytes::copy_from_slice(b)))
}

fn pair(k: Option<Kind>, v: Option<Kind>) -> pb::Value {
    array_value(vec![value(k), value(v)])
}

#[test]
fn scalars_and_nulls() {
    let b = BinaryArray::from(vec![Some(&b"a"[..]), None]);
    assert_eq!(kinds(&b), vec![bytes(b"a"), None]);
    let s = StringArray::from(vec![None, Some("x")]);
    assert_eq!(kinds(&s), vec![None, Some(Kind::StringValue("x".into()))]);
    // Narrow integers widen to INT64.
    let i = Int32Array::from(vec![Some(-7), None]);
    assert_eq!(kinds(&i), vec![Some(Kind::IntValue(-7)), None]);
    // Decimals are sent as their text.
    let d = Decimal128Array::from(vec![Some(123)]).with_precision_and_scale(5, 2);
    let d = d.unwrap();
    assert_eq!(kinds(&d), vec![Some(Kind::StringValue("1.23".into()))]);
}

#[test]
fn timestamps_before_the_epoch_round_down() {
    let t = TimestampMicrosecondArray::from(vec![Some(-1), Some(1_500_000)]).with_timezone("UTC");
    assert_eq!(
        kinds(&t),
        vec![
            Some(Kind::TimestampValue(prost_types::Timestamp {
                seconds: -1,
                nanos: 999_999_000
            })),
            Some(Kind::TimestampValue(prost_types::Timestamp {
                seconds: 1,
                nanos: 500_000_000
            })),
        ]
    );
}

#[test]
fn dates() {
    let d = Date32Array::from(vec![0, -1, 19_782]);
    let want = [(1970, 1, 1), (1969, 12, 31), (2024, 2, 29)];
    let got = kinds(&d);
    for (g, (year, month, day)) in got.into_iter().zip(want) {
        assert_eq!(g, Some(Kind::DateValue(Date { year, month, day })));
    }
    for days in -800_000..800_000 {
        assert_eq!(days_of_date(&date_of_days(days)), Some(days));
    }
    let feb30 = Date {
        year: 2023,
        month: 2,
        day: 30,
    };
    assert_eq!(days_of_date(&feb30), None);
}

#[test]
fn maps_are_arrays_of_pairs() {
    let mut m = MapBuilder::new(None, BinaryBuilder::new(), Int64Builder::new());
    m.keys().append_value(b"a");
    m.values().append_value(1);
    m.keys().append_value(b"b");
    m.values().append_null();
    m.append(true).unwrap();
    m.append(false).unwrap();
    m.append(true).unwrap();
    let got = column_values(&m.finish()).unwrap();
    assert_eq!(
        got,
        vec![
            array_value(vec![
                pair(bytes(b"a"), Some(Kind::IntValue(1))),
                pair(bytes(b"b"), None),
            ]),
            value(None),
            array_value(vec![]),
        ]
    );
}

#[test]
fn lists_and_structs() {
    let list =
        ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), None]), None]);
    assert_eq!(
        column_values(&list).unwrap(),
        vec![
            array_value(vec![value(Some(Kind::IntValue(1))), value(None)]),
            value(None),
        ]
    );
    // A slice starts at a later offset.
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1)]),
        Some(vec![Some(2), Some(3)]),
        Some(vec![]),
    ]);
    assert_eq!(
        column_values(&list.slice(1, 2)).unwrap(),
        vec![
            array_value(vec![
                value(Some(Kind::IntValue(2))),
                value(Some(Kind::IntValue(3)))
            ]),
            array_value(vec![]),
        ]
    );
    let strukt = StructArray::from(vec![
        (
            Arc::new(Field::new("s", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("n", DataType::Int32, true)),
            Arc::new(Int32Array::from(vec![5])) as ArrayRef,
        ),
    ]);
    assert_eq!(
        column_values(&strukt).unwrap(),
        vec![array_value(vec![
            value(Some(Kind::StringValue("x".into()))),
            value(Some(Kind::IntValue(5))),
        ])]
    );
}

fn ty(kind: TypeKind) -> pb::Type {
    pb::Type { kind: Some(kind) }
}

fn bytes_type() -> pb::Type {
    ty(TypeKind::BytesType(pb::r#type::Bytes { encoding: None }))
}

#[test]
fn parameters() {
    let v = |kind| pb::Value {
        r#type: None,
        kind: Some(kind),
    };
    let b = param_value("k", &v(Kind::BytesValue("x".into())), &bytes_type());
    assert_eq!(b.ok(), Some(ScalarValue::Binary(Some(b"x".to_vec()))));
    // A value of another type than declared is refused, naming the parameter.
    let wrong = param_value("k", &v(Kind::IntValue(1)), &bytes_type());
    assert!(wrong.is_err_and(|s| s.message().contains("@k") && s.message().contains("BYTES")));
    // No kind: a NULL of the declared type.
    let null = param_value("k", &pb::Value::default(), &bytes_type());
    assert_eq!(null.ok(), Some(ScalarValue::Binary(None)));
    let ts_type = ty(TypeKind::TimestampType(pb::r#type::Timestamp {
        encoding: None,
    }));
    let ts = prost_types::Timestamp {
        seconds: 2,
        nanos: 3_000,
    };
    assert_eq!(
        param_value("t", &v(Kind::TimestampValue(ts)), &ts_type).ok(),
        Some(ScalarValue::TimestampMicrosecond(
            Some(2_000_003),
            Some("UTC".into())
        ))
    );
    let date_type = ty(TypeKind::DateType(pb::r#type::Date {}));
    let bad = Date {
        year: 2023,
        month: 13,
        day: 1,
    };
    assert!(param_value("d", &v(Kind::DateValue(bad)), &date_type).is_err());
    let array_type = ty(TypeKind::ArrayType(Box::new(pb::r#type::Array {
        element_type: Some(Box::new(bytes_type())),
    })));
    let elements = pb::ArrayValue {
        values: vec![v(Kind::BytesValue("a".into())), pb::Value::default()],
    };
    let got = param_value("a", &v(Kind::ArrayValue(elements)), &array_type);
    let want = ScalarValue::List(ScalarValue::new_list(
        &[
            ScalarValue::Binary(Some(b"a".to_vec())),
            ScalarValue::Binary(None),
        ],
        &DataType::Binary,
        true,
    ));
    assert_eq!(got.ok(), Some(want));
}
