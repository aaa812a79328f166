//! What one query may take: memory, time, and nothing after its caller has gone.
//!
//! - **Memory.** Every query runs with its own [`QueryPool`]: DataFusion's operators
//!   that hold rows (sorts, hash aggregates and joins, recursive CTEs' work tables)
//!   reserve from it before they allocate. A query may reserve at most
//!   [`QueryLimits::query_memory_bytes`], and all queries together at most
//!   [`QueryLimits::memory_bytes`]; a reservation past either fails the query with
//!   [`Error::ResourcesExhausted`](crate::Error::ResourcesExhausted) naming the limit
//!   (sorts spill to disk first). Functions whose output size is an argument
//!   (`sequence`, `repeat`, `lpad`, …) are bounded before they run ([`crate::guards`]).
//! - **Time.** A query's stream ends with [`Error::TimedOut`](crate::Error::TimedOut)
//!   once [`QueryLimits::time_limit`] has passed since it was planned, and its work stops
//!   there: the plan beneath is dropped at once. For that, every operator's output is
//!   made to yield to the scheduler when its task's budget is spent ([`Yields`]): an
//!   operator that makes many batches from few (a cross join, `UNNEST`) would otherwise
//!   keep a worker thread, and the timers and aborts that stop it, waiting.
//! - **Callers that leave.** Dropping a query's stream drops its plan, which aborts
//!   DataFusion's tasks and stops the storage threads at their next batch: a client
//!   that closes its connection (the Query API) or drops its stream (ExecuteQuery)
//!   leaves no work running.
//!
//! [`QueryLoad`] counts queries running, memory reserved and queries stopped, for
//! `/metrics`.

use std::fmt;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::{
    MemoryLimit, MemoryPool, MemoryReservation, human_readable_size,
};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::EmptyRecordBatchStream;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::SchedulingType;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use tokio_stream::Stream;

/// Memory all running queries may reserve together, by default: enough for sorts and
/// aggregates over millions of rows, small beside the memory a server has. DataFusion
/// counts its operators' buffers, not every allocation around them: a query holding
/// 0.8 GB of `array_agg` values peaked a server at 2.4 GB resident
/// (docs/benchmarks.md, TLS, authentication and query limits), so the budget is kept
/// well under the memory a small server has.
pub const DEFAULT_QUERY_MEMORY_BYTES: usize = 1 << 30;
/// The share of [`QueryLimits::memory_bytes`] one query may reserve, by default: a
/// query alone gets half, so one runaway query leaves the other half to the rest.
pub const DEFAULT_QUERY_SHARE: usize = 2;
/// A query's time limit, by default: Timestream's (its Query API times out after 60 s).
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(60);

/// What queries may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Memory all queries may reserve together.
    pub memory_bytes: usize,
    /// Memory one query may reserve.
    pub query_memory_bytes: usize,
    /// How long one query may run, from planning to its last batch.
    pub time_limit: Duration,
}

impl Default for QueryLimits {
    fn default() -> Self {
        Self::with_memory(DEFAULT_QUERY_MEMORY_BYTES)
    }
}

impl QueryLimits {
    /// `memory_bytes` for all queries, each up to its default share; the default time limit.
    pub fn with_memory(memory_bytes: usize) -> Self {
        Self {
            memory_bytes,
            query_memory_bytes: memory_bytes / DEFAULT_QUERY_SHARE,
            time_limit: DEFAULT_TIME_LIMIT,
        }
    }
}

/// How queries are using what they may take; shared by every query of a [`crate::SqlEngine`].
#[derive(Debug, Default)]
pub struct QueryLoad {
    /// Bytes reserved by running queries.
    reserved: AtomicUsize,
    /// Queries whose stream is open.
    running: AtomicU64,
    /// Queries stopped at their time limit.
    timed_out: AtomicU64,
    /// Queries refused memory past a limit.
    out_of_memory: AtomicU64,
    /// Queries whose caller dropped them before their end (a client gone, or a caller
    /// that had read enough rows).
    dropped: AtomicU64,
    /// Queries that took a kept plan ([`crate::plan_cache`]).
    reused_plans: AtomicU64,
    /// Queries that took a kept physical plan too.
    reused_physical_plans: AtomicU64,
}

/// A reading of [`QueryLoad`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryLoadSnapshot {
    /// Bytes reserved by running queries.
    pub reserved_bytes: u64,
    /// Queries running.
    pub running: u64,
    /// Queries stopped at their time limit, since start.
    pub timed_out: u64,
    /// Queries refused memory past a limit, since start.
    pub out_of_memory: u64,
    /// Queries dropped by their caller before their end, since start.
    pub dropped: u64,
    /// Queries that took a kept plan instead of being planned, since start.
    pub reused_plans: u64,
    /// Of those, queries that took a kept physical plan too, since start.
    pub reused_physical_plans: u64,
}

impl QueryLoad {
    /// The counts now.
    pub fn snapshot(&self) -> QueryLoadSnapshot {
        QueryLoadSnapshot {
            reserved_bytes: self.reserved.load(Relaxed) as u64,
            running: self.running.load(Relaxed),
            timed_out: self.timed_out.load(Relaxed),
            out_of_memory: self.out_of_memory.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            reused_plans: self.reused_plans.load(Relaxed),
            reused_physical_plans: self.reused_physical_plans.load(Relaxed),
        }
    }

    /// Counts a query that took a kept plan.
    pub(crate) fn reused_plan(&self) {
        self.reused_plans.fetch_add(1, Relaxed);
    }

    /// Counts a query that took a kept physical plan.
    pub(crate) fn reused_physical_plan(&self) {
        self.reused_physical_plans.fetch_add(1, Relaxed);
    }
}

/// One query's memory pool: its own limit, inside the limit of all queries.
#[derive(Debug)]
pub struct QueryPool {
    limits: QueryLimits,
    load: Arc<QueryLoad>,
    used: AtomicUsize,
}

impl QueryPool {
    /// A pool for one query under `limits`, drawing on `load`'s shared reservation.
    pub fn new(limits: QueryLimits, load: Arc<QueryLoad>) -> Self {
        Self {
            limits,
            load,
            used: AtomicUsize::new(0),
        }
    }

    fn refuse(
        &self,
        reservation: &MemoryReservation,
        additional: usize,
        whose: &str,
    ) -> DataFusionError {
        self.load.out_of_memory.fetch_add(1, Relaxed);
        let (limit, flag) = if whose == "query" {
            (
                self.limits.query_memory_bytes,
                "a query may use half of serve --query-memory-mib",
            )
        } else {
            (self.limits.memory_bytes, "serve --query-memory-mib")
        };
        DataFusionError::ResourcesExhausted(format!(
            "The query needs more memory than {} allows ({}; {flag}): {} asked for {} more with {} reserved. Narrow the query (a shorter time range, fewer series or groups, a LIMIT).",
            if whose == "query" {
                "one query"
            } else {
                "all running queries together"
            },
            human_readable_size(limit),
            reservation.consumer().name(),
            human_readable_size(additional),
            human_readable_size(self.used.load(Relaxed)),
        ))
    }
}

impl fmt::Display for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "query pool (used: {}, limit: {})",
            human_readable_size(self.used.load(Relaxed)),
            human_readable_size(self.limits.query_memory_bytes)
        )
    }
}

/// Adds `additional` to `counter` if the sum stays within `limit`.
fn try_add(counter: &AtomicUsize, additional: usize, limit: usize) -> bool {
    counter
        .fetch_update(Relaxed, Relaxed, |used| {
            used.checked_add(additional).filter(|&n| n <= limit)
        })
        .is_ok()
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        "almanac-query"
    }

    fn grow(&self, _reservation: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Relaxed);
        self.load.reserved.fetch_add(additional, Relaxed);
    }

    fn shrink(&self, _reservation: &MemoryReservation, shrink: usize) {
        self.used.fetch_sub(shrink, Relaxed);
        self.load.reserved.fetch_sub(shrink, Relaxed);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> DfResult<()> {
        if !try_add(&self.used, additional, self.limits.query_memory_bytes) {
            return Err(self.refuse(reservation, additional, "query"));
        }
        if !try_add(&self.load.reserved, additional, self.limits.memory_bytes) {
            self.used.fetch_sub(additional, Relaxed);
            return Err(self.refuse(reservation, additional, "server"));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Relaxed)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limits.query_memory_bytes)
    }
}

/// A physical optimizer rule, run last: every operator with inputs that does not
/// yield by itself is wrapped in DataFusion's [`CooperativeExec`], whose stream gives
/// way to the scheduler once the task's budget of polls is spent (see the module docs;
/// DataFusion's own `EnsureCooperative` covers leaves and exchanges only).
#[derive(Debug, Default)]
pub struct Yields;

impl PhysicalOptimizerRule for Yields {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let yields = node.properties().scheduling_type == SchedulingType::Cooperative;
            if yields || node.children().is_empty() {
                return Ok(Transformed::no(node));
            }
            let wrapped: Arc<dyn ExecutionPlan> = Arc::new(CooperativeExec::new(node));
            Ok(Transformed::yes(wrapped))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "Yields"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A query's batches, ended at its time limit; counted in [`QueryLoad`] while open.
pub struct Bounded {
    inner: SendableRecordBatchStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
    load: Arc<QueryLoad>,
    ended: bool,
}

impl Bounded {
    /// `inner`, ended once `limit` has passed since `started`.
    pub fn wrap(
        inner: SendableRecordBatchStream,
        started: tokio::time::Instant,
        limit: Duration,
        load: Arc<QueryLoad>,
    ) -> SendableRecordBatchStream {
        load.running.fetch_add(1, Relaxed);
        let deadline = Box::pin(tokio::time::sleep_until(started + limit));
        let schema = inner.schema();
        let bounded = Self {
            inner,
            deadline,
            limit,
            load,
            ended: false,
        };
        Box::pin(RecordBatchStreamAdapter::new(schema, bounded))
    }

    /// Drops the plan (stopping its work) and keeps an empty stream in its place.
    fn end(&mut self) {
        self.ended = true;
        let schema = self.inner.schema();
        self.inner = Box::pin(EmptyRecordBatchStream::new(schema));
    }
}

impl Stream for Bounded {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.load.timed_out.fetch_add(1, Relaxed);
            self.end();
            let limit = self.limit;
            return Poll::Ready(Some(Err(DataFusionError::External(Box::new(
                crate::Error::TimedOut {
                    limit_secs: limit.as_secs_f64(),
                },
            )))));
        }
        let next = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(None | Some(Err(_))) = next {
            self.end();
        }
        next
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        self.load.running.fetch_sub(1, Relaxed);
        if !self.ended {
            self.load.dropped.fetch_add(1, Relaxed);
        }
    }
}
