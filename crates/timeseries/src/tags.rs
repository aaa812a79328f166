//! Tags of databases and tables: TagResource, UntagResource, ListTagsForResource, and
//! the `Tags` of CreateDatabase and CreateTable.
//!
//! A tagging request, step by step:
//! 1. [`Resource::from_arn`] reads the ARN: `arn:aws:timestream:REGION:ACCOUNT:database/DB`
//!    or `…:database/DB/table/TABLE` (any region and account: one local namespace).
//! 2. [`check`] holds each tag to Timestream's rules: key 1 to [`MAX_TAG_KEY_CHARS`]
//!    characters, not starting with `aws:`; value up to [`MAX_TAG_VALUE_CHARS`]; no key
//!    twice in one request.
//! 3. The catalog changes the resource's tags in one write ([`add`], [`remove`]): a
//!    new value replaces the old one under the same key, at most
//!    [`MAX_TAGS_PER_RESOURCE`] tags per resource, and a refused request changes
//!    nothing.
//!
//! Tags are kept as given, `almanac:` layout tags included (CreateTable reads those
//! to choose the storage pattern, `layout.rs`); they do not change after creation.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Most tags on one resource.
pub const MAX_TAGS_PER_RESOURCE: usize = 200;
/// Longest tag key, in characters.
pub const MAX_TAG_KEY_CHARS: usize = 128;
/// Longest tag value, in characters.
pub const MAX_TAG_VALUE_CHARS: usize = 256;
/// Longest resource ARN, in characters.
pub const MAX_ARN_CHARS: usize = 1011;
/// Key prefix reserved for AWS.
const RESERVED_PREFIX: &str = "aws:";

/// One tag, in Timestream's wire shape (`{"Key": .., "Value": ..}`), which is also
/// how the catalog keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub struct Tag {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// A taggable resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// A database.
    Database(String),
    /// A table: database, table.
    Table(String, String),
}

impl Resource {
    /// The resource an ARN names.
    pub fn from_arn(arn: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(format!(
                "ResourceARN {arn:?} is not a Timestream database or table ARN (arn:aws:timestream:REGION:ACCOUNT:database/NAME[/table/NAME])."
            ))
        };
        if arn.chars().count() > MAX_ARN_CHARS {
            return Err(Error::invalid(format!(
                "ResourceARN is longer than {MAX_ARN_CHARS} characters."
            )));
        }
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(_partition), Some("timestream"), Some(_region), Some(_account)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        let path = parts.next().ok_or_else(bad)?;
        let rest = path.strip_prefix("database/").ok_or_else(bad)?;
        match rest.split('/').collect::<Vec<_>>().as_slice() {
            [db] if !db.is_empty() => Ok(Self::Database((*db).to_string())),
            [db, "table", t] if !db.is_empty() && !t.is_empty() => {
                Ok(Self::Table((*db).to_string(), (*t).to_string()))
            }
            _ => Err(bad()),
        }
    }
}

/// Checks the tags of one request.
pub fn check(tags: &[Tag]) -> Result<()> {
    for (i, t) in tags.iter().enumerate() {
        check_key(&t.key)?;
        let chars = t.value.chars().count();
        if chars > MAX_TAG_VALUE_CHARS {
            return Err(Error::invalid(format!(
                "The value of tag {:?} has {chars} characters; the limit is {MAX_TAG_VALUE_CHARS}.",
                t.key
            )));
        }
        if tags[..i].iter().any(|o| o.key == t.key) {
            return Err(Error::invalid(format!(
                "Tag key {:?} appears more than once.",
                t.key
            )));
        }
    }
    Ok(())
}

/// Checks one tag key.
pub fn check_key(key: &str) -> Result<()> {
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_TAG_KEY_CHARS {
        return Err(Error::invalid(format!(
            "Tag key {key:?} has {chars} characters; a key has 1 to {MAX_TAG_KEY_CHARS}."
        )));
    }
    if key.starts_with(RESERVED_PREFIX) {
        return Err(Error::invalid(format!(
            "Tag key {key:?} starts with {RESERVED_PREFIX:?}, which is reserved for AWS."
        )));
    }
    Ok(())
}

/// Adds `new` to `current` (a key already there takes the new value).
pub fn add(current: &mut Vec<Tag>, new: Vec<Tag>) -> Result<()> {
    check(&new)?;
    let mut next = current.clone();
    for t in new {
        match next.iter_mut().find(|o| o.key == t.key) {
            Some(old) => old.value = t.value,
            None => next.push(t),
        }
    }
    if next.len() > MAX_TAGS_PER_RESOURCE {
        return Err(Error::invalid(format!(
            "The resource would have {} tags; the limit is {MAX_TAGS_PER_RESOURCE}.",
            next.len()
        )));
    }
    *current = next;
    Ok(())
}

/// Removes the tags under `keys` (a key not there is ignored, as in Timestream).
pub fn remove(current: &mut Vec<Tag>, keys: &[String]) -> Result<()> {
    for k in keys {
        check_key(k)?;
    }
    current.retain(|t| !keys.contains(&t.key));
    Ok(())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    fn tag(k: &str, v: &str) -> Tag {
        Tag {
            key: k.into(),
            value: v.into(),
        }
    }

    #[test]
    fn arns_name_databases_and_tables() {
        let db = "arn:aws:timestream:us-east-1:000000000000:database/db1";
        assert_eq!(
            Resource::from_arn(db).unwrap(),
            Resource::Database("db1".into())
        );
        assert_eq!(
            Resource::from_arn(&format!("{db}/table/t1")).unwrap(),
            Resource::Table("db1".into(), "t1".into())
        );
        for bad in [
            "",
            "db1",
            "arn:aws:s3:us-east-1:0:database/db1",
            "arn:aws:timestream:us-east-1:0:scheduled-query/q",
            "arn:aws:timestream:us-east-1:0:database/",
            "arn:aws:timestream:us-east-1:0:database/db1/table/",
            "arn:aws:timestream:us-east-1:0:database/db1/index/t",
            "arn:aws:timestream:us-east-1:0:database/db1/table/t/x",
        ] {
            let e = Resource::from_arn(bad).unwrap_err().to_string();
            assert!(
                e.contains("not a Timestream database or table ARN"),
                "{bad}: {e}"
            );
        }
        let long = format!("{db}/table/{}", "t".repeat(MAX_ARN_CHARS));
        assert!(
            Resource::from_arn(&long)
                .unwrap_err()
                .to_string()
                .contains("1011")
        );
    }

    #[test]
    fn tags_are_checked_added_and_removed() {
        let mut tags = vec![tag("team", "a")];
        add(&mut tags, vec![tag("team", "b"), tag("env", "")]).unwrap();
        assert_eq!(tags, vec![tag("team", "b"), tag("env", "")]);
        remove(&mut tags, &["team".into(), "absent".into()]).unwrap();
        assert_eq!(tags, vec![tag("env", "")]);

        let says = |tags: Vec<Tag>, what: &str| {
            let mut current = vec![tag("keep", "1")];
            let e = add(&mut current, tags).unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
            assert_eq!(
                current,
                vec![tag("keep", "1")],
                "a refused add changed the tags"
            );
        };
        says(vec![tag("", "x")], "a key has 1 to 128");
        says(vec![tag(&"k".repeat(129), "x")], "129 characters");
        says(vec![tag("aws:x", "x")], "reserved for AWS");
        says(vec![tag("k", &"v".repeat(257))], "the limit is 256");
        says(vec![tag("k", "1"), tag("k", "2")], "more than once");
        says(
            (0..MAX_TAGS_PER_RESOURCE)
                .map(|i| tag(&format!("k{i}"), "v"))
                .collect(),
            "would have 201 tags",
        );
        let full: Vec<Tag> = (0..MAX_TAGS_PER_RESOURCE)
            .map(|i| tag(&format!("k{i}"), "v"))
            .collect();
        let mut current = Vec::new();
        add(&mut current, full).unwrap();
        assert_eq!(current.len(), MAX_TAGS_PER_RESOURCE);
        let e = remove(&mut current, &["aws:x".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("reserved"), "{e}");
    }
}
