//! # almanac
//!
//! The binary: `almanac serve` runs the server on an embedded engine; `almanac
//! bench engine` measures the engine and `almanac bench grpc` a running server; the
//! `cbt`-like commands (`ls`, `createtable`, `read`, `set`, ...) talk to a running server;
//! `almanac ts …` and `almanac sql` talk to its Timestream endpoint.
//! Flags are parsed here (clap); the work lives in the library crates, and `anyhow`
//! appears only in this binary.

/// The allocator: glibc's malloc spent over half of the server's CPU on the
/// Timestream ingest path (fastbin consolidation on every large allocation);
/// mimalloc's thread-local free lists do not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process. mimalloc asks for them on its
/// arenas, and memory it gave back (after its 1 s purge delay: memtables and request
/// buffers churn faster than that) came back as 2 MiB pages the kernel cleared whole
/// on the first touch: 9% of the server's CPU under TSBS ingest. Without them,
/// 2 writers, 5 runs each: +3% points/s, +6% points per server CPU-second. Best
/// effort: a kernel without the switch runs as before.
fn without_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

mod bench;
mod cbt;
mod http;
mod ingest;
mod loadgen;
mod patterns;
mod serve;
mod sql;
mod sqlbench;
mod ts;
mod tsbs;

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
    /// Compact a data directory offline (server stopped) and print its size.
    Compact(serve::CompactArgs),
    /// Measure the embedded engine (`bench engine`) or a running server (`bench grpc`,
    /// `bench tsbs`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Timestream-style databases, tables and record files (talks to `serve`'s
    /// Timestream endpoint).
    Ts {
        #[command(flatten)]
        conn: ts::TsConn,
        #[command(subcommand)]
        command: ts::TsCommand,
    },
    /// SQL through the Timestream Query API: `-e 'QUERY'`, or statements ending in
    /// ';' from stdin.
    Sql(sql::SqlArgs),
    #[command(flatten)]
    Cbt(cbt::CbtCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The embedded engine's speed and size.
    Engine(bench::BenchArgs),
    /// Load over gRPC against a running server.
    Grpc(loadgen::GrpcArgs),
    /// The seeds' four time-series patterns compared on weather balloons.
    Patterns(patterns::PatternArgs),
    /// The TSBS cpu-only write load over HTTP: Almanac's Timestream API or InfluxDB.
    Tsbs(tsbs::TsbsArgs),
    /// The WriteRecords path in process on TSBS bodies, each stage timed.
    Ingest(ingest::IngestArgs),
    /// The TSBS devops queries through SQL on an embedded TSBS cpu data set.
    Sql(sqlbench::SqlBenchArgs),
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
        Command::Ts { conn, command } => ts::run(&conn, command),
        Command::Bench(BenchCommand::Engine(args)) => bench::run(args),
        Command::Bench(BenchCommand::Patterns(args)) => patterns::run(args),
        Command::Bench(BenchCommand::Grpc(args)) => loadgen::run(args),
        Command::Bench(BenchCommand::Tsbs(args)) => tsbs::run(args),
        Command::Bench(BenchCommand::Ingest(args)) => ingest::run(args),
        Command::Bench(BenchCommand::Sql(args)) => sqlbench::run(args),
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
