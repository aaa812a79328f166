//! Evaluation of a [`CompiledFilter`] on one row.
//!
//! Every filter only drops, duplicates or modifies its input cells; none invents a
//! cell. So [`CompiledFilter::apply`] tags each input cell once with its position in
//! row order, and every merge (an `Interleave` pooling its children, the final
//! merge of sunk cells) is a stable sort on that tag: cells come out in row order,
//! and copies of one cell keep the order in which they were produced.
//!
//! Per node:
//! - `Chain` feeds each child the previous child's output (empty chain: pass all).
//! - `Interleave` gives each child a copy of the input and pools the outputs,
//!   duplicates kept, copies of a cell in child order (empty interleave: nothing).
//! - `Condition` runs the predicate on its input and discards the predicate's
//!   output; at least one cell selects `true_filter`, else `false_filter`; a missing
//!   branch outputs nothing.
//! - `Sink` copies its input to the read's final output and outputs nothing to its
//!   parent (data.proto's example shows the sink branch contributing nothing to the
//!   enclosing interleave). The final output is the normal output and all sunk
//!   cells merged in row order, sunk copies first among copies of the same cell.
//! - `RowSample` draws one number from the [`Rng`] each time it is evaluated, even
//!   on an empty input, so the number of draws depends only on the tree and on the
//!   branch each condition takes.
//! - `CellsPerRowOffset`/`Limit` count every cell (and every copy) in row order;
//!   `CellsPerColumnLimit` keeps the first N cells of each run of one column.
//! - `ApplyLabel` appends its label to each cell's labels.

use super::compile::{CompiledFilter, Node};
use crate::cell::Cell;
use crate::clock::Rng;

/// A cell with its position in the row as first given to the filter.
#[derive(Debug, Clone)]
struct Tagged {
    pos: usize,
    cell: Cell,
}

/// Context shared by one row's evaluation.
struct RowContext<'a> {
    row_key: &'a [u8],
    rng: &'a Rng,
}

impl CompiledFilter {
    /// Applies the filter to one row's cells, given in row order (family creation
    /// order, qualifier ascending, timestamp descending). Returns the output cells in
    /// row order; an empty output means the row is not returned.
    pub fn apply(&self, row_key: &[u8], cells: Vec<Cell>, rng: &Rng) -> Vec<Cell> {
        let input: Vec<Tagged> = cells
            .into_iter()
            .enumerate()
            .map(|(pos, cell)| Tagged { pos, cell })
            .collect();
        let ctx = RowContext { row_key, rng };
        let mut sunk = Vec::new();
        let output = eval(&self.root, input, &ctx, &mut sunk);
        if sunk.is_empty() {
            return output.into_iter().map(|t| t.cell).collect();
        }
        sunk.extend(output);
        sunk.sort_by_key(|t| t.pos);
        sunk.into_iter().map(|t| t.cell).collect()
    }
}

/// Evaluates `node` on `input`; cells reaching a `Sink` are appended to `sunk`.
fn eval(
    node: &Node,
    mut input: Vec<Tagged>,
    ctx: &RowContext<'_>,
    sunk: &mut Vec<Tagged>,
) -> Vec<Tagged> {
    match node {
        Node::Chain(children) => children
            .iter()
            .fold(input, |cells, child| eval(child, cells, ctx, sunk)),
        Node::Interleave(children) if children.iter().all(is_per_cell) => {
            // Nothing to copy up front: each cell comes out once per child that keeps
            // it (a sealed time-series row's block, kept by one branch of two, is not
            // cloned at all).
            let mut out = Vec::with_capacity(input.len());
            for t in input {
                let copies: usize = children.iter().map(|c| copies_of(c, &t.cell, ctx)).sum();
                out.extend(std::iter::repeat_n(t, copies));
            }
            out
        }
        Node::Interleave(children) => {
            let mut pooled = Vec::new();
            for (i, child) in children.iter().enumerate() {
                let copy = if i + 1 == children.len() {
                    std::mem::take(&mut input)
                } else {
                    input.clone()
                };
                pooled.extend(eval(child, copy, ctx, sunk));
            }
            pooled.sort_by_key(|t| t.pos);
            pooled
        }
        Node::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            // Sinks cannot appear inside a condition; discard anything regardless.
            let matched = !eval(predicate, input.clone(), ctx, &mut Vec::new()).is_empty();
            match if matched { true_filter } else { false_filter } {
                Some(branch) => eval(branch, input, ctx, sunk),
                None => Vec::new(),
            }
        }
        Node::Sink => {
            sunk.extend(input);
            Vec::new()
        }
        Node::PassAll => input,
        Node::BlockAll => Vec::new(),
        Node::RowKeyRegex(re) => keep_if(input, re.is_match(ctx.row_key)),
        Node::RowSample(p) => {
            let draw = ctx.rng.next_f64();
            keep_if(input, draw < *p)
        }
        Node::FamilyNameRegex(_)
        | Node::ColumnQualifierRegex { .. }
        | Node::ColumnRange { .. }
        | Node::TimestampRange { .. }
        | Node::ValueRegex(_)
        | Node::ValueRange(_)
        | Node::ValueBitmask(_) => retain(input, |c| passes(node, c)),
        Node::CellsPerRowOffset(n) => input.into_iter().skip(*n).collect(),
        Node::CellsPerRowLimit(n) => {
            input.truncate(*n);
            input
        }
        Node::CellsPerColumnLimit(n) => per_column_limit(input, *n),
        Node::StripValue => {
            input.iter_mut().for_each(|t| t.cell.value.clear());
            input
        }
        Node::ApplyLabel(label) => {
            input
                .iter_mut()
                .for_each(|t| t.cell.labels.push(label.clone()));
            input
        }
    }
}

/// Whether `node` decides each cell on its own, without changing it, counting, drawing
/// or sinking: a test on the row key or the cell, or a chain or interleave of those.
fn is_per_cell(node: &Node) -> bool {
    match node {
        Node::Chain(children) | Node::Interleave(children) => children.iter().all(is_per_cell),
        Node::PassAll
        | Node::BlockAll
        | Node::RowKeyRegex(_)
        | Node::FamilyNameRegex(_)
        | Node::ColumnQualifierRegex { .. }
        | Node::ColumnRange { .. }
        | Node::TimestampRange { .. }
        | Node::ValueRegex(_)
        | Node::ValueRange(_)
        | Node::ValueBitmask(_) => true,
        Node::Condition { .. }
        | Node::Sink
        | Node::RowSample(_)
        | Node::CellsPerRowOffset(_)
        | Node::CellsPerRowLimit(_)
        | Node::CellsPerColumnLimit(_)
        | Node::StripValue
        | Node::ApplyLabel(_) => false,
    }
}

/// How many copies of `cell` a per-cell node ([`is_per_cell`]) outputs: a chain keeps
/// the product of its children's, an interleave the sum.
fn copies_of(node: &Node, cell: &Cell, ctx: &RowContext<'_>) -> usize {
    match node {
        Node::Chain(children) => children.iter().map(|c| copies_of(c, cell, ctx)).product(),
        Node::Interleave(children) => children.iter().map(|c| copies_of(c, cell, ctx)).sum(),
        Node::PassAll => 1,
        Node::RowKeyRegex(re) => usize::from(re.is_match(ctx.row_key)),
        _ => usize::from(passes(node, cell)),
    }
}

/// Whether `cell` passes a test of one cell (family, qualifier, column range, time or
/// value); `false` for any other node.
fn passes(node: &Node, cell: &Cell) -> bool {
    match node {
        Node::FamilyNameRegex(re) => re.is_match(&cell.family),
        Node::ColumnQualifierRegex { regex, .. } => regex.is_match(&cell.qualifier),
        Node::ColumnRange { family, range } => {
            cell.family == *family && range.contains(&cell.qualifier)
        }
        Node::TimestampRange { start_us, end_us } => {
            cell.timestamp_us >= *start_us && end_us.is_none_or(|e| cell.timestamp_us < e)
        }
        Node::ValueRegex(re) => re.is_match(&cell.value),
        Node::ValueRange(range) => range.contains(&cell.value),
        Node::ValueBitmask(mask) => {
            cell.value.len() == mask.len() && cell.value.iter().zip(mask).all(|(v, m)| v & m == *m)
        }
        _ => false,
    }
}

fn keep_if(input: Vec<Tagged>, keep: bool) -> Vec<Tagged> {
    if keep { input } else { Vec::new() }
}

fn retain(mut input: Vec<Tagged>, mut keep: impl FnMut(&Cell) -> bool) -> Vec<Tagged> {
    input.retain(|t| keep(&t.cell));
    input
}

/// Keeps the first `n` cells of each run of cells in one column (family and
/// qualifier); every copy of a duplicated cell counts.
fn per_column_limit(input: Vec<Tagged>, n: usize) -> Vec<Tagged> {
    let mut out = Vec::with_capacity(input.len());
    let mut seen = 0usize;
    let mut column: Option<(std::sync::Arc<str>, std::sync::Arc<[u8]>)> = None;
    for t in input {
        let same = column
            .as_ref()
            .is_some_and(|(f, q)| *f == t.cell.family && *q == t.cell.qualifier);
        if !same {
            column = Some((t.cell.family.clone(), t.cell.qualifier.clone()));
            seen = 0;
        }
        seen += 1;
        if seen <= n {
            out.push(t);
        }
    }
    out
}
