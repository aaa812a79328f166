//! Pushdown: deriving a safe [`ReadPlan`] from a [`CompiledFilter`], and
//! [`select`], the reference meaning of a plan.
//!
//! A plan `P` is *safe* for a filter `F` when `F(select(P, row)) == F(row)` for every
//! row, sunk cells included. The rules below keep that invariant; each relies on one
//! of three facts:
//!
//! - **Empty in, empty out.** No filter outputs a cell it was not given, so a filter
//!   that outputs nothing (`block_all`, an empty `interleave`) needs nothing read.
//! - **Commuting.** Family, qualifier and timestamp predicates commute with each
//!   other; family and qualifier predicates also commute with a per-column limit;
//!   value predicates, labels, `strip_value` and whole-row decisions (`row_key_regex`,
//!   `row_sample`) commute with column and timestamp predicates.
//! - **Covering.** If `P` is safe and `Q` selects every cell of `P`'s columns and
//!   either has no limit and a wider timestamp range, or the same timestamp range
//!   and a limit at least as large, then `select(P, select(Q, r)) == select(P, r)`,
//!   so `Q` is safe too.
//!
//! A chain is planned from its last filter back to its first: a family regex, a
//! column range or a literal qualifier regex narrows the columns of the plan for the
//! rest of the chain; a timestamp range narrows its range; `cells_per_column_limit`
//! becomes the plan's limit (keeping a later limit only if the rest has no timestamp
//! range); a value filter drops the rest's limit; transformers and whole-row filters
//! are transparent; `block_all` makes the plan empty. Any other filter (row offsets
//! and limits, `sink`, nested interleaves and conditions) ends the walk with its own
//! plan. An `interleave` and a `condition` are planned as the smallest plan covering
//! every child (predicate and both branches for a condition; a missing branch needs
//! nothing).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

use super::compile::{CompiledFilter, Node};
use crate::cell::Cell;
use crate::plan::{ColumnSelection, QualifierRange, ReadPlan};

impl CompiledFilter {
    /// The pushdown plan: a safe superset of the cells the filter needs (see the
    /// module docs). `families` are the table's family names in row order; the
    /// plan's `Families` selection only ever names these. Qualifier ranges within a
    /// family are sorted and disjoint.
    pub fn plan(&self, families: &[&str]) -> ReadPlan {
        let mut plan = normalize(plan_node(&self.root, families));
        // A leading row limit sees the row's cells before anything narrows them, so
        // the plan reads everything (see `step`), but only that many cells per row.
        if let Some(n) = leading_row_limit(&self.root) {
            plan.cells_per_row = Some(n);
        }
        plan
    }
}

/// `n` when the filter is `cells_per_row_limit_filter(n)` or a chain starting with it.
fn leading_row_limit(root: &Node) -> Option<u32> {
    let first = match root {
        Node::Chain(children) => {
            let mut flat = Vec::new();
            flatten_chain(children, &mut flat);
            *flat.first()?
        }
        other => other,
    };
    match first {
        Node::CellsPerRowLimit(n) => Some(u32::try_from(*n).unwrap_or(u32::MAX)),
        _ => None,
    }
}

/// Selects the cells of one row (given in row order) that `plan` reads: families and
/// qualifier ranges, then the timestamp range, then at most `cells_per_column` cells
/// of each column. This is what storage must return for the plan.
pub fn select(plan: &ReadPlan, cells: Vec<Cell>) -> Vec<Cell> {
    let mut out = Vec::with_capacity(cells.len());
    let mut column: Option<(std::sync::Arc<str>, std::sync::Arc<[u8]>)> = None;
    let mut seen = 0u32;
    for cell in cells {
        if plan.cells_per_row.is_some_and(|n| out.len() >= n as usize) {
            break;
        }
        let wanted = match plan.family_ranges(&cell.family) {
            None => false,
            Some(None) => true,
            Some(Some(ranges)) => ranges.iter().any(|r| r.contains(&cell.qualifier)),
        };
        if !wanted || !plan.ts_in_range(cell.timestamp_us) {
            continue;
        }
        let same = column
            .as_ref()
            .is_some_and(|(f, q)| *f == cell.family && *q == cell.qualifier);
        if !same {
            column = Some((cell.family.clone(), cell.qualifier.clone()));
            seen = 0;
        }
        seen = seen.saturating_add(1);
        if plan.cells_per_column.is_none_or(|n| seen <= n) {
            out.push(cell);
        }
    }
    out
}

/// A plan that reads nothing.
fn empty_plan() -> ReadPlan {
    ReadPlan {
        columns: ColumnSelection::Families(BTreeMap::new()),
        ..ReadPlan::default()
    }
}

/// Whether `plan` can select no cell at all.
fn is_empty(plan: &ReadPlan) -> bool {
    let no_columns = match &plan.columns {
        ColumnSelection::All => false,
        ColumnSelection::Families(m) => m.values().all(Vec::is_empty),
    };
    no_columns
        || plan.ts_end_us.is_some_and(|e| e <= plan.ts_start_us)
        || plan.cells_per_column == Some(0)
}

fn plan_node(node: &Node, families: &[&str]) -> ReadPlan {
    match node {
        Node::Chain(children) => {
            let mut flat = Vec::new();
            flatten_chain(children, &mut flat);
            flat.iter()
                .rev()
                .fold(ReadPlan::default(), |rest, f| step(f, rest, families))
        }
        Node::Interleave(children) => children
            .iter()
            .map(|c| plan_node(c, families))
            .fold(empty_plan(), cover),
        Node::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            let branch = |b: &Option<Box<Node>>| {
                b.as_ref()
                    .map_or_else(empty_plan, |n| plan_node(n, families))
            };
            let branches = cover(branch(true_filter), branch(false_filter));
            cover(plan_node(predicate, families), branches)
        }
        leaf => step(leaf, ReadPlan::default(), families),
    }
}

/// Inlines nested chains: a chain is associative.
fn flatten_chain<'a>(children: &'a [Node], out: &mut Vec<&'a Node>) {
    for child in children {
        match child {
            Node::Chain(inner) => flatten_chain(inner, out),
            other => out.push(other),
        }
    }
}

/// The plan for `Chain(f, rest…)` given the plan `rest` for `Chain(rest…)`.
fn step(f: &Node, rest: ReadPlan, families: &[&str]) -> ReadPlan {
    if is_empty(&rest) && !has_sink(f) {
        // `rest` outputs nothing whatever its input; only a sink in `f` can still
        // send cells to the read's output.
        return empty_plan();
    }
    match f {
        Node::PassAll
        | Node::StripValue
        | Node::ApplyLabel(_)
        | Node::RowKeyRegex(_)
        | Node::RowSample(_) => rest,
        Node::BlockAll => empty_plan(),
        Node::FamilyNameRegex(re) => restrict_columns(rest, families, |fam| {
            re.is_match(fam).then(QualifierRange::all)
        }),
        Node::ColumnRange { family, range } => restrict_columns(rest, families, |fam| {
            (fam == &**family).then(|| range.clone())
        }),
        Node::ColumnQualifierRegex {
            pushdown: Some(range),
            ..
        } => restrict_columns(rest, families, |_| Some(range.clone())),
        Node::ColumnQualifierRegex { pushdown: None, .. } => rest,
        Node::TimestampRange { start_us, end_us } => ReadPlan {
            ts_start_us: rest.ts_start_us.max(*start_us),
            ts_end_us: min_end(rest.ts_end_us, *end_us),
            ..rest
        },
        Node::ValueRegex(_) | Node::ValueRange(_) | Node::ValueBitmask(_) => ReadPlan {
            cells_per_column: None,
            ..rest
        },
        Node::CellsPerColumnLimit(n) => {
            let n = u32::try_from(*n).unwrap_or(u32::MAX);
            let unbounded_ts = rest.ts_start_us == i64::MIN && rest.ts_end_us.is_none();
            let limit = match rest.cells_per_column {
                Some(m) if unbounded_ts => m.min(n),
                _ => n,
            };
            ReadPlan {
                columns: rest.columns,
                cells_per_column: Some(limit),
                ..ReadPlan::default()
            }
        }
        // Row offsets and limits count cells of every column, and a sink outputs
        // its whole input: they need everything.
        Node::CellsPerRowOffset(_) | Node::CellsPerRowLimit(_) | Node::Sink => ReadPlan::default(),
        Node::Chain(_) | Node::Interleave(_) | Node::Condition { .. } => plan_node(f, families),
    }
}

/// Whether a sink appears anywhere in `node`.
fn has_sink(node: &Node) -> bool {
    match node {
        Node::Sink => true,
        Node::Chain(children) | Node::Interleave(children) => children.iter().any(has_sink),
        // Compilation rejects sinks inside a condition.
        _ => false,
    }
}

/// Narrows `plan` to the columns `allowed` admits: for each table family, `None`
/// excludes it and `Some(range)` keeps the qualifiers in `range`.
fn restrict_columns(
    plan: ReadPlan,
    families: &[&str],
    allowed: impl Fn(&str) -> Option<QualifierRange>,
) -> ReadPlan {
    let mut selected = BTreeMap::new();
    for fam in families {
        let Some(range) = allowed(fam) else { continue };
        let ranges = match plan.family_ranges(fam) {
            None => continue,
            Some(None) => vec![range],
            Some(Some(existing)) => existing
                .iter()
                .filter_map(|r| intersect(r, &range))
                .collect(),
        };
        selected.insert((*fam).to_owned(), ranges);
    }
    ReadPlan {
        columns: ColumnSelection::Families(selected),
        ..plan
    }
}

/// The smallest plan covering both `a` and `b` (see "Covering" in the module docs).
fn cover(a: ReadPlan, b: ReadPlan) -> ReadPlan {
    if is_empty(&a) {
        return b;
    }
    if is_empty(&b) {
        return a;
    }
    let columns = match (a.columns, b.columns) {
        (ColumnSelection::Families(mut x), ColumnSelection::Families(y)) => {
            for (fam, ranges) in y {
                x.entry(fam).or_default().extend(ranges);
            }
            ColumnSelection::Families(x)
        }
        _ => ColumnSelection::All,
    };
    let same_ts = a.ts_start_us == b.ts_start_us && a.ts_end_us == b.ts_end_us;
    match (a.cells_per_column, b.cells_per_column) {
        (Some(x), Some(y)) if same_ts => ReadPlan {
            columns,
            cells_per_column: Some(x.max(y)),
            ..a
        },
        _ => ReadPlan {
            columns,
            ts_start_us: a.ts_start_us.min(b.ts_start_us),
            ts_end_us: a.ts_end_us.zip(b.ts_end_us).map(|(x, y)| x.max(y)),
            cells_per_column: None,
            cells_per_row: None,
        },
    }
}

fn min_end(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

/// Canonical form: an empty plan as [`empty_plan`], each family's ranges sorted and
/// merged, families left with no range dropped.
fn normalize(plan: ReadPlan) -> ReadPlan {
    if is_empty(&plan) {
        return empty_plan();
    }
    let columns = match plan.columns {
        ColumnSelection::All => ColumnSelection::All,
        ColumnSelection::Families(m) => ColumnSelection::Families(
            m.into_iter()
                .map(|(fam, ranges)| (fam, merge_ranges(ranges)))
                .filter(|(_, ranges)| !ranges.is_empty())
                .collect(),
        ),
    };
    ReadPlan { columns, ..plan }
}

/// Orders two lower bounds: which admits more keys first.
fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => x
            .cmp(y)
            .then_with(|| matches!(a, Bound::Excluded(_)).cmp(&matches!(b, Bound::Excluded(_)))),
    }
}

/// Orders two upper bounds: the one admitting fewer keys first.
fn cmp_end(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => x
            .cmp(y)
            .then_with(|| matches!(a, Bound::Included(_)).cmp(&matches!(b, Bound::Included(_)))),
    }
}

/// Whether a range admits no key.
fn range_is_empty(r: &QualifierRange) -> bool {
    match (&r.start, &r.end) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            s >= e
        }
    }
}

fn intersect(a: &QualifierRange, b: &QualifierRange) -> Option<QualifierRange> {
    let start = if cmp_start(&a.start, &b.start).is_ge() {
        a.start.clone()
    } else {
        b.start.clone()
    };
    let end = if cmp_end(&a.end, &b.end).is_le() {
        a.end.clone()
    } else {
        b.end.clone()
    };
    let r = QualifierRange { start, end };
    (!range_is_empty(&r)).then_some(r)
}

/// Whether a range ending at `end` and one starting at `start` (not before it)
/// overlap or touch, so their union is one range.
fn joins(end: &Bound<Vec<u8>>, start: &Bound<Vec<u8>>) -> bool {
    match (end, start) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Excluded(e), Bound::Excluded(s)) => s < e,
        (Bound::Included(e) | Bound::Excluded(e), Bound::Included(s) | Bound::Excluded(s)) => {
            s <= e
        }
    }
}

/// Sorts ranges and merges the ones that overlap or touch; drops empty ones.
fn merge_ranges(mut ranges: Vec<QualifierRange>) -> Vec<QualifierRange> {
    ranges.retain(|r| !range_is_empty(r));
    ranges.sort_by(|a, b| cmp_start(&a.start, &b.start));
    let mut out: Vec<QualifierRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if joins(&last.end, &r.start) => {
                if cmp_end(&r.end, &last.end).is_gt() {
                    last.end = r.end;
                }
            }
            _ => out.push(r),
        }
    }
    out
}
