//! What storage should read for one request: the pushdown contract between the
//! filter language and the key layout.
//!
//! A [`ReadPlan`] describes a superset of the cells a filter can output, in terms the
//! key layout can seek to: families, qualifier ranges within a family, a timestamp
//! range and a per-column version limit (applied after the timestamp range). The
//! read path returns exactly the cells the plan selects, and the full filter then
//! runs on them, so a plan only has to be *safe*: evaluating the filter on the
//! plan's output gives the same result as evaluating it on the whole row.

use std::collections::BTreeMap;
use std::ops::Bound;

/// A range of qualifiers within one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualifierRange {
    /// Lower bound.
    pub start: Bound<Vec<u8>>,
    /// Upper bound.
    pub end: Bound<Vec<u8>>,
}

impl QualifierRange {
    /// Every qualifier.
    pub fn all() -> Self {
        Self {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Whether `q` lies in the range.
    pub fn contains(&self, q: &[u8]) -> bool {
        let lo = match &self.start {
            Bound::Unbounded => true,
            Bound::Included(s) => q >= s.as_slice(),
            Bound::Excluded(s) => q > s.as_slice(),
        };
        let hi = match &self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => q <= e.as_slice(),
            Bound::Excluded(e) => q < e.as_slice(),
        };
        lo && hi
    }
}

/// Which columns a read needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnSelection {
    /// Every family, every qualifier.
    All,
    /// Only these families (by name), each restricted to a union of qualifier ranges.
    /// A family mapped to an empty list selects nothing of that family.
    Families(BTreeMap<String, Vec<QualifierRange>>),
}

/// The cells storage returns for each row: see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlan {
    /// Families and qualifier ranges.
    pub columns: ColumnSelection,
    /// Inclusive lower timestamp bound in µs.
    pub ts_start_us: i64,
    /// Exclusive upper timestamp bound in µs; `None` for none.
    pub ts_end_us: Option<i64>,
    /// At most this many cells per column, newest first, counted after the
    /// timestamp range.
    pub cells_per_column: Option<u32>,
    /// At most this many cells per row, in row order after GC; set only when the
    /// filter begins with `cells_per_row_limit_filter` (and so needs nothing else).
    pub cells_per_row: Option<u32>,
}

impl Default for ReadPlan {
    fn default() -> Self {
        Self {
            columns: ColumnSelection::All,
            ts_start_us: i64::MIN,
            ts_end_us: None,
            cells_per_column: None,
            cells_per_row: None,
        }
    }
}

impl ReadPlan {
    /// Whether a cell at `ts_us` passes the timestamp range.
    pub fn ts_in_range(&self, ts_us: i64) -> bool {
        ts_us >= self.ts_start_us && self.ts_end_us.is_none_or(|e| ts_us < e)
    }

    /// Whether the plan selects anything of `family`, and the qualifier ranges if so
    /// (`None` = all qualifiers).
    pub fn family_ranges(&self, family: &str) -> Option<Option<&[QualifierRange]>> {
        match &self.columns {
            ColumnSelection::All => Some(None),
            ColumnSelection::Families(m) => m.get(family).map(|r| Some(r.as_slice())),
        }
    }
}
