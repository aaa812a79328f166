//! `almanac auth`: principals in a data directory (docs/security.md). The server
//! reads the file it writes, so these work on a stopped server's directory and on a
//! running one's alike (a running server sees a change within a second).

use std::path::PathBuf;

use almanac_auth::{Role, Scope, store};
use anyhow::Context;

/// `almanac auth …`.
#[derive(Debug, clap::Subcommand)]
pub enum AuthCommand {
    /// Make a principal; prints its credentials once, as one JSON object:
    /// {"name", "token", "access_key_id", "secret_access_key"}.
    CreatePrincipal(CreateArgs),
    /// List principals (names, roles and scopes; no secrets).
    List(DirArg),
    /// Delete a principal: its token and keys stop working.
    Delete {
        /// The principal.
        name: String,
        #[command(flatten)]
        dir: DirArg,
    },
}

/// The data directory.
#[derive(Debug, clap::Args)]
pub struct DirArg {
    /// The server's data directory (default as for `serve`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

/// Flags of `almanac auth create-principal`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The principal's name (letters, digits, `._@-`).
    name: String,
    /// reader (read data and metadata), user (and write data), admin (everything).
    #[arg(long, value_parser = ["reader", "user", "admin"])]
    role: String,
    /// Limit the role to one Bigtable instance, PROJECT/INSTANCE or
    /// projects/PROJECT/instances/INSTANCE.
    #[arg(long, conflicts_with = "database")]
    instance: Option<String>,
    /// Limit the role to one table of --instance.
    #[arg(long, requires = "instance")]
    table: Option<String>,
    /// Limit the role to one Timestream database.
    #[arg(long)]
    database: Option<String>,
    /// Limit the role to one table of --database.
    #[arg(long, requires = "database")]
    ts_table: Option<String>,
    #[command(flatten)]
    dir: DirArg,
}

fn dir(d: DirArg) -> PathBuf {
    d.data_dir.unwrap_or_else(crate::default_data_dir)
}

/// `PROJECT/INSTANCE` or the full name, as `projects/P/instances/I`.
fn instance_name(text: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = text.split('/').collect();
    match parts.as_slice() {
        [p, i] if !p.is_empty() && !i.is_empty() => Ok(format!("projects/{p}/instances/{i}")),
        ["projects", p, "instances", i] if !p.is_empty() && !i.is_empty() => Ok(text.to_string()),
        _ => anyhow::bail!("--instance {text:?}: expected PROJECT/INSTANCE"),
    }
}

pub fn run(command: AuthCommand) -> anyhow::Result<()> {
    match command {
        AuthCommand::CreatePrincipal(a) => {
            let role = Role::parse(&a.role).context("--role")?;
            let scope = match (a.instance, a.table, a.database, a.ts_table) {
                (Some(i), Some(table), _, _) => Scope::Table {
                    instance: instance_name(&i)?,
                    table,
                },
                (Some(i), None, _, _) => Scope::Instance {
                    instance: instance_name(&i)?,
                },
                (None, _, Some(database), Some(table)) => Scope::TsTable { database, table },
                (None, _, Some(database), None) => Scope::Database { database },
                (None, _, None, _) => Scope::All,
            };
            let now_ms = almanac_engine::clock::Clock::now_us(&almanac_engine::clock::SystemClock)
                .div_euclid(1000);
            let credentials = store::create(&dir(a.dir), &a.name, role, scope, now_ms)?;
            println!("{}", serde_json::to_string(&credentials)?);
        }
        AuthCommand::List(d) => {
            for p in store::list(&dir(d))? {
                println!(
                    "{}\t{}\t{}\t{}",
                    p.name,
                    role_name(p.role),
                    p.scope,
                    p.access_key_id
                );
            }
        }
        AuthCommand::Delete { name, dir: d } => {
            store::delete(&dir(d), &name)?;
            eprintln!("almanac: principal {name} deleted");
        }
    }
    Ok(())
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Reader => "reader",
        Role::User => "user",
        Role::Admin => "admin",
    }
}
