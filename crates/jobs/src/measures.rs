//! The measure mappings that scheduled queries (`TimestreamConfiguration`) and
//! batch-load tasks (`DataModel`) share, in Timestream's wire shapes, and their
//! reading into [`MeasuresSpec`]: exactly one of the two kinds; a multi-measure
//! mapping names its measure or has a `MeasureNameColumn`; with a
//! `MeasureNameColumn`, each mixed mapping names the `MeasureName` it applies to; a
//! mixed mapping's measure is `TargetMeasureName`, else `MeasureName`, else (single
//! values) `SourceColumn`; an attribute's name defaults to its source column.

use almanac_timeseries::MeasureType;
use serde::{Deserialize, Serialize};

use crate::mapping::{AttributeSpec, MeasuresSpec, MixedSpec};

/// `MultiMeasureMappings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MultiMeasureMappings {
    /// `TargetMultiMeasureName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_multi_measure_name: Option<String>,
    /// `MultiMeasureAttributeMappings`.
    pub multi_measure_attribute_mappings: Vec<AttributeMapping>,
}

/// `MultiMeasureAttributeMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeMapping {
    /// `SourceColumn`.
    pub source_column: String,
    /// `TargetMultiMeasureAttributeName` (default: the source column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_multi_measure_attribute_name: Option<String>,
    /// `MeasureValueType` (required, though batch load's model marks it optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_value_type: Option<MeasureType>,
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
    pub multi_measure_attribute_mappings: Option<Vec<AttributeMapping>>,
}

/// The measure members of `TimestreamConfiguration` and `DataModel`, flattened into
/// each.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MeasureMappings {
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

impl MeasureMappings {
    /// Reads the mappings (see the module docs), filling the defaults the service
    /// echoes into them; `owner` names the member that holds them in errors.
    pub fn read(&mut self, owner: &str) -> Result<MeasuresSpec, String> {
        read(
            &mut self.multi_measure_mappings,
            &mut self.mixed_measure_mappings,
            self.measure_name_column.as_deref(),
            owner,
        )
    }
}

fn read(
    multi: &mut Option<MultiMeasureMappings>,
    mixed: &mut Option<Vec<MixedMeasureMapping>>,
    name_column: Option<&str>,
    owner: &str,
) -> Result<MeasuresSpec, String> {
    match (multi, mixed) {
        (Some(m), None) => {
            if m.target_multi_measure_name.is_none() && name_column.is_none() {
                return Err(
                    "MultiMeasureMappings needs TargetMultiMeasureName or a MeasureNameColumn."
                        .into(),
                );
            }
            if m.multi_measure_attribute_mappings.is_empty() {
                return Err("MultiMeasureAttributeMappings must not be empty.".into());
            }
            Ok(MeasuresSpec::Multi {
                name: m.target_multi_measure_name.clone(),
                attributes: attributes(&mut m.multi_measure_attribute_mappings)?,
            })
        }
        (None, Some(list)) if !list.is_empty() => Ok(MeasuresSpec::Mixed(
            list.iter_mut()
                .map(|m| mixed_one(m, name_column.is_some()))
                .collect::<Result<_, String>>()?,
        )),
        (Some(_), Some(_)) => {
            Err("Give MultiMeasureMappings or MixedMeasureMappings, not both.".into())
        }
        (None, _) => Err(format!(
            "{owner} needs MultiMeasureMappings or MixedMeasureMappings."
        )),
    }
}

fn attributes(list: &mut [AttributeMapping]) -> Result<Vec<AttributeSpec>, String> {
    list.iter_mut()
        .map(|a| {
            let kind = match a.measure_value_type {
                Some(MeasureType::Multi) => {
                    return Err(format!(
                        "MultiMeasureAttributeMapping {:?}: MULTI is not a type of an attribute.",
                        a.source_column
                    ));
                }
                Some(k) => k,
                None => {
                    return Err(format!(
                        "MultiMeasureAttributeMapping {:?} needs MeasureValueType.",
                        a.source_column
                    ));
                }
            };
            let name = a
                .target_multi_measure_attribute_name
                .get_or_insert_with(|| a.source_column.clone())
                .clone();
            Ok(AttributeSpec {
                column: a.source_column.clone(),
                name,
                kind,
            })
        })
        .collect()
}

fn mixed_one(m: &mut MixedMeasureMapping, has_name_column: bool) -> Result<MixedSpec, String> {
    if has_name_column && m.measure_name.is_none() {
        return Err(
            "Each MixedMeasureMapping needs MeasureName when MeasureNameColumn is given.".into(),
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
        let list = m
            .multi_measure_attribute_mappings
            .get_or_insert_with(Vec::new);
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
        when: if has_name_column {
            m.measure_name.clone()
        } else {
            None
        },
        name: Some(name),
        column,
        kind: m.measure_value_type,
        attributes: attrs,
    })
}
