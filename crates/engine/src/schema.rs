//! Table and column-family schema: GC rules, value types, timestamp granularity,
//! and the naming rules of Bigtable's admin API.

use crate::error::{Error, Result};
use crate::limits::{MAX_FAMILY_NAME_CHARS, MAX_GC_RULE_BYTES, MAX_TABLE_ID_CHARS};

/// A garbage-collection rule, as `google.bigtable.admin.v2.GcRule`.
///
/// A cell is collected when the rule says so; Almanac hides collected cells on
/// every read and reclaims their space in the background sweep.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GcRule {
    /// Keep everything (no rule set).
    #[default]
    KeepAll,
    /// Keep at most this many versions per column (newest first).
    MaxVersions(u32),
    /// Collect cells older than this many microseconds before now.
    MaxAge {
        /// Age limit in microseconds.
        max_age_us: i64,
    },
    /// Collect a cell only when every nested rule would.
    Intersection(Vec<GcRule>),
    /// Collect a cell when any nested rule would.
    Union(Vec<GcRule>),
}

impl GcRule {
    /// Whether the cell at `version_index` (0 = newest in its column) with timestamp
    /// `ts_us` is collected at `now_us`.
    pub fn collects(&self, version_index: usize, ts_us: i64, now_us: i64) -> bool {
        match self {
            GcRule::KeepAll => false,
            GcRule::MaxVersions(n) => version_index >= *n as usize,
            GcRule::MaxAge { max_age_us } => ts_us < now_us.saturating_sub(*max_age_us),
            GcRule::Intersection(rules) => {
                !rules.is_empty()
                    && rules
                        .iter()
                        .all(|r| r.collects(version_index, ts_us, now_us))
            }
            GcRule::Union(rules) => rules
                .iter()
                .any(|r| r.collects(version_index, ts_us, now_us)),
        }
    }

    /// Whether the rule can collect by version count (so reads must count versions).
    pub fn counts_versions(&self) -> bool {
        match self {
            GcRule::KeepAll | GcRule::MaxAge { .. } => false,
            GcRule::MaxVersions(_) => true,
            GcRule::Intersection(r) | GcRule::Union(r) => r.iter().any(GcRule::counts_versions),
        }
    }

    /// Whether the rule ever collects anything.
    pub fn is_keep_all(&self) -> bool {
        match self {
            GcRule::KeepAll => true,
            GcRule::MaxVersions(_) | GcRule::MaxAge { .. } => false,
            GcRule::Intersection(r) => r.is_empty() || r.iter().any(GcRule::is_keep_all),
            GcRule::Union(r) => r.iter().all(GcRule::is_keep_all),
        }
    }

    /// The age a cell must pass before the rule can collect it (µs): `Some(i64::MAX)` for
    /// a rule that never collects, `None` for one that can collect a cell of any age
    /// (a version count alone decides).
    pub fn min_age_to_collect_us(&self) -> Option<i64> {
        match self {
            GcRule::KeepAll => Some(i64::MAX),
            GcRule::MaxVersions(_) => None,
            GcRule::MaxAge { max_age_us } => Some(*max_age_us),
            // Collected only when every nested rule collects: past the oldest age any
            // of them asks for.
            GcRule::Intersection(r) if r.is_empty() => Some(i64::MAX),
            GcRule::Intersection(r) => r.iter().filter_map(GcRule::min_age_to_collect_us).max(),
            // Collected when any nested rule collects: past the youngest age, if every
            // one of them asks for one.
            GcRule::Union(r) => r
                .iter()
                .map(GcRule::min_age_to_collect_us)
                .try_fold(i64::MAX, |m, a| a.map(|a| m.min(a))),
        }
    }

    /// Checks the rule against Bigtable's rules: positive versions and ages, and a
    /// serialized size within [`MAX_GC_RULE_BYTES`].
    pub fn validate(&self) -> Result<()> {
        let size = self.encoded_len();
        if size > MAX_GC_RULE_BYTES {
            return Err(Error::limit(
                "GC rule size in bytes",
                size,
                MAX_GC_RULE_BYTES,
            ));
        }
        self.validate_values()
    }

    fn validate_values(&self) -> Result<()> {
        match self {
            GcRule::KeepAll => Ok(()),
            GcRule::MaxVersions(0) => Err(Error::Invalid(
                "GC rule max_num_versions must be at least 1".into(),
            )),
            GcRule::MaxVersions(_) => Ok(()),
            GcRule::MaxAge { max_age_us } if *max_age_us <= 0 => {
                Err(Error::Invalid("GC rule max_age must be positive".into()))
            }
            GcRule::MaxAge { max_age_us } if max_age_us % 1000 != 0 => Err(Error::Invalid(
                "GC rule max_age must be a whole number of milliseconds".into(),
            )),
            GcRule::MaxAge { .. } => Ok(()),
            GcRule::Intersection(r) | GcRule::Union(r) => {
                r.iter().try_for_each(GcRule::validate_values)
            }
        }
    }

    /// Size of the rule as the admin API's protobuf would serialize it (field tag,
    /// length and payload per node), which is what the 500-byte limit counts.
    pub fn encoded_len(&self) -> usize {
        fn varint_len(mut v: u64) -> usize {
            let mut n = 1;
            while v >= 0x80 {
                v >>= 7;
                n += 1;
            }
            n
        }
        fn nested(len: usize) -> usize {
            1 + varint_len(len as u64) + len
        }
        match self {
            GcRule::KeepAll => 0,
            GcRule::MaxVersions(n) => 1 + varint_len(u64::from(*n)),
            GcRule::MaxAge { max_age_us } => {
                let secs = max_age_us / 1_000_000;
                let nanos = (max_age_us % 1_000_000) * 1000;
                let mut body = 0;
                if secs != 0 {
                    body += 1 + varint_len(secs as u64);
                }
                if nanos != 0 {
                    body += 1 + varint_len(nanos as u64);
                }
                nested(body)
            }
            GcRule::Intersection(r) | GcRule::Union(r) => {
                let body: usize = r.iter().map(|x| nested(x.encoded_len())).sum();
                nested(body)
            }
        }
    }
}

/// Aggregate column families merge `AddToCell`/`MergeToCell` into one cell per timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// int64 sum (values are 8-byte big-endian).
    Sum,
    /// int64 minimum.
    Min,
    /// int64 maximum.
    Max,
    /// HyperLogLog++ count-distinct sketch of the inputs.
    HllCountDistinct,
}

/// What a family's cells hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValueType {
    /// Plain bytes: SetCell writes, aggregates are rejected.
    #[default]
    Bytes,
    /// An aggregate: AddToCell/MergeToCell merge, SetCell is rejected.
    Aggregate(Aggregate),
}

impl ValueType {
    /// The type in words, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            ValueType::Bytes => "plain bytes",
            ValueType::Aggregate(Aggregate::Sum) => "an int64 sum aggregate",
            ValueType::Aggregate(Aggregate::Min) => "an int64 min aggregate",
            ValueType::Aggregate(Aggregate::Max) => "an int64 max aggregate",
            ValueType::Aggregate(Aggregate::HllCountDistinct) => {
                "a HyperLogLog++ count-distinct aggregate"
            }
        }
    }
}

/// Timestamp granularity of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Granularity {
    /// Timestamps must be multiples of 1000 µs (Bigtable's default).
    #[default]
    Millis,
    /// Any microsecond timestamp.
    Micros,
}

/// A column family's definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FamilySpec {
    /// Garbage-collection rule.
    pub gc_rule: GcRule,
    /// Value type (plain bytes or an aggregate).
    pub value_type: ValueType,
}

/// Parameters of a new table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableSpec {
    /// Families to create with the table, in order.
    pub families: Vec<(String, FamilySpec)>,
    /// Timestamp granularity.
    pub granularity: Granularity,
    /// Whether the table starts protected from deletion.
    pub deletion_protection: bool,
    /// The change stream's retention (µs), if the table starts with one.
    pub change_retention_us: Option<i64>,
}

/// A change to one family, as `ModifyColumnFamiliesRequest.Modification`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FamilyChange {
    /// Create a family.
    Create(String, FamilySpec),
    /// Replace a family's GC rule (its value type cannot change).
    Update(String, GcRule),
    /// Name a family's value type, as an update whose mask holds `value_type`: the type
    /// is set when the family is created and is immutable afterwards, so the same type
    /// is accepted (nothing changes) and any other is refused.
    SetValueType(String, ValueType),
    /// Drop a family and all its data.
    Drop(String),
}

/// A table as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Namespace of the table, such as `projects/p/instances/i`.
    pub instance: String,
    /// Table id within the instance.
    pub name: String,
    /// Families in creation order.
    pub families: Vec<(String, FamilySpec)>,
    /// Timestamp granularity.
    pub granularity: Granularity,
    /// Whether the table is protected from deletion (DeleteTable and family drops
    /// fail with [`crate::Error::Precondition`]).
    pub deletion_protection: bool,
    /// How long the table's change stream keeps changes (µs); `None`: no change stream.
    pub change_retention_us: Option<i64>,
}

/// Checks a table id against Bigtable's rule: 1 to 50 characters of
/// `[_a-zA-Z0-9][-_.a-zA-Z0-9]*`.
pub fn validate_table_id(id: &str) -> Result<()> {
    let chars = id.chars().count();
    if chars == 0 {
        return Err(Error::Invalid("table id must not be empty".into()));
    }
    if chars > MAX_TABLE_ID_CHARS {
        return Err(Error::limit(
            "table id length in characters",
            chars,
            MAX_TABLE_ID_CHARS,
        ));
    }
    let mut it = id.chars();
    let first_ok = it
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphanumeric());
    let rest_ok = it.all(|c| c == '-' || c == '_' || c == '.' || c.is_ascii_alphanumeric());
    if !(first_ok && rest_ok) {
        return Err(Error::Invalid(format!(
            "table id {id:?} must match [_a-zA-Z0-9][-_.a-zA-Z0-9]*"
        )));
    }
    Ok(())
}

/// Checks a family name against Bigtable's rule: 1 to 64 characters of `[-_.a-zA-Z0-9]`.
pub fn validate_family_name(name: &str) -> Result<()> {
    let chars = name.chars().count();
    if chars == 0 {
        return Err(Error::Invalid(
            "column family name must not be empty".into(),
        ));
    }
    if chars > MAX_FAMILY_NAME_CHARS {
        return Err(Error::limit(
            "column family name length in characters",
            chars,
            MAX_FAMILY_NAME_CHARS,
        ));
    }
    if !name
        .chars()
        .all(|c| c == '-' || c == '_' || c == '.' || c.is_ascii_alphanumeric())
    {
        return Err(Error::Invalid(format!(
            "column family name {name:?} must match [-_.a-zA-Z0-9]+"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_age_a_rule_needs_before_it_collects() {
        let age = |a| GcRule::MaxAge { max_age_us: a };
        assert_eq!(GcRule::KeepAll.min_age_to_collect_us(), Some(i64::MAX));
        assert_eq!(GcRule::MaxVersions(1).min_age_to_collect_us(), None);
        assert_eq!(age(5).min_age_to_collect_us(), Some(5));
        let both = GcRule::Intersection(vec![GcRule::MaxVersions(2), age(5), age(9)]);
        assert_eq!(both.min_age_to_collect_us(), Some(9));
        let either = GcRule::Union(vec![age(5), age(9)]);
        assert_eq!(either.min_age_to_collect_us(), Some(5));
        let versions = GcRule::Union(vec![age(5), GcRule::MaxVersions(2)]);
        assert_eq!(versions.min_age_to_collect_us(), None);
        assert_eq!(
            GcRule::Intersection(vec![GcRule::MaxVersions(2)]).min_age_to_collect_us(),
            None
        );
        // Never collects a cell younger than the age it gives.
        for rule in [both, either] {
            let a = rule.min_age_to_collect_us().unwrap_or_default();
            assert!(!rule.collects(7, 100 - a, 100));
        }
    }

    #[test]
    fn nested_rules_collect_like_the_admin_api_says() {
        let rule = GcRule::Union(vec![
            GcRule::MaxVersions(2),
            GcRule::MaxAge {
                max_age_us: 1_000_000,
            },
        ]);
        assert!(!rule.collects(0, 10_000_000, 10_500_000));
        assert!(
            rule.collects(2, 10_000_000, 10_500_000),
            "third version goes"
        );
        assert!(rule.collects(0, 1_000_000, 10_500_000), "too old goes");
        let rule = GcRule::Intersection(vec![
            GcRule::MaxVersions(2),
            GcRule::MaxAge {
                max_age_us: 1_000_000,
            },
        ]);
        assert!(
            !rule.collects(2, 10_000_000, 10_500_000),
            "young third version stays"
        );
        assert!(
            !rule.collects(0, 1_000_000, 10_500_000),
            "old first version stays"
        );
        assert!(rule.collects(2, 1_000_000, 10_500_000));
    }

    #[test]
    fn gc_rule_size_limit_is_enforced() {
        let big = GcRule::Union((0..200).map(|_| GcRule::MaxVersions(1)).collect());
        assert!(big.encoded_len() > MAX_GC_RULE_BYTES);
        assert!(matches!(big.validate(), Err(Error::Invalid(m)) if m.contains("500")));
        let ok = GcRule::Union((0..100).map(|_| GcRule::MaxVersions(1)).collect());
        assert!(ok.encoded_len() <= MAX_GC_RULE_BYTES);
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn names_follow_bigtable_rules() {
        assert!(validate_table_id("_a-b.c").is_ok());
        assert!(validate_table_id("-a").is_err());
        assert!(validate_table_id(&"a".repeat(50)).is_ok());
        assert!(validate_table_id(&"a".repeat(51)).is_err());
        assert!(validate_family_name("cf-1.x_y").is_ok());
        assert!(validate_family_name("c f").is_err());
        assert!(validate_family_name("").is_err());
    }
}
