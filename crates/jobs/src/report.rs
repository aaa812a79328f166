//! Error reports: where Timestream writes a JSON report to the S3 bucket and prefix a
//! job names, Almanac writes the same file under its bucket directory
//! (`serve --bucket-dir`, default `DATA_DIR/buckets`):
//! `BUCKET_DIR/BUCKET/PREFIX/OBJECT` with the object key a job gives, in the shape
//! of the job's report.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Where a report went: `BucketName` and `ObjectKey`, as Timestream names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The bucket (a directory under the bucket directory).
    pub bucket: String,
    /// The object key (a path under the bucket).
    pub key: String,
}

/// Whether `part` is a plain relative path: no `..`, no root, so that a bucket or
/// prefix cannot write outside the bucket directory.
fn relative(part: &str) -> bool {
    Path::new(part)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
}

/// Checks a bucket name and key prefix as given in a request.
pub fn check_destination(bucket: &str, prefix: Option<&str>) -> Result<()> {
    if bucket.is_empty() || bucket.contains('/') || !relative(bucket) {
        return Err(Error::invalid(format!(
            "BucketName {bucket:?} must be a single path component: Almanac writes reports to BUCKET_DIR/BUCKET/PREFIX."
        )));
    }
    if let Some(p) = prefix
        && !p.is_empty()
        && !relative(p)
    {
        return Err(Error::invalid(format!(
            "ObjectKeyPrefix {p:?} must be a relative path without '..'."
        )));
    }
    Ok(())
}

/// Writes `body` to `dir/bucket/prefix/name` and says where.
pub fn write(
    dir: &Path,
    bucket: &str,
    prefix: Option<&str>,
    name: &str,
    body: &serde_json::Value,
) -> Result<Location> {
    let key = match prefix.filter(|p| !p.is_empty()) {
        Some(p) => format!("{}/{name}", p.trim_end_matches('/')),
        None => name.to_string(),
    };
    let path: PathBuf = dir.join(bucket).join(&key);
    let io = |e: std::io::Error| {
        Error::Internal(format!("writing the error report {}: {e}", path.display()))
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(&path, body.to_string()).map_err(io)?;
    Ok(Location {
        bucket: bucket.to_string(),
        key,
    })
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    #[test]
    fn destinations_stay_inside_the_bucket_directory() {
        assert!(check_destination("b", Some("a/b/")).is_ok());
        assert!(check_destination("b", None).is_ok());
        for (b, p) in [
            ("..", None),
            ("a/b", None),
            ("", None),
            ("b", Some("../x")),
            ("b", Some("/abs")),
        ] {
            assert!(check_destination(b, p).is_err(), "{b} {p:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let body = serde_json::json!({"reason": "boom"});
        let at = write(dir.path(), "b", Some("p/"), "r1.json", &body).unwrap();
        assert_eq!(at.key, "p/r1.json");
        let text = std::fs::read_to_string(dir.path().join("b/p/r1.json")).unwrap();
        assert!(text.contains("boom"), "{text}");
    }
}
