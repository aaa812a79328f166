//! The tokens gRPC clients hand back, through the Data API's own handlers
//! (`almanac_server::DataService`) over the fixture:
//! - `ExecuteQuery`'s `prepared_query` and `resume_token` (envelopes: magic, version,
//!   CRC-32C, payload; a prepared query's payload is a protobuf of the instance, the
//!   SQL and the parameter types), its `params` bound to those types, the SQL run;
//! - `PrepareQuery` (the text planned with typed NULL parameters, the token sealed);
//! - `ReadChangeStream`'s start: continuation tokens, start and end times, heartbeat
//!   interval, partition, against the change stream of the fixture's table `t`.
//!
//! The first byte picks the message, the rest is its protobuf encoding:
//! 0. an `ExecuteQueryRequest` as sent (the deprecated `query` form included);
//! 1. an `ExecuteQueryRequest` whose `prepared_query` and `resume_token` are payloads,
//!    put in envelopes with a correct CRC-32C here, so the fuzzer reaches the payload
//!    decoders past the checksum;
//! 2. a client's two calls: `PrepareQuery` of the request's `query` with the types of
//!    its `params`, then, when that succeeds, `ExecuteQuery` of the token it returned
//!    with the request's `params` and `resume_token` (put in an envelope here);
//! 3. a `ReadChangeStreamRequest`.
//!
//! An empty instance or table name is the fixture's.
#![no_main]

use std::time::Duration;

use almanac_api::google::bigtable::v2::bigtable_server::Bigtable;
use almanac_api::google::bigtable::v2::{
    ExecuteQueryRequest, PrepareQueryRequest, ReadChangeStreamRequest,
};
use almanac_fuzz::{INSTANCE, TABLE_NAME, envelope, fixture};
use almanac_server::auth::Caller;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tokio_stream::{Stream, StreamExt};

/// Responses read from one stream at most.
const MAX_RESPONSES: usize = 16;
/// How long to wait for a change stream's next response: its first ones come at once;
/// after them it only polls for new changes.
const CHANGE_WAIT: Duration = Duration::from_millis(2);

fn authenticated<M>(message: M) -> tonic::Request<M> {
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(Caller::Anyone);
    request
}

/// Reads up to `MAX_RESPONSES` responses, each within `wait`.
async fn drain<T, S: Stream<Item = T> + Unpin>(mut stream: S, wait: Duration) {
    for _ in 0..MAX_RESPONSES {
        match tokio::time::timeout(wait, stream.next()).await {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let data = f.data();
    f.runtime.block_on(async {
        match kind % 4 {
            kind @ (0 | 1) => {
                let Ok(mut req) = ExecuteQueryRequest::decode(bytes) else {
                    return;
                };
                if req.instance_name.is_empty() {
                    req.instance_name = INSTANCE.into();
                }
                if kind == 1 {
                    req.prepared_query = envelope(b"AQP", &req.prepared_query).into();
                    if !req.resume_token.is_empty() {
                        req.resume_token = envelope(b"AQR", &req.resume_token).into();
                    }
                }
                if let Ok(response) = data.execute_query(authenticated(req)).await {
                    drain(response.into_inner(), Duration::from_secs(5)).await;
                }
            }
            2 => {
                let Ok(mut req) = ExecuteQueryRequest::decode(bytes) else {
                    return;
                };
                if req.instance_name.is_empty() {
                    req.instance_name = INSTANCE.into();
                }
                #[expect(deprecated, reason = "the request carries the text to prepare")]
                let query = std::mem::take(&mut req.query);
                let prepare = PrepareQueryRequest {
                    instance_name: req.instance_name.clone(),
                    query,
                    param_types: req
                        .params
                        .iter()
                        .filter_map(|(name, v)| Some((name.clone(), v.r#type.clone()?)))
                        .collect(),
                    ..PrepareQueryRequest::default()
                };
                let Ok(prepared) = data.prepare_query(authenticated(prepare)).await else {
                    return;
                };
                req.prepared_query = prepared.into_inner().prepared_query;
                if !req.resume_token.is_empty() {
                    req.resume_token = envelope(b"AQR", &req.resume_token).into();
                }
                if let Ok(response) = data.execute_query(authenticated(req)).await {
                    drain(response.into_inner(), Duration::from_secs(5)).await;
                }
            }
            _ => {
                let Ok(mut req) = ReadChangeStreamRequest::decode(bytes) else {
                    return;
                };
                if req.table_name.is_empty() {
                    req.table_name = TABLE_NAME.into();
                }
                if let Ok(response) = data.read_change_stream(authenticated(req)).await {
                    drain(response.into_inner(), CHANGE_WAIT).await;
                }
            }
        }
    });
});
