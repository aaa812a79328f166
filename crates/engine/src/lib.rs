//! # almanac-engine
//!
//! Bigtable's data model on disk: instances of tables, column families with GC
//! rules and aggregate types, rows of cells, row-atomic mutations, and the read path
//! with the full RowFilter language. Synchronous; no async runtime.
//!
//! ## Modules
//! - [`schema`], [`limits`]: what a table is and every limit, named.
//! - [`mutation`], [`rowset`], [`filter`], [`plan`]: the request vocabulary.
//! - [`cell`]: what reads return.
//! - [`clock`]: injected time and randomness.

pub mod cell;
pub mod clock;
pub mod error;
pub mod filter;
pub mod limits;
pub mod mutation;
pub mod plan;
pub mod rowset;
pub mod schema;

pub use cell::{Cell, Row};
pub use error::{Error, Result};
