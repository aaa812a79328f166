//! The operations of `timestream-write`, each a blocking function from a parsed
//! [`Request`] to the JSON of its output shape.

use almanac_timeseries::layout::Layout;
use almanac_timeseries::limits::MAX_LIST_RESULTS;
use almanac_timeseries::{Error, NewTable, Resource, Result, TableSchema};
use serde_json::{Value as Json, json};
use tokio::sync::OwnedSemaphorePermit;

use super::records_json::WriteRequest;
use super::wire::{self, Request};
use super::{App, RequestContext, access};
use crate::auth::Caller;

/// The operations of `timestream-write` served here.
pub const OPERATIONS: [&str; 15] = [
    "DescribeEndpoints",
    "CreateDatabase",
    "DescribeDatabase",
    "ListDatabases",
    "UpdateDatabase",
    "DeleteDatabase",
    "CreateTable",
    "DescribeTable",
    "ListTables",
    "UpdateTable",
    "DeleteTable",
    "WriteRecords",
    "ListTagsForResource",
    "TagResource",
    "UntagResource",
];

fn required<'a>(v: &'a Option<String>, member: &str) -> Result<&'a str> {
    v.as_deref()
        .ok_or_else(|| Error::invalid(format!("Missing required member {member}.")))
}

/// MaxResults of a List call: 1..=20, default 20.
fn page_size(req: &Request) -> Result<usize> {
    match req.max_results {
        None => Ok(MAX_LIST_RESULTS),
        Some(n) if (1..=MAX_LIST_RESULTS as i64).contains(&n) => Ok(n as usize),
        Some(n) => Err(Error::invalid(format!(
            "MaxResults {n} is outside [1, {MAX_LIST_RESULTS}]."
        ))),
    }
}

/// `DescribeEndpoints`: this server is the endpoint, for a day.
pub fn describe_endpoints(app: &App) -> Json {
    json!({ "Endpoints": [{ "Address": app.address, "CachePeriodInMinutes": 1440 }] })
}

/// `CreateDatabase`.
pub fn create_database(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let name = required(&req.database_name, "DatabaseName")?;
    let d = app
        .ts
        .create_database_tagged(name, req.kms_key_id.clone(), req.tags.clone())?;
    Ok(json!({ "Database": wire::database(&d, &cx.region) }))
}

/// `DescribeDatabase`.
pub fn describe_database(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let d = app
        .ts
        .describe_database(required(&req.database_name, "DatabaseName")?)?;
    Ok(json!({ "Database": wire::database(&d, &cx.region) }))
}

/// `ListDatabases`: NextToken is the last name of the previous page.
pub fn list_databases(
    app: &App,
    cx: &RequestContext,
    caller: &Caller,
    req: &Request,
) -> Result<Json> {
    let max = page_size(req)?;
    let mut page = app.ts.list_databases(req.next_token.as_deref(), max + 1)?;
    let more = page.len() > max;
    page.truncate(max);
    let mut out = json!({
        "Databases": page
            .iter()
            .filter(|d| access::lists_database(caller, &app.ts, &d.name))
            .map(|d| wire::database(d, &cx.region))
            .collect::<Vec<_>>(),
    });
    if more && let (Some(last), Some(obj)) = (page.last(), out.as_object_mut()) {
        obj.insert("NextToken".into(), json!(last.name));
    }
    Ok(out)
}

/// `UpdateDatabase`.
pub fn update_database(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let name = required(&req.database_name, "DatabaseName")?;
    let key = required(&req.kms_key_id, "KmsKeyId")?;
    let d = app.ts.update_database(name, key.to_string())?;
    Ok(json!({ "Database": wire::database(&d, &cx.region) }))
}

/// `DeleteDatabase`.
pub fn delete_database(app: &App, req: &Request) -> Result<Json> {
    app.ts
        .delete_database(required(&req.database_name, "DatabaseName")?)?;
    Ok(json!({}))
}

/// `CreateTable`: tags `almanac:layout`, `almanac:bucket`, `almanac:reverse-time`
/// choose the storage pattern.
pub fn create_table(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let db = required(&req.database_name, "DatabaseName")?;
    let name = required(&req.table_name, "TableName")?;
    let layout = Layout::from_tags(req.tags.iter().map(|t| (t.key.as_str(), t.value.as_str())))?;
    let new = NewTable {
        retention: req.retention_properties.map(Into::into),
        magnetic_writes: req
            .magnetic_store_write_properties
            .clone()
            .map(Into::into)
            .unwrap_or_default(),
        layout,
        partition_key: req
            .schema
            .as_ref()
            .map(TableSchema::from_json)
            .transpose()?,
        tags: req.tags.clone(),
    };
    let t = app.ts.create_table(db, name, new)?;
    Ok(json!({ "Table": wire::table(&t, &cx.region, app.ts.store().instance()) }))
}

/// `DescribeTable`.
pub fn describe_table(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let db = required(&req.database_name, "DatabaseName")?;
    let t = app
        .ts
        .describe_table(db, required(&req.table_name, "TableName")?)?;
    Ok(json!({ "Table": wire::table(&t, &cx.region, app.ts.store().instance()) }))
}

/// `ListTables` of one database, or of all when DatabaseName is absent. NextToken is
/// `database/table` of the previous page's last table.
pub fn list_tables(app: &App, cx: &RequestContext, caller: &Caller, req: &Request) -> Result<Json> {
    let max = page_size(req)?;
    let after = match req.next_token.as_deref() {
        None => None,
        Some(tok) => Some(
            tok.split_once('/')
                .ok_or_else(|| Error::invalid(format!("Invalid NextToken {tok:?}.")))?,
        ),
    };
    let mut page = app
        .ts
        .list_tables(req.database_name.as_deref(), after, max + 1)?;
    let more = page.len() > max;
    page.truncate(max);
    let mut out = json!({
        "Tables": page
            .iter()
            .filter(|t| access::lists_table(caller, &t.database, &t.name))
            .map(|t| wire::table(t, &cx.region, app.ts.store().instance()))
            .collect::<Vec<_>>(),
    });
    if more && let (Some(last), Some(obj)) = (page.last(), out.as_object_mut()) {
        obj.insert(
            "NextToken".into(),
            json!(format!("{}/{}", last.database, last.name)),
        );
    }
    Ok(out)
}

/// `UpdateTable`.
pub fn update_table(app: &App, cx: &RequestContext, req: &Request) -> Result<Json> {
    let db = required(&req.database_name, "DatabaseName")?;
    let name = required(&req.table_name, "TableName")?;
    let t = app.ts.update_table(
        db,
        name,
        req.retention_properties.map(Into::into),
        req.magnetic_store_write_properties.clone().map(Into::into),
        req.schema
            .as_ref()
            .map(TableSchema::from_json)
            .transpose()?,
    )?;
    Ok(json!({ "Table": wire::table(&t, &cx.region, app.ts.store().instance()) }))
}

/// The resource of a tagging request.
fn resource(req: &Request) -> Result<Resource> {
    Resource::from_arn(required(&req.resource_arn, "ResourceARN")?)
}

/// `ListTagsForResource`.
pub fn list_tags_for_resource(app: &App, req: &Request) -> Result<Json> {
    let tags = app.ts.tags(&resource(req)?)?;
    Ok(json!({ "Tags": tags }))
}

/// `TagResource`.
pub fn tag_resource(app: &App, req: &Request) -> Result<Json> {
    app.ts.tag_resource(&resource(req)?, req.tags.clone())?;
    Ok(json!({}))
}

/// `UntagResource`.
pub fn untag_resource(app: &App, req: &Request) -> Result<Json> {
    app.ts.untag_resource(&resource(req)?, &req.tag_keys)?;
    Ok(json!({}))
}

/// `DeleteTable`.
pub fn delete_table(app: &App, req: &Request) -> Result<Json> {
    let db = required(&req.database_name, "DatabaseName")?;
    app.ts
        .delete_table(db, required(&req.table_name, "TableName")?)?;
    Ok(json!({}))
}

/// `WriteRecords`: gives its write slot back before it waits for the fsync.
pub fn write_records(app: &App, req: WriteRequest<'_>, slot: OwnedSemaphorePermit) -> Result<Json> {
    let db = required(&req.database_name, "DatabaseName")?;
    let table = required(&req.table_name, "TableName")?;
    let out =
        app.ts
            .write_records_unsynced(db, table, req.common_attributes.as_ref(), &req.records)?;
    drop(slot);
    app.ts.sync()?;
    app.metrics
        .points(out.ingested.total, out.rejected.len() as u64);
    let got = out.into_result()?;
    Ok(json!({
        "RecordsIngested": {
            "Total": got.total,
            "MemoryStore": got.memory_store,
            "MagneticStore": got.magnetic_store,
        }
    }))
}
