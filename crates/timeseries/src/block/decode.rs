//! Decoding: the header, the dictionary and the sets, the counts checked against the
//! block's length (the expansion rule), then the sections (see the format in
//! [`super`]).

use std::collections::HashSet;

use super::bits::{BitReader, ByteReader, bit_len, corrupt};
use super::{BlockColumn, BlockColumns, BlockPoint, FLAG_MULTI, FORMAT_VERSION, MAX_BLOCK_POINTS};
use super::{columns, ints};
use crate::error::Result;
use std::borrow::Cow;

use crate::model::{MeasureType, Measures, Value};

/// The fields of a block's header.
pub(super) struct Header {
    pub(super) multi: bool,
    pub(super) n: usize,
    pub(super) first_ns: i64,
    pub(super) last_ns: i64,
}

/// Reads and checks the header.
pub(super) fn header(r: &mut ByteReader<'_>) -> Result<Header> {
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

/// [`super::decode_block_keeping`]: the kept columns, dealt out to the points by their
/// sets. A single-value block keeps its one column whatever `keep` says.
pub(super) fn decode_block(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<BlockPoint>> {
    let keep_all = |_: &str| true;
    let keep: &dyn Fn(&str) -> bool = if multi { keep } else { &keep_all };
    let (columns, point_sets, sets) = decode_parts(bytes, multi, keep)?;
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
                vs.push((Cow::Owned(names[c].clone()), next(c)?));
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

/// The newest point with `start <= time < end`, as [`decode_block`] would give it,
/// without making a point of the others.
pub(super) fn decode_newest_within(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
    (start, end): (i64, i64),
) -> Result<Option<BlockPoint>> {
    let keep_all = |_: &str| true;
    let keep: &dyn Fn(&str) -> bool = if multi { keep } else { &keep_all };
    let (columns, point_sets, sets) = decode_parts(bytes, multi, keep)?;
    // Times are strictly increasing.
    let Some(i) = columns
        .times_ns
        .iter()
        .rposition(|&t| t >= start && t < end)
    else {
        return Ok(None);
    };
    let set = point_sets
        .get(i)
        .and_then(|&s| sets.get(s))
        .ok_or_else(|| corrupt("a point without its attribute set"))?;
    let value = |c: usize| -> Result<(String, Value)> {
        let column = columns
            .columns
            .get(c)
            .ok_or_else(|| corrupt("an attribute set names a missing column"))?;
        // The column's values are those of the points that have one, in time order.
        let at = match &column.points {
            None => Some(i),
            Some(points) => u32::try_from(i)
                .ok()
                .and_then(|i| points.binary_search(&i).ok()),
        };
        let v = at
            .and_then(|at| column.values.get(at))
            .ok_or_else(|| corrupt("column shorter than its attribute sets"))?;
        Ok((column.name.clone(), v))
    };
    let measures = if multi {
        let vs = set
            .iter()
            .map(|&c| value(c).map(|(name, v)| (Cow::Owned(name), v)))
            .collect::<Result<Vec<_>>>()?;
        Measures::Multi(vs)
    } else {
        let &c = set
            .first()
            .ok_or_else(|| corrupt("a single value without a column"))?;
        Measures::Single(value(c)?.1)
    };
    Ok(Some(BlockPoint {
        time_ns: columns.times_ns[i],
        version: columns.versions.get(i).copied().unwrap_or_default(),
        measures,
    }))
}

/// The kept columns, each point's set number, and the sets (as numbers of kept
/// columns: the members that were not kept are left out).
type Parts = (BlockColumns, Vec<usize>, Vec<Vec<usize>>);

/// Decodes the columns that `keep` accepts, with what [`decode_block`] needs besides.
pub(super) fn decode_parts(
    bytes: &[u8],
    multi: bool,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Parts> {
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
    // The sets in kept-column numbers.
    let mut position = vec![None; d];
    for (i, (c, _, _)) in kept.iter().enumerate() {
        position[*c] = Some(i);
    }
    let sets = sets
        .into_iter()
        .map(|set| set.into_iter().filter_map(|c| position[c]).collect())
        .collect();
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
