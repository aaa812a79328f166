//! Validation and compilation of a [`RowFilter`] into a [`CompiledFilter`].
//!
//! Compilation walks the tree once, top down:
//! 1. Depth: the top-level filter is depth 1 and each `Chain`, `Interleave` or
//!    `Condition` puts its children one level deeper; no filter may sit deeper than
//!    [`MAX_FILTER_DEPTH`]. The walk stops at the first filter past the limit, so a
//!    hostile tree cannot exhaust the stack here.
//! 2. Leaves: regexes compile (see [`super::pattern`]); a family regex has no `:`;
//!    `row_sample` is in `(0, 1)`; a column range names a family; ranges are not
//!    inverted; timestamps are non-negative and `start <= end`; labels are 1 to
//!    [`MAX_LABEL_CHARS`] characters of `[a-z0-9-]`.
//! 3. Structure, as data.proto states it: `sink` may not appear anywhere inside a
//!    `Condition` (predicate or branches), and a `Chain` may have at most one
//!    sub-filter that contains an `apply_label_transformer` (a cell carries at most
//!    one label). A label inside a condition's predicate does not count: the
//!    predicate's output never reaches the read.
//!
//! Every failure is [`Error::Invalid`] naming the proto field and the rule.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use super::RowFilter;
use super::pattern;
use crate::error::{Error, Result};
use crate::limits::{MAX_FILTER_DEPTH, MAX_LABEL_CHARS};
use crate::plan::QualifierRange;

/// A validated filter with its regexes compiled: built once per request, shared by
/// every row of the read (it is `Send + Sync`).
#[derive(Debug, Clone)]
pub struct CompiledFilter {
    pub(super) root: Node,
}

/// A compiled filter node: [`RowFilter`] with regexes compiled and bounds checked.
#[derive(Debug, Clone)]
pub(super) enum Node {
    Chain(Vec<Node>),
    Interleave(Vec<Node>),
    Condition {
        predicate: Box<Node>,
        true_filter: Option<Box<Node>>,
        false_filter: Option<Box<Node>>,
    },
    Sink,
    PassAll,
    BlockAll,
    RowKeyRegex(Arc<regex::bytes::Regex>),
    RowSample(f64),
    FamilyNameRegex(Arc<regex::Regex>),
    /// `pushdown` is the qualifier range the pattern is confined to, if known.
    ColumnQualifierRegex {
        regex: Arc<regex::bytes::Regex>,
        pushdown: Option<QualifierRange>,
    },
    ColumnRange {
        family: Arc<str>,
        range: QualifierRange,
    },
    TimestampRange {
        start_us: i64,
        end_us: Option<i64>,
    },
    ValueRegex(Arc<regex::bytes::Regex>),
    ValueRange(QualifierRange),
    CellsPerRowOffset(usize),
    CellsPerRowLimit(usize),
    CellsPerColumnLimit(usize),
    ValueBitmask(Vec<u8>),
    StripValue,
    ApplyLabel(String),
}

impl CompiledFilter {
    /// Validates `filter` and compiles its regexes (see the module docs for every
    /// rule). Errors are [`Error::Invalid`] naming the field and the limit.
    pub fn compile(filter: &RowFilter) -> Result<CompiledFilter> {
        let (root, _) = compile_node(filter, 1, false)?;
        Ok(CompiledFilter { root })
    }
}

/// Compiles one node at `depth`; returns the node and whether it contains a label.
fn compile_node(filter: &RowFilter, depth: usize, in_condition: bool) -> Result<(Node, bool)> {
    if depth > MAX_FILTER_DEPTH {
        return Err(Error::limit(
            "RowFilter nesting depth",
            depth,
            MAX_FILTER_DEPTH,
        ));
    }
    let leaf = |node: Node| Ok((node, false));
    match filter {
        RowFilter::Chain(children) => {
            let mut nodes = Vec::with_capacity(children.len());
            let mut labelled = 0;
            for child in children {
                let (node, has_label) = compile_node(child, depth + 1, in_condition)?;
                labelled += usize::from(has_label);
                nodes.push(node);
            }
            if labelled > 1 {
                return Err(Error::Invalid(format!(
                    "chain: {labelled} sub-filters contain an apply_label_transformer, but a chain \
                     may have at most 1 (a cell can carry only one label)"
                )));
            }
            Ok((Node::Chain(nodes), labelled > 0))
        }
        RowFilter::Interleave(children) => {
            let mut nodes = Vec::with_capacity(children.len());
            let mut any_label = false;
            for child in children {
                let (node, has_label) = compile_node(child, depth + 1, in_condition)?;
                any_label |= has_label;
                nodes.push(node);
            }
            Ok((Node::Interleave(nodes), any_label))
        }
        RowFilter::Condition { predicate, true_filter, false_filter } => {
            // Labels in the predicate never reach the output: they do not count.
            let (predicate, _) = compile_node(predicate, depth + 1, true)?;
            let branch = |f: &Option<Box<RowFilter>>| -> Result<(Option<Box<Node>>, bool)> {
                match f {
                    None => Ok((None, false)),
                    Some(f) => compile_node(f, depth + 1, true).map(|(n, l)| (Some(Box::new(n)), l)),
                }
            };
            let (true_filter, l2) = branch(true_filter)?;
            let (false_filter, l3) = branch(false_filter)?;
            Ok((Node::Condition { predicate: Box::new(predicate), true_filter, false_filter }, l2 || l3))
        }
        RowFilter::Sink if in_condition => Err(Error::Invalid(
            "sink: cannot be used within the predicate_filter, true_filter or false_filter of a condition"
                .to_owned(),
        )),
        RowFilter::Sink => leaf(Node::Sink),
        RowFilter::PassAll => leaf(Node::PassAll),
        RowFilter::BlockAll => leaf(Node::BlockAll),
        RowFilter::RowKeyRegex(p) => leaf(Node::RowKeyRegex(pattern::compile_bytes("row_key_regex_filter", p)?)),
        RowFilter::RowSample(p) => {
            if !(*p > 0.0 && *p < 1.0) {
                return Err(Error::Invalid(format!(
                    "row_sample_filter: probability is {p}, but must be greater than 0 and less than 1"
                )));
            }
            leaf(Node::RowSample(*p))
        }
        RowFilter::FamilyNameRegex(p) => {
            if p.contains(':') {
                return Err(Error::Invalid(format!(
                    "family_name_regex_filter: {p:?} contains ':', which the pattern may not contain"
                )));
            }
            leaf(Node::FamilyNameRegex(pattern::compile_text("family_name_regex_filter", p)?))
        }
        RowFilter::ColumnQualifierRegex(p) => {
            let regex = pattern::compile_bytes("column_qualifier_regex_filter", p)?;
            let pushdown = pattern::literal_prefix(p).map(|(prefix, exact)| prefix_range(prefix, exact));
            leaf(Node::ColumnQualifierRegex { regex, pushdown })
        }
        RowFilter::ColumnRange { family, start, end } => {
            if family.is_empty() {
                return Err(Error::Invalid("column_range_filter: family_name must not be empty".to_owned()));
            }
            check_range("column_range_filter", start, end)?;
            let range = QualifierRange { start: start.clone(), end: end.clone() };
            leaf(Node::ColumnRange { family: Arc::from(family.as_str()), range })
        }
        RowFilter::TimestampRange { start_us, end_us } => {
            let end_us = end_us.filter(|&e| e != 0);
            if *start_us < 0 || end_us.is_some_and(|e| e < 0) {
                return Err(Error::Invalid(format!(
                    "timestamp_range_filter: bounds must be non-negative, got start {start_us} end {end_us:?}"
                )));
            }
            if end_us.is_some_and(|e| e < *start_us) {
                return Err(Error::Invalid(format!(
                    "timestamp_range_filter: start_timestamp_micros {start_us} is after \
                     end_timestamp_micros {end_us:?}"
                )));
            }
            leaf(Node::TimestampRange { start_us: *start_us, end_us })
        }
        RowFilter::ValueRegex(p) => leaf(Node::ValueRegex(pattern::compile_bytes("value_regex_filter", p)?)),
        RowFilter::ValueRange { start, end } => {
            check_range("value_range_filter", start, end)?;
            leaf(Node::ValueRange(QualifierRange { start: start.clone(), end: end.clone() }))
        }
        RowFilter::CellsPerRowOffset(n) => leaf(Node::CellsPerRowOffset(*n as usize)),
        RowFilter::CellsPerRowLimit(n) => leaf(Node::CellsPerRowLimit(*n as usize)),
        RowFilter::CellsPerColumnLimit(n) => leaf(Node::CellsPerColumnLimit(*n as usize)),
        RowFilter::ValueBitmask(mask) => {
            if mask.is_empty() {
                return Err(Error::Invalid("value_bitmask_filter: mask must not be empty".into()));
            }
            leaf(Node::ValueBitmask(mask.clone()))
        }
        RowFilter::StripValue => leaf(Node::StripValue),
        RowFilter::ApplyLabel(label) => {
            check_label(label)?;
            Ok((Node::ApplyLabel(label.clone()), true))
        }
    }
}

/// Labels are 1 to [`MAX_LABEL_CHARS`] characters of `[a-z0-9-]`.
fn check_label(label: &str) -> Result<()> {
    let chars = label.chars().count();
    if chars == 0 {
        return Err(Error::Invalid(
            "apply_label_transformer: label must not be empty".to_owned(),
        ));
    }
    if chars > MAX_LABEL_CHARS {
        return Err(Error::limit(
            "apply_label_transformer label length",
            chars,
            MAX_LABEL_CHARS,
        ));
    }
    if !label
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(Error::Invalid(format!(
            "apply_label_transformer: label {label:?} must match [a-z0-9-]+"
        )));
    }
    Ok(())
}

/// A range is inverted if its start key sorts after its end key; equal keys are
/// allowed (the range is then one key or empty).
fn check_range(field: &str, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> Result<()> {
    if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
        (start, end)
        && s.cmp(e) == Ordering::Greater
    {
        return Err(Error::Invalid(format!(
            "{field}: start {s:?} sorts after end {e:?}"
        )));
    }
    Ok(())
}

/// The qualifiers equal to `prefix` (if `exact`) or starting with it.
fn prefix_range(prefix: Vec<u8>, exact: bool) -> QualifierRange {
    if exact {
        return QualifierRange {
            start: Bound::Included(prefix.clone()),
            end: Bound::Included(prefix),
        };
    }
    QualifierRange {
        end: successor(&prefix),
        start: Bound::Included(prefix),
    }
}

/// The smallest key greater than every key starting with `prefix`.
fn successor(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < u8::MAX {
            next.push(last + 1);
            return Bound::Excluded(next);
        }
    }
    Bound::Unbounded
}
