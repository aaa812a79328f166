//! From rows with named columns to Timestream records: the data-model mapping that
//! scheduled queries (`TargetConfiguration.TimestreamConfiguration`) and batch-load
//! tasks (`DataModelConfiguration.DataModel`) share.
//!
//! One row becomes records, step by step:
//! 1. [`Spec`] is the mapping as given (either wire shape); [`Spec::bind`] resolves
//!    its column names against a header once, into a [`Model`] of column indexes.
//! 2. [`Model::records`] reads the time (required), the dimensions (a null or empty
//!    value leaves the dimension out, as Timestream does), and the measures:
//!    - multi-measure mappings: one MULTI record named `TargetMultiMeasureName`, or
//!      the row's `MeasureNameColumn` value, holding every non-null attribute;
//!    - mixed mappings: each mapping whose `MeasureName` equals the row's
//!      `MeasureNameColumn` value (or that names none) gives one record: a single
//!      measure from `SourceColumn`, or a MULTI record of its attributes.
//!
//!    A measure whose values are all null gives no record.
//! 3. The records carry their time in the model's unit; the caller writes them.

use std::borrow::Cow;

use almanac_timeseries::{Dimension, MeasureType, MeasureValue, Record};
use serde::{Deserialize, Serialize};

/// A dimension: the column it comes from and the dimension's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimensionSpec {
    /// Column of the row.
    pub column: String,
    /// Dimension name written.
    pub name: String,
}

/// An attribute of a MULTI record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeSpec {
    /// Column of the row.
    pub column: String,
    /// Attribute name written.
    pub name: String,
    /// Its type.
    pub kind: MeasureType,
}

/// A mixed-measure mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixedSpec {
    /// Rows whose measure-name column holds this value; `None` is every row.
    pub when: Option<String>,
    /// The measure name written; `None`: the row's measure-name column.
    pub name: Option<String>,
    /// The column of a single measure; `None` for MULTI.
    pub column: Option<String>,
    /// The type (MULTI takes `attributes`).
    pub kind: MeasureType,
    /// Attributes of a MULTI measure.
    pub attributes: Vec<AttributeSpec>,
}

/// How measures are laid out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MeasuresSpec {
    /// One MULTI record a row: its name (else the measure-name column's value) and
    /// attributes.
    Multi {
        /// `TargetMultiMeasureName`.
        name: Option<String>,
        /// Attributes.
        attributes: Vec<AttributeSpec>,
    },
    /// Mixed mappings.
    Mixed(Vec<MixedSpec>),
}

/// A mapping by column names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The time column.
    pub time_column: String,
    /// Unit of the time column's integers (`MILLISECONDS`, …, `NANOSECONDS`).
    pub time_unit: String,
    /// Dimensions.
    pub dimensions: Vec<DimensionSpec>,
    /// `MeasureNameColumn`.
    pub measure_name_column: Option<String>,
    /// Measures.
    pub measures: MeasuresSpec,
}

#[derive(Debug, Clone)]
struct Attribute {
    column: usize,
    name: String,
    kind: &'static str,
}

#[derive(Debug, Clone)]
struct Mixed {
    when: Option<String>,
    name: Option<String>,
    column: Option<usize>,
    kind: &'static str,
    attributes: Vec<Attribute>,
}

#[derive(Debug, Clone)]
enum Measures {
    Multi {
        name: Option<String>,
        attributes: Vec<Attribute>,
    },
    Mixed(Vec<Mixed>),
}

/// A [`Spec`] resolved against a header.
#[derive(Debug, Clone)]
pub struct Model {
    time: usize,
    time_unit: String,
    dimensions: Vec<(usize, String)>,
    measure_name: Option<usize>,
    measures: Measures,
}

fn index(header: &[String], column: &str, role: &str) -> Result<usize, String> {
    header.iter().position(|h| h == column).ok_or_else(|| {
        format!(
            "The {role} column {column:?} is not among the columns ({}).",
            header.join(", ")
        )
    })
}

fn bind_attributes(header: &[String], specs: &[AttributeSpec]) -> Result<Vec<Attribute>, String> {
    specs
        .iter()
        .map(|a| {
            Ok(Attribute {
                column: index(header, &a.column, "measure")?,
                name: a.name.clone(),
                kind: a.kind.as_str(),
            })
        })
        .collect()
}

impl Spec {
    /// Every column the mapping reads, with the type it needs (`None`: VARCHAR text
    /// of a dimension or measure name; the time column is reported as TIMESTAMP).
    pub fn columns(&self) -> Vec<(&str, MeasureType)> {
        let mut out = vec![(self.time_column.as_str(), MeasureType::Timestamp)];
        out.extend(
            self.dimensions
                .iter()
                .map(|d| (d.column.as_str(), MeasureType::Varchar)),
        );
        if let Some(c) = &self.measure_name_column {
            out.push((c, MeasureType::Varchar));
        }
        match &self.measures {
            MeasuresSpec::Multi { attributes, .. } => {
                out.extend(attributes.iter().map(|a| (a.column.as_str(), a.kind)));
            }
            MeasuresSpec::Mixed(ms) => {
                for m in ms {
                    if let Some(c) = &m.column {
                        out.push((c, m.kind));
                    }
                    out.extend(m.attributes.iter().map(|a| (a.column.as_str(), a.kind)));
                }
            }
        }
        out
    }

    /// Resolves the columns against `header`; `Err` names a missing column.
    pub fn bind(&self, header: &[String]) -> Result<Model, String> {
        let measures = match &self.measures {
            MeasuresSpec::Multi { name, attributes } => Measures::Multi {
                name: name.clone(),
                attributes: bind_attributes(header, attributes)?,
            },
            MeasuresSpec::Mixed(ms) => Measures::Mixed(
                ms.iter()
                    .map(|m| {
                        Ok(Mixed {
                            when: m.when.clone(),
                            name: m.name.clone(),
                            column: m
                                .column
                                .as_deref()
                                .map(|c| index(header, c, "measure"))
                                .transpose()?,
                            kind: m.kind.as_str(),
                            attributes: bind_attributes(header, &m.attributes)?,
                        })
                    })
                    .collect::<Result<_, String>>()?,
            ),
        };
        Ok(Model {
            time: index(header, &self.time_column, "time")?,
            time_unit: self.time_unit.clone(),
            dimensions: self
                .dimensions
                .iter()
                .map(|d| Ok((index(header, &d.column, "dimension")?, d.name.clone())))
                .collect::<Result<_, String>>()?,
            measure_name: self
                .measure_name_column
                .as_deref()
                .map(|c| index(header, c, "measure name"))
                .transpose()?,
            measures,
        })
    }
}

fn attribute_values<'r>(row: &'r [Option<String>], attrs: &[Attribute]) -> Vec<MeasureValue<'r>> {
    attrs
        .iter()
        .filter_map(|a| {
            let v = row.get(a.column)?.as_deref()?;
            Some(MeasureValue::new(a.name.clone(), v, a.kind))
        })
        .collect()
}

impl Model {
    /// The records of one row (see the module docs); `Err` says why the row cannot
    /// be written at all.
    pub fn records<'r>(&self, row: &'r [Option<String>]) -> Result<Vec<Record<'r>>, String> {
        let cell = |i: usize| row.get(i).and_then(|v| v.as_deref());
        let time = cell(self.time).ok_or("The time column is null.")?;
        let dimensions: Vec<Dimension<'r>> = self
            .dimensions
            .iter()
            .filter_map(|(i, name)| {
                let v = cell(*i).filter(|v| !v.is_empty())?;
                Some(Dimension::new(name.clone(), v))
            })
            .collect();
        let row_measure = self.measure_name.and_then(cell);
        let record = |name: Cow<'r, str>, kind: &'r str| Record {
            dimensions: dimensions.clone(),
            measure_name: Some(name),
            measure_value_type: Some(kind.into()),
            time: Some(time.into()),
            time_unit: Some(self.time_unit.clone().into()),
            ..Record::default()
        };
        let mut out = Vec::new();
        match &self.measures {
            Measures::Multi { name, attributes } => {
                let name = match (name, row_measure) {
                    (Some(n), _) => Cow::Owned(n.clone()),
                    (None, Some(n)) => Cow::Borrowed(n),
                    (None, None) => return Err("The measure name column is null.".into()),
                };
                let values = attribute_values(row, attributes);
                if !values.is_empty() {
                    out.push(Record {
                        measure_values: values,
                        ..record(name, "MULTI")
                    });
                }
            }
            Measures::Mixed(mappings) => {
                for m in mappings {
                    if m.when.is_some() && m.when.as_deref() != row_measure {
                        continue;
                    }
                    let name = match (&m.name, row_measure) {
                        (Some(n), _) => Cow::Owned(n.clone()),
                        (None, Some(n)) => Cow::Borrowed(n),
                        (None, None) => return Err("The measure name column is null.".into()),
                    };
                    match m.column {
                        Some(c) => {
                            if let Some(v) = cell(c) {
                                out.push(Record {
                                    measure_value: Some(v.into()),
                                    ..record(name, m.kind)
                                });
                            }
                        }
                        None => {
                            let values = attribute_values(row, &m.attributes);
                            if !values.is_empty() {
                                out.push(Record {
                                    measure_values: values,
                                    ..record(name, "MULTI")
                                });
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    fn header(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_string()).collect()
    }

    fn row(cells: &[Option<&str>]) -> Vec<Option<String>> {
        cells.iter().map(|c| c.map(str::to_string)).collect()
    }

    #[test]
    fn multi_mapping_writes_one_record_of_the_non_null_attributes() {
        let spec = Spec {
            time_column: "t".into(),
            time_unit: "MILLISECONDS".into(),
            dimensions: vec![DimensionSpec {
                column: "host".into(),
                name: "hostname".into(),
            }],
            measure_name_column: None,
            measures: MeasuresSpec::Multi {
                name: Some("cpu".into()),
                attributes: vec![
                    AttributeSpec {
                        column: "u".into(),
                        name: "usage_user".into(),
                        kind: MeasureType::Double,
                    },
                    AttributeSpec {
                        column: "s".into(),
                        name: "s".into(),
                        kind: MeasureType::Bigint,
                    },
                ],
            },
        };
        let model = spec.bind(&header(&["t", "host", "u", "s"])).unwrap();
        let r = row(&[Some("1000"), Some("h1"), Some("0.5"), None]);
        let recs = model.records(&r).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].measure_name.as_deref(), Some("cpu"));
        assert_eq!(recs[0].dimensions, vec![Dimension::new("hostname", "h1")]);
        assert_eq!(
            recs[0].measure_values,
            vec![MeasureValue::new("usage_user", "0.5", "DOUBLE")]
        );
        let empty = row(&[Some("1000"), Some(""), None, None]);
        assert!(model.records(&empty).unwrap().is_empty());
        assert!(model.records(&row(&[None, None, None, None])).is_err());
        let missing = spec.bind(&header(&["t", "host", "u"])).unwrap_err();
        assert!(missing.contains("\"s\""), "{missing}");
    }

    #[test]
    fn mixed_mappings_follow_the_measure_name_column() {
        let spec = Spec {
            time_column: "t".into(),
            time_unit: "SECONDS".into(),
            dimensions: vec![],
            measure_name_column: Some("m".into()),
            measures: MeasuresSpec::Mixed(vec![
                MixedSpec {
                    when: Some("temp".into()),
                    name: Some("temperature".into()),
                    column: Some("v".into()),
                    kind: MeasureType::Double,
                    attributes: vec![],
                },
                MixedSpec {
                    when: Some("state".into()),
                    name: Some("state".into()),
                    column: Some("text".into()),
                    kind: MeasureType::Varchar,
                    attributes: vec![],
                },
            ]),
        };
        let model = spec.bind(&header(&["t", "m", "v", "text"])).unwrap();
        let temp = row(&[Some("5"), Some("temp"), Some("21.5"), Some("x")]);
        let recs = model.records(&temp).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].measure_name.as_deref(), Some("temperature"));
        assert_eq!(recs[0].measure_value.as_deref(), Some("21.5"));
        assert_eq!(recs[0].time_unit.as_deref(), Some("SECONDS"));
        let other = row(&[Some("5"), Some("pressure"), Some("1"), None]);
        assert!(model.records(&other).unwrap().is_empty());
    }
}
