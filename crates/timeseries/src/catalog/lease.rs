//! Seal leases: over a store other front-ends write too, one front-end at a time runs a
//! seal pass over a table. A lease is a catalog row (`l/<store table>`) holding its
//! holder's token (`c:h`) and its expiry (`c:u`, ns since the epoch, 8 bytes
//! big-endian, so a value range compares it); it is taken by a CheckAndMutateRow that
//! applies only when no unexpired lease is there, and given back at the pass's end.
//!
//! The lease saves work, not data: every change a pass makes is conditioned on the
//! guards of the rows it read ([`crate::guard`]), so two passes over one bucket (a
//! holder that outlived its lease) leave it as one would.
//!
//! Record layout: docs/format.md#time-series-catalog

use std::ops::Bound;

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;

use super::{CATALOG_FAMILY, CATALOG_TABLE};
use crate::error::Result;
use crate::guard::fresh_token;
use crate::store::WideColumnStore;

/// How long a seal lease lasts: longer than a pass takes, short enough that a pass
/// whose front-end died leaves its tables to others soon.
pub(crate) const SEAL_LEASE_NS: i64 = 5 * 60 * 1_000_000_000;
/// Prefix of lease rows' keys in the catalog table.
pub(crate) const LEASE_PREFIX: &[u8] = b"l/";
const HOLDER_QUALIFIER: &[u8] = b"h";
const UNTIL_QUALIFIER: &[u8] = b"u";

/// A seal lease this front-end holds; given back when dropped.
pub struct SealLease<'a, S: WideColumnStore + ?Sized> {
    store: &'a S,
    key: Vec<u8>,
    token: Vec<u8>,
}

fn set(qualifier: &[u8], value: Vec<u8>) -> Mutation {
    Mutation::SetCell {
        family: CATALOG_FAMILY.into(),
        qualifier: qualifier.to_vec(),
        timestamp_us: 0,
        value,
    }
}

fn column(qualifier: &[u8]) -> RowFilter {
    RowFilter::ColumnRange {
        family: CATALOG_FAMILY.into(),
        start: Bound::Included(qualifier.to_vec()),
        end: Bound::Included(qualifier.to_vec()),
    }
}

impl<'a, S: WideColumnStore + ?Sized> SealLease<'a, S> {
    /// Takes the seal lease of `store_table` at `now_ns` unless another front-end holds
    /// an unexpired one (`None`).
    pub fn take(store: &'a S, store_table: &str, now_ns: i64) -> Result<Option<Self>> {
        let mut key = LEASE_PREFIX.to_vec();
        key.extend_from_slice(store_table.as_bytes());
        let token = fresh_token();
        let held = RowFilter::Chain(vec![
            column(UNTIL_QUALIFIER),
            RowFilter::ValueRange {
                start: Bound::Excluded(now_ns.max(0).to_be_bytes().to_vec()),
                end: Bound::Unbounded,
            },
        ]);
        let until = now_ns.saturating_add(SEAL_LEASE_NS).max(0);
        let take = [
            Mutation::DeleteFromRow,
            set(HOLDER_QUALIFIER, token.clone()),
            set(UNTIL_QUALIFIER, until.to_be_bytes().to_vec()),
        ];
        let matched = store.check_and_mutate(CATALOG_TABLE, &key, Some(&held), &[], &take)?;
        Ok((!matched).then_some(Self { store, key, token }))
    }
}

impl<S: WideColumnStore + ?Sized> Drop for SealLease<'_, S> {
    fn drop(&mut self) {
        let mine = RowFilter::Chain(vec![
            column(HOLDER_QUALIFIER),
            RowFilter::ValueRegex(self.token.clone()),
        ]);
        // Not given back (the store is unreachable): it expires.
        let _ = self.store.check_and_mutate(
            CATALOG_TABLE,
            &self.key,
            Some(&mine),
            &[Mutation::DeleteFromRow],
            &[],
        );
    }
}
