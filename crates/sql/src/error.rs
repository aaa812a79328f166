//! The crate's one error enum. The server maps it to gRPC statuses and to Timestream's
//! exceptions, each in one place.

use datafusion::error::DataFusionError;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a query.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not SQL we can parse; `line` and `column` are 1-based.
    #[error("syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// What the parser expected or found.
        message: String,
        /// Line of the offending token (0 when unknown).
        line: u64,
        /// Column of the offending token (0 when unknown).
        column: u64,
    },
    /// A named table (or database) does not exist.
    #[error("table {0} does not exist")]
    TableNotFound(String),
    /// The query parses but cannot be planned: unknown column, wrong types, bad arguments.
    #[error("{0}")]
    Invalid(String),
    /// A parameter is missing or has the wrong type.
    #[error("parameter: {0}")]
    Parameter(String),
    /// The query ran out of an allowed resource (rows returned, memory).
    #[error("{0}")]
    ResourcesExhausted(String),
    /// The query ran past its time limit and was stopped.
    #[error(
        "The query ran past its time limit of {limit_secs} s (serve --query-time-limit-secs) and was stopped. Narrow the query (a shorter time range, fewer series) or raise the limit."
    )]
    TimedOut {
        /// The limit, in seconds.
        limit_secs: f64,
    },
    /// The caller may not read a table the query names.
    #[error("{0}")]
    PermissionDenied(String),
    /// The query was cancelled.
    #[error("query {0} was cancelled")]
    Cancelled(String),
    /// Storage failed underneath.
    #[error("storage: {0}")]
    Store(String),
    /// DataFusion failed while executing (a bug or an internal limit).
    #[error("execution: {0}")]
    Execution(String),
}

impl From<almanac_engine::Error> for Error {
    fn from(e: almanac_engine::Error) -> Self {
        match e {
            almanac_engine::Error::NotFound { .. } => Self::TableNotFound(e.to_string()),
            other => Self::Store(other.to_string()),
        }
    }
}

impl From<almanac_timeseries::Error> for Error {
    fn from(e: almanac_timeseries::Error) -> Self {
        match e {
            almanac_timeseries::Error::NotFound { ref name, .. } => {
                Self::TableNotFound(name.clone())
            }
            other => Self::Store(other.to_string()),
        }
    }
}

impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        Self::Execution(e.to_string())
    }
}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Self {
        classify(e)
    }
}

/// Sorts a DataFusion error into our kinds, unwrapping the context DataFusion adds.
/// A column the query names but no table has is `Column 'x' does not exist.`, as
/// Timestream words it, however deep DataFusion reports it (tools match that text:
/// the Prometheus connector reads it as an empty result).
fn classify(e: DataFusionError) -> Error {
    let text = e.to_string();
    if let Some(column) = missing_column(&text) {
        return Error::Invalid(format!("Column '{column}' does not exist."));
    }
    classify_kind(e)
}

/// The column of DataFusion's "No field named X." (X maybe qualified and quoted).
fn missing_column(message: &str) -> Option<String> {
    const MARK: &str = "No field named ";
    let rest = &message[message.find(MARK)? + MARK.len()..];
    let name = rest
        .split(". Valid fields")
        .next()
        .unwrap_or(rest)
        .lines()
        .next()
        .unwrap_or("")
        .trim_end_matches('.');
    let last = match name.strip_suffix('"') {
        Some(quoted) => quoted.rsplit_once('"').map_or(quoted, |(_, n)| n),
        None => name.rsplit_once('.').map_or(name, |(_, n)| n),
    };
    (!last.is_empty()).then(|| last.to_string())
}

fn classify_kind(e: DataFusionError) -> Error {
    match e {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            classify_kind(*inner)
        }
        // An input shared by several consumers (a join's build side) failed: the
        // first error beneath says why.
        DataFusionError::Shared(inner) => match inner.find_root() {
            DataFusionError::ResourcesExhausted(m) => Error::ResourcesExhausted(m.clone()),
            DataFusionError::External(e) => match e.downcast_ref::<Error>() {
                Some(Error::TimedOut { limit_secs }) => Error::TimedOut {
                    limit_secs: *limit_secs,
                },
                _ => Error::Execution(inner.to_string()),
            },
            _ => Error::Execution(inner.to_string()),
        },
        DataFusionError::SQL(e, _) => {
            let message = e.to_string();
            let (line, column) = position_of(&message);
            Error::Syntax {
                message: strip_position(&message),
                line,
                column,
            }
        }
        DataFusionError::Plan(m) => plan_error(m),
        DataFusionError::SchemaError(e, _) => Error::Invalid(e.to_string()),
        DataFusionError::NotImplemented(m) => Error::Invalid(format!("not supported: {m}")),
        DataFusionError::ResourcesExhausted(m) => Error::ResourcesExhausted(m),
        DataFusionError::External(inner) => match inner.downcast::<Error>() {
            Ok(ours) => *ours,
            Err(other) => Error::Execution(other.to_string()),
        },
        DataFusionError::ExecutionJoin(e) => Error::Execution(e.to_string()),
        DataFusionError::Execution(m) if m.starts_with("Placeholder") => Error::Parameter(m),
        other => Error::Execution(other.to_string()),
    }
}

fn plan_error(m: String) -> Error {
    const MISSING: &str = "table '";
    if let Some(rest) = m.strip_prefix(MISSING)
        && let Some(name) = rest.strip_suffix("' not found")
    {
        // Names print without the one catalog, and Bigtable tables without their schema.
        let name = name.strip_prefix("almanac.").unwrap_or(name);
        let name = name.strip_prefix("bigtable.").unwrap_or(name);
        return Error::TableNotFound(name.to_string());
    }
    Error::Invalid(m)
}

#[cfg(test)]
#[test]
fn missing_columns_are_named_as_timestream_names_them() {
    let cases = [
        ("Schema error: No field named nope.", Some("nope")),
        (
            "No field named datacenter. Valid fields are \"promDB\".prom.instance.",
            Some("datacenter"),
        ),
        (
            "No field named t.\"measure_value::double\".",
            Some("measure_value::double"),
        ),
        ("No field named \"FORTNIGHT\".", Some("FORTNIGHT")),
        ("Divide by zero", None),
    ];
    for (message, want) in cases {
        assert_eq!(missing_column(message).as_deref(), want, "{message}");
    }
}

/// sqlparser ends its messages with "at Line: L, Column: C".
fn position_of(message: &str) -> (u64, u64) {
    let Some(at) = message.rfind("Line: ") else {
        return (0, 0);
    };
    let tail = &message[at + "Line: ".len()..];
    let mut parts = tail.split(", Column: ");
    let line = parts
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    let column = parts
        .next()
        .map(|c| {
            c.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (line, column)
}

fn strip_position(message: &str) -> String {
    let m = message
        .strip_prefix("sql parser error: ")
        .unwrap_or(message);
    match m.rfind(" at Line: ") {
        Some(at) => m[..at].to_string(),
        None => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_positions_are_extracted() {
        assert_eq!(
            position_of(
                "sql parser error: Expected: end of statement, found: x at Line: 2, Column: 7"
            ),
            (2, 7)
        );
        assert_eq!(position_of("no position"), (0, 0));
        assert_eq!(
            strip_position(
                "sql parser error: Expected: an expression, found: EOF at Line: 1, Column: 8"
            ),
            "Expected: an expression, found: EOF"
        );
    }

    #[test]
    fn missing_tables_are_named() {
        let e = plan_error("table 'almanac.bigtable.nope' not found".into());
        assert!(matches!(e, Error::TableNotFound(n) if n == "nope"));
        let e = plan_error("table 'almanac.db.t' not found".into());
        assert!(matches!(e, Error::TableNotFound(n) if n == "db.t"));
    }
}
