//! Pushdown: filters that restrict columns or versions touch only what they return.
//! Asserts on the read path's own counters (cells examined), not on time.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::ops::Bound;

use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilySpec, Granularity, TableSpec};
use almanac_engine::{Durability, Engine, ReadRequest};

mod common;

use common::ScratchEngine;

const I: &str = "projects/p/instances/push";
const WIDE: usize = 100_000;

fn engine() -> ScratchEngine {
    let e = ScratchEngine::quiet("push", Durability::None);
    let spec = TableSpec {
        families: vec![
            ("a".into(), FamilySpec::default()),
            ("b".into(), FamilySpec::default()),
        ],
        granularity: Granularity::Micros,
        deletion_protection: false,
        change_retention_us: None,
    };
    e.create_table(I, "t", spec).unwrap();
    // One row with WIDE columns in family a, one column with WIDE versions in family b.
    let wide: Vec<Mutation> = (0..WIDE)
        .map(|i| Mutation::SetCell {
            family: "a".into(),
            qualifier: format!("q{i:06}").into_bytes(),
            timestamp_us: 1,
            value: b"v".to_vec(),
        })
        .collect();
    let deep: Vec<Mutation> = (0..WIDE as i64)
        .map(|ts| Mutation::SetCell {
            family: "b".into(),
            qualifier: b"x".to_vec(),
            timestamp_us: ts,
            value: b"v".to_vec(),
        })
        .collect();
    e.mutate_row(I, "t", b"wide", &wide).unwrap();
    e.mutate_row(I, "t", b"deep", &deep).unwrap();
    e
}

fn read(e: &Engine, key: &[u8], filter: RowFilter) -> (usize, almanac_engine::ReadStats) {
    let mut s = e
        .read_rows(
            I,
            "t",
            ReadRequest {
                rows: almanac_engine::rowset::RowSet::key(key.to_vec()),
                filter: Some(filter),
                ..ReadRequest::default()
            },
        )
        .unwrap();
    let cells = s.by_ref().map(|r| r.unwrap().cells.len()).sum();
    (cells, s.stats())
}

#[test]
fn column_range_and_version_limit_touch_only_what_they_return() {
    let e = engine();
    let one = format!("q{:06}", WIDE / 2).into_bytes();
    let column = RowFilter::ColumnRange {
        family: "a".into(),
        start: Bound::Included(one.clone()),
        end: Bound::Included(one),
    };
    let (cells, stats) = read(&e, b"wide", column);
    assert_eq!(cells, 1);
    assert!(
        stats.cells_seen <= 16,
        "column_range over 1 of {WIDE} columns examined {} cells",
        stats.cells_seen
    );
    eprintln!(
        "column_range, 1 of {WIDE} columns: {} returned, {} examined, {} seeks",
        cells, stats.cells_seen, stats.seeks
    );

    let newest = RowFilter::Chain(vec![
        RowFilter::FamilyNameRegex("b".into()),
        RowFilter::CellsPerColumnLimit(1),
    ]);
    let (cells, stats) = read(&e, b"deep", newest);
    assert_eq!(cells, 1);
    assert!(
        stats.cells_seen <= 16,
        "cells_per_column_limit 1 over {WIDE} versions examined {} cells",
        stats.cells_seen
    );
    eprintln!(
        "cells_per_column_limit 1, {WIDE} versions: {} returned, {} examined, {} seeks",
        cells, stats.cells_seen, stats.seeks
    );

    // A family filter skips the other family of the wide row without walking it.
    let (cells, stats) = read(&e, b"wide", RowFilter::FamilyNameRegex("b".into()));
    assert_eq!(cells, 0);
    assert!(
        stats.cells_seen <= 16,
        "family b of the wide row examined {} cells",
        stats.cells_seen
    );

    // A leading row limit (a key-only read) takes the row's first cells and seeks
    // past the rest.
    let first = RowFilter::Chain(vec![RowFilter::CellsPerRowLimit(2), RowFilter::StripValue]);
    let (cells, stats) = read(&e, b"wide", first);
    assert_eq!(cells, 2);
    assert!(
        stats.cells_seen <= 16,
        "cells_per_row_limit 2 over {WIDE} columns examined {} cells",
        stats.cells_seen
    );

    // Without a filter every cell is examined and returned.
    let (cells, stats) = read(&e, b"wide", RowFilter::PassAll);
    assert_eq!(cells, WIDE);
    assert_eq!(stats.cells_seen, WIDE as u64);
}
