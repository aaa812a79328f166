//! # almanac-remote
//!
//! A remote Bigtable as the time-series layer's [`WideColumnStore`]: Cloud Bigtable
//! itself over TLS with Google credentials ([`google`]), or its emulator, another Almanac
//! server or any service speaking the Bigtable Data and Table Admin gRPC APIs over
//! plain-text HTTP/2, as clients reach an emulator through `BIGTABLE_EMULATOR_HOST`.
//!
//! ## A call, step by step
//! 1. [`RemoteStore::connect_to`] starts the store's own small runtime, gets a first
//!    Google token for a TLS [`Target`], and opens an HTTP/2 channel to each endpoint;
//!    tables are named under one instance.
//! 2. Each trait call translates the engine's types to the protos (`wire.rs`), spawns
//!    the call on the store's runtime and waits for its answer on a plain channel, so the
//!    synchronous layers above may call from any thread.
//! 3. Unary admin calls and MutateRows entries are tried again after UNAVAILABLE,
//!    DEADLINE_EXCEEDED or ABORTED with jittered exponential backoff (`retry.rs`), when
//!    the request is idempotent; MutateRows answers one result per entry (`mutate.rs`).
//! 4. ReadRows responses are merged into rows by the chunk rules of the Data API
//!    (`merge.rs`: resets, split values, key order) and handed over as they complete; a
//!    failed stream resumes after the last row delivered (`read.rs`).
//! 5. A final status becomes the engine's error of the same class (`retry.rs`), so the
//!    server maps it to the wire as it does the embedded engine's.
//!
//! A front-end's own Bigtable endpoint passes its calls to the remote over the same
//! connections and credentials ([`forward`]).
//!
//! ## Invariants
//! - A retried MutateRows never sends a server-timestamped or aggregate mutation twice.
//! - A resumed read never sends an empty row set (which would read the whole table).
//! - Writes are durable when the remote Bigtable acknowledges them: `sync` has nothing
//!   to wait for.

pub mod forward;
pub mod google;
mod merge;
mod mutate;
mod read;
pub mod retry;
mod store;
pub mod wire;

pub use almanac_timeseries::WideColumnStore;
pub use store::{CLOUD_ADMIN_ENDPOINT, CLOUD_DATA_ENDPOINT, CONNECT_TIMEOUT, RemoteStore, Target};
