//! Request shapes of `timestream-write` (botocore `timestream-write/2018-11-01`) as
//! serde structs, and the JSON of the response shapes. Members are PascalCase; absent
//! optional members are omitted; times are epoch seconds as JSON numbers.

use almanac_timeseries::{
    DatabaseInfo, Dimension, MagneticWrites, MeasureValue, Record, Retention, TableMeta,
};
use serde::Deserialize;
use serde_json::{Value as Json, json};

/// `Dimension`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct DimensionIn {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
    /// Always VARCHAR.
    pub dimension_value_type: Option<String>,
}

/// `MeasureValue`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct MeasureValueIn {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
    /// Type.
    #[serde(rename = "Type")]
    pub kind: String,
}

/// `Record` (also `CommonAttributes`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct RecordIn {
    /// Dimensions.
    pub dimensions: Vec<DimensionIn>,
    /// Measure name.
    pub measure_name: Option<String>,
    /// Single value.
    pub measure_value: Option<String>,
    /// Value type.
    pub measure_value_type: Option<String>,
    /// Multi values.
    pub measure_values: Vec<MeasureValueIn>,
    /// Time.
    pub time: Option<String>,
    /// Time unit.
    pub time_unit: Option<String>,
    /// Version.
    pub version: Option<i64>,
}

impl From<RecordIn> for Record {
    fn from(r: RecordIn) -> Self {
        Record {
            dimensions: r
                .dimensions
                .into_iter()
                .map(|d| Dimension {
                    name: d.name,
                    value: d.value,
                })
                .collect(),
            measure_name: r.measure_name,
            measure_value: r.measure_value,
            measure_value_type: r.measure_value_type,
            measure_values: r
                .measure_values
                .into_iter()
                .map(|m| MeasureValue {
                    name: m.name,
                    value: m.value,
                    kind: m.kind,
                })
                .collect(),
            time: r.time,
            time_unit: r.time_unit,
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

/// `Tag`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct TagIn {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// The members of every request, all optional; each operation checks what it needs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Request {
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
    pub tags: Vec<TagIn>,
    /// Pagination.
    pub next_token: Option<String>,
    /// Page size.
    pub max_results: Option<i64>,
    /// WriteRecords: common attributes.
    pub common_attributes: Option<RecordIn>,
    /// WriteRecords: records.
    pub records: Vec<RecordIn>,
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
    if let (Some(schema), Some(obj)) = (&t.partition_key, out.as_object_mut()) {
        obj.insert("Schema".into(), schema.clone());
    }
    out
}
