//! Almanac's time-series layer: Timestream's data model (databases, tables with
//! retention, records with dimensions, measures, time and version, schema inferred on
//! write) stored in the four patterns of Google's "Schema design for time series data"
//! for Bigtable, over any [`WideColumnStore`] (the embedded engine's
//! [`EmbeddedStore`], or a remote Bigtable through `almanac-remote`).
//!
//! A WriteRecords request, step by step (details in [`write`]):
//! 1. [`TimeSeries::write_records`] finds the table in the [`catalog::SeriesCatalog`] (cached;
//!    persisted in the store's `_catalog` table, each change conditional on the row's
//!    generation so front-ends sharing a remote store agree).
//! 2. Each record is merged with `CommonAttributes` and checked alone
//!    ([`validate`]), then against retention; names join the table's [`schema`].
//! 3. Each point gets its row key ([`keys`]) and cells ([`rows`]) per the table's
//!    [`layout::Pattern`]; versions are resolved against stored points under series
//!    locks ([`series`]); changed rows go down in one MutateRows.
//! 4. The locks are released, then the store's sync (group commit) makes the rows
//!    durable before the answer ([`TimeSeries::write_records_unsynced`] leaves that
//!    last step to a caller that wants to do other work first).
//!
//! A read ([`query`]) turns a selection (measure, dimensions, time) into key ranges
//! and a filter, and decodes rows back into [`model::Point`]s.
//!
//! A seal pass ([`seal`]) rewrites each closed hour of a series into one compressed
//! block ([`block`]); reads decode blocks like rows, writes into a sealed hour rewrite
//! its block.
//!
//! Invariants: a stored point is never half-written (one row mutation each); a
//! measure name or attribute keeps its first type; the schema is persisted before
//! any row that needs it; a point is only replaced by a higher version.

pub mod block;
mod catalog;
mod codec;
pub mod directory;
mod error;
mod guard;
mod keys;
pub mod layout;
pub mod limits;
pub mod model;
mod partition;
pub mod query;
mod rows;
mod schema;
mod seal;
mod series;
mod store;
mod tags;
mod unsealed;
mod validate;
mod write;

use std::ops::ControlFlow;
use std::sync::Arc;

use almanac_engine::clock::Clock;

pub use catalog::{NewTable, REFRESH_AFTER, TableMeta};
pub use error::{Error, Result};
pub use layout::{Layout, Pattern};
pub use model::{
    DatabaseInfo, Dimension, DimensionPair, Ingested, MagneticWrites, MeasureType, MeasureValue,
    Measures, Point, Record, RejectedRecord, Retention, TimeUnit, Value,
};
pub use partition::TableSchema;
pub use query::{ScanStats, Selection};
pub use seal::SealStats;
pub use store::{Conditional, EmbeddedStore, RowIter, SharedStore, StoreResult, WideColumnStore};
pub use tags::{Resource, Tag, check as check_tags};
pub use write::WriteOutcome;

/// The Bigtable instance that holds the time-series tables of `almanac serve`.
pub const DEFAULT_INSTANCE: &str = "projects/almanac/instances/timestream";

/// The time-series service over a store.
pub struct TimeSeries<S> {
    catalog: catalog::SeriesCatalog<S>,
    clock: Arc<dyn Clock>,
}

impl<S> std::fmt::Debug for TimeSeries<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimeSeries").finish_non_exhaustive()
    }
}

impl<S: WideColumnStore> TimeSeries<S> {
    /// Opens the catalog in `store`; `clock` decides retention windows and timestamps.
    pub fn open(store: Arc<S>, clock: Arc<dyn Clock>) -> Result<Self> {
        Ok(Self {
            catalog: catalog::SeriesCatalog::open(store)?,
            clock,
        })
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_us().div_euclid(1000)
    }

    /// The store below.
    pub fn store(&self) -> &Arc<S> {
        self.catalog.store()
    }

    /// CreateDatabase.
    pub fn create_database(&self, name: &str, kms_key_id: Option<String>) -> Result<DatabaseInfo> {
        self.create_database_tagged(name, kms_key_id, Vec::new())
    }

    /// CreateDatabase with `Tags`.
    pub fn create_database_tagged(
        &self,
        name: &str,
        kms_key_id: Option<String>,
        tags: Vec<Tag>,
    ) -> Result<DatabaseInfo> {
        self.catalog
            .create_database(name, kms_key_id, tags, self.now_ms())
    }

    /// ListTagsForResource.
    pub fn tags(&self, resource: &Resource) -> Result<Vec<Tag>> {
        self.catalog.tags(resource)
    }

    /// TagResource.
    pub fn tag_resource(&self, resource: &Resource, tags: Vec<Tag>) -> Result<()> {
        self.catalog
            .change_tags(resource, |current| tags::add(current, tags.clone()))
    }

    /// UntagResource.
    pub fn untag_resource(&self, resource: &Resource, keys: &[String]) -> Result<()> {
        self.catalog
            .change_tags(resource, |current| tags::remove(current, keys))
    }

    /// DescribeDatabase.
    pub fn describe_database(&self, name: &str) -> Result<DatabaseInfo> {
        self.catalog.database(name)
    }

    /// ListDatabases after a name (exclusive).
    pub fn list_databases(&self, after: Option<&str>, max: usize) -> Result<Vec<DatabaseInfo>> {
        self.catalog.databases(after, max)
    }

    /// UpdateDatabase.
    pub fn update_database(&self, name: &str, kms_key_id: String) -> Result<DatabaseInfo> {
        self.catalog
            .update_database(name, kms_key_id, self.now_ms())
    }

    /// DeleteDatabase (must be empty).
    pub fn delete_database(&self, name: &str) -> Result<()> {
        self.catalog.delete_database(name)
    }

    /// CreateTable.
    pub fn create_table(&self, db: &str, name: &str, new: NewTable) -> Result<Arc<TableMeta>> {
        self.catalog.create_table(db, name, new, self.now_ms())
    }

    /// DescribeTable.
    pub fn describe_table(&self, db: &str, name: &str) -> Result<Arc<TableMeta>> {
        Ok(self.catalog.table_fresh(db, name)?.meta())
    }

    /// ListTables (of one database, or of all), after `(db, table)` (exclusive).
    pub fn list_tables(
        &self,
        db: Option<&str>,
        after: Option<(&str, &str)>,
        max: usize,
    ) -> Result<Vec<Arc<TableMeta>>> {
        self.catalog.tables(db, after, max)
    }

    /// UpdateTable.
    pub fn update_table(
        &self,
        db: &str,
        name: &str,
        retention: Option<Retention>,
        magnetic_writes: Option<MagneticWrites>,
        partition_key: Option<TableSchema>,
    ) -> Result<Arc<TableMeta>> {
        self.catalog.update_table(
            db,
            name,
            retention,
            magnetic_writes,
            partition_key,
            self.now_ms(),
        )
    }

    /// DeleteTable.
    pub fn delete_table(&self, db: &str, name: &str) -> Result<()> {
        self.catalog.delete_table(db, name)
    }

    /// WriteRecords: writes the good records; `Err(Error::Rejected)` lists the others.
    pub fn write_records(
        &self,
        db: &str,
        table: &str,
        common: Option<&Record>,
        records: &[Record],
    ) -> Result<Ingested> {
        self.write_records_outcome(db, table, common, records)?
            .into_result()
    }

    /// Like [`TimeSeries::write_records`], but returns both counts and rejections.
    pub fn write_records_outcome(
        &self,
        db: &str,
        table: &str,
        common: Option<&Record>,
        records: &[Record],
    ) -> Result<WriteOutcome> {
        let out = self.write_records_unsynced(db, table, common, records)?;
        self.sync()?;
        Ok(out)
    }

    /// [`TimeSeries::write_records_outcome`] that returns once the records are
    /// visible, before they are durable: the caller must call [`TimeSeries::sync`]
    /// before it reports the outcome. A server uses this to bound the requests that
    /// use CPU at once without counting the ones that only wait for their fsync.
    pub fn write_records_unsynced(
        &self,
        db: &str,
        table: &str,
        common: Option<&Record>,
        records: &[Record],
    ) -> Result<WriteOutcome> {
        let handle = self.catalog.table(db, table)?;
        let now_ns = self.clock.now_us().saturating_mul(1000);
        write::write_records(&self.catalog, &handle, common, records, now_ns)
    }

    /// Waits until every write returned so far is durable (the store's group commit).
    pub fn sync(&self) -> Result<()> {
        Ok(self.catalog.store().sync()?)
    }

    /// Seals the closed buckets of one table ([`seal`]).
    pub fn seal(&self, db: &str, table: &str) -> Result<seal::SealStats> {
        self.seal_table(db, table, 0)
    }

    fn seal_table(&self, db: &str, table: &str, quiet_ns: i64) -> Result<seal::SealStats> {
        let handle = self.catalog.table(db, table)?;
        let now_ns = self.clock.now_us().saturating_mul(1000);
        seal::seal_table(&self.catalog, &handle, now_ns, quiet_ns)
    }

    /// Seals the closed buckets of every table that seals.
    pub fn seal_all(&self) -> Result<seal::SealStats> {
        self.seal_all_after(0)
    }

    /// What a background pass does: [`TimeSeries::seal_all`], but only buckets no write
    /// has touched for `quiet` (a backfill is not sealed under itself).
    pub fn seal_all_quiet(&self, quiet: std::time::Duration) -> Result<seal::SealStats> {
        self.seal_all_after(i64::try_from(quiet.as_nanos()).unwrap_or(i64::MAX))
    }

    fn seal_all_after(&self, quiet_ns: i64) -> Result<seal::SealStats> {
        let mut stats = seal::SealStats::default();
        for meta in self.catalog.tables(None, None, usize::MAX)? {
            if !meta.layout.seal {
                continue;
            }
            match self.seal_table(&meta.database, &meta.name, quiet_ns) {
                Ok(s) => stats.add(s),
                // Dropped since listed: nothing to seal.
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(stats)
    }

    /// Reads the selected points in key order.
    pub fn scan(
        &self,
        db: &str,
        table: &str,
        sel: &Selection,
        visit: &mut dyn FnMut(Point<'static>) -> ControlFlow<()>,
    ) -> Result<ScanStats> {
        let meta = self.describe_table(db, table)?;
        query::scan(self.store().as_ref(), &meta, sel, visit)
    }

    /// The newest selected point of each series.
    pub fn latest(
        &self,
        db: &str,
        table: &str,
        sel: &Selection,
    ) -> Result<(Vec<Point<'static>>, ScanStats)> {
        let meta = self.describe_table(db, table)?;
        query::latest(self.store().as_ref(), &meta, sel)
    }
}
