//! When a call to the remote Bigtable is tried again, how long to wait, and what its
//! final status means to the layers above (the engine's error classes).

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use almanac_engine::Error;
use tonic::{Code, Status};

/// Tries of one call (the first and the retries), as Google's clients default to for
/// data calls that fail with a retryable status.
pub const MAX_ATTEMPTS: u32 = 8;
/// The first retry waits up to this long.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(10);
/// No retry waits longer than this; each doubles the previous wait until it.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How long one unary call may take before it is cancelled and, if tries remain,
/// tried again; a ReadRows stream may go this long between two responses.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether a status may be retried: the service was unreachable, timed out or aborted
/// the call, as Google's clients retry (an idempotent request only).
pub fn retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Aborted
    ) || (status.code() == Code::Internal
        && ["RST_STREAM", "Received Rst Stream", "stream terminated"]
            .iter()
            .any(|m| status.message().contains(m)))
}

/// Waits between tries: exponential with full jitter, so front-ends that lost the same
/// server do not come back in step.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
    attempt: u32,
    seed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// Before the first try.
    pub fn new() -> Self {
        Self {
            next: INITIAL_BACKOFF,
            attempt: 1,
            seed: RandomState::new().hash_one(0u8),
        }
    }

    /// After a failed try: the wait before the next, or `None` once the tries are used.
    pub fn next_wait(&mut self) -> Option<Duration> {
        if self.attempt >= MAX_ATTEMPTS {
            return None;
        }
        self.attempt += 1;
        // SplitMix64 step: jitter needs spread, not secrecy.
        self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let cap = self.next.as_micros() as u64;
        let wait = Duration::from_micros(z % cap.max(1) + 1);
        self.next = (self.next * 2).min(MAX_BACKOFF);
        Some(wait)
    }

    /// The tries made so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

/// What a failed call was doing, for the error the caller sees.
#[derive(Debug, Clone)]
pub struct Call {
    /// The RPC ("ReadRows", "CreateTable").
    pub rpc: &'static str,
    /// The table it named, in full.
    pub table: String,
}

/// The engine error for a status the remote Bigtable returned (after any retries).
pub fn store_error(status: &Status, call: &Call) -> Error {
    let msg = format!(
        "remote Bigtable: {} on {}: {:?}: {}",
        call.rpc,
        call.table,
        status.code(),
        status.message()
    );
    match status.code() {
        Code::NotFound => Error::NotFound {
            kind: "table",
            name: call.table.to_string(),
        },
        Code::AlreadyExists => Error::AlreadyExists {
            kind: "table",
            name: call.table.to_string(),
        },
        Code::InvalidArgument | Code::OutOfRange => Error::Invalid(msg),
        Code::ResourceExhausted => Error::Exhausted(msg),
        Code::FailedPrecondition => Error::Precondition(msg),
        Code::DataLoss => Error::Corrupt(msg),
        // Unreachable, timed out, refused credentials or failed inside: the caller's
        // request may succeed later, so it is an UNAVAILABLE to clients of the layer.
        _ => Error::Storage(msg),
    }
}

/// The error for a call that got no answer within [`ATTEMPT_TIMEOUT`].
pub fn timed_out() -> Status {
    Status::deadline_exceeded(format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap_and_stops() {
        let mut b = Backoff::new();
        let mut waits = Vec::new();
        while let Some(w) = b.next_wait() {
            waits.push(w);
        }
        assert_eq!(waits.len() as u32, MAX_ATTEMPTS - 1);
        assert!(waits.iter().all(|w| *w <= MAX_BACKOFF && !w.is_zero()));
        assert!(waits[0] <= INITIAL_BACKOFF);
    }

    #[test]
    fn retryable_codes() {
        assert!(retryable(&Status::unavailable("x")));
        assert!(retryable(&Status::internal("Received Rst Stream")));
        assert!(!retryable(&Status::internal("bug")));
        assert!(!retryable(&Status::invalid_argument("x")));
        let call = Call {
            rpc: "GetTable",
            table: "projects/p/instances/i/tables/t".to_string(),
        };
        assert!(matches!(
            store_error(&Status::not_found("gone"), &call),
            Error::NotFound { kind: "table", .. }
        ));
        assert!(matches!(
            store_error(&Status::unavailable("down"), &call),
            Error::Storage(_)
        ));
    }
}
