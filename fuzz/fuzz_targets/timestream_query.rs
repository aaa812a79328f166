//! Timestream `Query` and `CancelQuery` bodies as far as they go without running SQL
//! (`almanac_server::timestream::answer_from_cache`): the JSON members and their checks
//! (`QueryString`, `MaxRows`, `ClientToken`), then the page at `NextToken`, or the
//! cancellation of `QueryId`, from a results cache holding two paged queries.
//!
//! An input is up to four bodies separated by NUL bytes (never valid inside JSON),
//! answered in order by one cache, so pagination, retries, superseded tokens and
//! cancellation meet; the first query was run with authentication off, the second by
//! principal `alice`, and the bodies are asked in turn by each of them (a query's
//! pages are its owner's only). Each input gets a fresh cache with fixed ids, and in a body
//! `@t1@` and `@t2@` stand for the live second-page tokens of the two queries, `@q1@`
//! and `@q2@` for their ids (a fuzzer cannot guess a token's 64-bit nonce; it can keep
//! a placeholder).
#![no_main]

use std::time::Instant;

use almanac_server::timestream::{Header, Limits, ResultCache, Rows, answer_from_cache};
use libfuzzer_sys::fuzz_target;

/// The SQL text each cached query was "run" with (a token only pages its own query).
const QUERIES: [&str; 2] = ["SELECT 1", "SELECT * FROM \"tsdb\".\"rows\""];
/// Who ran each query; the bodies of an input are asked in turn by each of them.
const OWNERS: [&str; 2] = ["", "alice"];
/// Seed of the cache's ids and nonces: fixed, so a crash reproduces.
const SEED: u64 = 0x00F0_22ED;

fn rows(n: usize, width: usize) -> Rows {
    let mut rows = Rows::default();
    for i in 0..n {
        rows.push(&format!(
            "{{\"Data\":[{{\"ScalarValue\":\"{i}{}\"}}]}}",
            "x".repeat(width)
        ));
    }
    rows
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let limits = Limits {
        max_queries: 4,
        max_bytes: 1 << 20,
        ..Limits::default()
    };
    let mut cache = ResultCache::new(limits, SEED);
    let mut tokens = Vec::new();
    for (i, sql) in QUERIES.into_iter().enumerate() {
        let header = Header {
            query_id: cache.new_query_id(),
            owner: OWNERS[i].into(),
            columns: "[{\"Name\":\"c\",\"Type\":{\"ScalarType\":\"VARCHAR\"}}]".into(),
            extension: "\"Almanac\":{}".into(),
        };
        let Ok(token) = cache.insert(header, sql, rows(40 + i * 30, i * 50), 3, now) else {
            return;
        };
        tokens.push(token);
    }
    for (n, body) in data.split(|&b| b == 0).take(4).enumerate() {
        let mut body = body.to_vec();
        for (i, token) in tokens.iter().enumerate() {
            let id = token.split('-').next().unwrap_or_default();
            body = replace(&body, format!("@t{}@", i + 1).as_bytes(), token.as_bytes());
            body = replace(&body, format!("@q{}@", i + 1).as_bytes(), id.as_bytes());
        }
        let _ = answer_from_cache(&mut cache, &body, OWNERS[n % 2], now);
    }
});

/// `haystack` with every `needle` replaced by `with`.
fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}
