//! Request shapes of `timestream-write` (botocore `timestream-write/2018-11-01`) as
//! serde structs (but WriteRecords, which [`super::records_json`] parses), and the JSON
//! of the response shapes. Members are PascalCase; absent
//! optional members are omitted; times are epoch seconds as JSON numbers.

use almanac_timeseries::{DatabaseInfo, MagneticWrites, Retention, TableMeta, Tag};

use serde::Deserialize;
use serde_json::{Value as Json, json};

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
