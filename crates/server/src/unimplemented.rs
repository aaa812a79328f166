//! Names the RPC in every `UNIMPLEMENTED` answer.
//!
//! The generated services answer RPCs Almanac does not implement with the generic
//! "Not yet implemented". This wrapper rewrites that status message to name the
//! method (`/google.bigtable.admin.v2.BigtableTableAdmin/CreateBackup is not
//! implemented by Almanac`), so a user knows exactly what is missing. It never
//! turns an error into a success.

use std::convert::Infallible;

use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

/// Wraps a generated gRPC server.
#[derive(Debug, Clone)]
pub struct NameUnimplemented<S> {
    inner: S,
}

impl<S> NameUnimplemented<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: NamedService> NamedService for NameUnimplemented<S> {
    const NAME: &'static str = S::NAME;
}

const UNIMPLEMENTED: &str = "12";
const GENERIC_MESSAGE: &str = "Not yet implemented";

impl<S> Service<http::Request<Body>> for NameUnimplemented<S>
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
        let path = req.uri().path().to_owned();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            let h = resp.headers();
            let generic = h.get("grpc-status").is_some_and(|v| v == UNIMPLEMENTED)
                && h.get("grpc-message")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|m| {
                        m == GENERIC_MESSAGE || m == GENERIC_MESSAGE.replace(' ', "%20")
                    });
            if generic {
                let msg = format!("{path} is not implemented by Almanac");
                if let Ok(v) = http::HeaderValue::from_str(&msg) {
                    resp.headers_mut().insert("grpc-message", v);
                }
            }
            Ok(resp)
        })
    }
}
