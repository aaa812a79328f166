//! Timestream's limits and defaults, each with where it comes from. Records that break a
//! per-record limit are rejected one by one (`RejectedRecords`); request-level limits fail
//! the whole request with a `ValidationException`.

/// Records per WriteRecords request (service quota; botocore `Records` max 100).
pub const MAX_RECORDS_PER_WRITE: usize = 100;
/// Database and table names: 3 to 256 characters of `[a-zA-Z0-9_.-]` (botocore `ResourceCreateAPIName`).
pub const MIN_RESOURCE_NAME_LEN: usize = 3;
/// See [`MIN_RESOURCE_NAME_LEN`].
pub const MAX_RESOURCE_NAME_LEN: usize = 256;
/// Bytes in a dimension name (Timestream quota "dimension name length": 60 bytes).
pub const MAX_DIMENSION_NAME_BYTES: usize = 60;
/// Bytes in a dimension name-value pair (Timestream quota: 2 KB).
pub const MAX_DIMENSION_PAIR_BYTES: usize = 2048;
/// Distinct dimension names per table (Timestream quota: 128).
pub const MAX_DIMENSIONS_PER_TABLE: usize = 128;
/// Bytes in a measure name (Timestream quota: 256).
pub const MAX_MEASURE_NAME_BYTES: usize = 256;
/// Distinct measure names per table (Timestream quota: 8,192).
pub const MAX_MEASURES_PER_TABLE: usize = 8192;
/// Measure values in one multi-measure record (Timestream quota: 256).
pub const MAX_MEASURES_PER_RECORD: usize = 256;
/// Bytes of a VARCHAR measure value (Timestream quota: 2 KB).
pub const MAX_VARCHAR_BYTES: usize = 2048;
/// Tables per database (Timestream default quota: 500 tables per account; kept per database).
pub const MAX_TABLES_PER_DATABASE: usize = 500;
/// Databases per server (Timestream default quota: 500 databases per account).
pub const MAX_DATABASES: usize = 500;
/// Memory-store retention bounds in hours (botocore `MemoryStoreRetentionPeriodInHours`: 1..8766).
pub const MEMORY_RETENTION_HOURS: std::ops::RangeInclusive<i64> = 1..=8766;
/// Magnetic-store retention bounds in days (botocore `MagneticStoreRetentionPeriodInDays`: 1..73000).
pub const MAGNETIC_RETENTION_DAYS: std::ops::RangeInclusive<i64> = 1..=73000;
/// Default memory-store retention when CreateTable gives none (AWS console default: 6 hours).
pub const DEFAULT_MEMORY_RETENTION_HOURS: i64 = 6;
/// Default magnetic-store retention when CreateTable gives none (AWS default: 73,000 days).
pub const DEFAULT_MAGNETIC_RETENTION_DAYS: i64 = 73_000;
/// How far in the future a record's time may be (Timestream accepts up to 15 minutes ahead).
pub const MAX_FUTURE_NS: i64 = 15 * 60 * 1_000_000_000;
/// Page size of ListDatabases / ListTables when MaxResults is absent, and its ceiling.
pub const MAX_LIST_RESULTS: usize = 20;
/// Prefixes no dimension or measure name may start with (Timestream's reserved names).
pub const RESERVED_PREFIXES: &[&str] = &["ts_", "measure_value"];
/// Names no dimension or measure may have (Timestream's reserved column names).
pub const RESERVED_NAMES: &[&str] = &["time", "measure_name", "measure_value"];
/// Smallest time bucket of the bucketed layouts.
pub const MIN_BUCKET_SECS: i64 = 1;
/// Largest time bucket (a week), so a bucket row of a 1-minute series stays far below
/// Bigtable's recommended 100 MB per row.
pub const MAX_BUCKET_SECS: i64 = 7 * 24 * 3600;

/// Tries of a write whose rows other front-ends keep changing between its read and its
/// conditional write (guarded tables); then the request fails with a
/// `ThrottlingException` and the client retries it.
pub const MAX_WRITE_TRIES: usize = 16;
/// Key ranges in one ReadRows of a query that reads many series' windows at once (a
/// table with a series directory): 10,000 ranges of two ~100-byte keys keep a request
/// near 2 MB, far below gRPC's message limit.
pub const MAX_RANGES_PER_READ: usize = 10_000;
