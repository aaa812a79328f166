//! Bigtable write requests as the gRPC server receives them, through the Data API's
//! own handlers (`almanac_server::DataService`): mutations converted from the wire,
//! validated against the table's schema and every limit (row key, qualifier, value
//! and row sizes, timestamps and granularity, aggregate inputs: HLL sketches from the
//! client are decoded), and applied to the fixture's table `t` by the committer.
//!
//! The first byte picks the message, the rest is its protobuf encoding:
//! 0 `MutateRowRequest`, 1 `MutateRowsRequest`, 2 `CheckAndMutateRowRequest` (its
//! predicate filter converted, compiled and run), 3 `ReadModifyWriteRowRequest`.
//! A request without a table name writes the fixture's table `t`. The fixture's rows
//! are restored every `RESET_EVERY` inputs.
#![no_main]

use almanac_api::google::bigtable::v2::bigtable_server::Bigtable;
use almanac_api::google::bigtable::v2::{
    CheckAndMutateRowRequest, MutateRowRequest, MutateRowsRequest, ReadModifyWriteRowRequest,
};
use almanac_fuzz::{TABLE_NAME, fixture};
use almanac_server::auth::Caller;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tokio_stream::StreamExt;

/// A decoded request, given the fixture's table when it names none.
fn request<M: Message + Default>(
    bytes: &[u8],
    table: impl FnOnce(&mut M),
) -> Option<tonic::Request<M>> {
    let mut message = M::decode(bytes).ok()?;
    table(&mut message);
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(Caller::Anyone);
    Some(request)
}

fn default_table(name: &mut String, view: &str) {
    if name.is_empty() && view.is_empty() {
        *name = TABLE_NAME.into();
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    let f = fixture();
    if f.due_for_reset() {
        f.reset_bigtable();
    }
    let data = f.data();
    f.runtime.block_on(async {
        match kind % 4 {
            0 => {
                let Some(r) = request(bytes, |m: &mut MutateRowRequest| {
                    default_table(&mut m.table_name, &m.authorized_view_name)
                }) else {
                    return;
                };
                let _ = data.mutate_row(r).await;
            }
            1 => {
                let Some(r) = request(bytes, |m: &mut MutateRowsRequest| {
                    default_table(&mut m.table_name, &m.authorized_view_name)
                }) else {
                    return;
                };
                if let Ok(response) = data.mutate_rows(r).await {
                    let mut stream = response.into_inner();
                    while stream.next().await.is_some() {}
                }
            }
            2 => {
                let Some(r) = request(bytes, |m: &mut CheckAndMutateRowRequest| {
                    default_table(&mut m.table_name, &m.authorized_view_name)
                }) else {
                    return;
                };
                let _ = data.check_and_mutate_row(r).await;
            }
            _ => {
                let Some(r) = request(bytes, |m: &mut ReadModifyWriteRowRequest| {
                    default_table(&mut m.table_name, &m.authorized_view_name)
                }) else {
                    return;
                };
                let _ = data.read_modify_write_row(r).await;
            }
        }
    });
});
