//! A value column of one type: dispatch to [`super::floats`] and [`super::ints`], and
//! the VARCHAR and BOOLEAN codecs.
//!
//! ```text
//! VARCHAR  u8 mode, the smaller of:
//!   0 PLAIN  n × (varint length, UTF-8 bytes)
//!   1 DICT   varint m (1..=n) distinct strings in order of first use,
//!            m × (varint length, UTF-8 bytes), then n indexes into them of
//!            bit_len(m - 1) bits each, MSB first, zero-padded
//! BOOLEAN  u8 mode: 0 all false, 1 all true, 2 n bits MSB first (1 = true), zero-padded
//! ```
//!
//! Byte layout: docs/format.md#block-format

use std::collections::HashMap;

use super::bits::{BitReader, BitWriter, ByteReader, bit_len, corrupt, put_varint, varint_len};
use super::{ColumnValues, floats, ints};
use crate::error::{Error, Result};
use crate::model::{MeasureType, Value};

const PLAIN: u8 = 0;
const DICT: u8 = 1;
const ALL_FALSE: u8 = 0;
const ALL_TRUE: u8 = 1;
const BITS: u8 = 2;

/// The type byte of a dictionary entry.
pub(super) fn type_code(kind: MeasureType) -> u8 {
    match kind {
        MeasureType::Double => 0,
        MeasureType::Bigint => 1,
        MeasureType::Varchar => 2,
        MeasureType::Boolean => 3,
        MeasureType::Timestamp => 4,
        MeasureType::Multi => 5,
    }
}

/// The type of a dictionary entry's type byte (never MULTI).
pub(super) fn type_of(code: u8) -> Result<MeasureType> {
    Ok(match code {
        0 => MeasureType::Double,
        1 => MeasureType::Bigint,
        2 => MeasureType::Varchar,
        3 => MeasureType::Boolean,
        4 => MeasureType::Timestamp,
        _ => return Err(corrupt("unknown column type")),
    })
}

/// The values of one column, gathered for encoding.
#[derive(Debug)]
pub(super) enum Column<'a> {
    /// DOUBLE.
    Double(Vec<f64>),
    /// BIGINT or TIMESTAMP.
    Int(Vec<i64>),
    /// VARCHAR.
    Varchar(Vec<&'a str>),
    /// BOOLEAN.
    Boolean(Vec<bool>),
}

impl<'a> Column<'a> {
    /// An empty column for values of `kind`.
    pub(super) fn new(kind: MeasureType) -> Self {
        match kind {
            MeasureType::Double => Self::Double(Vec::new()),
            MeasureType::Varchar => Self::Varchar(Vec::new()),
            MeasureType::Boolean => Self::Boolean(Vec::new()),
            _ => Self::Int(Vec::new()),
        }
    }

    /// Appends a value of the column's type.
    pub(super) fn push(&mut self, v: &'a Value) -> Result<()> {
        match (self, v) {
            (Self::Double(c), Value::Double(x)) => c.push(*x),
            (Self::Int(c), Value::Bigint(x) | Value::Timestamp(x)) => c.push(*x),
            (Self::Varchar(c), Value::Varchar(s)) => c.push(s),
            (Self::Boolean(c), Value::Boolean(b)) => c.push(*b),
            _ => return Err(Error::invalid("block column of mixed types")),
        }
        Ok(())
    }

    /// Bytes of the strings the column decodes to.
    pub(super) fn string_bytes(&self) -> u64 {
        match self {
            Self::Varchar(c) => c.iter().map(|s| s.len() as u64).sum(),
            _ => 0,
        }
    }

    /// Appends the encoded column.
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Double(c) => floats::encode(c, out),
            Self::Int(c) => ints::encode(c, out),
            Self::Varchar(c) => encode_varchar(c, out),
            Self::Boolean(c) => encode_boolean(c, out),
        }
    }
}

/// Decodes a column of `n` values of `kind`; `string_budget` is how many string bytes
/// the block may still materialize (see the expansion rule of the block format).
pub(super) fn decode(
    section: &[u8],
    kind: MeasureType,
    n: usize,
    string_budget: &mut u64,
) -> Result<ColumnValues> {
    Ok(match kind {
        MeasureType::Double => ColumnValues::Double(floats::decode(section, n)?),
        MeasureType::Bigint => ColumnValues::Bigint(ints::decode(section, n)?),
        MeasureType::Timestamp => ColumnValues::Timestamp(ints::decode(section, n)?),
        MeasureType::Varchar => ColumnValues::Varchar(decode_varchar(section, n, string_budget)?),
        MeasureType::Boolean => ColumnValues::Boolean(decode_boolean(section, n)?),
        MeasureType::Multi => return Err(corrupt("MULTI column")),
    })
}

fn encode_varchar(values: &[&str], out: &mut Vec<u8>) {
    let plain: u64 = values
        .iter()
        .map(|s| varint_len(s.len() as u64) + s.len() as u64)
        .sum();
    let mut index: HashMap<&str, u64> = HashMap::new();
    let mut distinct = Vec::new();
    for s in values {
        index.entry(s).or_insert_with(|| {
            distinct.push(*s);
            distinct.len() as u64 - 1
        });
    }
    let width = bit_len(distinct.len() as u64 - 1);
    let dict: u64 = varint_len(distinct.len() as u64)
        + distinct
            .iter()
            .map(|s| varint_len(s.len() as u64) + s.len() as u64)
            .sum::<u64>()
        + (values.len() as u64 * u64::from(width)).div_ceil(8);
    if plain <= dict {
        out.push(PLAIN);
        for s in values {
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        return;
    }
    out.push(DICT);
    put_varint(out, distinct.len() as u64);
    for s in &distinct {
        put_varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
    let mut bits = BitWriter::new(std::mem::take(out));
    for s in values {
        bits.write(index.get(s).copied().unwrap_or(0), width);
    }
    *out = bits.finish();
}

fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| corrupt("VARCHAR value is not UTF-8"))
}

fn materialize(s: &str, budget: &mut u64) -> Result<String> {
    *budget = budget
        .checked_sub(s.len() as u64)
        .ok_or_else(|| corrupt("strings larger than the block can justify"))?;
    Ok(s.to_string())
}

fn decode_varchar(section: &[u8], n: usize, budget: &mut u64) -> Result<Vec<String>> {
    let mut r = ByteReader::new(section);
    let mut out = Vec::with_capacity(n);
    match r.u8()? {
        PLAIN => {
            for _ in 0..n {
                let len = r.count(r.remaining(), "VARCHAR longer than its column")?;
                out.push(materialize(utf8(r.take(len)?)?, budget)?);
            }
        }
        DICT => {
            let m = r.count(n.min(r.remaining()), "VARCHAR dictionary too large")?;
            let mut distinct = Vec::with_capacity(m);
            for _ in 0..m {
                let len = r.count(r.remaining(), "VARCHAR longer than its column")?;
                distinct.push(utf8(r.take(len)?)?);
            }
            let width = bit_len((m as u64).saturating_sub(1));
            let mut bits = BitReader::new(r.rest());
            for _ in 0..n {
                let s = distinct
                    .get(bits.read(width) as usize)
                    .ok_or_else(|| corrupt("VARCHAR index out of range"))?;
                out.push(materialize(s, budget)?);
            }
            bits.check()?;
        }
        _ => return Err(corrupt("unknown VARCHAR mode")),
    }
    Ok(out)
}

fn encode_boolean(values: &[bool], out: &mut Vec<u8>) {
    if values.iter().all(|&b| !b) {
        out.push(ALL_FALSE);
    } else if values.iter().all(|&b| b) {
        out.push(ALL_TRUE);
    } else {
        out.push(BITS);
        let mut bits = BitWriter::new(std::mem::take(out));
        for &b in values {
            bits.write(u64::from(b), 1);
        }
        *out = bits.finish();
    }
}

fn decode_boolean(section: &[u8], n: usize) -> Result<Vec<bool>> {
    let mut r = ByteReader::new(section);
    Ok(match r.u8()? {
        ALL_FALSE => vec![false; n],
        ALL_TRUE => vec![true; n],
        BITS => {
            let mut bits = BitReader::new(r.rest());
            let out = (0..n).map(|_| bits.read(1) == 1).collect();
            bits.check()?;
            out
        }
        _ => return Err(corrupt("unknown BOOLEAN mode")),
    })
}
