//! Where SQL's Bigtable tables live: the instances of the embedded engine, and the
//! one instance of a remote Bigtable that a front-end reads through its store
//! (`almanac serve --bigtable`). A query names an instance ([`crate::Scope`]); its
//! tables are read from whichever holds that instance.

use std::sync::Arc;

use almanac_engine::schema::TableInfo;
use almanac_engine::{Engine, ReadRequest, ReadStats, Row, RowStream};
use almanac_timeseries::{RowIter, SharedStore, WideColumnStore};

/// The Bigtable tables a SQL service can read.
#[derive(Clone, Default)]
pub struct BigtableSources {
    /// Every instance of the embedded engine, if there is one.
    engine: Option<Arc<Engine>>,
    /// A remote Bigtable: its instance is read through the store, ahead of the engine.
    remote: Option<SharedStore>,
}

impl std::fmt::Debug for BigtableSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BigtableSources")
            .field("engine", &self.engine.is_some())
            .field(
                "remote",
                &self.remote.as_ref().map(|s| s.instance().to_string()),
            )
            .finish()
    }
}

impl BigtableSources {
    /// The embedded engine's instances.
    pub fn embedded(engine: Arc<Engine>) -> Self {
        Self {
            engine: Some(engine),
            remote: None,
        }
    }

    /// The same, with `store`'s instance read from `store` (a remote Bigtable).
    pub fn with_remote(mut self, store: SharedStore) -> Self {
        self.remote = Some(store);
        self
    }

    /// The remote store, when it holds `instance`.
    fn remote_for(&self, instance: &str) -> Option<&SharedStore> {
        self.remote.as_ref().filter(|s| s.instance() == instance)
    }

    /// Table `name` of `instance`, `None` if it does not exist.
    pub(crate) fn get_table(&self, instance: &str, name: &str) -> crate::Result<Option<TableInfo>> {
        if let Some(store) = self.remote_for(instance) {
            return Ok(store.get_table(name)?);
        }
        let Some(engine) = &self.engine else {
            return Ok(None);
        };
        match engine.get_table(instance, name) {
            Ok(info) => Ok(Some(info)),
            Err(almanac_engine::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The names of `instance`'s tables, sorted.
    pub(crate) fn list_tables(&self, instance: &str) -> crate::Result<Vec<String>> {
        if let Some(store) = self.remote_for(instance) {
            return Ok(store.list_tables()?);
        }
        let Some(engine) = &self.engine else {
            return Ok(Vec::new());
        };
        Ok(engine
            .list_tables(instance)?
            .into_iter()
            .map(|t| t.name)
            .collect())
    }

    /// The rows of `req` from `table` of `instance`.
    pub(crate) fn read(
        &self,
        instance: &str,
        table: &str,
        req: ReadRequest,
    ) -> crate::Result<Rows> {
        if let Some(store) = self.remote_for(instance) {
            return Ok(Rows::Store {
                rows: store.read_stream(table, req)?,
                stats: ReadStats::default(),
            });
        }
        match &self.engine {
            Some(engine) => Ok(Rows::Engine(Box::new(
                engine.read_rows(instance, table, req)?,
            ))),
            None => Err(crate::Error::TableNotFound(format!(
                "table not found: {instance}/tables/{table}"
            ))),
        }
    }
}

/// The rows of one read, and what reading them cost.
pub(crate) enum Rows {
    /// From the embedded engine, which counts what it examined.
    Engine(Box<RowStream>),
    /// From a store: rows and cells as they arrive.
    Store { rows: RowIter, stats: ReadStats },
}

impl Rows {
    /// What was read so far.
    pub(crate) fn stats(&self) -> ReadStats {
        match self {
            Self::Engine(s) => s.stats(),
            Self::Store { stats, .. } => *stats,
        }
    }
}

impl Iterator for Rows {
    type Item = almanac_engine::Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Engine(s) => s.next(),
            Self::Store { rows, stats } => {
                let row = rows.next()?;
                if let Ok(r) = &row {
                    let cells = r.cells.len() as u64;
                    stats.rows_returned += 1;
                    stats.cells_loaded += cells;
                    stats.cells_returned += cells;
                    stats.cells_seen += cells;
                }
                Some(row)
            }
        }
    }
}
