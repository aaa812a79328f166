//! `almanac-bench`: Almanac's benchmarks. Flags are parsed here; each benchmark lives
//! in its module of the `almanac_bench` library. See `docs/benchmarks.md`.

/// The allocator the server uses (see the `almanac` binary), so in-process benchmarks
/// measure the same code the server runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use almanac_bench::{engine, grpc, ingest, keyvis, patterns, sigv4, sql, tsbs, unload};
use clap::{Parser, Subcommand};

/// Almanac's benchmarks: each prints what it did and what it measured.
#[derive(Debug, Parser)]
#[command(name = "almanac-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The embedded engine's speed and size.
    Engine(engine::BenchArgs),
    /// Load over gRPC against a running server.
    Grpc(grpc::GrpcArgs),
    /// The four time-series patterns of Google's "Schema design for time series data"
    /// compared on its weather balloons.
    Patterns(patterns::PatternArgs),
    /// The TSBS cpu-only write load over HTTP: Almanac's Timestream API or InfluxDB's
    /// line protocol (InfluxDB, VictoriaMetrics).
    Tsbs(tsbs::TsbsArgs),
    /// The WriteRecords path in process on TSBS bodies, each stage timed.
    Ingest(ingest::IngestArgs),
    /// The TSBS devops queries through SQL on an embedded TSBS cpu data set.
    Sql(sql::SqlBenchArgs),
    /// What Key Visualizer's access counters cost per write and read, and keep.
    Keyvis(keyvis::KeyvisArgs),
    /// What verifying a SigV4 signature costs per WriteRecords request.
    Sigv4(sigv4::SigV4Args),
    /// Write a TSBS-shaped table as CSV and as UNLOAD's CSV and Parquet directories
    /// (the input of scripts/bench-import).
    UnloadFiles(unload::UnloadArgs),
}

/// Transparent huge pages off, as in the `almanac` binary (its `without_huge_pages`
/// says why), so in-process benchmarks run as the server does.
fn without_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> anyhow::Result<()> {
    without_huge_pages();
    match Cli::parse().command {
        Command::Engine(args) => engine::run(args),
        Command::Grpc(args) => grpc::run(args),
        Command::Patterns(args) => patterns::run(args),
        Command::Tsbs(args) => tsbs::run(args),
        Command::Ingest(args) => ingest::run(args),
        Command::Sql(args) => sql::run(args),
        Command::UnloadFiles(args) => unload::run(args),
        Command::Keyvis(args) => keyvis::run(args),
        Command::Sigv4(args) => sigv4::run(args),
    }
}
