//! Encoding: gather the columns and attribute sets of the points, then write the
//! header, the dictionary, the sets and one section per column (see the format in
//! [`super`]).

use std::collections::HashMap;

use super::bits::{self, BitWriter, bit_len, put_section, put_varint};
use super::columns::{self, Column};
use super::{BlockPoint, FLAG_MULTI, FORMAT_VERSION, MAX_BLOCK_POINTS, ints};
use crate::error::{Error, Result};
use crate::model::{MeasureType, Measures, Value};

/// The attributes of a point as `(name, value)` pairs; checks the kind of record.
fn attributes(p: &BlockPoint, multi: bool) -> Result<Vec<(&str, &Value)>> {
    match (&p.measures, multi) {
        (Measures::Single(v), false) => Ok(vec![("", v)]),
        (Measures::Multi(vs), true) => Ok(vs.iter().map(|(n, v)| (&**n, v)).collect()),
        _ => Err(Error::invalid(
            "a block holds either single values or MULTI records",
        )),
    }
}

/// [`super::encode_block`].
pub(super) fn encode_block(points: &[BlockPoint], multi: bool) -> Result<Vec<u8>> {
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
