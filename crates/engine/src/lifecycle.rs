//! A table's life beyond create and delete, and the settings the server keeps beside
//! the catalog:
//! - **deletion protection**: a protected table cannot be deleted, nor lose a family;
//! - **undelete**: a deleted table stays whole for [`crate::Options::undelete_window`]
//!   (Bigtable's seven days by default) under a `d` meta key, and
//!   [`Engine::undelete_table`] puts it back with its id, so its cells were never
//!   touched. Past the window the sweep purges it ([`Engine::expire_deleted`]);
//! - **instances**: [`Engine::delete_instance`] deletes every table of an instance for
//!   good, with its deleted tables, its saved copies and its settings, in one batch;
//! - **settings**: opaque values under `a` keys, named by the resource they describe
//!   (`projects/p/instances/i`, `…/clusters/c`, `…/tables/t#iam`): the server keeps
//!   instances, clusters, app profiles and IAM policies there.

use std::sync::Arc;

use crate::catalog::{self, TableMeta};
use crate::db::{Engine, TableDirectory};
use crate::error::{Error, Result};
use crate::schema::TableInfo;

/// Meta key prefix of settings.
const SETTING_TAG: u8 = b'a';
/// Meta key prefix of deleted, still undeletable tables.
const DELETED_TAG: u8 = b'd';

/// Meta key of the deleted table `name` of `instance`.
pub(crate) fn deleted_key(instance: &str, name: &str) -> Vec<u8> {
    let mut k = catalog::table_meta_key(instance, name);
    k[0] = DELETED_TAG;
    k
}

/// A deleted table's record: its deletion time (µs), then its table record.
pub(crate) fn encode_deleted(deleted_us: i64, meta: &TableMeta) -> Vec<u8> {
    let mut out = deleted_us.to_be_bytes().to_vec();
    out.extend_from_slice(&catalog::encode_table(meta));
    out
}

/// Decodes a deleted table stored under `key`: (deletion time, table).
pub fn decode_deleted(key: &[u8], bytes: &[u8]) -> Result<(i64, TableMeta)> {
    let (time, record) = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| Error::Corrupt("deleted table record truncated".into()))?;
    let mut table_key = key.to_vec();
    if let Some(tag) = table_key.first_mut() {
        *tag = b't';
    }
    Ok((
        i64::from_be_bytes(*time),
        catalog::decode_table(&table_key, record)?,
    ))
}

fn setting_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(SETTING_TAG);
    k.extend_from_slice(key.as_bytes());
    k
}

/// Fails with `Precondition` if `meta` is protected from deletion; `what` names the
/// refused change.
pub(crate) fn refuse_protected(meta: &TableMeta, what: &str) -> Result<()> {
    if meta.deletion_protection {
        return Err(Error::Precondition(format!(
            "table {} has deletion protection enabled; {what} is refused until it is \
             turned off (UpdateTable with deletion_protection = false)",
            meta.resource_name()
        )));
    }
    Ok(())
}

impl Engine {
    /// Turns deletion protection of a table on or off.
    pub fn set_deletion_protection(
        &self,
        instance: &str,
        name: &str,
        protect: bool,
    ) -> Result<TableInfo> {
        self.update_table(instance, name, Some(protect), None)
    }

    /// UpdateTable: deletion protection and the change stream's retention (`Some(None)`
    /// turns the stream off), changed together or not at all.
    pub fn update_table(
        &self,
        instance: &str,
        name: &str,
        protect: Option<bool>,
        change_retention_us: Option<Option<i64>>,
    ) -> Result<TableInfo> {
        if let Some(r) = change_retention_us {
            crate::changes::check_retention(r)?;
        }
        self.update_table_meta(instance, name, |meta| {
            if let Some(p) = protect {
                meta.deletion_protection = p;
            }
            if let Some(r) = change_retention_us {
                meta.change_retention_us = r;
            }
        })
    }

    /// Changes a table's record with `change` and publishes it.
    pub(crate) fn update_table_meta(
        &self,
        instance: &str,
        name: &str,
        change: impl FnOnce(&mut TableMeta),
    ) -> Result<TableInfo> {
        let mut cat = self.catalog_mut()?;
        let old = Arc::clone(cat.get(instance, name)?);
        let mut meta = (*old).clone();
        change(&mut meta);
        self.publish_table(&mut cat, self.inner.db.batch(), meta)
    }

    /// Writes `meta`'s record with the changes already in `batch`, then publishes it in
    /// the catalog.
    pub(crate) fn publish_table(
        &self,
        cat: &mut TableDirectory,
        mut batch: fjall::OwnedWriteBatch,
        meta: TableMeta,
    ) -> Result<TableInfo> {
        batch.insert(
            &self.inner.meta,
            meta.meta_key(),
            catalog::encode_table(&meta),
        );
        self.commit(batch)?;
        let info = meta.info();
        cat.tables
            .entry(meta.instance.clone())
            .or_default()
            .insert(meta.name.clone(), Arc::new(meta));
        Ok(info)
    }

    /// Turns the records under `tag` that `expired` picks (it gives their table id) into
    /// purge markers, in one batch. Returns how many.
    pub(crate) fn expire_records(
        &self,
        tag: u8,
        expired: impl Fn(&[u8], &[u8]) -> Result<Option<u32>>,
    ) -> Result<u64> {
        let mut batch = self.inner.db.batch();
        let mut n = 0u64;
        for g in self.inner.meta.prefix([tag]) {
            let (k, v) = g.into_inner()?;
            if let Some(id) = expired(&k, &v)? {
                batch.remove(&self.inner.meta, k.to_vec());
                batch.insert(&self.inner.meta, catalog::dead_table_key(id), Vec::new());
                n += 1;
            }
        }
        if n > 0 {
            self.commit(batch)?;
        }
        Ok(n)
    }

    /// Puts back a table deleted less than the undelete window ago, with its cells as
    /// they were. Fails with `NotFound` if there is none, `AlreadyExists` if a table of
    /// that name exists again.
    pub fn undelete_table(&self, instance: &str, name: &str) -> Result<TableInfo> {
        let mut cat = self.catalog_mut()?;
        let key = deleted_key(instance, name);
        let Some(bytes) = self.inner.meta.get(&key)? else {
            return Err(Error::NotFound {
                kind: "deleted table",
                name: name.to_owned(),
            });
        };
        let (deleted_us, meta) = decode_deleted(&key, &bytes)?;
        if self.undelete_expired(deleted_us) {
            return Err(Error::NotFound {
                kind: "deleted table within the undelete window",
                name: name.to_owned(),
            });
        }
        if cat.get(instance, name).is_ok() {
            return Err(Error::AlreadyExists {
                kind: "table",
                name: name.to_owned(),
            });
        }
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, key);
        self.publish_table(&mut cat, batch, meta)
    }

    /// Whether a table deleted at `deleted_us` is past the undelete window.
    fn undelete_expired(&self, deleted_us: i64) -> bool {
        let window = i64::try_from(self.inner.undelete_window.as_micros()).unwrap_or(i64::MAX);
        deleted_us.saturating_add(window) <= self.now_us()
    }

    /// Ids of the tables deleted within the undelete window (their dropped families
    /// must stay marked for purging until they go for good).
    pub(crate) fn undeletable_ids(&self) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        for g in self.inner.meta.prefix([DELETED_TAG]) {
            let (k, v) = g.into_inner()?;
            ids.push(decode_deleted(&k, &v)?.1.id);
        }
        Ok(ids)
    }

    /// Marks the cells of tables deleted longer ago than the undelete window for
    /// purging. Returns how many tables went for good.
    pub(crate) fn expire_deleted(&self) -> Result<u64> {
        self.expire_records(DELETED_TAG, |k, v| {
            let (deleted_us, meta) = decode_deleted(k, v)?;
            Ok(self.undelete_expired(deleted_us).then_some(meta.id))
        })
    }

    /// Deletes an instance for good: every table (none may be protected), its deleted
    /// tables, the saved copies its clusters hold, and its settings, in one batch.
    /// Cells are purged in the background.
    pub fn delete_instance(&self, instance: &str) -> Result<()> {
        let mut cat = self.catalog_mut()?;
        let tables: Vec<Arc<TableMeta>> = cat
            .tables
            .get(instance)
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default();
        for t in &tables {
            refuse_protected(t, "deleting its instance")?;
        }
        let mut batch = self.inner.db.batch();
        for t in &tables {
            batch.remove(&self.inner.meta, t.meta_key());
            batch.insert(&self.inner.meta, catalog::dead_table_key(t.id), Vec::new());
        }
        let deleted_prefix = deleted_key(instance, "");
        for g in self.inner.meta.prefix(&deleted_prefix) {
            let (k, v) = g.into_inner()?;
            let (_, meta) = decode_deleted(&k, &v)?;
            batch.remove(&self.inner.meta, k.to_vec());
            batch.insert(
                &self.inner.meta,
                catalog::dead_table_key(meta.id),
                Vec::new(),
            );
        }
        for copy in self.saved_copies(&format!("{instance}/"))? {
            batch.remove(&self.inner.meta, copy.meta_key());
            batch.insert(
                &self.inner.meta,
                catalog::dead_table_key(copy.table_id),
                Vec::new(),
            );
        }
        for (key, _) in self.instance_settings(instance)? {
            batch.remove(&self.inner.meta, setting_key(&key));
        }
        self.commit(batch)?;
        cat.tables.remove(instance);
        drop(cat);
        self.inner.sweeper.wake();
        Ok(())
    }

    /// The settings of `instance`: its own key and every key under `instance/` or
    /// `instance#`.
    fn instance_settings(&self, instance: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        for (key, value) in self.settings(instance)? {
            let rest = &key[instance.len()..];
            if rest.is_empty() || rest.starts_with('/') || rest.starts_with('#') {
                out.push((key, value));
            }
        }
        Ok(out)
    }

    /// The settings whose key starts with `prefix`, in key order.
    pub fn settings(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        for g in self.inner.meta.prefix(setting_key(prefix)) {
            let (k, v) = g.into_inner()?;
            let key = std::str::from_utf8(&k[1..])
                .map_err(|_| Error::Corrupt("setting key is not UTF-8".into()))?;
            out.push((key.to_owned(), v.to_vec()));
        }
        Ok(out)
    }

    /// The setting under `key`, if any.
    pub fn setting(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.inner.meta.get(setting_key(key))?.map(|v| v.to_vec()))
    }

    /// Writes settings in one batch: `Some` sets a key, `None` removes it.
    pub fn put_settings(&self, changes: &[(String, Option<Vec<u8>>)]) -> Result<()> {
        let mut batch = self.inner.db.batch();
        for (key, value) in changes {
            match value {
                Some(v) => batch.insert(&self.inner.meta, setting_key(key), v.clone()),
                None => batch.remove(&self.inner.meta, setting_key(key)),
            }
        }
        self.commit(batch)
    }
}
