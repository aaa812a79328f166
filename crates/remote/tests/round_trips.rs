//! A query over a remote Bigtable costs the same number of round trips however many
//! series it reads: the series come from the table's directory in one read, then every
//! window in one read (or every series' newest row in one batch of concurrent reads).
//! Counted at the store, over an Almanac node in this process.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use almanac_engine::clock::{Clock, ManualClock, SystemClock};
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::{Mutation, ReadModifyWriteRule};
use almanac_engine::schema::{GcRule, TableInfo};
use almanac_engine::{ReadRequest, Row, RowMutations};
use almanac_remote::RemoteStore;
use almanac_timeseries::query::scan_partials;
use almanac_timeseries::{
    Conditional, Dimension, Layout, MeasureValue, NewTable, Pattern, Record, Retention, RowIter,
    Selection, SharedStore, StoreResult, TimeSeries, WideColumnStore,
};

use common::Backend;

const HOUR_MS: i64 = 3_600_000;

/// A remote store that counts its reads: each call is one round trip (a `read_many`
/// batch too, its reads being sent at once).
struct Counting {
    inner: RemoteStore,
    reads: AtomicUsize,
}

impl Counting {
    fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }
    fn count(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
}

impl WideColumnStore for Counting {
    fn instance(&self) -> &str {
        self.inner.instance()
    }
    fn create_table(&self, table: &str, families: &[(&str, GcRule)]) -> StoreResult<()> {
        self.inner.create_table(table, families)
    }
    fn delete_table(&self, table: &str) -> StoreResult<()> {
        self.inner.delete_table(table)
    }
    fn table_exists(&self, table: &str) -> StoreResult<bool> {
        self.inner.table_exists(table)
    }
    fn get_table(&self, table: &str) -> StoreResult<Option<TableInfo>> {
        self.inner.get_table(table)
    }
    fn list_tables(&self) -> StoreResult<Vec<String>> {
        self.inner.list_tables()
    }
    fn set_gc_rule(&self, table: &str, family: &str, rule: GcRule) -> StoreResult<()> {
        self.inner.set_gc_rule(table, family, rule)
    }
    fn now_us(&self) -> i64 {
        self.inner.now_us()
    }
    fn mutate_rows(&self, table: &str, rows: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        self.inner.mutate_rows(table, rows)
    }
    fn check_and_mutate(
        &self,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> StoreResult<bool> {
        self.inner
            .check_and_mutate(table, key, predicate, on_match, on_miss)
    }
    fn check_and_mutate_rows(
        &self,
        table: &str,
        rows: &[Conditional],
    ) -> StoreResult<Vec<StoreResult<bool>>> {
        self.inner.check_and_mutate_rows(table, rows)
    }
    fn other_writers(&self) -> bool {
        self.inner.other_writers()
    }
    fn read_modify_write(
        &self,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row> {
        self.inner.read_modify_write(table, key, rules)
    }
    fn sample_row_keys(&self, table: &str) -> StoreResult<Vec<(Vec<u8>, u64)>> {
        self.inner.sample_row_keys(table)
    }
    fn read_rows(
        &self,
        table: &str,
        req: ReadRequest,
        visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
    ) -> StoreResult<()> {
        self.count();
        self.inner.read_rows(table, req, visit)
    }
    fn read_stream(&self, table: &str, req: ReadRequest) -> StoreResult<RowIter> {
        self.count();
        self.inner.read_stream(table, req)
    }
    fn read_many(&self, table: &str, reqs: &[ReadRequest]) -> StoreResult<Vec<Vec<Row>>> {
        self.count();
        self.inner.read_many(table, reqs)
    }
}

/// Round trips of a windowed scan, a newest-point query and an aggregate read over
/// `hosts` series (10 points each in each of 3 hours, two of them sealed).
fn reads_for(backend: &Backend, pattern: Pattern, hosts: usize) -> [usize; 3] {
    let now_ms = SystemClock.now_us() / 1_000_000 * 1000;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(now_ms * 1000));
    let instance = format!(
        "projects/remote/instances/trips-{}-{hosts}",
        pattern.as_str()
    );
    let store = Arc::new(Counting {
        inner: RemoteStore::connect(&instance, &backend.addr.to_string())
            .expect("connect")
            .with_clock(clock.clone()),
        reads: AtomicUsize::new(0),
    });
    let shared: SharedStore = store.clone();
    let ts = TimeSeries::open(Arc::new(shared), clock).expect("open");
    ts.create_database("db1", None).expect("database");
    ts.create_table(
        "db1",
        "cpu",
        NewTable {
            layout: Layout {
                pattern,
                bucket_secs: 3600,
                reverse_time: false,
                seal: true,
            },
            retention: Some(Retention {
                memory_hours: 24,
                magnetic_days: 30,
            }),
            ..NewTable::default()
        },
    )
    .expect("table");
    let start_ms = (now_ms / HOUR_MS - 3) * HOUR_MS;
    let records: Vec<Record<'static>> = (0..hosts)
        .flat_map(|h| {
            (0..30i64).map(move |i| {
                Record::multi(
                    vec![Dimension::new("host".to_string(), format!("h{h:03}"))],
                    "cpu".to_string(),
                    vec![MeasureValue::new(
                        "usage".to_string(),
                        format!("{}.5", h as i64 + i),
                        "DOUBLE".to_string(),
                    )],
                    start_ms + i * HOUR_MS / 10,
                )
            })
        })
        .collect();
    for chunk in records.chunks(100) {
        ts.write_records("db1", "cpu", None, chunk).expect("write");
    }
    ts.seal("db1", "cpu").expect("seal");
    let meta = ts.describe_table("db1", "cpu").expect("describe");
    // Half past the first hour to half past the third: edge buckets on both sides.
    let window = Selection {
        measure_name: Some("cpu".into()),
        start_ns: (start_ms + HOUR_MS / 2) * 1_000_000,
        end_ns: (start_ms + 5 * HOUR_MS / 2) * 1_000_000,
        ..Selection::default()
    };
    let mut counts = [0; 3];
    let before = store.reads();
    let mut points = 0;
    ts.scan("db1", "cpu", &window, &mut |_| {
        points += 1;
        ControlFlow::Continue(())
    })
    .expect("scan");
    assert_eq!(points, hosts * 20, "the window's points");
    counts[0] = store.reads() - before;
    let before = store.reads();
    let (newest, _) = ts.latest("db1", "cpu", &window).expect("latest");
    assert_eq!(newest.len(), hosts, "one newest point a series");
    counts[1] = store.reads() - before;
    let before = store.reads();
    let mut summarized = 0u64;
    scan_partials(ts.store().as_ref(), &meta, &window, &mut |_| {
        summarized += 1;
        ControlFlow::Continue(())
    })
    .expect("partials");
    assert!(summarized > 0);
    counts[2] = store.reads() - before;
    counts
}

#[test]
fn a_query_costs_the_same_round_trips_for_5_or_60_series() {
    let backend = Backend::start();
    for pattern in [Pattern::RowSerialized, Pattern::BucketColumns] {
        let few = reads_for(&backend, pattern, 5);
        let many = reads_for(&backend, pattern, 60);
        eprintln!(
            "{}: scan, latest, partials: {many:?} reads",
            pattern.as_str()
        );
        assert_eq!(few, many, "{}: reads for 5 and 60 series", pattern.as_str());
        // A description read may come first; then the directory and the windows.
        assert!(
            many.iter().all(|&n| n <= 4),
            "{}: {many:?} reads",
            pattern.as_str()
        );
    }
}
