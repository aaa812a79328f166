//! The crate's one error enum, classified by what the caller should do. The server maps
//! it to Timestream's exceptions in one place (`timestream::api_error`).

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a job request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a limit (`ValidationException`).
    #[error("{0}")]
    Validation(String),
    /// The named scheduled query or task does not exist (`ResourceNotFoundException`).
    #[error("The {kind} {name} does not exist.")]
    NotFound {
        /// "scheduled query" or "batch load task".
        kind: &'static str,
        /// The ARN or id as given.
        name: String,
    },
    /// The thing to create exists already (`ConflictException`).
    #[error("{0}")]
    Conflict(String),
    /// A quota is used up (`ServiceQuotaExceededException`).
    #[error("{0}")]
    Quota(String),
    /// The time-series layer refused or failed.
    #[error(transparent)]
    Series(#[from] almanac_timeseries::Error),
    /// The SQL engine refused or failed.
    #[error(transparent)]
    Sql(#[from] almanac_sql::Error),
    /// The store below failed (`InternalServerException`).
    #[error("storage: {0}")]
    Store(#[from] almanac_engine::Error),
    /// A stored job could not be decoded, or a report could not be written
    /// (`InternalServerException`).
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// A `Validation` error from anything displayable.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::Validation(msg.into())
    }
}
