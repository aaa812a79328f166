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

#[test]
fn tables_without_summaries_get_them_in_their_next_seal_pass() {
    let dir =
        Dir(std::env::temp_dir().join(format!("almanac-ts-summaries-{}", std::process::id())));
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
    let ts = TimeSeries::open(Arc::new(store), clock).unwrap();
    ts.create_database("devops", None).unwrap();
    ts.create_table("devops", "cpu", NewTable::default())
        .unwrap();
    let records: Vec<Record> = (0..600)
        .map(|i| {
            Record::multi(
                vec![Dimension::new("host", format!("h{}", i % 3))],
                "cpu",
                vec![MeasureValue::new("user", format!("{i}.5"), "DOUBLE")],
                NOW_MS - 5 * 3_600_000 + i * 20_000,
            )
        })
        .collect();
    for chunk in records.chunks(100) {
        ts.write_records("devops", "cpu", None, chunk).unwrap();
    }
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
    let mut old = (*meta).clone();
    old.summarized = false;
    ts.catalog.put_table(&handle, old).unwrap();
    assert_eq!(
        pieces(&ts, &handle.meta()),
        (0, 600),
        "points only, all of them"
    );

    ts.seal("devops", "cpu").unwrap();
    assert!(handle.meta().summarized);
    assert_eq!(pieces(&ts, &handle.meta()), (buckets, 600));
}
