//! Predicates on a key column become row ranges: `=`, `IN`, `<`/`<=`/`>`/`>=`,
//! `BETWEEN`, `LIKE 'prefix%'`, `starts_with`, and `OR`s of those. Several predicates
//! intersect. Anything else is left to DataFusion, which filters every row anyway
//! (pushdown is inexact: it only narrows what is read).

use std::cmp::Ordering;
use std::ops::Bound;

use almanac_engine::rowset::RowRange;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Like, Operator};

/// A set of key ranges; `None` in [`KeySpace`] means "every key".
pub type Ranges = Vec<RowRange>;

/// What the filters allow of the key column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeySpace {
    /// `None`: no constraint; `Some(empty)`: nothing can match.
    pub ranges: Option<Ranges>,
}

impl KeySpace {
    /// Narrows by every filter that constrains `column`.
    pub fn from_filters(column: &str, filters: &[Expr]) -> Self {
        let mut space = Self::default();
        for f in filters {
            if let Some(r) = ranges_of(column, f) {
                space.ranges = Some(match space.ranges.take() {
                    None => r,
                    Some(have) => intersect(&have, &r),
                });
            }
        }
        space
    }

    /// Whether the filters rule out every key.
    pub fn is_empty(&self) -> bool {
        self.ranges.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Whether `expr` constrains `column` in a way [`KeySpace`] understands.
pub fn is_key_predicate(column: &str, expr: &Expr) -> bool {
    ranges_of(column, expr).is_some()
}

/// The bytes of a string or binary literal.
pub fn literal_bytes(e: &Expr) -> Option<Vec<u8>> {
    let Expr::Literal(v, _) = strip_casts(e) else {
        return None;
    };
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.as_bytes().to_vec()),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b))
        | ScalarValue::FixedSizeBinary(_, Some(b)) => Some(b.clone()),
        _ => None,
    }
}

/// Casts between string and binary do not change the bytes compared.
fn strip_casts(e: &Expr) -> &Expr {
    match e {
        Expr::Cast(c) => strip_casts(&c.expr),
        Expr::TryCast(c) => strip_casts(&c.expr),
        other => other,
    }
}

fn is_column(column: &str, e: &Expr) -> bool {
    matches!(strip_casts(e), Expr::Column(c) if c.name == column)
}

fn point(k: Vec<u8>) -> RowRange {
    RowRange {
        start: Bound::Included(k.clone()),
        end: Bound::Included(k),
    }
}

fn ranges_of(column: &str, e: &Expr) -> Option<Ranges> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::Or => {
                let mut l = ranges_of(column, left)?;
                l.extend(ranges_of(column, right)?);
                Some(l)
            }
            Operator::And => match (ranges_of(column, left), ranges_of(column, right)) {
                (Some(l), Some(r)) => Some(intersect(&l, &r)),
                (Some(x), None) | (None, Some(x)) => Some(x),
                (None, None) => None,
            },
            _ => {
                let (op, lit) = if is_column(column, left) {
                    (*op, literal_bytes(right)?)
                } else if is_column(column, right) {
                    (op.swap()?, literal_bytes(left)?)
                } else {
                    return None;
                };
                comparison(op, lit)
            }
        },
        Expr::InList(list) if !list.negated && is_column(column, &list.expr) => list
            .list
            .iter()
            .map(|v| literal_bytes(v).map(point))
            .collect(),
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_column(column, expr) => Some(vec![RowRange {
            start: Bound::Included(literal_bytes(low)?),
            end: Bound::Included(literal_bytes(high)?),
        }]),
        Expr::Like(Like {
            negated: false,
            expr,
            pattern,
            escape_char: None,
            case_insensitive: false,
        }) if is_column(column, expr) => {
            let p = literal_bytes(pattern)?;
            let prefix = p.strip_suffix(b"%")?;
            if prefix.iter().any(|b| matches!(b, b'%' | b'_' | b'\\')) {
                return None;
            }
            Some(vec![RowRange::prefix(prefix)])
        }
        Expr::ScalarFunction(f)
            if f.name() == "starts_with" && f.args.len() == 2 && is_column(column, &f.args[0]) =>
        {
            Some(vec![RowRange::prefix(&literal_bytes(&f.args[1])?)])
        }
        _ => None,
    }
}

fn comparison(op: Operator, lit: Vec<u8>) -> Option<Ranges> {
    let range = match op {
        Operator::Eq => point(lit),
        Operator::Lt => RowRange {
            start: Bound::Unbounded,
            end: Bound::Excluded(lit),
        },
        Operator::LtEq => RowRange {
            start: Bound::Unbounded,
            end: Bound::Included(lit),
        },
        Operator::Gt => RowRange {
            start: Bound::Excluded(lit),
            end: Bound::Unbounded,
        },
        Operator::GtEq => RowRange {
            start: Bound::Included(lit),
            end: Bound::Unbounded,
        },
        _ => return None,
    };
    Some(vec![range])
}

/// Compares two lower bounds (`Unbounded` is lowest).
fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Ordering::Less),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Ordering::Greater),
    }
}

/// Compares two upper bounds (`Unbounded` is highest).
fn cmp_end(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Greater,
        (_, Bound::Unbounded) => Ordering::Less,
        (Bound::Included(x), Bound::Included(y)) | (Bound::Excluded(x), Bound::Excluded(y)) => {
            x.cmp(y)
        }
        (Bound::Included(x), Bound::Excluded(y)) => x.cmp(y).then(Ordering::Greater),
        (Bound::Excluded(x), Bound::Included(y)) => x.cmp(y).then(Ordering::Less),
    }
}

/// Whether a range holds no key.
fn is_void(r: &RowRange) -> bool {
    match (&r.start, &r.end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        _ => false,
    }
}

/// The keys in both sets.
pub fn intersect(a: &[RowRange], b: &[RowRange]) -> Ranges {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let start = if cmp_start(&x.start, &y.start) == Ordering::Less {
                y.start.clone()
            } else {
                x.start.clone()
            };
            let end = if cmp_end(&x.end, &y.end) == Ordering::Greater {
                y.end.clone()
            } else {
                x.end.clone()
            };
            let r = RowRange { start, end };
            if !is_void(&r) {
                out.push(r);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use almanac_engine::rowset::prefix_successor;

    /// The key range of a prefix.
    fn prefix_range(prefix: &[u8]) -> RowRange {
        RowRange {
            start: Bound::Included(prefix.to_vec()),
            end: prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded),
        }
    }

    use datafusion::logical_expr::{col, lit};

    use super::*;

    fn space(filters: &[Expr]) -> Option<Ranges> {
        KeySpace::from_filters("_key", filters).ranges
    }

    #[test]
    fn equality_is_one_point() {
        assert_eq!(
            space(&[col("_key").eq(lit("a"))]),
            Some(vec![point(b"a".to_vec())])
        );
        assert_eq!(
            space(&[lit("a").eq(col("_key"))]),
            Some(vec![point(b"a".to_vec())])
        );
    }

    #[test]
    fn ranges_intersect_and_contradictions_are_empty() {
        let r = space(&[col("_key").gt_eq(lit("b")), col("_key").lt(lit("d"))]).unwrap_or_default();
        assert_eq!(
            r,
            vec![RowRange {
                start: Bound::Included(b"b".to_vec()),
                end: Bound::Excluded(b"d".to_vec())
            }]
        );
        let none = KeySpace::from_filters(
            "_key",
            &[col("_key").eq(lit("a")), col("_key").eq(lit("b"))],
        );
        assert!(none.is_empty());
        let edge = KeySpace::from_filters(
            "_key",
            &[col("_key").gt(lit("a")), col("_key").lt_eq(lit("a"))],
        );
        assert!(edge.is_empty());
    }

    #[test]
    fn in_lists_or_and_prefixes() {
        let r = space(&[col("_key").in_list(vec![lit("x"), lit("y")], false)]).unwrap_or_default();
        assert_eq!(r.len(), 2);
        let r =
            space(&[col("_key").eq(lit("x")).or(col("_key").like(lit("ab%")))]).unwrap_or_default();
        assert_eq!(r, vec![point(b"x".to_vec()), prefix_range(b"ab")]);
        assert_eq!(space(&[col("_key").like(lit("a_b%"))]), None);
        assert_eq!(space(&[col("other").eq(lit("a"))]), None);
        assert_eq!(space(&[col("_key").not_eq(lit("a"))]), None);
    }
}
