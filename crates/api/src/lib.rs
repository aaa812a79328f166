//! # almanac-api
//!
//! Rust types and tonic services generated at build time from the vendored
//! googleapis protos under `proto/` (Bigtable Data API v2, Table Admin and Instance
//! Admin v2, with their imports). `build.rs` compiles them with `protox`, so no
//! `protoc` is needed. The module tree mirrors the proto packages:
//! `almanac_api::google::bigtable::v2`, `almanac_api::google::bigtable::admin::v2`.
#![allow(
    missing_docs,
    clippy::all,
    rustdoc::invalid_html_tags,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links
)]

include!(concat!(env!("OUT_DIR"), "/_includes.rs"));
