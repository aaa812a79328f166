//! Every limit Almanac enforces, each a named constant with the reason it exists.
//!
//! The numbers are Cloud Bigtable's (the table in docs/format.md, Limits, names each
//! with its constant): an application that works against Almanac must not be
//! surprised by the service.

/// Row keys are non-empty and at most 4 KiB: Bigtable's documented row-key limit.
pub const MAX_ROW_KEY_BYTES: usize = 4 * 1024;
/// Column qualifiers are at most 16 KiB: Bigtable's documented qualifier limit.
pub const MAX_QUALIFIER_BYTES: usize = 16 * 1024;
/// A single cell value is at most 100 MiB: Bigtable's hard per-cell limit.
pub const MAX_VALUE_BYTES: usize = 100 * 1024 * 1024;
/// Values above 10 MiB are accepted but reported as a [`crate::Warning`]: Bigtable
/// recommends smaller cells, since a large value slows every read of its row.
pub const RECOMMENDED_VALUE_BYTES: usize = 10 * 1024 * 1024;
/// A row (all its cells, keys and values) is at most 256 MiB: Bigtable's hard row limit.
pub const MAX_ROW_BYTES: usize = 256 * 1024 * 1024;
/// Rows above 100 MiB are accepted but reported as a [`crate::Warning`]: Bigtable
/// recommends smaller rows, since a row is read and written as one unit.
pub const RECOMMENDED_ROW_BYTES: usize = 100 * 1024 * 1024;
/// Column families per table above which creating one is reported as a
/// [`crate::Warning`]: Bigtable advises "about 100", as every family costs schema work.
pub const RECOMMENDED_FAMILIES_PER_TABLE: usize = 100;
/// Hard cap on families per table, so a runaway script cannot make a schema unbounded.
pub const MAX_FAMILIES_PER_TABLE: usize = 1_000;
/// Tables per instance: Bigtable's documented limit.
pub const MAX_TABLES_PER_INSTANCE: usize = 1_000;
/// How long a deleted table can be undeleted by default (Bigtable's window: 7 days).
pub const DEFAULT_UNDELETE_WINDOW_SECS: u64 = 7 * 24 * 3600;
/// Table ids are at most 50 characters: Bigtable's table-id rule.
pub const MAX_TABLE_ID_CHARS: usize = 50;
/// Family names are at most 64 characters: Bigtable's admin API rule.
pub const MAX_FAMILY_NAME_CHARS: usize = 64;
/// Mutations in one request (MutateRow, or all entries of MutateRows): Bigtable's limit.
pub const MAX_MUTATIONS_PER_REQUEST: usize = 100_000;
/// A serialized RowFilter is at most 20 KiB: Bigtable's filter size limit.
pub const MAX_FILTER_BYTES: usize = 20 * 1024;
/// RowFilters nest at most 20 deep: Bigtable's filter nesting limit.
pub const MAX_FILTER_DEPTH: usize = 20;
/// A serialized GC rule is at most 500 bytes: Bigtable's GC-rule size limit.
pub const MAX_GC_RULE_BYTES: usize = 500;
/// Labels are at most 15 characters of `[a-z0-9-]`: Bigtable's apply_label rule.
pub const MAX_LABEL_CHARS: usize = 15;
/// Regexes compile to at most this many bytes of program, so a hostile pattern cannot
/// exhaust memory (RE2 on the service has a similar program-size cap).
pub const MAX_REGEX_PROGRAM_BYTES: usize = 1024 * 1024;
/// Compiled filter regexes kept for reuse across requests (see `filter::pattern`).
pub const MAX_CACHED_REGEXES: usize = 256;
/// Only patterns up to this long are kept in that cache.
pub const MAX_CACHED_PATTERN_BYTES: usize = 128;
/// ReadModifyWrite rules per request: Bigtable's limit.
pub const MAX_READ_MODIFY_WRITE_RULES: usize = 100_000;
/// Room a gRPC message needs beyond the row it carries: keys, names and protobuf framing.
pub const MESSAGE_OVERHEAD_BYTES: usize = 1024 * 1024;
/// Largest gRPC message the server and Almanac's clients send or accept: one whole row
/// of [`MAX_ROW_BYTES`] plus [`MESSAGE_OVERHEAD_BYTES`].
pub const MAX_MESSAGE_BYTES: usize = MAX_ROW_BYTES + MESSAGE_OVERHEAD_BYTES;
const _: () = assert!(
    MAX_MESSAGE_BYTES > MAX_ROW_BYTES && MAX_MESSAGE_BYTES <= u32::MAX as usize,
    "a message must hold a whole row and fit a gRPC length prefix"
);
/// Microseconds per millisecond: tables with MILLIS granularity accept multiples of this.
pub const MICROS_PER_MILLI: i64 = 1_000;

/// Free space the data directory's filesystem keeps by default: data writes are
/// refused below it (`serve --min-free-disk-mib`).
pub const DEFAULT_MIN_FREE_DISK_BYTES: u64 = 256 * 1024 * 1024;
