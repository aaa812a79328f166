//! SQL text as `ExecuteQuery`, Timestream's `Query` and `almanac sql` hand it to
//! `almanac_sql::SqlEngine`: any UTF-8, prepared (rewrites, parsing, planning, the
//! optimizer's rules) over the fixture's Bigtable tables (bare names, instance
//! `projects/fuzz/instances/fuzz`) and time-series tables (`"tsdb"."rows"` …), then run
//! for at most `MAX_BATCHES` batches under the fixture's time and memory limits.
//! Timestream's dialect, or GoogleSQL's when the text starts with `--googlesql`
//! (a comment, so the text stays the query it is).
#![no_main]

use almanac_fuzz::{INSTANCE, fixture};
use almanac_sql::Scope;
use libfuzzer_sys::fuzz_target;
use tokio_stream::StreamExt;

/// Result batches read at most.
const MAX_BATCHES: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let scope = if text.starts_with("--googlesql") {
        Scope::googlesql(INSTANCE)
    } else {
        Scope::instance(INSTANCE)
    };
    let f = fixture();
    f.runtime.block_on(async {
        let Ok(prepared) = f.sql.prepare(text, &scope, None).await else {
            return;
        };
        let Ok((stream, _)) = prepared.stream().await else {
            return;
        };
        let mut stream = stream.take(MAX_BATCHES);
        while let Some(batch) = stream.next().await {
            if batch.is_err() {
                break;
            }
        }
    });
});
