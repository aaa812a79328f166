//! The `cbt`-like commands: `ls`, `createtable`, `deletetable`, `createfamily`,
//! `deletefamily`, `setgcpolicy`, `read`, `lookup`, `set`, `deleterow`, `count`,
//! modelled on Google's `cbt` tool and talking gRPC to a running server.
//!
//! One command, e.g. `almanac read t prefix=user count=10`, step by step:
//! 1. clap picks the subcommand and collects its positional words; the `key=value`
//!    words (`prefix=user`, `count=10`) are parsed here, with cbt's names.
//! 2. [`Conn`] resolves the server address (`--addr`, else `$BIGTABLE_EMULATOR_HOST`,
//!    else `127.0.0.1:8086`) and the instance name `projects/P/instances/I`, and
//!    opens one tonic channel for the data and table-admin clients.
//! 3. The request goes out: admin RPCs for schema commands, `ReadRows` (row range +
//!    a filter chain) for `read`/`lookup`/`count`, `MutateRow` for `set`/`deleterow`.
//! 4. `ReadRows` chunks are reassembled into whole rows (`rows::RowAssembler`) and printed
//!    like cbt: a line of dashes, the row key, then `  fam:qual @ time` and the value
//!    indented; keys and values that are not printable text are quoted and escaped.
//! 5. A server error becomes `CODE (n): message` on stderr and a non-zero exit.
//!
//! GC policies use cbt's syntax (`gc`): `never`, `maxage=10d`, `maxversions=3`,
//! joined with `and`/`&&` or `or`/`||` (`and` binds tighter).

mod cells;
mod gc;
mod rows;
mod tables;

use anyhow::Context;

pub use almanac_client::grpc::{Conn, admin_client, data_client};
pub use almanac_client::status_error;

/// The cbt-like subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum CbtCommand {
    /// List tables, or with TABLE its column families and GC policies.
    Ls {
        #[command(flatten)]
        conn: Conn,
        /// Table whose families to list.
        table: Option<String>,
    },
    /// Create a table: `createtable T [families=cf1,cf2:maxversions=3] [splits=k1,k2]`.
    Createtable {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// `families=FAM[:POLICY],...` and `splits=KEY,...`.
        #[arg(value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Delete a table and all its data.
    Deletetable {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
    },
    /// Create a column family: `createfamily T FAM[:POLICY]`.
    Createfamily {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Family name, optionally `:` and a GC policy.
        family: String,
    },
    /// Delete a column family and its cells.
    Deletefamily {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Family name.
        family: String,
    },
    /// Set a family's GC policy: `(maxage=<d> | maxversions=<n> | never) [(and|or) ...]`.
    Setgcpolicy {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Family name.
        family: String,
        /// The policy, e.g. `maxversions=3 or maxage=1d`.
        #[arg(required = true, value_name = "POLICY")]
        policy: Vec<String>,
    },
    /// Read rows: `read T [start=R] [end=R] [prefix=P] [regex=RE] [count=N]
    /// [columns=fam:qual,...] [cells-per-column=N] [reversed=true]`.
    Read {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// `key=value` options as in cbt.
        #[arg(value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Read one row: `lookup T ROW [columns=fam:qual,...] [cells-per-column=N]`.
    Lookup {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Row key.
        row: String,
        /// `key=value` options as in cbt.
        #[arg(value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
    /// Write cells to one row: `set T ROW fam:qual=value[@ts] ...` (ts in µs; default: server time).
    Set {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Row key.
        row: String,
        /// Cells, `fam:qual=value[@ts]`.
        #[arg(required = true, value_name = "FAM:QUAL=VALUE[@TS]")]
        cells: Vec<String>,
    },
    /// Delete a whole row.
    Deleterow {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
        /// Row key.
        row: String,
    },
    /// Count the rows of a table.
    Count {
        #[command(flatten)]
        conn: Conn,
        /// Table id.
        table: String,
    },
}

/// Runs one cbt-like command on a small single-threaded runtime.
pub fn run(cmd: CbtCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run_async(cmd))
}

async fn run_async(cmd: CbtCommand) -> anyhow::Result<()> {
    use CbtCommand as C;
    match cmd {
        C::Ls { conn, table: None } => tables::handle_list_tables(&conn).await,
        C::Ls {
            conn,
            table: Some(t),
        } => tables::handle_list_families(&conn, &t).await,
        C::Createtable {
            conn,
            table,
            options,
        } => tables::handle_create_table(&conn, &table, &options).await,
        C::Deletetable { conn, table } => tables::handle_delete_table(&conn, &table).await,
        C::Createfamily {
            conn,
            table,
            family,
        } => tables::handle_create_family(&conn, &table, &family).await,
        C::Deletefamily {
            conn,
            table,
            family,
        } => tables::handle_delete_family(&conn, &table, &family).await,
        C::Setgcpolicy {
            conn,
            table,
            family,
            policy,
        } => tables::handle_set_gc_policy(&conn, &table, &family, &policy.join(" ")).await,
        C::Read {
            conn,
            table,
            options,
        } => cells::handle_read(&conn, &table, &options).await,
        C::Lookup {
            conn,
            table,
            row,
            options,
        } => cells::handle_lookup(&conn, &table, &row, &options).await,
        C::Set {
            conn,
            table,
            row,
            cells,
        } => cells::handle_set(&conn, &table, &row, &cells).await,
        C::Deleterow { conn, table, row } => cells::handle_delete_row(&conn, &table, &row).await,
        C::Count { conn, table } => cells::handle_count(&conn, &table).await,
    }
}

/// Splits `key=value` words, refusing keys not in `allowed` (cbt's option style).
pub(crate) fn key_values<'a>(
    words: &'a [String],
    allowed: &[&str],
) -> anyhow::Result<Vec<(&'a str, &'a str)>> {
    words
        .iter()
        .map(|w| {
            let (k, v) = w
                .split_once('=')
                .with_context(|| format!("expected key=value, got {w:?}"))?;
            anyhow::ensure!(
                allowed.contains(&k),
                "unknown option {k:?}; known: {}",
                allowed.join(", ")
            );
            Ok((k, v))
        })
        .collect()
}

pub(crate) fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> anyhow::Result<T> {
    value
        .parse()
        .map_err(|_| anyhow::anyhow!("{key}={value:?} is not a valid number"))
}
