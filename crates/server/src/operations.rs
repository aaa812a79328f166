//! Long-running operations as the admin APIs return them. Almanac finishes every
//! admin change before it answers, so each operation comes back `done`, with its
//! metadata and its result packed as `Any` (clients unpack them by type URL and do
//! not poll).

use std::sync::atomic::{AtomicU64, Ordering};

use almanac_api::google::longrunning::Operation;
use almanac_api::google::longrunning::operation::Result as OpResult;
use prost_types::Any;

/// Numbers operation names within this process.
static NEXT_OPERATION: AtomicU64 = AtomicU64::new(1);

/// A finished operation on `resource`: `metadata` and `response` packed by type.
pub fn done<M: prost::Name, R: prost::Name>(
    resource: &str,
    metadata: &M,
    response: &R,
) -> Operation {
    let n = NEXT_OPERATION.fetch_add(1, Ordering::Relaxed);
    Operation {
        name: format!("operations/{resource}/operations/{n}"),
        metadata: Any::from_msg(metadata).ok(),
        done: true,
        result: Any::from_msg(response).ok().map(OpResult::Response),
    }
}
