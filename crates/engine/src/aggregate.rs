//! Aggregate cells: `AddToCell` and `MergeToCell` fold an input into the cell at a
//! timestamp. Sum, Min and Max cells hold an int64 as 8 bytes big-endian (what
//! ReadRows returns for Bigtable's aggregate int64 types); HLL cells hold a sketch
//! (see [`crate::hll`]).
//!
//! Byte layout: docs/format.md#cell-values

use crate::error::{Error, Result};
use crate::hll::Sketch;
use crate::mutation::AggregateInput;
use crate::schema::Aggregate;

fn as_int(family: &str, input: &AggregateInput) -> Result<i64> {
    match input {
        AggregateInput::Int(v) => Ok(*v),
        AggregateInput::Bytes(b) => {
            let a: [u8; 8] = b.as_slice().try_into().map_err(|_| {
                Error::Invalid(format!(
                    "aggregate family {family:?} takes int64 inputs; got {} bytes",
                    b.len()
                ))
            })?;
            Ok(i64::from_be_bytes(a))
        }
    }
}

fn stored_int(existing: &[u8]) -> Result<i64> {
    let a: [u8; 8] = existing.try_into().map_err(|_| {
        Error::Corrupt(format!("aggregate cell of {} bytes, not 8", existing.len()))
    })?;
    Ok(i64::from_be_bytes(a))
}

/// Checks an input before anything is written, so a bad input rejects the whole row.
pub fn validate_input(
    kind: Aggregate,
    family: &str,
    merge: bool,
    input: &AggregateInput,
) -> Result<()> {
    match kind {
        Aggregate::Sum | Aggregate::Min | Aggregate::Max => as_int(family, input).map(|_| ()),
        Aggregate::HllCountDistinct if merge => match input {
            AggregateInput::Bytes(b) => Sketch::decode(b).map(|_| ()),
            AggregateInput::Int(_) => Err(Error::Invalid(format!(
                "MergeToCell on HLL family {family:?} takes a serialized sketch, not an int64"
            ))),
        },
        Aggregate::HllCountDistinct => Ok(()),
    }
}

/// The new cell value after folding `input` into `existing` (`None` = no cell yet).
/// `merge` is true for `MergeToCell` (the input is already an aggregate state).
pub fn fold(
    kind: Aggregate,
    family: &str,
    merge: bool,
    existing: Option<&[u8]>,
    input: &AggregateInput,
) -> Result<Vec<u8>> {
    match kind {
        Aggregate::Sum | Aggregate::Min | Aggregate::Max => {
            let v = as_int(family, input)?;
            let out = match existing {
                None => v,
                Some(e) => {
                    let cur = stored_int(e)?;
                    match kind {
                        Aggregate::Sum => cur.wrapping_add(v),
                        Aggregate::Min => cur.min(v),
                        _ => cur.max(v),
                    }
                }
            };
            Ok(out.to_be_bytes().to_vec())
        }
        Aggregate::HllCountDistinct => {
            let mut sketch = match existing {
                Some(e) => Sketch::decode(e)?,
                None => Sketch::new(),
            };
            match (merge, input) {
                (true, AggregateInput::Bytes(b)) => sketch.merge(&Sketch::decode(b)?),
                (true, AggregateInput::Int(_)) => {
                    return Err(Error::Invalid(
                        "MergeToCell on an HLL family takes a sketch".into(),
                    ));
                }
                (false, AggregateInput::Bytes(b)) => sketch.add(b),
                (false, AggregateInput::Int(v)) => sketch.add(&v.to_be_bytes()),
            }
            Ok(sketch.encode())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sum_min_max_fold() {
        let mut cell = None;
        for v in [5, -3, 10] {
            cell = Some(
                fold(
                    Aggregate::Sum,
                    "s",
                    false,
                    cell.as_deref(),
                    &AggregateInput::Int(v),
                )
                .unwrap(),
            );
        }
        assert_eq!(cell.unwrap(), 12i64.to_be_bytes());
        let min = fold(
            Aggregate::Min,
            "m",
            false,
            Some(&7i64.to_be_bytes()),
            &AggregateInput::Int(3),
        )
        .unwrap();
        assert_eq!(min, 3i64.to_be_bytes());
        let max = fold(
            Aggregate::Max,
            "m",
            true,
            Some(&7i64.to_be_bytes()),
            &AggregateInput::Int(3),
        )
        .unwrap();
        assert_eq!(max, 7i64.to_be_bytes());
        assert!(
            fold(
                Aggregate::Sum,
                "s",
                false,
                None,
                &AggregateInput::Bytes(vec![1, 2])
            )
            .is_err()
        );
    }
}
