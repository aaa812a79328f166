//! A Bigtable `ReadRowsRequest` as the gRPC server receives it: protobuf bytes
//! decoded with the generated types (`almanac_api`), then the Data API's own handler
//! (`almanac_server::DataService::read_rows`): table name, row set and RowFilter
//! converted (size and depth limits), the filter compiled (regexes, ranges, labels,
//! sinks) and run by the engine's read path over the fixture's rows, and the response
//! stream drained. A request without a table name reads the fixture's table `t`.
#![no_main]

use almanac_api::google::bigtable::v2::ReadRowsRequest;
use almanac_api::google::bigtable::v2::bigtable_server::Bigtable;
use almanac_fuzz::{TABLE_NAME, fixture};
use almanac_server::auth::Caller;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tokio_stream::StreamExt;

/// Responses read from one stream at most (the fixture's rows fit in far fewer).
const MAX_RESPONSES: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Ok(mut req) = ReadRowsRequest::decode(data) else {
        return;
    };
    if req.table_name.is_empty() && req.authorized_view_name.is_empty() {
        req.table_name = TABLE_NAME.into();
    }
    let f = fixture();
    let data = f.data();
    f.runtime.block_on(async {
        let mut request = tonic::Request::new(req);
        request.extensions_mut().insert(Caller::Anyone);
        let Ok(response) = data.read_rows(request).await else {
            return;
        };
        let mut stream = response.into_inner().take(MAX_RESPONSES);
        while let Some(item) = stream.next().await {
            if item.is_err() {
                break;
            }
        }
    });
});
