//! How a point becomes cells of a row, and how a row becomes points again, for each of
//! the four patterns. Row keys come from [`crate::keys`]; value bytes from
//! [`crate::codec`]. Every cell's timestamp is the point's time truncated to the
//! millisecond (Bigtable's granularity), so GC by age enforces retention and a
//! timestamp-range filter selects time in every pattern.
//!
//! | pattern | row | family `m` cells | value |
//! |---|---|---|---|
//! | bucket-columns | series + bucket | qualifier = value (multi: `len name value`) | empty |
//! | bucket-cells | series + bucket | qualifier = measure (multi: attribute) | typed value |
//! | row-serialized | series + time | `m:p` | protobuf [`crate::codec::PointProto`] with version |
//! | row-columns | series + time | qualifier = measure (multi: attribute) | typed value |
//!
//! Family `x` holds `x:v` (version; not in row-serialized rows, whose protobuf holds
//! it) and, in bucketed rows, `x:n` (nanoseconds below the millisecond) at the point's
//! timestamp, only when they differ from 1 and 0. Family `b` holds a sealed bucket's
//! block ([`crate::seal`]) in every pattern, and its summary (`b:s`).
//!
//! Byte layout: docs/format.md#time-series-cells

use std::borrow::Cow;
use std::collections::BTreeMap;

use almanac_engine::Row;
use almanac_engine::mutation::Mutation;

use crate::block::BlockPoint;
use crate::catalog::{BLOCK_FAMILY, MEASURE_FAMILY, META_FAMILY, TableMeta};
use crate::codec::{
    decode_meta, decode_point, decode_value, encode_meta, encode_named_value, encode_point,
    encode_value, split_named_value,
};
use crate::error::{Error, Result};
use crate::guard::is_guard;
use crate::keys::{self, KeyParts};
use crate::layout::{Layout, Pattern};
use crate::model::{DimensionPair, MeasureType, Measures, Point, Value};
use crate::schema::Schema;
use crate::seal::{decode_block_cell, live_block_points};

/// Qualifier of the serialized pattern's cell.
pub const BLOB_QUALIFIER: &[u8] = b"p";
/// Qualifier of a non-default version.
pub const VERSION_QUALIFIER: &[u8] = b"v";
/// Qualifier of nanoseconds below the millisecond.
pub const NANOS_QUALIFIER: &[u8] = b"n";
const NS_PER_MS: i64 = 1_000_000;

/// The cell timestamp (µs, whole milliseconds) of a time in ns.
pub fn cell_ts_us(time_ns: i64) -> i64 {
    time_ns.div_euclid(NS_PER_MS) * 1000
}

/// Where a point lives: its row, the length of the series prefix in it, and its slot in
/// the row (the cell timestamp for bucketed rows; 0 for one-point rows).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    /// Row key.
    pub row: Vec<u8>,
    /// Bytes of the series prefix at the start of `row`.
    pub series_len: usize,
    /// Slot within the row.
    pub slot: i64,
}

/// The series prefix of a point under `schema` (its dimensions must be in the schema;
/// names the schema lacks are left out), with room for the time after it. Dimensions
/// in the schema's order (as the write path sorts them) are written straight into the
/// key; others go through a slot per table dimension.
pub fn series_of(schema: &Schema, p: &Point) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        p.measure_name.len() + p.dimensions.iter().map(|(_, v)| v.len() + 2).sum::<usize>() + 32,
    );
    keys::push_escaped(&mut out, p.measure_name.as_bytes());
    // The table dimension the next component written stands for.
    let mut next = 0;
    for (name, value) in &p.dimensions {
        match schema.dimension_index_near(name, next) {
            Some(i) if i >= next => {
                // Absent dimensions before this one are empty components.
                out.resize(out.len() + (i - next), keys::SEP);
                out.push(keys::SEP);
                keys::push_escaped(&mut out, value.as_bytes());
                next = i + 1;
            }
            Some(_) => return series_of_any_order(schema, p),
            None => {}
        }
    }
    out.push(keys::TIME_SEP);
    out
}

/// [`series_of`] for dimensions in any order.
fn series_of_any_order(schema: &Schema, p: &Point) -> Vec<u8> {
    let mut dims: Vec<Option<&str>> = vec![None; schema.dimensions.len()];
    let mut next = 0;
    for (name, value) in &p.dimensions {
        if let Some(i) = schema.dimension_index_near(name, next) {
            dims[i] = Some(value);
            next = i + 1;
        }
    }
    keys::series_prefix(&p.measure_name, &dims)
}

/// The place of a point.
pub fn place(meta: &TableMeta, p: &Point) -> Place {
    let mut row = series_of(&meta.schema, p);
    let series_len = row.len();
    let layout = &meta.layout;
    let slot = if layout.pattern.is_bucketed() {
        let secs = p.time_ns.div_euclid(1_000_000_000);
        let start = secs - secs.rem_euclid(layout.bucket_secs);
        keys::push_bucket_component(&mut row, start, layout.reverse_time);
        cell_ts_us(p.time_ns)
    } else {
        keys::push_time_component(&mut row, p.time_ns, layout.reverse_time);
        0
    };
    Place {
        row,
        series_len,
        slot,
    }
}

fn set(family: &str, qualifier: Vec<u8>, ts: i64, value: Vec<u8>) -> Mutation {
    Mutation::SetCell {
        family: family.into(),
        qualifier,
        timestamp_us: ts,
        value,
    }
}

fn value_bytes(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    encode_value(v, &mut out);
    out
}

/// Column qualifiers of a point's measures in family `m`.
fn measure_columns(pattern: Pattern, p: &Point) -> Vec<(Vec<u8>, Vec<u8>)> {
    match (pattern, &p.measures) {
        (Pattern::BucketColumns, Measures::Single(v)) => vec![(value_bytes(v), Vec::new())],
        (Pattern::BucketColumns, Measures::Multi(vs)) => vs
            .iter()
            .map(|(n, v)| (encode_named_value(n, v), Vec::new()))
            .collect(),
        (Pattern::RowSerialized, m) => vec![(BLOB_QUALIFIER.to_vec(), encode_point(p.version, m))],
        (_, Measures::Single(v)) => vec![(p.measure_name.as_bytes().to_vec(), value_bytes(v))],
        (_, Measures::Multi(vs)) => vs
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), value_bytes(v)))
            .collect(),
    }
}

/// Appends the mutations that write `p`.
pub fn write_point(layout: &Layout, p: &Point, out: &mut Vec<Mutation>) {
    let ts = cell_ts_us(p.time_ns);
    for (q, v) in measure_columns(layout.pattern, p) {
        out.push(set(MEASURE_FAMILY, q, ts, v));
    }
    if p.version != 1 && layout.pattern != Pattern::RowSerialized {
        out.push(set(
            META_FAMILY,
            VERSION_QUALIFIER.to_vec(),
            ts,
            encode_meta(p.version),
        ));
    }
    let nanos = p.time_ns.rem_euclid(NS_PER_MS);
    if nanos != 0 && layout.pattern.is_bucketed() {
        out.push(set(
            META_FAMILY,
            NANOS_QUALIFIER.to_vec(),
            ts,
            encode_meta(nanos),
        ));
    }
}

/// Appends the mutations that remove a stored point (before an upsert writes its
/// replacement).
pub fn erase_point(layout: &Layout, p: &Point, out: &mut Vec<Mutation>) {
    if !layout.pattern.is_bucketed() {
        out.push(Mutation::DeleteFromRow);
        return;
    }
    let ts = cell_ts_us(p.time_ns);
    let column = |family: &str, qualifier: Vec<u8>| Mutation::DeleteFromColumn {
        family: family.into(),
        qualifier,
        start_us: ts,
        end_us: Some(ts + 1000),
    };
    for (q, _) in measure_columns(layout.pattern, p) {
        out.push(column(MEASURE_FAMILY, q));
    }
    out.push(column(META_FAMILY, VERSION_QUALIFIER.to_vec()));
    out.push(column(META_FAMILY, NANOS_QUALIFIER.to_vec()));
}

/// A point being put together from the cells of one slot.
#[derive(Default)]
struct Partial {
    single: Option<Value>,
    multi: Vec<(Cow<'static, str>, Value)>,
    version: Option<i64>,
    nanos: i64,
}

/// The dimensions named by a row key's parts (checked against the schema's count by
/// [`decode_row`]; extra components are dropped).
pub fn dimensions_of(schema: &Schema, parts: &KeyParts) -> Vec<DimensionPair<'static>> {
    parts
        .dims
        .iter()
        .zip(&schema.dimensions)
        .filter_map(|(v, name)| v.as_ref().map(|v| (name.clone().into(), v.clone().into())))
        .collect()
}

/// Decodes every point stored in a row: its cells, and the points of a sealed block
/// ([`crate::seal`]) still inside the retention at `now_us` (the store's clock).
pub fn decode_row(meta: &TableMeta, row: &Row, now_us: i64) -> Result<Vec<Point<'static>>> {
    decode_row_projected(meta, row, now_us, None)
}

/// [`decode_row`], decoding only the `project` attributes of a sealed MULTI block
/// (row-form cells are decoded whole; [`crate::query`] trims them).
pub fn decode_row_projected(
    meta: &TableMeta,
    row: &Row,
    now_us: i64,
    project: Option<&[String]>,
) -> Result<Vec<Point<'static>>> {
    decode_row_within(meta, row, now_us, project, None)
}

/// [`decode_row_projected`] keeping, of a sealed block, only its newest point with
/// `start <= time < end` (`newest_in`); row-form cells are decoded whole.
pub fn decode_row_within(
    meta: &TableMeta,
    row: &Row,
    now_us: i64,
    project: Option<&[String]>,
    newest_in: Option<(i64, i64)>,
) -> Result<Vec<Point<'static>>> {
    let layout = &meta.layout;
    let parts = keys::decode(&row.key, layout.pattern.is_bucketed(), layout.reverse_time)?;
    let schema = &meta.schema;
    if parts.dims.len() > schema.dimensions.len() {
        return Err(Error::Corrupt(format!(
            "row key has {} dimensions; the table has {}",
            parts.dims.len(),
            schema.dimensions.len()
        )));
    }
    let kind = measure_kind(meta, &parts.measure)?;
    let multi = kind == MeasureType::Multi;
    let cells = row_cells(meta, row, kind, parts.time, now_us)?;
    let dimensions = dimensions_of(schema, &parts);
    let mut out = match cells.block {
        Some(value) => decode_block_cell(
            meta,
            &parts,
            multi,
            &dimensions,
            value,
            now_us,
            project,
            newest_in,
        )?,
        None => Vec::with_capacity(cells.points.len()),
    };
    out.extend(cells.points.into_iter().map(|p| Point {
        dimensions: dimensions.clone(),
        measure_name: parts.measure.clone().into(),
        time_ns: p.time_ns,
        version: p.version,
        measures: p.measures,
    }));
    Ok(out)
}

/// The type of measure `measure` in the table's schema.
pub(crate) fn measure_kind(meta: &TableMeta, measure: &str) -> Result<MeasureType> {
    meta.schema
        .measures
        .get(measure)
        .copied()
        .ok_or_else(|| Error::Corrupt(format!("measure '{measure}' is not in the table's schema")))
}

/// The points of one row of a bucket a seal reads ([`crate::seal`]): its row-form
/// points and its block's, without their series (the caller's `series`, a prefix of the
/// row's key, names it), less those the retention has collected at `now_us`. `kind`:
/// the type of the series' measure ([`measure_kind`]).
pub(crate) fn bucket_row_points(
    meta: &TableMeta,
    row: &Row,
    series: &[u8],
    kind: MeasureType,
    now_us: i64,
) -> Result<Vec<BlockPoint>> {
    let layout = &meta.layout;
    let time_text = row.key.strip_prefix(series).ok_or_else(|| {
        Error::Corrupt(format!(
            "row key {:?} is outside its series",
            String::from_utf8_lossy(&row.key)
        ))
    })?;
    let time = keys::decode_time(
        &row.key,
        time_text,
        layout.pattern.is_bucketed(),
        layout.reverse_time,
    )?;
    let cells = row_cells(meta, row, kind, time, now_us)?;
    let Some(value) = cells.block else {
        return Ok(cells.points);
    };
    let multi = kind == MeasureType::Multi;
    let mut out = live_block_points(meta, multi, value, now_us, None, None)?;
    out.extend(cells.points);
    Ok(out)
}

/// A row's cells, decoded: its block cell's bytes (if it has one) and its row-form
/// points, without their series.
struct RowCells<'r> {
    block: Option<&'r [u8]>,
    points: Vec<BlockPoint>,
}

/// Decodes the row-form cells of `row`, whose key's time component is `key_time`
/// (seconds in the bucketed patterns, nanoseconds otherwise), keeping the points the
/// retention has not collected at `now_us`; sets the block cell aside.
fn row_cells<'r>(
    meta: &TableMeta,
    row: &'r Row,
    kind: MeasureType,
    key_time: i64,
    now_us: i64,
) -> Result<RowCells<'r>> {
    let layout = &meta.layout;
    let bucketed = layout.pattern.is_bucketed();
    let schema = &meta.schema;
    let multi = kind == MeasureType::Multi;
    let attr_type =
        |name: &str| {
            schema.attributes.get(name).copied().ok_or_else(|| {
                Error::Corrupt(format!("measure '{name}' is not in the table's schema"))
            })
        };
    let mut slots: BTreeMap<i64, Partial> = BTreeMap::new();
    let mut block = None;
    for c in &row.cells {
        if &*c.family == BLOCK_FAMILY {
            // The block; its summary (`b:s`) is for readers of whole buckets.
            if c.qualifier.is_empty() {
                block = Some(&c.value[..]);
            }
            continue;
        }
        if is_guard(c) {
            continue;
        }
        let slot = if bucketed { c.timestamp_us } else { 0 };
        let part = slots.entry(slot).or_default();
        let q: &[u8] = &c.qualifier;
        if &*c.family == META_FAMILY {
            match q {
                VERSION_QUALIFIER => part.version = Some(decode_meta(&c.value)?),
                NANOS_QUALIFIER => part.nanos = decode_meta(&c.value)?,
                _ => {}
            }
            continue;
        }
        match layout.pattern {
            Pattern::RowSerialized => {
                let (version, measures) = decode_point(&c.value, multi)?;
                part.version = Some(version);
                match measures {
                    Measures::Single(v) => part.single = Some(v),
                    Measures::Multi(vs) => part.multi = vs,
                }
            }
            Pattern::BucketColumns if multi => {
                let (name, bytes) = split_named_value(q)?;
                part.multi.push((
                    name.to_string().into(),
                    decode_value(bytes, attr_type(name)?)?,
                ));
            }
            Pattern::BucketColumns => part.single = Some(decode_value(q, kind)?),
            _ if multi => {
                let name = std::str::from_utf8(q)
                    .map_err(|_| Error::Corrupt("measure qualifier is not UTF-8".into()))?;
                part.multi.push((
                    name.to_string().into(),
                    decode_value(&c.value, attr_type(name)?)?,
                ));
            }
            _ => part.single = Some(decode_value(&c.value, kind)?),
        }
    }
    // Retention applies on read, as it does to a block's points: a remote Bigtable
    // (Cloud Bigtable, its emulator) collects expired cells lazily, days later.
    let horizon_us = crate::seal::retention_horizon_us(meta, now_us);
    let mut points = Vec::with_capacity(slots.len());
    for (slot, part) in slots {
        let measures = match (multi, part.single) {
            (false, Some(v)) => Measures::Single(v),
            (true, _) if !part.multi.is_empty() => Measures::Multi(part.multi),
            _ => continue, // metadata without a value: a half-collected point
        };
        let time_ns = if bucketed {
            slot * 1000 + part.nanos
        } else {
            key_time
        };
        if cell_ts_us(time_ns) < horizon_us {
            continue;
        }
        points.push(BlockPoint {
            time_ns,
            version: part.version.unwrap_or(1),
            measures,
        });
    }
    Ok(RowCells { block, points })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct path and the slot path give the same series key for every subset
    /// of the table's dimensions, in order and shuffled, with names the table lacks
    /// and values that need escaping.
    #[test]
    fn series_keys_do_not_depend_on_the_path() {
        let schema = Schema {
            dimensions: ["a", "b", "c", "d"].map(String::from).to_vec(),
            ..Schema::default()
        };
        let values = ["x", "y#1", "z@", "w\\"];
        for mask in 0u32..32 {
            let mut dims: Vec<DimensionPair<'_>> = (0..4)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| (schema.dimensions[i].clone().into(), values[i].into()))
                .collect();
            if mask & 16 != 0 {
                dims.insert(dims.len() / 2, ("unknown".into(), "u".into()));
            }
            let point = |dims: Vec<DimensionPair<'static>>| Point {
                dimensions: dims,
                measure_name: "cpu#".into(),
                time_ns: 0,
                version: 1,
                measures: Measures::Single(Value::Bigint(1)),
            };
            let sorted = point(dims.clone());
            let want = series_of_any_order(&schema, &sorted);
            assert_eq!(series_of(&schema, &sorted), want, "mask {mask}");
            let present: Vec<Option<&str>> = (0..4)
                .map(|i| (mask & (1 << i) != 0).then_some(values[i]))
                .collect();
            assert_eq!(want, keys::series_prefix("cpu#", &present), "mask {mask}");
            dims.reverse();
            assert_eq!(
                series_of(&schema, &point(dims)),
                want,
                "mask {mask} reversed"
            );
        }
    }
}
