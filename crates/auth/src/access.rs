//! Roles, scopes and the one check every handler calls.
//!
//! The roles mirror Bigtable's predefined IAM roles and Timestream's actions:
//!
//! | role | Bigtable | Timestream |
//! |---|---|---|
//! | `reader` | read rows, sample keys, SQL, get and list tables and instances | `Select` (Query), describe and list databases, tables, measures |
//! | `user` | reader's, and mutate rows | reader's, and `WriteRecords` |
//! | `admin` | everything: tables, families, instances, IAM policies, backups | everything: databases, tables, scheduled queries, batch loads, tags |
//!
//! A scope says where the role holds: everywhere, one Bigtable instance or table, or
//! one Timestream database or table. An instance covers its tables; a database covers
//! its tables; a table covers only itself. Calls on the server as a whole (listing
//! instances or databases, account settings, scheduled queries) need the `All` scope.

use serde::{Deserialize, Serialize};

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read data and metadata.
    Reader,
    /// Read and write data.
    User,
    /// Everything.
    Admin,
}

impl Role {
    /// The role named `text` (`reader`, `user`, `admin`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "reader" => Some(Self::Reader),
            "user" => Some(Self::User),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }

    /// Whether the role allows `action`.
    pub fn allows(self, action: Action) -> bool {
        match action {
            Action::Read => true,
            Action::Write => self >= Self::User,
            Action::Administer => self == Self::Admin,
        }
    }

    /// Bigtable's predefined role of the same reach.
    pub fn bigtable_role(self) -> &'static str {
        match self {
            Self::Reader => "roles/bigtable.reader",
            Self::User => "roles/bigtable.user",
            Self::Admin => "roles/bigtable.admin",
        }
    }
}

/// Where a principal's role holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scope {
    /// Every instance, table and database.
    All,
    /// One Bigtable instance (`projects/P/instances/I`) and its tables.
    Instance {
        /// `projects/P/instances/I`.
        instance: String,
    },
    /// One Bigtable table.
    Table {
        /// `projects/P/instances/I`.
        instance: String,
        /// The table's id.
        table: String,
    },
    /// One Timestream database and its tables.
    Database {
        /// The database.
        database: String,
    },
    /// One Timestream table.
    TsTable {
        /// Its database.
        database: String,
        /// The table.
        table: String,
    },
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("everything"),
            Self::Instance { instance } => write!(f, "instance {instance}"),
            Self::Table { instance, table } => write!(f, "table {instance}/tables/{table}"),
            Self::Database { database } => write!(f, "Timestream database {database}"),
            Self::TsTable { database, table } => {
                write!(f, "Timestream table {database}.{table}")
            }
        }
    }
}

/// What a call needs of a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reading data or metadata.
    Read,
    /// Writing data.
    Write,
    /// Creating, changing or deleting resources; IAM policies.
    Administer,
}

/// What a call acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    /// The server as a whole: listing instances or databases, account settings.
    Server,
    /// A Bigtable instance, `projects/P/instances/I` (its clusters, app profiles and
    /// the listing of its tables).
    Instance(&'a str),
    /// A Bigtable table (or an authorized view of it).
    Table {
        /// `projects/P/instances/I`.
        instance: &'a str,
        /// The table's id.
        table: &'a str,
    },
    /// A Timestream database (and the listing of its tables).
    Database(&'a str),
    /// A Timestream table.
    TsTable {
        /// Its database.
        database: &'a str,
        /// The table.
        table: &'a str,
    },
}

impl std::fmt::Display for Resource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server => f.write_str("*"),
            Self::Instance(i) => f.write_str(i),
            Self::Table { instance, table } => write!(f, "{instance}/tables/{table}"),
            Self::Database(d) => write!(f, "database/{d}"),
            Self::TsTable { database, table } => write!(f, "database/{database}/table/{table}"),
        }
    }
}

impl Scope {
    /// Whether the scope reaches `resource`.
    pub fn covers(&self, resource: &Resource<'_>) -> bool {
        match (self, resource) {
            (Self::All, _) => true,
            (Self::Instance { instance }, Resource::Instance(i)) => instance == i,
            (Self::Instance { instance }, Resource::Table { instance: i, .. }) => instance == i,
            (
                Self::Table { instance, table },
                Resource::Table {
                    instance: i,
                    table: t,
                },
            ) => instance == i && table == t,
            (Self::Database { database }, Resource::Database(d)) => database == d,
            (Self::Database { database }, Resource::TsTable { database: d, .. }) => database == d,
            (
                Self::TsTable { database, table },
                Resource::TsTable {
                    database: d,
                    table: t,
                },
            ) => database == d && table == t,
            _ => false,
        }
    }
}

/// A refusal: which principal, which permission, on what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{principal} may not {permission} on {resource}")]
pub struct Denied {
    /// The principal's name.
    pub principal: String,
    /// The permission, as Bigtable (`bigtable.tables.readRows`) or Timestream
    /// (`timestream:WriteRecords`) names it.
    pub permission: String,
    /// The resource, as the protocol names it.
    pub resource: String,
}

/// Whether `principal` may take `action` (named `permission`) on `resource`.
pub fn check(
    principal: &crate::Principal,
    action: Action,
    permission: &str,
    resource: &Resource<'_>,
) -> Result<(), Denied> {
    if principal.role.allows(action) && principal.scope.covers(resource) {
        return Ok(());
    }
    Err(Denied {
        principal: principal.name.clone(),
        permission: permission.to_string(),
        resource: resource.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: &str = "projects/p/instances/i";

    #[test]
    fn roles_grow_from_reader_to_admin() {
        assert!(Role::Reader.allows(Action::Read) && !Role::Reader.allows(Action::Write));
        assert!(Role::User.allows(Action::Write) && !Role::User.allows(Action::Administer));
        assert!(Role::Admin.allows(Action::Administer));
    }

    #[test]
    fn scopes_cover_what_is_under_them_and_nothing_else() {
        let table = Resource::Table {
            instance: I,
            table: "t",
        };
        let instance = Scope::Instance { instance: I.into() };
        assert!(instance.covers(&table) && instance.covers(&Resource::Instance(I)));
        assert!(!instance.covers(&Resource::Instance("projects/p/instances/j")));
        assert!(!instance.covers(&Resource::Server));
        let only_t = Scope::Table {
            instance: I.into(),
            table: "t".into(),
        };
        assert!(only_t.covers(&table));
        assert!(!only_t.covers(&Resource::Instance(I)));
        assert!(!only_t.covers(&Resource::Table {
            instance: I,
            table: "u"
        }));
        let db = Scope::Database {
            database: "d".into(),
        };
        assert!(db.covers(&Resource::TsTable {
            database: "d",
            table: "x"
        }));
        assert!(!db.covers(&table) && !db.covers(&Resource::Database("e")));
        assert!(Scope::All.covers(&Resource::Server));
    }
}
