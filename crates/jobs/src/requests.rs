//! What the query side's operations share: "now" in milliseconds, AWS JSON 1.0
//! timestamps, and the service model's bounds on `QueryString` and `ClientToken`
//! (Query, PrepareQuery and CreateScheduledQuery check them alike).

use almanac_engine::clock::Clock;
use serde_json::{Value as Json, json};

use crate::error::{Error, Result};

/// Largest `QueryString`, per the service model.
pub const MAX_QUERY_STRING_BYTES: usize = 256 * 1024;
/// `ClientToken` length bounds of the query side, per the service model.
pub const CLIENT_TOKEN_CHARS: std::ops::RangeInclusive<usize> = 32..=128;

/// Checks a `QueryString`'s length.
pub fn check_query_string(sql: &str) -> Result<()> {
    if sql.is_empty() || sql.len() > MAX_QUERY_STRING_BYTES {
        return Err(Error::invalid(format!(
            "QueryString is {} bytes; it must be 1 to {MAX_QUERY_STRING_BYTES}.",
            sql.len()
        )));
    }
    Ok(())
}

/// Checks a `ClientToken`'s length, when there is one.
pub fn check_client_token(token: Option<&str>) -> Result<()> {
    match token {
        Some(t) if !CLIENT_TOKEN_CHARS.contains(&t.chars().count()) => {
            Err(Error::invalid(format!(
                "ClientToken must be {} to {} characters.",
                CLIENT_TOKEN_CHARS.start(),
                CLIENT_TOKEN_CHARS.end()
            )))
        }
        _ => Ok(()),
    }
}

/// The clock's time in milliseconds since the epoch.
pub fn now_ms(clock: &dyn Clock) -> i64 {
    clock.now_us().div_euclid(1000)
}

/// A time in ms as AWS JSON 1.0 sends timestamps: seconds since the epoch.
pub fn time_json(ms: i64) -> Json {
    json!(ms as f64 / 1000.0)
}
