//! Two front-ends over one remote Bigtable agree on the catalog: each is the
//! time-series layer with its own connection to one Almanac node, as two `almanac
//! serve --bigtable` processes would be. Concurrent creates of one database or table
//! give one success and one conflict, a table one front-end makes the other finds,
//! schemas grown by both at once keep every name, and a deleted table is gone for
//! both.
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;

use almanac_engine::clock::{Clock, SystemClock};
use almanac_remote::{RemoteStore, WideColumnStore};
use almanac_timeseries::{
    Dimension, Error, Layout, MeasureValue, NewTable, Pattern, REFRESH_AFTER, Record, Selection,
    SharedStore, TimeSeries,
};

use common::Backend;

const INSTANCE: &str = "projects/frontends/instances/series";

/// A front-end: the layer over its own connection to the backend.
fn front_end(backend: &Backend) -> Arc<TimeSeries<SharedStore>> {
    let store: SharedStore =
        Arc::new(RemoteStore::connect(INSTANCE, &backend.addr.to_string()).expect("connect"));
    Arc::new(TimeSeries::open(Arc::new(store), Arc::new(SystemClock)).expect("open"))
}

/// Runs `f` on both front-ends at once; their results in order.
fn both<T: Send>(
    pair: [&Arc<TimeSeries<SharedStore>>; 2],
    f: impl Fn(&TimeSeries<SharedStore>, usize) -> T + Sync,
) -> [T; 2] {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let run = |i: usize| {
            let (f, barrier, ts) = (&f, &barrier, pair[i]);
            move || {
                barrier.wait();
                f(ts, i)
            }
        };
        let a = s.spawn(run(0));
        let b = s.spawn(run(1));
        [
            a.join().expect("front-end 0"),
            b.join().expect("front-end 1"),
        ]
    })
}

fn record(dims: &[(&str, &str)], time_ms: i64, value: f64) -> Record<'static> {
    Record::multi(
        dims.iter()
            .map(|(n, v)| Dimension::new(n.to_string(), v.to_string()))
            .collect(),
        "cpu",
        vec![MeasureValue::new(
            "usage".to_string(),
            value.to_string(),
            "DOUBLE".to_string(),
        )],
        time_ms,
    )
}

fn points(ts: &TimeSeries<SharedStore>, table: &str) -> Vec<String> {
    let mut out = Vec::new();
    ts.scan("db1", table, &Selection::default(), &mut |p| {
        out.push(format!("{:?} {:?} {}", p.dimensions, p.measures, p.time_ns));
        ControlFlow::Continue(())
    })
    .expect("scan");
    out.sort();
    out
}

#[test]
fn two_front_ends_agree_on_the_catalog() {
    let backend = Backend::start();
    let (a, b) = (front_end(&backend), front_end(&backend));
    let pair = [&a, &b];

    // One database, created by both at once: one success, one conflict.
    let created = both(pair, |ts, _| ts.create_database("db1", None));
    let ok = created.iter().filter(|r| r.is_ok()).count();
    let conflicts = created
        .iter()
        .filter(|r| matches!(r, Err(Error::Conflict { .. })))
        .count();
    assert_eq!((ok, conflicts), (1, 1), "{created:?}");

    // One table, created by both at once: one success, one conflict, one data table.
    let new = || NewTable {
        layout: Layout {
            pattern: Pattern::BucketCells,
            bucket_secs: 3600,
            reverse_time: false,
            seal: true,
        },
        ..NewTable::default()
    };
    let created = both(pair, |ts, _| ts.create_table("db1", "cpu", new()));
    let winner = match &created {
        [Ok(m), Err(Error::Conflict { .. })] | [Err(Error::Conflict { .. }), Ok(m)] => m.clone(),
        other => panic!("expected one table and one conflict: {other:?}"),
    };
    for ts in pair {
        let seen = ts.describe_table("db1", "cpu").expect("describe");
        assert_eq!(
            seen.store_table, winner.store_table,
            "both see the winner's table"
        );
        assert_eq!(
            ts.list_tables(Some("db1"), None, 10).expect("list").len(),
            1,
            "one table listed"
        );
    }
    let store = RemoteStore::connect(INSTANCE, &backend.addr.to_string()).expect("connect");
    for id in ["db1.cpu", "ts-1", "ts-2"] {
        assert_eq!(
            store.table_exists(id).expect("GetTable"),
            id == winner.store_table,
            "{id}: only the winner's data table is left"
        );
    }

    // Schemas grown at once: each front-end brings a dimension the other does not know.
    let now_ms = SystemClock.now_us() / 1000;
    let written = both(pair, |ts, i| {
        let extra = ["region", "zone"][i];
        let records: Vec<Record> = (0..50)
            .map(|n| {
                record(
                    &[("host", "h1"), (extra, "x")],
                    now_ms - 1000 * (n + 100 * i as i64),
                    n as f64,
                )
            })
            .collect();
        ts.write_records("db1", "cpu", None, &records)
    });
    for w in &written {
        assert!(w.is_ok(), "{written:?}");
    }
    std::thread::sleep(REFRESH_AFTER);
    let schema = a
        .describe_table("db1", "cpu")
        .expect("describe")
        .schema
        .clone();
    for name in ["host", "region", "zone"] {
        assert!(
            schema.dimensions.iter().any(|d| d == name),
            "{name} admitted: {:?}",
            schema.dimensions
        );
    }
    let seen = points(&a, "cpu");
    assert_eq!(seen.len(), 100, "every point once");
    assert_eq!(
        points(&b, "cpu"),
        seen,
        "both front-ends read the same points"
    );

    // A table deleted through one front-end is gone for the other.
    a.delete_table("db1", "cpu").expect("delete");
    assert!(matches!(
        b.describe_table("db1", "cpu"),
        Err(Error::NotFound { .. })
    ));
    assert!(
        b.list_tables(Some("db1"), None, 10)
            .expect("list")
            .is_empty()
    );

    // Deleted and made again through one front-end under the same name (and the same
    // Bigtable table), it is a new table for the other, which had written the old one:
    // a series registered in the old table's directory is registered again, so queries
    // find it.
    b.create_table("db1", "cpu", new()).expect("create again");
    std::thread::sleep(REFRESH_AFTER);
    let series = [("host", "h0")];
    a.write_records("db1", "cpu", None, &[record(&series, now_ms - 1, 6.0)])
        .expect("write into the second table");
    b.delete_table("db1", "cpu").expect("delete again");
    b.create_table("db1", "cpu", new())
        .expect("create a third time");
    std::thread::sleep(REFRESH_AFTER);
    a.write_records("db1", "cpu", None, &[record(&series, now_ms, 7.0)])
        .expect("write into the third table");
    let window = Selection {
        start_ns: (now_ms - 60_000) * 1_000_000,
        end_ns: (now_ms + 60_000) * 1_000_000,
        ..Selection::default()
    };
    for ts in [&a, &b] {
        let mut found = Vec::new();
        ts.scan("db1", "cpu", &window, &mut |p| {
            found.push(p.time_ns);
            ControlFlow::Continue(())
        })
        .expect("scan");
        assert_eq!(
            found,
            vec![now_ms * 1_000_000],
            "the third table's one point"
        );
    }
    drop(backend);
}
