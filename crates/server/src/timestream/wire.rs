//! Request shapes of `timestream-write` (botocore `timestream-write/2018-11-01`) as
//! serde structs, and the JSON of the response shapes. Members are PascalCase; absent
//! optional members are omitted; times are epoch seconds as JSON numbers.

use almanac_timeseries::{
    DatabaseInfo, Dimension, MagneticWrites, MeasureValue, Record, Retention, TableMeta, Tag,
};
use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::{Value as Json, json};

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

/// `RetentionProperties`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RetentionIn {
    /// Hours.
    pub memory_store_retention_period_in_hours: i64,
    /// Days.
    pub magnetic_store_retention_period_in_days: i64,
}

impl From<RetentionIn> for Retention {
    fn from(r: RetentionIn) -> Self {
        Retention {
            memory_hours: r.memory_store_retention_period_in_hours,
            magnetic_days: r.magnetic_store_retention_period_in_days,
        }
    }
}

/// `MagneticStoreWriteProperties`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MagneticIn {
    /// Enabled.
    pub enable_magnetic_store_writes: bool,
    /// S3 location for rejected data (echoed only).
    #[serde(default)]
    pub magnetic_store_rejected_data_location: Option<Json>,
}

impl From<MagneticIn> for MagneticWrites {
    fn from(m: MagneticIn) -> Self {
        MagneticWrites {
            enabled: m.enable_magnetic_store_writes,
            rejected_report_location: m.magnetic_store_rejected_data_location,
        }
    }
}

/// The members of every request, all optional; each operation checks what it needs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Request<'a> {
    /// Database.
    pub database_name: Option<String>,
    /// Table.
    pub table_name: Option<String>,
    /// KMS key.
    pub kms_key_id: Option<String>,
    /// Retention.
    pub retention_properties: Option<RetentionIn>,
    /// Magnetic writes.
    pub magnetic_store_write_properties: Option<MagneticIn>,
    /// Schema (partition key).
    pub schema: Option<Json>,
    /// Tags.
    pub tags: Vec<Tag>,
    /// TagResource, UntagResource, ListTagsForResource: the resource.
    #[serde(rename = "ResourceARN")]
    pub resource_arn: Option<String>,
    /// UntagResource: the keys to remove.
    pub tag_keys: Vec<String>,
    /// Pagination.
    pub next_token: Option<String>,
    /// Page size.
    pub max_results: Option<i64>,
    /// WriteRecords: common attributes.
    #[serde(borrow)]
    pub common_attributes: Option<RecordIn<'a>>,
    /// WriteRecords: records.
    #[serde(borrow)]
    pub records: Vec<RecordIn<'a>>,
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

/// The ARN prefix of this server's resources.
pub fn arn_prefix(region: &str) -> String {
    format!("arn:aws:timestream:{region}:000000000000:database")
}

/// `Database`.
pub fn database(d: &DatabaseInfo, region: &str) -> Json {
    json!({
        "Arn": format!("{}/{}", arn_prefix(region), d.name),
        "DatabaseName": d.name,
        "TableCount": d.table_count,
        "KmsKeyId": d.kms_key_id,
        "CreationTime": secs(d.created_ms),
        "LastUpdatedTime": secs(d.updated_ms),
    })
}

/// `Table`, plus an `Almanac` member (ignored by AWS SDKs) with the storage layout,
/// the Bigtable table behind it, and the inferred schema.
pub fn table(t: &TableMeta, region: &str, instance: &str) -> Json {
    let mut magnetic = json!({ "EnableMagneticStoreWrites": t.magnetic_writes.enabled });
    if let (Some(loc), Some(obj)) = (
        &t.magnetic_writes.rejected_report_location,
        magnetic.as_object_mut(),
    ) {
        obj.insert("MagneticStoreRejectedDataLocation".into(), loc.clone());
    }
    let mut out = json!({
        "Arn": format!("{}/{}/table/{}", arn_prefix(region), t.database, t.name),
        "TableName": t.name,
        "DatabaseName": t.database,
        "TableStatus": "ACTIVE",
        "RetentionProperties": {
            "MemoryStoreRetentionPeriodInHours": t.retention.memory_hours,
            "MagneticStoreRetentionPeriodInDays": t.retention.magnetic_days,
        },
        "CreationTime": secs(t.created_ms),
        "LastUpdatedTime": secs(t.updated_ms),
        "MagneticStoreWriteProperties": magnetic,
        "Almanac": {
            "Layout": t.layout.pattern.as_str(),
            "BucketSeconds": t.layout.bucket_secs,
            "ReverseTime": t.layout.reverse_time,
            "BigtableInstance": instance,
            "BigtableTable": t.store_table,
            "Dimensions": t.schema.dimensions,
            "Measures": t.schema.measures.iter().map(|(k, v)| (k.clone(), json!(v.as_str()))).collect::<serde_json::Map<_, _>>(),
            "MultiMeasureAttributes": t.schema.attributes.iter().map(|(k, v)| (k.clone(), json!(v.as_str()))).collect::<serde_json::Map<_, _>>(),
        },
    });
    if let Some(obj) = out.as_object_mut() {
        let schema = t.partition_key.clone().unwrap_or_default();
        obj.insert("Schema".into(), schema.to_json());
    }
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    #[test]
    fn records_borrow_plain_text_and_unescape_the_rest() {
        let body = br#"{"DatabaseName":"db","TableName":"t","Records":[
            {"Dimensions":[{"Name":"host","Value":"h\"1\u00e4"}],
             "MeasureName":"cpu","MeasureValue":"1.5","Time":"17","Version":3}]}"#;
        let req: Request<'_> = serde_json::from_slice(body).unwrap();
        let r: Record<'_> = req.records.into_iter().next().unwrap().into();
        assert!(matches!(r.dimensions[0].name, Cow::Borrowed("host")));
        assert_eq!(r.dimensions[0].value, "h\"1\u{e4}");
        assert!(matches!(r.dimensions[0].value, Cow::Owned(_)));
        assert_eq!(r.measure_name.as_deref(), Some("cpu"));
        assert_eq!(r.time.as_deref(), Some("17"));
        assert_eq!(r.version, Some(3));
        let bad: Result<Request<'_>, _> = serde_json::from_slice(br#"{"Records":[{"Time":17}]}"#);
        assert!(bad.unwrap_err().to_string().contains("expected a string"));
    }
}
