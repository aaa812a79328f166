//! Per-record checks of WriteRecords: the record's own shape, names and values, with
//! the reason a rejected record gets. Schema (types) and retention are checked by the
//! write path, which knows the table.

use std::borrow::Cow;
use std::slice::Iter;

use crate::error::{Error, Result};
use crate::limits::{
    MAX_DIMENSION_NAME_BYTES, MAX_DIMENSION_PAIR_BYTES, MAX_MEASURE_NAME_BYTES,
    MAX_MEASURES_PER_RECORD, MAX_RESOURCE_NAME_LEN, MAX_VARCHAR_BYTES, MIN_RESOURCE_NAME_LEN,
    RESERVED_NAMES, RESERVED_PREFIXES,
};
use crate::model::{
    Dimension, DimensionPair, MeasureType, MeasureValue, Measures, Record, TimeUnit, Value,
};

/// A record that passed the per-record checks; its text borrows from the request's
/// record (the write path copies nothing of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<'r> {
    /// Dimensions as given (names unique).
    pub dimensions: Vec<DimensionPair<'r>>,
    /// Measure name.
    pub measure_name: Cow<'r, str>,
    /// Values.
    pub measures: Measures<'r>,
    /// Time in nanoseconds since the epoch.
    pub time_ns: i64,
    /// Version.
    pub version: i64,
}

/// A record with `CommonAttributes` filled in, read through without copying either:
/// the record's own fields win, and the common dimensions come first.
#[derive(Debug, Clone, Copy)]
pub struct Merged<'r, 'a> {
    common: Option<&'r Record<'a>>,
    rec: &'r Record<'a>,
}

impl<'r, 'a> Merged<'r, 'a> {
    /// `rec` under `common`.
    pub fn new(common: Option<&'r Record<'a>>, rec: &'r Record<'a>) -> Self {
        Self { common, rec }
    }

    /// The common dimensions, then the record's.
    fn dimensions(self) -> std::iter::Chain<Iter<'r, Dimension<'a>>, Iter<'r, Dimension<'a>>> {
        let common: &'r [Dimension<'a>] = self.common.map_or(&[], |c| &c.dimensions);
        common.iter().chain(&self.rec.dimensions)
    }

    fn dimension_count(self) -> usize {
        self.common.map_or(0, |c| c.dimensions.len()) + self.rec.dimensions.len()
    }

    /// A text field: the record's, else the common one.
    fn text(self, field: fn(&'r Record<'a>) -> &'r Option<Cow<'a, str>>) -> Option<&'r str> {
        field(self.rec)
            .as_deref()
            .or_else(|| self.common.and_then(|c| field(c).as_deref()))
    }

    /// The record's measure values, else the common ones.
    fn measure_values(self) -> &'r [MeasureValue<'a>] {
        match self.common {
            Some(c) if self.rec.measure_values.is_empty() => &c.measure_values,
            _ => &self.rec.measure_values,
        }
    }

    fn version(self) -> Option<i64> {
        self.rec
            .version
            .or_else(|| self.common.and_then(|c| c.version))
    }
}

/// Checks a database or table name (3–256 characters of `[a-zA-Z0-9_.-]`).
pub fn resource_name(kind: &str, name: &str) -> Result<()> {
    let len = name.chars().count();
    if !(MIN_RESOURCE_NAME_LEN..=MAX_RESOURCE_NAME_LEN).contains(&len) {
        return Err(Error::invalid(format!(
            "{kind} name '{name}' must be between {MIN_RESOURCE_NAME_LEN} and \
             {MAX_RESOURCE_NAME_LEN} characters long."
        )));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(Error::invalid(format!(
            "{kind} name '{name}' may only contain letters, digits, '_', '.' and '-'."
        )));
    }
    Ok(())
}

fn reserved(what: &str, name: &str) -> Result<(), String> {
    if RESERVED_NAMES.contains(&name) {
        return Err(format!("{what} '{name}' is a reserved name."));
    }
    if let Some(p) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Err(format!(
            "{what} '{name}' starts with the reserved prefix '{p}'."
        ));
    }
    if name.is_empty() {
        return Err(format!("{what} must not be empty."));
    }
    if name.contains(':') {
        return Err(format!(
            "{what} '{name}' contains ':', which Timestream reserves."
        ));
    }
    Ok(())
}

/// Parses a value of a declared type.
pub fn parse_value(kind: MeasureType, text: &str, unit: TimeUnit) -> Result<Value, String> {
    let bad = || format!("Measure value '{text}' is not a valid {}.", kind.as_str());
    Ok(match kind {
        MeasureType::Double => {
            let v: f64 = text.trim().parse().map_err(|_| bad())?;
            if !v.is_finite() {
                return Err(bad());
            }
            Value::Double(v)
        }
        MeasureType::Bigint => Value::Bigint(text.trim().parse().map_err(|_| bad())?),
        MeasureType::Boolean => Value::Boolean(match text.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => return Err(bad()),
        }),
        MeasureType::Varchar => {
            if text.len() > MAX_VARCHAR_BYTES {
                return Err(format!(
                    "VARCHAR measure value of {} bytes exceeds the limit of {MAX_VARCHAR_BYTES} bytes.",
                    text.len()
                ));
            }
            Value::Varchar(text.to_string())
        }
        MeasureType::Timestamp => {
            let n: i64 = text.trim().parse().map_err(|_| bad())?;
            Value::Timestamp(
                n.checked_mul(unit.ns())
                    .filter(|v| *v >= 0)
                    .ok_or_else(bad)?,
            )
        }
        MeasureType::Multi => return Err("MULTI is not the type of a single value.".into()),
    })
}

/// Checks one record under its common attributes; `Err` is the rejection reason.
/// (The write path checks through [`RecordChecker`]; tests check single records.)
#[cfg(test)]
pub fn parse_record<'r>(
    common: Option<&'r Record<'_>>,
    rec: &'r Record<'_>,
) -> Result<Parsed<'r>, String> {
    RecordChecker::default().check(Merged::new(common, rec))
}

/// Checks the records of one request. The records of a request nearly always name the
/// same dimensions, measure and attributes in the same order, so the checker keeps the
/// names of the last record that passed and checks only what is new: a name seen
/// there already passed the reserved-name, length and uniqueness rules, against the
/// same other names. Values are checked every time.
#[derive(Debug, Default)]
pub struct RecordChecker {
    /// Dimension names of the last record that passed, in its order.
    dimensions: Vec<String>,
    /// Its measure name.
    measure_name: String,
    /// Its attribute names (multi-measure), in its order.
    attributes: Vec<String>,
}

/// Whether the `count` names are `known`, in order.
fn same_names<'n>(count: usize, names: impl Iterator<Item = &'n str>, known: &[String]) -> bool {
    count == known.len() && names.zip(known).all(|(a, b)| a == b)
}

impl RecordChecker {
    /// Checks one merged record; `Err` is the rejection reason.
    pub fn check<'r>(&mut self, rec: Merged<'r, '_>) -> Result<Parsed<'r>, String> {
        let known_dims = same_names(
            rec.dimension_count(),
            rec.dimensions().map(|d| &*d.name),
            &self.dimensions,
        );
        let dimensions = check_dimensions(rec, known_dims)?;
        let measure_name = rec
            .text(|r| &r.measure_name)
            .ok_or("The record has no MeasureName.")?;
        if !(known_dims && measure_name == self.measure_name) {
            check_measure_name(measure_name, &dimensions)?;
        }
        let unit = match rec.text(|r| &r.time_unit) {
            None => TimeUnit::default(),
            Some(u) => TimeUnit::parse(u).ok_or_else(|| format!("Unknown TimeUnit '{u}'."))?,
        };
        let time_text = rec.text(|r| &r.time).ok_or("The record has no Time.")?;
        let time: i64 = time_text
            .trim()
            .parse()
            .map_err(|_| format!("Time '{time_text}' is not an integer."))?;
        let time_ns = time
            .checked_mul(unit.ns())
            .filter(|t| *t >= 0)
            .ok_or_else(|| format!("Time '{time_text}' is out of range."))?;
        let type_name = rec.text(|r| &r.measure_value_type).unwrap_or("DOUBLE");
        let kind = MeasureType::parse(type_name)
            .ok_or_else(|| format!("Unknown MeasureValueType '{type_name}'."))?;
        let values = rec.measure_values();
        let known_attributes = same_names(
            values.len(),
            values.iter().map(|m| &*m.name),
            &self.attributes,
        );
        let measures = if kind == MeasureType::Multi {
            let known = known_dims && known_attributes;
            Measures::Multi(check_attributes(rec, values, &dimensions, unit, known)?)
        } else {
            if !values.is_empty() {
                return Err(format!(
                    "A {type_name} record carries MeasureValue, not MeasureValues."
                ));
            }
            if kind == MeasureType::Timestamp {
                return Err("TIMESTAMP values are only allowed inside MULTI records.".into());
            }
            let text = rec
                .text(|r| &r.measure_value)
                .ok_or("The record has no MeasureValue.")?;
            Measures::Single(parse_value(kind, text, unit)?)
        };
        self.remember(
            &dimensions,
            measure_name,
            &measures,
            known_dims,
            known_attributes,
        );
        Ok(Parsed {
            dimensions,
            measure_name: Cow::Borrowed(measure_name),
            measures,
            time_ns,
            version: rec.version().unwrap_or(1),
        })
    }

    /// Keeps the names of a record that passed, copied only when `check` found them
    /// changed (`known_*`: the record's names already equal the kept ones).
    fn remember(
        &mut self,
        dims: &[DimensionPair<'_>],
        measure: &str,
        measures: &Measures<'_>,
        known_dims: bool,
        known_attributes: bool,
    ) {
        if !known_dims {
            self.dimensions = dims.iter().map(|(n, _)| n.to_string()).collect();
        }
        if self.measure_name != measure {
            measure.clone_into(&mut self.measure_name);
        }
        if !known_attributes {
            self.attributes = match measures {
                Measures::Multi(vs) => vs.iter().map(|(n, _)| n.to_string()).collect(),
                Measures::Single(_) => Vec::new(),
            };
        }
    }
}

/// A record's dimensions; with `known_names` only their values are checked.
fn check_dimensions<'r>(
    rec: Merged<'r, '_>,
    known_names: bool,
) -> Result<Vec<DimensionPair<'r>>, String> {
    let mut dimensions: Vec<DimensionPair<'r>> = Vec::with_capacity(rec.dimension_count());
    for d in rec.dimensions() {
        if !known_names {
            reserved("Dimension name", &d.name)?;
            if d.name.len() > MAX_DIMENSION_NAME_BYTES {
                return Err(format!(
                    "Dimension name '{}' is {} bytes; the limit is {MAX_DIMENSION_NAME_BYTES}.",
                    d.name,
                    d.name.len()
                ));
            }
        }
        if d.value.is_empty() {
            return Err(format!("Dimension '{}' has an empty value.", d.name));
        }
        if d.name.len() + d.value.len() > MAX_DIMENSION_PAIR_BYTES {
            return Err(format!(
                "Dimension '{}' name and value are {} bytes; the limit is {MAX_DIMENSION_PAIR_BYTES}.",
                d.name,
                d.name.len() + d.value.len()
            ));
        }
        if !known_names && dimensions.iter().any(|(n, _)| *n == d.name) {
            return Err(format!("Dimension '{}' appears more than once.", d.name));
        }
        dimensions.push((Cow::Borrowed(&*d.name), Cow::Borrowed(&*d.value)));
    }
    Ok(dimensions)
}

fn check_measure_name(measure_name: &str, dimensions: &[DimensionPair<'_>]) -> Result<(), String> {
    reserved("Measure name", measure_name)?;
    if measure_name.len() > MAX_MEASURE_NAME_BYTES {
        return Err(format!(
            "Measure name is {} bytes; the limit is {MAX_MEASURE_NAME_BYTES}.",
            measure_name.len()
        ));
    }
    if dimensions.iter().any(|(n, _)| *n == measure_name) {
        return Err(format!(
            "Measure name '{measure_name}' is also a dimension name."
        ));
    }
    Ok(())
}

/// The values of a MULTI record (`given`: its merged measure values); with
/// `known_names` (same names as the last record that passed, and the same dimensions)
/// only their types and values are checked.
fn check_attributes<'r>(
    rec: Merged<'r, '_>,
    given: &'r [MeasureValue<'_>],
    dimensions: &[DimensionPair<'_>],
    unit: TimeUnit,
    known_names: bool,
) -> Result<Vec<(Cow<'r, str>, Value)>, String> {
    if rec.text(|r| &r.measure_value).is_some() {
        return Err("A MULTI record carries MeasureValues, not MeasureValue.".into());
    }
    if given.is_empty() {
        return Err("A MULTI record needs at least one MeasureValue.".into());
    }
    if given.len() > MAX_MEASURES_PER_RECORD {
        return Err(format!(
            "The record has {} measure values; the limit is {MAX_MEASURES_PER_RECORD}.",
            given.len()
        ));
    }
    let mut values: Vec<(Cow<'r, str>, Value)> = Vec::with_capacity(given.len());
    for mv in given {
        if !known_names {
            reserved("Measure", &mv.name)?;
            if values.iter().any(|(n, _)| *n == mv.name) {
                return Err(format!("Measure '{}' appears more than once.", mv.name));
            }
            if dimensions.iter().any(|(n, _)| *n == mv.name) {
                return Err(format!("Measure '{}' is also a dimension name.", mv.name));
            }
        }
        let k = MeasureType::parse(&mv.kind)
            .filter(|k| *k != MeasureType::Multi)
            .ok_or_else(|| format!("Measure '{}' has the unknown type '{}'.", mv.name, mv.kind))?;
        values.push((Cow::Borrowed(&*mv.name), parse_value(k, &mv.value, unit)?));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> Record<'static> {
        Record {
            dimensions: vec![Dimension {
                name: "host".into(),
                value: "h1".into(),
            }],
            measure_name: Some("cpu".into()),
            measure_value: Some("1.5".into()),
            measure_value_type: Some("DOUBLE".into()),
            time: Some("1700000000000".into()),
            ..Record::default()
        }
    }

    #[test]
    fn a_good_record_parses() -> Result<(), String> {
        let r = rec();
        let p = parse_record(None, &r)?;
        assert_eq!(p.time_ns, 1_700_000_000_000_000_000);
        assert_eq!(p.version, 1);
        assert_eq!(p.measures, Measures::Single(Value::Double(1.5)));
        Ok(())
    }

    #[test]
    fn bad_records_say_why() {
        type Edit = Box<dyn Fn(&mut Record<'static>)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|r| r.dimensions[0].value = "".into()),
                "empty value",
            ),
            (
                Box::new(|r| r.dimensions[0].name = "ts_x".into()),
                "reserved prefix",
            ),
            (
                Box::new(|r| r.dimensions[0].name = "measure_value::x".into()),
                "reserved prefix",
            ),
            (
                Box::new(|r| r.dimensions[0].name = "time".into()),
                "reserved name",
            ),
            (
                Box::new(|r| r.dimensions[0].name = "a:b".into()),
                "contains ':'",
            ),
            (
                Box::new(|r| r.dimensions[0].value = "v".repeat(2048).into()),
                "limit is 2048",
            ),
            (
                Box::new(|r| r.dimensions.push(r.dimensions[0].clone())),
                "more than once",
            ),
            (Box::new(|r| r.measure_name = None), "no MeasureName"),
            (
                Box::new(|r| r.measure_value = Some("abc".into())),
                "not a valid DOUBLE",
            ),
            (
                Box::new(|r| r.measure_value = Some("NaN".into())),
                "not a valid DOUBLE",
            ),
            (Box::new(|r| r.time = Some("-5".into())), "out of range"),
            (Box::new(|r| r.time = Some("x".into())), "not an integer"),
            (
                Box::new(|r| r.time_unit = Some("DAYS".into())),
                "Unknown TimeUnit",
            ),
            (
                Box::new(|r| r.measure_value_type = Some("MULTI".into())),
                "MeasureValues",
            ),
            (
                Box::new(|r| r.measure_value_type = Some("TIMESTAMP".into())),
                "only allowed inside MULTI",
            ),
        ];
        for (edit, want) in cases {
            let mut r = rec();
            edit(&mut r);
            let err = parse_record(None, &r).err().unwrap_or_default();
            assert!(err.contains(want), "{r:?}: {err:?} lacks {want:?}");
        }
    }

    #[test]
    fn multi_records_and_common_attributes() -> Result<(), String> {
        let common = Record {
            dimensions: vec![Dimension {
                name: "region".into(),
                value: "eu".into(),
            }],
            measure_value_type: Some("MULTI".into()),
            time_unit: Some("SECONDS".into()),
            ..Record::default()
        };
        let r = Record {
            measure_name: Some("metrics".into()),
            measure_values: vec![
                MeasureValue {
                    name: "temp".into(),
                    value: "9.5".into(),
                    kind: "DOUBLE".into(),
                },
                MeasureValue {
                    name: "seen".into(),
                    value: "12".into(),
                    kind: "TIMESTAMP".into(),
                },
                MeasureValue {
                    name: "ok".into(),
                    value: "TRUE".into(),
                    kind: "BOOLEAN".into(),
                },
            ],
            time: Some("1700000000".into()),
            version: Some(3),
            ..Record::default()
        };
        let p = parse_record(Some(&common), &r)?;
        assert_eq!(p.dimensions, vec![("region".into(), "eu".into())]);
        assert_eq!(p.time_ns, 1_700_000_000 * 1_000_000_000);
        assert_eq!(p.version, 3);
        assert_eq!(
            p.measures,
            Measures::Multi(vec![
                ("temp".into(), Value::Double(9.5)),
                ("seen".into(), Value::Timestamp(12_000_000_000)),
                ("ok".into(), Value::Boolean(true)),
            ])
        );
        Ok(())
    }

    /// The checker's shortcut for names it saw pass never changes a verdict: over a
    /// pseudo-random run of good and bad records, it answers as a fresh check does.
    #[test]
    fn the_record_checker_answers_as_a_fresh_check() {
        let multi = || Record {
            dimensions: vec![Dimension::new("host", "h1"), Dimension::new("rack", "r7")],
            measure_name: Some("metrics".into()),
            measure_value_type: Some("MULTI".into()),
            measure_values: vec![
                MeasureValue::new("temp", "9.5", "DOUBLE"),
                MeasureValue::new("load", "3", "BIGINT"),
            ],
            time: Some("1700000000000".into()),
            ..Record::default()
        };
        type Edit = fn(&mut Record<'static>);
        let edits: [Edit; 14] = [
            |r| r.dimensions.swap(0, 1),
            |r| r.dimensions[1].name = "host".into(),
            |r| r.dimensions[0].name = "ts_host".into(),
            |r| r.dimensions[1].value = "".into(),
            |r| r.dimensions.push(Dimension::new("zone", "z")),
            |r| r.measure_name = Some("host".into()),
            |r| r.measure_name = Some("other".into()),
            |r| {
                r.measure_values
                    .iter_mut()
                    .skip(1)
                    .for_each(|m| m.name = "temp".into())
            },
            |r| {
                r.measure_values
                    .iter_mut()
                    .take(1)
                    .for_each(|m| m.name = "rack".into())
            },
            |r| {
                let reserved = "measure_value::x";
                r.measure_values
                    .iter_mut()
                    .take(1)
                    .for_each(|m| m.name = reserved.into());
            },
            |r| {
                r.measure_values
                    .iter_mut()
                    .skip(1)
                    .for_each(|m| m.value = "x".into())
            },
            |r| r.measure_values.reverse(),
            |r| {
                r.measure_values
                    .push(MeasureValue::new("on", "true", "BOOLEAN"))
            },
            |r| {
                r.measure_value_type = Some("DOUBLE".into());
                r.measure_values.clear();
                r.measure_value = Some("1".into());
            },
        ];
        let mut checker = RecordChecker::default();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let (mut passed, mut failed) = (0, 0);
        for _ in 0..3000 {
            let mut r = multi();
            for _ in 0..2 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // About half the records take no edit at all.
                if let Some(edit) = edits.get((x % 28) as usize) {
                    edit(&mut r);
                }
            }
            let want = parse_record(None, &r);
            assert_eq!(checker.check(Merged::new(None, &r)), want, "{r:?}");
            if want.is_ok() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
        assert!(
            passed > 500 && failed > 500,
            "{passed} passed, {failed} failed"
        );
    }

    #[test]
    fn names() {
        assert!(resource_name("Database", "db1").is_ok());
        assert!(resource_name("Database", "ab").is_err());
        assert!(resource_name("Database", &"a".repeat(257)).is_err());
        assert!(resource_name("Table", "a b c").is_err());
    }
}
