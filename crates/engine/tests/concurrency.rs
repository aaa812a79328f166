//! Read-modify-write operations are atomic under concurrency.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use almanac_engine::Durability;
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::{AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::schema::{Aggregate, FamilySpec, TableSpec, ValueType};

mod common;

use common::ScratchEngine;

const I: &str = "projects/p/instances/c";
const THREADS: usize = 8;
const OPS: usize = 150;

fn engine() -> ScratchEngine {
    let e = ScratchEngine::quiet("conc", Durability::Buffer);
    let spec = TableSpec {
        families: vec![
            ("cf".into(), FamilySpec::default()),
            (
                "sum".into(),
                FamilySpec {
                    value_type: ValueType::Aggregate(Aggregate::Sum),
                    ..FamilySpec::default()
                },
            ),
        ],
        ..TableSpec::default()
    };
    e.create_table(I, "t", spec).unwrap();
    e
}

#[test]
fn concurrent_increments_appends_and_aggregates_are_exact() {
    let e = Arc::new(engine());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                for _ in 0..OPS {
                    let inc = ReadModifyWriteRule {
                        family: "cf".into(),
                        qualifier: b"n".to_vec(),
                        op: ReadModifyWriteOp::Increment(1),
                    };
                    let app = ReadModifyWriteRule {
                        family: "cf".into(),
                        qualifier: b"s".to_vec(),
                        op: ReadModifyWriteOp::Append(vec![b'a' + t as u8]),
                    };
                    e.read_modify_write(I, "t", b"row", &[inc, app]).unwrap();
                    let add = Mutation::AddToCell {
                        family: "sum".into(),
                        qualifier: b"x".to_vec(),
                        timestamp_us: 0,
                        input: AggregateInput::Int(2),
                    };
                    e.mutate_row(I, "t", b"row", &[add]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let row = e.read_row(I, "t", b"row", None).unwrap().unwrap();
    let latest = |f: &str, q: &[u8]| {
        row.cells
            .iter()
            .find(|c| &*c.family == f && &*c.qualifier == q)
            .unwrap()
            .value
            .clone()
    };
    assert_eq!(latest("cf", b"n"), ((THREADS * OPS) as i64).to_be_bytes());
    let s = latest("cf", b"s");
    assert_eq!(s.len(), THREADS * OPS);
    for t in 0..THREADS {
        assert_eq!(
            s.iter().filter(|&&b| b == b'a' + t as u8).count(),
            OPS,
            "thread {t}'s appends"
        );
    }
    assert_eq!(
        latest("sum", b"x"),
        ((2 * THREADS * OPS) as i64).to_be_bytes()
    );
}

#[test]
fn check_and_mutate_claims_each_row_once() {
    let e = Arc::new(engine());
    let rows = 60;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                let mut won = 0;
                for r in 0..rows {
                    let key = format!("row{r:03}");
                    let claim = Mutation::SetCell {
                        family: "cf".into(),
                        qualifier: b"owner".to_vec(),
                        timestamp_us: 1000,
                        value: vec![t as u8],
                    };
                    let predicate = RowFilter::ColumnQualifierRegex(b"owner".to_vec());
                    let matched = e
                        .check_and_mutate(I, "t", key.as_bytes(), Some(&predicate), &[], &[claim])
                        .unwrap();
                    if !matched {
                        won += 1;
                    }
                }
                won
            })
        })
        .collect();
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, rows, "each row is claimed by exactly one thread");
    for r in 0..rows {
        let row = e
            .read_row(I, "t", format!("row{r:03}").as_bytes(), None)
            .unwrap()
            .unwrap();
        assert_eq!(row.cells.len(), 1, "one claim cell per row");
    }
}
