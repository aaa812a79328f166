//! Which rows a read covers: keys plus ranges, as `google.bigtable.v2.RowSet`.

use std::ops::Bound;

use crate::error::{Error, Result};

/// A range of row keys; `Unbounded` on either side means the table's edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRange {
    /// Lower bound.
    pub start: Bound<Vec<u8>>,
    /// Upper bound.
    pub end: Bound<Vec<u8>>,
}

impl RowRange {
    /// Every row.
    pub fn all() -> Self {
        Self {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// The rows whose key starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
        Self {
            start: Bound::Included(prefix.to_vec()),
            end,
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => key >= s.as_slice(),
            Bound::Excluded(s) => key > s.as_slice(),
        };
        let before_end = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => key <= e.as_slice(),
            Bound::Excluded(e) => key < e.as_slice(),
        };
        after_start && before_end
    }

    /// Whether no key can lie in the range.
    pub fn is_empty(&self) -> bool {
        match (&self.start, &self.end) {
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
            (Bound::Included(s), Bound::Included(e)) => s > e,
            (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
            | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        }
    }
}

/// The smallest key greater than every key with this prefix, if one exists.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Rows to read: explicit keys plus ranges. An empty set means the whole table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowSet {
    /// Single row keys.
    pub keys: Vec<Vec<u8>>,
    /// Key ranges.
    pub ranges: Vec<RowRange>,
}

impl RowSet {
    /// Every row of the table.
    pub fn all() -> Self {
        Self::default()
    }

    /// One row.
    pub fn key(key: impl Into<Vec<u8>>) -> Self {
        Self {
            keys: vec![key.into()],
            ranges: vec![],
        }
    }

    /// Checks the set: a range whose start lies after its end is an error, as on the
    /// service.
    pub fn validate(&self) -> Result<()> {
        for r in &self.ranges {
            let inverted = match (&r.start, &r.end) {
                (
                    Bound::Included(s) | Bound::Excluded(s),
                    Bound::Included(e) | Bound::Excluded(e),
                ) => s > e,
                _ => false,
            };
            if inverted {
                return Err(Error::Invalid(format!(
                    "row range start {:?} is after its end {:?}",
                    String::from_utf8_lossy(bound_bytes(&r.start)),
                    String::from_utf8_lossy(bound_bytes(&r.end)),
                )));
            }
        }
        Ok(())
    }

    /// The set as disjoint, sorted ranges covering each requested row once.
    /// The whole table when the set is empty.
    pub fn normalized(&self) -> Vec<RowRange> {
        if self.keys.is_empty() && self.ranges.is_empty() {
            return vec![RowRange::all()];
        }
        let mut ranges: Vec<RowRange> = self
            .keys
            .iter()
            .map(|k| RowRange {
                start: Bound::Included(k.clone()),
                end: Bound::Included(k.clone()),
            })
            .chain(self.ranges.iter().filter(|r| !r.is_empty()).cloned())
            .collect();
        ranges.sort_by(|a, b| cmp_start(&a.start, &b.start));
        let mut out: Vec<RowRange> = Vec::with_capacity(ranges.len());
        for r in ranges {
            if let Some(last) = out.last_mut()
                && touches(&last.end, &r.start)
            {
                if cmp_end(&r.end, &last.end) == std::cmp::Ordering::Greater {
                    last.end = r.end;
                }
                continue;
            }
            out.push(r);
        }
        out
    }
}

fn bound_bytes(b: &Bound<Vec<u8>>) -> &[u8] {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => v,
        Bound::Unbounded => b"",
    }
}

fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Less,
        (_, Bound::Unbounded) => Greater,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Less),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Greater),
    }
}

fn cmp_end(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Equal,
        (Bound::Unbounded, _) => Greater,
        (_, Bound::Unbounded) => Less,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Greater),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Less),
    }
}

/// Whether a range ending at `end` overlaps or abuts one starting at `start`
/// (given the second does not start before the first).
fn touches(end: &Bound<Vec<u8>>, start: &Bound<Vec<u8>>) -> bool {
    match (end, start) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(e), Bound::Included(s))
        | (Bound::Excluded(e), Bound::Included(s))
        | (Bound::Included(e), Bound::Excluded(s)) => s <= e,
        (Bound::Excluded(e), Bound::Excluded(s)) => s < e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(k: &str) -> Bound<Vec<u8>> {
        Bound::Included(k.as_bytes().to_vec())
    }
    fn exc(k: &str) -> Bound<Vec<u8>> {
        Bound::Excluded(k.as_bytes().to_vec())
    }

    #[test]
    fn overlapping_keys_and_ranges_merge() {
        let set = RowSet {
            keys: vec![b"b".to_vec(), b"x".to_vec(), b"b".to_vec()],
            ranges: vec![
                RowRange {
                    start: inc("a"),
                    end: exc("c"),
                },
                RowRange {
                    start: inc("c"),
                    end: exc("d"),
                },
                RowRange {
                    start: inc("m"),
                    end: exc("m"),
                },
            ],
        };
        let n = set.normalized();
        assert_eq!(n.len(), 2, "{n:?}");
        assert_eq!(
            n[0],
            RowRange {
                start: inc("a"),
                end: exc("d")
            }
        );
        assert_eq!(
            n[1],
            RowRange {
                start: inc("x"),
                end: inc("x")
            }
        );
    }

    #[test]
    fn inverted_range_is_an_error() {
        let set = RowSet {
            keys: vec![],
            ranges: vec![RowRange {
                start: inc("z"),
                end: exc("a"),
            }],
        };
        assert!(set.validate().is_err());
    }

    #[test]
    fn prefix_successor_carries() {
        assert_eq!(prefix_successor(b"ab\xff"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
    }
}
