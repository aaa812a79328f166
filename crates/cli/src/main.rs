//! # almanac
//!
//! The binary: `almanac serve` runs the server on an embedded engine
//! (assembled by [`almanac_server::Node`]), `almanac compact` compacts a stopped
//! server's data directory; the `cbt`-like commands (`ls`, `createtable`, `read`,
//! `set`, ...) talk to a running server;
//! `almanac ts …` and `almanac sql` talk to its Timestream endpoint.
//! Flags are parsed here (clap); the work lives in the library crates, and `anyhow`
//! appears only in this binary.

/// The allocator: mimalloc's thread-local free lists, where glibc's malloc spent much
/// of the server's CPU on the Timestream ingest path (ARCHITECTURE.md, Decisions).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages off for this process: memory mimalloc gave back returned
/// as 2 MiB pages the kernel cleared whole on first touch (ARCHITECTURE.md,
/// Decisions). Best effort: a kernel without the switch runs as before.
fn without_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

mod auth;
mod backup;
mod cbt;
mod lint;
mod serve;
mod sql;
mod ts;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Almanac: a time-series-native wide-column database that speaks the Cloud Bigtable API.
#[derive(Debug, Parser)]
#[command(name = "almanac", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (Bigtable gRPC) on an embedded data directory.
    Serve(serve::ServeArgs),
    /// Principals: who may call the server, with which role (authentication is on
    /// once one exists).
    Auth {
        #[command(subcommand)]
        command: auth::AuthCommand,
    },
    /// Compact a data directory offline (server stopped) and print its size.
    Compact(serve::CompactArgs),
    /// Back up a running server, whole and at one instant, into a new directory
    /// (through its console).
    Backup(backup::BackupArgs),
    /// Make a new data directory from a directory written by `almanac backup`.
    Restore(backup::RestoreArgs),
    /// Timestream-style databases, tables and record files (talks to `serve`'s
    /// Timestream endpoint).
    Ts {
        #[command(flatten)]
        conn: ts::TsConn,
        #[command(subcommand)]
        command: ts::TsCommand,
    },
    /// Check a table against the schema guides (Bigtable's best practices, time
    /// series, Timestream's data modeling): talks to `serve`'s console.
    Lint(lint::LintArgs),
    /// SQL through the Timestream Query API: `-e 'QUERY'`, or statements ending in
    /// ';' from stdin.
    Sql(sql::SqlArgs),
    #[command(flatten)]
    Cbt(cbt::CbtCommand),
}

/// The default data directory: `$XDG_DATA_HOME/almanac`, else `./almanac-data`.
pub fn default_data_dir() -> PathBuf {
    match std::env::var_os("XDG_DATA_HOME") {
        Some(x) if !x.is_empty() => PathBuf::from(x).join("almanac"),
        _ => PathBuf::from("almanac-data"),
    }
}

fn main() -> anyhow::Result<()> {
    without_huge_pages();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Compact(args) => serve::compact(args),
        Command::Backup(args) => backup::backup(args),
        Command::Restore(args) => backup::restore(args),
        Command::Auth { command } => auth::run(command),
        Command::Lint(args) => lint::run(args),
        Command::Ts { conn, command } => ts::run(&conn, command),
        Command::Sql(args) => match sql::run(args) {
            // A refused statement has printed its error already.
            Ok(true) => Ok(()),
            Ok(false) => std::process::exit(1),
            Err(e) => {
                eprintln!("almanac: {e:#}");
                std::process::exit(1);
            }
        },
        Command::Cbt(cmd) => {
            // Errors here are the user's answer (often a gRPC status), not a crash: no backtrace.
            if let Err(e) = cbt::run(cmd) {
                eprintln!("almanac: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
