//! Who may call which Timestream operation on what.
//!
//! A request is authenticated by its SigV4 signature ([`crate::auth::Gate::signed`]);
//! then its operation names the action and the resource it needs, read from the
//! body's `DatabaseName` and `TableName` (or a tag operation's `ResourceARN`):
//!
//! | operations | needs |
//! |---|---|
//! | `DescribeEndpoints`, `Query`, `PrepareQuery`, `CancelQuery` | any principal (a query's tables are checked as they are opened) |
//! | `ListDatabases`, `ListTables` | any principal: the answer lists only the databases and tables it may read ([`lists_database`], [`lists_table`]) |
//! | `DescribeDatabase` | read on the database |
//! | `DescribeTable`, `ListTagsForResource` | read on the table (or database) |
//! | `WriteRecords` | write on the table |
//! | `CreateDatabase`, `UpdateDatabase`, `DeleteDatabase` | administer the database |
//! | `CreateTable`, `UpdateTable`, `DeleteTable`, `TagResource`, `UntagResource` | administer the table (or database) |
//! | scheduled queries, batch loads, account settings | the server as a whole: a principal of scope `All` |

use almanac_auth::sigv4::SigError;
use almanac_auth::{Action, Denied, Resource};
use axum::http::StatusCode;

use super::ApiError;
use crate::auth::{Caller, Unauthenticated};

/// Tables of a database ListDatabases looks through for one the caller may read.
const MAX_TABLES_LOOKED_AT: usize = 10_000;

/// The account id ARNs carry (Almanac has no accounts).
pub const ACCOUNT_ID: &str = "000000000000";

/// What an operation needs, and of what.
enum Needs {
    /// Only to be authenticated.
    Nothing,
    /// `action` on the resource the body names (`at` says how).
    Action(Action, At),
}

/// Where an operation's resource comes from.
enum At {
    Database,
    Table,
    Arn,
    Server,
}

fn needs(op: &str) -> Needs {
    use Action::{Administer, Read, Write};
    match op {
        "DescribeEndpoints" | "Query" | "PrepareQuery" | "CancelQuery" | "ListDatabases"
        | "ListTables" => Needs::Nothing,
        "DescribeDatabase" => Needs::Action(Read, At::Database),
        "DescribeTable" => Needs::Action(Read, At::Table),
        "ListTagsForResource" => Needs::Action(Read, At::Arn),
        "WriteRecords" => Needs::Action(Write, At::Table),
        "CreateDatabase" | "UpdateDatabase" | "DeleteDatabase" => {
            Needs::Action(Administer, At::Database)
        }
        "CreateTable" | "UpdateTable" | "DeleteTable" => Needs::Action(Administer, At::Table),
        "TagResource" | "UntagResource" => Needs::Action(Administer, At::Arn),
        _ => Needs::Action(Administer, At::Server),
    }
}

/// A resource ARN's database and table, parsed as the tag operations parse it.
fn arn_parts(arn: &str) -> (Option<String>, Option<String>) {
    match almanac_timeseries::Resource::from_arn(arn) {
        Ok(almanac_timeseries::Resource::Database(d)) => (Some(d), None),
        Ok(almanac_timeseries::Resource::Table(d, t)) => (Some(d), Some(t)),
        Err(_) => (None, None),
    }
}

/// Checks that `caller` may call `op` with `body`.
pub fn authorize(caller: &Caller, op: &str, body: &[u8]) -> Result<(), Denied> {
    let Caller::Principal(..) = caller else {
        return Ok(());
    };
    let Needs::Action(action, at) = needs(op) else {
        return Ok(());
    };
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let field = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let (database, table) = match at {
        At::Server => (None, None),
        At::Database => (field("DatabaseName"), None),
        At::Table => (field("DatabaseName"), field("TableName")),
        At::Arn => arn_parts(&field("ResourceARN").unwrap_or_default()),
    };
    let resource = match (&database, &table) {
        (Some(database), Some(table)) => Resource::TsTable { database, table },
        (Some(database), None) => Resource::Database(database),
        _ => Resource::Server,
    };
    caller.allows(action, &format!("timestream:{op}"), &resource)
}

/// Whether `caller` sees table `table` of `database` in ListTables: it may read it.
pub fn lists_table(caller: &Caller, database: &str, table: &str) -> bool {
    caller
        .allows(
            Action::Read,
            "timestream:ListTables",
            &Resource::TsTable { database, table },
        )
        .is_ok()
}

/// Whether `caller` sees `database` in ListDatabases: it may read the database, or
/// one of its tables.
pub fn lists_database(
    caller: &Caller,
    ts: &almanac_timeseries::TimeSeries<almanac_timeseries::SharedStore>,
    database: &str,
) -> bool {
    if caller
        .allows(
            Action::Read,
            "timestream:ListDatabases",
            &Resource::Database(database),
        )
        .is_ok()
    {
        return true;
    }
    ts.list_tables(Some(database), None, MAX_TABLES_LOOKED_AT)
        .is_ok_and(|tables| {
            tables
                .iter()
                .any(|t| lists_table(caller, database, &t.name))
        })
}

/// `AccessDeniedException`, in IAM's words.
pub fn access_denied(d: &Denied, region: &str) -> ApiError {
    let resource = if d.resource == "*" {
        "*".to_string()
    } else {
        format!("arn:aws:timestream:{region}:{ACCOUNT_ID}:{}", d.resource)
    };
    ApiError::new(
        StatusCode::FORBIDDEN,
        "AccessDeniedException",
        format!(
            "User: arn:aws:iam::{ACCOUNT_ID}:user/{} is not authorized to perform: {} on resource: {resource} because no identity-based policy allows the {} action",
            d.principal, d.permission, d.permission
        ),
    )
}

/// The exception AWS answers a request it cannot authenticate with.
pub fn unauthenticated(e: &Unauthenticated) -> ApiError {
    let name = match e {
        Unauthenticated::Signature(SigError::Missing) => "MissingAuthenticationTokenException",
        Unauthenticated::Signature(SigError::UnknownKey) | Unauthenticated::Token(_) => {
            "UnrecognizedClientException"
        }
        Unauthenticated::Signature(SigError::Malformed(_)) => "IncompleteSignatureException",
        Unauthenticated::Signature(_) => "InvalidSignatureException",
    };
    ApiError::new(StatusCode::FORBIDDEN, name, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_name_databases_and_tables_as_the_tag_operations_read_them() {
        let some = |s: &str| Some(s.to_string());
        let t = "arn:aws:timestream:us-east-1:000000000000:database/db/table/t";
        assert_eq!(arn_parts(t), (some("db"), some("t")));
        let d = "arn:aws:timestream:us-east-1:000000000000:database/db";
        assert_eq!(arn_parts(d), (some("db"), None));
        assert_eq!(arn_parts("nonsense"), (None, None));
        // A table-looking region must not pass for the database the ARN names.
        let tricky = "arn:aws:timestream:database/mine/table/x:000000000000:database/victim";
        assert_ne!(arn_parts(tricky).0, some("mine"));
    }
}
