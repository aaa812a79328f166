//! Row mutations, as `google.bigtable.v2.Mutation`, and ReadModifyWrite rules.

/// Timestamp value asking the server to use its own clock (Bigtable's `-1`).
pub const SERVER_TIME: i64 = -1;

/// One change to one row. All mutations of a row apply atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Write `value` at `family:qualifier`, timestamp `timestamp_us` ([`SERVER_TIME`] = now).
    SetCell {
        /// Family name.
        family: String,
        /// Column qualifier.
        qualifier: Vec<u8>,
        /// Timestamp in µs, or [`SERVER_TIME`].
        timestamp_us: i64,
        /// The value.
        value: Vec<u8>,
    },
    /// Delete the cells of one column, optionally only within `[start_us, end_us)`.
    DeleteFromColumn {
        /// Family name.
        family: String,
        /// Column qualifier.
        qualifier: Vec<u8>,
        /// Inclusive lower bound, non-negative (0 = from the beginning).
        start_us: i64,
        /// Exclusive upper bound (`None` = to infinity); when set, after `start_us`.
        end_us: Option<i64>,
    },
    /// Delete every cell of one family in this row.
    DeleteFromFamily {
        /// Family name.
        family: String,
    },
    /// Delete the whole row.
    DeleteFromRow,
    /// Merge an int64 into the aggregate cell at `timestamp_us` (Sum/Min/Max families),
    /// or add a value to a HyperLogLog family's sketch.
    AddToCell {
        /// Family name (must be an aggregate family).
        family: String,
        /// Column qualifier.
        qualifier: Vec<u8>,
        /// Timestamp in µs, or [`SERVER_TIME`].
        timestamp_us: i64,
        /// The input: an int64 for Sum/Min/Max, any bytes for HLL.
        input: AggregateInput,
    },
    /// Merge an already-aggregated value (an int64 or an HLL sketch) into the cell.
    MergeToCell {
        /// Family name (must be an aggregate family).
        family: String,
        /// Column qualifier.
        qualifier: Vec<u8>,
        /// Timestamp in µs, or [`SERVER_TIME`].
        timestamp_us: i64,
        /// The state to merge: an int64 for Sum/Min/Max, a sketch for HLL.
        input: AggregateInput,
    },
}

/// The value an aggregate mutation carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AggregateInput {
    /// A 64-bit integer.
    Int(i64),
    /// Raw bytes (an HLL input or a serialized sketch).
    Bytes(Vec<u8>),
}

/// One rule of a ReadModifyWrite request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadModifyWriteRule {
    /// Family name.
    pub family: String,
    /// Column qualifier.
    pub qualifier: Vec<u8>,
    /// What to do with the latest value.
    pub op: ReadModifyWriteOp,
}

/// How a ReadModifyWrite rule changes the latest value of its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadModifyWriteOp {
    /// Append bytes (a missing cell counts as empty).
    Append(Vec<u8>),
    /// Add to a 64-bit big-endian integer (a missing cell counts as 0).
    Increment(i64),
}

impl Mutation {
    /// The family the mutation names, if any.
    pub fn family(&self) -> Option<&str> {
        match self {
            Mutation::SetCell { family, .. }
            | Mutation::DeleteFromColumn { family, .. }
            | Mutation::DeleteFromFamily { family }
            | Mutation::AddToCell { family, .. }
            | Mutation::MergeToCell { family, .. } => Some(family),
            Mutation::DeleteFromRow => None,
        }
    }
}
