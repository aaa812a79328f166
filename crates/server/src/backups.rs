//! Table backups (`CreateBackup`, `GetBackup`, `ListBackups`, `UpdateBackup`,
//! `DeleteBackup`, `RestoreTable`, `CopyBackup`): each is one of the engine's saved
//! copies, held by a cluster's backups (`…/clusters/c` + `/backups`), so it is a
//! consistent copy of the table at the instant the call arrived. The copy is made
//! before the call answers, so its operation comes back done. A copied backup keeps
//! its source backup's name in the copy's note.

mod filter;

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_engine::{BACKUPS_HOLDER_SUFFIX, Engine, SavedCopy};
use tonic::Status;

use crate::convert::{micros, timestamp};
use crate::namespaces::{Registry, split_child};
use crate::status::{IntoStatus, invalid};

/// The soonest a backup may expire after the request: 6 hours (the API's limit).
const MIN_EXPIRY_US: i64 = 6 * 3600 * 1_000_000;
/// The latest a backup may expire after the request: 90 days (the API's limit).
const MAX_EXPIRY_US: i64 = 90 * 24 * 3600 * 1_000_000;
/// The latest a copied backup may expire after the request: 30 days (the API's limit).
const MAX_COPY_EXPIRY_US: i64 = 30 * 24 * 3600 * 1_000_000;
/// Backups per ListBackups page when the caller sets no page size.
const DEFAULT_PAGE_SIZE: usize = 1_000;

fn holder(cluster: &str) -> String {
    format!("{cluster}{BACKUPS_HOLDER_SUFFIX}")
}

/// The backup a saved copy is.
pub fn proto(copy: &SavedCopy) -> pb::Backup {
    pb::Backup {
        name: format!("{}/{}", copy.holder, copy.id),
        source_table: format!("{}/tables/{}", copy.source.instance, copy.source.name),
        source_backup: String::from_utf8_lossy(&copy.note).into_owned(),
        expire_time: copy.expires_us.map(timestamp),
        start_time: Some(timestamp(copy.created_us)),
        end_time: Some(timestamp(copy.created_us)),
        size_bytes: i64::try_from(copy.bytes).unwrap_or(i64::MAX),
        state: pb::backup::State::Ready as i32,
        backup_type: pb::backup::BackupType::Standard as i32,
        ..pb::Backup::default()
    }
}

/// What RestoreTable and CopyBackup say about the backup they started from.
pub fn info(b: &pb::Backup) -> pb::BackupInfo {
    pb::BackupInfo {
        backup: b.name.clone(),
        start_time: b.start_time,
        end_time: b.end_time,
        source_table: b.source_table.clone(),
        source_backup: b.source_backup.clone(),
    }
}

/// The progress of an operation that finished before it was answered.
pub fn finished() -> pb::OperationProgress {
    pb::OperationProgress {
        progress_percent: 100,
        ..pb::OperationProgress::default()
    }
}

/// Splits a backup name into its cluster and id, checking the cluster exists.
fn parse(registry: &Registry, name: &str) -> Result<(String, String), Status> {
    let parts = name
        .split_once("/backups/")
        .filter(|(c, id)| c.contains("/clusters/") && !id.is_empty() && !id.contains('/'));
    let Some((cluster, id)) = parts else {
        return Err(invalid(format!(
            "invalid backup name {name:?}: expected \
             projects/{{p}}/instances/{{i}}/clusters/{{c}}/backups/{{backup}}"
        )));
    };
    registry.cluster(cluster)?;
    Ok((cluster.to_owned(), id.to_owned()))
}

/// The expiry of a new or updated backup, checked against now: at least 6 hours
/// ahead and at most `max_us`.
fn expiry(engine: &Engine, t: Option<&prost_types::Timestamp>, max_us: i64) -> Result<i64, Status> {
    let Some(t) = t else {
        return Err(invalid("a backup needs an expire_time"));
    };
    let at = micros(t);
    let ahead = at.saturating_sub(engine.now_us());
    if !(MIN_EXPIRY_US..=max_us).contains(&ahead) {
        return Err(invalid(format!(
            "expire_time is {:.1} hours from now; it must be at least 6 hours and at most {} days from now",
            ahead as f64 / 3.6e9,
            max_us / (24 * 3600 * 1_000_000)
        )));
    }
    Ok(at)
}

/// `CreateBackup`.
pub fn create(
    engine: &Engine,
    registry: &Registry,
    req: &pb::CreateBackupRequest,
) -> Result<pb::Backup, Status> {
    let cluster = registry.cluster(&req.parent)?;
    let Some(backup) = &req.backup else {
        return Err(invalid("CreateBackup needs a backup"));
    };
    let table = crate::names::table(&backup.source_table)?;
    let (cluster_instance, _) = split_child(&cluster.name, "clusters")?;
    if cluster_instance != table.instance {
        return Err(invalid(format!(
            "cluster {} is not in the instance of table {}",
            req.parent, backup.source_table
        )));
    }
    almanac_engine::schema::validate_table_id(&req.backup_id)
        .map_err(|e| invalid(format!("invalid backup id: {e}")))?;
    let expires = expiry(engine, backup.expire_time.as_ref(), MAX_EXPIRY_US)?;
    let copy = engine
        .save_copy(
            &table.instance,
            &table.table,
            &holder(&cluster.name),
            &req.backup_id,
            Some(expires),
            Vec::new(),
        )
        .status()?;
    Ok(proto(&copy))
}

/// `GetBackup`.
pub fn get(engine: &Engine, registry: &Registry, name: &str) -> Result<pb::Backup, Status> {
    let (cluster, id) = parse(registry, name)?;
    Ok(proto(&engine.saved_copy(&holder(&cluster), &id).status()?))
}

/// `ListBackups` (cluster `-`: every cluster of the instance), filtered, ordered and
/// paged; the page token is the offset into the ordered list.
pub fn list(
    engine: &Engine,
    registry: &Registry,
    req: &pb::ListBackupsRequest,
) -> Result<pb::ListBackupsResponse, Status> {
    let (instance, cluster) = split_child(&req.parent, "clusters")?;
    if cluster != "-" {
        registry.cluster(&req.parent)?;
    }
    if req.page_size < 0 {
        return Err(invalid(format!(
            "page_size must not be negative, got {}",
            req.page_size
        )));
    }
    let filter = filter::parse(&req.filter).map_err(invalid)?;
    let mut all = Vec::new();
    for copy in engine
        .saved_copies(&format!("{instance}/clusters/"))
        .status()?
    {
        let wanted = if cluster == "-" {
            copy.holder.ends_with(BACKUPS_HOLDER_SUFFIX)
        } else {
            copy.holder == holder(&req.parent)
        };
        let b = proto(&copy);
        if wanted
            && filter
                .as_ref()
                .map_or(Ok(true), |f| filter::matches(f, &b))
                .map_err(invalid)?
        {
            all.push(b);
        }
    }
    filter::sort(&mut all, &req.order_by).map_err(invalid)?;
    let start: usize = if req.page_token.is_empty() {
        0
    } else {
        req.page_token
            .parse()
            .map_err(|_| invalid(format!("invalid page_token {:?}", req.page_token)))?
    };
    let page = usize::try_from(req.page_size)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let end = start.saturating_add(page).min(all.len());
    let next_page_token = if end < all.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok(pb::ListBackupsResponse {
        backups: all.into_iter().take(end).skip(start).collect(),
        next_page_token,
    })
}

/// `UpdateBackup`: only `expire_time` may change.
pub fn update(
    engine: &Engine,
    registry: &Registry,
    req: &pb::UpdateBackupRequest,
) -> Result<pb::Backup, Status> {
    let Some(backup) = &req.backup else {
        return Err(invalid("UpdateBackup needs a backup"));
    };
    let paths = req
        .update_mask
        .as_ref()
        .map(|m| m.paths.as_slice())
        .unwrap_or_default();
    if paths.is_empty() {
        return Err(invalid(
            "UpdateBackup needs an update_mask naming expire_time",
        ));
    }
    if let Some(p) = paths.iter().find(|p| p.as_str() != "expire_time") {
        return Err(invalid(format!(
            "a backup's {p} cannot be updated: only expire_time can"
        )));
    }
    let (cluster, id) = parse(registry, &backup.name)?;
    let expires = expiry(engine, backup.expire_time.as_ref(), MAX_EXPIRY_US)?;
    Ok(proto(
        &engine
            .set_copy_expiry(&holder(&cluster), &id, Some(expires))
            .status()?,
    ))
}

/// `DeleteBackup`.
pub fn delete(engine: &Engine, registry: &Registry, name: &str) -> Result<(), Status> {
    let (cluster, id) = parse(registry, name)?;
    engine.drop_saved_copy(&holder(&cluster), &id).status()
}

/// `RestoreTable`: the new table's schema and the backup it came from.
pub fn restore(
    engine: &Engine,
    registry: &Registry,
    req: &pb::RestoreTableRequest,
) -> Result<(almanac_engine::schema::TableInfo, pb::BackupInfo), Status> {
    let instance = crate::names::instance(&req.parent)?;
    let Some(pb::restore_table_request::Source::Backup(name)) = &req.source else {
        return Err(invalid("RestoreTable needs a backup"));
    };
    let (cluster, id) = parse(registry, name)?;
    let holder = holder(&cluster);
    let source = proto(&engine.saved_copy(&holder, &id).status()?);
    let table = engine
        .restore_copy(&holder, &id, &instance, &req.table_id)
        .status()?;
    Ok((table, info(&source)))
}

/// `CopyBackup`: the new backup and the backup it copies.
pub fn copy(
    engine: &Engine,
    registry: &Registry,
    req: &pb::CopyBackupRequest,
) -> Result<(pb::Backup, pb::BackupInfo), Status> {
    let cluster = registry.cluster(&req.parent)?;
    let (from_cluster, from_id) = parse(registry, &req.source_backup)?;
    almanac_engine::schema::validate_table_id(&req.backup_id)
        .map_err(|e| invalid(format!("invalid backup id: {e}")))?;
    let expires = expiry(engine, req.expire_time.as_ref(), MAX_COPY_EXPIRY_US)?;
    let from = holder(&from_cluster);
    let source = proto(&engine.saved_copy(&from, &from_id).status()?);
    let copy = engine
        .duplicate_copy(
            &from,
            &from_id,
            &holder(&cluster.name),
            &req.backup_id,
            Some(expires),
            req.source_backup.clone().into_bytes(),
        )
        .status()?;
    Ok((proto(&copy), info(&source)))
}
