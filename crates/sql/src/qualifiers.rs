//! Qualifier projection: when a query touches a family column only as `cf['q']` with
//! literal qualifiers, only those columns are read (a column-range filter per
//! qualifier, each a seek) instead of the whole family.
//!
//! DataFusion tells a provider which columns a query needs, not which map keys, so
//! before a query runs [`QualifierHints::fill`] walks its logical plan: a family column
//! seen only inside `get_field(column, literal)` gets that set of qualifiers; seen
//! anywhere else (`SELECT cf`, `cf IS NULL`, a join key) it needs the whole family.
//! Hints go by column name across the whole query, so the same family read twice (a
//! self-join) gets the union: never less than a scan needs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Expr, LogicalPlan};

use crate::keyrange::literal_bytes;

/// What a query reads of each family column, by column name.
#[derive(Debug, Default)]
pub struct QualifierHints {
    /// `None` until filled: read whole families.
    needs: Mutex<Option<BTreeMap<String, Need>>>,
}

/// What a query needs of one family column.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Need {
    /// Only these qualifiers.
    Qualifiers(BTreeSet<Vec<u8>>),
    /// Every qualifier.
    Whole,
}

/// Records what `expr` reads of columns into `needs`.
fn visit(expr: &Expr, needs: &mut BTreeMap<String, Need>) -> DfResult<()> {
    expr.apply(|e| {
        if let Expr::ScalarFunction(f) = e
            && f.name() == "get_field"
            && let [Expr::Column(c), key] = f.args.as_slice()
            && let Some(q) = literal_bytes(key)
        {
            let need = needs
                .entry(c.name.clone())
                .or_insert_with(|| Need::Qualifiers(BTreeSet::new()));
            if let Need::Qualifiers(set) = need {
                set.insert(q);
            }
            return Ok(TreeNodeRecursion::Jump);
        }
        if let Expr::Column(c) = e {
            needs.insert(c.name.clone(), Need::Whole);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(())
}

impl QualifierHints {
    /// Learns what `plan` (and its subqueries) reads.
    pub fn fill(&self, plan: &LogicalPlan) -> DfResult<()> {
        let mut needs = BTreeMap::new();
        plan.apply_with_subqueries(|node| {
            node.apply_expressions(|e| {
                visit(e, &mut needs)?;
                Ok(TreeNodeRecursion::Continue)
            })?;
            Ok(TreeNodeRecursion::Continue)
        })?;
        if let Ok(mut slot) = self.needs.lock() {
            *slot = Some(needs);
        }
        Ok(())
    }

    /// The qualifiers to read of `family`, or `None` for all of them.
    pub fn qualifiers(&self, family: &str) -> Option<BTreeSet<Vec<u8>>> {
        let slot = self.needs.lock().ok()?;
        match slot.as_ref()?.get(family)? {
            Need::Qualifiers(set) => Some(set.clone()),
            Need::Whole => None,
        }
    }
}
