//! Resource names: `projects/{p}/instances/{i}/tables/{t}`. The instance part
//! (`projects/{p}/instances/{i}`) is the engine's namespace, so different projects
//! and instances never see each other's tables.

use tonic::Status;

/// A parsed table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    /// `projects/{p}/instances/{i}`.
    pub instance: String,
    /// The table id.
    pub table: String,
}

impl TableName {
    /// The full resource name.
    pub fn full(&self) -> String {
        format!("{}/tables/{}", self.instance, self.table)
    }
}

/// Parses `projects/{p}/instances/{i}` (the `parent` of admin calls).
pub fn instance(name: &str) -> Result<String, Status> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        ["projects", p, "instances", i] if !p.is_empty() && !i.is_empty() => Ok(name.to_owned()),
        _ => Err(Status::invalid_argument(format!(
            "invalid instance name {name:?}: expected projects/{{project}}/instances/{{instance}}"
        ))),
    }
}

/// Parses `projects/{p}/instances/{i}/tables/{t}`.
pub fn table(name: &str) -> Result<TableName, Status> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        ["projects", p, "instances", i, "tables", t]
            if !p.is_empty() && !i.is_empty() && !t.is_empty() =>
        {
            Ok(TableName {
                instance: format!("projects/{p}/instances/{i}"),
                table: (*t).to_owned(),
            })
        }
        _ => Err(Status::invalid_argument(format!(
            "invalid table name {name:?}: expected projects/{{project}}/instances/{{instance}}/tables/{{table}}"
        ))),
    }
}

/// The name a data request acts on: its table, or the authorized view it names.
pub fn requested_table<'a>(table_name: &'a str, authorized_view: &'a str) -> &'a str {
    if table_name.is_empty() {
        authorized_view
    } else {
        table_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let t = table("projects/p/instances/i/tables/t1").ok();
        assert_eq!(
            t.map(|t| (t.instance, t.table)),
            Some(("projects/p/instances/i".into(), "t1".into()))
        );
        assert!(table("projects/p/instances/i/tables/").is_err());
        assert!(table("projects/p/tables/t").is_err());
        assert!(instance("projects/p/instances/i").is_ok());
        assert!(instance("projects/p").is_err());
    }
}
