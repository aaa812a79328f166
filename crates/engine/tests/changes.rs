//! Change streams in the engine: every kind of write recorded in commit order with
//! server timestamps resolved, GC deletions marked, retention, reopening, and a
//! reader that follows concurrent writers and sees each change exactly once.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use almanac_engine::changes::ChangeRecord;
use almanac_engine::clock::ManualClock;
use almanac_engine::mutation::{Mutation, ReadModifyWriteOp, ReadModifyWriteRule, SERVER_TIME};
use almanac_engine::schema::{FamilySpec, GcRule, TableSpec};
use almanac_engine::{Durability, Engine, Error, Options, RowMutations};

mod common;

const I: &str = "projects/p/instances/i";
const DAY_US: i64 = 86_400_000_000;

fn open(dir: &std::path::Path, clock: Arc<ManualClock>) -> Engine {
    Engine::open(
        dir,
        Options {
            durability: Durability::None,
            clock,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .unwrap()
}

fn spec(retention: Option<i64>) -> TableSpec {
    TableSpec {
        families: vec![
            ("cf".into(), FamilySpec::default()),
            (
                "one".into(),
                FamilySpec {
                    gc_rule: GcRule::MaxVersions(1),
                    ..FamilySpec::default()
                },
            ),
        ],
        change_retention_us: retention,
        ..TableSpec::default()
    }
}

fn set(f: &str, q: &str, ts: i64, v: &str) -> Mutation {
    Mutation::SetCell {
        family: f.into(),
        qualifier: q.as_bytes().to_vec(),
        timestamp_us: ts,
        value: v.as_bytes().to_vec(),
    }
}

fn all(e: &Engine, table: &str) -> Vec<ChangeRecord> {
    e.read_changes(I, table, i64::MIN, usize::MAX)
        .unwrap()
        .records
}

#[test]
fn every_write_is_recorded_in_commit_order() {
    let dir = common::scratch("changes");
    let clock = Arc::new(ManualClock::new(10 * DAY_US));
    let e = open(dir.path(), clock.clone());
    e.create_table(I, "t", spec(Some(DAY_US))).unwrap();
    e.create_table(I, "quiet", spec(None)).unwrap();
    e.mutate_row(I, "t", b"a", &[set("cf", "q", SERVER_TIME, "1")])
        .unwrap();
    e.mutate_rows(
        I,
        "t",
        &[
            RowMutations {
                key: b"b".to_vec(),
                mutations: vec![set("cf", "q", 5_000, "2")],
            },
            RowMutations {
                key: b"c".to_vec(),
                mutations: vec![Mutation::DeleteFromRow],
            },
        ],
    )
    .unwrap();
    let rule = ReadModifyWriteRule {
        family: "cf".into(),
        qualifier: b"n".to_vec(),
        op: ReadModifyWriteOp::Increment(3),
    };
    e.read_modify_write(I, "t", b"a", &[rule]).unwrap();
    e.mutate_row(I, "quiet", b"x", &[set("cf", "q", 1_000, "no")])
        .unwrap();
    let got = all(&e, "t");
    let rows: Vec<&[u8]> = got.iter().map(|c| c.row_key.as_slice()).collect();
    assert_eq!(rows, [&b"a"[..], b"b", b"c", b"a"]);
    assert!(got.windows(2).all(|w| w[0].commit_us < w[1].commit_us));
    assert!(got.iter().all(|c| !c.garbage_collection));
    // The server's time replaced SERVER_TIME (a millisecond table truncates it).
    let Mutation::SetCell { timestamp_us, .. } = &got[0].mutations[0] else {
        panic!("{:?}", got[0]);
    };
    assert_eq!(*timestamp_us, 10 * DAY_US);
    assert_eq!(got[2].mutations, vec![Mutation::DeleteFromRow]);
    // ReadModifyWrite is recorded as the SetCell of its result.
    assert!(matches!(
        &got[3].mutations[0],
        Mutation::SetCell { value, .. } if value == &3i64.to_be_bytes().to_vec()
    ));
    assert!(matches!(
        e.read_changes(I, "quiet", i64::MIN, 10),
        Err(Error::Precondition(_))
    ));
    // Reading on from a change skips it and everything before.
    let rest = e.read_changes(I, "t", got[1].commit_us, 10).unwrap();
    assert_eq!(rest.records, got[2..]);
    // Reopened: the changes are there, and new ones come after them.
    let last = got[3].commit_us;
    drop(e);
    clock.set(DAY_US); // even with the clock behind
    let e = open(dir.path(), clock.clone());
    assert_eq!(all(&e, "t"), got);
    e.mutate_row(I, "t", b"d", &[set("cf", "q", 1_000, "4")])
        .unwrap();
    assert!(all(&e, "t")[4].commit_us > last);
}

#[test]
fn gc_deletions_are_marked_and_old_changes_expire() {
    let dir = common::scratch("changes-gc");
    let clock = Arc::new(ManualClock::new(10 * DAY_US));
    let e = open(dir.path(), clock.clone());
    e.create_table(I, "t", spec(Some(DAY_US))).unwrap();
    e.mutate_row(I, "t", b"r", &[set("one", "q", 1_000, "old")])
        .unwrap();
    e.mutate_row(I, "t", b"r", &[set("one", "q", 2_000, "new")])
        .unwrap();
    e.sweep().unwrap();
    let got = all(&e, "t");
    assert_eq!(got.len(), 3);
    assert!(got[2].garbage_collection);
    assert_eq!(
        got[2].mutations,
        vec![Mutation::DeleteFromColumn {
            family: "one".into(),
            qualifier: b"q".to_vec(),
            start_us: 1_000,
            end_us: Some(1_001),
        }]
    );
    // Past the retention, the sweep drops them; turning the stream off drops the rest.
    clock.advance(DAY_US + 1_000);
    e.mutate_row(I, "t", b"s", &[set("cf", "q", 1_000, "x")])
        .unwrap();
    e.sweep().unwrap();
    assert_eq!(all(&e, "t").len(), 1);
    assert!(matches!(
        e.set_change_retention(I, "t", Some(1)),
        Err(Error::Invalid(_))
    ));
    e.set_change_retention(I, "t", None).unwrap();
    e.sweep().unwrap();
    e.set_change_retention(I, "t", Some(DAY_US)).unwrap();
    assert!(all(&e, "t").is_empty());
}

#[test]
fn a_reader_following_writers_sees_each_change_once() {
    let dir = common::scratch("changes-follow");
    let e = Engine::open(
        dir.path(),
        Options {
            durability: Durability::None,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .unwrap();
    e.create_table(I, "t", spec(Some(DAY_US))).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    const WRITERS: usize = 4;
    const ROWS: usize = 500;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let e = e.clone();
            std::thread::spawn(move || {
                for i in 0..ROWS {
                    let key = format!("w{w}-{:03}", i % 50);
                    e.mutate_row(
                        I,
                        "t",
                        key.as_bytes(),
                        &[set("cf", "q", 1_000, &i.to_string())],
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let (e, done) = (e.clone(), done.clone());
        std::thread::spawn(move || {
            let mut after = i64::MIN;
            let mut seen: Vec<ChangeRecord> = Vec::new();
            loop {
                let finished = done.load(Ordering::Acquire);
                let batch = e.read_changes(I, "t", after, 64).unwrap();
                if let Some(last) = batch.records.last() {
                    after = last.commit_us;
                }
                let empty = batch.records.is_empty();
                seen.extend(batch.records);
                if finished && empty {
                    return seen;
                }
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let seen = reader.join().unwrap();
    assert_eq!(seen.len(), WRITERS * ROWS);
    assert!(seen.windows(2).all(|w| w[0].commit_us < w[1].commit_us));
    // Per row, the values arrive in the order each writer wrote them.
    let mut last: HashMap<Vec<u8>, i64> = HashMap::new();
    for c in &seen {
        let Mutation::SetCell { value, .. } = &c.mutations[0] else {
            panic!("{c:?}");
        };
        let v: i64 = String::from_utf8_lossy(value).parse().unwrap();
        let prev = last.insert(c.row_key.clone(), v);
        assert!(
            prev.is_none_or(|p| p < v),
            "{:?}: {prev:?} then {v}",
            c.row_key
        );
    }
}
