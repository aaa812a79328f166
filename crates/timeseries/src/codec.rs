//! Bytes of stored values, shared by the patterns.
//!
//! - A typed value ([`encode_value`]): DOUBLE = IEEE-754 bits, BIGINT = two's complement,
//!   TIMESTAMP = nanoseconds, all 8 bytes big-endian (Bigtable's int64 convention, so
//!   `SUM`/casts in SQL read them); BOOLEAN = one byte 0/1; VARCHAR = UTF-8 bytes.
//! - Point metadata cells in family `x` (written only when not the default, so a plain
//!   point costs nothing extra): `x:v` = version (8 bytes BE, default 1), `x:n` =
//!   nanoseconds below the millisecond of the cell timestamp (8 bytes BE, default 0).
//! - The serialized pattern's cell is the protobuf [`PointProto`].
//! - A multi-measure column qualifier of the new-columns pattern is
//!   `varint(len(name)) name value` ([`encode_named_value`]).
//!
//! Byte layout: docs/format.md#time-series-cells

use prost::Message;

use crate::error::{Error, Result};
use std::borrow::Cow;

use crate::model::{MeasureType, Measures, Value};

/// Appends the bytes of `v`.
pub fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Double(d) => out.extend_from_slice(&d.to_bits().to_be_bytes()),
        Value::Bigint(i) | Value::Timestamp(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::Boolean(b) => out.push(u8::from(*b)),
        Value::Varchar(s) => out.extend_from_slice(s.as_bytes()),
    }
}

fn be8(bytes: &[u8], kind: MeasureType) -> Result<[u8; 8]> {
    bytes
        .try_into()
        .map_err(|_| Error::Corrupt(format!("{} value of {} bytes", kind.as_str(), bytes.len())))
}

/// Decodes the bytes of a value of type `kind`.
pub fn decode_value(bytes: &[u8], kind: MeasureType) -> Result<Value> {
    Ok(match kind {
        MeasureType::Double => Value::Double(f64::from_bits(u64::from_be_bytes(be8(bytes, kind)?))),
        MeasureType::Bigint => Value::Bigint(i64::from_be_bytes(be8(bytes, kind)?)),
        MeasureType::Timestamp => Value::Timestamp(i64::from_be_bytes(be8(bytes, kind)?)),
        MeasureType::Boolean => match bytes {
            [0] => Value::Boolean(false),
            [1] => Value::Boolean(true),
            _ => return Err(Error::Corrupt("BOOLEAN value is not one byte 0/1".into())),
        },
        MeasureType::Varchar => Value::Varchar(
            String::from_utf8(bytes.to_vec())
                .map_err(|_| Error::Corrupt("VARCHAR value is not UTF-8".into()))?,
        ),
        MeasureType::Multi => return Err(Error::Corrupt("a MULTI value has no bytes".into())),
    })
}

/// `varint(len(name)) name`: the prefix of every [`encode_named_value`] qualifier of
/// an attribute (a column range selects the attribute).
pub fn named_prefix(name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 10);
    prost::encoding::encode_varint(name.len() as u64, &mut out);
    out.extend_from_slice(name.as_bytes());
    out
}

/// `varint(len(name)) name value`: a qualifier that holds an attribute and its value.
pub fn encode_named_value(name: &str, v: &Value) -> Vec<u8> {
    let mut out = named_prefix(name);
    encode_value(v, &mut out);
    out
}

/// Splits a qualifier of [`encode_named_value`] into the name and the value bytes.
pub fn split_named_value(mut q: &[u8]) -> Result<(&str, &[u8])> {
    let bad = || Error::Corrupt("malformed attribute qualifier".into());
    let len = prost::encoding::decode_varint(&mut q).map_err(|_| bad())? as usize;
    if len > q.len() {
        return Err(bad());
    }
    let (name, value) = q.split_at(len);
    Ok((std::str::from_utf8(name).map_err(|_| bad())?, value))
}

/// The 8 big-endian bytes of a metadata number.
pub fn encode_meta(n: i64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// Reads a metadata number.
pub fn decode_meta(bytes: &[u8]) -> Result<i64> {
    Ok(i64::from_be_bytes(be8(bytes, MeasureType::Bigint)?))
}

/// The serialized pattern's cell: a point's version and values.
#[derive(Clone, PartialEq, Message)]
pub struct PointProto {
    /// Version of the record.
    #[prost(int64, tag = "1")]
    pub version: i64,
    /// Values; one with an empty name for a single-measure record.
    #[prost(message, repeated, tag = "2")]
    pub values: Vec<ValueProto>,
}

/// One value of [`PointProto`].
#[derive(Clone, PartialEq, Message)]
pub struct ValueProto {
    /// Attribute name (empty for single-measure records).
    #[prost(string, tag = "1")]
    pub name: String,
    /// The typed value.
    #[prost(oneof = "Typed", tags = "2, 3, 4, 5, 6")]
    pub typed: Option<Typed>,
}

/// The value of a [`ValueProto`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Typed {
    /// DOUBLE.
    #[prost(double, tag = "2")]
    Double(f64),
    /// BIGINT.
    #[prost(sint64, tag = "3")]
    Bigint(i64),
    /// VARCHAR.
    #[prost(string, tag = "4")]
    Varchar(String),
    /// BOOLEAN.
    #[prost(bool, tag = "5")]
    Boolean(bool),
    /// TIMESTAMP in nanoseconds.
    #[prost(int64, tag = "6")]
    Timestamp(i64),
}

fn from_proto(p: ValueProto) -> Result<(Cow<'static, str>, Value)> {
    let v = match p.typed {
        Some(Typed::Double(d)) => Value::Double(d),
        Some(Typed::Bigint(i)) => Value::Bigint(i),
        Some(Typed::Varchar(s)) => Value::Varchar(s),
        Some(Typed::Boolean(b)) => Value::Boolean(b),
        Some(Typed::Timestamp(t)) => Value::Timestamp(t),
        None => return Err(Error::Corrupt("serialized value without a type".into())),
    };
    Ok((Cow::Owned(p.name), v))
}

/// Serializes a point's version and measures: the bytes of [`PointProto`], written
/// straight from the point (building the message would copy every name).
pub fn encode_point(version: i64, measures: &Measures) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint, int64};
    let mut out = Vec::with_capacity(point_len_hint(measures));
    if version != 0 {
        int64::encode(1, &version, &mut out);
    }
    let mut value = |name: &str, v: &Value| {
        encode_key(2, WireType::LengthDelimited, &mut out);
        encode_varint(value_proto_len(name, v) as u64, &mut out);
        encode_value_proto(name, v, &mut out);
    };
    match measures {
        Measures::Single(v) => value("", v),
        Measures::Multi(vs) => vs.iter().for_each(|(n, v)| value(n, v)),
    }
    out
}

/// Room for a point's bytes: names, values and a few bytes of framing each.
fn point_len_hint(measures: &Measures) -> usize {
    const FRAMING: usize = 16;
    match measures {
        Measures::Single(_) => 2 * FRAMING,
        Measures::Multi(vs) => FRAMING + vs.iter().map(|(n, _)| n.len() + FRAMING).sum::<usize>(),
    }
}

/// Bytes of one [`ValueProto`] body.
fn value_proto_len(name: &str, v: &Value) -> usize {
    use prost::encoding::{
        bool as pbool, double, encoded_len_varint, int64, key_len, sint64, string,
    };
    let name_len = if name.is_empty() {
        0
    } else {
        key_len(1) + encoded_len_varint(name.len() as u64) + name.len()
    };
    name_len
        + match v {
            Value::Double(d) => double::encoded_len(2, d),
            Value::Bigint(i) => sint64::encoded_len(3, i),
            Value::Varchar(s) => string::encoded_len(4, s),
            Value::Boolean(b) => pbool::encoded_len(5, b),
            Value::Timestamp(t) => int64::encoded_len(6, t),
        }
}

/// One [`ValueProto`] body, as prost writes it: the name unless empty, then the
/// value's oneof field (always present).
fn encode_value_proto(name: &str, v: &Value, out: &mut Vec<u8>) {
    use prost::encoding::{
        WireType, bool as pbool, double, encode_key, encode_varint, int64, sint64, string,
    };
    if !name.is_empty() {
        encode_key(1, WireType::LengthDelimited, out);
        encode_varint(name.len() as u64, out);
        out.extend_from_slice(name.as_bytes());
    }
    match v {
        Value::Double(d) => double::encode(2, d, out),
        Value::Bigint(i) => sint64::encode(3, i, out),
        Value::Varchar(s) => string::encode(4, s, out),
        Value::Boolean(b) => pbool::encode(5, b, out),
        Value::Timestamp(t) => int64::encode(6, t, out),
    }
}

/// Decodes a cell of [`encode_point`]; `multi` says which kind of record it holds.
pub fn decode_point(bytes: &[u8], multi: bool) -> Result<(i64, Measures<'static>)> {
    let p =
        PointProto::decode(bytes).map_err(|e| Error::Corrupt(format!("serialized point: {e}")))?;
    let mut values = p
        .values
        .into_iter()
        .map(from_proto)
        .collect::<Result<Vec<_>>>()?;
    let measures = if multi {
        Measures::Multi(values)
    } else {
        match (values.pop(), values.is_empty()) {
            (Some((_, v)), true) => Measures::Single(v),
            _ => {
                return Err(Error::Corrupt(
                    "single-measure point without exactly one value".into(),
                ));
            }
        }
    };
    Ok((p.version, measures))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_values() -> Vec<Value> {
        vec![
            Value::Double(-0.0),
            Value::Double(94587.25),
            Value::Bigint(-7),
            Value::Varchar("héllo".into()),
            Value::Boolean(true),
            Value::Boolean(false),
            Value::Timestamp(1_700_000_000_000_000_001),
        ]
    }

    #[test]
    fn values_round_trip() -> Result<()> {
        for v in all_values() {
            let mut b = Vec::new();
            encode_value(&v, &mut b);
            assert!(decode_value(&b, v.kind())?.same_as(&v), "{v:?}");
            let q = encode_named_value("temp", &v);
            let (name, rest) = split_named_value(&q)?;
            assert_eq!(name, "temp");
            assert!(decode_value(rest, v.kind())?.same_as(&v));
        }
        let mut golden = Vec::new();
        encode_value(&Value::Double(1.0), &mut golden);
        assert_eq!(golden, [0x3f, 0xf0, 0, 0, 0, 0, 0, 0]);
        Ok(())
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        assert!(decode_value(&[1, 2, 3], MeasureType::Double).is_err());
        assert!(decode_value(&[2], MeasureType::Boolean).is_err());
        assert!(decode_value(&[0xff, 0xfe], MeasureType::Varchar).is_err());
        assert!(split_named_value(&[5, b'a']).is_err());
        assert!(split_named_value(&[0x80]).is_err());
        assert!(decode_point(&[0xff, 0xff, 0xff], true).is_err());
        // Fuzz the decoders with pseudo-random bytes: errors are fine, panics are not.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2000usize {
            let bytes: Vec<u8> = (0..len % 40)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let _ = decode_point(&bytes, len % 2 == 0);
            let _ = split_named_value(&bytes);
            let _ = crate::keys::decode(&bytes, len % 3 == 0, len % 5 == 0);
            let _ = crate::keys::decode_series_time(&bytes, len % 3 == 0, len % 5 == 0);
        }
    }

    /// The message [`encode_point`] writes by hand, built the prost way (the oracle).
    fn to_proto(name: &str, v: &Value) -> ValueProto {
        let typed = match v {
            Value::Double(d) => Typed::Double(*d),
            Value::Bigint(i) => Typed::Bigint(*i),
            Value::Varchar(s) => Typed::Varchar(s.clone()),
            Value::Boolean(b) => Typed::Boolean(*b),
            Value::Timestamp(t) => Typed::Timestamp(*t),
        };
        ValueProto {
            name: name.to_string(),
            typed: Some(typed),
        }
    }

    #[test]
    fn points_encode_as_prost_would() {
        let mut measures: Vec<Measures> = all_values().into_iter().map(Measures::Single).collect();
        measures.push(Measures::multi(
            all_values()
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("measure_{i}").repeat(i * 20 + 1), v)),
        ));
        measures.push(Measures::Multi(vec![("".into(), Value::Bigint(0))]));
        measures.push(Measures::Multi(Vec::new()));
        for m in &measures {
            for version in [0, 1, 9, -3, i64::MAX] {
                let values = match m {
                    Measures::Single(v) => vec![to_proto("", v)],
                    Measures::Multi(vs) => vs.iter().map(|(n, v)| to_proto(n, v)).collect(),
                };
                let want = PointProto { version, values }.encode_to_vec();
                assert_eq!(encode_point(version, m), want, "{m:?} version {version}");
            }
        }
    }

    #[test]
    fn points_round_trip() -> Result<()> {
        let multi = Measures::multi(
            all_values()
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("m{i}"), v)),
        );
        let (version, back) = decode_point(&encode_point(9, &multi), true)?;
        assert_eq!(version, 9);
        assert!(back.same_as(&multi));
        let single = Measures::Single(Value::Bigint(42));
        let (version, back) = decode_point(&encode_point(1, &single), false)?;
        assert_eq!((version, back), (1, single));
        Ok(())
    }
}
