//! The Table Admin API (`google.bigtable.admin.v2.BigtableTableAdmin`): tables,
//! column families, deletion protection and undelete, row-range drops,
//! (single-replica) consistency tokens, snapshots ([`crate::snapshots`]) and IAM
//! policies on tables ([`crate::iam`]). Changes that the API runs as long-running
//! operations finish before the answer, so the operations come back done.

use std::collections::HashMap;

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_api::google::bigtable::admin::v2::bigtable_table_admin_server::BigtableTableAdmin;
use almanac_api::google::iam::v1 as iam;
use almanac_api::google::longrunning::Operation;
use almanac_auth::Action;
use almanac_engine::schema::{FamilyChange, TableInfo, TableSpec};
use almanac_engine::{DropRows, Engine};
use tonic::{Request, Response, Status};

use crate::convert::timestamp;
use crate::data::blocking;
use crate::names::{self, TableName};
use crate::namespaces::{Registry, mask_paths};
use crate::operations::done;
use crate::status::{IntoStatus, invalid};
use crate::{backups, convert, iam as policies, snapshots, views};

/// Tables per ListTables page when the caller sets no page size.
const DEFAULT_PAGE_SIZE: usize = 1_000;

/// The Table Admin API over one engine.
#[derive(Clone)]
pub struct TableAdminService {
    engine: Engine,
    registry: Registry,
}

impl TableAdminService {
    /// Serves `engine`, whose instances and clusters `registry` keeps.
    pub fn new(engine: Engine, registry: Registry) -> Self {
        Self { engine, registry }
    }

    /// Runs `f` on a blocking thread with the engine and the registry.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine, &Registry) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let (engine, registry) = (self.engine.clone(), self.registry.clone());
        blocking(move || f(&engine, &registry)).await
    }

    fn now(&self) -> Option<prost_types::Timestamp> {
        Some(timestamp(self.engine.now_us()))
    }
}

/// The change-stream retention a config asks for (µs); none or a zero retention turns
/// the stream off.
fn change_retention(config: Option<&pb::ChangeStreamConfig>) -> Result<Option<i64>, Status> {
    let Some(d) = config.and_then(|c| c.retention_period.as_ref()) else {
        return Ok(None);
    };
    if d.seconds < 0 || d.nanos < 0 {
        return Err(invalid("change stream retention must not be negative"));
    }
    let us = d
        .seconds
        .saturating_mul(1_000_000)
        .saturating_add(i64::from(d.nanos) / 1_000);
    Ok((us > 0).then_some(us))
}

/// A table named as an IAM resource of this service, checked to exist.
fn iam_table(engine: &Engine, resource: &str) -> Result<String, Status> {
    let name = names::table(resource)?;
    engine.get_table(&name.instance, &name.table).status()?;
    Ok(name.full())
}

fn table_proto(info: &TableInfo, view: i32) -> pb::Table {
    let name = TableName {
        instance: info.instance.clone(),
        table: info.name.clone(),
    }
    .full();
    let name_only = view == pb::table::View::NameOnly as i32;
    let column_families: HashMap<String, pb::ColumnFamily> = if name_only {
        HashMap::new()
    } else {
        info.families
            .iter()
            .map(|(n, spec)| {
                let cf = pb::ColumnFamily {
                    gc_rule: Some(almanac_remote::wire::gc_rule(&spec.gc_rule).unwrap_or_default()),
                    value_type: almanac_remote::wire::value_type(spec.value_type),
                };
                (n.clone(), cf)
            })
            .collect()
    };
    let granularity = match info.granularity {
        almanac_engine::schema::Granularity::Millis => pb::table::TimestampGranularity::Millis,
        almanac_engine::schema::Granularity::Micros => pb::table::TimestampGranularity::Micros,
    };
    pb::Table {
        name,
        column_families,
        granularity: if name_only { 0 } else { granularity as i32 },
        deletion_protection: info.deletion_protection,
        change_stream_config: info.change_retention_us.map(|us| pb::ChangeStreamConfig {
            retention_period: Some(prost_types::Duration {
                seconds: us / 1_000_000,
                nanos: ((us % 1_000_000) * 1_000) as i32,
            }),
        }),
        ..pb::Table::default()
    }
}

#[tonic::async_trait]
impl BigtableTableAdmin for TableAdminService {
    async fn create_table(
        &self,
        request: Request<pb::CreateTableRequest>,
    ) -> Result<Response<pb::Table>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let instance = names::instance(&req.parent)?;
        let table = req.table.unwrap_or_default();
        let mut families = Vec::with_capacity(table.column_families.len());
        for (name, cf) in &table.column_families {
            families.push((name.clone(), convert::family_spec(cf)?));
        }
        families.sort_by(|a, b| a.0.cmp(&b.0));
        let spec = TableSpec {
            families,
            granularity: convert::granularity(table.granularity)?,
            deletion_protection: table.deletion_protection,
            change_retention_us: change_retention(table.change_stream_config.as_ref())?,
        };
        // Split keys only shape tablets on the service; here they are validated and accepted.
        for s in &req.initial_splits {
            almanac_engine::validate::row_key(&s.key).status()?;
        }
        let engine = self.engine.clone();
        let id = req.table_id.clone();
        let info = blocking(move || engine.create_table(&instance, &id, spec).status()).await?;
        Ok(Response::new(table_proto(
            &info,
            pb::table::View::SchemaView as i32,
        )))
    }

    async fn list_tables(
        &self,
        request: Request<pb::ListTablesRequest>,
    ) -> Result<Response<pb::ListTablesResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.list",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let instance = names::instance(&req.parent)?;
        if req.page_size < 0 {
            return Err(invalid(format!(
                "page_size must not be negative, got {}",
                req.page_size
            )));
        }
        let page = if req.page_size == 0 {
            DEFAULT_PAGE_SIZE
        } else {
            req.page_size as usize
        };
        let engine = self.engine.clone();
        let tables = blocking(move || engine.list_tables(&instance).status()).await?;
        let start = if req.page_token.is_empty() {
            0
        } else {
            tables
                .iter()
                .position(|t| t.name > req.page_token)
                .unwrap_or(tables.len())
        };
        let view = if req.view == 0 {
            pb::table::View::NameOnly as i32
        } else {
            req.view
        };
        let slice = &tables[start..(start + page).min(tables.len())];
        let next_page_token = if start + page < tables.len() {
            slice.last().map(|t| t.name.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListTablesResponse {
            tables: slice.iter().map(|t| table_proto(t, view)).collect(),
            next_page_token,
        }))
    }

    async fn get_table(
        &self,
        request: Request<pb::GetTableRequest>,
    ) -> Result<Response<pb::Table>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.get",
            &request.get_ref().name,
        )?;
        let req = request.into_inner();
        let name = names::table(&req.name)?;
        let engine = self.engine.clone();
        let info = blocking(move || engine.get_table(&name.instance, &name.table).status()).await?;
        let view = if req.view == 0 {
            pb::table::View::SchemaView as i32
        } else {
            req.view
        };
        Ok(Response::new(table_proto(&info, view)))
    }

    async fn delete_table(
        &self,
        request: Request<pb::DeleteTableRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.delete",
            &request.get_ref().name,
        )?;
        let name = names::table(&request.get_ref().name)?;
        let engine = self.engine.clone();
        blocking(move || {
            engine.delete_table(&name.instance, &name.table).status()?;
            views::drop_all(&engine, &name.full())
        })
        .await?;
        Ok(Response::new(()))
    }

    async fn modify_column_families(
        &self,
        request: Request<pb::ModifyColumnFamiliesRequest>,
    ) -> Result<Response<pb::Table>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.update",
            &request.get_ref().name,
        )?;
        use pb::modify_column_families_request::modification::Mod;
        let req = request.into_inner();
        let name = names::table(&req.name)?;
        let mut changes = Vec::with_capacity(req.modifications.len());
        for m in &req.modifications {
            let change = match &m.r#mod {
                Some(Mod::Create(cf)) => {
                    FamilyChange::Create(m.id.clone(), convert::family_spec(cf)?)
                }
                Some(Mod::Update(cf)) => {
                    // No mask means the GC rule, as before masks existed.
                    let paths = m.update_mask.as_ref().map_or(&[][..], |f| &f.paths[..]);
                    if paths.is_empty() {
                        changes.push(FamilyChange::Update(
                            m.id.clone(),
                            convert::gc_rule(cf.gc_rule.as_ref())?,
                        ));
                    }
                    for path in paths {
                        changes.push(match path.as_str() {
                            "gc_rule" => FamilyChange::Update(
                                m.id.clone(),
                                convert::gc_rule(cf.gc_rule.as_ref())?,
                            ),
                            "value_type" => FamilyChange::SetValueType(
                                m.id.clone(),
                                convert::value_type(cf.value_type.as_ref())?,
                            ),
                            other => {
                                return Err(invalid(format!(
                                    "update_mask of family {:?} names {other:?}; a family \
                                     update sets gc_rule or value_type",
                                    m.id
                                )));
                            }
                        });
                    }
                    continue;
                }
                Some(Mod::Drop(true)) => FamilyChange::Drop(m.id.clone()),
                Some(Mod::Drop(false)) | None => {
                    return Err(invalid(format!(
                        "modification of family {:?} names no change",
                        m.id
                    )));
                }
            };
            changes.push(change);
        }
        let engine = self.engine.clone();
        let info = blocking(move || {
            engine
                .modify_families(&name.instance, &name.table, &changes)
                .status()
        })
        .await?;
        Ok(Response::new(table_proto(
            &info,
            pb::table::View::SchemaView as i32,
        )))
    }

    async fn drop_row_range(
        &self,
        request: Request<pb::DropRowRangeRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.update",
            &request.get_ref().name,
        )?;
        use pb::drop_row_range_request::Target;
        let req = request.into_inner();
        let name = names::table(&req.name)?;
        let which = match req.target {
            Some(Target::RowKeyPrefix(p)) => DropRows::Prefix(p.to_vec()),
            Some(Target::DeleteAllDataFromTable(true)) => DropRows::All,
            _ => {
                return Err(invalid(
                    "DropRowRange needs row_key_prefix or delete_all_data_from_table",
                ));
            }
        };
        let engine = self.engine.clone();
        blocking(move || {
            engine
                .drop_rows(&name.instance, &name.table, &which)
                .status()
        })
        .await?;
        Ok(Response::new(()))
    }

    async fn generate_consistency_token(
        &self,
        request: Request<pb::GenerateConsistencyTokenRequest>,
    ) -> Result<Response<pb::GenerateConsistencyTokenResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.generateConsistencyToken",
            &request.get_ref().name,
        )?;
        let name = names::table(&request.get_ref().name)?;
        let engine = self.engine.clone();
        blocking(move || engine.get_table(&name.instance, &name.table).status()).await?;
        // One replica: every acknowledged write is already consistent.
        let token = format!("almanac-{}", self.engine.now_us());
        Ok(Response::new(pb::GenerateConsistencyTokenResponse {
            consistency_token: token,
        }))
    }

    async fn check_consistency(
        &self,
        request: Request<pb::CheckConsistencyRequest>,
    ) -> Result<Response<pb::CheckConsistencyResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.checkConsistency",
            &request.get_ref().name,
        )?;
        let req = request.into_inner();
        let name = names::table(&req.name)?;
        if !req.consistency_token.starts_with("almanac-") {
            return Err(invalid(format!(
                "unknown consistency token {:?}",
                req.consistency_token
            )));
        }
        let engine = self.engine.clone();
        blocking(move || engine.get_table(&name.instance, &name.table).status()).await?;
        Ok(Response::new(pb::CheckConsistencyResponse {
            consistent: true,
        }))
    }

    async fn update_table(
        &self,
        request: Request<pb::UpdateTableRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.update",
            request
                .get_ref()
                .table
                .as_ref()
                .map_or("", |t| t.name.as_str()),
        )?;
        let req = request.into_inner();
        let start = self.now();
        let update = req.table.unwrap_or_default();
        let name = names::table(&update.name)?;
        let paths = mask_paths(req.update_mask.as_ref(), "the table")?;
        let (mut protect, mut retention) = (None, None);
        for path in &paths {
            match path.as_str() {
                "deletion_protection" => protect = Some(update.deletion_protection),
                "change_stream_config" | "change_stream_config.retention_period" => {
                    retention = Some(change_retention(update.change_stream_config.as_ref())?);
                }
                other => {
                    return Err(invalid(format!(
                        "update_mask names {other:?}; Almanac's UpdateTable sets \
                         deletion_protection and change_stream_config"
                    )));
                }
            }
        }
        let full = name.full();
        let info = self
            .run(move |e, _| {
                e.update_table(&name.instance, &name.table, protect, retention)
                    .status()
            })
            .await?;
        let meta = pb::UpdateTableMetadata {
            name: full.clone(),
            start_time: start,
            end_time: self.now(),
        };
        let table = table_proto(&info, pb::table::View::SchemaView as i32);
        Ok(Response::new(done(&full, &meta, &table)))
    }

    async fn undelete_table(
        &self,
        request: Request<pb::UndeleteTableRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.undelete",
            &request.get_ref().name,
        )?;
        let start = self.now();
        let name = names::table(&request.get_ref().name)?;
        let full = name.full();
        let info = self
            .run(move |e, _| e.undelete_table(&name.instance, &name.table).status())
            .await?;
        let meta = pb::UndeleteTableMetadata {
            name: full.clone(),
            start_time: start,
            end_time: self.now(),
        };
        let table = table_proto(&info, pb::table::View::SchemaView as i32);
        Ok(Response::new(done(&full, &meta, &table)))
    }

    async fn snapshot_table(
        &self,
        request: Request<pb::SnapshotTableRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.snapshots.create",
            &request.get_ref().name,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let snapshot = self.run(move |e, r| snapshots::take(e, r, &req)).await?;
        let meta = pb::SnapshotTableMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&snapshot.name, &meta, &snapshot)))
    }

    async fn get_snapshot(
        &self,
        request: Request<pb::GetSnapshotRequest>,
    ) -> Result<Response<pb::Snapshot>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.snapshots.get",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        Ok(Response::new(
            self.run(move |e, r| snapshots::get(e, r, &name)).await?,
        ))
    }

    async fn list_snapshots(
        &self,
        request: Request<pb::ListSnapshotsRequest>,
    ) -> Result<Response<pb::ListSnapshotsResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.snapshots.list",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, r| snapshots::list(e, r, &req)).await?,
        ))
    }

    async fn delete_snapshot(
        &self,
        request: Request<pb::DeleteSnapshotRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.snapshots.delete",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        self.run(move |e, r| snapshots::delete(e, r, &name)).await?;
        Ok(Response::new(()))
    }

    async fn create_table_from_snapshot(
        &self,
        request: Request<pb::CreateTableFromSnapshotRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.create",
            &request.get_ref().parent,
        )?;
        // The snapshot may be another instance's: reading it needs its own permission.
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.snapshots.get",
            &request.get_ref().source_snapshot,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let info = self.run(move |e, r| snapshots::restore(e, r, &req)).await?;
        let table = table_proto(&info, pb::table::View::SchemaView as i32);
        let meta = pb::CreateTableFromSnapshotMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&table.name, &meta, &table)))
    }

    async fn create_backup(
        &self,
        request: Request<pb::CreateBackupRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.backups.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let backup = self.run(move |e, r| backups::create(e, r, &req)).await?;
        let meta = pb::CreateBackupMetadata {
            name: backup.name.clone(),
            source_table: backup.source_table.clone(),
            start_time: start,
            end_time: self.now(),
        };
        Ok(Response::new(done(&backup.name, &meta, &backup)))
    }

    async fn get_backup(
        &self,
        request: Request<pb::GetBackupRequest>,
    ) -> Result<Response<pb::Backup>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.backups.get",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        Ok(Response::new(
            self.run(move |e, r| backups::get(e, r, &name)).await?,
        ))
    }

    async fn update_backup(
        &self,
        request: Request<pb::UpdateBackupRequest>,
    ) -> Result<Response<pb::Backup>, Status> {
        let name = request
            .get_ref()
            .backup
            .as_ref()
            .map(|b| b.name.clone())
            .unwrap_or_default();
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.backups.update",
            &name,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, r| backups::update(e, r, &req)).await?,
        ))
    }

    async fn delete_backup(
        &self,
        request: Request<pb::DeleteBackupRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.backups.delete",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        self.run(move |e, r| backups::delete(e, r, &name)).await?;
        Ok(Response::new(()))
    }

    async fn list_backups(
        &self,
        request: Request<pb::ListBackupsRequest>,
    ) -> Result<Response<pb::ListBackupsResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.backups.list",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, r| backups::list(e, r, &req)).await?,
        ))
    }

    async fn restore_table(
        &self,
        request: Request<pb::RestoreTableRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.create",
            &request.get_ref().parent,
        )?;
        // The backup may be another instance's: restoring it needs its own permission.
        if let Some(pb::restore_table_request::Source::Backup(b)) = &request.get_ref().source {
            crate::auth::check_named(&request, Action::Read, "bigtable.backups.restore", b)?;
        }
        let req = request.into_inner();
        let name = format!("{}/tables/{}", req.parent, req.table_id);
        let (info, backup) = self.run(move |e, r| backups::restore(e, r, &req)).await?;
        let table = table_proto(&info, pb::table::View::SchemaView as i32);
        let meta = pb::RestoreTableMetadata {
            name: name.clone(),
            source_type: pb::RestoreSourceType::Backup as i32,
            source_info: Some(pb::restore_table_metadata::SourceInfo::BackupInfo(backup)),
            optimize_table_operation_name: String::new(),
            progress: Some(backups::finished()),
        };
        Ok(Response::new(done(&name, &meta, &table)))
    }

    async fn copy_backup(
        &self,
        request: Request<pb::CopyBackupRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.backups.create",
            &request.get_ref().parent,
        )?;
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.backups.read",
            &request.get_ref().source_backup,
        )?;
        let req = request.into_inner();
        let (backup, source) = self.run(move |e, r| backups::copy(e, r, &req)).await?;
        let meta = pb::CopyBackupMetadata {
            name: backup.name.clone(),
            source_backup_info: Some(source),
            progress: Some(backups::finished()),
        };
        Ok(Response::new(done(&backup.name, &meta, &backup)))
    }

    async fn create_authorized_view(
        &self,
        request: Request<pb::CreateAuthorizedViewRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.authorizedViews.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let view = self.run(move |e, _| views::create(e, &req)).await?;
        let meta = pb::CreateAuthorizedViewMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&view.name, &meta, &view)))
    }

    async fn list_authorized_views(
        &self,
        request: Request<pb::ListAuthorizedViewsRequest>,
    ) -> Result<Response<pb::ListAuthorizedViewsResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.authorizedViews.list",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, _| views::list(e, &req)).await?,
        ))
    }

    async fn get_authorized_view(
        &self,
        request: Request<pb::GetAuthorizedViewRequest>,
    ) -> Result<Response<pb::AuthorizedView>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.authorizedViews.get",
            &request.get_ref().name,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, _| views::get(e, &req)).await?,
        ))
    }

    async fn update_authorized_view(
        &self,
        request: Request<pb::UpdateAuthorizedViewRequest>,
    ) -> Result<Response<Operation>, Status> {
        let name = request
            .get_ref()
            .authorized_view
            .as_ref()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.authorizedViews.update",
            &name,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let view = self.run(move |e, _| views::update(e, &req)).await?;
        let meta = pb::UpdateAuthorizedViewMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&view.name, &meta, &view)))
    }

    async fn delete_authorized_view(
        &self,
        request: Request<pb::DeleteAuthorizedViewRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.authorizedViews.delete",
            &request.get_ref().name,
        )?;
        let req = request.into_inner();
        self.run(move |e, _| views::delete(e, &req)).await?;
        Ok(Response::new(()))
    }

    async fn get_iam_policy(
        &self,
        request: Request<iam::GetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.getIamPolicy",
            &request.get_ref().resource,
        )?;
        let resource = request.into_inner().resource;
        Ok(Response::new(
            self.run(move |e, _| policies::get(e, &iam_table(e, &resource)?))
                .await?,
        ))
    }

    async fn set_iam_policy(
        &self,
        request: Request<iam::SetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.tables.setIamPolicy",
            &request.get_ref().resource,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |e, _| policies::set(e, &iam_table(e, &req.resource)?, req.policy))
                .await?,
        ))
    }

    async fn test_iam_permissions(
        &self,
        request: Request<iam::TestIamPermissionsRequest>,
    ) -> Result<Response<iam::TestIamPermissionsResponse>, Status> {
        let caller = crate::auth::Caller::of(&request)?;
        let req = request.into_inner();
        let req_resource = req.resource.clone();
        let resource = req.resource;
        self.run(move |e, _| iam_table(e, &resource)).await?;
        Ok(Response::new(policies::test(
            &caller,
            &req_resource,
            req.permissions,
        )?))
    }
}
