//! Blocks: the points of one series over a closed time bucket, in one compressed,
//! columnar cell (the "sealed" form of a bucket). Pure functions; no storage.
//!
//! Encoding a block ([`encode_block`]), step by step:
//! 1. check the points (1..=[`MAX_BLOCK_POINTS`], times strictly increasing, each
//!    point single or MULTI as the block says);
//! 2. give every distinct `(attribute name, type)` a column, in order of first use (a
//!    single-value block names its columns `""`), and every distinct set of columns a
//!    number;
//! 3. write the header, the dictionary, each point's set, then one section per column:
//!    the times, the versions, and the values of each attribute, each column in the
//!    cheapest of its transforms, all over one entropy coder (the residual stream).
//!
//! Decoding reads the header ([`decode_block_times`] stops there), the dictionary and
//! the sets, checks the counts against the block's length, then the sections:
//! [`decode_block_columns`] returns typed columns and skips the sections of the
//! attributes it is not asked for; [`decode_block`] turns all of them into points.
//!
//! Measured (the tests of `block/tests/measure.rs`): an hour of TSBS `cpu-only` (360
//! readings of ten full-precision random walks) takes 6.31 bytes a value (Gorilla's
//! XOR: 6.94); an hour of the weather balloon of Google's "Schema design for time
//! series data" for Bigtable (60 readings of four integers or one-decimal values) 1.36
//! bytes a value as MULTI records, 1.68 as single values.
//!
//! # Format, version 1
//!
//! Byte layout: docs/format.md#block-format (with a worked example and every check the
//! decoder makes). The grammar below is what this module implements.
//!
//! A contract: decoders of later versions keep reading it. Varints are unsigned
//! LEB128; `zigzag(v) = (v << 1) ^ (v >> 63)`; `bit_len(x)` is 0 for 0, else the
//! position of the highest set bit plus one; all integer arithmetic wraps modulo 2^64;
//! bits are packed MSB first and the last byte of a bit field is zero-padded.
//!
//! ```text
//! block      = header dictionary presence times versions column* padding
//! header     = u8 format version (1)
//!              u8 flags: bit 0 set when the points are MULTI records; other bits 0
//!              varint n: points, 1..=MAX_BLOCK_POINTS
//!              varint zigzag(first time, ns)
//!              varint last time - first time
//! dictionary = varint d: columns
//!              d × (u8 type: 0 DOUBLE, 1 BIGINT, 2 VARCHAR, 3 BOOLEAN, 4 TIMESTAMP;
//!                   varint length; UTF-8 name): distinct pairs, in order of first
//!              use; every name is "" when the points are single values
//! presence   = varint s: distinct attribute sets, 1..=n
//!              s × (varint m: the set's columns; unless m = d (all of them),
//!                   m × varint: the columns c[0] < c[1] < … in increasing order,
//!                   each as c[j] - (c[j-1] + 1) (the first: c[0] itself));
//!                   a set of a single-value block holds one column
//!              ceil(n × w / 8) bytes: each point's set, w = bit_len(s - 1) bits each
//! times      = section: ints of the n times minus the first (strictly increasing;
//!              the first and last are the header's)
//! versions   = section: ints of the n versions
//! column     = section, one per dictionary column in order: the values of the points
//!              whose set holds the column, in time order, as doubles (DOUBLE), ints
//!              (BIGINT, TIMESTAMP), strings (VARCHAR) or booleans (BOOLEAN)
//! section    = varint length, then that many bytes
//! padding    = zero bytes (the expansion rule)
//!
//! ints       = u8 transform, its header, a stream of residuals:
//!              0 FOR    zigzag varint b (the minimum);  r[i] = v[i] - b, i in 0..n
//!              1 DELTA  zigzag varint v[0];  r[i] = zigzag(v[i] - v[i-1]), i in 1..n
//!              2 DOD    zigzag varint v[0]; if n >= 2 zigzag varint v[1] - v[0];
//!                       r[i] = zigzag(v[i] - 2 v[i-1] + v[i-2]), i in 2..n
//! doubles    = u8 transform:
//!              0 DECIMAL  u8 e (0..=22), ints of m[i]; v[i] = m[i] as f64 / 10^e
//!              1 DELTA    u8 k (0..=52), u64 big-endian bits of v[0], a stream of
//!                         r[i] = zigzag(o[i] - o[i-1]), i in 1..n, where
//!                         o[i] = order(bits(v[i])) >> k and order(b) = b | 1 << 63
//!                         when the sign bit of b is 0, !b when it is 1
//! strings    = u8 mode:
//!              0 PLAIN  n × (varint length, UTF-8 bytes)
//!              1 DICT   varint m (1..=n), m × (varint length, UTF-8 bytes), then n
//!                       indexes of bit_len(m - 1) bits
//! booleans   = u8 mode: 0 all false, 1 all true, 2 n bits (1 = true)
//! stream     = nothing when there are no residuals; else
//!              u8 lo, u8 c (1..=65 - lo): the widths lo..lo+c may occur;
//!              if c >= 2: ceil(c / 2) bytes of 4-bit code lengths (1..=8, 0 =
//!                  absent), high nibble first, forming a complete prefix code;
//!              bits: the codes of the widths of the groups, then the residuals of
//!                  each group in its width; a group is 4 residuals (the last may
//!                  be fewer), its width the largest bit_len among them; when c = 1
//!                  every width is lo and its code is empty
//! ```
//!
//! Codes are canonical: ordered by length, then by width, each code the previous one
//! plus one, shifted left when the length grows (DEFLATE's rule).
//!
//! Expansion rule: `8 × block length >= n + v + ceil(b / 8)`, where `v` counts the
//! values of all columns and `b` the bytes of the VARCHAR values they decode to. The
//! encoder appends zero bytes to blocks that would be shorter (only near-constant data
//! compresses that well). The decoder checks `n + v` before it allocates anything per
//! point, and `b` string by string, so no block makes it allocate more than a constant
//! factor of the block's own length.

mod bits;
mod columns;
mod decode;
mod encode;
mod entropy;
mod floats;
mod ints;
mod summary;
#[cfg(test)]
mod tests;

pub use summary::{BlockSummary, ColumnSummary, SUMMARY_VERSION, Stats};

use crate::error::Result;
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
    pub measures: Measures<'static>,
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

    /// The `i`th value.
    pub fn get(&self, i: usize) -> Option<Value> {
        match self {
            Self::Double(v) => v.get(i).map(|&x| Value::Double(x)),
            Self::Bigint(v) => v.get(i).map(|&x| Value::Bigint(x)),
            Self::Varchar(v) => v.get(i).map(|x| Value::Varchar(x.clone())),
            Self::Boolean(v) => v.get(i).map(|&x| Value::Boolean(x)),
            Self::Timestamp(v) => v.get(i).map(|&x| Value::Timestamp(x)),
        }
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

/// Encodes the points of one series (times strictly increasing); `multi` says whether
/// the series holds MULTI records ([`Measures::Multi`]) or single values. Fails
/// (`Validation`) on no points, more than [`MAX_BLOCK_POINTS`], times out of order,
/// a point of the other kind, or a point that names an attribute twice with one type.
pub fn encode_block(points: &[BlockPoint], multi: bool) -> Result<Vec<u8>> {
    encode::encode_block(points, multi)
}

/// Decodes a block of [`encode_block`] point by point; `multi` must be what it was
/// encoded with. Corrupt bytes give [`crate::Error::Corrupt`], never a panic, and never
/// an allocation larger than a constant factor of `bytes.len()`.
pub fn decode_block(bytes: &[u8], multi: bool) -> Result<Vec<BlockPoint>> {
    decode::decode_block(bytes, multi, &|_| true)
}

/// [`decode_block`] with only the attributes of a multi-measure block whose names
/// `keep` accepts (the others are skipped without decoding; a point with none of them
/// has no values).
pub fn decode_block_keeping(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<BlockPoint>> {
    decode::decode_block(bytes, multi, keep)
}

/// The newest point of a block with `start <= time < end` (`window`), as
/// [`decode_block_keeping`] gives it, without decoding the others into points.
pub fn decode_newest_within(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
    window: (i64, i64),
) -> Result<Option<BlockPoint>> {
    decode::decode_newest_within(bytes, multi, keep, window)
}

/// Decodes a block column by column, only the attributes whose names `keep` accepts
/// (the others are skipped without decoding); `multi` must be what it was encoded with.
/// A single-value block keeps its one column whatever `keep` says.
pub fn decode_block_columns(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
) -> Result<BlockColumns> {
    let keep_all = |_: &str| true;
    let keep: &dyn Fn(&str) -> bool = if multi { keep } else { &keep_all };
    decode::decode_parts(bytes, multi, keep).map(|(columns, _, _)| columns)
}

/// The header of a block: `(first time, last time, number of points)`, without
/// decoding anything else.
pub fn decode_block_times(bytes: &[u8]) -> Result<(i64, i64, usize)> {
    let mut r = bits::ByteReader::new(bytes);
    decode::header(&mut r).map(|h| (h.first_ns, h.last_ns, h.n))
}
