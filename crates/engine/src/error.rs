//! The engine's one error type, classified by what the caller should do.
//!
//! The server maps each variant to a gRPC status in exactly one place
//! (`almanac-server`'s `status.rs`); nothing else decides wire codes.

use std::fmt;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, by what the caller should do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a limit; retrying it unchanged fails again.
    /// (gRPC `INVALID_ARGUMENT`.)
    #[error("{0}")]
    Invalid(String),
    /// A named table, family or instance does not exist. (gRPC `NOT_FOUND`.)
    #[error("{kind} not found: {name}")]
    NotFound {
        /// What kind of thing was missing ("table", "column family").
        kind: &'static str,
        /// Its name as given by the caller.
        name: String,
    },
    /// The thing to create exists already. (gRPC `ALREADY_EXISTS`.)
    #[error("{kind} already exists: {name}")]
    AlreadyExists {
        /// What kind of thing ("table", "column family").
        kind: &'static str,
        /// Its name as given by the caller.
        name: String,
    },
    /// A quota such as tables per instance is used up. (gRPC `RESOURCE_EXHAUSTED`.)
    #[error("{0}")]
    Exhausted(String),
    /// The data directory's filesystem is below its free-space reserve; the write was
    /// not made and may be retried once space is freed. (gRPC `RESOURCE_EXHAUSTED`.)
    #[error("{0}")]
    DiskFull(String),
    /// The request is well formed but the stored state forbids it (gRPC `FAILED_PRECONDITION`).
    #[error("{0}")]
    Precondition(String),
    /// Storage failed; the engine refuses further writes after a failed fsync.
    /// (gRPC `INTERNAL`/`UNAVAILABLE`.)
    #[error("storage error: {0}")]
    Storage(String),
    /// Stored bytes do not decode: a bug or on-disk corruption. (gRPC `DATA_LOSS`.)
    #[error("corrupt data: {0}")]
    Corrupt(String),
}

impl Error {
    /// An `Invalid` error naming a limit, the offending size and the maximum.
    pub fn limit(what: &str, got: impl fmt::Display, max: impl fmt::Display) -> Self {
        Error::Invalid(format!("{what} is {got}, over the limit of {max}"))
    }

    /// A `NotFound` for a table.
    pub fn no_table(name: &str) -> Self {
        Error::NotFound {
            kind: "table",
            name: name.to_owned(),
        }
    }

    /// A `NotFound` for a column family.
    pub fn no_family(name: &str) -> Self {
        Error::NotFound {
            kind: "column family",
            name: name.to_owned(),
        }
    }
}

impl From<fjall::Error> for Error {
    fn from(e: fjall::Error) -> Self {
        Error::Storage(e.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Storage(e.to_string())
    }
}
