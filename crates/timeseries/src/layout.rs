//! How a table lays its records out in Bigtable rows: one of the four patterns of
//! Google's "Schema design for time series data" for Bigtable, a bucket size for the
//! bucketed ones, and whether time in the row key is reversed (newest first). Chosen at
//! table creation, fixed after.
//!
//! Over the Timestream API the layout is chosen with CreateTable tags
//! (`almanac:layout`, `almanac:bucket`, `almanac:reverse-time`, `almanac:seal`); see
//! [`Layout::from_tags`].

use almanac_engine::calendar::NANOS_PER_SEC;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits::{MAX_BUCKET_SECS, MIN_BUCKET_SECS};

/// One of the four patterns of Google's "Schema design for time series data" for Bigtable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Time buckets, new columns: a row per series and bucket; each point is a cell whose
    /// qualifier is the value and whose timestamp is the time; the cell value is empty.
    BucketColumns,
    /// Time buckets, new cells: a row per series and bucket; one column per measure;
    /// each point is a new cell (version) of that column at the point's time.
    BucketCells,
    /// Single-timestamp rows, serialized: a row per point; all measures in one protobuf cell.
    RowSerialized,
    /// Single-timestamp rows, unserialized: a row per point; one column per measure.
    RowColumns,
}

impl Pattern {
    /// Every pattern, in that guide's order.
    pub const ALL: [Pattern; 4] = [
        Self::BucketColumns,
        Self::BucketCells,
        Self::RowSerialized,
        Self::RowColumns,
    ];

    /// The name used in tags, flags and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BucketColumns => "bucket-columns",
            Self::BucketCells => "bucket-cells",
            Self::RowSerialized => "row-serialized",
            Self::RowColumns => "row-columns",
        }
    }

    /// Parses a name of [`Pattern::as_str`].
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown layout {s:?}; expected one of bucket-columns, bucket-cells, \
                     row-serialized, row-columns"
                ))
            })
    }

    /// Whether rows hold a time bucket (else one point per row).
    pub fn is_bucketed(self) -> bool {
        matches!(self, Self::BucketColumns | Self::BucketCells)
    }
}

/// Tag key choosing the pattern.
pub const TAG_LAYOUT: &str = "almanac:layout";
/// Tag key choosing the bucket size (`90s`, `15m`, `1h`, `1d` or seconds).
pub const TAG_BUCKET: &str = "almanac:bucket";
/// Tag key choosing reversed time in row keys (`true` / `false`).
pub const TAG_REVERSE_TIME: &str = "almanac:reverse-time";
/// Tag key choosing whether closed buckets are sealed into compressed blocks
/// (`true` / `false`; see [`crate::seal`]).
pub const TAG_SEAL: &str = "almanac:seal";

/// The default pattern, chosen by measurement: with multi-measure records (what
/// Timestream recommends) single-timestamp serialized rows write fastest, take the
/// fewest bytes per point, and answer "last hour of one series" and "latest of every
/// series" fastest; they lose only on "one measure across all series" and, to bucket
/// cells, on single-measure records. Measurements: docs/benchmarks.md, the four
/// patterns (`almanac-bench patterns`).
pub const DEFAULT_PATTERN: Pattern = Pattern::RowSerialized;
/// The default bucket: one hour (360 points per series at 10 s, 60 at one a minute).
pub const DEFAULT_BUCKET_SECS: i64 = 3600;

/// A table's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The pattern.
    pub pattern: Pattern,
    /// Bucket length in seconds: a row's span in the bucketed patterns, and the span
    /// of one sealed block in every pattern.
    pub bucket_secs: i64,
    /// Time in row keys counts down, so the newest row of a series sorts first.
    pub reverse_time: bool,
    /// Closed buckets are sealed: each series' points of the bucket are rewritten
    /// into one compressed block cell ([`crate::seal`]). Tables described before
    /// sealing existed have no block family and read as `false`.
    #[serde(default)]
    pub seal: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Self {
            pattern: DEFAULT_PATTERN,
            bucket_secs: DEFAULT_BUCKET_SECS,
            reverse_time: false,
            seal: true,
        }
    }
}

impl Layout {
    /// The bucket's length in nanoseconds.
    pub fn bucket_ns(&self) -> i64 {
        self.bucket_secs.saturating_mul(NANOS_PER_SEC)
    }

    /// Checks the bucket size.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_BUCKET_SECS..=MAX_BUCKET_SECS).contains(&self.bucket_secs) {
            return Err(Error::invalid(format!(
                "bucket of {} s is outside [{MIN_BUCKET_SECS}, {MAX_BUCKET_SECS}] seconds",
                self.bucket_secs
            )));
        }
        Ok(())
    }

    /// The layout asked for by CreateTable tags; absent tags take the defaults.
    pub fn from_tags<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut layout = Self::default();
        for (key, value) in tags {
            match key {
                TAG_LAYOUT => layout.pattern = Pattern::parse(value)?,
                TAG_BUCKET => layout.bucket_secs = parse_duration_secs(value)?,
                TAG_REVERSE_TIME => layout.reverse_time = parse_flag(key, value)?,
                TAG_SEAL => layout.seal = parse_flag(key, value)?,
                _ => {}
            }
        }
        layout.validate()?;
        Ok(layout)
    }
}

/// Parses the value of a true/false tag.
fn parse_flag(key: &str, value: &str) -> Result<bool> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::invalid(format!(
            "tag {key} must be true or false, not {value:?}"
        ))),
    }
}

/// Parses `3600`, `90s`, `15m`, `1h` or `1d` into seconds.
pub fn parse_duration_secs(s: &str) -> Result<i64> {
    let bad = || {
        Error::invalid(format!(
            "bad duration {s:?}; expected e.g. 3600, 90s, 15m, 1h, 1d"
        ))
    };
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, "s"),
    };
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_choose_the_layout() -> Result<()> {
        let l = Layout::from_tags([
            (TAG_LAYOUT, "row-serialized"),
            (TAG_BUCKET, "15m"),
            (TAG_REVERSE_TIME, "true"),
            (TAG_SEAL, "false"),
            ("owner", "me"),
        ])?;
        assert_eq!(l.pattern, Pattern::RowSerialized);
        assert_eq!(l.bucket_secs, 900);
        assert!(l.reverse_time);
        assert!(!l.seal);
        assert!(Layout::from_tags([(TAG_SEAL, "yes")]).is_err());
        // Descriptions written before sealing existed read as unsealed.
        let old: Layout = serde_json::from_str(
            r#"{"pattern":"row-serialized","bucket_secs":3600,"reverse_time":false}"#,
        )
        .map_err(|e| Error::Corrupt(e.to_string()))?;
        assert!(!old.seal);
        assert_eq!(Layout::from_tags([])?, Layout::default());
        assert!(Layout::from_tags([(TAG_LAYOUT, "wide")]).is_err());
        assert!(Layout::from_tags([(TAG_BUCKET, "0")]).is_err());
        assert!(Layout::from_tags([(TAG_BUCKET, "8d")]).is_err());
        assert!(Layout::from_tags([(TAG_BUCKET, "1x")]).is_err());
        Ok(())
    }
}
