//! # almanac
//!
//! The binary: `almanac serve` runs the server on an embedded engine; `almanac
//! bench` measures the engine; the `cbt`-like commands talk to a running server.
//! Flags are parsed here (clap); the work lives in the library crates, and `anyhow`
//! appears only in this binary.

mod bench;
mod serve;

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
    /// Measure the embedded engine and print numbers.
    Bench(bench::BenchArgs),
}

/// The default data directory: `$XDG_DATA_HOME/almanac`, else `./almanac-data`.
pub fn default_data_dir() -> PathBuf {
    match std::env::var_os("XDG_DATA_HOME") {
        Some(x) if !x.is_empty() => PathBuf::from(x).join("almanac"),
        _ => PathBuf::from("almanac-data"),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
