//! The one-time pass that gives a table created before block summaries existed a
//! summary for each of its blocks.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options};

use super::*;
use crate::model::{Dimension, MeasureValue, Record};
use crate::query::{Piece, Selection, scan_partials};
use crate::store::EmbeddedStore;
use crate::{NewTable, TimeSeries};

/// 2023-11-14T22:13:20Z.
const NOW_MS: i64 = 1_700_000_000_000;
/// The quiet time of the background passes here.
const QUIET: std::time::Duration = std::time::Duration::from_secs(60);

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whole buckets and points of a full scan.
fn pieces(ts: &TimeSeries<EmbeddedStore>, meta: &TableMeta) -> (u64, u64) {
    let (mut buckets, mut records) = (0, 0);
    scan_partials(
        ts.catalog.store().as_ref(),
        meta,
        &Selection::default(),
        &mut |p| {
            match p {
                Piece::Bucket { summary, .. } => {
                    buckets += 1;
                    records += summary.points;
                }
                Piece::Point(_) => records += 1,
            }
            ControlFlow::Continue(())
        },
    )
    .unwrap();
    (buckets, records)
}

fn open(tag: &str) -> (TimeSeries<EmbeddedStore>, Arc<ManualClock>, Dir) {
    let dir = Dir(std::env::temp_dir().join(format!("almanac-ts-{tag}-{}", std::process::id())));
    let clock = Arc::new(ManualClock::new(NOW_MS * 1000));
    let engine = Arc::new(
        Engine::open(
            &dir.0,
            Options {
                durability: Durability::None,
                clock: clock.clone(),
                sweep_interval: None,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let store = EmbeddedStore::new(engine, crate::DEFAULT_INSTANCE);
    let ts = TimeSeries::open(Arc::new(store), clock.clone()).unwrap();
    ts.create_database("devops", None).unwrap();
    ts.create_table("devops", "cpu", NewTable::default())
        .unwrap();
    (ts, clock, dir)
}

/// `n` readings of three hosts every 20 s from `start_ms`.
fn write(ts: &TimeSeries<EmbeddedStore>, start_ms: i64, n: i64) {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            Record::multi(
                vec![Dimension::new("host", format!("h{}", i % 3))],
                "cpu",
                vec![MeasureValue::new("user", format!("{i}.5"), "DOUBLE")],
                start_ms + i * 20_000,
            )
        })
        .collect();
    for chunk in records.chunks(100) {
        ts.write_records("devops", "cpu", None, chunk).unwrap();
    }
}

#[test]
fn tables_without_summaries_get_them_in_their_next_seal_pass() {
    let (ts, _clock, _dir) = open("summaries");
    write(&ts, NOW_MS - 5 * 3_600_000, 600);
    assert!(ts.seal("devops", "cpu").unwrap().buckets > 0);
    let handle = ts.catalog.table("devops", "cpu").unwrap();
    let (buckets, total) = pieces(&ts, &handle.meta());
    assert!(buckets > 0);
    assert_eq!(total, 600);

    // What a table sealed before summaries looks like: blocks alone, flag off.
    let meta = handle.meta();
    let store = ts.catalog.store().as_ref();
    let mut rows = Vec::new();
    store
        .read_rows(&meta.store_table, ReadRequest::default(), &mut |row| {
            if has_block(&row) {
                rows.push(RowMutations {
                    key: row.key.to_vec(),
                    mutations: vec![Mutation::DeleteFromColumn {
                        family: BLOCK_FAMILY.into(),
                        qualifier: SUMMARY_QUALIFIER.to_vec(),
                        start_us: 0,
                        end_us: None,
                    }],
                });
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(rows.len() as u64, buckets);
    for r in store.mutate_rows(&meta.store_table, &rows).unwrap() {
        r.unwrap();
    }
    ts.catalog
        .change_table(&handle, |current| {
            Ok(Some(TableMeta {
                summarized: false,
                ..current.clone()
            }))
        })
        .unwrap();
    assert_eq!(
        pieces(&ts, &handle.meta()),
        (0, 600),
        "points only, all of them"
    );

    ts.seal("devops", "cpu").unwrap();
    assert!(handle.meta().summarized);
    assert_eq!(pieces(&ts, &handle.meta()), (buckets, 600));
}

/// A background pass seals the closed buckets nobody wrote in the last minute, finds
/// them without walking the table, and leaves nothing behind to look at again.
#[test]
fn a_background_pass_seals_only_buckets_left_alone() {
    let (ts, clock, _dir) = open("quiet");
    let handle = ts.catalog.table("devops", "cpu").unwrap();
    assert!(handle.unsealed.is_known(), "a table this process created");
    // Two closed hours of three hosts (the first reading is on an hour boundary).
    let start_ms = NOW_MS - NOW_MS % 3_600_000 - 4 * 3_600_000;
    write(&ts, start_ms, 360);
    assert_eq!(handle.unsealed.len(), 6);
    assert_eq!(
        ts.seal_all_quiet(QUIET).unwrap().buckets,
        0,
        "written just now"
    );
    clock.advance(QUIET.as_micros() as i64 + 1_000_000);
    let sealed = ts.seal_all_quiet(QUIET).unwrap();
    assert_eq!((sealed.buckets, sealed.points), (6, 360));
    assert_eq!(handle.unsealed.len(), 0);
    assert_eq!(ts.seal_all_quiet(QUIET).unwrap(), SealStats::default());
    // A late point into a sealed hour rewrites its block: nothing to seal later.
    write(&ts, start_ms + 1_000, 1);
    assert_eq!(handle.unsealed.len(), 0);
    // A point in a closed hour not sealed yet is found by the next quiet pass.
    write(&ts, start_ms + 2 * 3_600_000, 1);
    assert_eq!(handle.unsealed.len(), 1);
    clock.advance(QUIET.as_micros() as i64 + 1_000_000);
    assert_eq!(ts.seal_all_quiet(QUIET).unwrap().buckets, 1);
    assert_eq!(pieces(&ts, &handle.meta()).1, 362);
}
