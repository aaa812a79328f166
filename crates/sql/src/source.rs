//! The one physical scan both providers use: a blocking producer (storage is
//! synchronous) on tokio's blocking pool, sending record batches of at most
//! [`BATCH_ROWS`] rows through a bounded channel, so a scan streams instead of
//! loading the table, and stops when the query drops the stream (LIMIT, cancel).
//! A scan thought small runs in place instead ([`Placement::InPlace`]), within a batch.
//! The partitions of a scan split by series share that run's series queue
//! ([`sharing`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

use almanac_timeseries::Selection;
use almanac_timeseries::query::{Part, SeriesQueue};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::{RecordBatchReceiverStream, RecordBatchStreamAdapter};
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use tokio_stream::Stream;

use crate::builder::Builder;

/// Rows per record batch.
pub const BATCH_ROWS: usize = 8192;

/// Batches buffered between the storage thread and the query.
const CHANNEL_BATCHES: usize = 2;

/// Rows a scan read in place keeps: one batch. A scan that sends a second is larger
/// than its selection suggested; it stops, and runs again on the blocking pool, where
/// it streams (so at most about two batches' reading is done twice).
const IN_PLACE_ROWS: usize = BATCH_ROWS;

/// Where a producer hands its batches; `false` from [`Sink::send`] means stop.
pub enum Sink {
    /// To the query through a bounded channel, from a blocking thread.
    Channel(tokio::sync::mpsc::Sender<DfResult<RecordBatch>>),
    /// Kept until the producer returns (a scan produced in place), up to
    /// [`IN_PLACE_ROWS`].
    Kept(Mutex<Kept>),
}

/// What a [`Sink::Kept`] holds.
#[derive(Default)]
pub struct Kept {
    batches: Vec<RecordBatch>,
    rows: usize,
    /// A batch past [`IN_PLACE_ROWS`] was refused.
    overflowed: bool,
}

impl Sink {
    /// Sends one batch; `false` once the query no longer wants rows.
    pub fn send(&self, batch: RecordBatch) -> bool {
        if batch.num_rows() == 0 {
            return true;
        }
        match self {
            Self::Channel(tx) => tx.blocking_send(Ok(batch)).is_ok(),
            Self::Kept(kept) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                if kept.rows + batch.num_rows() > IN_PLACE_ROWS {
                    kept.overflowed = true;
                    return false;
                }
                kept.rows += batch.num_rows();
                kept.batches.push(batch);
                true
            }
        }
    }
}

/// A batch of `rows` rows from finished column arrays (the row count is explicit, so a
/// batch with no columns, as for `count(*)`, still counts its rows).
pub fn batch(schema: &SchemaRef, arrays: Vec<ArrayRef>, rows: usize) -> crate::Result<RecordBatch> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
        .map_err(|e| crate::Error::Execution(e.to_string()))
}

/// Rows appended to column builders, sent to a [`Sink`] in batches of about
/// [`BATCH_ROWS`]: what both providers' producers fill.
pub struct Batches<'s> {
    sink: &'s Sink,
    schema: SchemaRef,
    /// One builder per column of `schema`.
    pub builders: Vec<Builder>,
    rows: usize,
    /// Rows appended in all.
    pub total: usize,
    /// Why the producer must stop: an error building a batch, or `None` when the query
    /// wants no more rows.
    pub stop: Option<Option<crate::Error>>,
}

impl<'s> Batches<'s> {
    /// Empty batches of `schema` (with `builders` for its columns) into `sink`.
    pub fn new(sink: &'s Sink, schema: SchemaRef, builders: Vec<Builder>) -> Self {
        Self {
            sink,
            schema,
            builders,
            rows: 0,
            total: 0,
            stop: None,
        }
    }

    fn flush(&mut self) -> crate::Result<bool> {
        let arrays: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let rows = std::mem::take(&mut self.rows);
        Ok(self.sink.send(batch(&self.schema, arrays, rows)?))
    }

    /// Counts `n` rows just appended to the builders; sends a batch when there are
    /// enough. `Break` when the producer must stop ([`Batches::stop`] says why).
    pub fn appended(&mut self, n: usize) -> ControlFlow<()> {
        self.rows += n;
        self.total += n;
        if self.rows < BATCH_ROWS {
            return ControlFlow::Continue(());
        }
        match self.flush() {
            Ok(true) => ControlFlow::Continue(()),
            Ok(false) => {
                self.stop = Some(None);
                ControlFlow::Break(())
            }
            Err(e) => {
                self.stop = Some(Some(e));
                ControlFlow::Break(())
            }
        }
    }

    /// Sends what is left, unless the producer stopped; the error that stopped it.
    pub fn finish(mut self) -> crate::Result<()> {
        match self.stop.take() {
            Some(Some(e)) => Err(e),
            Some(None) => Ok(()),
            None if self.rows > 0 => self.flush().map(|_| ()),
            None => Ok(()),
        }
    }
}

/// Fills a [`Sink`] from storage, on a blocking thread.
pub trait Producer: Send + Sync + 'static {
    /// Produces every batch (returns early when `sink.send` says stop). `queue` is
    /// the series queue the partitions of this run of the scan share, for those that
    /// split one selection by series.
    fn produce(&self, sink: &Sink, queue: &Arc<SeriesQueue>) -> crate::Result<()>;
}

/// `sel`, taking its series from `queue` when it is one partition of a selection
/// split by series ([`Selection::part`]).
pub fn sharing<'s>(sel: &'s Selection, queue: &Arc<SeriesQueue>) -> Cow<'s, Selection> {
    match &sel.part {
        Some(part) => {
            let mut sel = sel.clone();
            sel.part = Some(Part {
                queue: Some(queue.clone()),
                ..part.clone()
            });
            Cow::Owned(sel)
        }
        None => Cow::Borrowed(sel),
    }
}

/// The series queue of the current run of one scan: every partition of one execution
/// of a plan gets the same [`TaskContext`] from DataFusion, and a new execution a new
/// one. A queue is made anew when the context it was made for is another, or when a
/// partition that already took it is executed again under the same context (as a
/// recursive query's term is, round after round).
#[derive(Default)]
struct Runs {
    current: Mutex<Option<Run>>,
}

struct Run {
    ctx: Weak<TaskContext>,
    queue: Arc<SeriesQueue>,
    /// The partitions that took `queue`.
    taken: Vec<usize>,
}

impl Runs {
    fn queue(&self, ctx: &Arc<TaskContext>, partition: usize) -> Arc<SeriesQueue> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = current.as_mut()
            && Weak::ptr_eq(&run.ctx, &Arc::downgrade(ctx))
            && !run.taken.contains(&partition)
        {
            run.taken.push(partition);
            return run.queue.clone();
        }
        let queue = Arc::new(SeriesQueue::default());
        *current = Some(Run {
            ctx: Arc::downgrade(ctx),
            queue: queue.clone(),
            taken: vec![partition],
        });
        queue
    }
}

struct Partition<P> {
    schema: SchemaRef,
    producer: Arc<P>,
    runs: Arc<Runs>,
    /// This partition's index in its scan.
    index: usize,
    in_place: bool,
}

/// `producer` on its own blocking thread, streaming through a channel.
fn blocking<P: Producer>(
    schema: SchemaRef,
    producer: Arc<P>,
    queue: Arc<SeriesQueue>,
) -> SendableRecordBatchStream {
    let mut builder = RecordBatchReceiverStream::builder(schema, CHANNEL_BATCHES);
    let sink = Sink::Channel(builder.tx());
    builder.spawn_blocking(move || {
        producer
            .produce(&sink, &queue)
            .map_err(|e| DataFusionError::External(Box::new(e)))
    });
    builder.build()
}

/// A scan of one partition produced in place: on the task that polls it, at its first
/// poll, its batches kept and then streamed. For a scan thought small, it saves a trip
/// through the blocking pool and back (two thread wake-ups). On a multi-thread runtime
/// the worker hands its other tasks on while it produces
/// ([`tokio::task::block_in_place`]). A scan that sends more than [`IN_PLACE_ROWS`]
/// is stopped there and run again on the blocking pool, so what is kept, and the time
/// spent before a LIMIT, a cancel or the time limit can stop it, stay bounded.
enum InPlace<P> {
    Start {
        schema: SchemaRef,
        producer: Arc<P>,
    },
    Kept {
        batches: std::vec::IntoIter<RecordBatch>,
        failed: Option<DataFusionError>,
    },
    Streaming(SendableRecordBatchStream),
}

impl<P: Producer> Stream for InPlace<P> {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Self::Start { schema, producer } = &*self {
            let produced = Self::produce(schema.clone(), producer.clone());
            *self = produced;
        }
        match &mut *self {
            Self::Kept { batches, failed } => Poll::Ready(match batches.next() {
                Some(batch) => Some(Ok(batch)),
                None => failed.take().map(Err),
            }),
            Self::Streaming(stream) => stream.as_mut().poll_next(cx),
            // Replaced by what it produced, above.
            Self::Start { .. } => Poll::Ready(None),
        }
    }
}

impl<P: Producer> InPlace<P> {
    /// Runs `producer` here; what it kept, or the blocking pool's stream if it sent
    /// more than [`IN_PLACE_ROWS`]. (One partition: it shares no series queue.)
    fn produce(schema: SchemaRef, producer: Arc<P>) -> Self {
        let sink = Sink::Kept(Mutex::default());
        let queue = Arc::new(SeriesQueue::default());
        let produce = || producer.produce(&sink, &queue);
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let produced = if multi_thread {
            tokio::task::block_in_place(produce)
        } else {
            produce()
        };
        let Sink::Kept(kept) = sink else {
            unreachable!("the sink made above")
        };
        let kept = kept.into_inner().unwrap_or_else(PoisonError::into_inner);
        match produced {
            Ok(()) if kept.overflowed => {
                Self::Streaming(blocking(schema, producer, Arc::new(SeriesQueue::default())))
            }
            produced => Self::Kept {
                batches: kept.batches.into_iter(),
                failed: produced
                    .err()
                    .map(|e| DataFusionError::External(Box::new(e))),
            },
        }
    }
}

impl<P> fmt::Debug for Partition<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partition").finish_non_exhaustive()
    }
}

impl<P: Producer> PartitionStream for Partition<P> {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let producer = self.producer.clone();
        if self.in_place {
            let stream = InPlace::Start {
                schema: self.schema.clone(),
                producer,
            };
            return Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), stream));
        }
        blocking(
            self.schema.clone(),
            producer,
            self.runs.queue(&ctx, self.index),
        )
    }
}

/// Where a scan's producers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each on its own blocking thread, streaming through a channel.
    Blocking,
    /// On the task that polls the partition, for a scan of one partition thought
    /// small (narrowed by a dimension to one or two buckets: `SeriesTable::small`);
    /// past [`IN_PLACE_ROWS`] it runs again on a blocking thread.
    InPlace,
}

/// A scan plan with one partition per producer, run as `placement` says, whose
/// batches have `schema`.
pub fn scan_plan<P: Producer>(
    schema: SchemaRef,
    producers: Vec<P>,
    limit: Option<usize>,
    placement: Placement,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    let runs = Arc::new(Runs::default());
    // In place only alone: partitions produced in place share no series queue.
    let in_place = placement == Placement::InPlace && producers.len() == 1;
    let partitions = producers
        .into_iter()
        .enumerate()
        .map(|(index, producer)| {
            Arc::new(Partition {
                schema: schema.clone(),
                producer: Arc::new(producer),
                runs: runs.clone(),
                index,
                in_place,
            }) as Arc<dyn PartitionStream>
        })
        .collect();
    Ok(Arc::new(StreamingTableExec::try_new(
        schema,
        partitions,
        None,
        Vec::new(),
        false,
        limit,
    )?))
}

#[cfg(test)]
#[expect(clippy::expect_used, reason = "tests stop at the first surprise")]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use tokio_stream::StreamExt;

    use super::*;

    /// Sends `batches` one-row batches, then fails if `fail`.
    struct Counting {
        schema: SchemaRef,
        batches: i64,
        fail: bool,
    }

    impl Producer for Counting {
        fn produce(&self, sink: &Sink, _queue: &Arc<SeriesQueue>) -> crate::Result<()> {
            for i in 0..self.batches {
                let column: ArrayRef = Arc::new(Int64Array::from(vec![i]));
                if !sink.send(batch(&self.schema, vec![column], 1)?) {
                    return Ok(());
                }
            }
            match self.fail {
                true => Err(crate::Error::Execution("the store failed".into())),
                false => Ok(()),
            }
        }
    }

    /// What a one-partition scan of `producer` streams: the values, then the error.
    async fn drain(producer: Counting, placement: Placement) -> (Vec<i64>, Option<String>) {
        let schema = producer.schema.clone();
        let plan = scan_plan(schema, vec![producer], None, placement).expect("plan");
        let mut stream = plan.execute(0, Arc::default()).expect("execute");
        let mut values = Vec::new();
        while let Some(next) = stream.next().await {
            match next {
                Ok(b) => values.extend(
                    b.column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .expect("int64")
                        .values()
                        .iter()
                        .copied(),
                ),
                Err(e) => return (values, Some(e.to_string())),
            }
        }
        (values, None)
    }

    async fn in_place_streams_as_the_blocking_pool_does() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        // Three one-row batches are kept; past IN_PLACE_ROWS the scan runs again on the
        // blocking pool and streams every batch once.
        let large = IN_PLACE_ROWS as i64 + 2;
        for (batches, fail) in [(3, false), (3, true), (large, false), (large, true)] {
            let counting = || Counting {
                schema: schema.clone(),
                batches,
                fail,
            };
            let blocking = drain(counting(), Placement::Blocking).await;
            let in_place = drain(counting(), Placement::InPlace).await;
            // Every batch sent before a failure, then the failure (the blocking pool's
            // stream may pass the failure on before the batches still in its channel;
            // what was kept in place comes whole).
            let all: Vec<i64> = (0..batches).collect();
            if !fail || batches == 3 {
                assert_eq!(in_place.0, all, "{batches} batches, fail={fail}");
            }
            for (how, got) in [("in place", &in_place), ("blocking", &blocking)] {
                assert!(all.starts_with(&got.0), "{how}, {batches} batches: {got:?}");
                let lost = all.len() - got.0.len();
                assert!(lost <= CHANNEL_BATCHES + 1, "{how}: {lost} batches lost");
            }
            assert_eq!(in_place.1, blocking.1, "fail={fail}");
            assert_eq!(in_place.1.is_some(), fail, "{:?}", in_place.1);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_place_on_a_multi_thread_runtime() {
        in_place_streams_as_the_blocking_pool_does().await;
    }

    #[tokio::test]
    async fn in_place_on_a_current_thread_runtime() {
        in_place_streams_as_the_blocking_pool_does().await;
    }

    #[test]
    fn the_partitions_of_one_run_share_a_queue_and_each_run_gets_its_own() {
        let runs = Runs::default();
        let first = Arc::new(TaskContext::default());
        let queue = runs.queue(&first, 0);
        assert!(Arc::ptr_eq(&queue, &runs.queue(&first.clone(), 1)));
        // A partition executed again under the same context (a recursive query's next
        // round) starts a new run, which the other partitions then join.
        let again = runs.queue(&first, 0);
        assert!(!Arc::ptr_eq(&queue, &again), "a partition's second run");
        assert!(Arc::ptr_eq(&again, &runs.queue(&first, 1)));
        let second = Arc::new(TaskContext::default());
        let next = runs.queue(&second, 0);
        assert!(!Arc::ptr_eq(&again, &next), "a new execution, a new queue");
        assert!(Arc::ptr_eq(&next, &runs.queue(&second, 1)));
    }
}
