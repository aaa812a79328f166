//! # almanac-engine
//!
//! Bigtable's data model on disk: instances of tables, column families with GC
//! rules and aggregate types, rows of cells, row-atomic mutations, and the read path
//! with the full RowFilter language. Synchronous; no async runtime. Time and
//! randomness are injected ([`clock`]).
//!
//! ## A write, step by step ([`write`])
//! 1. `Engine::mutate_row` resolves the table under the catalog read lock.
//! 2. [`validate`] checks every mutation and limit; failure writes nothing.
//! 3. The row's stripe lock is taken; mutations apply in order into an overlay.
//! 4. The overlay becomes one fjall batch (one journal record, one seqno).
//! 5. The row lock is released and [`durability`] waits for the fsync policy. The
//!    `*_unsynced` variants stop before that wait and return an [`Unsynced`] result,
//!    so a caller can apply many writes and cover them all with one [`Engine::sync`].
//! 6. Recommended limits the write passed are reported to the [`warning`] sink (after
//!    the sync, for the `*_unsynced` variants when the result is taken).
//!
//! ## A read, step by step ([`read`])
//! 1. Schema `Arc` and storage snapshot taken; filter compiled and planned ([`plan`]).
//! 2. Row set normalized into encoded key ranges ([`keys`]).
//! 3. Keys are judged before values load: GC rule, then plan; long skips seek.
//! 4. Each row's kept cells pass through the filter; non-empty rows stream out.
//!
//! ## Invariants
//! - A reader sees all of a row mutation or none of it (snapshot reads of
//!   single-seqno batches).
//! - Table and family ids are never reused, so dropped data is invisible at once and
//!   purged later by the [`gc`] sweep.
//! - Collected cells are never returned, swept or not.

pub mod access;
pub mod aggregate;
pub mod calendar;
mod catalog;
mod cell;
pub mod changes;
pub mod clock;
mod copies;
mod db;
pub mod dump;
mod durability;
mod error;
pub mod filter;
mod gc;
mod hll;
mod keys;
mod lifecycle;
pub mod limits;
mod locks;
pub mod mutation;
mod oldest;
mod plan;
pub mod read;
pub mod rowset;
mod rowsize;
pub mod sample;
pub mod schema;
mod space;
pub mod validate;
pub mod warning;
mod write;

pub use cell::{Cell, Row};
pub use copies::{BACKUPS_HOLDER_SUFFIX, SavedCopy};
pub use db::{DropRows, Engine, Options};
pub use dump::{DumpSummary, check_dump, load_dump};
pub use durability::{Durability, SyncSink};
pub use error::{Error, Result};
pub use read::{ReadRequest, ReadStats, RowStream};
pub use warning::{Warning, WarningSink};
pub use write::{RowMutations, Unsynced};

// Decoders of stored records, public for the fuzz targets in `fuzz/` only.
#[doc(hidden)]
pub use catalog::decode_table;
#[doc(hidden)]
pub use copies::decode as decode_saved_copy;
#[doc(hidden)]
pub use lifecycle::decode_deleted;
