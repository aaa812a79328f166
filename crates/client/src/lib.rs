//! # almanac-client
//!
//! What the `almanac` and `almanac-bench` binaries use to talk to a running server.
//!
//! ## A call, step by step
//! 1. A command's flags name the server ([`grpc::Conn`]: `--addr`, else
//!    `$BIGTABLE_EMULATOR_HOST`, else `127.0.0.1:8086`; or an [`http::Endpoint`] for the
//!    Timestream endpoint).
//! 2. [`grpc::Conn::channel`] opens one HTTP/2 channel; [`grpc::data_client`] and
//!    [`grpc::admin_client`] wrap it with the message limit a 256 MiB row needs
//!    ([`almanac_engine::limits::MAX_MESSAGE_BYTES`]).
//!    [`http::Client::post`] sends an AWS JSON request over one keep-alive connection,
//!    plain or TLS (`https://`).
//! 3. Failures come back as one [`Error`]: an unusable address, a connection refused, a
//!    server status for an RPC (code, number and message, as the user should see them),
//!    or a malformed HTTP exchange.

pub mod grpc;
pub mod http;

/// Why a call to the server failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server address could not be used.
    #[error("bad server address {addr:?}: {reason}")]
    Address {
        /// The address as given.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The gRPC channel could not be opened.
    #[error("connecting to {addr}")]
    Connect {
        /// The address dialled.
        addr: String,
        /// The transport's error.
        source: tonic::transport::Error,
    },
    /// The server answered an RPC with an error status.
    #[error("{rpc}: {:?} ({}): {}", status.code(), status.code() as i32, status.message())]
    Rpc {
        /// The RPC's name.
        rpc: &'static str,
        /// The server's status.
        status: tonic::Status,
    },
    /// Reading or writing an HTTP connection failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The HTTP server's answer broke the protocol.
    #[error("{0}")]
    Protocol(String),
    /// An HTTP request, or a step of one, failed; `source` says how.
    #[error("{request}")]
    Request {
        /// Method and URL, or the step.
        request: String,
        /// The failure.
        source: Box<Error>,
    },
}

/// `e` and its causes, joined by `: ` (what anyhow's `{:#}` prints).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// A server error status for `rpc`, as the user sees it.
pub fn status_error(rpc: &'static str, status: tonic::Status) -> Error {
    Error::Rpc { rpc, status }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_follow_the_message() {
        let e = Error::Io {
            context: "reading the body".into(),
            source: std::io::Error::other("connection reset"),
        };
        assert_eq!(with_causes(&e), "reading the body: connection reset");
    }
}
