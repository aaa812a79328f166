//! Timestream's data model as plain Rust values: records as they arrive (strings, as on
//! the wire), typed values after parsing, and the descriptions of databases and tables.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// A measure's type (`MeasureValueType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum MeasureType {
    /// 64-bit float.
    Double,
    /// 64-bit signed integer.
    Bigint,
    /// UTF-8 text.
    Varchar,
    /// true / false.
    Boolean,
    /// A point in time, stored in nanoseconds since the epoch.
    Timestamp,
    /// Several named values in one record.
    Multi,
}

impl MeasureType {
    /// The wire name (`DOUBLE`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Double => "DOUBLE",
            Self::Bigint => "BIGINT",
            Self::Varchar => "VARCHAR",
            Self::Boolean => "BOOLEAN",
            Self::Timestamp => "TIMESTAMP",
            Self::Multi => "MULTI",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "DOUBLE" => Self::Double,
            "BIGINT" => Self::Bigint,
            "VARCHAR" => Self::Varchar,
            "BOOLEAN" => Self::Boolean,
            "TIMESTAMP" => Self::Timestamp,
            "MULTI" => Self::Multi,
            _ => return None,
        })
    }
}

/// The unit of a record's `Time` (`TimeUnit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeUnit {
    /// Milliseconds since the epoch (the default).
    #[default]
    Milliseconds,
    /// Seconds since the epoch.
    Seconds,
    /// Microseconds since the epoch.
    Microseconds,
    /// Nanoseconds since the epoch.
    Nanoseconds,
}

impl TimeUnit {
    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "MILLISECONDS" => Self::Milliseconds,
            "SECONDS" => Self::Seconds,
            "MICROSECONDS" => Self::Microseconds,
            "NANOSECONDS" => Self::Nanoseconds,
            _ => return None,
        })
    }

    /// Nanoseconds per unit.
    pub fn ns(self) -> i64 {
        match self {
            Self::Seconds => 1_000_000_000,
            Self::Milliseconds => 1_000_000,
            Self::Microseconds => 1_000,
            Self::Nanoseconds => 1,
        }
    }
}

/// A typed measure value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// DOUBLE.
    Double(f64),
    /// BIGINT.
    Bigint(i64),
    /// VARCHAR.
    Varchar(String),
    /// BOOLEAN.
    Boolean(bool),
    /// TIMESTAMP, nanoseconds since the epoch.
    Timestamp(i64),
}

impl Value {
    /// This value's type.
    pub fn kind(&self) -> MeasureType {
        match self {
            Self::Double(_) => MeasureType::Double,
            Self::Bigint(_) => MeasureType::Bigint,
            Self::Varchar(_) => MeasureType::Varchar,
            Self::Boolean(_) => MeasureType::Boolean,
            Self::Timestamp(_) => MeasureType::Timestamp,
        }
    }

    /// Same content: doubles compare by bit pattern, so `-0.0` differs from `0.0`.
    pub fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Double(a), Self::Double(b)) => a.to_bits() == b.to_bits(),
            _ => self == other,
        }
    }

    /// The value as Timestream prints it in query results and as it arrives on the wire.
    pub fn to_wire(&self) -> String {
        match self {
            Self::Double(v) => format!("{v}"),
            Self::Bigint(v) => v.to_string(),
            Self::Varchar(v) => v.clone(),
            Self::Boolean(v) => v.to_string(),
            Self::Timestamp(v) => v.to_string(),
        }
    }
}

/// One dimension as it arrives. Text borrows from the request body where it can
/// (`Cow::Borrowed`), so parsing a request allocates little.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dimension<'a> {
    /// Dimension name.
    pub name: Cow<'a, str>,
    /// Dimension value (always VARCHAR).
    pub value: Cow<'a, str>,
}

/// One named value of a multi-measure record, as it arrives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MeasureValue<'a> {
    /// Attribute name.
    pub name: Cow<'a, str>,
    /// The value as a string.
    pub value: Cow<'a, str>,
    /// Its type name (`DOUBLE`, …); required.
    pub kind: Cow<'a, str>,
}

/// A record as it arrives in WriteRecords (every field optional, as on the wire, so that
/// `CommonAttributes` can fill the gaps).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record<'a> {
    /// Dimensions.
    pub dimensions: Vec<Dimension<'a>>,
    /// Measure name.
    pub measure_name: Option<Cow<'a, str>>,
    /// Single value (for non-MULTI records).
    pub measure_value: Option<Cow<'a, str>>,
    /// Type name of the value (`DOUBLE`, …, `MULTI`).
    pub measure_value_type: Option<Cow<'a, str>>,
    /// Values of a MULTI record.
    pub measure_values: Vec<MeasureValue<'a>>,
    /// Time as an integer string in `time_unit`.
    pub time: Option<Cow<'a, str>>,
    /// Unit name of `time` (`MILLISECONDS` default).
    pub time_unit: Option<Cow<'a, str>>,
    /// Version (default 1).
    pub version: Option<i64>,
}

impl<'a> Dimension<'a> {
    /// A dimension `name = value`.
    pub fn new(name: impl Into<Cow<'a, str>>, value: impl Into<Cow<'a, str>>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

impl<'a> MeasureValue<'a> {
    /// An attribute `name` of type `kind` (`DOUBLE`, …) with its value as text.
    pub fn new(
        name: impl Into<Cow<'a, str>>,
        value: impl Into<Cow<'a, str>>,
        kind: impl Into<Cow<'a, str>>,
    ) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            kind: kind.into(),
        }
    }
}

impl<'a> Record<'a> {
    /// A single-measure record: `measure` of type `kind` (`DOUBLE`, …) with its value
    /// as text, at `time_ms` milliseconds (the default unit), version 1.
    pub fn single(
        dimensions: Vec<Dimension<'a>>,
        measure: impl Into<Cow<'a, str>>,
        kind: impl Into<Cow<'a, str>>,
        value: impl Into<Cow<'a, str>>,
        time_ms: i64,
    ) -> Self {
        Self {
            dimensions,
            measure_name: Some(measure.into()),
            measure_value: Some(value.into()),
            measure_value_type: Some(kind.into()),
            time: Some(time_ms.to_string().into()),
            ..Self::default()
        }
    }

    /// A MULTI record of measure `measure` at `time_ms` milliseconds, version 1.
    pub fn multi(
        dimensions: Vec<Dimension<'a>>,
        measure: impl Into<Cow<'a, str>>,
        values: Vec<MeasureValue<'a>>,
        time_ms: i64,
    ) -> Self {
        Self {
            dimensions,
            measure_name: Some(measure.into()),
            measure_value_type: Some("MULTI".into()),
            measure_values: values,
            time: Some(time_ms.to_string().into()),
            ..Self::default()
        }
    }
}

/// The measures of a parsed record. Names borrow from the request while it is
/// written (`Measures<'a>`); what is read back owns them (`Measures<'static>`).
#[derive(Debug, Clone, PartialEq)]
pub enum Measures<'a> {
    /// One value; its name is the record's measure name.
    Single(Value),
    /// Named values, in the order written.
    Multi(Vec<(Cow<'a, str>, Value)>),
}

impl<'a> Measures<'a> {
    /// MULTI measures of `(name, value)` pairs, in their order.
    pub fn multi<N: Into<Cow<'a, str>>>(values: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self::Multi(values.into_iter().map(|(n, v)| (n.into(), v)).collect())
    }

    /// The same measures owning their names.
    pub fn into_owned(self) -> Measures<'static> {
        match self {
            Self::Single(v) => Measures::Single(v),
            Self::Multi(vs) => Measures::Multi(
                vs.into_iter()
                    .map(|(n, v)| (Cow::Owned(n.into_owned()), v))
                    .collect(),
            ),
        }
    }

    /// Same content (order of multi values does not matter).
    pub fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Single(a), Self::Single(b)) => a.same_as(b),
            (Self::Multi(a), Self::Multi(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|(n, v)| b.iter().any(|(m, w)| m == n && v.same_as(w)))
            }
            _ => false,
        }
    }
}

/// A dimension of a [`Point`]: name and value.
pub type DimensionPair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// A record after validation: what is stored and what is read back. Its text
/// borrows from the request while it is written (`Point<'a>`); what is read back
/// owns it (`Point<'static>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Point<'a> {
    /// Dimensions sorted in the table's dimension order.
    pub dimensions: Vec<DimensionPair<'a>>,
    /// Measure name.
    pub measure_name: Cow<'a, str>,
    /// Nanoseconds since the epoch.
    pub time_ns: i64,
    /// Version (higher wins).
    pub version: i64,
    /// The value or values.
    pub measures: Measures<'a>,
}

impl Point<'_> {
    /// The same point owning its text.
    pub fn into_owned(self) -> Point<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        Point {
            dimensions: self
                .dimensions
                .into_iter()
                .map(|(n, v)| (own(n), own(v)))
                .collect(),
            measure_name: own(self.measure_name),
            time_ns: self.time_ns,
            version: self.version,
            measures: self.measures.into_owned(),
        }
    }
}

/// One rejected record of a WriteRecords request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRecord {
    /// Index of the record in the request.
    pub index: usize,
    /// Why.
    pub reason: String,
    /// The stored version when the rejection is a version conflict.
    pub existing_version: Option<i64>,
}

/// What a WriteRecords request ingested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ingested {
    /// Records written.
    pub total: u64,
    /// Of which within the memory-store window.
    pub memory_store: u64,
    /// Of which older (magnetic-store writes).
    pub magnetic_store: u64,
}

/// Retention of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Hours a record stays in the memory store; writes older than this are rejected
    /// unless magnetic-store writes are enabled.
    pub memory_hours: i64,
    /// Days a record is kept at all; older records are collected.
    pub magnetic_days: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            memory_hours: crate::limits::DEFAULT_MEMORY_RETENTION_HOURS,
            magnetic_days: crate::limits::DEFAULT_MAGNETIC_RETENTION_DAYS,
        }
    }
}

impl Retention {
    /// Nanoseconds of the memory-store window.
    pub fn memory_ns(&self) -> i64 {
        self.memory_hours.saturating_mul(3_600_000_000_000)
    }

    /// Nanoseconds a record is kept.
    pub fn keep_ns(&self) -> i64 {
        self.magnetic_days
            .saturating_mul(86_400_000_000_000)
            .max(self.memory_ns())
    }
}

/// Magnetic-store write settings of a table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MagneticWrites {
    /// Accept records older than the memory-store window.
    pub enabled: bool,
    /// Where rejected reports go on AWS (an S3 location); kept and echoed, not used.
    #[serde(default)]
    pub rejected_report_location: Option<serde_json::Value>,
}

/// A database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseInfo {
    /// Name.
    pub name: String,
    /// KMS key id (echoed; data is not encrypted differently).
    pub kms_key_id: String,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last update, ms since the epoch.
    pub updated_ms: i64,
    /// Tables in it (filled on read).
    #[serde(skip)]
    pub table_count: usize,
    /// Tags ([`crate::tags`]).
    #[serde(default)]
    pub tags: Vec<crate::tags::Tag>,
}
