//! The catalog's rows and the conditional writes that change them, so several
//! front-ends over one store agree: each row holds its description (`c:m`, JSON) and a
//! generation (`c:g`, 8 bytes big-endian, 1 for a new row, one more at each change). A
//! change is a CheckAndMutateRow that applies only if the row is still at the
//! generation its writer read (or still absent); a writer that loses reads the row
//! again and decides anew.
//!
//! Record layout: docs/format.md#time-series-catalog

use std::ops::{Bound, ControlFlow};

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::RowSet;
use almanac_engine::{ReadRequest, Row};

use super::{CATALOG_FAMILY, CATALOG_TABLE, META_QUALIFIER};
use crate::error::Result;
use crate::store::WideColumnStore;

/// The qualifier of a row's generation.
const GENERATION_QUALIFIER: &[u8] = b"g";

/// A catalog row as stored: its description and generation (0: a row written before
/// generations, which has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredRow {
    /// The description, JSON.
    pub(crate) json: Vec<u8>,
    /// The row's generation.
    pub(crate) generation: u64,
}

/// What a conditional write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// No row: a create.
    Absent,
    /// The row at this generation: a change of what its writer read.
    Generation(u64),
}

/// The description and generation of a read row, if it has a description.
fn decode(row: &Row) -> Option<StoredRow> {
    let json = row
        .cells
        .iter()
        .find(|c| &*c.qualifier == META_QUALIFIER)?
        .value
        .clone();
    let generation = row
        .cells
        .iter()
        .find(|c| &*c.qualifier == GENERATION_QUALIFIER)
        .and_then(|c| <[u8; 8]>::try_from(c.value.as_slice()).ok())
        .map_or(0, u64::from_be_bytes);
    Some(StoredRow { json, generation })
}

/// The row at `key`, if it exists.
pub(crate) fn read_row<S: WideColumnStore + ?Sized>(
    store: &S,
    key: &[u8],
) -> Result<Option<StoredRow>> {
    let mut found = None;
    let req = ReadRequest {
        rows: RowSet::key(key.to_vec()),
        ..ReadRequest::default()
    };
    store.read_rows(CATALOG_TABLE, req, &mut |row| {
        found = decode(&row);
        ControlFlow::Break(())
    })?;
    Ok(found)
}

/// Every row, in key order.
pub(crate) fn read_all<S: WideColumnStore + ?Sized>(
    store: &S,
    visit: &mut dyn FnMut(&[u8], StoredRow) -> Result<()>,
) -> Result<()> {
    let mut failure = None;
    store.read_rows(CATALOG_TABLE, ReadRequest::default(), &mut |row| {
        let Some(stored) = decode(&row) else {
            return ControlFlow::Continue(());
        };
        match visit(&row.key, stored) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// The predicate that outputs a cell when the row is at `generation` (0: has no
/// generation cell, which the caller reads the other way round).
fn generation_cell(generation: u64) -> RowFilter {
    let only = RowFilter::ColumnRange {
        family: CATALOG_FAMILY.to_string(),
        start: Bound::Included(GENERATION_QUALIFIER.to_vec()),
        end: Bound::Included(GENERATION_QUALIFIER.to_vec()),
    };
    if generation == 0 {
        return only;
    }
    let value = generation.to_be_bytes().to_vec();
    RowFilter::Chain(vec![
        only,
        RowFilter::ValueRange {
            start: Bound::Included(value.clone()),
            end: Bound::Included(value),
        },
    ])
}

/// Applies `mutations` to row `key` if it is as `expect` says; whether it was.
fn apply_if<S: WideColumnStore + ?Sized>(
    store: &S,
    key: &[u8],
    expect: Expect,
    mutations: &[Mutation],
) -> Result<bool> {
    let matched_applies = matches!(expect, Expect::Generation(g) if g > 0);
    let predicate = match expect {
        Expect::Absent => None,
        Expect::Generation(g) => Some(generation_cell(g)),
    };
    let (on_match, on_miss): (&[Mutation], &[Mutation]) = if matched_applies {
        (mutations, &[])
    } else {
        (&[], mutations)
    };
    let matched =
        store.check_and_mutate(CATALOG_TABLE, key, predicate.as_ref(), on_match, on_miss)?;
    Ok(matched == matched_applies)
}

/// Writes `json` to row `key` if the row is as `expect` says; the row's new generation
/// if it was, `None` if another writer changed it first.
pub(crate) fn write_row<S: WideColumnStore + ?Sized>(
    store: &S,
    key: &[u8],
    json: Vec<u8>,
    expect: Expect,
) -> Result<Option<u64>> {
    let next = match expect {
        Expect::Absent => 1,
        Expect::Generation(g) => g + 1,
    };
    let set = |qualifier: &[u8], value: Vec<u8>| Mutation::SetCell {
        family: CATALOG_FAMILY.into(),
        qualifier: qualifier.to_vec(),
        timestamp_us: 0,
        value,
    };
    let mutations = [
        set(META_QUALIFIER, json),
        set(GENERATION_QUALIFIER, next.to_be_bytes().to_vec()),
    ];
    Ok(apply_if(store, key, expect, &mutations)?.then_some(next))
}

/// Deletes row `key` if it is still at `generation`; whether it was.
pub(crate) fn delete_row<S: WideColumnStore + ?Sized>(
    store: &S,
    key: &[u8],
    generation: u64,
) -> Result<bool> {
    apply_if(
        store,
        key,
        Expect::Generation(generation),
        &[Mutation::DeleteFromRow],
    )
}
