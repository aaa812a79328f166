//! Engine types to the Bigtable protos: the requests a remote store sends, and the
//! schemas the server's GetTable answers; and the one answer a remote store translates
//! back, a table's schema ([`table_info`]). The server's `convert.rs` translates
//! requests the other way.

use std::ops::Bound;
use std::sync::Arc;

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::v2 as data;
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::{AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::schema::{Aggregate, FamilySpec, GcRule, Granularity, TableInfo, ValueType};
use almanac_engine::{Cell, Row};

/// Microseconds in a second.
const MICROS_PER_SEC: i64 = 1_000_000;

/// A GC rule for the admin API (`None` for keep-all).
pub fn gc_rule(r: &GcRule) -> Option<admin::GcRule> {
    use admin::gc_rule::{Intersection, Rule, Union};
    let list = |rs: &[GcRule]| -> Vec<admin::GcRule> {
        rs.iter().map(|x| gc_rule(x).unwrap_or_default()).collect()
    };
    let rule = match r {
        GcRule::KeepAll => return None,
        GcRule::MaxVersions(n) => Rule::MaxNumVersions(i32::try_from(*n).unwrap_or(i32::MAX)),
        GcRule::MaxAge { max_age_us } => Rule::MaxAge(prost_types::Duration {
            seconds: max_age_us / MICROS_PER_SEC,
            nanos: ((max_age_us % MICROS_PER_SEC) * 1000) as i32,
        }),
        GcRule::Intersection(rs) => Rule::Intersection(Intersection { rules: list(rs) }),
        GcRule::Union(rs) => Rule::Union(Union { rules: list(rs) }),
    };
    Some(admin::GcRule { rule: Some(rule) })
}

/// A family's value type for the admin API.
pub fn value_type(v: ValueType) -> Option<admin::Type> {
    use admin::r#type::aggregate::{Aggregator, HyperLogLogPlusPlusUniqueCount, Max, Min, Sum};
    use admin::r#type::{Aggregate as Agg, Int64, Kind, int64};
    let ValueType::Aggregate(kind) = v else {
        return None;
    };
    let aggregator = match kind {
        Aggregate::Sum => Aggregator::Sum(Sum {}),
        Aggregate::Min => Aggregator::Min(Min {}),
        Aggregate::Max => Aggregator::Max(Max {}),
        Aggregate::HllCountDistinct => {
            Aggregator::HllppUniqueCount(HyperLogLogPlusPlusUniqueCount {})
        }
    };
    let int64 = admin::Type {
        kind: Some(Kind::Int64Type(Int64 {
            encoding: Some(int64::Encoding {
                encoding: Some(int64::encoding::Encoding::BigEndianBytes(
                    int64::encoding::BigEndianBytes::default(),
                )),
            }),
        })),
    };
    // Almanac's aggregates all take int64 inputs (HLL also hashes raw bytes).
    let input = Some(Box::new(int64.clone()));
    Some(admin::Type {
        kind: Some(Kind::AggregateType(Box::new(Agg {
            input_type: input,
            state_type: Some(Box::new(int64)),
            aggregator: Some(aggregator),
        }))),
    })
}

/// One rule of ReadModifyWriteRow.
pub fn read_modify_write_rule(r: &ReadModifyWriteRule) -> data::ReadModifyWriteRule {
    use data::read_modify_write_rule::Rule;
    data::ReadModifyWriteRule {
        family_name: r.family.clone(),
        column_qualifier: r.qualifier.clone().into(),
        rule: Some(match &r.op {
            ReadModifyWriteOp::Append(bytes) => Rule::AppendValue(bytes.clone().into()),
            ReadModifyWriteOp::Increment(n) => Rule::IncrementAmount(*n),
        }),
    }
}

/// The row a ReadModifyWriteRow answered, as the engine's row (cells in the order the
/// service lists them: family, column, newest first).
pub fn row_of(row: data::Row) -> Row {
    let mut cells = Vec::new();
    for family in row.families {
        let name: Arc<str> = Arc::from(family.name.as_str());
        for column in family.columns {
            let qualifier: Arc<[u8]> = Arc::from(&column.qualifier[..]);
            for cell in column.cells {
                cells.push(Cell {
                    family: Arc::clone(&name),
                    qualifier: Arc::clone(&qualifier),
                    timestamp_us: cell.timestamp_micros,
                    value: cell.value.to_vec(),
                    labels: cell.labels,
                });
            }
        }
    }
    Row {
        key: row.key.to_vec(),
        cells,
    }
}

/// A table's schema as GetTable (`SCHEMA_VIEW`) answered it: families in name order
/// (the API keeps them in a map), their GC rules and value types, and the granularity.
pub fn table_info(instance: &str, name: &str, table: &admin::Table) -> TableInfo {
    let mut families: Vec<(String, FamilySpec)> = table
        .column_families
        .iter()
        .map(|(id, cf)| {
            let spec = FamilySpec {
                gc_rule: cf.gc_rule.as_ref().map_or(GcRule::KeepAll, gc_rule_of),
                value_type: value_type_of(cf.value_type.as_ref()),
            };
            (id.clone(), spec)
        })
        .collect();
    families.sort_by(|a, b| a.0.cmp(&b.0));
    let granularity = if table.granularity == admin::table::TimestampGranularity::Micros as i32 {
        Granularity::Micros
    } else {
        Granularity::Millis
    };
    TableInfo {
        instance: instance.to_string(),
        name: name.to_string(),
        families,
        granularity,
        deletion_protection: table.deletion_protection,
        change_retention_us: None,
    }
}

/// The engine's form of an admin API GC rule.
fn gc_rule_of(r: &admin::GcRule) -> GcRule {
    use admin::gc_rule::Rule;
    let list = |rs: &[admin::GcRule]| rs.iter().map(gc_rule_of).collect();
    match &r.rule {
        None => GcRule::KeepAll,
        Some(Rule::MaxNumVersions(n)) => GcRule::MaxVersions(u32::try_from(*n).unwrap_or(1)),
        Some(Rule::MaxAge(d)) => GcRule::MaxAge {
            max_age_us: d
                .seconds
                .saturating_mul(MICROS_PER_SEC)
                .saturating_add(i64::from(d.nanos) / 1000),
        },
        Some(Rule::Intersection(i)) => GcRule::Intersection(list(&i.rules)),
        Some(Rule::Union(u)) => GcRule::Union(list(&u.rules)),
    }
}

/// A family's value type: an int64 aggregate's kind, else bytes (how SQL shows any
/// other type's cells).
fn value_type_of(t: Option<&admin::Type>) -> ValueType {
    use admin::r#type::Kind;
    use admin::r#type::aggregate::Aggregator;
    let Some(Kind::AggregateType(a)) = t.and_then(|t| t.kind.as_ref()) else {
        return ValueType::Bytes;
    };
    match a.aggregator {
        Some(Aggregator::Sum(_)) => ValueType::Aggregate(Aggregate::Sum),
        Some(Aggregator::Min(_)) => ValueType::Aggregate(Aggregate::Min),
        Some(Aggregator::Max(_)) => ValueType::Aggregate(Aggregate::Max),
        Some(Aggregator::HllppUniqueCount(_)) => ValueType::Aggregate(Aggregate::HllCountDistinct),
        None => ValueType::Bytes,
    }
}

/// One mutation for MutateRow(s) or CheckAndMutateRow.
pub fn mutation(m: &Mutation) -> data::Mutation {
    use data::mutation::{
        AddToCell, DeleteFromColumn, DeleteFromFamily, DeleteFromRow, MergeToCell, Mutation as M,
        SetCell,
    };
    let inner = match m {
        Mutation::SetCell {
            family,
            qualifier,
            timestamp_us,
            value,
        } => M::SetCell(SetCell {
            family_name: family.clone(),
            column_qualifier: qualifier.clone().into(),
            timestamp_micros: *timestamp_us,
            value: value.clone().into(),
        }),
        Mutation::DeleteFromColumn {
            family,
            qualifier,
            start_us,
            end_us,
        } => M::DeleteFromColumn(DeleteFromColumn {
            family_name: family.clone(),
            column_qualifier: qualifier.clone().into(),
            time_range: Some(data::TimestampRange {
                start_timestamp_micros: *start_us,
                end_timestamp_micros: end_us.unwrap_or(0),
            }),
        }),
        Mutation::DeleteFromFamily { family } => M::DeleteFromFamily(DeleteFromFamily {
            family_name: family.clone(),
        }),
        Mutation::DeleteFromRow => M::DeleteFromRow(DeleteFromRow {}),
        Mutation::AddToCell {
            family,
            qualifier,
            timestamp_us,
            input,
        } => M::AddToCell(AddToCell {
            family_name: family.clone(),
            column_qualifier: Some(raw_value(qualifier.clone())),
            timestamp: Some(timestamp_value(*timestamp_us)),
            input: Some(input_value(input)),
        }),
        Mutation::MergeToCell {
            family,
            qualifier,
            timestamp_us,
            input,
        } => M::MergeToCell(MergeToCell {
            family_name: family.clone(),
            column_qualifier: Some(raw_value(qualifier.clone())),
            timestamp: Some(timestamp_value(*timestamp_us)),
            input: Some(input_value(input)),
        }),
    };
    data::Mutation {
        mutation: Some(inner),
        ..Default::default()
    }
}

fn raw_value(b: Vec<u8>) -> data::Value {
    data::Value {
        kind: Some(data::value::Kind::RawValue(b.into())),
        ..Default::default()
    }
}

fn timestamp_value(us: i64) -> data::Value {
    data::Value {
        kind: Some(data::value::Kind::RawTimestampMicros(us)),
        ..Default::default()
    }
}

fn input_value(input: &AggregateInput) -> data::Value {
    match input {
        AggregateInput::Int(i) => data::Value {
            kind: Some(data::value::Kind::IntValue(*i)),
            ..Default::default()
        },
        AggregateInput::Bytes(b) => raw_value(b.clone()),
    }
}

/// Whether sending the mutation twice leaves the row as sending it once: what a retry
/// of a failed entry needs. A server timestamp or an aggregate input is not.
pub fn idempotent(m: &Mutation) -> bool {
    match m {
        Mutation::SetCell { timestamp_us, .. } => *timestamp_us >= 0,
        Mutation::DeleteFromColumn { .. }
        | Mutation::DeleteFromFamily { .. }
        | Mutation::DeleteFromRow => true,
        Mutation::AddToCell { .. } | Mutation::MergeToCell { .. } => false,
    }
}

/// A row set for ReadRows; `None` when it reads every row.
pub fn row_set(rs: &RowSet) -> Option<data::RowSet> {
    if rs.keys.is_empty() && rs.ranges.is_empty() {
        return None;
    }
    Some(data::RowSet {
        row_keys: rs.keys.iter().map(|k| k.clone().into()).collect(),
        row_ranges: rs.ranges.iter().map(row_range).collect(),
    })
}

fn row_range(r: &RowRange) -> data::RowRange {
    use data::row_range::{EndKey, StartKey};
    data::RowRange {
        start_key: match &r.start {
            Bound::Included(k) => Some(StartKey::StartKeyClosed(k.clone().into())),
            Bound::Excluded(k) => Some(StartKey::StartKeyOpen(k.clone().into())),
            Bound::Unbounded => None,
        },
        end_key: match &r.end {
            Bound::Included(k) => Some(EndKey::EndKeyClosed(k.clone().into())),
            Bound::Excluded(k) => Some(EndKey::EndKeyOpen(k.clone().into())),
            Bound::Unbounded => None,
        },
    }
}

/// A filter for ReadRows or CheckAndMutateRow's predicate.
pub fn filter(f: &RowFilter) -> data::RowFilter {
    use data::row_filter::{Chain, Condition, Filter as F, Interleave};
    let list = |fs: &[RowFilter]| fs.iter().map(filter).collect::<Vec<_>>();
    let boxed = |f: &Option<Box<RowFilter>>| f.as_deref().map(|f| Box::new(filter(f)));
    let inner = match f {
        RowFilter::Chain(c) => F::Chain(Chain { filters: list(c) }),
        RowFilter::Interleave(c) => F::Interleave(Interleave { filters: list(c) }),
        RowFilter::Condition {
            predicate,
            true_filter,
            false_filter,
        } => F::Condition(Box::new(Condition {
            predicate_filter: Some(Box::new(filter(predicate))),
            true_filter: boxed(true_filter),
            false_filter: boxed(false_filter),
        })),
        RowFilter::Sink => F::Sink(true),
        RowFilter::PassAll => F::PassAllFilter(true),
        RowFilter::BlockAll => F::BlockAllFilter(true),
        RowFilter::RowKeyRegex(r) => F::RowKeyRegexFilter(r.clone().into()),
        RowFilter::RowSample(p) => F::RowSampleFilter(*p),
        RowFilter::FamilyNameRegex(r) => F::FamilyNameRegexFilter(r.clone()),
        RowFilter::ColumnQualifierRegex(r) => F::ColumnQualifierRegexFilter(r.clone().into()),
        RowFilter::ColumnRange { family, start, end } => {
            use data::column_range::{EndQualifier, StartQualifier};
            F::ColumnRangeFilter(data::ColumnRange {
                family_name: family.clone(),
                start_qualifier: match start {
                    Bound::Included(q) => {
                        Some(StartQualifier::StartQualifierClosed(q.clone().into()))
                    }
                    Bound::Excluded(q) => {
                        Some(StartQualifier::StartQualifierOpen(q.clone().into()))
                    }
                    Bound::Unbounded => None,
                },
                end_qualifier: match end {
                    Bound::Included(q) => Some(EndQualifier::EndQualifierClosed(q.clone().into())),
                    Bound::Excluded(q) => Some(EndQualifier::EndQualifierOpen(q.clone().into())),
                    Bound::Unbounded => None,
                },
            })
        }
        RowFilter::TimestampRange { start_us, end_us } => {
            F::TimestampRangeFilter(data::TimestampRange {
                start_timestamp_micros: *start_us,
                end_timestamp_micros: end_us.unwrap_or(0),
            })
        }
        RowFilter::ValueRegex(r) => F::ValueRegexFilter(r.clone().into()),
        RowFilter::ValueRange { start, end } => {
            use data::value_range::{EndValue, StartValue};
            F::ValueRangeFilter(data::ValueRange {
                start_value: match start {
                    Bound::Included(v) => Some(StartValue::StartValueClosed(v.clone().into())),
                    Bound::Excluded(v) => Some(StartValue::StartValueOpen(v.clone().into())),
                    Bound::Unbounded => None,
                },
                end_value: match end {
                    Bound::Included(v) => Some(EndValue::EndValueClosed(v.clone().into())),
                    Bound::Excluded(v) => Some(EndValue::EndValueOpen(v.clone().into())),
                    Bound::Unbounded => None,
                },
            })
        }
        RowFilter::CellsPerRowOffset(n) => F::CellsPerRowOffsetFilter(clamp(*n)),
        RowFilter::CellsPerRowLimit(n) => F::CellsPerRowLimitFilter(clamp(*n)),
        RowFilter::CellsPerColumnLimit(n) => F::CellsPerColumnLimitFilter(clamp(*n)),
        RowFilter::ValueBitmask(mask) => F::ValueBitmaskFilter(data::ValueBitmask {
            mask: mask.clone().into(),
        }),
        RowFilter::StripValue => F::StripValueTransformer(true),
        RowFilter::ApplyLabel(l) => F::ApplyLabelTransformer(l.clone()),
    };
    data::RowFilter {
        filter: Some(inner),
    }
}

fn clamp(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `rows` without the ranges that hold no key (a start past its end, which the service
/// refuses); `None` when nothing is left of a set that named rows.
pub fn nonempty(rows: &RowSet) -> Option<RowSet> {
    if rows.keys.is_empty() && rows.ranges.is_empty() {
        return Some(RowSet::all());
    }
    let ranges: Vec<RowRange> = rows
        .ranges
        .iter()
        .filter(|r| !r.is_empty())
        .cloned()
        .collect();
    (!rows.keys.is_empty() || !ranges.is_empty()).then(|| RowSet {
        keys: rows.keys.clone(),
        ranges,
    })
}

/// The part of `rows` after `last` (a row already delivered), in read order: keys past
/// it and ranges cut at it. `None` when nothing is left, which must not become an
/// empty row set (that would read every row).
pub fn rows_after(rows: &RowSet, last: &[u8], reversed: bool) -> Option<RowSet> {
    let all = rows.keys.is_empty() && rows.ranges.is_empty();
    let ranges = if all {
        vec![RowRange {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }]
    } else {
        rows.ranges.clone()
    };
    let keys: Vec<Vec<u8>> = rows
        .keys
        .iter()
        .filter(|k| {
            if reversed {
                k.as_slice() < last
            } else {
                k.as_slice() > last
            }
        })
        .cloned()
        .collect();
    let ranges: Vec<RowRange> = ranges
        .into_iter()
        .filter_map(|mut r| {
            if reversed {
                if !below_end(&r.end, last) {
                    r.end = Bound::Excluded(last.to_vec());
                }
            } else if !above_start(&r.start, last) {
                r.start = Bound::Excluded(last.to_vec());
            }
            (!r.is_empty()).then_some(r)
        })
        .collect();
    (!keys.is_empty() || !ranges.is_empty()).then_some(RowSet { keys, ranges })
}

/// Whether every key of a range starting at `start` lies after `last`.
fn above_start(start: &Bound<Vec<u8>>, last: &[u8]) -> bool {
    match start {
        Bound::Included(s) => s.as_slice() > last,
        Bound::Excluded(s) => s.as_slice() >= last,
        Bound::Unbounded => false,
    }
}

/// Whether every key of a range ending at `end` lies before `last`.
fn below_end(end: &Bound<Vec<u8>>, last: &[u8]) -> bool {
    match end {
        Bound::Included(e) => e.as_slice() < last,
        Bound::Excluded(e) => e.as_slice() <= last,
        Bound::Unbounded => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: Bound<&[u8]>, end: Bound<&[u8]>) -> RowRange {
        RowRange {
            start: start.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn a_schema_reads_back_as_it_was_sent() {
        let families = vec![
            (
                "a".to_string(),
                FamilySpec {
                    gc_rule: GcRule::Union(vec![
                        GcRule::MaxVersions(3),
                        GcRule::MaxAge {
                            max_age_us: 86_400_000_123,
                        },
                    ]),
                    value_type: ValueType::Bytes,
                },
            ),
            (
                "b".to_string(),
                FamilySpec {
                    gc_rule: GcRule::KeepAll,
                    value_type: ValueType::Aggregate(Aggregate::Max),
                },
            ),
            (
                "c".to_string(),
                FamilySpec {
                    gc_rule: GcRule::Intersection(vec![GcRule::MaxVersions(1)]),
                    value_type: ValueType::Aggregate(Aggregate::HllCountDistinct),
                },
            ),
        ];
        let table = admin::Table {
            column_families: families
                .iter()
                .map(|(name, f)| {
                    let cf = admin::ColumnFamily {
                        gc_rule: gc_rule(&f.gc_rule),
                        value_type: value_type(f.value_type),
                    };
                    (name.clone(), cf)
                })
                .collect(),
            granularity: admin::table::TimestampGranularity::Micros as i32,
            ..Default::default()
        };
        let info = table_info("projects/p/instances/i", "t", &table);
        assert_eq!(info.families, families);
        assert_eq!(info.granularity, Granularity::Micros);
        assert_eq!(
            (info.instance.as_str(), info.name.as_str()),
            ("projects/p/instances/i", "t")
        );
    }

    #[test]
    fn rows_after_cuts_forward_reads() {
        let rows = RowSet {
            keys: vec![b"a".to_vec(), b"m".to_vec()],
            ranges: vec![
                range(Bound::Included(b"b"), Bound::Excluded(b"d")),
                range(Bound::Included(b"k"), Bound::Unbounded),
            ],
        };
        let left = rows_after(&rows, b"c", false);
        assert_eq!(
            left,
            Some(RowSet {
                keys: vec![b"m".to_vec()],
                ranges: vec![
                    range(Bound::Excluded(b"c"), Bound::Excluded(b"d")),
                    range(Bound::Included(b"k"), Bound::Unbounded),
                ],
            })
        );
        // Past the last range's end nothing is left: not an empty set, which reads all.
        let done = RowSet {
            keys: vec![b"a".to_vec()],
            ranges: vec![range(Bound::Included(b"b"), Bound::Included(b"c"))],
        };
        assert_eq!(rows_after(&done, b"c", false), None);
    }

    #[test]
    fn empty_ranges_are_not_sent() {
        let inverted = RowSet {
            keys: vec![],
            ranges: vec![range(Bound::Included(b"b"), Bound::Excluded(b"a"))],
        };
        assert_eq!(nonempty(&inverted), None);
        assert_eq!(nonempty(&RowSet::all()), Some(RowSet::all()));
        let mixed = RowSet {
            keys: vec![b"k".to_vec()],
            ranges: inverted.ranges.clone(),
        };
        assert_eq!(nonempty(&mixed), Some(RowSet::key(b"k".to_vec())));
    }

    #[test]
    fn rows_after_cuts_reversed_reads_and_whole_tables() {
        let all = RowSet::all();
        assert_eq!(
            rows_after(&all, b"q", true),
            Some(RowSet {
                keys: vec![],
                ranges: vec![range(Bound::Unbounded, Bound::Excluded(b"q"))],
            })
        );
        let rows = RowSet {
            keys: vec![b"a".to_vec(), b"z".to_vec()],
            ranges: vec![range(Bound::Included(b"c"), Bound::Included(b"f"))],
        };
        assert_eq!(
            rows_after(&rows, b"c", true),
            Some(RowSet {
                keys: vec![b"a".to_vec()],
                ranges: vec![],
            })
        );
    }
}
