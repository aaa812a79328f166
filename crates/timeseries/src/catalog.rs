//! Databases and tables, kept in the store itself (table [`CATALOG_TABLE`], one row per
//! database `d/{db}` and per table `t/{db}/{table}`, the description as JSON in
//! `c:m`), so the same catalog works on the embedded engine and on a remote Bigtable.
//! The whole catalog is loaded at open and cached; DDL is serialized by one lock and
//! writes the store before the cache.
//!
//! Record layout: docs/format.md#time-series-catalog

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, RwLock};

use almanac_engine::mutation::Mutation;
use almanac_engine::schema::GcRule;
use almanac_engine::{ReadRequest, RowMutations};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::{MAX_DATABASES, MAX_TABLES_PER_DATABASE};
use crate::model::{DatabaseInfo, MagneticWrites, Retention};
use crate::partition::TableSchema;
use crate::schema::Schema;
use crate::series::SeriesLocks;
use crate::store::WideColumnStore;
use crate::tags::{Resource, Tag};
use crate::unsealed::Unsealed;

/// The store table holding the catalog.
pub const CATALOG_TABLE: &str = "_catalog";
/// Its one family.
const CATALOG_FAMILY: &str = "c";
/// The qualifier of a description.
const META_QUALIFIER: &[u8] = b"m";
/// Families of every data table: measures, and point metadata (version, nanoseconds).
pub const MEASURE_FAMILY: &str = "m";
/// See [`MEASURE_FAMILY`].
pub const META_FAMILY: &str = "x";
/// The family of sealed blocks ([`crate::seal`]), in tables that seal.
pub const BLOCK_FAMILY: &str = "b";

/// A table's description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableMeta {
    /// Database name.
    pub database: String,
    /// Table name.
    pub name: String,
    /// The Bigtable table holding the records.
    pub store_table: String,
    /// Storage pattern.
    pub layout: Layout,
    /// Retention.
    pub retention: Retention,
    /// Magnetic-store writes.
    pub magnetic_writes: MagneticWrites,
    /// `Schema` (the partition key) as given; `None` is partitioned by measure name.
    #[serde(default, deserialize_with = "crate::partition::lenient")]
    pub partition_key: Option<TableSchema>,
    /// Tags ([`crate::tags`]).
    #[serde(default)]
    pub tags: Vec<Tag>,
    /// Inferred schema.
    pub schema: Schema,
    /// No bucket ending after this time (ns) is sealed ([`crate::seal`]): raised before
    /// a seal pass seals anything, so a write above it needs no block lookup.
    #[serde(default)]
    pub sealed_before_ns: i64,
    /// Every block of the table has its summary ([`crate::block::BlockSummary`]), so
    /// readers of whole buckets may read summaries alone. Tables created before
    /// summaries existed get them in their next seal pass ([`crate::seal`]).
    #[serde(default)]
    pub summarized: bool,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last update, ms since the epoch.
    pub updated_ms: i64,
}

impl TableMeta {
    /// The families of the table's Bigtable table.
    pub fn families(&self) -> Vec<&'static str> {
        let mut out = vec![MEASURE_FAMILY, META_FAMILY];
        if self.layout.seal {
            out.push(BLOCK_FAMILY);
        }
        out
    }
}

/// What CreateTable asks for.
#[derive(Debug, Clone, Default)]
pub struct NewTable {
    /// Retention (defaults when `None`).
    pub retention: Option<Retention>,
    /// Magnetic-store writes.
    pub magnetic_writes: MagneticWrites,
    /// Layout.
    pub layout: Layout,
    /// Partition key (checked by [`TableSchema::from_json`]).
    pub partition_key: Option<TableSchema>,
    /// Tags.
    pub tags: Vec<Tag>,
}

/// A live table: its description and the state writers share.
#[derive(Debug)]
pub struct TableHandle {
    meta: RwLock<Arc<TableMeta>>,
    /// Held while the schema grows, so two writers never persist divergent schemas.
    pub(crate) schema_lock: Mutex<()>,
    /// Series locks and high-water marks of the write path.
    pub(crate) series: SeriesLocks,
    /// The buckets with row-form points, for the seal pass.
    pub(crate) unsealed: Unsealed,
}

impl TableHandle {
    fn new(meta: TableMeta) -> Arc<Self> {
        Arc::new(Self {
            meta: RwLock::new(Arc::new(meta)),
            schema_lock: Mutex::new(()),
            series: SeriesLocks::default(),
            unsealed: Unsealed::default(),
        })
    }

    /// The current description.
    pub fn meta(&self) -> Arc<TableMeta> {
        match self.meta.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    fn set_meta(&self, meta: TableMeta) {
        let mut g = self
            .meta
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = Arc::new(meta);
    }
}

#[derive(Debug, Default)]
struct State {
    databases: BTreeMap<String, DatabaseInfo>,
    tables: BTreeMap<(String, String), Arc<TableHandle>>,
}

/// The catalog over a store.
#[derive(Debug)]
pub struct SeriesCatalog<S> {
    store: Arc<S>,
    state: RwLock<State>,
}

fn db_row(db: &str) -> Vec<u8> {
    format!("d/{db}").into_bytes()
}

fn table_row(db: &str, table: &str) -> Vec<u8> {
    format!("t/{db}/{table}").into_bytes()
}

fn corrupt(e: serde_json::Error) -> Error {
    Error::Corrupt(e.to_string())
}

/// The GC rule that enforces a retention on every family of a data table.
pub fn retention_rule(r: &Retention) -> GcRule {
    GcRule::MaxAge {
        max_age_us: r.keep_ns() / 1000,
    }
}

impl<S: WideColumnStore> SeriesCatalog<S> {
    /// Opens (creating on first use) the catalog in `store`.
    pub fn open(store: Arc<S>) -> Result<Self> {
        if !store.table_exists(CATALOG_TABLE)? {
            store.create_table(CATALOG_TABLE, &[(CATALOG_FAMILY, GcRule::MaxVersions(1))])?;
        }
        let mut state = State::default();
        let mut failure = None;
        store.read_rows(CATALOG_TABLE, ReadRequest::default(), &mut |row| {
            let Some(cell) = row.cells.iter().find(|c| &*c.qualifier == META_QUALIFIER) else {
                return ControlFlow::Continue(());
            };
            let loaded = if row.key.starts_with(b"d/") {
                serde_json::from_slice::<DatabaseInfo>(&cell.value).map(|d| {
                    state.databases.insert(d.name.clone(), d);
                })
            } else {
                serde_json::from_slice::<TableMeta>(&cell.value).map(|t| {
                    state
                        .tables
                        .insert((t.database.clone(), t.name.clone()), TableHandle::new(t));
                })
            };
            match loaded {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failure = Some(corrupt(e));
                    ControlFlow::Break(())
                }
            }
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(Self {
            store,
            state: RwLock::new(state),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(&self, key: Vec<u8>, json: Vec<u8>) -> Result<()> {
        self.apply(RowMutations {
            key,
            mutations: vec![Mutation::SetCell {
                family: CATALOG_FAMILY.into(),
                qualifier: META_QUALIFIER.to_vec(),
                timestamp_us: 0,
                value: json,
            }],
        })
    }

    fn apply(&self, row: RowMutations) -> Result<()> {
        for r in self
            .store
            .mutate_rows(CATALOG_TABLE, std::slice::from_ref(&row))?
        {
            r?;
        }
        Ok(())
    }

    fn put_db(&self, d: &DatabaseInfo) -> Result<()> {
        self.put(db_row(&d.name), serde_json::to_vec(d).map_err(corrupt)?)
    }

    /// Persists a table description (and caches it).
    pub(crate) fn put_table(&self, handle: &TableHandle, meta: TableMeta) -> Result<()> {
        self.put(
            table_row(&meta.database, &meta.name),
            serde_json::to_vec(&meta).map_err(corrupt)?,
        )?;
        handle.set_meta(meta);
        Ok(())
    }

    fn with_count(state: &State, d: &DatabaseInfo) -> DatabaseInfo {
        let mut d = d.clone();
        d.table_count = state
            .tables
            .range((d.name.clone(), String::new())..)
            .take_while(|((db, _), _)| *db == d.name)
            .count();
        d
    }

    /// CreateDatabase.
    pub fn create_database(
        &self,
        name: &str,
        kms_key_id: Option<String>,
        tags: Vec<Tag>,
        now_ms: i64,
    ) -> Result<DatabaseInfo> {
        crate::validate::resource_name("Database", name)?;
        let mut checked = Vec::new();
        crate::tags::add(&mut checked, tags)?;
        let mut st = self.write();
        if st.databases.contains_key(name) {
            return Err(Error::Conflict {
                kind: "database",
                name: name.into(),
            });
        }
        if st.databases.len() >= MAX_DATABASES {
            return Err(Error::Quota(format!(
                "The limit of {MAX_DATABASES} databases is reached."
            )));
        }
        let d = DatabaseInfo {
            name: name.into(),
            kms_key_id: kms_key_id.unwrap_or_else(|| "almanac-managed".into()),
            created_ms: now_ms,
            updated_ms: now_ms,
            table_count: 0,
            tags: checked,
        };
        self.put_db(&d)?;
        st.databases.insert(name.into(), d.clone());
        Ok(d)
    }

    /// DescribeDatabase.
    pub fn database(&self, name: &str) -> Result<DatabaseInfo> {
        let st = self.read();
        let d = st.databases.get(name).ok_or_else(|| Error::NotFound {
            kind: "database",
            name: name.into(),
        })?;
        Ok(Self::with_count(&st, d))
    }

    /// ListDatabases: up to `max` databases after `after` (exclusive), in name order.
    pub fn databases(&self, after: Option<&str>, max: usize) -> Vec<DatabaseInfo> {
        let st = self.read();
        st.databases
            .values()
            .filter(|d| after.is_none_or(|a| d.name.as_str() > a))
            .take(max)
            .map(|d| Self::with_count(&st, d))
            .collect()
    }

    /// UpdateDatabase (the KMS key).
    pub fn update_database(
        &self,
        name: &str,
        kms_key_id: String,
        now_ms: i64,
    ) -> Result<DatabaseInfo> {
        let mut st = self.write();
        let d = self.edit_database(&mut st, name, |d| {
            d.kms_key_id = kms_key_id;
            d.updated_ms = now_ms;
            Ok(())
        })?;
        Ok(Self::with_count(&st, &d))
    }

    /// Changes a database's description (the caller holds the catalog's write lock):
    /// `edit` changes a copy, kept only if it succeeds.
    fn edit_database(
        &self,
        st: &mut State,
        name: &str,
        edit: impl FnOnce(&mut DatabaseInfo) -> Result<()>,
    ) -> Result<DatabaseInfo> {
        let mut d = st
            .databases
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NotFound {
                kind: "database",
                name: name.into(),
            })?;
        edit(&mut d)?;
        self.put_db(&d)?;
        st.databases.insert(name.into(), d.clone());
        Ok(d)
    }

    /// DeleteDatabase: only an empty one, as Timestream requires.
    pub fn delete_database(&self, name: &str) -> Result<()> {
        let mut st = self.write();
        let d = st.databases.get(name).ok_or_else(|| Error::NotFound {
            kind: "database",
            name: name.into(),
        })?;
        let count = Self::with_count(&st, d).table_count;
        if count > 0 {
            return Err(Error::invalid(format!(
                "Database {name} still has {count} tables; delete them first."
            )));
        }
        self.apply(RowMutations {
            key: db_row(name),
            mutations: vec![Mutation::DeleteFromRow],
        })?;
        st.databases.remove(name);
        Ok(())
    }

    fn store_table_id(&self, st: &State, db: &str, table: &str) -> Result<String> {
        let used = |id: &str| -> Result<bool> {
            Ok(st.tables.values().any(|h| h.meta().store_table == id)
                || self.store.table_exists(id)?)
        };
        let readable = format!("{db}.{table}");
        if readable.len() <= almanac_engine::limits::MAX_TABLE_ID_CHARS
            && readable.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && !used(&readable)?
        {
            return Ok(readable);
        }
        for n in 1.. {
            let id = format!("ts-{n}");
            if !used(&id)? {
                return Ok(id);
            }
        }
        Err(Error::Quota("no free table id".into()))
    }

    /// CreateTable.
    pub fn create_table(
        &self,
        db: &str,
        name: &str,
        new: NewTable,
        now_ms: i64,
    ) -> Result<Arc<TableMeta>> {
        crate::validate::resource_name("Table", name)?;
        new.layout.validate()?;
        let mut checked_tags = Vec::new();
        crate::tags::add(&mut checked_tags, new.tags)?;
        let retention = new.retention.unwrap_or_default();
        validate_retention(&retention)?;
        let mut st = self.write();
        let d = st.databases.get(db).ok_or_else(|| Error::NotFound {
            kind: "database",
            name: db.into(),
        })?;
        if st.tables.contains_key(&(db.to_string(), name.to_string())) {
            return Err(Error::Conflict {
                kind: "table",
                name: name.into(),
            });
        }
        if Self::with_count(&st, d).table_count >= MAX_TABLES_PER_DATABASE {
            return Err(Error::Quota(format!(
                "Database {db} has the maximum of {MAX_TABLES_PER_DATABASE} tables."
            )));
        }
        let store_table = self.store_table_id(&st, db, name)?;
        let rule = retention_rule(&retention);
        let meta = TableMeta {
            database: db.into(),
            name: name.into(),
            store_table,
            layout: new.layout,
            retention,
            magnetic_writes: new.magnetic_writes,
            partition_key: new.partition_key,
            tags: checked_tags,
            schema: Schema::default(),
            sealed_before_ns: 0,
            summarized: true,
            created_ms: now_ms,
            updated_ms: now_ms,
        };
        let families: Vec<(&str, GcRule)> = meta
            .families()
            .into_iter()
            .map(|f| (f, rule.clone()))
            .collect();
        self.store.create_table(&meta.store_table, &families)?;
        let handle = TableHandle::new(meta.clone());
        if let Err(e) = self.put_table(&handle, meta) {
            let _ = self.store.delete_table(&handle.meta().store_table);
            return Err(e);
        }
        let out = handle.meta();
        st.tables.insert((db.into(), name.into()), handle);
        Ok(out)
    }

    /// The live table.
    pub fn table(&self, db: &str, name: &str) -> Result<Arc<TableHandle>> {
        let st = self.read();
        st.tables
            .get(&(db.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| missing(&st, db, name))
    }

    /// ListTables of a database (all databases when `db` is `None`), after `after`.
    pub fn tables(
        &self,
        db: Option<&str>,
        after: Option<(&str, &str)>,
        max: usize,
    ) -> Result<Vec<Arc<TableMeta>>> {
        let st = self.read();
        if let Some(db) = db
            && !st.databases.contains_key(db)
        {
            return Err(Error::NotFound {
                kind: "database",
                name: db.into(),
            });
        }
        Ok(st
            .tables
            .iter()
            .filter(|((d, _), _)| db.is_none_or(|want| d == want))
            .filter(|((d, t), _)| after.is_none_or(|(ad, at)| (d.as_str(), t.as_str()) > (ad, at)))
            .take(max)
            .map(|(_, h)| h.meta())
            .collect())
    }

    /// UpdateTable: retention and magnetic-store writes; the GC rules follow.
    pub fn update_table(
        &self,
        db: &str,
        name: &str,
        retention: Option<Retention>,
        magnetic_writes: Option<MagneticWrites>,
        partition_key: Option<TableSchema>,
        now_ms: i64,
    ) -> Result<Arc<TableMeta>> {
        let st = self.write();
        self.edit_table(&st, db, name, |meta| {
            // Every check before the first change: a refused update changes nothing.
            if let Some(next) = &partition_key {
                meta.partition_key
                    .clone()
                    .unwrap_or_default()
                    .check_update(next)?;
            }
            if let Some(r) = &retention {
                validate_retention(r)?;
            }
            if partition_key.is_some() {
                meta.partition_key = partition_key;
            }
            if let Some(r) = retention {
                if r != meta.retention {
                    let rule = retention_rule(&r);
                    for family in meta.families() {
                        self.store
                            .set_gc_rule(&meta.store_table, family, rule.clone())?;
                    }
                }
                meta.retention = r;
            }
            if let Some(m) = magnetic_writes {
                meta.magnetic_writes = m;
            }
            meta.updated_ms = now_ms;
            Ok(())
        })
    }

    /// Changes a table's description under its schema lock (the caller holds the
    /// catalog's write lock): `edit` changes a copy, kept only if it succeeds.
    fn edit_table(
        &self,
        st: &State,
        db: &str,
        name: &str,
        edit: impl FnOnce(&mut TableMeta) -> Result<()>,
    ) -> Result<Arc<TableMeta>> {
        let handle = st
            .tables
            .get(&(db.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| missing(st, db, name))?;
        let _schema = handle
            .schema_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut meta = (*handle.meta()).clone();
        edit(&mut meta)?;
        self.put_table(&handle, meta)?;
        Ok(handle.meta())
    }

    /// ListTagsForResource.
    pub fn tags(&self, resource: &Resource) -> Result<Vec<Tag>> {
        match resource {
            Resource::Database(db) => Ok(self.database(db)?.tags),
            Resource::Table(db, t) => Ok(self.table(db, t)?.meta().tags.clone()),
        }
    }

    /// TagResource / UntagResource: `change` edits the resource's tags, which are
    /// written back only if it succeeds.
    pub fn change_tags(
        &self,
        resource: &Resource,
        change: impl FnOnce(&mut Vec<Tag>) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.write();
        match resource {
            Resource::Database(name) => {
                self.edit_database(&mut st, name, |d| change(&mut d.tags))?;
            }
            Resource::Table(db, name) => {
                self.edit_table(&st, db, name, |meta| change(&mut meta.tags))?;
            }
        }
        Ok(())
    }

    /// DeleteTable: the records go with it.
    pub fn delete_table(&self, db: &str, name: &str) -> Result<()> {
        let handle = self.table(db, name)?;
        let mut st = self.write();
        let meta = handle.meta();
        self.apply(RowMutations {
            key: table_row(db, name),
            mutations: vec![Mutation::DeleteFromRow],
        })?;
        st.tables.remove(&(db.to_string(), name.to_string()));
        match self.store.delete_table(&meta.store_table) {
            Ok(()) | Err(almanac_engine::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The store below.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }
}

/// NotFound for the database when it is missing, else for the table.
fn missing(st: &State, db: &str, table: &str) -> Error {
    if st.databases.contains_key(db) {
        Error::NotFound {
            kind: "table",
            name: table.into(),
        }
    } else {
        Error::NotFound {
            kind: "database",
            name: db.into(),
        }
    }
}

fn validate_retention(r: &Retention) -> Result<()> {
    use crate::limits::{MAGNETIC_RETENTION_DAYS, MEMORY_RETENTION_HOURS};
    if !MEMORY_RETENTION_HOURS.contains(&r.memory_hours) {
        return Err(Error::invalid(format!(
            "MemoryStoreRetentionPeriodInHours {} is outside [{}, {}].",
            r.memory_hours,
            MEMORY_RETENTION_HOURS.start(),
            MEMORY_RETENTION_HOURS.end()
        )));
    }
    if !MAGNETIC_RETENTION_DAYS.contains(&r.magnetic_days) {
        return Err(Error::invalid(format!(
            "MagneticStoreRetentionPeriodInDays {} is outside [{}, {}].",
            r.magnetic_days,
            MAGNETIC_RETENTION_DAYS.start(),
            MAGNETIC_RETENTION_DAYS.end()
        )));
    }
    Ok(())
}
