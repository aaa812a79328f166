//! A Timestream `WriteRecords` body, as the endpoint reads it: the hand parser
//! (`almanac_server::timestream::records_json`), then, when it parses, the records
//! written through the time-series layer's write path (per-record checks, retention,
//! schema, row placement, versions) into the fixture's tables. A body without
//! `DatabaseName` or `TableName` is given the fixture's `tsdb` and `rows`.
#![no_main]

use almanac_fuzz::{DATABASE, SERIES_TABLES, fixture};
use almanac_server::timestream::records_json::parse_write_records;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(req) = parse_write_records(data) else {
        return;
    };
    let f = fixture();
    if f.due_for_reset() {
        f.reset_series();
    }
    let db = req.database_name.as_deref().unwrap_or(DATABASE);
    let table = req.table_name.as_deref().unwrap_or(SERIES_TABLES[0].0);
    let _ =
        f.ts.write_records_outcome(db, table, req.common_attributes.as_ref(), &req.records);
});
