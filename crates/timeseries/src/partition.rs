//! Timestream's `Schema.CompositePartitionKey`: which attribute partitions a table, and
//! whether every record must carry it.
//!
//! A CreateTable or UpdateTable request's `Schema`, step by step:
//! 1. [`TableSchema::from_json`] reads the wire form and checks it: one key at most
//!    ([`MAX_PARTITION_KEYS`]), `Type` `DIMENSION` or `MEASURE`, a `Name` for a
//!    dimension key only, `EnforcementInRecord` `REQUIRED` or `OPTIONAL` for a dimension
//!    key only. A bad schema is a `ValidationException` naming the member.
//! 2. UpdateTable may change a key's enforcement, nothing else
//!    ([`TableSchema::check_update`]): the key decides where a table's data lives.
//! 3. On write, a record of a table whose dimension key is `REQUIRED` and that lacks
//!    the dimension (after `CommonAttributes`) is rejected alone
//!    ([`TableSchema::missing_key`]).
//!
//! A table created without a schema is partitioned by measure name, as Timestream's
//! are, and DescribeTable says so. Rows are laid out the same way whatever the key:
//! measure name first, then dimensions (`keys.rs`).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// Most keys in a `CompositePartitionKey` (Timestream takes one).
pub const MAX_PARTITION_KEYS: usize = 1;
/// Longest partition key `Name`, bytes.
pub const MAX_PARTITION_KEY_NAME_BYTES: usize = 2048;

/// What partitions the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PartitionKeyType {
    /// The values of one dimension.
    Dimension,
    /// Measure names.
    Measure,
}

/// Whether records must carry a dimension key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Enforcement {
    /// A record without the dimension is rejected.
    Required,
    /// A record may lack the dimension.
    Optional,
}

/// One partition key, in Timestream's wire shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionKey {
    /// `DIMENSION` or `MEASURE`.
    #[serde(rename = "Type")]
    pub kind: PartitionKeyType,
    /// The dimension's name (dimension keys only).
    #[serde(rename = "Name", default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Enforcement (dimension keys only; absent means optional).
    #[serde(
        rename = "EnforcementInRecord",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enforcement: Option<Enforcement>,
}

/// A table's `Schema`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    /// The partition keys (one).
    #[serde(rename = "CompositePartitionKey")]
    pub composite_partition_key: Vec<PartitionKey>,
}

impl Default for TableSchema {
    /// Partitioned by measure name, as a table created without a schema.
    fn default() -> Self {
        Self {
            composite_partition_key: vec![PartitionKey {
                kind: PartitionKeyType::Measure,
                name: None,
                enforcement: None,
            }],
        }
    }
}

/// The text of member `key` of `obj`, if present; an error naming `at` if not text.
fn text<'a>(
    obj: &'a serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::invalid(format!("{at}.{key} must be a string."))),
    }
}

fn key_from_json(v: &Value, at: &str) -> Result<PartitionKey> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::invalid(format!("{at} must be an object.")))?;
    if let Some(other) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "Type" | "Name" | "EnforcementInRecord"))
    {
        return Err(Error::invalid(format!(
            "{at} has an unknown member {other:?}; a partition key has Type, Name and EnforcementInRecord."
        )));
    }
    let kind = match text(obj, "Type", at)? {
        Some("DIMENSION") => PartitionKeyType::Dimension,
        Some("MEASURE") => PartitionKeyType::Measure,
        Some(other) => {
            return Err(Error::invalid(format!(
                "{at}.Type {other:?} is not one of DIMENSION, MEASURE."
            )));
        }
        None => return Err(Error::invalid(format!("{at}.Type is required."))),
    };
    let enforcement = match text(obj, "EnforcementInRecord", at)? {
        Some("REQUIRED") => Some(Enforcement::Required),
        Some("OPTIONAL") => Some(Enforcement::Optional),
        Some(other) => {
            return Err(Error::invalid(format!(
                "{at}.EnforcementInRecord {other:?} is not one of REQUIRED, OPTIONAL."
            )));
        }
        None => None,
    };
    let name = text(obj, "Name", at)?;
    match kind {
        PartitionKeyType::Dimension => {
            let name = name.ok_or_else(|| {
                Error::invalid(format!(
                    "{at}.Name is required for a DIMENSION partition key."
                ))
            })?;
            if name.is_empty() || name.len() > MAX_PARTITION_KEY_NAME_BYTES {
                return Err(Error::invalid(format!(
                    "{at}.Name must be 1 to {MAX_PARTITION_KEY_NAME_BYTES} bytes long; it is {}.",
                    name.len()
                )));
            }
        }
        PartitionKeyType::Measure => {
            if name.is_some() || enforcement.is_some() {
                return Err(Error::invalid(format!(
                    "{at}: a MEASURE partition key (measure_name) takes no Name or EnforcementInRecord."
                )));
            }
        }
    }
    Ok(PartitionKey {
        kind,
        name: name.map(str::to_string),
        enforcement,
    })
}

impl TableSchema {
    /// Reads and checks a request's `Schema` member.
    pub fn from_json(v: &Value) -> Result<Self> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::invalid("Schema must be an object."))?;
        if let Some(other) = obj.keys().find(|k| k.as_str() != "CompositePartitionKey") {
            return Err(Error::invalid(format!(
                "Schema has an unknown member {other:?}; it has CompositePartitionKey."
            )));
        }
        let keys = match obj.get("CompositePartitionKey") {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Array(keys)) => keys,
            Some(_) => {
                return Err(Error::invalid(
                    "Schema.CompositePartitionKey must be a list.",
                ));
            }
        };
        if keys.is_empty() || keys.len() > MAX_PARTITION_KEYS {
            return Err(Error::invalid(format!(
                "Schema.CompositePartitionKey holds {MAX_PARTITION_KEYS} partition key; it has {}.",
                keys.len()
            )));
        }
        let composite_partition_key = keys
            .iter()
            .enumerate()
            .map(|(i, k)| key_from_json(k, &format!("Schema.CompositePartitionKey[{i}]")))
            .collect::<Result<_>>()?;
        Ok(Self {
            composite_partition_key,
        })
    }

    /// The wire form (DescribeTable's `Schema`).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether `next` may replace this schema: only enforcement may change.
    pub fn check_update(&self, next: &Self) -> Result<()> {
        let same_keys = self.composite_partition_key.len() == next.composite_partition_key.len()
            && self
                .composite_partition_key
                .iter()
                .zip(&next.composite_partition_key)
                .all(|(a, b)| a.kind == b.kind && a.name == b.name);
        if same_keys {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "A table's partition key cannot change after it is created; only its EnforcementInRecord can be updated. The table is partitioned by {}.",
            self.describe_key()
        )))
    }

    /// The dimension every record must carry, if the key is a required dimension.
    pub fn required_dimension(&self) -> Option<&str> {
        self.composite_partition_key
            .iter()
            .find(|k| {
                k.kind == PartitionKeyType::Dimension
                    && k.enforcement == Some(Enforcement::Required)
            })
            .and_then(|k| k.name.as_deref())
    }

    /// The rejection reason of a record whose dimension names are `names`, if it lacks
    /// a required dimension key.
    pub fn missing_key<'a>(&self, mut names: impl Iterator<Item = &'a str>) -> Option<String> {
        let key = self.required_dimension()?;
        if names.any(|n| n == key) {
            return None;
        }
        Some(format!(
            "Dimension {key} is the table's partition key with EnforcementInRecord REQUIRED, and the record does not have it."
        ))
    }

    fn describe_key(&self) -> String {
        match self.composite_partition_key.first() {
            Some(PartitionKey {
                kind: PartitionKeyType::Dimension,
                name: Some(n),
                ..
            }) => format!("dimension {n}"),
            _ => "measure_name".into(),
        }
    }
}

/// Reads a stored schema; one the catalog kept before schemas were checked and that
/// does not parse is read as the default rather than making the table unreadable.
pub fn lenient<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<TableSchema>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.and_then(|v| TableSchema::from_json(&v).ok()))
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use serde_json::json;

    use super::*;

    fn bad(v: Value, says: &str) {
        let e = TableSchema::from_json(&v).unwrap_err().to_string();
        assert!(e.contains(says), "{v}: {e}");
    }

    #[test]
    fn schemas_parse_and_print_in_the_wire_shape() {
        let dim = json!({"CompositePartitionKey": [
            {"Type": "DIMENSION", "Name": "host", "EnforcementInRecord": "REQUIRED"}]});
        let s = TableSchema::from_json(&dim).unwrap();
        assert_eq!(s.to_json(), dim);
        assert_eq!(s.required_dimension(), Some("host"));
        let measure = json!({"CompositePartitionKey": [{"Type": "MEASURE"}]});
        let m = TableSchema::from_json(&measure).unwrap();
        assert_eq!(m, TableSchema::default());
        assert_eq!(m.to_json(), measure);
        assert_eq!(m.required_dimension(), None);
        assert_eq!(
            TableSchema::from_json(&json!({})).unwrap(),
            TableSchema::default()
        );
        let optional = json!({"CompositePartitionKey": [{"Type": "DIMENSION", "Name": "host"}]});
        assert_eq!(
            TableSchema::from_json(&optional)
                .unwrap()
                .required_dimension(),
            None
        );
    }

    #[test]
    fn bad_schemas_name_what_is_wrong() {
        bad(json!([]), "Schema must be an object");
        bad(json!({"Keys": []}), "unknown member \"Keys\"");
        bad(json!({"CompositePartitionKey": {}}), "must be a list");
        bad(json!({"CompositePartitionKey": []}), "it has 0");
        let two = json!({"Type": "MEASURE"});
        bad(
            json!({"CompositePartitionKey": [two.clone(), two]}),
            "it has 2",
        );
        bad(
            json!({"CompositePartitionKey": [{"Name": "x"}]}),
            "[0].Type is required",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "dimension", "Name": "x"}]}),
            "not one of DIMENSION, MEASURE",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "DIMENSION"}]}),
            "Name is required",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "DIMENSION", "Name": ""}]}),
            "1 to 2048 bytes",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "DIMENSION", "Name": "x".repeat(2049)}]}),
            "it is 2049",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "DIMENSION", "Name": "x", "EnforcementInRecord": "ALWAYS"}]}),
            "not one of REQUIRED, OPTIONAL",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "MEASURE", "Name": "x"}]}),
            "takes no Name",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": 3}]}),
            "Type must be a string",
        );
        bad(
            json!({"CompositePartitionKey": [{"Type": "MEASURE", "Extra": 1}]}),
            "unknown member \"Extra\"",
        );
    }

    #[test]
    fn only_enforcement_changes_on_update() {
        let key = |name: &str, enforcement: &str| {
            TableSchema::from_json(&json!({"CompositePartitionKey": [
                {"Type": "DIMENSION", "Name": name, "EnforcementInRecord": enforcement}]}))
            .unwrap()
        };
        let required = key("host", "REQUIRED");
        required.check_update(&key("host", "OPTIONAL")).unwrap();
        let e = required
            .check_update(&key("region", "REQUIRED"))
            .unwrap_err();
        assert!(
            e.to_string().contains("partitioned by dimension host"),
            "{e}"
        );
        let e = TableSchema::default().check_update(&required).unwrap_err();
        assert!(e.to_string().contains("partitioned by measure_name"), "{e}");
    }

    #[test]
    fn a_required_key_rejects_records_without_it() {
        let s = TableSchema::from_json(&json!({"CompositePartitionKey": [
            {"Type": "DIMENSION", "Name": "host", "EnforcementInRecord": "REQUIRED"}]}))
        .unwrap();
        assert_eq!(s.missing_key(["region", "host"].into_iter()), None);
        let why = s.missing_key(["region"].into_iter()).unwrap();
        assert!(
            why.contains("Dimension host") && why.contains("REQUIRED"),
            "{why}"
        );
        assert_eq!(TableSchema::default().missing_key(std::iter::empty()), None);
    }

    #[test]
    fn stored_schemas_that_do_not_parse_read_as_none() {
        #[derive(Deserialize)]
        struct Holder {
            #[serde(default, deserialize_with = "lenient")]
            schema: Option<TableSchema>,
        }
        let h: Holder =
            serde_json::from_value(json!({"schema": {"CompositePartitionKey": "x"}})).unwrap();
        assert_eq!(h.schema, None);
        let h: Holder = serde_json::from_value(json!({})).unwrap();
        assert_eq!(h.schema, None);
        let h: Holder = serde_json::from_value(
            json!({"schema": {"CompositePartitionKey": [{"Type": "MEASURE"}]}}),
        )
        .unwrap();
        assert_eq!(h.schema, Some(TableSchema::default()));
    }
}
