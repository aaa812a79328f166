//! The engine handle: opening a data directory, the catalog of tables, and the
//! admin operations (create/get/list/delete tables, modify families, drop rows).
//!
//! Catalog changes (the [`TableDirectory`]) are copy-on-write: a table's
//! [`TableMeta`] is an `Arc` that writers and readers clone at the start of a
//! request. Writers hold the catalog's read lock while they validate and commit, and
//! admin changes take its write lock, so no write can land in a family or table that
//! is being dropped.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions};

use crate::catalog::{self, FamilyMeta, NEXT_TABLE_ID_KEY, TableMeta};
use crate::clock::{Clock, Rng, SystemClock};
use crate::durability::{Durability, GroupCommit};
use crate::error::{Error, Result};
use crate::keys;
use crate::limits::{
    MAX_FAMILIES_PER_TABLE, MAX_TABLES_PER_INSTANCE, RECOMMENDED_FAMILIES_PER_TABLE,
};
use crate::locks::RowLocks;
use crate::rowset::RowRange;
use crate::schema::{FamilyChange, TableInfo, TableSpec, validate_family_name, validate_table_id};
use crate::warning::{Warning, WarningSink};

/// Values at least this large are stored apart from the keys (fjall's key-value
/// separation), so compactions do not rewrite them and scans over keys stay dense.
const BLOB_THRESHOLD_BYTES: u32 = 16 * 1024;
/// fjall's background workers (flushes and compactions): with more than one, fjall's
/// first worker spins taking and putting back compaction requests while the others
/// compact. Why: ARCHITECTURE.md, Decisions; measurements: docs/benchmarks.md,
/// Measurements behind the defaults.
const STORAGE_WORKER_THREADS: usize = 1;
/// The cells keyspace's memtable (fjall's default: 64 MiB): fewer level-0 tables and
/// compactions under heavy writes, for more memory and a longer replay after a crash.
/// fjall keeps the size a keyspace was created with (older directories keep 64 MiB).
/// Why: ARCHITECTURE.md, Decisions; measurements: docs/benchmarks.md, Measurements
/// behind the defaults.
const MEMTABLE_BYTES: u64 = 256 * 1024 * 1024;
/// The most journal kept on disk: past it, fjall flushes the memtables the oldest
/// journal holds and deletes it. Twice the memtable, so a full memtable and the next
/// one's writes fit; a compaction flushes everything and leaves the journal empty.
const MAX_JOURNAL_BYTES: u64 = 2 * MEMTABLE_BYTES;
/// Deletes issued per batch when purging ranges, to bound memory.
pub(crate) const PURGE_BATCH_KEYS: usize = 10_000;

/// How to open an engine.
pub struct Options {
    /// fsync policy for acknowledged writes.
    pub durability: Durability,
    /// Source of "now" (server timestamps, GC ages).
    pub clock: Arc<dyn Clock>,
    /// Seed of the `row_sample` random source.
    pub rng_seed: u64,
    /// Block cache size in bytes.
    pub cache_bytes: u64,
    /// How often the background sweep reclaims collected cells and dropped data;
    /// `None` runs no background thread (tests call [`Engine::sweep`]), and the row
    /// size survey ([`crate::rowsize`]) runs inside [`Engine::open`] instead.
    pub sweep_interval: Option<Duration>,
    /// Where to report requests that pass a recommended limit ([`crate::warning`]);
    /// `None` drops the warnings. The engine never prints.
    pub on_warning: Option<WarningSink>,
    /// How long a deleted table can be undeleted ([`crate::lifecycle`]); its cells stay
    /// on disk that long. Zero purges at once.
    pub undelete_window: Duration,
    /// Told the duration of each group commit's flush and fsync; `None`: nobody.
    pub on_sync: Option<crate::durability::SyncSink>,
    /// Count reads and writes by key range for Key Visualizer ([`crate::access`]);
    /// engine-wide totals are counted either way.
    pub count_access: bool,
    /// Data writes are refused while the data directory's filesystem has less free
    /// space than this ([`crate::space`]); 0 never refuses.
    pub min_free_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            clock: Arc::new(SystemClock),
            rng_seed: 0x5eed,
            cache_bytes: 256 * 1024 * 1024,
            sweep_interval: Some(Duration::from_secs(60)),
            on_warning: None,
            undelete_window: Duration::from_secs(crate::limits::DEFAULT_UNDELETE_WINDOW_SECS),
            on_sync: None,
            count_access: true,
            min_free_bytes: crate::limits::DEFAULT_MIN_FREE_DISK_BYTES,
        }
    }
}

/// The engine's catalog in memory: tables by instance, then by table id, and the next
/// table id. (The time-series layer's catalog is `SeriesCatalog`, SQL's is `SqlCatalog`.)
#[derive(Debug, Default)]
pub(crate) struct TableDirectory {
    pub tables: HashMap<String, HashMap<String, Arc<TableMeta>>>,
    pub next_table_id: u32,
}

impl TableDirectory {
    pub fn get(&self, instance: &str, table: &str) -> Result<&Arc<TableMeta>> {
        self.tables
            .get(instance)
            .and_then(|t| t.get(table))
            .ok_or_else(|| Error::no_table(table))
    }
}

pub(crate) struct Inner {
    pub db: Database,
    pub cells: Keyspace,
    pub meta: Keyspace,
    /// Change-stream records ([`crate::changes`]).
    pub changes: Keyspace,
    pub change_clock: Arc<crate::changes::ChangeClock>,
    pub catalog: RwLock<TableDirectory>,
    pub clock: Arc<dyn Clock>,
    pub rng: Rng,
    pub locks: RowLocks,
    pub commit: GroupCommit,
    pub sweeper: crate::gc::SweeperControl,
    pub on_warning: Option<WarningSink>,
    /// Bounds on row sizes, in memory ([`crate::rowsize`]).
    pub row_sizes: crate::rowsize::RowSizes,
    /// Lower bounds on each table's cell timestamps, for the GC sweep ([`crate::oldest`]).
    pub oldest: crate::oldest::OldestCells,
    /// [`Options::undelete_window`].
    pub undelete_window: Duration,
    /// Read and write counters, engine-wide and by key range ([`crate::access`]).
    pub access: crate::access::AccessLog,
    pub space: crate::space::SpaceGuard,
}

/// A handle to an open data directory. Cheap to clone; all clones share one engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("durability", &self.inner.commit.policy())
            .finish_non_exhaustive()
    }
}

/// Which rows `drop_rows` deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropRows {
    /// Every row whose key starts with these bytes.
    Prefix(Vec<u8>),
    /// Every row of the table.
    All,
}

impl Engine {
    /// Opens (or creates) the data directory at `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        std::fs::create_dir_all(path.as_ref())?;
        // Under sync and buffer the group commit flushes the journal once per group
        // (`GroupCommit::wait_durable`); fjall's own flush after every batch would be
        // one extra write(2) per request. Under none fjall keeps flushing per batch.
        let db = Database::builder(path.as_ref())
            .cache_size(options.cache_bytes)
            .worker_threads(STORAGE_WORKER_THREADS)
            .manual_journal_persist(options.durability != Durability::None)
            .max_journaling_size(MAX_JOURNAL_BYTES)
            .open()?;
        let cells = db.keyspace("cells", || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(MEMTABLE_BYTES)
                .with_kv_separation(Some(
                    KvSeparationOptions::default().separation_threshold(BLOB_THRESHOLD_BYTES),
                ))
        })?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default)?;
        let changes = db.keyspace("changes", KeyspaceCreateOptions::default)?;
        let change_clock = Arc::new(crate::changes::ChangeClock::after(Self::newest_change(
            &changes,
        )?));
        let catalog = load_catalog(&db, &meta)?;
        let inner = Arc::new(Inner {
            db,
            cells,
            meta,
            changes,
            change_clock,
            catalog: RwLock::new(catalog),
            clock: options.clock,
            rng: Rng::new(options.rng_seed),
            locks: RowLocks::default(),
            commit: GroupCommit::new(options.durability, path.as_ref(), options.on_sync),
            sweeper: crate::gc::SweeperControl::default(),
            on_warning: options.on_warning,
            row_sizes: crate::rowsize::RowSizes::default(),
            oldest: crate::oldest::OldestCells::default(),
            undelete_window: options.undelete_window,
            access: crate::access::AccessLog::new(options.count_access),
            space: crate::space::SpaceGuard::new(
                path.as_ref().to_path_buf(),
                options.min_free_bytes,
            ),
        });
        Self {
            inner: Arc::clone(&inner),
        }
        .abandon_interrupted_copies()?;
        if let Some(every) = options.sweep_interval {
            crate::gc::spawn_sweeper(&inner, every);
            crate::rowsize::spawn_survey(&inner);
        } else {
            crate::rowsize::survey(&inner)?;
        }
        Ok(Self { inner })
    }

    pub(crate) fn catalog(&self) -> Result<RwLockReadGuard<'_, TableDirectory>> {
        self.inner
            .catalog
            .read()
            .map_err(|_| Error::Storage("catalog lock poisoned".into()))
    }

    pub(crate) fn catalog_mut(&self) -> Result<RwLockWriteGuard<'_, TableDirectory>> {
        self.inner
            .catalog
            .write()
            .map_err(|_| Error::Storage("catalog lock poisoned".into()))
    }

    /// The current schema of a table.
    pub(crate) fn table(&self, instance: &str, table: &str) -> Result<Arc<TableMeta>> {
        Ok(Arc::clone(self.catalog()?.get(instance, table)?))
    }

    /// Reports warnings to the sink of [`Options::on_warning`], if there is one.
    pub(crate) fn warn(&self, warnings: &[Warning]) {
        if let Some(sink) = &self.inner.on_warning {
            warnings.iter().for_each(|w| sink(w));
        }
    }

    /// The engine's clock, now.
    pub fn now_us(&self) -> i64 {
        self.inner.clock.now_us()
    }

    /// Creates a table with its initial families.
    pub fn create_table(&self, instance: &str, name: &str, spec: TableSpec) -> Result<TableInfo> {
        validate_table_id(name)?;
        crate::changes::check_retention(spec.change_retention_us)?;
        if spec.families.len() > MAX_FAMILIES_PER_TABLE {
            return Err(Error::limit(
                "column families per table",
                spec.families.len(),
                MAX_FAMILIES_PER_TABLE,
            ));
        }
        let mut families = Vec::with_capacity(spec.families.len());
        for (i, (fname, fspec)) in spec.families.iter().enumerate() {
            validate_family_name(fname)?;
            fspec.gc_rule.validate()?;
            if spec.families[..i].iter().any(|(n, _)| n == fname) {
                return Err(Error::Invalid(format!(
                    "column family {fname:?} is listed twice"
                )));
            }
            families.push(FamilyMeta {
                id: i as u32,
                name: fname.as_str().into(),
                spec: fspec.clone(),
            });
        }
        let mut cat = self.catalog_mut()?;
        let in_instance = cat.tables.get(instance).map_or(0, HashMap::len);
        if cat
            .tables
            .get(instance)
            .is_some_and(|t| t.contains_key(name))
        {
            return Err(Error::AlreadyExists {
                kind: "table",
                name: name.to_owned(),
            });
        }
        if in_instance >= MAX_TABLES_PER_INSTANCE {
            return Err(Error::Exhausted(format!(
                "instance {instance} has {in_instance} tables, the limit of {MAX_TABLES_PER_INSTANCE}"
            )));
        }
        let meta = TableMeta {
            id: 0, // assigned by install_with_new_id
            instance: instance.to_owned(),
            name: name.to_owned(),
            granularity: spec.granularity,
            next_family_id: families.len() as u32,
            families,
            deletion_protection: spec.deletion_protection,
            change_retention_us: spec.change_retention_us,
        };
        let warning = many_families(&meta);
        let info = self.install_with_new_id(&mut cat, meta, None)?;
        drop(cat);
        self.warn(&warning);
        Ok(info)
    }

    /// Gives `meta` the next table id, writes its record, the advanced id counter and
    /// (when a table's old id is retired) a purge marker in one batch, then publishes
    /// it in the catalog.
    fn install_with_new_id(
        &self,
        cat: &mut TableDirectory,
        mut meta: TableMeta,
        retired: Option<u32>,
    ) -> Result<TableInfo> {
        meta.id = cat.next_table_id;
        // A fresh id has no cells yet; no write reaches it before it is published.
        self.inner.oldest.created(meta.id);
        let mut batch = self.inner.db.batch();
        batch.insert(
            &self.inner.meta,
            meta.meta_key(),
            catalog::encode_table(&meta),
        );
        batch.insert(
            &self.inner.meta,
            NEXT_TABLE_ID_KEY,
            (meta.id + 1).to_be_bytes().to_vec(),
        );
        if let Some(old) = retired {
            batch.insert(&self.inner.meta, catalog::dead_table_key(old), Vec::new());
        }
        self.commit(batch)?;
        cat.next_table_id = meta.id + 1;
        let info = meta.info();
        cat.tables
            .entry(meta.instance.clone())
            .or_default()
            .insert(meta.name.clone(), Arc::new(meta));
        Ok(info)
    }

    /// A table's schema.
    pub fn get_table(&self, instance: &str, name: &str) -> Result<TableInfo> {
        Ok(self.table(instance, name)?.info())
    }

    /// The tables of an instance, sorted by name.
    pub fn list_tables(&self, instance: &str) -> Result<Vec<TableInfo>> {
        let cat = self.catalog()?;
        let mut out: Vec<TableInfo> = cat
            .tables
            .get(instance)
            .map(|t| t.values().map(|m| m.info()).collect())
            .unwrap_or_default();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The instances that have at least one table, sorted.
    pub fn list_instances(&self) -> Result<Vec<String>> {
        let cat = self.catalog()?;
        let mut out: Vec<String> = cat
            .tables
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, _)| i.clone())
            .collect();
        out.sort();
        Ok(out)
    }

    /// Deletes a table (refused while it is protected). It can be undeleted for
    /// [`Options::undelete_window`], then its cells are purged in the background; a
    /// table of the same name deleted earlier goes for good.
    pub fn delete_table(&self, instance: &str, name: &str) -> Result<()> {
        let mut cat = self.catalog_mut()?;
        let meta = Arc::clone(cat.get(instance, name)?);
        crate::lifecycle::refuse_protected(&meta, "deleting it")?;
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, meta.meta_key());
        let deleted = crate::lifecycle::deleted_key(instance, name);
        if let Some(earlier) = self.inner.meta.get(&deleted)? {
            let (_, earlier) = crate::lifecycle::decode_deleted(&deleted, &earlier)?;
            batch.insert(
                &self.inner.meta,
                catalog::dead_table_key(earlier.id),
                Vec::new(),
            );
        }
        if self.inner.undelete_window.is_zero() {
            batch.remove(&self.inner.meta, deleted);
            batch.insert(
                &self.inner.meta,
                catalog::dead_table_key(meta.id),
                Vec::new(),
            );
        } else {
            let record = crate::lifecycle::encode_deleted(self.now_us(), &meta);
            batch.insert(&self.inner.meta, deleted, record);
        }
        self.commit(batch)?;
        if let Some(t) = cat.tables.get_mut(instance) {
            t.remove(name);
        }
        self.inner.sweeper.wake();
        Ok(())
    }

    /// Applies family changes in order, all or nothing.
    pub fn modify_families(
        &self,
        instance: &str,
        name: &str,
        changes: &[FamilyChange],
    ) -> Result<TableInfo> {
        let mut cat = self.catalog_mut()?;
        let old = Arc::clone(cat.get(instance, name)?);
        let mut meta = (*old).clone();
        let mut dropped = Vec::new();
        for change in changes {
            match change {
                FamilyChange::Create(fname, spec) => {
                    validate_family_name(fname)?;
                    spec.gc_rule.validate()?;
                    if meta.family(fname).is_some() {
                        return Err(Error::AlreadyExists {
                            kind: "column family",
                            name: fname.clone(),
                        });
                    }
                    if meta.families.len() >= MAX_FAMILIES_PER_TABLE {
                        return Err(Error::limit(
                            "column families per table",
                            meta.families.len() + 1,
                            MAX_FAMILIES_PER_TABLE,
                        ));
                    }
                    meta.families.push(FamilyMeta {
                        id: meta.next_family_id,
                        name: fname.as_str().into(),
                        spec: spec.clone(),
                    });
                    meta.next_family_id = meta.next_family_id.checked_add(1).ok_or_else(|| {
                        Error::Exhausted(format!("table {name} has used up its family ids"))
                    })?;
                }
                FamilyChange::Update(fname, rule) => {
                    rule.validate()?;
                    let f = meta
                        .families
                        .iter_mut()
                        .find(|f| &*f.name == fname)
                        .ok_or_else(|| Error::no_family(fname))?;
                    f.spec.gc_rule = rule.clone();
                }
                FamilyChange::SetValueType(fname, value_type) => {
                    let f = meta
                        .families
                        .iter()
                        .find(|f| &*f.name == fname)
                        .ok_or_else(|| Error::no_family(fname))?;
                    if f.spec.value_type != *value_type {
                        return Err(Error::Invalid(format!(
                            "column family {fname} holds {}; a family's value type is set when \
                             it is created and cannot change to {}",
                            f.spec.value_type.describe(),
                            value_type.describe()
                        )));
                    }
                }
                FamilyChange::Drop(fname) => {
                    crate::lifecycle::refuse_protected(
                        &meta,
                        &format!("dropping column family {fname}"),
                    )?;
                    let at = meta
                        .families
                        .iter()
                        .position(|f| &*f.name == fname)
                        .ok_or_else(|| Error::no_family(fname))?;
                    dropped.push(meta.families.remove(at).id);
                }
            }
        }
        let mut batch = self.inner.db.batch();
        batch.insert(
            &self.inner.meta,
            meta.meta_key(),
            catalog::encode_table(&meta),
        );
        for fid in &dropped {
            batch.insert(
                &self.inner.meta,
                catalog::dead_family_key(meta.id, *fid),
                Vec::new(),
            );
        }
        self.commit(batch)?;
        let info = meta.info();
        let created = changes
            .iter()
            .any(|c| matches!(c, FamilyChange::Create(..)));
        let warning = if created {
            many_families(&meta)
        } else {
            Vec::new()
        };
        cat.tables
            .entry(instance.to_owned())
            .or_default()
            .insert(name.to_owned(), Arc::new(meta));
        drop(cat);
        if !dropped.is_empty() {
            self.inner.sweeper.wake();
        }
        self.warn(&warning);
        Ok(info)
    }

    /// Deletes rows by key prefix, or all rows. Dropping all rows is instant: the
    /// table moves to a fresh id and the old id's cells are purged in the background.
    pub fn drop_rows(&self, instance: &str, name: &str, which: &DropRows) -> Result<()> {
        match which {
            DropRows::All => {
                let mut cat = self.catalog_mut()?;
                let old = Arc::clone(cat.get(instance, name)?);
                self.install_with_new_id(&mut cat, (*old).clone(), Some(old.id))?;
                self.inner.sweeper.wake();
                Ok(())
            }
            DropRows::Prefix(prefix) => {
                if prefix.is_empty() {
                    return Err(Error::Invalid(
                        "row key prefix to drop must not be empty".into(),
                    ));
                }
                // Hold the catalog read lock so the table cannot be re-keyed under us.
                let cat = self.catalog()?;
                let meta = Arc::clone(cat.get(instance, name)?);
                let (lo, hi) = encoded_range(meta.id, &RowRange::prefix(prefix));
                self.purge_range(&lo, &hi, |_| true)?;
                Ok(())
            }
        }
    }

    /// Deletes every key in `[lo, hi)` that `keep_going` accepts, in batches.
    pub(crate) fn purge_range(
        &self,
        lo: &[u8],
        hi: &[u8],
        select: impl Fn(&[u8]) -> bool,
    ) -> Result<u64> {
        let mut removed = 0u64;
        let mut from = lo.to_vec();
        loop {
            let snapshot = self.inner.db.snapshot();
            let mut batch = self.inner.db.batch();
            let mut n = 0usize;
            let mut last = None;
            for guard in fjall::Readable::range(&snapshot, &self.inner.cells, from.as_slice()..hi) {
                let key = guard.key()?;
                if select(&key) {
                    batch.remove(&self.inner.cells, key.clone());
                    n += 1;
                }
                last = Some(key);
                if n >= PURGE_BATCH_KEYS {
                    break;
                }
            }
            removed += n as u64;
            let full = n >= PURGE_BATCH_KEYS;
            self.commit(batch)?;
            match (full, last) {
                (true, Some(k)) => {
                    from = k.to_vec();
                    from.push(0);
                }
                _ => return Ok(removed),
            }
        }
    }

    /// Commits a batch and waits until the fsync policy says it is durable.
    pub(crate) fn commit(&self, batch: fjall::OwnedWriteBatch) -> Result<()> {
        batch.commit()?;
        self.inner.commit.wait_durable(&self.inner.db)
    }

    /// Waits until every write committed before this call is durable by the fsync
    /// policy (one group commit covers all of them): what [`crate::write::Unsynced`]
    /// results need before they are acknowledged.
    pub fn sync(&self) -> Result<()> {
        self.inner.commit.wait_durable(&self.inner.db)
    }

    /// Bytes of the write-ahead journal on disk (part of [`Engine::disk_space`]).
    pub fn journal_space(&self) -> Result<u64> {
        Ok(self.inner.db.journal_disk_space()?)
    }

    /// Bytes held in memtables (written, not yet flushed to tables).
    pub fn memtable_space(&self) -> u64 {
        self.inner.db.write_buffer_size()
    }

    /// Bytes the data directory takes on disk (journal and tables).
    pub fn disk_space(&self) -> Result<u64> {
        Ok(self.inner.db.disk_space()?)
    }

    /// Writes memtables out to table files and waits: after this, `disk_space`
    /// measures data in its settled, compressed form (benchmarks use it).
    pub fn flush(&self) -> Result<()> {
        self.inner.db.persist(fjall::PersistMode::SyncAll)?;
        self.inner.cells.rotate_memtable_and_wait()?;
        self.inner.meta.rotate_memtable_and_wait()?;
        self.inner.changes.rotate_memtable_and_wait()?;
        Ok(())
    }

    /// Flushes, then rewrites the cell tables into one sorted run (a major
    /// compaction), dropping overwritten and deleted versions: the settled size that
    /// benchmarks report as bytes on disk.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.inner.cells.major_compact()?;
        // fjall deletes the table files a compaction replaced at its next version
        // maintenance, which a memtable rotation runs; a server that goes idle after
        // compacting would keep them (a sealed TSBS day stayed at 44 bytes a point
        // instead of about 10; docs/benchmarks.md). Counting compactions is that write.
        let count = self
            .inner
            .meta
            .get(catalog::COMPACTIONS_KEY)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map_or(0, u64::from_be_bytes);
        self.inner
            .meta
            .insert(catalog::COMPACTIONS_KEY, (count + 1).to_be_bytes())?;
        self.inner.meta.rotate_memtable_and_wait()?;
        Ok(())
    }

    /// Flushes everything to disk and stops the background sweep.
    pub fn shutdown(&self) -> Result<()> {
        self.inner.sweeper.stop();
        self.inner.db.persist(fjall::PersistMode::SyncAll)?;
        Ok(())
    }
}

/// The warning for a table with more families than Bigtable recommends, if it has.
fn many_families(meta: &TableMeta) -> Vec<Warning> {
    if meta.families.len() <= RECOMMENDED_FAMILIES_PER_TABLE {
        return Vec::new();
    }
    vec![Warning::ManyFamilies {
        table: meta.resource_name(),
        families: meta.families.len(),
    }]
}

/// A row range as bounds on encoded keys of table `table_id`: `[lo, hi)`.
pub(crate) fn encoded_range(table_id: u32, r: &RowRange) -> (Vec<u8>, Vec<u8>) {
    use std::ops::Bound;
    let lo = match &r.start {
        Bound::Unbounded => keys::table_prefix(table_id),
        Bound::Included(k) => keys::row_prefix(table_id, k),
        Bound::Excluded(k) => keys::row_end(table_id, k),
    };
    let hi = match &r.end {
        Bound::Unbounded => keys::table_end(table_id),
        Bound::Included(k) => keys::row_end(table_id, k),
        Bound::Excluded(k) => keys::row_prefix(table_id, k),
    };
    (lo, hi)
}

fn load_catalog(db: &Database, meta: &Keyspace) -> Result<TableDirectory> {
    let snapshot = db.snapshot();
    let mut cat = TableDirectory::default();
    if let Some(v) = fjall::Readable::get(&snapshot, meta, NEXT_TABLE_ID_KEY)? {
        let b: [u8; 4] = (*v)
            .try_into()
            .map_err(|_| Error::Corrupt("table id counter".into()))?;
        cat.next_table_id = u32::from_be_bytes(b);
    }
    for guard in fjall::Readable::prefix(&snapshot, meta, b"t") {
        let (k, v) = guard.into_inner()?;
        let t = catalog::decode_table(&k, &v)?;
        if t.id >= cat.next_table_id {
            return Err(Error::Corrupt(format!(
                "table {} has id {} past the counter",
                t.name, t.id
            )));
        }
        cat.tables
            .entry(t.instance.clone())
            .or_default()
            .insert(t.name.clone(), Arc::new(t));
    }
    Ok(cat)
}
