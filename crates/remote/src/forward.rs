//! The Bigtable APIs of a front-end (`serve --bigtable`), passed through to the remote
//! Bigtable: a call to the front-end's `--addr` goes to the remote instance unchanged,
//! over the store's connections and with the store's credentials, and its answer (a
//! stream included) comes back unchanged. So every front-end's Bigtable endpoint shows
//! the one shared instance, and no client data lands in a front-end's directory.
//!
//! The caller's own `authorization` header (an Almanac principal's token, which the
//! server has checked) is never passed on: the remote sees the front-end's Google token,
//! or nothing over a plain-text endpoint.

use std::convert::Infallible;
use std::marker::PhantomData;

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;
use tonic::transport::Channel;

use crate::google::Auth;

/// The connections and credentials a front-end forwards Bigtable calls over
/// ([`crate::RemoteStore::forwarder`]).
#[derive(Debug, Clone)]
pub struct Forwarder {
    pub(crate) data: Channel,
    pub(crate) admin: Channel,
    pub(crate) auth: Auth,
}

impl Forwarder {
    /// The Data API (`google.bigtable.v2.Bigtable`), to the remote's data endpoint.
    pub fn data(&self) -> Forward<DataApi> {
        Forward::new(self.data.clone(), self.auth.clone())
    }

    /// The Table Admin API, to the remote's admin endpoint.
    pub fn table_admin(&self) -> Forward<TableAdminApi> {
        Forward::new(self.admin.clone(), self.auth.clone())
    }

    /// The Instance Admin API, to the remote's admin endpoint.
    pub fn instance_admin(&self) -> Forward<InstanceAdminApi> {
        Forward::new(self.admin.clone(), self.auth.clone())
    }
}

/// The Data API's service name.
#[derive(Debug, Clone, Copy)]
pub struct DataApi;
/// The Table Admin API's service name.
#[derive(Debug, Clone, Copy)]
pub struct TableAdminApi;
/// The Instance Admin API's service name.
#[derive(Debug, Clone, Copy)]
pub struct InstanceAdminApi;

impl NamedService for Forward<DataApi> {
    const NAME: &'static str = "google.bigtable.v2.Bigtable";
}
impl NamedService for Forward<TableAdminApi> {
    const NAME: &'static str = "google.bigtable.admin.v2.BigtableTableAdmin";
}
impl NamedService for Forward<InstanceAdminApi> {
    const NAME: &'static str = "google.bigtable.admin.v2.BigtableInstanceAdmin";
}

/// One gRPC service whose every call is passed to the remote Bigtable.
#[derive(Debug, Clone)]
pub struct Forward<N> {
    channel: Channel,
    auth: Auth,
    name: PhantomData<N>,
}

impl<N> Forward<N> {
    fn new(channel: Channel, auth: Auth) -> Self {
        Self {
            channel,
            auth,
            name: PhantomData,
        }
    }
}

impl<N> Service<http::Request<Body>> for Forward<N> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let headers = req.headers_mut();
        headers.remove(http::header::AUTHORIZATION);
        if let Some(token) = self.auth.header() {
            headers.insert(http::header::AUTHORIZATION, token);
        }
        let mut channel = self.channel.clone();
        Box::pin(async move {
            let answer = match std::future::poll_fn(|cx| channel.poll_ready(cx)).await {
                Ok(()) => channel.call(req).await,
                Err(e) => Err(e),
            };
            Ok(answer.unwrap_or_else(|e| {
                Status::unavailable(format!("the remote Bigtable cannot be reached: {e}"))
                    .into_http()
            }))
        })
    }
}
