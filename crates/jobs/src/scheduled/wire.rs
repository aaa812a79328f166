//! The members of the scheduled-query operations in Timestream's wire shapes
//! (`timestream-query` 2018-11-01, AWS JSON 1.0): what requests carry and what
//! Describe and List answer. A definition keeps them as given, so they go back out
//! unchanged.

use serde::{Deserialize, Serialize};

use crate::mapping::{AttributeSpec, DimensionSpec, MeasuresSpec, MixedSpec, Spec};
use almanac_timeseries::MeasureType;

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
    /// `MultiMeasureMappings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_measure_mappings: Option<MultiMeasureMappings>,
    /// `MixedMeasureMappings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_measure_mappings: Option<Vec<MixedMeasureMapping>>,
    /// `MeasureNameColumn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_name_column: Option<String>,
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

/// `MultiMeasureMappings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MultiMeasureMappings {
    /// `TargetMultiMeasureName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_multi_measure_name: Option<String>,
    /// `MultiMeasureAttributeMappings`.
    pub multi_measure_attribute_mappings: Vec<MultiMeasureAttributeMapping>,
}

/// `MultiMeasureAttributeMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MultiMeasureAttributeMapping {
    /// `SourceColumn`.
    pub source_column: String,
    /// `TargetMultiMeasureAttributeName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_multi_measure_attribute_name: Option<String>,
    /// `MeasureValueType`.
    pub measure_value_type: MeasureType,
}

/// `MixedMeasureMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MixedMeasureMapping {
    /// `MeasureName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_name: Option<String>,
    /// `SourceColumn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_column: Option<String>,
    /// `TargetMeasureName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_measure_name: Option<String>,
    /// `MeasureValueType`.
    pub measure_value_type: MeasureType,
    /// `MultiMeasureAttributeMappings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_measure_attribute_mappings: Option<Vec<MultiMeasureAttributeMapping>>,
}

fn attributes(list: &[MultiMeasureAttributeMapping]) -> Result<Vec<AttributeSpec>, String> {
    list.iter()
        .map(|a| {
            if a.measure_value_type == MeasureType::Multi {
                return Err(format!(
                    "MultiMeasureAttributeMapping {:?}: MeasureValueType MULTI is not a type of an attribute.",
                    a.source_column
                ));
            }
            Ok(AttributeSpec {
                column: a.source_column.clone(),
                name: a
                    .target_multi_measure_attribute_name
                    .clone()
                    .unwrap_or_else(|| a.source_column.clone()),
                kind: a.measure_value_type,
            })
        })
        .collect()
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
        let measures = match (&self.multi_measure_mappings, &self.mixed_measure_mappings) {
            (Some(m), None) => {
                if m.target_multi_measure_name.is_none() && self.measure_name_column.is_none() {
                    return Err(
                        "MultiMeasureMappings needs TargetMultiMeasureName or a MeasureNameColumn."
                            .into(),
                    );
                }
                if m.multi_measure_attribute_mappings.is_empty() {
                    return Err("MultiMeasureAttributeMappings must not be empty.".into());
                }
                MeasuresSpec::Multi {
                    name: m.target_multi_measure_name.clone(),
                    attributes: attributes(&m.multi_measure_attribute_mappings)?,
                }
            }
            (None, Some(list)) if !list.is_empty() => MeasuresSpec::Mixed(
                list.iter()
                    .map(|m| self.mixed(m))
                    .collect::<Result<_, String>>()?,
            ),
            (None, _) => {
                return Err(
                    "TargetConfiguration needs MultiMeasureMappings or MixedMeasureMappings."
                        .into(),
                );
            }
            (Some(_), Some(_)) => {
                return Err("Give MultiMeasureMappings or MixedMeasureMappings, not both.".into());
            }
        };
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
            measure_name_column: self.measure_name_column.clone(),
            measures,
        })
    }

    fn mixed(&self, m: &MixedMeasureMapping) -> Result<MixedSpec, String> {
        if self.measure_name_column.is_some() && m.measure_name.is_none() {
            return Err(
                "Each MixedMeasureMapping needs MeasureName when MeasureNameColumn is given."
                    .into(),
            );
        }
        let multi = m.measure_value_type == MeasureType::Multi;
        let name = m
            .target_measure_name
            .clone()
            .or_else(|| m.measure_name.clone())
            .or_else(|| (!multi).then(|| m.source_column.clone()).flatten())
            .ok_or("A MixedMeasureMapping needs TargetMeasureName, MeasureName or SourceColumn.")?;
        let (column, attrs) = if multi {
            let list = m.multi_measure_attribute_mappings.as_deref().unwrap_or(&[]);
            if list.is_empty() {
                return Err(format!(
                    "MixedMeasureMapping {name:?} of type MULTI needs MultiMeasureAttributeMappings."
                ));
            }
            (None, attributes(list)?)
        } else {
            let c = m.source_column.clone().ok_or_else(|| {
                format!("MixedMeasureMapping {name:?} of a single value needs SourceColumn.")
            })?;
            (Some(c), Vec::new())
        };
        Ok(MixedSpec {
            when: self
                .measure_name_column
                .as_ref()
                .and(m.measure_name.clone()),
            name: Some(name),
            column,
            kind: m.measure_value_type,
            attributes: attrs,
        })
    }
}
