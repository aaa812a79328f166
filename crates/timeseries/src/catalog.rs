//! Databases and tables, kept in the store itself (table [`CATALOG_TABLE`], one row per
//! database `d/{db}` and per table `t/{db}/{table}`, the description as JSON in
//! `c:m` and a generation in `c:g`), so the same catalog works on the embedded engine
//! and on a remote Bigtable shared by several front-ends.
//!
//! The whole catalog is loaded at open and cached; DDL is serialized by one lock in
//! this process and writes the store before the cache. Every write is conditional on
//! the row's generation (`stored.rs`), so front-ends in other processes agree: a
//! writer that finds the row changed reads it again and decides anew (two creates of
//! one table: one succeeds, the other is a conflict; two schemas grown at once: both
//! names admitted). Over a store that other processes write
//! ([`WideColumnStore::other_writers`]), listings and descriptions read the catalog
//! again first, and a table's cached description is read again once it is
//! [`REFRESH_AFTER`] old.
//!
//! Record layout: docs/format.md#time-series-catalog

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use almanac_engine::schema::GcRule;
use serde::{Deserialize, Serialize};

use self::stored::{Expect, StoredRow};

use crate::directory::Directory;
use crate::error::{Error, Result};
use crate::guard::GUARD_FAMILY;
use crate::layout::Layout;
use crate::limits::MAX_TABLES_PER_DATABASE;
use crate::model::{DatabaseInfo, MagneticWrites, Retention};
use crate::partition::TableSchema;
use crate::schema::Schema;
use crate::series::SeriesLocks;
use crate::store::WideColumnStore;
use crate::tags::{Resource, Tag};
use crate::unsealed::Unsealed;

mod databases;
mod lease;
mod stored;

pub(crate) use lease::SealLease;

/// The store table holding the catalog.
pub const CATALOG_TABLE: &str = "_catalog";
/// Tries of a change that keeps finding its row changed by another front-end.
const MAX_CHANGE_TRIES: usize = 16;
/// How old a table's cached description may get, over a store other processes write,
/// before a lookup reads it again: the longest another front-end's new dimension can go
/// unseen by this one's readers (its writers see it at once, through the conditional
/// write that fails).
pub const REFRESH_AFTER: Duration = Duration::from_secs(1);
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
    /// Every change of a row is conditioned on the row's guard ([`crate::guard`]): set
    /// for tables created over a store other processes write too.
    #[serde(default)]
    pub guarded: bool,
    /// The table keeps a directory of its series ([`crate::directory`]), so that a
    /// query finds them in one read: set, like `guarded`, for tables created over a
    /// store other processes write too, where every read is a round trip.
    #[serde(default)]
    pub indexed: bool,
    /// A token drawn when the table was made: with `created_ms` and `store_table`, tells
    /// this table from one deleted and made again under its name
    /// ([`TableMeta::same_table`]). Empty in tables made before it existed.
    #[serde(default)]
    pub incarnation: String,
    /// Creation time, ms since the epoch.
    pub created_ms: i64,
    /// Last update, ms since the epoch.
    pub updated_ms: i64,
}

impl TableMeta {
    /// Whether `other` describes the same table, not one deleted and made again under
    /// the same name (which may reuse the same Bigtable table id).
    pub fn same_table(&self, other: &TableMeta) -> bool {
        self.store_table == other.store_table
            && self.created_ms == other.created_ms
            && self.incarnation == other.incarnation
    }

    /// The families of the table's Bigtable table.
    pub fn families(&self) -> Vec<&'static str> {
        let mut out = vec![MEASURE_FAMILY, META_FAMILY];
        if self.layout.seal {
            out.push(BLOCK_FAMILY);
        }
        if self.guarded {
            out.push(GUARD_FAMILY);
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
    /// The generation of the stored row the description came from.
    generation: AtomicU64,
    /// When the description was last read or written, ms since the catalog opened.
    fresh_ms: AtomicI64,
    /// Held while the schema grows, so two writers never persist divergent schemas.
    pub(crate) schema_lock: Mutex<()>,
    /// Series locks and high-water marks of the write path.
    pub(crate) series: SeriesLocks,
    /// The buckets with row-form points, for the seal pass.
    pub(crate) unsealed: Unsealed,
    /// The series this process registered in the table's directory.
    pub(crate) directory: Directory,
}

impl TableHandle {
    fn new(meta: TableMeta, generation: u64, now_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            meta: RwLock::new(Arc::new(meta)),
            generation: AtomicU64::new(generation),
            fresh_ms: AtomicI64::new(now_ms),
            schema_lock: Mutex::new(()),
            series: SeriesLocks::default(),
            unsealed: Unsealed::default(),
            directory: Directory::default(),
        })
    }

    /// The current description.
    pub fn meta(&self) -> Arc<TableMeta> {
        match self.meta.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    fn set_meta(&self, meta: TableMeta, generation: u64, now_ms: i64) {
        let mut g = self
            .meta
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = Arc::new(meta);
        self.generation.store(generation, Ordering::Release);
        self.fresh_ms.store(now_ms, Ordering::Release);
    }
}

#[derive(Debug, Default)]
struct State {
    databases: BTreeMap<String, DatabaseInfo>,
    /// The generation of each database's stored row.
    db_generations: BTreeMap<String, u64>,
    tables: BTreeMap<(String, String), Arc<TableHandle>>,
}

/// The catalog over a store.
#[derive(Debug)]
pub struct SeriesCatalog<S> {
    store: Arc<S>,
    state: RwLock<State>,
    /// The time base of [`TableHandle`] freshness.
    opened: Instant,
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
            match store.create_table(CATALOG_TABLE, &[(CATALOG_FAMILY, GcRule::MaxVersions(1))]) {
                // Another front-end created it first.
                Ok(()) | Err(almanac_engine::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let catalog = Self {
            store,
            state: RwLock::new(State::default()),
            opened: Instant::now(),
        };
        catalog.reload(&mut catalog.write())?;
        Ok(catalog)
    }

    /// Milliseconds since the catalog opened: the time base of freshness.
    fn now_ms(&self) -> i64 {
        self.opened.elapsed().as_millis() as i64
    }

    /// Reads the whole catalog again into `st`. Handles of tables still there are
    /// kept (their series locks and marks belong to this process), with the stored
    /// description.
    fn reload(&self, st: &mut State) -> Result<()> {
        let now_ms = self.now_ms();
        let mut next = State::default();
        stored::read_all(self.store.as_ref(), &mut |key, row| {
            if key.starts_with(lease::LEASE_PREFIX) {
                // A seal lease, not a description.
            } else if key.starts_with(b"d/") {
                let d: DatabaseInfo = serde_json::from_slice(&row.json).map_err(corrupt)?;
                next.db_generations.insert(d.name.clone(), row.generation);
                next.databases.insert(d.name.clone(), d);
            } else {
                let t: TableMeta = serde_json::from_slice(&row.json).map_err(corrupt)?;
                let name = (t.database.clone(), t.name.clone());
                let handle = match st.tables.get(&name) {
                    Some(h) if h.meta().same_table(&t) => {
                        h.set_meta(t, row.generation, now_ms);
                        Arc::clone(h)
                    }
                    _ => TableHandle::new(t, row.generation, now_ms),
                };
                next.tables.insert(name, handle);
            }
            Ok(())
        })?;
        *st = next;
        Ok(())
    }

    /// Reads the catalog again first when other processes may have changed it.
    fn reload_if_shared(&self, st: &mut State) -> Result<()> {
        if self.store.other_writers() {
            self.reload(st)?;
        }
        Ok(())
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

    /// Changes a table's description: `change` maps the current description to the
    /// next (`None`: nothing to change), which is written only if the stored row is
    /// still the one it was read from; otherwise the row is read again and `change`
    /// runs on what another front-end wrote. The caller holds the table's schema lock.
    pub(crate) fn change_table(
        &self,
        handle: &TableHandle,
        mut change: impl FnMut(&TableMeta) -> Result<Option<TableMeta>>,
    ) -> Result<Arc<TableMeta>> {
        for _ in 0..MAX_CHANGE_TRIES {
            let current = handle.meta();
            let Some(next) = change(&current)? else {
                return Ok(current);
            };
            let key = table_row(&next.database, &next.name);
            let json = serde_json::to_vec(&next).map_err(corrupt)?;
            let expect = Expect::Generation(handle.generation.load(Ordering::Acquire));
            if let Some(generation) = stored::write_row(self.store.as_ref(), &key, json, expect)? {
                handle.set_meta(next, generation, self.now_ms());
                return Ok(handle.meta());
            }
            self.refresh(handle)?;
        }
        Err(self.contended(&handle.meta().name))
    }

    /// Reads a table's stored description into its handle.
    fn refresh(&self, handle: &TableHandle) -> Result<()> {
        let meta = handle.meta();
        match stored::read_row(self.store.as_ref(), &table_row(&meta.database, &meta.name))? {
            Some(StoredRow { json, generation }) => {
                let fresh: TableMeta = serde_json::from_slice(&json).map_err(corrupt)?;
                // A table deleted and made again elsewhere is another table: its
                // handle (series marks, unsealed buckets, registered series) must not
                // carry over.
                if meta.same_table(&fresh) {
                    handle.set_meta(fresh, generation, self.now_ms());
                    return Ok(());
                }
                Err(Error::NotFound {
                    kind: "table",
                    name: meta.name.clone(),
                })
            }
            None => Err(Error::NotFound {
                kind: "table",
                name: meta.name.clone(),
            }),
        }
    }

    /// The error of a change that lost to other front-ends [`MAX_CHANGE_TRIES`] times.
    fn contended(&self, name: &str) -> Error {
        Error::Contended(format!(
            "{name} was changed by other writers {MAX_CHANGE_TRIES} times while this change was made; try again"
        ))
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
        self.reload_if_shared(&mut st)?;
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
        let rule = retention_rule(&retention);
        let mut meta = TableMeta {
            database: db.into(),
            name: name.into(),
            store_table: String::new(),
            layout: new.layout,
            retention,
            magnetic_writes: new.magnetic_writes,
            partition_key: new.partition_key,
            tags: checked_tags,
            schema: Schema::default(),
            sealed_before_ns: 0,
            summarized: true,
            guarded: self.store.other_writers(),
            indexed: self.store.other_writers(),
            incarnation: String::from_utf8_lossy(&crate::guard::fresh_token()).into_owned(),
            created_ms: now_ms,
            updated_ms: now_ms,
        };
        let families: Vec<(&str, GcRule)> = meta
            .families()
            .into_iter()
            .map(|f| (f, rule.clone()))
            .collect();
        // Another front-end creating a table at once may take the same free id first:
        // then the next free one. Which of the two tables is kept, the catalog row's
        // conditional create decides below.
        for tries_left in (0..MAX_CHANGE_TRIES).rev() {
            meta.store_table = self.store_table_id(&st, db, name)?;
            match self.store.create_table(&meta.store_table, &families) {
                Ok(()) => break,
                Err(almanac_engine::Error::AlreadyExists { .. }) if tries_left > 0 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let json = serde_json::to_vec(&meta).map_err(corrupt)?;
        let key = table_row(db, name);
        let created = stored::write_row(self.store.as_ref(), &key, json, Expect::Absent);
        let Ok(Some(generation)) = created else {
            // Failed, or another front-end created the table first: its store table
            // is another.
            let _ = self.store.delete_table(&meta.store_table);
            created?;
            self.reload(&mut st)?;
            return Err(Error::Conflict {
                kind: "table",
                name: name.into(),
            });
        };
        let handle = TableHandle::new(meta, generation, self.now_ms());
        if !self.store.other_writers() {
            // A new table that only this process writes has no row-form points yet: its
            // first seal pass need not walk it to find them.
            handle.unsealed.found([]);
        }
        let out = handle.meta();
        st.tables.insert((db.into(), name.into()), handle);
        Ok(out)
    }

    /// The live table.
    pub fn table(&self, db: &str, name: &str) -> Result<Arc<TableHandle>> {
        self.table_within(db, name, REFRESH_AFTER)
    }

    /// The live table, its description read again first over a store other
    /// processes write: what DescribeTable and a query's planning see.
    pub fn table_fresh(&self, db: &str, name: &str) -> Result<Arc<TableHandle>> {
        self.table_within(db, name, Duration::ZERO)
    }

    /// The live table, its description read again if it is older than `max_age`
    /// (over a store other processes write).
    fn table_within(&self, db: &str, name: &str, max_age: Duration) -> Result<Arc<TableHandle>> {
        let key = (db.to_string(), name.to_string());
        let cached = self.read().tables.get(&key).cloned();
        if !self.store.other_writers() {
            return cached.ok_or_else(|| missing(&self.read(), db, name));
        }
        // Another front-end may have created, changed or deleted it.
        let reloaded = || {
            let mut st = self.write();
            self.reload(&mut st)?;
            st.tables
                .get(&key)
                .cloned()
                .ok_or_else(|| missing(&st, db, name))
        };
        match cached {
            Some(h)
                if self.now_ms() - h.fresh_ms.load(Ordering::Acquire)
                    < max_age.as_millis() as i64 =>
            {
                Ok(h)
            }
            Some(h) => match self.refresh(&h) {
                Ok(()) => Ok(h),
                Err(Error::NotFound { .. }) => reloaded(),
                Err(e) => Err(e),
            },
            None => reloaded(),
        }
    }

    /// ListTables of a database (all databases when `db` is `None`), after `after`.
    pub fn tables(
        &self,
        db: Option<&str>,
        after: Option<(&str, &str)>,
        max: usize,
    ) -> Result<Vec<Arc<TableMeta>>> {
        if self.store.other_writers() {
            self.reload(&mut self.write())?;
        }
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
                meta.partition_key.clone_from(&partition_key);
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
            if let Some(m) = &magnetic_writes {
                meta.magnetic_writes = m.clone();
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
        mut edit: impl FnMut(&mut TableMeta) -> Result<()>,
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
        self.change_table(&handle, |current| {
            let mut meta = current.clone();
            edit(&mut meta)?;
            Ok(Some(meta))
        })
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
        mut change: impl FnMut(&mut Vec<Tag>) -> Result<()>,
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
        let mut meta = handle.meta();
        let mut deleted = false;
        for _ in 0..MAX_CHANGE_TRIES {
            let generation = handle.generation.load(Ordering::Acquire);
            if stored::delete_row(self.store.as_ref(), &table_row(db, name), generation)? {
                deleted = true;
                break;
            }
            self.refresh(&handle)?;
            meta = handle.meta();
        }
        if !deleted {
            return Err(self.contended(name));
        }
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
