//! The members of the batch-load operations of `timestream-write` in Timestream's
//! wire shapes. A task keeps them as given (with `DestinationColumn` and
//! `TargetMultiMeasureAttributeName` defaulted to their source column, as the
//! service echoes them), so Describe answers them back.

use serde::{Deserialize, Serialize};

use crate::mapping::{DimensionSpec, Spec};
use crate::measures::MeasureMappings;

/// `DataModelConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DataModelConfiguration {
    /// `DataModel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_model: Option<DataModel>,
    /// `DataModelS3Configuration`: a JSON `DataModel` in a bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_model_s3_configuration: Option<ObjectLocation>,
}

/// `DataModelS3Configuration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ObjectLocation {
    /// `BucketName`.
    pub bucket_name: String,
    /// `ObjectKey`.
    pub object_key: String,
}

/// `DataModel`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DataModel {
    /// `TimeColumn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_column: Option<String>,
    /// `TimeUnit` (default MILLISECONDS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_unit: Option<String>,
    /// `DimensionMappings`.
    #[serde(default)]
    pub dimension_mappings: Vec<DimensionMapping>,
    /// `MultiMeasureMappings`, `MixedMeasureMappings` and `MeasureNameColumn`.
    #[serde(flatten)]
    pub measures: MeasureMappings,
}

/// `DimensionMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DimensionMapping {
    /// `SourceColumn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_column: Option<String>,
    /// `DestinationColumn` (default: the source column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_column: Option<String>,
}

/// `DataSourceConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DataSourceConfiguration {
    /// `DataSourceS3Configuration`.
    pub data_source_s3_configuration: SourceLocation,
    /// `CsvConfiguration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv_configuration: Option<CsvConfiguration>,
    /// `DataFormat` (`CSV`).
    pub data_format: String,
}

/// `DataSourceS3Configuration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SourceLocation {
    /// `BucketName`: a bucket under the bucket directory, or `file:///dir` / `/dir`.
    pub bucket_name: String,
    /// `ObjectKeyPrefix`: the files whose path under the bucket starts with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_key_prefix: Option<String>,
}

/// `CsvConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CsvConfiguration {
    /// `ColumnSeparator` (default `,`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column_separator: Option<String>,
    /// `EscapeChar` (default: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escape_char: Option<String>,
    /// `QuoteChar` (default `"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_char: Option<String>,
    /// `NullValue`: a cell holding exactly this is null (an empty cell always is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_value: Option<String>,
    /// `TrimWhiteSpace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim_white_space: Option<bool>,
}

/// `ReportConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReportConfiguration {
    /// `ReportS3Configuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_s3_configuration: Option<ReportLocation>,
}

/// `ReportS3Configuration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReportLocation {
    /// `BucketName`.
    pub bucket_name: String,
    /// `ObjectKeyPrefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_key_prefix: Option<String>,
    /// `EncryptionOption` (kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_option: Option<String>,
    /// `KmsKeyId` (kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
}

impl DataModel {
    /// The mapping, checked; fills the defaults the service echoes.
    pub fn spec(&mut self) -> Result<Spec, String> {
        let time_column = self
            .time_column
            .clone()
            .ok_or("DataModel needs TimeColumn.")?;
        let unit = self.time_unit.get_or_insert_with(|| "MILLISECONDS".into());
        if almanac_timeseries::TimeUnit::parse(unit).is_none() {
            return Err(format!(
                "TimeUnit {unit:?} must be MILLISECONDS, SECONDS, MICROSECONDS or NANOSECONDS."
            ));
        }
        let time_unit = unit.clone();
        if self.dimension_mappings.is_empty() {
            return Err("DataModel needs at least one DimensionMapping.".into());
        }
        let dimensions = self
            .dimension_mappings
            .iter_mut()
            .map(|d| {
                let column = d
                    .source_column
                    .clone()
                    .ok_or("Each DimensionMapping needs SourceColumn.")?;
                let name = d
                    .destination_column
                    .get_or_insert_with(|| column.clone())
                    .clone();
                Ok(DimensionSpec { column, name })
            })
            .collect::<Result<_, String>>()?;
        let measures = self.measures.read("DataModel")?;
        Ok(Spec {
            time_column,
            time_unit,
            dimensions,
            measure_name_column: self.measures.measure_name_column.clone(),
            measures,
        })
    }
}
