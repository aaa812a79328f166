//! A table's schema, inferred on write as Timestream does: the dimension names (in
//! first-seen order, which is their order in row keys), the type of each measure name,
//! and the type of each multi-measure attribute. A name keeps its type forever.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_DIMENSIONS_PER_TABLE, MAX_MEASURES_PER_TABLE};
use crate::model::{DimensionPair, MeasureType, Measures, Value};

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

    /// [`Schema::dimension_index`], trying position `hint` first: records name their
    /// dimensions in the same order request after request, so walking a record's
    /// dimensions with the next expected position finds each in one comparison.
    pub fn dimension_index_near(&self, name: &str, hint: usize) -> Option<usize> {
        match self.dimensions.get(hint) {
            Some(d) if d == name => Some(hint),
            _ => self.dimension_index(name),
        }
    }

    /// Sorts a record's dimensions into row-key order (unknown names first), stably.
    pub fn sort_dimensions(&self, dims: &mut [DimensionPair<'_>]) {
        // Records nearly always name their dimensions in the table's order already:
        // check that first, without allocating.
        let mut next = 0;
        let sorted = dims.iter().all(|(name, _)| {
            let i = self.dimension_index_near(name, next);
            let in_order = i.is_some_and(|i| i >= next);
            next = i.map_or(next, |i| i + 1);
            in_order
        });
        if sorted {
            return;
        }
        let positions: Vec<Option<usize>> = dims
            .iter()
            .map(|(name, _)| self.dimension_index(name))
            .collect();
        let mut keyed: Vec<(Option<usize>, DimensionPair<'_>)> = positions
            .into_iter()
            .zip(dims.iter_mut().map(std::mem::take))
            .collect();
        keyed.sort_by_key(|(i, _)| *i);
        for (slot, (_, d)) in dims.iter_mut().zip(keyed) {
            *slot = d;
        }
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
        dims: &[DimensionPair<'_>],
        measure: &str,
        measures: &Measures,
    ) -> Result<bool, String> {
        let kind = kind_of(measures);
        if self.knows(dims, measure, kind, measures) {
            return Ok(false);
        }
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
            if let Some(&have) = self.attributes.get(&**name)
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
            if self.attributes.contains_key(&**d) {
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
                .filter(|(n, _)| !self.attributes.contains_key(&**n))
                .count();
        if self.measures.len() + self.attributes.len() + new_measures > MAX_MEASURES_PER_TABLE {
            return Err(format!(
                "The record would bring the table past {MAX_MEASURES_PER_TABLE} measures."
            ));
        }
        Ok(new_dims + new_measures > 0)
    }

    /// Whether every name of the record is already known with the record's types: the
    /// common case, and then nothing can conflict. Admitted names never clash (a
    /// dimension is never also an attribute, which `check` refuses), so a known
    /// dimension is not an attribute, and a known attribute is not a dimension of the
    /// table or, being a different name from each known dimension, of the record.
    fn knows(
        &self,
        dims: &[DimensionPair<'_>],
        measure: &str,
        kind: MeasureType,
        measures: &Measures,
    ) -> bool {
        let mut next = 0;
        self.measures.get(measure) == Some(&kind)
            && attributes_of(measures)
                .iter()
                .all(|(name, v)| self.attributes.get(&**name) == Some(&v.kind()))
            && dims.iter().all(|(d, _)| {
                let i = self.dimension_index_near(d, next);
                next = i.map_or(next, |i| i + 1);
                i.is_some()
            })
    }

    /// Admits a record's names into the schema, adding the new ones; on a conflict
    /// returns the rejection reason and leaves the schema unchanged.
    pub fn admit(
        &mut self,
        dims: &[DimensionPair<'_>],
        measure: &str,
        measures: &Measures,
    ) -> Result<(), String> {
        if !self.check(dims, measure, measures)? {
            return Ok(());
        }
        for (d, _) in dims {
            if self.dimension_index(d).is_none() {
                self.dimensions.push(d.to_string());
            }
        }
        self.measures
            .entry(measure.to_string())
            .or_insert(kind_of(measures));
        for (name, v) in attributes_of(measures) {
            self.attributes.entry(name.to_string()).or_insert(v.kind());
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

fn attributes_of<'m, 'a>(measures: &'m Measures<'a>) -> &'m [(Cow<'a, str>, Value)] {
    match measures {
        Measures::Multi(vs) => vs,
        Measures::Single(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn dims(pairs: &[(&str, &str)]) -> Vec<DimensionPair<'static>> {
        pairs
            .iter()
            .map(|(a, b)| (Cow::Owned(a.to_string()), Cow::Owned(b.to_string())))
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
    fn dimensions_sort_into_key_order() {
        let mut s = Schema::default();
        let one = Measures::Single(Value::Bigint(1));
        let all = dims(&[("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(s.admit(&all, "m", &one).is_ok());
        for (given, want) in [
            (
                vec![("a", "1"), ("b", "2"), ("c", "3")],
                vec!["a", "b", "c"],
            ),
            (
                vec![("c", "3"), ("a", "1"), ("b", "2")],
                vec!["a", "b", "c"],
            ),
            (vec![("c", "3"), ("b", "2")], vec!["b", "c"]),
            (
                vec![("b", "2"), ("z", "9"), ("a", "1")],
                vec!["z", "a", "b"],
            ),
            (vec![("y", "8"), ("z", "9")], vec!["y", "z"]),
        ] {
            let mut d = dims(&given);
            s.sort_dimensions(&mut d);
            let names: Vec<&str> = d.iter().map(|(n, _)| &**n).collect();
            assert_eq!(names, want, "sorting {given:?}");
            assert!(d.iter().all(|(n, v)| given.contains(&(&**n, &**v))));
        }
        assert_eq!(s.dimension_index_near("b", 1), Some(1));
        assert_eq!(s.dimension_index_near("b", 0), Some(1));
        assert_eq!(s.dimension_index_near("b", 7), Some(1));
        assert_eq!(s.dimension_index_near("q", 0), None);
    }

    #[test]
    fn known_names_take_the_fast_path_and_conflicts_still_fail() {
        let mut s = Schema::default();
        let multi = |pairs: &[(&str, Value)]| {
            Measures::multi(pairs.iter().map(|(n, v)| (n.to_string(), v.clone())))
        };
        let m = multi(&[("t", Value::Double(1.0)), ("u", Value::Bigint(2))]);
        let d = dims(&[("host", "a"), ("rack", "r")]);
        assert_eq!(s.check(&d, "cpu", &m), Ok(true));
        assert!(s.admit(&d, "cpu", &m).is_ok());
        assert_eq!(s.check(&d, "cpu", &m), Ok(false), "all known");
        let reordered = dims(&[("rack", "r"), ("host", "a")]);
        assert_eq!(s.check(&reordered, "cpu", &m), Ok(false));
        assert_eq!(s.check(&dims(&[("host", "a")]), "cpu", &m), Ok(false));
        let new_dim = dims(&[("host", "a"), ("zone", "z")]);
        assert_eq!(s.check(&new_dim, "cpu", &m), Ok(true));
        let retyped = multi(&[("t", Value::Bigint(1))]);
        assert!(s.check(&d, "cpu", &retyped).is_err());
        let dim_as_measure = multi(&[("host", Value::Double(1.0))]);
        assert!(s.check(&d, "cpu", &dim_as_measure).is_err());
        let measure_as_dim = dims(&[("t", "1")]);
        assert!(s.check(&measure_as_dim, "cpu", &m).is_err());
        assert!(
            s.check(&d, "cpu", &Measures::Single(Value::Double(1.0)))
                .is_err(),
            "cpu is MULTI"
        );
    }

    #[test]
    fn dimension_limit() {
        let mut s = Schema::default();
        let names: Vec<DimensionPair<'_>> = (0..MAX_DIMENSIONS_PER_TABLE)
            .map(|i| (format!("d{i}").into(), "v".into()))
            .collect();
        let one = Measures::Single(Value::Bigint(1));
        assert!(s.admit(&names, "m", &one).is_ok());
        assert!(
            s.admit(&dims(&[("one_more", "v")]), "m", &one)
                .is_err_and(|e| e.contains("128"))
        );
    }
}
