//! The narrow slice of a Bigtable that the time-series layer needs, as a trait shaped by
//! the Bigtable Data and Table Admin APIs (so a remote implementation over gRPC is a
//! direct translation): tables with families and GC rules, row-atomic batched
//! mutations with per-row results, conditional row mutations, and reads of row sets
//! with a filter.
//!
//! [`EmbeddedStore`] implements it on the in-process engine; `almanac-remote`'s
//! `RemoteStore` over a remote Bigtable's gRPC APIs.

use std::ops::ControlFlow;
use std::sync::Arc;

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::{Mutation, ReadModifyWriteRule};
use almanac_engine::rowset::RowRange;
use almanac_engine::schema::{FamilyChange, FamilySpec, GcRule, Granularity, TableInfo, TableSpec};
use almanac_engine::{Engine, ReadRequest, Row, RowMutations};

/// Result of store calls: the engine's error type, which a remote store maps gRPC
/// statuses onto.
pub type StoreResult<T> = almanac_engine::Result<T>;

/// The rows of a read, pulled one at a time ([`WideColumnStore::read_stream`]).
pub type RowIter = Box<dyn Iterator<Item = StoreResult<Row>> + Send>;

/// What the time-series layer needs of a Bigtable.
pub trait WideColumnStore: Send + Sync + 'static {
    /// The instance the tables live in (`projects/P/instances/I`).
    fn instance(&self) -> &str;
    /// CreateTable with these families (name, GC rule); millisecond granularity.
    fn create_table(&self, table: &str, families: &[(&str, GcRule)]) -> StoreResult<()>;
    /// DeleteTable.
    fn delete_table(&self, table: &str) -> StoreResult<()>;
    /// Whether the table exists (GetTable).
    fn table_exists(&self, table: &str) -> StoreResult<bool>;
    /// GetTable with its schema: families (GC rules, value types) and timestamp
    /// granularity; `None` if the table does not exist.
    fn get_table(&self, table: &str) -> StoreResult<Option<TableInfo>>;
    /// ListTables: the names of the instance's tables, sorted.
    fn list_tables(&self) -> StoreResult<Vec<String>>;
    /// ModifyColumnFamilies: replace a family's GC rule.
    fn set_gc_rule(&self, table: &str, family: &str, rule: GcRule) -> StoreResult<()>;
    /// The store's clock in µs, as its GC rules judge cell ages.
    fn now_us(&self) -> i64;
    /// MutateRows: each entry applies atomically; one result per entry. (The embedded
    /// engine also applies a whole batch as one journal record, which makes a seal
    /// atomic; see [`crate::seal`] for what another store would show after a crash.)
    fn mutate_rows(&self, table: &str, rows: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>>;
    /// [`WideColumnStore::mutate_rows`] that returns once the rows are visible to reads,
    /// before they are durable: the caller must call [`WideColumnStore::sync`] before it
    /// acknowledges them. This lets a writer release its locks before the fsync, so
    /// writers that wait for one sync do not wait for each other. A store whose writes
    /// are durable on return (a remote Bigtable) keeps the default.
    fn mutate_rows_unsynced(
        &self,
        table: &str,
        rows: &[RowMutations],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        self.mutate_rows(table, rows)
    }
    /// Makes every write this store has returned durable.
    fn sync(&self) -> StoreResult<()> {
        Ok(())
    }
    /// CheckAndMutateRow: if `predicate` (`None`: any cell) outputs a cell of row `key`,
    /// applies `on_match`, else `on_miss`, atomically and durably; returns whether it
    /// matched. What writers in several processes agree through.
    fn check_and_mutate(
        &self,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> StoreResult<bool>;
    /// Several [`WideColumnStore::check_and_mutate`]s, each on its own row and judged
    /// alone; one result per entry, in order. A remote store sends them at once, so a
    /// batch costs one round trip.
    fn check_and_mutate_rows(
        &self,
        table: &str,
        rows: &[Conditional],
    ) -> StoreResult<Vec<StoreResult<bool>>> {
        Ok(rows
            .iter()
            .map(|r| {
                self.check_and_mutate(table, &r.key, r.predicate.as_ref(), &r.on_match, &r.on_miss)
            })
            .collect())
    }
    /// Whether processes other than this one may change the store's tables (a
    /// remote Bigtable shared by front-ends): then what is cached of them must be read
    /// again before it is trusted.
    fn other_writers(&self) -> bool {
        false
    }
    /// How many write requests are worth running at once: one a core for a store that
    /// computes in the caller's thread (the default); more for one whose writes wait on
    /// the network.
    fn write_concurrency(&self) -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }
    /// ReadModifyWriteRow: appends to or increments the latest cell of each rule's
    /// column, atomically; returns the row with the new cells of the changed columns.
    fn read_modify_write(
        &self,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row>;
    /// SampleRowKeys: `(row key, bytes of the table before it)` pairs that split the
    /// table into pieces of roughly equal size, in key order, the last one the empty
    /// key (the end of the table) with the table's size.
    fn sample_row_keys(&self, table: &str) -> StoreResult<Vec<(Vec<u8>, u64)>>;
    /// ReadRows: rows in key order (or reversed), each passed to `visit` until it
    /// returns `Break`.
    fn read_rows(
        &self,
        table: &str,
        req: ReadRequest,
        visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
    ) -> StoreResult<()>;
    /// ReadRows as rows the caller pulls, for a reader that walks two reads side by
    /// side; dropping the iterator ends the read.
    fn read_stream(&self, table: &str, req: ReadRequest) -> StoreResult<RowIter>;
    /// Several short reads (mind their limits: each is read whole), one list of rows
    /// per request, in order. A remote store sends them at once, so a batch costs one
    /// round trip.
    fn read_many(&self, table: &str, reqs: &[ReadRequest]) -> StoreResult<Vec<Vec<Row>>> {
        reqs.iter()
            .map(|req| self.read_stream(table, req.clone())?.collect())
            .collect()
    }
}

/// One row's conditional change, as CheckAndMutateRow takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conditional {
    /// The row.
    pub key: Vec<u8>,
    /// `None`: any cell of the row.
    pub predicate: Option<RowFilter>,
    /// Applied when the predicate outputs a cell.
    pub on_match: Vec<Mutation>,
    /// Applied when it outputs none.
    pub on_miss: Vec<Mutation>,
}

/// A store chosen at run time: the embedded engine or a remote Bigtable. The layers
/// above the time-series layer hold this, so none of them names a store.
pub type SharedStore = Arc<dyn WideColumnStore>;

impl WideColumnStore for SharedStore {
    fn instance(&self) -> &str {
        self.as_ref().instance()
    }
    fn create_table(&self, table: &str, families: &[(&str, GcRule)]) -> StoreResult<()> {
        self.as_ref().create_table(table, families)
    }
    fn delete_table(&self, table: &str) -> StoreResult<()> {
        self.as_ref().delete_table(table)
    }
    fn table_exists(&self, table: &str) -> StoreResult<bool> {
        self.as_ref().table_exists(table)
    }
    fn get_table(&self, table: &str) -> StoreResult<Option<TableInfo>> {
        self.as_ref().get_table(table)
    }
    fn list_tables(&self) -> StoreResult<Vec<String>> {
        self.as_ref().list_tables()
    }
    fn set_gc_rule(&self, table: &str, family: &str, rule: GcRule) -> StoreResult<()> {
        self.as_ref().set_gc_rule(table, family, rule)
    }
    fn now_us(&self) -> i64 {
        self.as_ref().now_us()
    }
    fn mutate_rows(&self, table: &str, rows: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        self.as_ref().mutate_rows(table, rows)
    }
    fn mutate_rows_unsynced(
        &self,
        table: &str,
        rows: &[RowMutations],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        self.as_ref().mutate_rows_unsynced(table, rows)
    }
    fn sync(&self) -> StoreResult<()> {
        self.as_ref().sync()
    }
    fn check_and_mutate(
        &self,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> StoreResult<bool> {
        self.as_ref()
            .check_and_mutate(table, key, predicate, on_match, on_miss)
    }
    fn check_and_mutate_rows(
        &self,
        table: &str,
        rows: &[Conditional],
    ) -> StoreResult<Vec<StoreResult<bool>>> {
        self.as_ref().check_and_mutate_rows(table, rows)
    }
    fn write_concurrency(&self) -> usize {
        self.as_ref().write_concurrency()
    }
    fn other_writers(&self) -> bool {
        self.as_ref().other_writers()
    }
    fn read_rows(
        &self,
        table: &str,
        req: ReadRequest,
        visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
    ) -> StoreResult<()> {
        self.as_ref().read_rows(table, req, visit)
    }
    fn read_stream(&self, table: &str, req: ReadRequest) -> StoreResult<RowIter> {
        self.as_ref().read_stream(table, req)
    }
    fn read_many(&self, table: &str, reqs: &[ReadRequest]) -> StoreResult<Vec<Vec<Row>>> {
        self.as_ref().read_many(table, reqs)
    }
    fn read_modify_write(
        &self,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row> {
        self.as_ref().read_modify_write(table, key, rules)
    }
    fn sample_row_keys(&self, table: &str) -> StoreResult<Vec<(Vec<u8>, u64)>> {
        self.as_ref().sample_row_keys(table)
    }
}

/// The embedded engine as a [`WideColumnStore`], with every table in one instance.
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    engine: Arc<Engine>,
    instance: String,
}

impl EmbeddedStore {
    /// Tables live in `instance` (e.g. `projects/almanac/instances/timestream`).
    pub fn new(engine: Arc<Engine>, instance: impl Into<String>) -> Self {
        Self {
            engine,
            instance: instance.into(),
        }
    }

    /// This store as the layers above hold one.
    pub fn shared(self) -> Arc<SharedStore> {
        Arc::new(Arc::new(self))
    }

    /// The engine below.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
}

impl WideColumnStore for EmbeddedStore {
    fn instance(&self) -> &str {
        &self.instance
    }

    fn create_table(&self, table: &str, families: &[(&str, GcRule)]) -> StoreResult<()> {
        let spec = TableSpec {
            families: families
                .iter()
                .map(|(name, rule)| {
                    (
                        name.to_string(),
                        FamilySpec {
                            gc_rule: rule.clone(),
                            ..FamilySpec::default()
                        },
                    )
                })
                .collect(),
            granularity: Granularity::Millis,
            deletion_protection: false,
            change_retention_us: None,
        };
        self.engine
            .create_table(&self.instance, table, spec)
            .map(drop)
    }

    fn delete_table(&self, table: &str) -> StoreResult<()> {
        self.engine.delete_table(&self.instance, table)
    }

    fn table_exists(&self, table: &str) -> StoreResult<bool> {
        Ok(self.get_table(table)?.is_some())
    }

    fn get_table(&self, table: &str) -> StoreResult<Option<TableInfo>> {
        match self.engine.get_table(&self.instance, table) {
            Ok(info) => Ok(Some(info)),
            Err(almanac_engine::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list_tables(&self) -> StoreResult<Vec<String>> {
        Ok(self
            .engine
            .list_tables(&self.instance)?
            .into_iter()
            .map(|t| t.name)
            .collect())
    }

    fn set_gc_rule(&self, table: &str, family: &str, rule: GcRule) -> StoreResult<()> {
        self.engine
            .modify_families(
                &self.instance,
                table,
                &[FamilyChange::Update(family.to_string(), rule)],
            )
            .map(drop)
    }

    fn now_us(&self) -> i64 {
        self.engine.now_us()
    }

    fn mutate_rows(&self, table: &str, rows: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        self.engine.mutate_rows(&self.instance, table, rows)
    }

    fn mutate_rows_unsynced(
        &self,
        table: &str,
        rows: &[RowMutations],
    ) -> StoreResult<Vec<StoreResult<()>>> {
        // The engine's warnings are logged now; the caller's `sync` still precedes
        // any acknowledgement.
        Ok(self
            .engine
            .mutate_rows_unsynced(&self.instance, table, rows)?
            .synced_by_caller(&self.engine))
    }

    fn sync(&self) -> StoreResult<()> {
        self.engine.sync()
    }

    fn check_and_mutate(
        &self,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> StoreResult<bool> {
        self.engine
            .check_and_mutate(&self.instance, table, key, predicate, on_match, on_miss)
    }

    fn read_rows(
        &self,
        table: &str,
        req: ReadRequest,
        visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
    ) -> StoreResult<()> {
        for row in self.engine.read_rows(&self.instance, table, req)? {
            if visit(row?).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn read_stream(&self, table: &str, req: ReadRequest) -> StoreResult<RowIter> {
        Ok(Box::new(self.engine.read_rows(
            &self.instance,
            table,
            req,
        )?))
    }

    fn read_modify_write(
        &self,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row> {
        self.engine
            .read_modify_write(&self.instance, table, key, rules)
    }

    fn sample_row_keys(&self, table: &str) -> StoreResult<Vec<(Vec<u8>, u64)>> {
        self.engine
            .sample_row_keys(&self.instance, table, &RowRange::all())
    }
}
