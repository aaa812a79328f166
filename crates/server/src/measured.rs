//! Counts every gRPC call in the metrics: its method, its status code, and its
//! latency to the end of the response stream.
//!
//! The status is read where gRPC puts it: in the response headers of a
//! trailers-only answer (an error before any message), else in the trailers that
//! end the stream. A stream dropped before its trailers (the client went away)
//! counts as CANCELLED. Calls answered UNIMPLEMENTED share one method label,
//! `unimplemented`.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use almanac_console::Metrics;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

/// The method label of calls that answered UNIMPLEMENTED.
const UNSERVED_METHOD: &str = "unimplemented";

/// Wraps a gRPC service.
#[derive(Clone)]
pub struct Measured<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S> Measured<S> {
    /// Wraps `inner`, recording into `metrics`.
    pub fn new(inner: S, metrics: &Arc<Metrics>) -> Self {
        Self {
            inner,
            metrics: Arc::clone(metrics),
        }
    }
}

impl<S: NamedService> NamedService for Measured<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Measured<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let method = req.uri().path().trim_start_matches('/').to_owned();
        let metrics = Arc::clone(&self.metrics);
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            let status = resp
                .headers()
                .get("grpc-status")
                .map(|v| v.as_bytes().to_vec());
            Ok(resp.map(|body| {
                Body::new(MeasuredBody {
                    inner: body,
                    method,
                    metrics,
                    started,
                    status,
                })
            }))
        })
    }
}

/// A response body that records its call when dropped.
struct MeasuredBody {
    inner: Body,
    method: String,
    metrics: Arc<Metrics>,
    started: Instant,
    /// The `grpc-status` value, once seen.
    status: Option<Vec<u8>>,
}

impl http_body::Body for MeasuredBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(code) = frame.trailers_ref().and_then(|t| t.get("grpc-status"))
        {
            self.status = Some(code.as_bytes().to_vec());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for MeasuredBody {
    fn drop(&mut self) {
        let code = match self.status.as_deref() {
            Some(b"0") => None,
            Some(code) => Some(code_name(code)),
            None => Some("CANCELLED"),
        };
        // Any path reaches a service; only methods it serves get a label of their own,
        // so made-up names cannot grow the metrics.
        let method = if code == Some("UNIMPLEMENTED") {
            UNSERVED_METHOD
        } else {
            &self.method
        };
        self.metrics.grpc(method, code, self.started.elapsed());
    }
}

/// The name of a `grpc-status` value.
fn code_name(code: &[u8]) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    std::str::from_utf8(code)
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("UNKNOWN")
}
