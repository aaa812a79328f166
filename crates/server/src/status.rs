//! The one place where errors become gRPC statuses.

use almanac_engine::Error;
use tonic::{Code, Status};

/// Maps an engine error to the status Cloud Bigtable returns for the same fault.
pub fn to_status(e: &Error) -> Status {
    let code = match e {
        Error::Invalid(_) => Code::InvalidArgument,
        Error::NotFound { .. } => Code::NotFound,
        Error::AlreadyExists { .. } => Code::AlreadyExists,
        Error::Exhausted(_) => Code::ResourceExhausted,
        Error::Precondition(_) => Code::FailedPrecondition,
        Error::Storage(_) => Code::Unavailable,
        Error::Corrupt(_) => Code::DataLoss,
    };
    Status::new(code, e.to_string())
}

/// The engine error as a `google.rpc.Status` (for MutateRows per-entry results).
pub fn to_rpc_status(e: &Error) -> almanac_api::google::rpc::Status {
    let s = to_status(e);
    almanac_api::google::rpc::Status {
        code: s.code() as i32,
        message: s.message().to_owned(),
        details: vec![],
    }
}

/// An `INVALID_ARGUMENT` status for a malformed request field.
pub fn invalid(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}

/// Converts engine results into tonic results.
pub trait IntoStatus<T> {
    /// Maps the error through [`to_status`].
    fn status(self) -> Result<T, Status>;
}

impl<T> IntoStatus<T> for Result<T, Error> {
    fn status(self) -> Result<T, Status> {
        self.map_err(|e| to_status(&e))
    }
}
