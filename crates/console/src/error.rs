//! The console's one error type, mapped to HTTP statuses in [`Error::status`] only.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why a console request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is missing or malformed.
    #[error("{0}")]
    Request(String),
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] almanac_engine::Error),
    /// The time-series layer refused or failed.
    #[error(transparent)]
    TimeSeries(#[from] almanac_timeseries::Error),
    /// The query failed to plan or run.
    #[error(transparent)]
    Sql(#[from] almanac_sql::Error),
    /// The request carries no token of a principal (authentication is on).
    #[error("{0}")]
    Unauthenticated(String),
    /// The principal may not see this.
    #[error("{0}")]
    Forbidden(String),
    /// A blocking task failed.
    #[error("a console task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The console's results.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        use almanac_engine::Error as E;
        match self {
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::Sql(almanac_sql::Error::PermissionDenied(_)) => {
                StatusCode::FORBIDDEN
            }
            Self::Request(_) | Self::Sql(_) => StatusCode::BAD_REQUEST,
            Self::Engine(E::NotFound { .. }) => StatusCode::NOT_FOUND,
            Self::Engine(E::Invalid(_)) => StatusCode::BAD_REQUEST,
            Self::TimeSeries(almanac_timeseries::Error::NotFound { .. }) => StatusCode::NOT_FOUND,
            Self::TimeSeries(
                almanac_timeseries::Error::Validation(_)
                | almanac_timeseries::Error::Conflict { .. }
                | almanac_timeseries::Error::Quota(_)
                | almanac_timeseries::Error::Rejected(_),
            ) => StatusCode::BAD_REQUEST,
            Self::Engine(_) | Self::TimeSeries(_) | Self::Task(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let Self::Unauthenticated(_) = self {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"almanac\""),
            );
        }
        response
    }
}
