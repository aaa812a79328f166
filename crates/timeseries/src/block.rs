//! Blocks: the points of one series over a closed time bucket, in one compressed,
//! columnar cell (the "sealed" form of a bucket). Pure functions; no storage.
//!
//! Encoding a block, step by step:
//! 1. check the points (1..=[`MAX_BLOCK_POINTS`], times strictly increasing, each
//!    point single or MULTI as the block says);
//! 2. give every distinct `(attribute name, type)` a column, in order of first use (a
//!    single-measure block names its columns `""`), and every distinct set of columns
//!    a number;
//! 3. write the header, the dictionary, each point's set, then one section per column:
//!    times, versions, and the values of each attribute, each column with the
//!    cheapest of its transforms ([`ints`], [`floats`], [`columns`]) over one entropy
//!    coder ([`entropy`]).
//!
//! Decoding reads the header ([`decode_block_times`] stops there), the dictionary and
//! the sets, checks the counts against the block's length, then the sections:
//! [`decode_block_columns`] returns typed columns and skips the sections of the
//! attributes it is not asked for; [`decode_block`] turns all of them into points.
//!
//! # Format, version 1 (a contract: decoders of later versions keep reading it)
//!
//! ```text
//! block    = header dictionary presence times versions column* padding
//! header   = u8 format version (1)
//!            u8 flags: bit 0 set when the points are MULTI records; other bits 0
//!            varint n: points, 1..=MAX_BLOCK_POINTS
//!            varint zigzag(first time, ns)
//!            varint last time - first time (ns, as u64)
//! dictionary = varint d: columns
//!            d × (u8 type: 0 DOUBLE, 1 BIGINT, 2 VARCHAR, 3 BOOLEAN, 4 TIMESTAMP;
//!                 varint length; UTF-8 name), distinct pairs, in order of first use;
//!            every name is "" when the points are single values
//! presence = varint s: distinct attribute sets, 1..=n
//!            s × (varint m: the set's columns, then, unless m = d (all of them),
//!                 m × varint: each column number as the gap from the previous one
//!                 plus one (the first: itself), in increasing order); a set of a
//!                 single-value block holds one column
//!            ceil(n × w / 8) bytes: each point's set number, w = bit_len(s - 1) bits
//!                 each, MSB first, zero-padded
//! times    = section: an integer column of the n times minus the first (as u64:
//!            the times strictly increase, the first and last are the header's)
//! versions = section: an integer column of the n versions
//! column   = section, one per dictionary column in order: the values of the points
//!            whose set holds the column, in time order, by type: DOUBLE (floats),
//!            BIGINT and TIMESTAMP (ints), VARCHAR and BOOLEAN (columns)
//! section  = varint length, bytes
//! padding  = zero bytes (the expansion rule)
//! ```
//!
//! Varints are unsigned LEB128; `zigzag(v) = (v << 1) ^ (v >> 63)`. A point's MULTI
//! values decode in dictionary order (the order written, when every point has the same
//! attributes in the same order).
//!
//! Expansion rule: `8 × block length >= n + v + ceil(b / 8)`, where `v` counts the
//! values of all columns and `b` the bytes of the VARCHAR values they decode to. The
//! encoder appends zero bytes to blocks that would be shorter (only near-constant data
//! compresses that well). The decoder checks `n + v` before it allocates anything per
//! point, and `b` string by string, so no block makes it allocate more than a constant
//! factor of the block's own length.

mod bits;
mod columns;
mod entropy;
mod floats;
mod ints;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use bits::{BitReader, BitWriter, ByteReader, bit_len, corrupt, put_section, put_varint};
use columns::Column;

use crate::error::{Error, Result};
use crate::model::{MeasureType, Measures, Value};

/// The format version this module writes (the first byte of a block).
pub const FORMAT_VERSION: u8 = 1;
/// Points per block: a week of points a second (the largest bucket,
/// [`crate::limits::MAX_BUCKET_SECS`], at one point a second) fits, with room.
pub const MAX_BLOCK_POINTS: usize = 1 << 20;
const FLAG_MULTI: u8 = 1;

/// One point of a block.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockPoint {
    /// Nanoseconds since the epoch.
    pub time_ns: i64,
    /// Version of the record.
    pub version: i64,
    /// The value (single-measure series) or values (MULTI series).
    pub measures: Measures,
}

/// The attributes of a point as `(name, value)` pairs; checks the kind of record.
fn attributes(p: &BlockPoint, multi: bool) -> Result<Vec<(&str, &Value)>> {
    match (&p.measures, multi) {
        (Measures::Single(v), false) => Ok(vec![("", v)]),
        (Measures::Multi(vs), true) => Ok(vs.iter().map(|(n, v)| (n.as_str(), v)).collect()),
        _ => Err(Error::invalid(
            "a block holds either single values or MULTI records",
        )),
    }
}

/// Encodes the points of one series (times strictly increasing); `multi` says whether
/// the series holds MULTI records ([`Measures::Multi`]) or single values.
pub fn encode_block(points: &[BlockPoint], multi: bool) -> Result<Vec<u8>> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Err(Error::invalid("a block holds at least one point"));
    };
    if points.len() > MAX_BLOCK_POINTS {
        return Err(Error::invalid("too many points for one block"));
    }
    if points.windows(2).any(|w| w[0].time_ns >= w[1].time_ns) {
        return Err(Error::invalid("block times are not strictly increasing"));
    }

    // Columns, sets and the set of each point.
    let mut dict: Vec<(&str, MeasureType)> = Vec::new();
    let mut dict_index: HashMap<(&str, MeasureType), usize> = HashMap::new();
    let mut cols: Vec<Column> = Vec::new();
    let mut sets: Vec<Vec<usize>> = Vec::new();
    let mut set_index: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut point_sets = Vec::with_capacity(points.len());
    let mut prev: Vec<(&str, MeasureType, usize)> = Vec::new();
    let mut here: Vec<(&str, MeasureType, usize)> = Vec::new();
    let mut set: Vec<usize> = Vec::new();
    for p in points {
        here.clear();
        for (j, (name, v)) in attributes(p, multi)?.into_iter().enumerate() {
            let kind = v.kind();
            let id = match prev.get(j) {
                Some(&(n, k, id)) if n == name && k == kind => id,
                _ => *dict_index.entry((name, kind)).or_insert_with(|| {
                    dict.push((name, kind));
                    cols.push(Column::new(kind));
                    dict.len() - 1
                }),
            };
            cols[id].push(v)?;
            here.push((name, kind, id));
        }
        set.clear();
        set.extend(here.iter().map(|&(_, _, id)| id));
        set.sort_unstable();
        if set.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::invalid("a point names an attribute twice"));
        }
        let id = match point_sets.last() {
            Some(&last) if sets[last] == set => last,
            _ => *set_index.entry(set.clone()).or_insert_with(|| {
                sets.push(set.clone());
                sets.len() - 1
            }),
        };
        point_sets.push(id);
        std::mem::swap(&mut prev, &mut here);
    }

    let mut out = vec![FORMAT_VERSION, if multi { FLAG_MULTI } else { 0 }];
    put_varint(&mut out, points.len() as u64);
    put_varint(&mut out, bits::zigzag(first.time_ns));
    put_varint(&mut out, last.time_ns.wrapping_sub(first.time_ns) as u64);
    put_varint(&mut out, dict.len() as u64);
    for (name, kind) in &dict {
        out.push(columns::type_code(*kind));
        put_varint(&mut out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
    }
    put_varint(&mut out, sets.len() as u64);
    for set in &sets {
        put_varint(&mut out, set.len() as u64);
        if set.len() < dict.len() {
            let mut next = 0;
            for &c in set {
                put_varint(&mut out, (c - next) as u64);
                next = c + 1;
            }
        }
    }
    let width = bit_len(sets.len() as u64 - 1);
    let mut w = BitWriter::new(out);
    for &s in &point_sets {
        w.write(s as u64, width);
    }
    let mut out = w.finish();

    let mut section = Vec::new();
    let times: Vec<i64> = points
        .iter()
        .map(|p| p.time_ns.wrapping_sub(first.time_ns))
        .collect();
    ints::encode(&times, &mut section);
    put_section(&mut out, &section);
    section.clear();
    let versions: Vec<i64> = points.iter().map(|p| p.version).collect();
    ints::encode(&versions, &mut section);
    put_section(&mut out, &section);
    let mut string_bytes = 0u64;
    for col in &cols {
        section.clear();
        col.encode(&mut section);
        put_section(&mut out, &section);
        string_bytes += col.string_bytes();
    }
    let values: u64 = point_sets.iter().map(|&s| sets[s].len() as u64).sum();
    let needed_bits = points.len() as u64 + values + string_bytes.div_ceil(8);
    let needed_len = needed_bits.div_ceil(8) as usize;
    if out.len() < needed_len {
        out.resize(needed_len, 0);
    }
    Ok(out)
}

/// The header of a block: `(first time, last time, number of points)`, without
/// decoding anything else.
pub fn decode_block_times(bytes: &[u8]) -> Result<(i64, i64, usize)> {
    let mut r = ByteReader::new(bytes);
    header(&mut r).map(|h| (h.first_ns, h.last_ns, h.n))
}

struct Header {
    multi: bool,
    n: usize,
    first_ns: i64,
    last_ns: i64,
}

fn header(r: &mut ByteReader<'_>) -> Result<Header> {
    let version = r.u8()?;
    if version != FORMAT_VERSION {
        return Err(corrupt(&format!("unknown format version {version}")));
    }
    let flags = r.u8()?;
    if flags & !FLAG_MULTI != 0 {
        return Err(corrupt("unknown flags"));
    }
    let n = r.count(MAX_BLOCK_POINTS, "too many points")?;
    if n == 0 {
        return Err(corrupt("no points"));
    }
    let first_ns = r.zigzag()?;
    let span = r.varint()?;
    if n == 1 && span != 0 {
        return Err(corrupt("one point spans time"));
    }
    Ok(Header {
        multi: flags & FLAG_MULTI != 0,
        n,
        first_ns,
        last_ns: first_ns.wrapping_add(span as i64),
    })
}

/// A decoded block, column by column: what a columnar reader wants (each attribute's
/// name once, typed arrays, and only the attributes it asked for).
#[derive(Debug, Clone, PartialEq)]
pub struct BlockColumns {
    /// The times of the points, strictly increasing.
    pub times_ns: Vec<i64>,
    /// The versions of the points.
    pub versions: Vec<i64>,
    /// The kept columns, in dictionary order.
    pub columns: Vec<BlockColumn>,
}

/// One attribute (one value type, in a single-value block) of a [`BlockColumns`].
#[derive(Debug, Clone, PartialEq)]
pub struct BlockColumn {
    /// The attribute name (`""` in a single-value block).
    pub name: String,
    /// The points that have a value, as indexes into [`BlockColumns::times_ns`];
    /// `None` when all have one.
    pub points: Option<Vec<u32>>,
    /// The values, in time order.
    pub values: ColumnValues,
}

/// The values of a [`BlockColumn`].
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    /// DOUBLE.
    Double(Vec<f64>),
    /// BIGINT.
    Bigint(Vec<i64>),
    /// VARCHAR.
    Varchar(Vec<String>),
    /// BOOLEAN.
    Boolean(Vec<bool>),
    /// TIMESTAMP.
    Timestamp(Vec<i64>),
}

impl ColumnValues {
    /// The type of the values.
    pub fn kind(&self) -> MeasureType {
        match self {
            Self::Double(_) => MeasureType::Double,
            Self::Bigint(_) => MeasureType::Bigint,
            Self::Varchar(_) => MeasureType::Varchar,
            Self::Boolean(_) => MeasureType::Boolean,
            Self::Timestamp(_) => MeasureType::Timestamp,
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::Double(v) => v.len(),
            Self::Bigint(v) | Self::Timestamp(v) => v.len(),
            Self::Varchar(v) => v.len(),
            Self::Boolean(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values one by one.
    pub fn into_values(self) -> Box<dyn Iterator<Item = Value>> {
        match self {
            Self::Double(v) => Box::new(v.into_iter().map(Value::Double)),
            Self::Bigint(v) => Box::new(v.into_iter().map(Value::Bigint)),
            Self::Varchar(v) => Box::new(v.into_iter().map(Value::Varchar)),
            Self::Boolean(v) => Box::new(v.into_iter().map(Value::Boolean)),
            Self::Timestamp(v) => Box::new(v.into_iter().map(Value::Timestamp)),
        }
    }
}

/// Decodes a block of [`encode_block`] point by point; `multi` must be what it was
/// encoded with. Corrupt bytes give [`Error::Corrupt`].
pub fn decode_block(bytes: &[u8], multi: bool) -> Result<Vec<BlockPoint>> {
    let (columns, point_sets, sets) = decode_parts(bytes, multi, &|_| true)?;
    let (names, mut values): (Vec<String>, Vec<_>) = columns
        .columns
        .into_iter()
        .map(|c| (c.name, c.values.into_values()))
        .unzip();
    let mut out = Vec::with_capacity(columns.times_ns.len());
    let points = columns.times_ns.into_iter().zip(columns.versions);
    for ((time_ns, version), set) in points.zip(point_sets) {
        let set = &sets[set];
        let mut next = |c: usize| {
            values[c]
                .next()
                .ok_or_else(|| corrupt("column shorter than its attribute sets"))
        };
        let measures = if multi {
            let mut vs = Vec::with_capacity(set.len());
            for &c in set {
                vs.push((names[c].clone(), next(c)?));
            }
            Measures::Multi(vs)
        } else {
            Measures::Single(next(set[0])?)
        };
        out.push(BlockPoint {
            time_ns,
            version,
            measures,
        });
    }
    Ok(out)
}

/// Decodes a block column by column, only the attributes whose names `keep` accepts
/// (the others are skipped without decoding); `multi` must be what it was encoded with.
pub fn decode_block_columns(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
) -> Result<BlockColumns> {
    decode_parts(bytes, multi, keep).map(|(columns, _, _)| columns)
}

/// The kept columns, each point's set number, and the sets (as column numbers among
/// all columns; decode_block keeps them all, so they index `columns` too).
type Parts = (BlockColumns, Vec<usize>, Vec<Vec<usize>>);

fn decode_parts(bytes: &[u8], multi: bool, keep: &dyn Fn(&str) -> bool) -> Result<Parts> {
    let mut r = ByteReader::new(bytes);
    let h = header(&mut r)?;
    if h.multi != multi {
        return Err(corrupt("single/MULTI kind differs from the series'"));
    }
    let n = h.n;
    // Every point costs at least a bit of the block (the expansion rule), so `n` is
    // checked here, before anything is allocated per point.
    if n as u64 > bytes.len() as u64 * 8 {
        return Err(corrupt("more points than the block can justify"));
    }

    let d = r.count(r.remaining() / 2, "more columns than bytes")?;
    let mut dict: Vec<(String, MeasureType)> = Vec::with_capacity(d);
    let mut seen = HashSet::with_capacity(d);
    for _ in 0..d {
        let kind = columns::type_of(r.u8()?)?;
        let len = r.count(r.remaining(), "column name longer than the block")?;
        let name =
            std::str::from_utf8(r.take(len)?).map_err(|_| corrupt("column name is not UTF-8"))?;
        if !multi && !name.is_empty() {
            return Err(corrupt("named column in a single-value block"));
        }
        if !seen.insert((name, kind)) {
            return Err(corrupt("column named twice"));
        }
        dict.push((name.to_string(), kind));
    }

    let s = r.count(n, "more attribute sets than points")?;
    if s == 0 {
        return Err(corrupt("no attribute sets"));
    }
    // Every set costs a byte, so `s` is bounded by the bytes before anything is
    // allocated per set.
    if s > r.remaining() {
        return Err(corrupt("attribute sets truncated"));
    }
    let mut sets: Vec<Vec<usize>> = Vec::with_capacity(s);
    // The encoder only writes sets that points use, so their members are values, which
    // the expansion rule bounds (a set of all columns costs one varint).
    let mut members = 0u64;
    for _ in 0..s {
        let m = r.count(d, "attribute set larger than the columns")?;
        members += m as u64;
        if members > bytes.len() as u64 * 8 {
            return Err(corrupt("attribute sets larger than the block can justify"));
        }
        let mut set = Vec::with_capacity(m);
        if m == d {
            set.extend(0..d);
        }
        let mut next = 0u64;
        for _ in 0..m - set.len() {
            let c = next.saturating_add(r.varint()?);
            if c >= d as u64 {
                return Err(corrupt("attribute set names a missing column"));
            }
            set.push(c as usize);
            next = c + 1;
        }
        if !multi && set.len() != 1 {
            return Err(corrupt("single-value point without exactly one value"));
        }
        sets.push(set);
    }
    let width = bit_len(s as u64 - 1);
    let index_bytes = r.take((n * width as usize).div_ceil(8))?;
    let mut bits = BitReader::new(index_bytes);
    let mut point_sets = Vec::with_capacity(n);
    let mut set_points = vec![0u64; s];
    for _ in 0..n {
        let set = bits.read(width) as usize;
        *set_points
            .get_mut(set)
            .ok_or_else(|| corrupt("attribute set number out of range"))? += 1;
        point_sets.push(set);
    }
    let mut col_values = vec![0u64; d];
    let mut values = 0u64;
    for (set, &points) in sets.iter().zip(&set_points) {
        for &c in set {
            col_values[c] += points;
        }
        values += points * set.len() as u64;
    }
    let budget_bits = bytes.len() as u64 * 8;
    let Some(spare_bits) = budget_bits.checked_sub(n as u64 + values) else {
        return Err(corrupt("more values than the block can justify"));
    };
    let mut string_budget = spare_bits.saturating_mul(8);

    let mut times_ns = ints::decode(r.section()?, n)?;
    for t in &mut times_ns {
        *t = t.wrapping_add(h.first_ns);
    }
    let increasing = times_ns.windows(2).all(|w| w[0] < w[1]);
    if !increasing || times_ns.first() != Some(&h.first_ns) || times_ns.last() != Some(&h.last_ns) {
        return Err(corrupt("times disagree with the header"));
    }
    let versions = ints::decode(r.section()?, n)?;
    let mut kept = Vec::with_capacity(d);
    // Point indexes of the kept columns that some points lack, in one pass over the
    // values (a pass per column would be quadratic in a wide, sparse block).
    let mut sparse: Vec<Option<Vec<u32>>> = vec![None; d];
    for (c, (name, kind)) in dict.into_iter().enumerate() {
        let section = r.section()?;
        if !keep(&name) {
            continue;
        }
        let count = col_values[c] as usize;
        let values = columns::decode(section, kind, count, &mut string_budget)?;
        if count != n {
            sparse[c] = Some(Vec::with_capacity(count));
        }
        kept.push((c, name, values));
    }
    if r.rest().iter().any(|&b| b != 0) {
        return Err(corrupt("trailing bytes"));
    }
    if sparse.iter().any(Option::is_some) {
        for (p, &set) in point_sets.iter().enumerate() {
            for &c in &sets[set] {
                if let Some(points) = &mut sparse[c] {
                    points.push(p as u32);
                }
            }
        }
    }
    let kept = kept
        .into_iter()
        .map(|(c, name, values)| BlockColumn {
            name,
            points: sparse[c].take(),
            values,
        })
        .collect();
    let columns = BlockColumns {
        times_ns,
        versions,
        columns: kept,
    };
    Ok((columns, point_sets, sets))
}
