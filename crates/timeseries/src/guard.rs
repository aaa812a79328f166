//! Row guards: what keeps a row's read, check and write atomic against other processes
//! writing the same store (front-ends over one remote Bigtable), where this process's
//! series locks ([`crate::series`]) reach no one else.
//!
//! In a table with guards ([`crate::TableMeta::guarded`]) every change of a row sets
//! the row's guard cell (family `g`, empty qualifier) to a fresh token, in one
//! CheckAndMutateRow conditioned on the token the writer read: if another process
//! changed the row in between, the condition fails, nothing is applied, and the writer
//! reads the row again and decides again. A row never written this way has no guard;
//! a write that read none is conditioned on there still being none.
//!
//! The rows a seal (or a writer that merges a bucket) deletes are deleted without a
//! condition: why that is safe is at `seal::delete_merged_rows`.
//!
//! The guard's timestamp is the newest cell time the row has had, so GC by age
//! collects it with the row's last point, never before.
//!
//! Byte layout: docs/format.md#row-guards

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::{Cell, Row};

use crate::store::{Conditional, StoreResult, WideColumnStore};

/// The family of a row's guard cell.
pub const GUARD_FAMILY: &str = "g";

/// The qualifier, in the guard family, of a seal's mark on a bucket's block row in
/// the one-point-a-row patterns: set (with a fresh guard) before the sealer reads the
/// bucket, gone with the block's write ([`crate::seal`]).
const SEALING_QUALIFIER: &[u8] = b"s";

/// A row's guard as read: its timestamp and token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    ts_us: i64,
    token: Vec<u8>,
}

/// The guard cell of a row, if it has one.
pub fn guard_of(row: &Row) -> Option<Guard> {
    row.cells
        .iter()
        .find(|c| is_guard(c) && c.qualifier.is_empty())
        .map(|c| Guard {
            ts_us: c.timestamp_us,
            token: c.value.to_vec(),
        })
}

impl Guard {
    /// The guard's token.
    pub fn token(&self) -> &[u8] {
        &self.token
    }
}

/// Whether a row carries a seal's mark (a seal of its bucket is under way).
pub fn is_sealing(row: &Row) -> bool {
    row.cells
        .iter()
        .any(|c| is_guard(c) && *c.qualifier == *SEALING_QUALIFIER)
}

/// Whether a cell is a row's guard (or a seal's mark beside it).
pub fn is_guard(cell: &Cell) -> bool {
    &*cell.family == GUARD_FAMILY
}

/// `filter` widened so the rows it reads keep their guard cells (`None` reads whole
/// rows, guards included).
pub fn let_guard_through(filter: Option<RowFilter>) -> Option<RowFilter> {
    filter.map(|f| RowFilter::Interleave(vec![f, RowFilter::FamilyNameRegex(GUARD_FAMILY.into())]))
}

/// A token no other write has used: this process's random prefix and a counter.
pub(crate) fn fresh_token() -> Vec<u8> {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| RandomState::new().hash_one(std::process::id()));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Hex digits only, so the token is its own regex in the condition.
    format!("{process:016x}{n:016x}").into_bytes()
}

/// The predicate that outputs a cell when the row's guard is `read` (`Some`), or when
/// the row has any guard (`None`).
fn predicate(read: Option<&Guard>) -> RowFilter {
    let family = RowFilter::FamilyNameRegex(GUARD_FAMILY.into());
    match read {
        Some(g) => RowFilter::Chain(vec![family, RowFilter::ValueRegex(g.token.clone())]),
        None => family,
    }
}

/// The newest cell time `mutations` set (0 when they set none).
fn newest_set_us(mutations: &[Mutation]) -> i64 {
    mutations
        .iter()
        .filter_map(|m| match m {
            Mutation::SetCell { timestamp_us, .. } => Some(*timestamp_us),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The mutations that replace a row's guard (read: `read`) with a fresh one at the
/// newer of the old guard's timestamp and `newest_us`; and that timestamp.
fn fresh_guard(read: Option<&Guard>, newest_us: i64) -> (Vec<Mutation>, i64) {
    let ts_us = read.map_or(newest_us, |g| g.ts_us.max(newest_us));
    let mutations = vec![
        Mutation::DeleteFromFamily {
            family: GUARD_FAMILY.into(),
        },
        Mutation::SetCell {
            family: GUARD_FAMILY.into(),
            qualifier: Vec::new(),
            timestamp_us: ts_us,
            value: fresh_token(),
        },
    ];
    (mutations, ts_us)
}

/// The conditional write of `mutations` to row `key`, applied only if the row's guard
/// is still `read`; it sets a fresh guard at the newer of the old guard's timestamp and
/// the newest cell time the mutations write.
pub fn guarded_write(
    key: Vec<u8>,
    read: Option<&Guard>,
    mut mutations: Vec<Mutation>,
) -> Conditional {
    let (guard, _) = fresh_guard(read, newest_set_us(&mutations));
    mutations.extend(guard);
    conditional(key, read, mutations)
}

/// A seal's mark on block row `key` (see [`is_sealing`]), applied only if its guard is
/// still `read`: the row gets a fresh guard at `ts_us` or later, and the mark beside it.
pub fn mark_sealing(key: Vec<u8>, read: Option<&Guard>, ts_us: i64) -> Conditional {
    let (mut mutations, ts_us) = fresh_guard(read, ts_us);
    mutations.push(Mutation::SetCell {
        family: GUARD_FAMILY.into(),
        qualifier: SEALING_QUALIFIER.to_vec(),
        timestamp_us: ts_us,
        value: Vec::new(),
    });
    conditional(key, read, mutations)
}

/// Applies one conditional write built here; whether it was applied.
pub fn apply<S: WideColumnStore + ?Sized>(
    store: &S,
    table: &str,
    c: &Conditional,
) -> StoreResult<bool> {
    let matched =
        store.check_and_mutate(table, &c.key, c.predicate.as_ref(), &c.on_match, &c.on_miss)?;
    Ok(applied(c, matched))
}

/// The guard a conditional write built here sets when it applies.
pub fn written_guard(c: &Conditional) -> Option<Guard> {
    c.on_match.iter().chain(&c.on_miss).find_map(|m| match m {
        Mutation::SetCell {
            family,
            qualifier,
            timestamp_us,
            value,
        } if family == GUARD_FAMILY && qualifier.is_empty() => Some(Guard {
            ts_us: *timestamp_us,
            token: value.clone(),
        }),
        _ => None,
    })
}

fn conditional(key: Vec<u8>, read: Option<&Guard>, mutations: Vec<Mutation>) -> Conditional {
    let (on_match, on_miss) = match read {
        Some(_) => (mutations, Vec::new()),
        None => (Vec::new(), mutations),
    };
    Conditional {
        key,
        predicate: Some(predicate(read)),
        on_match,
        on_miss,
    }
}

/// Whether a conditional write or delete built here was applied, from whether its
/// predicate matched.
pub fn applied(c: &Conditional, matched: bool) -> bool {
    if c.on_match.is_empty() {
        !matched
    } else {
        matched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_and_are_their_own_regex() {
        let a = fresh_token();
        let b = fresh_token();
        assert_ne!(a, b);
        assert!(a.iter().all(u8::is_ascii_hexdigit));
    }

    #[test]
    fn a_write_expecting_no_guard_applies_on_a_miss() {
        let point = Mutation::SetCell {
            family: "m".into(),
            qualifier: b"q".to_vec(),
            timestamp_us: 5_000,
            value: Vec::new(),
        };
        let c = guarded_write(b"k".to_vec(), None, vec![point.clone()]);
        assert!(c.on_match.is_empty());
        assert!(applied(&c, false));
        assert!(!applied(&c, true));
        let read = Guard {
            ts_us: 9_000,
            token: b"00ff".to_vec(),
        };
        let c = guarded_write(b"k".to_vec(), Some(&read), vec![point]);
        assert!(c.on_miss.is_empty());
        assert!(applied(&c, true));
        // The new guard keeps the newer timestamp.
        assert!(c.on_match.iter().any(
            |m| matches!(m, Mutation::SetCell { timestamp_us, .. } if *timestamp_us == 9_000)
        ));
    }
}
