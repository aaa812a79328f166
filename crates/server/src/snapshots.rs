//! Table snapshots (`SnapshotTable`, `GetSnapshot`, `ListSnapshots`,
//! `DeleteSnapshot`, `CreateTableFromSnapshot`): each is one of the engine's saved
//! copies, held by a cluster (`projects/p/instances/i/clusters/c`) and expiring after
//! its `ttl`. The copy is made before the call answers, so its operation comes back
//! done. The snapshot's description is the note kept with the copy.

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_engine::{Engine, SavedCopy};
use tonic::Status;

use crate::convert::timestamp;
use crate::namespaces::{Registry, split_child};
use crate::status::{IntoStatus, invalid};

/// A snapshot's lifetime when the request sets no `ttl` (the API's default).
const DEFAULT_TTL_SECS: i64 = 24 * 3600;
/// The longest `ttl` a snapshot may have (the API's limit: 7 days).
const MAX_TTL_SECS: i64 = 7 * 24 * 3600;
/// Snapshots per ListSnapshots page when the caller sets no page size.
const DEFAULT_PAGE_SIZE: usize = 1_000;

/// The snapshot a saved copy is.
pub fn proto(copy: &SavedCopy) -> pb::Snapshot {
    pb::Snapshot {
        name: format!("{}/snapshots/{}", copy.holder, copy.id),
        source_table: Some(pb::Table {
            name: format!("{}/tables/{}", copy.source.instance, copy.source.name),
            ..pb::Table::default()
        }),
        data_size_bytes: i64::try_from(copy.bytes).unwrap_or(i64::MAX),
        create_time: Some(timestamp(copy.created_us)),
        delete_time: copy.expires_us.map(timestamp),
        state: pb::snapshot::State::Ready as i32,
        description: String::from_utf8_lossy(&copy.note).into_owned(),
    }
}

/// `SnapshotTable`.
pub fn take(
    engine: &Engine,
    registry: &Registry,
    req: &pb::SnapshotTableRequest,
) -> Result<pb::Snapshot, Status> {
    let table = crate::names::table(&req.name)?;
    let cluster = registry.cluster(&req.cluster)?;
    let (cluster_instance, _) = split_child(&cluster.name, "clusters")?;
    if cluster_instance != table.instance {
        return Err(invalid(format!(
            "cluster {} is not in the instance of table {}",
            req.cluster, req.name
        )));
    }
    almanac_engine::schema::validate_table_id(&req.snapshot_id)
        .map_err(|e| invalid(format!("invalid snapshot id: {e}")))?;
    let ttl_secs = match &req.ttl {
        None => DEFAULT_TTL_SECS,
        Some(d) if d.seconds > 0 && d.seconds <= MAX_TTL_SECS => d.seconds,
        Some(d) => {
            return Err(invalid(format!(
                "snapshot ttl is {}s; it must be more than 0 and at most {MAX_TTL_SECS}s (7 days)",
                d.seconds
            )));
        }
    };
    let expires = engine
        .now_us()
        .saturating_add(ttl_secs.saturating_mul(1_000_000));
    let copy = engine
        .save_copy(
            &table.instance,
            &table.table,
            &cluster.name,
            &req.snapshot_id,
            Some(expires),
            req.description.clone().into_bytes(),
        )
        .status()?;
    Ok(proto(&copy))
}

/// Splits a snapshot name into its cluster and id, checking the cluster exists.
fn parse(registry: &Registry, name: &str) -> Result<(String, String), Status> {
    let Some((cluster, id)) = name.split_once("/snapshots/") else {
        return Err(invalid(format!(
            "invalid snapshot name {name:?}: expected \
             projects/{{p}}/instances/{{i}}/clusters/{{c}}/snapshots/{{snapshot}}"
        )));
    };
    registry.cluster(cluster)?;
    Ok((cluster.to_owned(), id.to_owned()))
}

/// `GetSnapshot`.
pub fn get(engine: &Engine, registry: &Registry, name: &str) -> Result<pb::Snapshot, Status> {
    let (cluster, id) = parse(registry, name)?;
    Ok(proto(&engine.saved_copy(&cluster, &id).status()?))
}

/// `ListSnapshots` (cluster `-`: every cluster of the instance).
pub fn list(
    engine: &Engine,
    registry: &Registry,
    req: &pb::ListSnapshotsRequest,
) -> Result<pb::ListSnapshotsResponse, Status> {
    let (instance, cluster) = split_child(&req.parent, "clusters")?;
    let holder = if cluster == "-" {
        format!("{instance}/clusters/")
    } else {
        registry.cluster(&req.parent)?;
        req.parent.clone()
    };
    if req.page_size < 0 {
        return Err(invalid(format!(
            "page_size must not be negative, got {}",
            req.page_size
        )));
    }
    let page = usize::try_from(req.page_size)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let all: Vec<pb::Snapshot> = engine
        .saved_copies(&holder)
        .status()?
        .iter()
        .filter(|c| {
            (cluster == "-" && !c.holder.ends_with(almanac_engine::BACKUPS_HOLDER_SUFFIX))
                || c.holder == holder
        })
        .map(proto)
        .filter(|s| req.page_token.is_empty() || s.name > req.page_token)
        .collect();
    let next_page_token = if all.len() > page {
        all[page - 1].name.clone()
    } else {
        String::new()
    };
    Ok(pb::ListSnapshotsResponse {
        snapshots: all.into_iter().take(page).collect(),
        next_page_token,
    })
}

/// `DeleteSnapshot`.
pub fn delete(engine: &Engine, registry: &Registry, name: &str) -> Result<(), Status> {
    let (cluster, id) = parse(registry, name)?;
    engine.drop_saved_copy(&cluster, &id).status()
}

/// `CreateTableFromSnapshot`: the new table's schema.
pub fn restore(
    engine: &Engine,
    registry: &Registry,
    req: &pb::CreateTableFromSnapshotRequest,
) -> Result<almanac_engine::schema::TableInfo, Status> {
    let instance = crate::names::instance(&req.parent)?;
    let (cluster, id) = parse(registry, &req.source_snapshot)?;
    engine
        .restore_copy(&cluster, &id, &instance, &req.table_id)
        .status()
}
