//! Server metrics in Prometheus' text exposition format, through
//! `metrics-exporter-prometheus`'s recorder (one per server, no global state).
//!
//! Request counters and latency histograms are recorded as requests finish
//! ([`Metrics::grpc`], [`Metrics::timestream`]); storage counters and gauges are read
//! from the engine when `/metrics` is scraped ([`Metrics::render`]).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use almanac_engine::Engine;
use almanac_sql::QueryLoadSnapshot;
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

const METADATA: Metadata<'static> = Metadata::new("almanac", Level::INFO, Some(module_path!()));

/// Upper bounds (seconds) of the request latency histograms' buckets.
/// (Streams such as ReadChangeStream run for minutes: the top buckets hold them.)
const LATENCY_BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
    30.0, 120.0, 600.0,
];
/// Upper bounds (seconds) of the fsync histogram's buckets.
const FSYNC_BUCKETS: [f64; 12] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0,
];

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Bigtable gRPC.
    Grpc,
    /// Timestream HTTP.
    Timestream,
    /// The console and `/metrics`.
    Console,
}

impl Listener {
    fn name(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::Timestream => "timestream",
            Self::Console => "console",
        }
    }
}

/// A server's metrics.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    points_ingested: Counter,
    points_rejected: Counter,
    seal_passes: Counter,
    sealed_points: Counter,
    compactions: Counter,
    commit_batches: Counter,
    fsync: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// What `/metrics` shows of the engine, and `/api/stats` too.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StorageSnapshot {
    /// Rows written since start.
    pub rows_written: u64,
    /// Cells written since start.
    pub cells_written: u64,
    /// Bytes written since start.
    pub bytes_written: u64,
    /// Rows returned since start.
    pub rows_read: u64,
    /// Cells returned since start.
    pub cells_read: u64,
    /// Bytes returned since start.
    pub bytes_read: u64,
    /// Rows walked since start.
    pub rows_scanned: u64,
    /// Bytes of the data directory: tables, blobs and journal.
    pub disk_bytes: u64,
    /// Bytes of the journal.
    pub journal_bytes: u64,
    /// Bytes in memtables.
    pub memtable_bytes: u64,
}

impl StorageSnapshot {
    /// Reads the engine's counters and sizes.
    pub fn of(engine: &Engine) -> Self {
        let t = engine.totals();
        Self {
            rows_written: t.rows_written.load(Relaxed),
            cells_written: t.cells_written.load(Relaxed),
            bytes_written: t.bytes_written.load(Relaxed),
            rows_read: t.rows_read.load(Relaxed),
            cells_read: t.cells_read.load(Relaxed),
            bytes_read: t.bytes_read.load(Relaxed),
            rows_scanned: t.rows_scanned.load(Relaxed),
            disk_bytes: engine.disk_space().unwrap_or(0),
            journal_bytes: engine.journal_space().unwrap_or(0),
            memtable_bytes: engine.memtable_space(),
        }
    }
}

impl Metrics {
    /// A fresh set of metrics.
    pub fn new() -> Arc<Self> {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Suffix("request_duration_seconds".into()),
                &LATENCY_BUCKETS,
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("almanac_fsync_duration_seconds".into()),
                    &FSYNC_BUCKETS,
                )
            })
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let counter =
            |name: &'static str| recorder.register_counter(&Key::from_name(name), &METADATA);
        let metrics = Self {
            points_ingested: counter("almanac_points_ingested_total"),
            points_rejected: counter("almanac_points_rejected_total"),
            seal_passes: counter("almanac_seal_passes_total"),
            sealed_points: counter("almanac_sealed_points_total"),
            compactions: counter("almanac_compactions_total"),
            commit_batches: counter("almanac_commit_batches_total"),
            fsync: recorder
                .register_histogram(&Key::from_name("almanac_fsync_duration_seconds"), &METADATA),
            recorder,
            handle,
        };
        metrics.describe();
        Arc::new(metrics)
    }

    fn describe(&self) {
        let r = &self.recorder;
        for (name, unit, help) in DESCRIPTIONS {
            match name.rsplit('_').next() {
                Some("total") => r.describe_counter((*name).into(), *unit, (*help).into()),
                Some("seconds") => r.describe_histogram((*name).into(), *unit, (*help).into()),
                _ => r.describe_gauge((*name).into(), *unit, (*help).into()),
            }
        }
    }

    /// A gRPC call to `method` (`google.bigtable.v2.Bigtable/ReadRows`) ended with
    /// `code` (`None`: OK) after `took`.
    pub fn grpc(&self, method: &str, code: Option<&'static str>, took: Duration) {
        let method = Label::new("method", method.to_owned());
        self.request(
            "almanac_grpc",
            method,
            code.map(|c| Label::new("code", c)),
            took,
        );
    }

    /// A Timestream `operation` ended with `exception` (`None`: success) after `took`.
    pub fn timestream(&self, operation: &str, exception: Option<&str>, took: Duration) {
        let op = Label::new("operation", operation.to_owned());
        let failure = exception.map(|e| Label::new("exception", e.to_owned()));
        self.request("almanac_timestream", op, failure, took);
    }

    fn request(&self, prefix: &str, what: Label, failure: Option<Label>, took: Duration) {
        let r = &self.recorder;
        let key = |suffix: &str, labels: Vec<Label>| {
            Key::from_parts(format!("{prefix}_{suffix}"), labels)
        };
        r.register_counter(&key("requests_total", vec![what.clone()]), &METADATA)
            .increment(1);
        r.register_histogram(
            &key("request_duration_seconds", vec![what.clone()]),
            &METADATA,
        )
        .record(took.as_secs_f64());
        if let Some(f) = failure {
            r.register_counter(&key("errors_total", vec![what, f]), &METADATA)
                .increment(1);
        }
    }

    /// Records ingested and rejected by one WriteRecords.
    pub fn points(&self, ingested: u64, rejected: u64) {
        self.points_ingested.increment(ingested);
        self.points_rejected.increment(rejected);
    }

    /// A seal pass (which sealed `points`).
    pub fn seal_pass(&self, points: u64) {
        self.seal_passes.increment(1);
        self.sealed_points.increment(points);
    }

    /// A major compaction.
    pub fn compaction(&self) {
        self.compactions.increment(1);
    }

    /// One group commit's journal flush (and fsync) took `took`.
    pub fn group_commit(&self, took: Duration) {
        self.commit_batches.increment(1);
        self.fsync.record(took.as_secs_f64());
    }

    /// Counts an open connection on `listener` until the guard drops.
    pub fn connection(self: &Arc<Self>, listener: Listener) -> ConnectionGuard {
        let gauge = self.open_connections(listener);
        gauge.increment(1.0);
        ConnectionGuard { gauge }
    }

    fn open_connections(&self, listener: Listener) -> Gauge {
        self.recorder.register_gauge(
            &Key::from_parts(
                "almanac_open_connections",
                vec![Label::new("listener", listener.name())],
            ),
            &METADATA,
        )
    }

    /// The request metrics as rendered now (without reading the engine).
    pub fn rendered(&self) -> String {
        self.handle.render()
    }

    /// Drains histogram samples into their buckets. The recorder keeps samples until
    /// this runs (rendering runs it too), so the server calls it periodically.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The exposition, with the engine's counters and sizes read now.
    pub fn render(&self, engine: &Engine, queries: &QueryLoadSnapshot) -> String {
        let s = StorageSnapshot::of(engine);
        let r = &self.recorder;
        let counter = |name: &'static str, v: u64| {
            r.register_counter(&Key::from_name(name), &METADATA)
                .absolute(v);
        };
        counter("almanac_rows_written_total", s.rows_written);
        counter("almanac_cells_written_total", s.cells_written);
        counter("almanac_bytes_written_total", s.bytes_written);
        counter("almanac_rows_read_total", s.rows_read);
        counter("almanac_cells_read_total", s.cells_read);
        counter("almanac_bytes_read_total", s.bytes_read);
        counter("almanac_rows_scanned_total", s.rows_scanned);
        let gauge = |name: &'static str, v: u64| {
            r.register_gauge(&Key::from_name(name), &METADATA)
                .set(v as f64);
        };
        gauge("almanac_disk_bytes", s.disk_bytes);
        gauge("almanac_journal_bytes", s.journal_bytes);
        gauge("almanac_memtable_bytes", s.memtable_bytes);
        gauge("almanac_queries_running", queries.running);
        gauge("almanac_query_memory_bytes", queries.reserved_bytes);
        counter("almanac_query_plans_reused_total", queries.reused_plans);
        counter(
            "almanac_query_physical_plans_reused_total",
            queries.reused_physical_plans,
        );
        for (reason, n) in [
            ("time_limit", queries.timed_out),
            ("memory", queries.out_of_memory),
            ("dropped", queries.dropped),
        ] {
            let labels = [Label::new("reason", reason)];
            r.register_counter(
                &Key::from_parts("almanac_queries_stopped_total", labels.iter()),
                &METADATA,
            )
            .absolute(n);
        }
        for l in [Listener::Grpc, Listener::Timestream, Listener::Console] {
            self.open_connections(l).increment(0.0);
        }
        self.handle.render()
    }
}

/// Decrements its listener's open-connection gauge when dropped.
pub struct ConnectionGuard {
    gauge: Gauge,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

/// Sum of metric `name`'s samples over all label sets in an exposition; 0 when it
/// has none.
pub fn sum_of(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        .max(0.0) as u64
}

/// HELP lines: name, unit, text.
const DESCRIPTIONS: &[(&str, Option<Unit>, &str)] = &[
    (
        "almanac_grpc_requests_total",
        None,
        "Bigtable gRPC calls, by method.",
    ),
    (
        "almanac_grpc_errors_total",
        None,
        "Bigtable gRPC calls that ended with an error, by method and status code.",
    ),
    (
        "almanac_grpc_request_duration_seconds",
        Some(Unit::Seconds),
        "Bigtable gRPC call latency, to the end of the response stream, by method.",
    ),
    (
        "almanac_timestream_requests_total",
        None,
        "Timestream API requests, by operation.",
    ),
    (
        "almanac_timestream_errors_total",
        None,
        "Timestream API requests that failed, by operation and exception.",
    ),
    (
        "almanac_timestream_request_duration_seconds",
        Some(Unit::Seconds),
        "Timestream API request latency, by operation.",
    ),
    (
        "almanac_rows_written_total",
        None,
        "Rows written (one per row mutation applied).",
    ),
    (
        "almanac_cells_written_total",
        None,
        "Mutations applied to rows.",
    ),
    (
        "almanac_bytes_written_total",
        Some(Unit::Bytes),
        "Row key, qualifier and value bytes written.",
    ),
    ("almanac_rows_read_total", None, "Rows returned by reads."),
    ("almanac_cells_read_total", None, "Cells returned by reads."),
    (
        "almanac_bytes_read_total",
        Some(Unit::Bytes),
        "Row key, qualifier and value bytes returned by reads.",
    ),
    (
        "almanac_rows_scanned_total",
        None,
        "Rows walked by reads, returned or filtered out.",
    ),
    (
        "almanac_points_ingested_total",
        None,
        "Timestream records ingested by WriteRecords.",
    ),
    (
        "almanac_points_rejected_total",
        None,
        "Timestream records WriteRecords rejected.",
    ),
    (
        "almanac_commit_batches_total",
        None,
        "Group commits: journal flushes, each covering every write queued before it.",
    ),
    (
        "almanac_fsync_duration_seconds",
        Some(Unit::Seconds),
        "Time of one group commit's journal flush and fsync.",
    ),
    ("almanac_compactions_total", None, "Major compactions."),
    (
        "almanac_seal_passes_total",
        None,
        "Seal passes run over the time-series tables.",
    ),
    (
        "almanac_sealed_points_total",
        None,
        "Points folded into sealed blocks.",
    ),
    (
        "almanac_disk_bytes",
        Some(Unit::Bytes),
        "Bytes of the data directory's tables, blobs and journal.",
    ),
    (
        "almanac_journal_bytes",
        Some(Unit::Bytes),
        "Bytes of the write-ahead journal.",
    ),
    (
        "almanac_memtable_bytes",
        Some(Unit::Bytes),
        "Bytes held in memtables.",
    ),
    (
        "almanac_open_connections",
        None,
        "Open connections, by listener.",
    ),
    (
        "almanac_queries_running",
        None,
        "SQL queries running (Query API, ExecuteQuery, console, scheduled).",
    ),
    (
        "almanac_query_memory_bytes",
        Some(Unit::Bytes),
        "Bytes reserved by running SQL queries (sorts, aggregates, joins).",
    ),
    (
        "almanac_queries_stopped_total",
        None,
        "SQL queries stopped before their end, by reason: time_limit, memory, or dropped by their caller (a client gone, or one that read enough).",
    ),
];

/// A connection that counts as open until dropped.
pub struct Counted<T> {
    io: T,
    _guard: ConnectionGuard,
}

impl<T> Counted<T> {
    /// Wraps `io`, holding `guard` as long as it lives.
    pub fn new(io: T, guard: ConnectionGuard) -> Self {
        Self { io, _guard: guard }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
