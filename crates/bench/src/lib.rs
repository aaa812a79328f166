//! # almanac-bench
//!
//! Every benchmark, load generator and data generator of Almanac, run through the
//! `almanac-bench` binary (`cargo run --release -p almanac-bench -- <benchmark>`); the
//! method and the current results are in `docs/benchmarks.md`.
//!
//! | benchmark | module | what it measures |
//! |---|---|---|
//! | `engine` | [`engine`] | the embedded engine in process: bulk load, durable writes, point reads, scans, bytes on disk |
//! | `grpc` | [`grpc`] | a running server over loopback gRPC, with the server's CPU per operation |
//! | `patterns` | [`patterns`] | the four time-series patterns of Google's "Schema design for time series data" on its weather balloons |
//! | `tsbs` | [`tsbs`] | the TSBS cpu-only load over HTTP: Almanac's Timestream API, InfluxDB or VictoriaMetrics |
//! | `ingest` | [`ingest`] | the WriteRecords path in process, each stage timed |
//! | `keyvis` | [`keyvis`] | Key Visualizer's access counters: CPU per write and read on and off, what they keep |
//! | `sql` | [`sql`] | the TSBS devops queries ([`devops`]) through SQL on an embedded data set |
//!
//! ## One benchmark, step by step
//! 1. `main.rs` parses the flags (clap) and calls the module's `run`.
//! 2. The module opens what it measures: an embedded store in a scratch directory
//!    ([`store::open_embedded`]) or a connection to a running server
//!    (`almanac_client`).
//! 3. It generates its data (TSBS: [`tsbs::data`]), runs timed phases and reads CPU time
//!    from `/proc` ([`measure`]).
//! 4. It prints one line per phase: rate, latency percentiles, CPU per operation.
//!
//! This crate is a tool, not an API: its functions return `anyhow::Result` like a
//! binary's, and the library exists so its tests can drive the same code.

pub mod devops;
pub mod engine;
pub mod grpc;
pub mod ingest;
pub mod keyvis;
pub mod measure;
pub mod patterns;
pub mod sigv4;
pub mod sql;
pub mod store;
pub mod tsbs;
pub mod unload;
