//! End-to-end checks of the engine's public API on a real data directory.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::mutation::{AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::schema::{
    Aggregate, FamilyChange, FamilySpec, GcRule, Granularity, TableSpec, ValueType,
};
use almanac_engine::{DropRows, Durability, Engine, Options, ReadRequest};

mod common;

const I: &str = "projects/p/instances/i";

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

fn set(f: &str, q: &str, ts: i64, v: &str) -> Mutation {
    Mutation::SetCell {
        family: f.into(),
        qualifier: q.into(),
        timestamp_us: ts,
        value: v.into(),
    }
}

fn cells(e: &Engine, row: &str) -> Vec<(String, String, i64, String)> {
    e.read_row(I, "t", row.as_bytes(), None)
        .unwrap()
        .map(|r| {
            r.cells
                .into_iter()
                .map(|c| {
                    (
                        c.family.to_string(),
                        String::from_utf8_lossy(&c.qualifier).into(),
                        c.timestamp_us,
                        String::from_utf8_lossy(&c.value).into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn write_read_delete_reopen() {
    let scratch = common::scratch("smoke");
    let dir = scratch.path();
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let e = open(dir, clock.clone());
    let spec = TableSpec {
        families: vec![
            ("cf".into(), FamilySpec::default()),
            (
                "v2".into(),
                FamilySpec {
                    gc_rule: GcRule::MaxVersions(2),
                    ..FamilySpec::default()
                },
            ),
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
    e.mutate_row(
        I,
        "t",
        b"r1",
        &[
            set("cf", "a", 1000, "x"),
            set("cf", "a", 2000, "y"),
            set("cf", "b", -1, "z"),
        ],
    )
    .unwrap();
    for ts in [1000, 2000, 3000] {
        e.mutate_row(I, "t", b"r1", &[set("v2", "q", ts, &ts.to_string())])
            .unwrap();
    }
    let got = cells(&e, "r1");
    assert_eq!(got[0], ("cf".into(), "a".into(), 2000, "y".into()));
    assert_eq!(got[1], ("cf".into(), "a".into(), 1000, "x".into()));
    assert_eq!(got[2], ("cf".into(), "b".into(), 1_000_000_000, "z".into()));
    assert_eq!(got.len(), 5, "max_versions 2 hides the oldest: {got:?}");
    // Aggregates.
    for v in [5, 7] {
        let m = Mutation::AddToCell {
            family: "sum".into(),
            qualifier: "n".into(),
            timestamp_us: 0,
            input: AggregateInput::Int(v),
        };
        e.mutate_row(I, "t", b"r1", &[m]).unwrap();
    }
    let r = e.read_row(I, "t", b"r1", None).unwrap().unwrap();
    assert_eq!(r.cells.last().unwrap().value, 12i64.to_be_bytes());
    // RMW.
    let inc = ReadModifyWriteRule {
        family: "cf".into(),
        qualifier: "n".into(),
        op: ReadModifyWriteOp::Increment(3),
    };
    let out = e
        .read_modify_write(I, "t", b"r2", &[inc.clone(), inc])
        .unwrap();
    assert_eq!(out.cells.len(), 1);
    assert_eq!(out.cells[0].value, 6i64.to_be_bytes());
    // Deletes.
    e.mutate_row(
        I,
        "t",
        b"r1",
        &[Mutation::DeleteFromColumn {
            family: "cf".into(),
            qualifier: "a".into(),
            start_us: 2000,
            end_us: None,
        }],
    )
    .unwrap();
    assert_eq!(cells(&e, "r1").iter().filter(|c| c.1 == "a").count(), 1);
    // Sweep keeps results identical.
    let before = cells(&e, "r1");
    let stats = e.sweep().unwrap();
    assert_eq!(stats.collected, 1);
    assert_eq!(cells(&e, "r1"), before);
    drop(e);
    let e = open(dir, clock);
    assert_eq!(cells(&e, "r1"), before);
    assert_eq!(
        e.read_rows(I, "t", ReadRequest::default()).unwrap().count(),
        2
    );
    let rev: Vec<_> = e
        .read_rows(
            I,
            "t",
            ReadRequest {
                reversed: true,
                ..ReadRequest::default()
            },
        )
        .unwrap()
        .map(|r| r.unwrap().key)
        .collect();
    assert_eq!(rev, vec![b"r2".to_vec(), b"r1".to_vec()]);
    e.drop_rows(I, "t", &DropRows::All).unwrap();
    assert_eq!(
        e.read_rows(I, "t", ReadRequest::default()).unwrap().count(),
        0
    );
    assert!(e.sweep().unwrap().purged > 0);
}

fn add(f: &str, ts: i64, v: i64) -> Mutation {
    Mutation::AddToCell {
        family: f.into(),
        qualifier: b"n".to_vec(),
        timestamp_us: ts,
        input: AggregateInput::Int(v),
    }
}

/// The sums in row `r` of table `agg`, newest first, as (timestamp, value).
fn sums(e: &Engine) -> Vec<(i64, i64)> {
    e.read_row(I, "agg", b"r", None)
        .unwrap()
        .map(|r| {
            r.cells
                .iter()
                .map(|c| {
                    let v: [u8; 8] = c.value.as_slice().try_into().unwrap();
                    (c.timestamp_us, i64::from_be_bytes(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn add_to_cell_into_a_collected_cell_starts_from_zero() {
    const HOUR: i64 = 3_600_000_000;
    let scratch = common::scratch("smoke");
    let dir = scratch.path();
    let clock = Arc::new(ManualClock::new(100 * HOUR));
    let e = open(dir, clock.clone());
    let family = |gc_rule| FamilySpec {
        gc_rule,
        value_type: ValueType::Aggregate(Aggregate::Sum),
    };
    let spec = TableSpec {
        families: vec![
            ("aged".into(), family(GcRule::MaxAge { max_age_us: HOUR })),
            ("versions".into(), family(GcRule::MaxVersions(1))),
        ],
        ..TableSpec::default()
    };
    e.create_table(I, "agg", spec).unwrap();
    let t0 = 100 * HOUR;

    // A visible cell folds as before.
    e.mutate_row(I, "agg", b"r", &[add("aged", t0, 5), add("aged", t0, 2)])
        .unwrap();
    assert_eq!(sums(&e), vec![(t0, 7)]);

    // Past max age the cell is collected (hidden, not yet swept): the next add at its
    // timestamp starts from zero. Relaxing the rule shows what is stored: 3, not 10.
    clock.advance(2 * HOUR);
    assert_eq!(sums(&e), vec![]);
    e.mutate_row(I, "agg", b"r", &[add("aged", t0, 3)]).unwrap();
    let relax = |f: &str| {
        e.modify_families(I, "agg", &[FamilyChange::Update(f.into(), GcRule::KeepAll)])
            .unwrap();
    };
    relax("aged");
    assert_eq!(sums(&e), vec![(t0, 3)]);

    // The same for a cell hidden by max_versions: once the newer version is deleted,
    // the older cell shows only what was added after it was hidden.
    let t1 = t0 + 1000;
    e.mutate_row(I, "agg", b"r", &[Mutation::DeleteFromRow])
        .unwrap();
    e.mutate_row(I, "agg", b"r", &[add("versions", t0, 5)])
        .unwrap();
    e.mutate_row(I, "agg", b"r", &[add("versions", t1, 1)])
        .unwrap();
    e.mutate_row(I, "agg", b"r", &[add("versions", t0, 4)])
        .unwrap();
    assert_eq!(sums(&e), vec![(t1, 1)]);
    let delete_newer = Mutation::DeleteFromColumn {
        family: "versions".into(),
        qualifier: b"n".to_vec(),
        start_us: t1,
        end_us: None,
    };
    e.mutate_row(I, "agg", b"r", &[delete_newer]).unwrap();
    assert_eq!(sums(&e), vec![(t0, 4)]);
    relax("versions");
    assert_eq!(sums(&e), vec![(t0, 4)]);
}

/// A compaction frees the disk the replaced tables took at once, with no write after
/// it and no reopen: deleting every row and compacting leaves little on disk.
#[test]
fn compaction_deletes_the_files_it_replaced() {
    let e = common::ScratchEngine::quiet("compact-frees", Durability::None);
    let spec = TableSpec {
        families: vec![("f".into(), FamilySpec::default())],
        ..TableSpec::default()
    };
    e.create_table(I, "t", spec).unwrap();
    // 4,000 rows of 4 KiB that do not compress: 16 MiB of tables once flushed.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut noise = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'!' + (seed % 90) as u8)
            })
            .collect()
    };
    for i in 0..4_000 {
        let key = format!("row{i:05}");
        e.mutate_row(
            I,
            "t",
            key.as_bytes(),
            &[set("f", "q", 1_000, &noise(4096))],
        )
        .unwrap();
    }
    e.flush().unwrap();
    // Tables only: the journal file is preallocated whatever it holds.
    let tables = |e: &Engine| e.disk_space().unwrap() - e.journal_space().unwrap();
    let full = tables(&e);
    assert!(full > 8 << 20, "{full} bytes of tables after the load");
    for i in 0..4_000 {
        let key = format!("row{i:05}");
        e.mutate_row(I, "t", key.as_bytes(), &[Mutation::DeleteFromRow])
            .unwrap();
    }
    e.compact().unwrap();
    let after = tables(&e);
    assert!(
        after < full / 4,
        "{after} bytes of tables after deleting every row and compacting, {full} before"
    );
}

/// A DeleteFromColumn over one timestamp unit deletes exactly that cell, whether or
/// not it exists, and leaves its neighbours (the unit is a millisecond on a MILLIS
/// table, a microsecond on a MICROS one).
#[test]
fn delete_of_one_timestamp_unit_deletes_one_cell() {
    for (granularity, unit) in [(Granularity::Millis, 1_000), (Granularity::Micros, 1)] {
        let e = common::ScratchEngine::quiet("delete-one", Durability::None);
        let spec = TableSpec {
            families: vec![("f".into(), FamilySpec::default())],
            granularity,
            ..TableSpec::default()
        };
        e.create_table(I, "t", spec).unwrap();
        let ts = [1_000_000, 1_000_000 + unit, 1_000_000 + 2 * unit];
        for t in ts {
            e.mutate_row(I, "t", b"r", &[set("f", "q", t, &t.to_string())])
                .unwrap();
        }
        let delete = |start: i64| Mutation::DeleteFromColumn {
            family: "f".into(),
            qualifier: b"q".to_vec(),
            start_us: start,
            end_us: Some(start + unit),
        };
        // The middle cell, and one that was never written.
        e.mutate_row(I, "t", b"r", &[delete(ts[1]), delete(5_000_000)])
            .unwrap();
        let left: Vec<i64> = cells(&e, "r").into_iter().map(|c| c.2).collect();
        assert_eq!(left, vec![ts[2], ts[0]], "{granularity:?}");
    }
}

/// The sweep skips a table whose cells are all too young for its age rules, and still
/// collects what a backfill of old cells or the clock's advance makes collectable.
#[test]
fn the_sweep_skips_only_tables_with_nothing_old_enough() {
    const HOUR: i64 = 3_600_000_000;
    let scratch = common::scratch("smoke");
    let clock = Arc::new(ManualClock::new(100 * HOUR));
    let e = open(scratch.path(), clock.clone());
    let spec = TableSpec {
        families: vec![(
            "aged".into(),
            FamilySpec {
                gc_rule: GcRule::MaxAge { max_age_us: HOUR },
                ..FamilySpec::default()
            },
        )],
        ..TableSpec::default()
    };
    e.create_table(I, "t", spec).unwrap();
    let t0 = 100 * HOUR;
    e.mutate_row(I, "t", b"new", &[set("aged", "q", t0, "a")])
        .unwrap();
    assert_eq!(e.sweep().unwrap().collected, 0, "a new table: no walk");
    assert_eq!(e.sweep().unwrap().collected, 0, "nothing old enough");
    // A backfilled cell already past the rule's age.
    e.mutate_row(I, "t", b"old", &[set("aged", "q", t0 - 2 * HOUR, "b")])
        .unwrap();
    assert_eq!(e.sweep().unwrap().collected, 1, "the backfilled cell");
    assert_eq!(e.sweep().unwrap().collected, 0);
    clock.advance(2 * HOUR);
    assert_eq!(e.sweep().unwrap().collected, 1, "the first cell, aged out");
    // Relaxing the rule shows what is stored: nothing.
    e.modify_families(
        I,
        "t",
        &[FamilyChange::Update("aged".into(), GcRule::KeepAll)],
    )
    .unwrap();
    assert_eq!(
        e.read_rows(I, "t", ReadRequest::default()).unwrap().count(),
        0
    );
}
