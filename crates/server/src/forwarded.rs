//! Who may use a front-end's Bigtable endpoint when its calls are passed on to a remote
//! Bigtable ([`crate::serve_forwarded`]): the remote acts with the front-end's
//! credentials and the front-end does not read the calls' resource names, so with
//! principals defined only an administrator of everything may call; with none, anyone.

use std::convert::Infallible;

use almanac_auth::{Action, Resource};
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

use crate::auth::Caller;

/// The permission a forwarded call is checked for, as a refusal names it.
const FORWARDED_PERMISSION: &str = "bigtable.* through a front-end (passed to the remote Bigtable)";

/// Lets a call through only when its caller (set by [`crate::auth::Authenticated`])
/// may administer everything.
#[derive(Debug, Clone)]
pub struct AdminsOnly<S> {
    inner: S,
}

impl<S> AdminsOnly<S> {
    /// Guards `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: NamedService> NamedService for AdminsOnly<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for AdminsOnly<S>
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
        let allowed = match req.extensions().get::<Caller>() {
            Some(caller) => {
                caller.check(Action::Administer, FORWARDED_PERMISSION, &Resource::Server)
            }
            None => Err(tonic::Status::internal("the call was not authenticated")),
        };
        match allowed {
            Ok(()) => Box::pin(self.inner.call(req)),
            Err(status) => Box::pin(async move { Ok(status.into_http()) }),
        }
    }
}
