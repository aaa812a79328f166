//! How names resolve: one DataFusion catalog, [`CATALOG`]. Its schema [`BIGTABLE_SCHEMA`]
//! (the default, so bare table names land there) holds the Bigtable tables of the
//! query's instance; every other schema is a Timestream database, so
//! `"sampleDB"."IoT"` is a time-series table. Providers are built on lookup, with the
//! table's current schema, and share the query's [`ScanCounters`].

use std::sync::Arc;

use almanac_timeseries::{SharedStore, TimeSeries};
use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::datasource::TableProvider;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;

use crate::bigtable::{BigtableTable, Versions};
use crate::qualifiers::QualifierHints;
use crate::series::SeriesTable;
use crate::stats::ScanCounters;
use crate::tables::BigtableSources;

/// The one catalog's name.
pub const CATALOG: &str = "almanac";
/// The schema holding the Bigtable tables of the query's instance.
pub const BIGTABLE_SCHEMA: &str = "bigtable";
/// The table function giving a Bigtable table's history form.
pub const HISTORY_FUNCTION: &str = "bigtable_history";
/// Databases listed at most (for `SHOW TABLES` and `information_schema`).
const MAX_LISTED: usize = 10_000;

/// The catalog of one query.
#[derive(Debug)]
pub struct SqlCatalog {
    pub(crate) ts: Arc<TimeSeries<SharedStore>>,
    /// The tables of [`BIGTABLE_SCHEMA`].
    pub(crate) bigtable: BigtableTables,
    pub(crate) counters: Arc<ScanCounters>,
}

/// A table a query names, as [`TableAccess`] is asked about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableRef<'a> {
    /// A Bigtable table of an instance (`projects/P/instances/I`).
    Bigtable {
        /// The instance.
        instance: &'a str,
        /// The table.
        table: &'a str,
    },
    /// A Timestream table.
    TimeSeries {
        /// Its database.
        database: &'a str,
        /// The table.
        table: &'a str,
    },
    /// A Timestream database as a whole (listed by `SHOW DATABASES`, its tables by
    /// `SHOW TABLES`).
    Database {
        /// The database.
        database: &'a str,
    },
}

/// Whether the query's caller may read a table; asked as each table is opened, so a
/// query over a table it may not read fails with
/// [`Error::PermissionDenied`](crate::Error::PermissionDenied) before reading anything.
pub trait TableAccess: Send + Sync + std::fmt::Debug {
    /// `Err(message)` when the caller may not read `table`.
    fn check(&self, table: TableRef<'_>) -> Result<(), String>;
}

/// Asks `access` about `table`, as a DataFusion error when refused.
fn allowed(access: Option<&Arc<dyn TableAccess>>, table: TableRef<'_>) -> DfResult<()> {
    match access {
        Some(a) => a
            .check(table)
            .map_err(|m| DataFusionError::External(Box::new(crate::Error::PermissionDenied(m)))),
        None => Ok(()),
    }
}

/// Whether `access` lets the caller see `table` at all (in listings such as
/// `information_schema`, which must not name what the caller may not read).
fn visible(access: Option<&Arc<dyn TableAccess>>, table: TableRef<'_>) -> bool {
    access.is_none_or(|a| a.check(table).is_ok())
}

impl CatalogProvider for SqlCatalog {
    fn schema_names(&self) -> Vec<String> {
        let access = self.bigtable.access.as_ref();
        let mut names = vec![BIGTABLE_SCHEMA.to_string()];
        names.extend(
            self.ts
                .list_databases(None, MAX_LISTED)
                .unwrap_or_default()
                .into_iter()
                .map(|d| d.name)
                .filter(|db| {
                    visible(access, TableRef::Database { database: db })
                        || self
                            .ts
                            .list_tables(Some(db), None, MAX_LISTED)
                            .is_ok_and(|ts| {
                                ts.iter().any(|t| {
                                    visible(
                                        access,
                                        TableRef::TimeSeries {
                                            database: db,
                                            table: &t.name,
                                        },
                                    )
                                })
                            })
                }),
        );
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == BIGTABLE_SCHEMA {
            return Some(Arc::new(self.bigtable.clone()));
        }
        self.ts.describe_database(name).ok()?;
        Some(Arc::new(DatabaseSchema {
            ts: self.ts.clone(),
            database: name.to_string(),
            counters: self.counters.clone(),
            access: self.bigtable.access.clone(),
        }))
    }
}

/// The Bigtable tables of the query's instance: the [`BIGTABLE_SCHEMA`] schema, and
/// the history form through [`HISTORY_FUNCTION`].
#[derive(Debug, Clone)]
pub struct BigtableTables {
    pub(crate) sources: BigtableSources,
    /// `projects/p/instances/i`; `None`: no Bigtable table is in scope.
    pub(crate) instance: Option<String>,
    pub(crate) counters: Arc<ScanCounters>,
    /// Which qualifiers of each family the query reads.
    pub(crate) qualifiers: Arc<QualifierHints>,
    /// Who may read what; `None`: everything.
    pub(crate) access: Option<Arc<dyn TableAccess>>,
}

impl BigtableTables {
    /// Table `name` reading `versions`, `None` if it does not exist.
    fn open(&self, name: &str, versions: Versions) -> DfResult<Option<BigtableTable>> {
        let Some(instance) = &self.instance else {
            return Ok(None);
        };
        allowed(
            self.access.as_ref(),
            TableRef::Bigtable {
                instance,
                table: name,
            },
        )?;
        let info = self
            .sources
            .get_table(instance, name)
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        Ok(info.map(|info| {
            BigtableTable::new(
                self.sources.clone(),
                info,
                versions,
                self.counters.clone(),
                self.qualifiers.clone(),
            )
        }))
    }
}

#[async_trait]
impl SchemaProvider for BigtableTables {
    fn table_names(&self) -> Vec<String> {
        let Some(instance) = &self.instance else {
            return Vec::new();
        };
        self.sources
            .list_tables(instance)
            .map(|ts| {
                ts.into_iter()
                    .filter(|table| {
                        visible(self.access.as_ref(), TableRef::Bigtable { instance, table })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(self
            .open(name, Versions::default())?
            .map(|t| Arc::new(t) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.instance
            .as_ref()
            .is_some_and(|i| matches!(self.sources.get_table(i, name), Ok(Some(_))))
    }
}

/// The tables of one Timestream database.
#[derive(Debug)]
struct DatabaseSchema {
    ts: Arc<TimeSeries<SharedStore>>,
    database: String,
    counters: Arc<ScanCounters>,
    access: Option<Arc<dyn TableAccess>>,
}

#[async_trait]
impl SchemaProvider for DatabaseSchema {
    fn table_names(&self) -> Vec<String> {
        self.ts
            .list_tables(Some(&self.database), None, MAX_LISTED)
            .map(|ts| {
                ts.iter()
                    .map(|t| t.name.clone())
                    .filter(|table| {
                        visible(
                            self.access.as_ref(),
                            TableRef::TimeSeries {
                                database: &self.database,
                                table,
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        allowed(
            self.access.as_ref(),
            TableRef::TimeSeries {
                database: &self.database,
                table: name,
            },
        )?;
        match self.ts.describe_table(&self.database, name) {
            Ok(meta) => Ok(Some(Arc::new(SeriesTable::new(
                self.ts.clone(),
                meta,
                self.counters.clone(),
            )))),
            Err(almanac_timeseries::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(DataFusionError::External(Box::new(crate::Error::from(e)))),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.ts.describe_table(&self.database, name).is_ok()
    }
}

/// `bigtable_history('t')`: table `t` of the query's instance with every version;
/// `bigtable_history('t', 'argument', value, …)`: with GoogleSQL's table arguments
/// (`with_history`, `latest_n`, `after`, `after_or_equal`, `before`,
/// `before_or_equal`, `as_of`), which is what `t(argument => value, …)` becomes.
#[derive(Debug)]
pub struct HistoryFunction(pub(crate) BigtableTables);

impl TableFunctionImpl for HistoryFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let Some(Expr::Literal(ScalarValue::Utf8(Some(name)), _)) = exprs.first() else {
            return plan_err!("{HISTORY_FUNCTION}() takes a table name in quotes first");
        };
        let versions = if exprs.len() == 1 {
            Versions {
                history: true,
                ..Versions::default()
            }
        } else {
            crate::versions::parse(&exprs[1..], args.session())?
        };
        match self.0.open(name, versions)? {
            Some(t) => Ok(Arc::new(t)),
            None => plan_err!("table '{name}' not found"),
        }
    }
}
