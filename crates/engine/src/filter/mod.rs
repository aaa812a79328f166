//! The RowFilter language of `google.bigtable.v2.RowFilter`.
//!
//! A read evaluates a filter in four steps:
//! 1. [`RowFilter`] is the caller's tree, a one-to-one image of the proto.
//! 2. `compile` checks it (nesting ≤ [`crate::limits::MAX_FILTER_DEPTH`], labels,
//!    regexes) and compiles regexes once per request.
//! 3. `plan` derives a [`crate::plan::ReadPlan`]: the families, column ranges,
//!    timestamp range and per-column cell limit that storage can seek to, so that
//!    cells a filter would drop are never read.
//! 4. `eval` applies the whole filter to the cells the plan returned, one row at a time.

use std::ops::Bound;

/// A filter over the cells of one row, as `google.bigtable.v2.RowFilter`.
#[derive(Debug, Clone, PartialEq)]
pub enum RowFilter {
    /// Apply each filter to the output of the previous one.
    Chain(Vec<RowFilter>),
    /// Apply each filter to a copy of the input and merge the outputs in row order,
    /// keeping duplicates.
    Interleave(Vec<RowFilter>),
    /// If `predicate` outputs any cell for the row, apply `true_filter`, else
    /// `false_filter`, to the whole input row; a missing branch outputs nothing.
    Condition {
        /// Evaluated on the whole input row; its output is never returned.
        predicate: Box<RowFilter>,
        /// Applied when the predicate outputs at least one cell.
        true_filter: Option<Box<RowFilter>>,
        /// Applied when the predicate outputs nothing.
        false_filter: Option<Box<RowFilter>>,
    },
    /// Send the input straight to the read's output, bypassing every enclosing filter.
    Sink,
    /// Output every input cell.
    PassAll,
    /// Output nothing.
    BlockAll,
    /// Keep the row's cells if the whole row key matches this RE2 regex (raw bytes).
    RowKeyRegex(Vec<u8>),
    /// Keep the row with this probability, in `(0, 1)`.
    RowSample(f64),
    /// Keep cells whose whole family name matches this RE2 regex.
    FamilyNameRegex(String),
    /// Keep cells whose whole qualifier matches this RE2 regex (raw bytes).
    ColumnQualifierRegex(Vec<u8>),
    /// Keep cells of `family` whose qualifier lies in the range.
    ColumnRange {
        /// The family the range applies to (cells of other families are dropped).
        family: String,
        /// Lower bound on the qualifier.
        start: Bound<Vec<u8>>,
        /// Upper bound on the qualifier.
        end: Bound<Vec<u8>>,
    },
    /// Keep cells with `start_us <= timestamp < end_us` (`end_us` 0 or absent = infinity).
    TimestampRange {
        /// Inclusive lower bound in microseconds.
        start_us: i64,
        /// Exclusive upper bound in microseconds; `None` for no bound.
        end_us: Option<i64>,
    },
    /// Keep cells whose whole value matches this RE2 regex (raw bytes).
    ValueRegex(Vec<u8>),
    /// Keep cells whose value lies in the range.
    ValueRange {
        /// Lower bound on the value.
        start: Bound<Vec<u8>>,
        /// Upper bound on the value.
        end: Bound<Vec<u8>>,
    },
    /// Skip the first N cells of the row.
    CellsPerRowOffset(u32),
    /// Keep only the first N cells of the row.
    CellsPerRowLimit(u32),
    /// Keep only the N newest cells of each column.
    CellsPerColumnLimit(u32),
    /// Keep cells whose value, ANDed with the mask, equals the mask; the mask length
    /// must equal the value length (`value_bitmask_filter`).
    ValueBitmask(Vec<u8>),
    /// Replace every value with the empty string.
    StripValue,
    /// Add a label to every cell.
    ApplyLabel(String),
}

impl RowFilter {
    /// Calls `f` on this filter and every filter nested in it, parents first.
    pub fn visit(&self, f: &mut impl FnMut(&RowFilter)) {
        f(self);
        match self {
            RowFilter::Chain(children) | RowFilter::Interleave(children) => {
                children.iter().for_each(|c| c.visit(f));
            }
            RowFilter::Condition {
                predicate,
                true_filter,
                false_filter,
            } => {
                predicate.visit(f);
                true_filter
                    .iter()
                    .chain(false_filter)
                    .for_each(|c| c.visit(f));
            }
            _ => {}
        }
    }
}

mod compile;
mod eval;
mod pattern;
mod plan;

pub use compile::CompiledFilter;
pub use plan::select;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod prop;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
