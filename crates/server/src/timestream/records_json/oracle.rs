//! The oracle of the differential tests: botocore's WriteRecords shapes as serde
//! derives, converted to the model's [`Record`]s.

use std::borrow::Cow;

use almanac_timeseries::{Dimension, MeasureValue, Record};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::WriteRequest;

/// A string member, borrowed from the request body when it has no escapes (the
/// common case), so a WriteRecords body of 100 records allocates little while parsed.
#[derive(Debug, Default)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

fn text(t: Option<Text<'_>>) -> Option<Cow<'_, str>> {
    t.map(|t| t.0)
}

/// `Dimension`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DimensionIn<'a> {
    /// Name.
    #[serde(borrow)]
    pub name: Text<'a>,
    /// Value.
    #[serde(borrow)]
    pub value: Text<'a>,
    /// Always VARCHAR.
    #[serde(borrow)]
    pub dimension_value_type: Option<Text<'a>>,
}

/// `MeasureValue`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct MeasureValueIn<'a> {
    /// Name.
    #[serde(borrow)]
    pub name: Text<'a>,
    /// Value.
    #[serde(borrow)]
    pub value: Text<'a>,
    /// Type.
    #[serde(rename = "Type", borrow)]
    pub kind: Text<'a>,
}

/// `Record` (also `CommonAttributes`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct RecordIn<'a> {
    /// Dimensions.
    #[serde(borrow)]
    pub dimensions: Vec<DimensionIn<'a>>,
    /// Measure name.
    #[serde(borrow)]
    pub measure_name: Option<Text<'a>>,
    /// Single value.
    #[serde(borrow)]
    pub measure_value: Option<Text<'a>>,
    /// Value type.
    #[serde(borrow)]
    pub measure_value_type: Option<Text<'a>>,
    /// Multi values.
    #[serde(borrow)]
    pub measure_values: Vec<MeasureValueIn<'a>>,
    /// Time.
    #[serde(borrow)]
    pub time: Option<Text<'a>>,
    /// Time unit.
    #[serde(borrow)]
    pub time_unit: Option<Text<'a>>,
    /// Version.
    pub version: Option<i64>,
}

impl<'a> From<RecordIn<'a>> for Record<'a> {
    fn from(r: RecordIn<'a>) -> Self {
        Record {
            dimensions: r
                .dimensions
                .into_iter()
                .map(|d| Dimension {
                    name: d.name.0,
                    value: d.value.0,
                })
                .collect(),
            measure_name: text(r.measure_name),
            measure_value: text(r.measure_value),
            measure_value_type: text(r.measure_value_type),
            measure_values: r
                .measure_values
                .into_iter()
                .map(|m| MeasureValue {
                    name: m.name.0,
                    value: m.value.0,
                    kind: m.kind.0,
                })
                .collect(),
            time: text(r.time),
            time_unit: text(r.time_unit),
            version: r.version,
        }
    }
}

/// The members of a WriteRecords body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct WriteRecordsIn<'a> {
    /// Database.
    pub database_name: Option<String>,
    /// Table.
    pub table_name: Option<String>,
    /// Common attributes.
    #[serde(borrow)]
    pub common_attributes: Option<RecordIn<'a>>,
    /// Records.
    #[serde(borrow)]
    pub records: Vec<RecordIn<'a>>,
}

impl<'a> From<WriteRecordsIn<'a>> for WriteRequest<'a> {
    fn from(r: WriteRecordsIn<'a>) -> Self {
        WriteRequest {
            database_name: r.database_name,
            table_name: r.table_name,
            common_attributes: r.common_attributes.map(Into::into),
            records: r.records.into_iter().map(Into::into).collect(),
        }
    }
}
