//! Two front-ends writing the same series at once over one remote Bigtable decide
//! versions exactly as one node does: each is the time-series layer with its own
//! connection (its own series locks and marks), as two `almanac serve --bigtable`
//! processes would be, and only the row guards keep their read-check-write atomic.
//! Also: a seal pass on one front-end racing late writes into the same bucket on the
//! other loses and doubles nothing.
#![expect(
    clippy::expect_used,
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::ops::ControlFlow;
use std::sync::{Arc, Barrier};

use almanac_engine::ReadRequest;
use almanac_engine::clock::{Clock, ManualClock, SystemClock};
use almanac_remote::{RemoteStore, WideColumnStore};
use almanac_timeseries::{
    Dimension, Error, Layout, MeasureValue, NewTable, Pattern, Point, Record, Selection,
    SharedStore, TimeSeries,
};

use common::Backend;

const INSTANCE: &str = "projects/versions/instances/series";
/// Writer threads per front-end.
const THREADS: usize = 4;
/// Slots each test fights over.
const SLOTS: i64 = 6;
const HOUR_MS: i64 = 3_600_000;

fn store(backend: &Backend, clock: &Arc<dyn Clock>) -> SharedStore {
    Arc::new(
        RemoteStore::connect(INSTANCE, &backend.addr.to_string())
            .expect("connect")
            .with_clock(Arc::clone(clock)),
    )
}

/// A front-end: the layer over its own connection to the backend.
fn front_end(backend: &Backend, clock: &Arc<dyn Clock>) -> TimeSeries<SharedStore> {
    TimeSeries::open(Arc::new(store(backend, clock)), Arc::clone(clock)).expect("open")
}

fn record(host: &str, time_ms: i64, value: i64, version: i64) -> Record<'static> {
    let mut r = Record::multi(
        vec![Dimension::new("host", host.to_string())],
        "cpu",
        vec![MeasureValue::new("usage", value.to_string(), "BIGINT")],
        time_ms,
    );
    r.version = Some(version);
    r
}

fn layout(pattern: Pattern) -> NewTable {
    NewTable {
        layout: Layout {
            pattern,
            bucket_secs: 3600,
            reverse_time: false,
            seal: true,
        },
        ..NewTable::default()
    }
}

fn all_points(ts: &TimeSeries<SharedStore>, table: &str) -> Vec<Point<'static>> {
    let mut out = Vec::new();
    ts.scan("db1", table, &Selection::default(), &mut |p| {
        out.push(p);
        ControlFlow::Continue(())
    })
    .expect("scan");
    out.sort_by_key(|p| p.time_ns);
    out
}

fn usage(p: &Point) -> String {
    format!("{:?}", p.measures)
}

/// What one write said: accepted, or rejected with the stored version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Said {
    Accepted,
    Rejected(i64),
}

/// Every writer (THREADS on each front-end, writer `w`) writes `make(w, slot)` into
/// each slot, all writers of a slot at once; what each write said, by slot and writer.
fn race(
    fronts: [&TimeSeries<SharedStore>; 2],
    table: &str,
    make: impl Fn(usize, i64) -> Record<'static> + Sync,
) -> Vec<Vec<Said>> {
    let barrier = Barrier::new(2 * THREADS);
    let said: Vec<Vec<(i64, Said)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2 * THREADS)
            .map(|w| {
                let (barrier, make, ts) = (&barrier, &make, fronts[w % 2]);
                s.spawn(move || {
                    (0..SLOTS)
                        .map(|slot| {
                            barrier.wait();
                            let r = ts.write_records("db1", table, None, &[make(w, slot)]);
                            let said = match r {
                                Ok(_) => Said::Accepted,
                                Err(Error::Rejected(rs)) => Said::Rejected(
                                    rs[0].existing_version.expect("the stored version"),
                                ),
                                Err(e) => panic!("writer {w} slot {slot}: {e}"),
                            };
                            (slot, said)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer"))
            .collect()
    });
    (0..SLOTS as usize)
        .map(|slot| said.iter().map(|w| w[slot].1).collect())
        .collect()
}

#[test]
fn one_write_of_a_version_wins_whichever_front_end_it_reaches() {
    let backend = Backend::start();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (a, b) = (front_end(&backend, &clock), front_end(&backend, &clock));
    a.create_database("db1", None).expect("database");
    let base = clock.now_us() / 1000 - 60_000;
    for pattern in Pattern::ALL {
        let table = pattern.as_str();
        a.create_table("db1", table, layout(pattern))
            .expect("table");

        // Every writer brings its own value at version 1: one is kept, the others are
        // told version 1 is stored.
        let said = race([&a, &b], table, |w, slot| {
            record("h1", base + slot * 1000, w as i64, 1)
        });
        let stored = all_points(&a, table);
        assert_eq!(stored.len(), SLOTS as usize, "{table}: one point a slot");
        for (slot, said) in said.iter().enumerate() {
            let won: Vec<usize> = (0..said.len())
                .filter(|&w| said[w] == Said::Accepted)
                .collect();
            assert_eq!(won.len(), 1, "{table} slot {slot}: one winner of {said:?}");
            assert!(
                said.iter()
                    .all(|s| matches!(s, Said::Accepted | Said::Rejected(1))),
                "{table} slot {slot}: {said:?}"
            );
            let winner = record("h1", 0, won[0] as i64, 1);
            assert!(
                usage(&stored[slot]).contains(&format!("Bigint({})", won[0])),
                "{table} slot {slot}: stored {:?}, the winner wrote {:?}",
                stored[slot].measures,
                winner.measure_values
            );
        }

        // Versions 2..=9, one a writer, at once: the highest is stored, and every
        // rejection names a higher version than the one it rejected.
        let said = race([&a, &b], table, |w, slot| {
            record("h1", base + slot * 1000, 100 + w as i64, 2 + w as i64)
        });
        let top = 2 * THREADS - 1;
        let stored = all_points(&a, table);
        for (slot, said) in said.iter().enumerate() {
            assert_eq!(said[top], Said::Accepted, "{table} slot {slot}: {said:?}");
            for (w, s) in said.iter().enumerate() {
                if let Said::Rejected(v) = s {
                    assert!(*v > 2 + w as i64, "{table} slot {slot}: {said:?}");
                }
            }
            assert_eq!(stored[slot].version, 2 + top as i64, "{table} slot {slot}");
            assert!(usage(&stored[slot]).contains(&format!("Bigint({})", 100 + top)));
        }
        assert_eq!(
            all_points(&b, table).len(),
            SLOTS as usize,
            "{table}: the other front-end reads the same"
        );
    }
}

#[test]
fn a_seal_racing_late_writes_loses_and_doubles_nothing() {
    let backend = Backend::start();
    // Both front-ends on one moving clock, starting in the last second of an hour
    // that ended over an hour ago.
    let hour = (SystemClock.now_us() / 1000 / HOUR_MS - 2) * HOUR_MS;
    let manual = Arc::new(ManualClock::new((hour + HOUR_MS - 1000) * 1000));
    let clock: Arc<dyn Clock> = manual.clone();
    let (a, b) = (front_end(&backend, &clock), front_end(&backend, &clock));
    a.create_database("db1", None).expect("database");
    const POINTS: i64 = 360;
    for pattern in [Pattern::RowSerialized, Pattern::BucketCells] {
        let table = pattern.as_str();
        let meta = a
            .create_table("db1", table, layout(pattern))
            .expect("table");
        // The hour, written while open: row-form points, version 1.
        let first: Vec<Record> = (0..POINTS)
            .map(|i| record("h1", hour + i * 10_000, i, 1))
            .collect();
        for chunk in first.chunks(100) {
            a.write_records("db1", table, None, chunk).expect("write");
        }
        // Twenty minutes on, the bucket is due: front-end a seals it while b upserts
        // every third point (version 2) into it, ten a request.
        manual.advance(20 * 60 * 1_000_000);
        let late: Vec<Record> = (0..POINTS)
            .step_by(3)
            .map(|i| record("h1", hour + i * 10_000, 1000 + i, 2))
            .collect();
        std::thread::scope(|s| {
            let sealer = s.spawn(|| {
                let mut sealed = 0;
                for _ in 0..5 {
                    sealed += a.seal("db1", table).expect("seal").buckets;
                }
                sealed
            });
            for chunk in late.chunks(10) {
                b.write_records("db1", table, None, chunk)
                    .expect("late write");
            }
            sealer.join().expect("sealer");
        });
        a.seal("db1", table).expect("seal");
        b.seal("db1", table).expect("seal");
        for ts in [&a, &b] {
            let got = all_points(ts, table);
            assert_eq!(got.len(), POINTS as usize, "{table}: every point once");
            for (i, p) in got.iter().enumerate() {
                let i = i as i64;
                assert_eq!(p.time_ns, (hour + i * 10_000) * 1_000_000, "{table}");
                let (version, value) = if i % 3 == 0 { (2, 1000 + i) } else { (1, i) };
                assert_eq!(p.version, version, "{table} point {i}");
                assert!(
                    usage(p).contains(&format!("Bigint({value})")),
                    "{table} point {i}: {:?}",
                    p.measures
                );
            }
        }
        // One row of points is left: the block; and the series' directory row.
        let raw = store(&backend, &clock);
        let mut keys = Vec::new();
        raw.read_rows(&meta.store_table, ReadRequest::default(), &mut |row| {
            keys.push(row.key.to_vec());
            ControlFlow::Continue(())
        })
        .expect("read");
        let (directory, points): (Vec<_>, Vec<_>) = keys
            .iter()
            .partition(|k| k.first() == Some(&almanac_timeseries::directory::DIRECTORY_PREFIX));
        assert_eq!(points.len(), 1, "{table}: the bucket is one block row");
        assert_eq!(directory.len(), 1, "{table}: one series in the directory");
    }
}
