//! A table's schema, inferred on write as Timestream does: the dimension names (in
//! first-seen order, which is their order in row keys), the type of each measure name,
//! and the type of each multi-measure attribute. A name keeps its type forever.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_DIMENSIONS_PER_TABLE, MAX_MEASURES_PER_TABLE};
use crate::model::{MeasureType, Measures, Value};

/// The inferred schema of a table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Schema {
    /// Dimension names; the index is the position in row keys.
    pub dimensions: Vec<String>,
    /// Type of each measure name (`Multi` for multi-measure records).
    pub measures: BTreeMap<String, MeasureType>,
    /// Type of each multi-measure attribute.
    pub attributes: BTreeMap<String, MeasureType>,
}

impl Schema {
    /// Position of a dimension in row keys.
    pub fn dimension_index(&self, name: &str) -> Option<usize> {
        self.dimensions.iter().position(|d| d == name)
    }

    /// Type of a single measure value or of a multi-measure attribute.
    pub fn value_type(&self, measure: &str, attribute: Option<&str>) -> Option<MeasureType> {
        match attribute {
            None => self.measures.get(measure).copied(),
            Some(a) => self.attributes.get(a).copied(),
        }
    }

    /// Checks a record's names against the schema without changing it: `Ok(true)` if
    /// admitting it would add names, `Ok(false)` if every name is known with the
    /// record's type, `Err(reason)` on a conflict or a limit.
    pub fn check(
        &self,
        dims: &[(String, String)],
        measure: &str,
        measures: &Measures,
    ) -> Result<bool, String> {
        let kind = kind_of(measures);
        if let Some(&have) = self.measures.get(measure)
            && have != kind
        {
            return Err(format!(
                "Measure name '{measure}' has type {} in this table; the record's type is {}.",
                have.as_str(),
                kind.as_str()
            ));
        }
        let attrs = attributes_of(measures);
        for (name, v) in attrs {
            if let Some(&have) = self.attributes.get(name)
                && have != v.kind()
            {
                return Err(format!(
                    "Measure '{name}' has type {} in this table; the record's type is {}.",
                    have.as_str(),
                    v.kind().as_str()
                ));
            }
            if self.dimension_index(name).is_some() || dims.iter().any(|(d, _)| d == name) {
                return Err(format!(
                    "Measure '{name}' has the name of a dimension of this table."
                ));
            }
        }
        for (d, _) in dims {
            if self.attributes.contains_key(d) {
                return Err(format!(
                    "Dimension '{d}' has the name of a measure of this table."
                ));
            }
        }
        let new_dims = dims
            .iter()
            .filter(|(d, _)| self.dimension_index(d).is_none())
            .count();
        if self.dimensions.len() + new_dims > MAX_DIMENSIONS_PER_TABLE {
            return Err(format!(
                "The record would bring the table to {} dimensions; the limit is {MAX_DIMENSIONS_PER_TABLE}.",
                self.dimensions.len() + new_dims
            ));
        }
        let new_measures = usize::from(!self.measures.contains_key(measure))
            + attrs
                .iter()
                .filter(|(n, _)| !self.attributes.contains_key(n))
                .count();
        if self.measures.len() + self.attributes.len() + new_measures > MAX_MEASURES_PER_TABLE {
            return Err(format!(
                "The record would bring the table past {MAX_MEASURES_PER_TABLE} measures."
            ));
        }
        Ok(new_dims + new_measures > 0)
    }

    /// Admits a record's names into the schema, adding the new ones; on a conflict
    /// returns the rejection reason and leaves the schema unchanged.
    pub fn admit(
        &mut self,
        dims: &[(String, String)],
        measure: &str,
        measures: &Measures,
    ) -> Result<(), String> {
        if !self.check(dims, measure, measures)? {
            return Ok(());
        }
        for (d, _) in dims {
            if self.dimension_index(d).is_none() {
                self.dimensions.push(d.clone());
            }
        }
        self.measures
            .entry(measure.to_string())
            .or_insert(kind_of(measures));
        for (name, v) in attributes_of(measures) {
            self.attributes.entry(name.clone()).or_insert(v.kind());
        }
        Ok(())
    }
}

fn kind_of(measures: &Measures) -> MeasureType {
    match measures {
        Measures::Single(v) => v.kind(),
        Measures::Multi(_) => MeasureType::Multi,
    }
}

fn attributes_of(measures: &Measures) -> &[(String, Value)] {
    match measures {
        Measures::Multi(vs) => vs,
        Measures::Single(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn dims(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn types_are_fixed_once_seen() {
        let mut s = Schema::default();
        let single = Measures::Single(Value::Double(1.0));
        assert!(s.admit(&dims(&[("host", "a")]), "cpu", &single).is_ok());
        assert!(
            s.admit(&dims(&[("region", "x"), ("host", "a")]), "cpu", &single)
                .is_ok()
        );
        assert_eq!(s.dimensions, ["host", "region"]);
        let before = s.clone();
        let err = s.admit(
            &dims(&[("az", "1")]),
            "cpu",
            &Measures::Single(Value::Bigint(1)),
        );
        assert!(err.is_err_and(|e| e.contains("DOUBLE") && e.contains("BIGINT")));
        assert_eq!(s, before, "a rejected record adds nothing");
        let multi = Measures::Multi(vec![("t".into(), Value::Double(1.0))]);
        assert!(s.admit(&[], "metrics", &multi).is_ok());
        let clash = Measures::Multi(vec![("t".into(), Value::Varchar("x".into()))]);
        assert!(s.admit(&[], "metrics2", &clash).is_err());
        let as_dim = Measures::Multi(vec![("host".into(), Value::Double(1.0))]);
        assert!(s.admit(&[], "m3", &as_dim).is_err());
        assert!(s.admit(&dims(&[("t", "1")]), "m4", &single).is_err());
        assert_eq!(s.value_type("cpu", None), Some(MeasureType::Double));
        assert_eq!(
            s.value_type("metrics", Some("t")),
            Some(MeasureType::Double)
        );
    }

    #[test]
    fn dimension_limit() {
        let mut s = Schema::default();
        let names: Vec<(String, String)> = (0..MAX_DIMENSIONS_PER_TABLE)
            .map(|i| (format!("d{i}"), "v".to_string()))
            .collect();
        let one = Measures::Single(Value::Bigint(1));
        assert!(s.admit(&names, "m", &one).is_ok());
        assert!(
            s.admit(&dims(&[("one_more", "v")]), "m", &one)
                .is_err_and(|e| e.contains("128"))
        );
    }
}
