//! The members of the scheduled-query operations in Timestream's wire shapes
//! (`timestream-query` 2018-11-01, AWS JSON 1.0): what requests carry and what
//! Describe and List answer. A definition keeps them as given, so they go back out
//! unchanged.

use serde::{Deserialize, Serialize};

use crate::mapping::{DimensionSpec, Spec};
use crate::measures::MeasureMappings;

/// `ScheduleConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ScheduleConfiguration {
    /// `cron(…)` or `rate(…)`.
    pub schedule_expression: String,
}

/// `NotificationConfiguration` (kept; Almanac sends no notifications).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NotificationConfiguration {
    /// `SnsConfiguration`.
    pub sns_configuration: SnsConfiguration,
}

/// `SnsConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SnsConfiguration {
    /// `TopicArn`.
    pub topic_arn: String,
}

/// `ErrorReportConfiguration`: where error reports go. Almanac writes them under
/// its report directory, at `BUCKET/PREFIX/…` ([`crate::scheduled`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ErrorReportConfiguration {
    /// `S3Configuration`.
    pub s3_configuration: S3Configuration,
}

/// `S3Configuration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct S3Configuration {
    /// `BucketName`.
    pub bucket_name: String,
    /// `ObjectKeyPrefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_key_prefix: Option<String>,
    /// `EncryptionOption` (`SSE_S3` or `SSE_KMS`; kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_option: Option<String>,
}

/// `TargetConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TargetConfiguration {
    /// `TimestreamConfiguration`.
    pub timestream_configuration: TimestreamConfiguration,
}

/// `TimestreamConfiguration`: the table a run writes and how rows become records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TimestreamConfiguration {
    /// `DatabaseName`.
    pub database_name: String,
    /// `TableName`.
    pub table_name: String,
    /// `TimeColumn`.
    pub time_column: String,
    /// `DimensionMappings`.
    pub dimension_mappings: Vec<DimensionMapping>,
    /// `MultiMeasureMappings`, `MixedMeasureMappings` and `MeasureNameColumn`.
    #[serde(flatten)]
    pub measures: MeasureMappings,
}

/// `DimensionMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DimensionMapping {
    /// `Name`: the column, and the dimension's name.
    pub name: String,
    /// `DimensionValueType` (`VARCHAR`).
    pub dimension_value_type: String,
}

impl TimestreamConfiguration {
    /// The mapping, checked as the service checks it: exactly one of the two kinds of
    /// measure mappings; a multi-measure mapping names its measure or has a
    /// `MeasureNameColumn`; mixed mappings name their measure where the row's name
    /// column decides.
    pub fn spec(&self) -> Result<Spec, String> {
        for d in &self.dimension_mappings {
            if d.dimension_value_type != "VARCHAR" {
                return Err(format!(
                    "DimensionMapping {:?}: DimensionValueType must be VARCHAR.",
                    d.name
                ));
            }
        }
        // Read from a copy: Describe answers the mappings as given.
        let measures = self.measures.clone().read("TargetConfiguration")?;
        Ok(Spec {
            time_column: self.time_column.clone(),
            time_unit: "NANOSECONDS".into(),
            dimensions: self
                .dimension_mappings
                .iter()
                .map(|d| DimensionSpec {
                    column: d.name.clone(),
                    name: d.name.clone(),
                })
                .collect(),
            measure_name_column: self.measures.measure_name_column.clone(),
            measures,
        })
    }
}
