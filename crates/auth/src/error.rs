//! The crate's one error enum; the server maps it to gRPC statuses and Timestream's
//! exceptions, each in one place.

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong managing principals.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name, role or scope is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// A principal of that name exists already.
    #[error("principal {0} already exists")]
    Exists(String),
    /// No principal of that name.
    #[error("no principal named {0}")]
    NotFound(String),
    /// The principals file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The principals file is not what this version writes.
    #[error("{path}: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The system's random source failed.
    #[error("no randomness for new credentials")]
    Random,
}
