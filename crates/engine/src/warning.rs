//! Warnings: Bigtable's recommended limits, which a request may pass and still succeed.
//!
//! Cloud Bigtable accepts cell values up to 100 MiB, rows up to 256 MiB and about 1,000
//! families per table, but recommends staying under 10 MiB, 100 MiB and 100 (the
//! `RECOMMENDED_*` constants of [`crate::limits`]). Almanac accepts such requests too and
//! reports each crossing as a [`Warning`]:
//! 1. The write or schema change succeeds first (a rejected request warns about nothing).
//! 2. The engine calls the sink given in [`crate::Options::on_warning`] with the warning,
//!    on the caller's thread, after the commit and before the call returns.
//! 3. The sink decides what to do (the server logs it); with no sink, nothing happens.
//!
//! The engine itself never prints.

use std::fmt;
use std::sync::Arc;

use crate::limits::{
    RECOMMENDED_FAMILIES_PER_TABLE, RECOMMENDED_ROW_BYTES, RECOMMENDED_VALUE_BYTES,
};

/// Where the engine reports warnings (see the module docs).
pub type WarningSink = Arc<dyn Fn(&Warning) + Send + Sync>;

/// A recommended limit that a successful request passed: which one, where, how far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A cell value over [`RECOMMENDED_VALUE_BYTES`] was written.
    LargeValue {
        /// The table's resource name (`<instance>/tables/<table>`).
        table: String,
        /// The row key.
        row: Vec<u8>,
        /// The value's size in bytes.
        bytes: usize,
    },
    /// A write took a row over [`RECOMMENDED_ROW_BYTES`] (reported once per crossing;
    /// row size as [`crate::rowsize`] measures it).
    LargeRow {
        /// The table's resource name (`<instance>/tables/<table>`).
        table: String,
        /// The row key.
        row: Vec<u8>,
        /// The row's size in bytes after the write.
        bytes: u64,
    },
    /// A table was created or changed to have more than
    /// [`RECOMMENDED_FAMILIES_PER_TABLE`] column families.
    ManyFamilies {
        /// The table's resource name (`<instance>/tables/<table>`).
        table: String,
        /// How many families the table has now.
        families: usize,
    },
}

impl Warning {
    /// The recommended limit that was passed.
    pub fn limit(&self) -> u64 {
        match self {
            Warning::LargeValue { .. } => RECOMMENDED_VALUE_BYTES as u64,
            Warning::LargeRow { .. } => RECOMMENDED_ROW_BYTES as u64,
            Warning::ManyFamilies { .. } => RECOMMENDED_FAMILIES_PER_TABLE as u64,
        }
    }

    /// The size that passed it (bytes, or families).
    pub fn size(&self) -> u64 {
        match self {
            Warning::LargeValue { bytes, .. } => *bytes as u64,
            Warning::LargeRow { bytes, .. } => *bytes,
            Warning::ManyFamilies { families, .. } => *families as u64,
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, table, row) = match self {
            Warning::LargeValue { table, row, .. } => {
                ("cell value size in bytes", table, Some(row))
            }
            Warning::LargeRow { table, row, .. } => ("row size in bytes", table, Some(row)),
            Warning::ManyFamilies { table, .. } => ("column families", table, None),
        };
        write!(
            f,
            "{what} is {}, over the recommended limit of {}",
            self.size(),
            self.limit()
        )?;
        write!(f, " (table {table}")?;
        if let Some(row) = row {
            write!(f, ", row \"{}\"", row.escape_ascii())?;
        }
        write!(f, ")")
    }
}
