//! Protobuf messages to engine types and back. Every malformed field becomes an
//! `INVALID_ARGUMENT` naming the field.

use std::ops::Bound;

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::v2 as data;
use almanac_engine::filter::RowFilter;
use almanac_engine::limits::{MAX_FILTER_BYTES, MAX_FILTER_DEPTH};
use almanac_engine::mutation::{AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::schema::{Aggregate, FamilySpec, GcRule, Granularity, ValueType};
use prost::Message;
use tonic::Status;

use crate::status::invalid;

/// Nanoseconds in a second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;
/// Microseconds in a second.
pub const MICROS_PER_SEC: i64 = 1_000_000;

/// A protobuf timestamp of `ticks` units of `1 / per_sec` seconds since the epoch.
pub fn timestamp_of(ticks: i64, per_sec: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ticks.div_euclid(per_sec),
        nanos: (ticks.rem_euclid(per_sec) * (NANOS_PER_SEC / per_sec)) as i32,
    }
}

/// A protobuf timestamp of `us` microseconds since the epoch.
pub fn timestamp(us: i64) -> prost_types::Timestamp {
    timestamp_of(us, MICROS_PER_SEC)
}

/// Microseconds since the epoch of a protobuf timestamp (saturating).
pub fn micros(t: &prost_types::Timestamp) -> i64 {
    t.seconds
        .saturating_mul(MICROS_PER_SEC)
        .saturating_add(i64::from(t.nanos) / 1_000)
}

/// A mutation from the wire.
pub fn mutation(m: &data::Mutation) -> Result<Mutation, Status> {
    use data::mutation::Mutation as M;
    let Some(inner) = &m.mutation else {
        return Err(invalid("mutation has no kind set"));
    };
    Ok(match inner {
        M::SetCell(s) => Mutation::SetCell {
            family: s.family_name.clone(),
            qualifier: s.column_qualifier.to_vec(),
            timestamp_us: s.timestamp_micros,
            value: s.value.to_vec(),
        },
        M::DeleteFromColumn(d) => {
            let (start_us, end_us) = match &d.time_range {
                None => (0, None),
                Some(r) => (
                    r.start_timestamp_micros,
                    (r.end_timestamp_micros != 0).then_some(r.end_timestamp_micros),
                ),
            };
            Mutation::DeleteFromColumn {
                family: d.family_name.clone(),
                qualifier: d.column_qualifier.to_vec(),
                start_us,
                end_us,
            }
        }
        M::DeleteFromFamily(d) => Mutation::DeleteFromFamily {
            family: d.family_name.clone(),
        },
        M::DeleteFromRow(_) => Mutation::DeleteFromRow,
        M::AddToCell(a) => Mutation::AddToCell {
            family: a.family_name.clone(),
            qualifier: value_bytes(a.column_qualifier.as_ref(), "AddToCell.column_qualifier")?,
            timestamp_us: value_timestamp(a.timestamp.as_ref(), "AddToCell.timestamp")?,
            input: value_input(a.input.as_ref(), "AddToCell.input")?,
        },
        M::MergeToCell(a) => Mutation::MergeToCell {
            family: a.family_name.clone(),
            qualifier: value_bytes(a.column_qualifier.as_ref(), "MergeToCell.column_qualifier")?,
            timestamp_us: value_timestamp(a.timestamp.as_ref(), "MergeToCell.timestamp")?,
            input: value_input(a.input.as_ref(), "MergeToCell.input")?,
        },
    })
}

/// All mutations of a request.
pub fn mutations(ms: &[data::Mutation]) -> Result<Vec<Mutation>, Status> {
    ms.iter().map(mutation).collect()
}

fn value_bytes(v: Option<&data::Value>, field: &str) -> Result<Vec<u8>, Status> {
    use data::value::Kind;
    match v.and_then(|v| v.kind.as_ref()) {
        Some(Kind::RawValue(b) | Kind::BytesValue(b)) => Ok(b.to_vec()),
        Some(Kind::StringValue(s)) => Ok(s.as_bytes().to_vec()),
        None => Ok(Vec::new()),
        Some(_) => Err(invalid(format!("{field} must be bytes or a string"))),
    }
}

fn value_timestamp(v: Option<&data::Value>, field: &str) -> Result<i64, Status> {
    use data::value::Kind;
    match v.and_then(|v| v.kind.as_ref()) {
        Some(Kind::RawTimestampMicros(t) | Kind::IntValue(t)) => Ok(*t),
        Some(Kind::TimestampValue(t)) => Ok(t
            .seconds
            .saturating_mul(1_000_000)
            .saturating_add(i64::from(t.nanos / 1000))),
        None => Ok(0),
        Some(_) => Err(invalid(format!(
            "{field} must be a timestamp in microseconds"
        ))),
    }
}

fn value_input(v: Option<&data::Value>, field: &str) -> Result<AggregateInput, Status> {
    use data::value::Kind;
    match v.and_then(|v| v.kind.as_ref()) {
        Some(Kind::IntValue(i)) => Ok(AggregateInput::Int(*i)),
        Some(Kind::RawValue(b) | Kind::BytesValue(b)) => Ok(AggregateInput::Bytes(b.to_vec())),
        Some(Kind::StringValue(s)) => Ok(AggregateInput::Bytes(s.as_bytes().to_vec())),
        None => Err(invalid(format!("{field} is required"))),
        Some(_) => Err(invalid(format!("{field} must be an int64 or bytes"))),
    }
}

/// A ReadModifyWrite rule from the wire.
pub fn rmw_rule(r: &data::ReadModifyWriteRule) -> Result<ReadModifyWriteRule, Status> {
    use data::read_modify_write_rule::Rule;
    let op = match &r.rule {
        Some(Rule::AppendValue(v)) => ReadModifyWriteOp::Append(v.to_vec()),
        Some(Rule::IncrementAmount(n)) => ReadModifyWriteOp::Increment(*n),
        None => return Err(invalid("ReadModifyWriteRule has no rule set")),
    };
    Ok(ReadModifyWriteRule {
        family: r.family_name.clone(),
        qualifier: r.column_qualifier.to_vec(),
        op,
    })
}

/// A row set from the wire (`None` = the whole table).
pub fn row_set(rs: Option<&data::RowSet>) -> RowSet {
    use data::row_range::{EndKey, StartKey};
    let Some(rs) = rs else { return RowSet::all() };
    let mut out = RowSet {
        keys: rs.row_keys.iter().map(|k| k.to_vec()).collect(),
        ranges: Vec::new(),
    };
    for r in &rs.row_ranges {
        let start = match &r.start_key {
            Some(StartKey::StartKeyClosed(k)) if !k.is_empty() => Bound::Included(k.to_vec()),
            Some(StartKey::StartKeyOpen(k)) if !k.is_empty() => Bound::Excluded(k.to_vec()),
            _ => Bound::Unbounded,
        };
        let end = match &r.end_key {
            Some(EndKey::EndKeyClosed(k)) if !k.is_empty() => Bound::Included(k.to_vec()),
            Some(EndKey::EndKeyOpen(k)) if !k.is_empty() => Bound::Excluded(k.to_vec()),
            _ => Bound::Unbounded,
        };
        out.ranges.push(RowRange { start, end });
    }
    // A request naming only empty keys/ranges would otherwise read everything.
    if rs.row_keys.is_empty() && rs.row_ranges.is_empty() {
        return RowSet::all();
    }
    out
}

/// A filter from the wire, with the service's size and nesting limits.
pub fn filter(f: &data::RowFilter) -> Result<RowFilter, Status> {
    let size = f.encoded_len();
    if size > MAX_FILTER_BYTES {
        return Err(invalid(format!(
            "RowFilter is {size} bytes serialized, over the limit of {MAX_FILTER_BYTES}"
        )));
    }
    filter_at(f, 1)
}

fn filter_at(f: &data::RowFilter, depth: usize) -> Result<RowFilter, Status> {
    use data::row_filter::Filter as F;
    if depth > MAX_FILTER_DEPTH {
        return Err(invalid(format!(
            "RowFilter nesting is deeper than the limit of {MAX_FILTER_DEPTH}"
        )));
    }
    let Some(inner) = &f.filter else {
        return Err(invalid("RowFilter has no filter set"));
    };
    let list = |fs: &[data::RowFilter]| {
        fs.iter()
            .map(|x| filter_at(x, depth + 1))
            .collect::<Result<Vec<_>, _>>()
    };
    let boxed = |x: &Option<Box<data::RowFilter>>| -> Result<Option<Box<RowFilter>>, Status> {
        x.as_deref()
            .map(|x| filter_at(x, depth + 1).map(Box::new))
            .transpose()
    };
    Ok(match inner {
        F::Chain(c) => RowFilter::Chain(list(&c.filters)?),
        F::Interleave(i) => RowFilter::Interleave(list(&i.filters)?),
        F::Condition(c) => RowFilter::Condition {
            predicate: Box::new(match c.predicate_filter.as_deref() {
                Some(p) => filter_at(p, depth + 1)?,
                None => return Err(invalid("Condition.predicate_filter is required")),
            }),
            true_filter: boxed(&c.true_filter)?,
            false_filter: boxed(&c.false_filter)?,
        },
        F::Sink(true) => RowFilter::Sink,
        F::PassAllFilter(true) => RowFilter::PassAll,
        F::BlockAllFilter(true) => RowFilter::BlockAll,
        F::Sink(false) | F::PassAllFilter(false) | F::BlockAllFilter(false) => {
            return Err(invalid(
                "sink, pass_all_filter and block_all_filter must be true when set",
            ));
        }
        F::RowKeyRegexFilter(r) => RowFilter::RowKeyRegex(r.to_vec()),
        F::RowSampleFilter(p) => RowFilter::RowSample(*p),
        F::FamilyNameRegexFilter(r) => RowFilter::FamilyNameRegex(r.clone()),
        F::ColumnQualifierRegexFilter(r) => RowFilter::ColumnQualifierRegex(r.to_vec()),
        F::ColumnRangeFilter(c) => {
            use data::column_range::{EndQualifier, StartQualifier};
            RowFilter::ColumnRange {
                family: c.family_name.clone(),
                start: match &c.start_qualifier {
                    Some(StartQualifier::StartQualifierClosed(q)) => Bound::Included(q.to_vec()),
                    Some(StartQualifier::StartQualifierOpen(q)) => Bound::Excluded(q.to_vec()),
                    None => Bound::Unbounded,
                },
                end: match &c.end_qualifier {
                    Some(EndQualifier::EndQualifierClosed(q)) => Bound::Included(q.to_vec()),
                    Some(EndQualifier::EndQualifierOpen(q)) => Bound::Excluded(q.to_vec()),
                    None => Bound::Unbounded,
                },
            }
        }
        F::TimestampRangeFilter(t) => RowFilter::TimestampRange {
            start_us: t.start_timestamp_micros,
            end_us: (t.end_timestamp_micros != 0).then_some(t.end_timestamp_micros),
        },
        F::ValueRegexFilter(r) => RowFilter::ValueRegex(r.to_vec()),
        F::ValueRangeFilter(v) => {
            use data::value_range::{EndValue, StartValue};
            RowFilter::ValueRange {
                start: match &v.start_value {
                    Some(StartValue::StartValueClosed(q)) => Bound::Included(q.to_vec()),
                    Some(StartValue::StartValueOpen(q)) => Bound::Excluded(q.to_vec()),
                    None => Bound::Unbounded,
                },
                end: match &v.end_value {
                    Some(EndValue::EndValueClosed(q)) => Bound::Included(q.to_vec()),
                    Some(EndValue::EndValueOpen(q)) => Bound::Excluded(q.to_vec()),
                    None => Bound::Unbounded,
                },
            }
        }
        F::CellsPerRowOffsetFilter(n) => {
            RowFilter::CellsPerRowOffset(non_negative(*n, "cells_per_row_offset_filter")?)
        }
        F::CellsPerRowLimitFilter(n) => {
            RowFilter::CellsPerRowLimit(non_negative(*n, "cells_per_row_limit_filter")?)
        }
        F::CellsPerColumnLimitFilter(n) => {
            RowFilter::CellsPerColumnLimit(non_negative(*n, "cells_per_column_limit_filter")?)
        }
        F::StripValueTransformer(true) => RowFilter::StripValue,
        F::StripValueTransformer(false) => {
            return Err(invalid("strip_value_transformer must be true when set"));
        }
        F::ApplyLabelTransformer(l) => RowFilter::ApplyLabel(l.clone()),
        F::ValueBitmaskFilter(b) => RowFilter::ValueBitmask(b.mask.to_vec()),
    })
}

fn non_negative(n: i32, field: &str) -> Result<u32, Status> {
    u32::try_from(n).map_err(|_| invalid(format!("{field} must not be negative, got {n}")))
}

/// A GC rule from the admin API.
pub fn gc_rule(r: Option<&admin::GcRule>) -> Result<GcRule, Status> {
    use admin::gc_rule::Rule;
    let Some(rule) = r.and_then(|r| r.rule.as_ref()) else {
        return Ok(GcRule::KeepAll);
    };
    Ok(match rule {
        Rule::MaxNumVersions(n) => GcRule::MaxVersions(
            u32::try_from(*n)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid(format!("max_num_versions must be positive, got {n}")))?,
        ),
        Rule::MaxAge(d) => {
            let us = d
                .seconds
                .saturating_mul(1_000_000)
                .saturating_add(i64::from(d.nanos) / 1000);
            GcRule::MaxAge { max_age_us: us }
        }
        Rule::Intersection(i) => GcRule::Intersection(
            i.rules
                .iter()
                .map(|r| gc_rule(Some(r)))
                .collect::<Result<_, _>>()?,
        ),
        Rule::Union(u) => GcRule::Union(
            u.rules
                .iter()
                .map(|r| gc_rule(Some(r)))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// A family's value type from the admin API.
pub fn value_type(t: Option<&admin::Type>) -> Result<ValueType, Status> {
    use admin::r#type::Kind;
    use admin::r#type::aggregate::Aggregator;
    match t.and_then(|t| t.kind.as_ref()) {
        None | Some(Kind::BytesType(_)) => Ok(ValueType::Bytes),
        Some(Kind::AggregateType(a)) => {
            // Almanac stores aggregate inputs as 8-byte big-endian int64s.
            if let Some(Kind::Int64Type(admin::r#type::Int64 {
                encoding:
                    Some(admin::r#type::int64::Encoding {
                        encoding:
                            Some(admin::r#type::int64::encoding::Encoding::OrderedCodeBytes(_)),
                    }),
            })) = a.input_type.as_ref().and_then(|t| t.kind.as_ref())
            {
                return Err(invalid(
                    "aggregate input_type int64 with ordered_code_bytes encoding is not supported; \
                     Almanac's aggregates take big_endian_bytes int64 inputs",
                ));
            }
            let kind = match a.aggregator {
                Some(Aggregator::Sum(_)) => Aggregate::Sum,
                Some(Aggregator::Min(_)) => Aggregate::Min,
                Some(Aggregator::Max(_)) => Aggregate::Max,
                Some(Aggregator::HllppUniqueCount(_)) => Aggregate::HllCountDistinct,
                None => return Err(invalid("aggregate value_type needs an aggregator")),
            };
            Ok(ValueType::Aggregate(kind))
        }
        Some(_) => Err(invalid(
            "column family value_type must be bytes or an aggregate (Sum, Min, Max, HLL)",
        )),
    }
}

/// A family definition from the admin API.
pub fn family_spec(cf: &admin::ColumnFamily) -> Result<FamilySpec, Status> {
    Ok(FamilySpec {
        gc_rule: gc_rule(cf.gc_rule.as_ref())?,
        value_type: value_type(cf.value_type.as_ref())?,
    })
}

/// Granularity from the admin API.
pub fn granularity(g: i32) -> Result<Granularity, Status> {
    match admin::table::TimestampGranularity::try_from(g) {
        Ok(
            admin::table::TimestampGranularity::Unspecified
            | admin::table::TimestampGranularity::Millis,
        ) => Ok(Granularity::Millis),
        Ok(admin::table::TimestampGranularity::Micros) => Ok(Granularity::Micros),
        Err(_) => Err(invalid(format!("unknown timestamp granularity {g}"))),
    }
}
