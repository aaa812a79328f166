//! The one place where errors become gRPC statuses: the engine's ([`to_status`]) and
//! SQL's ([`sql_status`]).

use almanac_engine::Error;
use tonic::{Code, Status};

/// Maps an engine error to the status Cloud Bigtable returns for the same fault.
pub fn to_status(e: &Error) -> Status {
    let code = match e {
        Error::Invalid(_) => Code::InvalidArgument,
        Error::NotFound { .. } => Code::NotFound,
        Error::AlreadyExists { .. } => Code::AlreadyExists,
        Error::Exhausted(_) | Error::DiskFull(_) => Code::ResourceExhausted,
        Error::Precondition(_) => Code::FailedPrecondition,
        Error::Storage(_) => Code::Unavailable,
        Error::Corrupt(_) => Code::DataLoss,
    };
    Status::new(code, e.to_string())
}

/// Maps a SQL error (PrepareQuery, ExecuteQuery) to the status Cloud Bigtable returns
/// for the same fault. Syntax errors keep their line and column in the message.
pub fn sql_status(e: &almanac_sql::Error) -> Status {
    use almanac_sql::Error as E;
    let code = match e {
        E::Syntax { .. } | E::Invalid(_) | E::Parameter(_) => Code::InvalidArgument,
        E::TableNotFound(_) => Code::NotFound,
        E::PermissionDenied(_) => Code::PermissionDenied,
        E::ResourcesExhausted(_) => Code::ResourceExhausted,
        E::Cancelled(_) => Code::Cancelled,
        // Not DEADLINE_EXCEEDED: Google's clients retry that, running the query again.
        E::TimedOut { .. } => Code::ResourceExhausted,
        // Not UNAVAILABLE: clients retry that, and a failing read would fail again.
        E::Store(_) | E::Execution(_) => Code::Internal,
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

/// PERMISSION_DENIED for a refused call, in Bigtable's words.
pub fn denied(d: &almanac_auth::Denied) -> Status {
    Status::permission_denied(format!(
        "Permission '{}' denied on resource '{}' (or it may not exist); principal {} lacks it.",
        d.permission, d.resource, d.principal
    ))
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

impl<T> IntoStatus<T> for Result<T, almanac_sql::Error> {
    fn status(self) -> Result<T, Status> {
        self.map_err(|e| sql_status(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_errors() {
        let syntax = sql_status(&almanac_sql::Error::Syntax {
            message: "Expected: an expression".into(),
            line: 1,
            column: 8,
        });
        assert_eq!(syntax.code(), Code::InvalidArgument);
        assert!(syntax.message().contains("line 1, column 8"));
        let missing = sql_status(&almanac_sql::Error::TableNotFound("nope".into()));
        assert_eq!(missing.code(), Code::NotFound);
        assert_eq!(missing.message(), "table nope does not exist");
    }
}
