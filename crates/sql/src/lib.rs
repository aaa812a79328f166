//! SQL over everything Almanac stores, on Apache DataFusion.
//!
//! A query walks through:
//! 1. [`rewrite`]: Timestream and GoogleSQL spellings DataFusion does not parse
//!    (`measure_value::double`, `15m`, `@param`) are rewritten token by token;
//! 2. a DataFusion session with one catalog ([`catalog`]): bare names are the Bigtable
//!    tables of the query's instance ([`bigtable`]), `"db"."table"` names are
//!    Timestream tables ([`series`]); Timestream's functions are registered
//!    ([`functions`], [`presto`], [`timeseries_fns`]), and its lambdas and lateral
//!    `UNNEST` rewritten ([`dialect`]);
//! 3. a Timestream query run again with other times and names takes the optimized plan
//!    kept for its shape, with its values put in ([`plan_cache`]); otherwise
//!    DataFusion plans and optimizes (then [`lambda_bindings`] renumbers lambda
//!    parameters the optimizer moved); each provider turns the filters it is offered
//!    into row ranges and storage filters ([`keyrange`], [`series`]; a measure compared
//!    with a literal drops points in the scan, [`value_filter`]) and reads through
//!    [`source`], streaming record batches from a blocking thread (a scan narrowed to
//!    a few series and an hour is read in place, on the task that polls it); a query
//!    whose every scan is such a scan is planned for one partition ([`parallelism`]);
//! 4. the caller streams or collects the batches; [`stats`] says how many rows and cells
//!    storage read for them.
//!
//! Timestream's metadata statements (`SHOW DATABASES`, `SHOW TABLES`, `SHOW MEASURES`,
//! `DESCRIBE`) are answered from the catalog before any of this ([`metadata`]).
//!
//! Only queries run: DDL, DML and `SET` are refused.

mod bigtable;
mod bucket_aggregates;
pub mod budget;
mod builder;
pub mod catalog;
mod dialect;
mod error;
mod functions;
mod googlesql;
mod guards;
mod interpolate;
mod keyrange;
mod lambda_bindings;
mod latest_join;
mod metadata;
mod newest_max;
mod parallelism;
mod partials;
mod plan_cache;
mod planner;
mod presto;
mod qualifiers;
pub mod rewrite;
mod series;
mod source;
mod stats;
mod tables;
mod timeseries_fns;
mod unpack;
mod value_filter;
mod versions;

use std::sync::Arc;

use almanac_engine::Engine;
use almanac_timeseries::{SharedStore, TimeSeries};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProviderList, MemoryCatalogProviderList};
use datafusion::common::ParamValues;
use datafusion::execution::FunctionRegistry as _;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::SessionStateDefaults;
use datafusion::execution::TaskContext;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext, SessionState};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::planner::ExprPlanner;

pub use budget::{QueryLimits, QueryLoad, QueryLoadSnapshot};
pub use datafusion::arrow;
pub use dialect::Dialect;
pub use error::{Error, Result};
pub use plan_cache::PLAN_CACHE_SHAPES;
pub use stats::{ScanCounters, ScanTotals};
pub use tables::BigtableSources;

/// Where bare table names resolve, and who asks.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The Bigtable instance (`projects/p/instances/i`) whose tables are the bare names.
    pub instance: Option<String>,
    /// The SQL the text is written in.
    pub dialect: Dialect,
    /// Which tables the caller may read; `None`: all.
    pub access: Option<Arc<dyn catalog::TableAccess>>,
}

impl Scope {
    /// Bare names are tables of `instance`; Timestream's dialect.
    pub fn instance(instance: impl Into<String>) -> Self {
        Self {
            instance: Some(instance.into()),
            dialect: Dialect::Timestream,
            access: None,
        }
    }

    /// GoogleSQL for Bigtable over the tables of `instance` (ExecuteQuery).
    pub fn googlesql(instance: impl Into<String>) -> Self {
        Self {
            instance: Some(instance.into()),
            dialect: Dialect::GoogleSql,
            access: None,
        }
    }
}

/// A planned query, ready to stream.
pub struct Prepared {
    /// The result's columns.
    pub schema: SchemaRef,
    plan: Planned,
    counters: Arc<ScanCounters>,
    /// When planning began: the time limit counts from here.
    started: tokio::time::Instant,
    limits: QueryLimits,
    load: Arc<QueryLoad>,
}

/// Where a prepared query's plan stands.
enum Planned {
    /// Planned, to be optimized when it runs; then offered to the plan cache under
    /// its shape, if it has one.
    Fresh {
        frame: datafusion::dataframe::DataFrame,
        qualifiers: Arc<qualifiers::QualifierHints>,
        offer: Option<(Arc<plan_cache::PlanCache>, plan_cache::Shape)>,
    },
    /// Optimized already: a kept plan ([`plan_cache`]) with the run's values, and the
    /// kept physical plans beside it.
    Reused {
        frame: datafusion::dataframe::DataFrame,
        physical: Arc<plan_cache::Templates>,
        params: Vec<plan_cache::Param>,
    },
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Prepared {
    /// Runs the query within its limits ([`budget`]), streaming its batches; the
    /// counters fill as it runs. Dropping the stream stops the query.
    pub async fn stream(self) -> Result<(SendableRecordBatchStream, Arc<ScanCounters>)> {
        let (mut state, plan, kept) = match self.plan {
            Planned::Fresh {
                frame,
                qualifiers,
                offer,
            } => {
                qualifiers.fill(frame.logical_plan())?;
                let (state, plan) = frame.into_parts();
                let optimized = state.optimize(&plan)?;
                if let Some((cache, shape)) = offer {
                    cache.offer(&shape, &plan, &optimized);
                }
                (state, optimized, None)
            }
            Planned::Reused {
                frame,
                physical,
                params,
            } => {
                let (state, plan) = frame.into_parts();
                (state, plan, Some((physical, params)))
            }
        };
        let one_partition = parallelism::reads_in_one_partition(&plan);
        if one_partition {
            state.config_mut().options_mut().execution.target_partitions = 1;
        }
        let task = TaskContext::from(&state);
        let shared = task.runtime_env();
        let runtime = RuntimeEnv {
            memory_pool: Arc::new(budget::QueryPool::new(self.limits, self.load.clone())),
            disk_manager: shared.disk_manager.clone(),
            cache_manager: shared.cache_manager.clone(),
            object_store_registry: shared.object_store_registry.clone(),
        };
        let task = Arc::new(task.with_runtime(Arc::new(runtime)));
        let plan = match kept {
            Some((physical, params)) => {
                let (physical_plan, rebuilt) =
                    physical.plan(one_partition, &params, &plan, &state).await?;
                if rebuilt {
                    #[cfg(debug_assertions)]
                    check_rebuilt(&plan, &physical_plan, &state).await?;
                    self.load.reused_physical_plan();
                }
                physical_plan
            }
            None => {
                state
                    .query_planner()
                    .create_physical_plan(&plan, &state)
                    .await?
            }
        };
        let inner = datafusion::physical_plan::execute_stream(plan, task)?;
        let stream = budget::Bounded::wrap(inner, self.started, self.limits.time_limit, self.load);
        Ok((stream, self.counters))
    }

    /// Runs the query to the end.
    pub async fn collect(self) -> Result<QueryOutput> {
        let schema = self.schema.clone();
        let (stream, counters) = self.stream().await?;
        let batches = datafusion::physical_plan::common::collect(stream).await?;
        Ok(QueryOutput {
            schema,
            batches,
            scan: counters.totals(),
        })
    }
}

/// A query's whole result.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    /// Columns.
    pub schema: SchemaRef,
    /// Rows, in batches.
    pub batches: Vec<RecordBatch>,
    /// What storage read for them.
    pub scan: ScanTotals,
}

impl QueryOutput {
    /// Rows returned.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// The SQL service over Bigtable tables and a time-series layer.
pub struct SqlEngine {
    tables: BigtableSources,
    ts: Arc<TimeSeries<SharedStore>>,
    /// The session every Timestream query starts from.
    base: SessionState,
    /// The session every GoogleSQL query starts from ([`Dialect::GoogleSql`]).
    google: SessionState,
    limits: QueryLimits,
    load: Arc<QueryLoad>,
    /// Optimized plans kept for queries run again with other values.
    plans: Arc<plan_cache::PlanCache>,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlEngine").finish_non_exhaustive()
    }
}

impl SqlEngine {
    /// SQL over `engine`'s Bigtable tables and `ts`'s time-series tables.
    pub fn new(engine: Arc<Engine>, ts: Arc<TimeSeries<SharedStore>>) -> Result<Self> {
        Self::over(BigtableSources::embedded(engine), ts)
    }

    /// SQL over the Bigtable tables of `tables` and `ts`'s time-series tables.
    pub fn over(tables: BigtableSources, ts: Arc<TimeSeries<SharedStore>>) -> Result<Self> {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(catalog::CATALOG, catalog::BIGTABLE_SCHEMA)
            .with_information_schema(true)
            .with_create_default_catalog_and_schema(false);
        // Table, database and column names are case-sensitive, as in Bigtable and
        // Timestream (function names stay case-insensitive).
        config.options_mut().sql_parser.enable_ident_normalization = false;
        let base = session(config.clone(), Dialect::Timestream)?;
        let google = session(config, Dialect::GoogleSql)?;
        Ok(Self {
            tables,
            ts,
            base,
            google,
            limits: QueryLimits::default(),
            load: Arc::default(),
            plans: Arc::new(plan_cache::PlanCache::new()),
        })
    }

    /// The same service with queries bounded by `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: QueryLimits) -> Self {
        self.limits = limits;
        self
    }

    /// What queries may take.
    pub fn limits(&self) -> QueryLimits {
        self.limits
    }

    /// How queries are using it now.
    pub fn load(&self) -> QueryLoadSnapshot {
        self.load.snapshot()
    }

    /// Parses and plans `sql` with `params` bound to its `$name` / `@name` placeholders.
    pub async fn prepare(
        &self,
        sql: &str,
        scope: &Scope,
        params: Option<ParamValues>,
    ) -> Result<Prepared> {
        let started = tokio::time::Instant::now();
        let counters = Arc::new(ScanCounters::default());
        let qualifiers = Arc::new(qualifiers::QualifierHints::default());
        let base = match scope.dialect {
            Dialect::Timestream => &self.base,
            Dialect::GoogleSql => &self.google,
        };
        if scope.dialect == Dialect::Timestream
            && let Some(statement) = metadata::parse(sql)?
        {
            let ts = self.ts.clone();
            let access = scope.access.clone();
            let batch = tokio::task::spawn_blocking(move || {
                metadata::answer(&ts, &statement, access.as_ref())
            })
            .await
            .map_err(|e| Error::Execution(format!("metadata statement: {e}")))??;
            let frame = SessionContext::new_with_state(self.base.clone()).read_batch(batch)?;
            return Ok(self.prepared(frame, counters, qualifiers, None, started));
        }
        let sql = match scope.dialect {
            Dialect::Timestream => rewrite::rewrite(sql)?,
            Dialect::GoogleSql => rewrite::rewrite_googlesql(sql)?,
        };
        // Queries over Timestream tables run again with other times and names (a
        // dashboard's refresh) reuse their optimized plan.
        let shape = match (scope.dialect, &params) {
            (Dialect::Timestream, None) => plan_cache::shape(&sql),
            _ => None,
        };
        let bigtable = catalog::BigtableTables {
            sources: self.tables.clone(),
            instance: scope.instance.clone(),
            counters: counters.clone(),
            qualifiers: qualifiers.clone(),
            access: scope.access.clone(),
        };
        let catalogs = MemoryCatalogProviderList::new();
        catalogs.register_catalog(
            catalog::CATALOG.to_string(),
            Arc::new(catalog::SqlCatalog {
                ts: self.ts.clone(),
                bigtable: bigtable.clone(),
                counters: counters.clone(),
            }),
        );
        // A clone, not a rebuild: SessionStateBuilder::new_from_existing registers
        // every function again in no set order, and a DataFusion function whose alias
        // is one of ours (map_extract's element_at, to_char's date_format,
        // character_length's length) could then win over ours.
        let mut state = base.clone();
        state.register_catalog_list(Arc::new(catalogs) as Arc<dyn CatalogProviderList>);
        let ctx = SessionContext::new_with_state(state);
        ctx.register_udtf(
            catalog::HISTORY_FUNCTION,
            Arc::new(catalog::HistoryFunction(bigtable)),
        );
        if let Some(shape) = &shape
            && let Some((plan, physical)) = self.plans.reuse(shape, &ctx).await?
        {
            #[cfg(debug_assertions)]
            self.check_reused(&sql, scope, &ctx, &plan).await?;
            self.load.reused_plan();
            return Ok(Prepared {
                schema: Arc::new(plan.schema().as_arrow().clone()),
                plan: Planned::Reused {
                    frame: datafusion::dataframe::DataFrame::new(ctx.state(), plan),
                    physical,
                    params: shape.params.clone(),
                },
                counters,
                started,
                limits: self.limits,
                load: self.load.clone(),
            });
        }
        let plan = self
            .plan_statement(&sql, scope, params.as_ref(), &ctx)
            .await
            .map_err(|e| at_end_if_unplaced(Error::from(e), &sql))?;
        let mut frame = ctx.execute_logical_plan(plan).await?;
        if let Some(p) = params {
            frame = frame.with_param_values(p)?;
        }
        let offer = shape.map(|shape| (self.plans.clone(), shape));
        Ok(self.prepared(frame, counters, qualifiers, offer, started))
    }

    fn prepared(
        &self,
        frame: datafusion::dataframe::DataFrame,
        counters: Arc<ScanCounters>,
        qualifiers: Arc<qualifiers::QualifierHints>,
        offer: Option<(Arc<plan_cache::PlanCache>, plan_cache::Shape)>,
        started: tokio::time::Instant,
    ) -> Prepared {
        Prepared {
            schema: Arc::new(frame.schema().as_arrow().clone()),
            plan: Planned::Fresh {
                frame,
                qualifiers,
                offer,
            },
            counters,
            started,
            limits: self.limits,
            load: self.load.clone(),
        }
    }

    /// The plan of `sql` (rewritten already) in `ctx`, before the optimizer.
    async fn plan_statement(
        &self,
        sql: &str,
        scope: &Scope,
        params: Option<&ParamValues>,
        ctx: &SessionContext,
    ) -> datafusion::error::Result<datafusion::logical_expr::LogicalPlan> {
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let state = ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let mut statement = state.sql_to_statement(sql, &dialect)?;
        match scope.dialect {
            Dialect::GoogleSql => {
                if let Some(p) = params {
                    dialect::bind_table_arguments(&mut statement, p);
                }
                dialect::exclude_timestamp(&mut statement);
                dialect::googlesql_forms(&mut statement);
                unpack::replace(&mut statement, ctx).await?;
            }
            Dialect::Timestream => {
                dialect::timestream_forms(&mut statement);
                dialect::name_unnamed_columns(&mut statement);
            }
        }
        // Again: UNPACK registers its table function on the context.
        let state = ctx.state();
        let plan = state.statement_to_plan(statement).await?;
        options.verify_plan(&plan)?;
        Ok(plan)
    }

    /// In debug builds (every test), a reused plan must be the plan the query would
    /// have been given.
    #[cfg(debug_assertions)]
    async fn check_reused(
        &self,
        sql: &str,
        scope: &Scope,
        ctx: &SessionContext,
        reused: &datafusion::logical_expr::LogicalPlan,
    ) -> Result<()> {
        let plan = self.plan_statement(sql, scope, None, ctx).await?;
        let planned = ctx.state().optimize(&plan)?;
        if !plan_cache::same_plans(&planned, reused) {
            return Err(Error::Execution(format!(
                "a reused plan differs from the query's own plan:\n{}\n-- planned --\n{}",
                reused.display_indent(),
                planned.display_indent()
            )));
        }
        Ok(())
    }

    /// Plans and runs `sql` to the end.
    pub async fn query(&self, sql: &str, scope: &Scope) -> Result<QueryOutput> {
        self.prepare(sql, scope, None).await?.collect().await
    }
}

/// In debug builds (every test), a rebuilt physical plan must be the plan the planner
/// would have made.
#[cfg(debug_assertions)]
async fn check_rebuilt(
    logical: &datafusion::logical_expr::LogicalPlan,
    rebuilt: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    state: &SessionState,
) -> Result<()> {
    let planned = state
        .query_planner()
        .create_physical_plan(logical, state)
        .await?;
    if !plan_cache::same_physical(&planned, rebuilt) {
        return Err(Error::Execution(format!(
            "a rebuilt physical plan differs from the query's own plan:\n{}\n-- planned --\n{}",
            datafusion::physical_plan::displayable(rebuilt.as_ref()).indent(true),
            datafusion::physical_plan::displayable(planned.as_ref()).indent(true),
        )));
    }
    Ok(())
}

/// The session a dialect's queries start from: Almanac's planners and optimizer
/// rules, DataFusion's functions, and Timestream's and GoogleSQL's.
fn session(config: SessionConfig, dialect: Dialect) -> Result<SessionState> {
    let mut planners: Vec<Arc<dyn ExprPlanner>> = vec![
        Arc::new(planner::BytesMapAccess),
        Arc::new(googlesql::SubstrPlanner {
            googlesql: dialect == Dialect::GoogleSql,
        }),
    ];
    if dialect == Dialect::GoogleSql {
        planners.push(Arc::new(dialect::ZeroBasedArrays));
        planners.push(Arc::new(googlesql::FloatDivision));
    }
    planners.extend(SessionStateDefaults::default_expr_planners());
    let mut builder = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_expr_planners(planners);
    if dialect == Dialect::GoogleSql {
        builder = builder.with_analyzer_rule(Arc::new(googlesql::Semantics));
    }
    let mut state = builder
        .with_optimizer_rule(Arc::new(latest_join::LatestJoin))
        .with_optimizer_rule(Arc::new(newest_max::NewestMax))
        .with_optimizer_rule(Arc::new(bucket_aggregates::BucketAggregates))
        .with_physical_optimizer_rule(Arc::new(lambda_bindings::LambdaBindings))
        .with_physical_optimizer_rule(Arc::new(budget::Yields))
        .build();
    functions::register(&mut state)?;
    googlesql::register(&mut state)?;
    match dialect {
        Dialect::GoogleSql => {
            for f in dialect::markers() {
                state.register_udf(Arc::new(f))?;
            }
            googlesql::register_dialect(&mut state)?;
        }
        Dialect::Timestream => {
            presto::register(&mut state)?;
            timeseries_fns::register(&mut state)?;
        }
    }
    // Last: each wraps the function registered under its name.
    guards::register(&mut state)?;
    Ok(state)
}

/// The parser gives no position for an error at the end of the text ("found: EOF");
/// point just past the last character.
fn at_end_if_unplaced(e: Error, sql: &str) -> Error {
    match e {
        Error::Syntax {
            message,
            line: 0,
            column: 0,
        } => {
            let trimmed = sql.trim_end();
            let line = trimmed.lines().count().max(1) as u64;
            let column = trimmed.lines().last().map_or(0, |l| l.chars().count()) as u64 + 1;
            Error::Syntax {
                message,
                line,
                column,
            }
        }
        other => other,
    }
}
