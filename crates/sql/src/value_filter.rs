//! Comparisons of a measure with a literal (`usage_user > 90`) that a time-series
//! scan applies itself, so the rows they reject are never built into Arrow arrays:
//! a sealed block's decoded column is compared point by point and only the runs of
//! points that may pass are appended, with their dimensions and times.
//!
//! The pushdown is inexact: DataFusion keeps its filter above the scan, which decides.
//! The scan drops a row only where the comparison cannot be true: the measure is
//! absent (the comparison is NULL), or the comparison is false both as IEEE-754
//! compares and in the total order Arrow's kernels use (which differ on NaN and on
//! zero's sign). Only a measure column compared directly with a literal of its own
//! type is taken; anything else (casts, functions, OR) stays the filter's alone.

use std::cmp::Ordering;
use std::ops::Range;

use almanac_timeseries::block::{BlockColumn, BlockColumns, ColumnValues};
use almanac_timeseries::model::{MeasureType, Point, Value};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::series::{Column, value_of};

/// A literal a measure is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Literal {
    Double(f64),
    Bigint(i64),
}

/// `column op literal`, where `column` is a DOUBLE or BIGINT measure of the table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValueFilter {
    column: Column,
    op: Operator,
    literal: Literal,
}

impl ValueFilter {
    /// The comparisons in `e` (a conjunction's every comparison of a measure column
    /// with a literal of its type), with `columns` the table's columns. Returns
    /// whether all of `e` was taken.
    pub(crate) fn collect(e: &Expr, columns: &[Column], out: &mut Vec<ValueFilter>) -> bool {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
            return false;
        };
        if *op == Operator::And {
            let l = Self::collect(left, columns, out);
            let r = Self::collect(right, columns, out);
            return l && r;
        }
        let (name, op, value) = match (&**left, &**right) {
            (Expr::Column(c), Expr::Literal(v, _)) => (&c.name, *op, v),
            (Expr::Literal(v, _), Expr::Column(c)) => match op.swap() {
                Some(op) => (&c.name, op, v),
                None => return false,
            },
            _ => return false,
        };
        if !is_comparison(op) {
            return false;
        }
        let Some(column) = columns.iter().find(|c| c.name() == *name) else {
            return false;
        };
        let literal = match (column, value) {
            (
                Column::Single(MeasureType::Double) | Column::Attribute(_, MeasureType::Double),
                ScalarValue::Float64(Some(v)),
            ) => Literal::Double(*v),
            (
                Column::Single(MeasureType::Bigint) | Column::Attribute(_, MeasureType::Bigint),
                ScalarValue::Int64(Some(v)),
            ) => Literal::Bigint(*v),
            _ => return false,
        };
        out.push(ValueFilter {
            column: column.clone(),
            op,
            literal,
        });
        true
    }

    /// Whether `e` is made only of such comparisons.
    pub(crate) fn supports(e: &Expr, columns: &[Column]) -> bool {
        Self::collect(e, columns, &mut Vec::new())
    }

    /// Whether a point may pass: false only where the comparison cannot be true.
    pub(crate) fn may_pass(&self, p: &Point) -> bool {
        match value_of(&self.column, p) {
            Some(Value::Double(v)) => self.may_pass_double(*v),
            Some(Value::Bigint(v)) => self.may_pass_bigint(*v),
            _ => false,
        }
    }

    fn may_pass_double(&self, v: f64) -> bool {
        let Literal::Double(l) = self.literal else {
            return true;
        };
        let ieee = v.partial_cmp(&l).is_some_and(|o| holds(self.op, o));
        ieee || holds(self.op, v.total_cmp(&l))
    }

    fn may_pass_bigint(&self, v: i64) -> bool {
        let Literal::Bigint(l) = self.literal else {
            return true;
        };
        holds(self.op, v.cmp(&l))
    }

    /// Clears `keep[i]` for the points `range.start + i` of `block` that cannot pass.
    fn narrow_block(&self, block: &BlockColumns, range: &Range<usize>, keep: &mut [bool]) {
        let Some(column) = self.column.in_block(block) else {
            // No point of the block has the measure: every comparison is NULL.
            keep.fill(false);
            return;
        };
        for (i, k) in keep.iter_mut().enumerate() {
            if *k {
                *k = self.value_passes(column, range.start + i);
            }
        }
    }

    /// Whether point `i` of the block has a value of `column` that may pass.
    fn value_passes(&self, column: &BlockColumn, i: usize) -> bool {
        let at = match &column.points {
            None => Some(i),
            Some(points) => u32::try_from(i)
                .ok()
                .and_then(|i| points.binary_search(&i).ok()),
        };
        match (&column.values, at) {
            (ColumnValues::Double(v), Some(k)) => {
                v.get(k).is_some_and(|v| self.may_pass_double(*v))
            }
            (ColumnValues::Bigint(v), Some(k)) => {
                v.get(k).is_some_and(|v| self.may_pass_bigint(*v))
            }
            _ => false,
        }
    }
}

/// Whether `op` holds for two values ordered `o`.
fn holds(op: Operator, o: Ordering) -> bool {
    match op {
        Operator::Eq => o == Ordering::Equal,
        Operator::NotEq => o != Ordering::Equal,
        Operator::Lt => o == Ordering::Less,
        Operator::LtEq => o != Ordering::Greater,
        Operator::Gt => o == Ordering::Greater,
        Operator::GtEq => o != Ordering::Less,
        _ => true,
    }
}

/// The runs of points of `range` in `block` that every filter may pass, in order.
pub(crate) fn passing_runs(
    filters: &[ValueFilter],
    block: &BlockColumns,
    range: &Range<usize>,
) -> Vec<Range<usize>> {
    if filters.is_empty() {
        return vec![range.clone()];
    }
    let mut keep = vec![true; range.len()];
    for f in filters {
        f.narrow_block(block, range, &mut keep);
    }
    let mut runs = Vec::new();
    let mut start = None;
    for (i, k) in keep.iter().enumerate() {
        match (k, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push(range.start + s..range.start + i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push(range.start + s..range.end);
    }
    runs
}

/// `=`, `<>`, `<`, `<=`, `>` or `>=`: a comparison with one value on each side.
pub(crate) fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gt(l: f64) -> ValueFilter {
        ValueFilter {
            column: Column::Attribute("u".into(), MeasureType::Double),
            op: Operator::Gt,
            literal: Literal::Double(l),
        }
    }

    #[test]
    fn a_row_is_dropped_only_where_both_orders_say_false() {
        let f = gt(90.0);
        assert!(f.may_pass_double(90.5));
        assert!(!f.may_pass_double(90.0));
        assert!(!f.may_pass_double(-1.0));
        // NaN is above everything in Arrow's total order: kept for the filter to judge.
        assert!(f.may_pass_double(f64::NAN));
        let lt = ValueFilter {
            op: Operator::Lt,
            ..gt(0.0)
        };
        // -0.0 < 0.0 in the total order, not in IEEE: kept.
        assert!(lt.may_pass_double(-0.0));
        assert!(!lt.may_pass_double(0.0));
    }

    #[test]
    fn runs_follow_the_kept_points() {
        let block = BlockColumns {
            times_ns: (0..6).collect(),
            versions: vec![1; 6],
            columns: vec![BlockColumn {
                name: "u".into(),
                points: Some(vec![0, 1, 2, 4, 5]),
                values: ColumnValues::Double(vec![95.0, 91.0, 10.0, 99.0, 92.0]),
            }],
        };
        // Point 3 has no value (NULL), point 2 is below.
        assert_eq!(passing_runs(&[gt(90.0)], &block, &(0..6)), vec![0..2, 4..6]);
        assert_eq!(passing_runs(&[gt(90.0)], &block, &(1..5)), vec![1..2, 4..5]);
        assert_eq!(passing_runs(&[], &block, &(1..5)), vec![1..5]);
        let other = ValueFilter {
            column: Column::Attribute("v".into(), MeasureType::Double),
            ..gt(0.0)
        };
        assert!(passing_runs(&[other], &block, &(0..6)).is_empty());
    }
}
