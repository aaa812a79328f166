//! Where a batch load reads: local directories that stand in for S3 buckets, and
//! CSV read with the task's `CsvConfiguration`.
//!
//! A bucket is `BUCKET_DIR/NAME`, or a directory named directly by `file:///dir` or
//! an absolute path. `ObjectKeyPrefix` selects the files whose path under the bucket
//! starts with it, as S3 prefixes do; the list is fixed when the task is created.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

use super::wire::CsvConfiguration;

/// Most files one task reads (Timestream's limit).
pub const MAX_FILES: usize = 100;
/// Largest file (Timestream's limit: 5 GB).
pub const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024 * 1024;
/// Most bytes one task reads (Timestream's limit: 100 GB).
pub const MAX_TASK_BYTES: u64 = 100 * 1024 * 1024 * 1024;
/// Largest CSV row (Timestream's limit: 16 MB).
pub const MAX_ROW_BYTES: usize = 16 * 1024 * 1024;

/// The directory a bucket name stands for.
pub fn bucket_path(bucket_dir: &Path, bucket: &str) -> Result<PathBuf> {
    if let Some(p) = bucket.strip_prefix("file://") {
        return Ok(PathBuf::from(p));
    }
    if Path::new(bucket).is_absolute() {
        return Ok(PathBuf::from(bucket));
    }
    crate::report::check_destination(bucket, None)?;
    Ok(bucket_dir.join(bucket))
}

/// The files under `root` whose relative path starts with `prefix`, sorted, with
/// their sizes; checked against the limits.
pub fn list(root: &Path, prefix: &str) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let io =
        |p: &Path, e: std::io::Error| Error::invalid(format!("Cannot read {}: {e}", p.display()));
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .map(|r| r.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                if rel.starts_with(prefix) {
                    let len = entry.metadata().map_err(|e| io(&path, e))?.len();
                    out.push((rel, len));
                }
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "No file under {} starts with the prefix {prefix:?}.",
            root.display()
        )));
    }
    if out.len() > MAX_FILES {
        return Err(Error::invalid(format!(
            "The source holds {} files; a batch load task reads at most {MAX_FILES}.",
            out.len()
        )));
    }
    if let Some((name, len)) = out.iter().find(|(_, len)| *len > MAX_FILE_BYTES) {
        return Err(Error::invalid(format!(
            "{name} is {len} bytes; a file may hold at most {MAX_FILE_BYTES}."
        )));
    }
    let total: u64 = out.iter().map(|(_, l)| l).sum();
    if total > MAX_TASK_BYTES {
        return Err(Error::invalid(format!(
            "The source holds {total} bytes; a batch load task reads at most {MAX_TASK_BYTES}."
        )));
    }
    Ok(out)
}

fn one_byte(what: &str, v: &str) -> Result<u8> {
    let v = if what == "ColumnSeparator" && (v == "/t" || v == "\\t") {
        "\t"
    } else {
        v
    };
    match v.as_bytes() {
        [b] if b.is_ascii() => Ok(*b),
        _ => Err(Error::invalid(format!(
            "CsvConfiguration.{what} {v:?} must be one ASCII character."
        ))),
    }
}

/// A CSV reader over `input` with `config`.
pub fn reader<R: Read>(config: &CsvConfiguration, input: R) -> Result<csv::Reader<R>> {
    let mut b = csv::ReaderBuilder::new();
    b.has_headers(true).flexible(true);
    if let Some(s) = &config.column_separator {
        b.delimiter(one_byte("ColumnSeparator", s)?);
    }
    if let Some(q) = &config.quote_char {
        b.quote(one_byte("QuoteChar", q)?);
    }
    if let Some(e) = &config.escape_char {
        b.escape(Some(one_byte("EscapeChar", e)?))
            .double_quote(false);
    }
    if config.trim_white_space == Some(true) {
        b.trim(csv::Trim::All);
    }
    Ok(b.from_reader(input))
}

/// Checks `config` without reading anything.
pub fn check(config: &CsvConfiguration) -> Result<()> {
    reader(config, std::io::empty()).map(|_| ())
}

/// A row's cells: empty or `null_value` cells are null.
pub fn cells(record: &csv::StringRecord, null_value: Option<&str>) -> Vec<Option<String>> {
    record
        .iter()
        .map(|c| (!c.is_empty() && Some(c) != null_value).then(|| c.to_string()))
        .collect()
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    #[test]
    fn prefixes_select_files_like_s3_and_csv_options_apply() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("results/p=1")).unwrap();
        std::fs::write(dir.path().join("results/a.csv"), "x\n").unwrap();
        std::fs::write(dir.path().join("results/p=1/b.csv"), "x\n").unwrap();
        std::fs::write(dir.path().join("other.csv"), "x\n").unwrap();
        let files = list(dir.path(), "results/").unwrap();
        let names: Vec<_> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["results/a.csv", "results/p=1/b.csv"]);
        assert!(list(dir.path(), "nothing").is_err());
        assert!(bucket_path(dir.path(), "../x").is_err());
        assert_eq!(
            bucket_path(dir.path(), "file:///data").unwrap(),
            PathBuf::from("/data")
        );

        let config = CsvConfiguration {
            column_separator: Some("|".into()),
            escape_char: Some("\\".into()),
            null_value: Some("NULL".into()),
            trim_white_space: Some(true),
            ..CsvConfiguration::default()
        };
        let text = "t|v|s\n1| 2 |\"a\\\"b\"\n2|NULL|\n";
        let mut r = reader(&config, text.as_bytes()).unwrap();
        let rows: Vec<_> = r
            .records()
            .map(|rec| cells(&rec.unwrap(), config.null_value.as_deref()))
            .collect();
        assert_eq!(
            rows[0],
            vec![Some("1".into()), Some("2".into()), Some("a\"b".into())]
        );
        assert_eq!(rows[1], vec![Some("2".into()), None, None]);
        let bad = CsvConfiguration {
            column_separator: Some("||".into()),
            ..CsvConfiguration::default()
        };
        assert!(check(&bad).is_err());
    }
}
