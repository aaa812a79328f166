//! The crate's one error enum, classified by what the caller should do. The server maps
//! it to the Timestream wire errors (`ValidationException`, `ResourceNotFoundException`,
//! `ConflictException`, `RejectedRecordsException`, …) in exactly one place.

use crate::model::RejectedRecord;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a time-series request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a limit (`ValidationException`).
    #[error("{0}")]
    Validation(String),
    /// A named database or table does not exist (`ResourceNotFoundException`).
    #[error("The {kind} {name} does not exist.")]
    NotFound {
        /// "database" or "table".
        kind: &'static str,
        /// The name as given.
        name: String,
    },
    /// The thing to create exists already (`ConflictException`).
    #[error("The {kind} {name} already exists.")]
    Conflict {
        /// "database" or "table".
        kind: &'static str,
        /// The name as given.
        name: String,
    },
    /// A quota such as tables per database is used up (`ServiceQuotaExceededException`).
    #[error("{0}")]
    Quota(String),
    /// Some records of a WriteRecords request were rejected (`RejectedRecordsException`);
    /// the others were written.
    #[error("One or more records have been rejected. See RejectedRecords for details.")]
    Rejected(Vec<RejectedRecord>),
    /// The storage below failed (`InternalServerException`).
    #[error("storage: {0}")]
    Store(#[from] almanac_engine::Error),
    /// A catalog change kept losing to changes other front-ends made at the same
    /// time; trying again later may succeed (`ThrottlingException`).
    #[error("{0}")]
    Contended(String),
    /// Stored metadata could not be decoded (`InternalServerException`).
    #[error("corrupt time-series catalog: {0}")]
    Corrupt(String),
}

impl Error {
    /// A `Validation` error from anything displayable.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::Validation(msg.into())
    }
}
