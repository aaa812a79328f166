//! Block summaries: per column of a sealed block, how many points have a value and,
//! for DOUBLE and BIGINT, their minimum, maximum and sum; with the block's point count
//! and first and last times. Written beside the block when a bucket is sealed (or its
//! block rewritten), so an aggregate over whole buckets reads a few dozen bytes per
//! bucket and decodes no point ([`crate::query::scan_partials`]).
//!
//! ```text
//! summary = u8 format version (1)
//!           varint n: points, 1..=MAX_BLOCK_POINTS
//!           varint zigzag(first time, ns)
//!           varint last time - first time
//!           varint d: columns
//!           d × (u8 type (the block dictionary's codes); varint length; UTF-8 name;
//!                varint count: points with a value, 1..=n;
//!                DOUBLE: 3 × u64 big-endian bits of min, max, sum;
//!                BIGINT: 3 × varint zigzag of min, max, sum (wrapping);
//!                other types: nothing)
//! ```
//!
//! Minimum and maximum order doubles by IEEE 754 total order (a NaN is the largest),
//! as Arrow's `min`/`max` kernels do; the sum adds the values in time order.

use super::bits::{ByteReader, put_varint, zigzag};
use super::columns::{type_code, type_of};
use std::ops::Range;

use super::{BlockColumns, BlockPoint, ColumnValues, MAX_BLOCK_POINTS};
use crate::error::{Error, Result};
use crate::model::{MeasureType, Measures, Value};

/// The format version [`BlockSummary::encode`] writes.
pub const SUMMARY_VERSION: u8 = 1;
/// Columns a summary may name: a block's columns are attributes of its table, each of
/// one type.
const MAX_SUMMARY_COLUMNS: usize = crate::limits::MAX_MEASURES_PER_TABLE;

/// What a block holds, without its points.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockSummary {
    /// Points in the block.
    pub points: u64,
    /// Time of the first point, ns.
    pub first_ns: i64,
    /// Time of the last point, ns.
    pub last_ns: i64,
    /// One per `(attribute name, type)` of the block (name `""` in a single-value
    /// block), in order of first use.
    pub columns: Vec<ColumnSummary>,
}

/// One column of a [`BlockSummary`].
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSummary {
    /// The attribute name (`""` in a single-value block).
    pub name: String,
    /// The value type.
    pub kind: MeasureType,
    /// Points with a value in this column.
    pub count: u64,
    /// Minimum, maximum and sum, for DOUBLE and BIGINT columns.
    pub stats: Option<Stats>,
}

/// Minimum, maximum and sum of a column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stats {
    /// Of a DOUBLE column (min and max by total order).
    Double {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Sum in time order.
        sum: f64,
    },
    /// Of a BIGINT column (the sum wraps).
    Bigint {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
        /// Sum, modulo 2^64.
        sum: i64,
    },
}

impl Stats {
    fn first(v: &Value) -> Option<Self> {
        match v {
            Value::Double(x) => Some(Self::Double {
                min: *x,
                max: *x,
                sum: *x,
            }),
            Value::Bigint(x) => Some(Self::Bigint {
                min: *x,
                max: *x,
                sum: *x,
            }),
            _ => None,
        }
    }

    fn add(&mut self, v: &Value) {
        match (self, v) {
            (Self::Double { min, max, sum }, Value::Double(x)) => {
                if x.total_cmp(min).is_lt() {
                    *min = *x;
                }
                if x.total_cmp(max).is_gt() {
                    *max = *x;
                }
                *sum += *x;
            }
            (Self::Bigint { min, max, sum }, Value::Bigint(x)) => {
                *min = (*min).min(*x);
                *max = (*max).max(*x);
                *sum = sum.wrapping_add(*x);
            }
            _ => {}
        }
    }
}

impl ColumnSummary {
    fn add(&mut self, v: &Value) {
        self.count += 1;
        match &mut self.stats {
            Some(s) => s.add(v),
            None => self.stats = Stats::first(v),
        }
    }
}

impl BlockSummary {
    /// The summary of a block's points (times increasing, as [`super::encode_block`]
    /// takes them); `None` when there are none.
    pub fn of(points: &[BlockPoint]) -> Option<Self> {
        let (first, last) = (points.first()?, points.last()?);
        let mut columns: Vec<ColumnSummary> = Vec::new();
        let mut add = |name: &str, v: &Value| {
            let kind = v.kind();
            let i = match columns
                .iter()
                .position(|c| c.kind == kind && c.name == name)
            {
                Some(i) => i,
                None => {
                    columns.push(ColumnSummary {
                        name: name.to_string(),
                        kind,
                        count: 0,
                        stats: None,
                    });
                    columns.len() - 1
                }
            };
            columns[i].add(v);
        };
        for p in points {
            match &p.measures {
                Measures::Single(v) => add("", v),
                Measures::Multi(vs) => vs.iter().for_each(|(n, v)| add(n, v)),
            }
        }
        Some(Self {
            points: points.len() as u64,
            first_ns: first.time_ns,
            last_ns: last.time_ns,
            columns,
        })
    }

    /// The summary of the points `range` of a decoded block (the columns it kept);
    /// `None` when the range is empty.
    pub fn of_columns(block: &BlockColumns, range: Range<usize>) -> Option<Self> {
        let times = block.times_ns.get(range.clone())?;
        let (first, last) = (*times.first()?, *times.last()?);
        let columns = block
            .columns
            .iter()
            .filter_map(|c| {
                // The values of the points in `range`: a contiguous run of `values`.
                let values = match &c.points {
                    None => range.clone(),
                    Some(points) => {
                        let lo = points.partition_point(|&p| (p as usize) < range.start);
                        let hi = points.partition_point(|&p| (p as usize) < range.end);
                        lo..hi
                    }
                };
                let mut summary = ColumnSummary {
                    name: c.name.clone(),
                    kind: c.values.kind(),
                    count: 0,
                    stats: None,
                };
                match &c.values {
                    ColumnValues::Double(v) => v
                        .get(values)?
                        .iter()
                        .for_each(|x| summary.add(&Value::Double(*x))),
                    ColumnValues::Bigint(v) => v
                        .get(values)?
                        .iter()
                        .for_each(|x| summary.add(&Value::Bigint(*x))),
                    other => summary.count = values.len().min(other.len()) as u64,
                }
                (summary.count > 0).then_some(summary)
            })
            .collect();
        Some(Self {
            points: times.len() as u64,
            first_ns: first,
            last_ns: last,
            columns,
        })
    }

    /// The column `name` of type `kind`.
    pub fn column(&self, name: &str, kind: MeasureType) -> Option<&ColumnSummary> {
        self.columns
            .iter()
            .find(|c| c.kind == kind && c.name == name)
    }

    /// The summary's bytes (the grammar in the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 40 * self.columns.len());
        out.push(SUMMARY_VERSION);
        put_varint(&mut out, self.points);
        put_varint(&mut out, zigzag(self.first_ns));
        put_varint(&mut out, self.last_ns.wrapping_sub(self.first_ns) as u64);
        put_varint(&mut out, self.columns.len() as u64);
        for c in &self.columns {
            out.push(type_code(c.kind));
            put_varint(&mut out, c.name.len() as u64);
            out.extend_from_slice(c.name.as_bytes());
            put_varint(&mut out, c.count);
            match c.stats {
                Some(Stats::Double { min, max, sum }) => {
                    for x in [min, max, sum] {
                        out.extend_from_slice(&x.to_bits().to_be_bytes());
                    }
                }
                Some(Stats::Bigint { min, max, sum }) => {
                    for x in [min, max, sum] {
                        put_varint(&mut out, zigzag(x));
                    }
                }
                None => {}
            }
        }
        out
    }

    /// Reads a summary of [`BlockSummary::encode`]; corrupt bytes give
    /// [`Error::Corrupt`], never a panic or an allocation beyond the input's size.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let corrupt = |what: &str| Error::Corrupt(format!("block summary: {what}"));
        let mut r = ByteReader::new(bytes);
        let version = r.u8()?;
        if version != SUMMARY_VERSION {
            return Err(corrupt(&format!("unknown format version {version}")));
        }
        let points = r.count(MAX_BLOCK_POINTS, "too many points")? as u64;
        if points == 0 {
            return Err(corrupt("no points"));
        }
        let first_ns = r.zigzag()?;
        let last_ns = first_ns.wrapping_add(r.varint()? as i64);
        if last_ns < first_ns {
            return Err(corrupt("last time before the first"));
        }
        let d = r.count(MAX_SUMMARY_COLUMNS.min(r.remaining()), "too many columns")?;
        let mut columns = Vec::with_capacity(d);
        for _ in 0..d {
            let kind = type_of(r.u8()?)?;
            let len = r.count(r.remaining(), "name longer than the summary")?;
            let name = std::str::from_utf8(r.take(len)?)
                .map_err(|_| corrupt("name is not UTF-8"))?
                .to_string();
            let count = r.varint()?;
            if count == 0 || count > points {
                return Err(corrupt("column count out of range"));
            }
            let stats = match kind {
                MeasureType::Double => {
                    let mut v = [0f64; 3];
                    for x in &mut v {
                        *x = f64::from_bits(r.u64_be()?);
                    }
                    Some(Stats::Double {
                        min: v[0],
                        max: v[1],
                        sum: v[2],
                    })
                }
                MeasureType::Bigint => Some(Stats::Bigint {
                    min: r.zigzag()?,
                    max: r.zigzag()?,
                    sum: r.zigzag()?,
                }),
                _ => None,
            };
            columns.push(ColumnSummary {
                name,
                kind,
                count,
                stats,
            });
        }
        if r.remaining() != 0 {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self {
            points,
            first_ns,
            last_ns,
            columns,
        })
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::panic, reason = "tests")]
mod tests {
    use super::*;

    fn point(t: i64, values: &[(&str, Value)]) -> BlockPoint {
        BlockPoint {
            time_ns: t,
            version: 1,
            measures: Measures::Multi(
                values
                    .iter()
                    .map(|(n, v)| (n.to_string().into(), v.clone()))
                    .collect(),
            ),
        }
    }

    #[test]
    fn summarizes_each_column_and_round_trips() {
        let points = vec![
            point(
                10,
                &[
                    ("cpu", Value::Double(2.5)),
                    ("n", Value::Bigint(-4)),
                    ("s", Value::Varchar("a".into())),
                ],
            ),
            point(20, &[("cpu", Value::Double(f64::NAN))]),
            point(30, &[("cpu", Value::Double(-1.0)), ("n", Value::Bigint(9))]),
        ];
        let s = BlockSummary::of(&points).expect("points");
        assert_eq!((s.points, s.first_ns, s.last_ns), (3, 10, 30));
        let cpu = s.column("cpu", MeasureType::Double).expect("cpu");
        assert_eq!(cpu.count, 3);
        let Some(Stats::Double { min, max, sum }) = cpu.stats else {
            panic!("double stats: {:?}", cpu.stats);
        };
        assert_eq!(min, -1.0);
        assert!(max.is_nan(), "NaN is the largest double, as in Arrow");
        assert!(sum.is_nan());
        let n = s.column("n", MeasureType::Bigint).expect("n");
        assert_eq!(
            (n.count, n.stats),
            (
                2,
                Some(Stats::Bigint {
                    min: -4,
                    max: 9,
                    sum: 5
                })
            )
        );
        let text = s.column("s", MeasureType::Varchar).expect("s");
        assert_eq!((text.count, text.stats), (1, None));
        assert!(s.column("cpu", MeasureType::Bigint).is_none());
        let bytes = s.encode();
        let back = BlockSummary::decode(&bytes).expect("decodes");
        // NaN != NaN: compare the bytes of the round trip instead.
        assert_eq!(back.encode(), bytes);
        assert_eq!(back.columns.len(), 3);
    }

    #[test]
    fn single_values_are_one_unnamed_column() {
        let points: Vec<BlockPoint> = (0..4)
            .map(|i| BlockPoint {
                time_ns: i,
                version: 1,
                measures: Measures::Single(Value::Bigint(i)),
            })
            .collect();
        let s = BlockSummary::of(&points).expect("points");
        assert_eq!(
            s.column("", MeasureType::Bigint)
                .map(|c| (c.count, c.stats)),
            Some((
                4,
                Some(Stats::Bigint {
                    min: 0,
                    max: 3,
                    sum: 6
                })
            ))
        );
        assert_eq!(BlockSummary::decode(&s.encode()).expect("decodes"), s);
        assert!(BlockSummary::of(&[]).is_none());
    }

    /// The summary of a slice of decoded columns is the summary of those points.
    #[test]
    fn summaries_of_column_slices_match_summaries_of_points() {
        let points: Vec<BlockPoint> = (0..50i64)
            .map(|i| {
                let mut values = vec![("a", Value::Double(((i * 37) % 11) as f64 - 3.5))];
                if i % 3 == 0 {
                    values.push(("b", Value::Bigint(i * i - 400)));
                }
                if i % 7 == 0 {
                    values.push(("c", Value::Varchar(format!("v{i}"))));
                }
                point(i * 10, &values)
            })
            .collect();
        let bytes = super::super::encode_block(&points, true).expect("encodes");
        let columns = super::super::decode_block_columns(&bytes, true, &|_| true).expect("decodes");
        for (lo, hi) in [(0, 50), (0, 1), (3, 4), (5, 33), (21, 50), (49, 50)] {
            let got = BlockSummary::of_columns(&columns, lo..hi).expect("points");
            let want = BlockSummary::of(&points[lo..hi]).expect("points");
            let mut got_cols = got.columns.clone();
            let mut want_cols = want.columns.clone();
            got_cols.sort_by(|x, y| x.name.cmp(&y.name));
            want_cols.sort_by(|x, y| x.name.cmp(&y.name));
            assert_eq!(got_cols, want_cols, "{lo}..{hi}");
            assert_eq!(
                (got.points, got.first_ns, got.last_ns),
                (want.points, want.first_ns, want.last_ns)
            );
        }
        assert!(BlockSummary::of_columns(&columns, 7..7).is_none());
    }

    /// Every truncation and every single-byte change of a summary decodes or fails
    /// cleanly.
    #[test]
    fn corrupt_summaries_fail_cleanly() {
        let points = vec![
            point(
                1,
                &[("a", Value::Double(1.0)), ("b", Value::Bigint(i64::MIN))],
            ),
            point(2, &[("a", Value::Double(3.0)), ("c", Value::Boolean(true))]),
        ];
        let bytes = BlockSummary::of(&points).expect("points").encode();
        for len in 0..bytes.len() {
            assert!(BlockSummary::decode(&bytes[..len]).is_err(), "len {len}");
        }
        for i in 0..bytes.len() {
            for b in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] = b;
                let _ = BlockSummary::decode(&bad);
            }
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(BlockSummary::decode(&long).is_err());
    }
}
