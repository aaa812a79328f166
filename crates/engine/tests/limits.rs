//! Every limit of docs/format.md, Limits: one case at the limit (accepted) and one just past it
//! (a clear `Invalid` error naming the limit, and nothing written).
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};

use almanac_engine::filter::{CompiledFilter, RowFilter};
use almanac_engine::limits::*;
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::FamilyChange;
use almanac_engine::schema::{FamilySpec, GcRule, Granularity, TableSpec};
use almanac_engine::{Durability, Engine, Error, Options, ReadRequest, RowMutations, Warning};

mod common;

use common::ScratchEngine;

const I: &str = "projects/p/instances/l";

fn engine(name: &str) -> ScratchEngine {
    engine_with(name, Options::default())
}

fn engine_with(name: &str, options: Options) -> ScratchEngine {
    let e = ScratchEngine::open(
        &format!("limits-{name}"),
        Options {
            durability: Durability::None,
            sweep_interval: None,
            ..options
        },
    );
    let spec = TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        granularity: Granularity::Millis,
        deletion_protection: false,
        change_retention_us: None,
    };
    e.create_table(I, "t", spec).unwrap();
    e
}

fn set(q: Vec<u8>, ts: i64, v: Vec<u8>) -> Mutation {
    Mutation::SetCell {
        family: "cf".into(),
        qualifier: q,
        timestamp_us: ts,
        value: v,
    }
}

fn rows(e: &Engine) -> usize {
    e.read_rows(I, "t", ReadRequest::default()).unwrap().count()
}

fn assert_invalid(r: Result<impl std::fmt::Debug, Error>, mentions: &str) {
    match r {
        Err(Error::Invalid(m)) => assert!(
            m.contains(mentions),
            "message {m:?} should mention {mentions:?}"
        ),
        other => panic!("expected Invalid mentioning {mentions:?}, got {other:?}"),
    }
}

#[test]
fn row_key_size() {
    let e = engine("rowkey");
    e.mutate_row(
        I,
        "t",
        &vec![b'k'; MAX_ROW_KEY_BYTES],
        &[set(b"q".to_vec(), 0, b"v".to_vec())],
    )
    .unwrap();
    assert_invalid(
        e.mutate_row(
            I,
            "t",
            &vec![b'k'; MAX_ROW_KEY_BYTES + 1],
            &[set(b"q".to_vec(), 0, b"v".to_vec())],
        ),
        "4096",
    );
    assert_invalid(
        e.mutate_row(I, "t", b"", &[set(b"q".to_vec(), 0, b"v".to_vec())]),
        "empty",
    );
    assert_eq!(rows(&e), 1);
}

#[test]
fn qualifier_size_and_no_partial_write() {
    let e = engine("qual");
    e.mutate_row(
        I,
        "t",
        b"r",
        &[set(vec![b'q'; MAX_QUALIFIER_BYTES], 0, b"v".to_vec())],
    )
    .unwrap();
    // A good mutation before the bad one must not be written either.
    let muts = [
        set(b"ok".to_vec(), 0, b"v".to_vec()),
        set(vec![b'q'; MAX_QUALIFIER_BYTES + 1], 0, b"v".to_vec()),
    ];
    assert_invalid(e.mutate_row(I, "t", b"r2", &muts), "16384");
    assert_eq!(rows(&e), 1);
}

#[test]
fn value_size() {
    let e = engine("value");
    e.mutate_row(
        I,
        "t",
        b"r",
        &[set(b"q".to_vec(), 0, vec![0; MAX_VALUE_BYTES])],
    )
    .unwrap();
    assert_invalid(
        e.mutate_row(
            I,
            "t",
            b"r2",
            &[set(b"q".to_vec(), 0, vec![0; MAX_VALUE_BYTES + 1])],
        ),
        "104857600",
    );
    assert_eq!(rows(&e), 1);
    let r = e.read_row(I, "t", b"r", None).unwrap().unwrap();
    assert_eq!(r.cells[0].value.len(), MAX_VALUE_BYTES);
}

#[test]
fn mutations_per_request() {
    let e = engine("muts");
    let at_limit: Vec<Mutation> = (0..MAX_MUTATIONS_PER_REQUEST)
        .map(|i| set(b"q".to_vec(), (i as i64) * 1000, vec![]))
        .collect();
    e.mutate_row(I, "t", b"r", &at_limit).unwrap();
    let mut past = at_limit;
    past.push(set(b"q".to_vec(), 0, vec![]));
    assert_invalid(e.mutate_row(I, "t", b"r2", &past), "100000");
    assert_eq!(rows(&e), 1);
}

#[test]
fn timestamps_follow_granularity() {
    let e = engine("ts");
    e.mutate_row(I, "t", b"r", &[set(b"q".to_vec(), 5_000, vec![])])
        .unwrap();
    assert_invalid(
        e.mutate_row(I, "t", b"r2", &[set(b"q".to_vec(), 5_001, vec![])]),
        "multiple of 1000",
    );
    assert_invalid(
        e.mutate_row(I, "t", b"r2", &[set(b"q".to_vec(), -2, vec![])]),
        "non-negative",
    );
    let filter = RowFilter::TimestampRange {
        start_us: 1500,
        end_us: None,
    };
    assert_invalid(
        e.read_rows(
            I,
            "t",
            ReadRequest {
                filter: Some(filter),
                ..ReadRequest::default()
            },
        )
        .map(|_| ()),
        "multiple of 1000",
    );
    assert_eq!(rows(&e), 1);
}

#[test]
fn tables_per_instance_and_table_id() {
    let e = engine("tables");
    // "t" exists already: fill the instance to the limit.
    for i in 1..MAX_TABLES_PER_INSTANCE {
        e.create_table(I, &format!("t{i}"), TableSpec::default())
            .unwrap();
    }
    match e.create_table(I, "one-too-many", TableSpec::default()) {
        Err(Error::Exhausted(m)) => assert!(m.contains("1000"), "{m}"),
        other => panic!("expected Exhausted, got {other:?}"),
    }
    e.create_table(
        "projects/p/instances/other",
        &"a".repeat(MAX_TABLE_ID_CHARS),
        TableSpec::default(),
    )
    .unwrap();
    assert_invalid(
        e.create_table(
            "projects/p/instances/other",
            &"a".repeat(MAX_TABLE_ID_CHARS + 1),
            TableSpec::default(),
        ),
        "50",
    );
}

#[test]
fn gc_rule_size() {
    let e = engine("gc");
    let ok = GcRule::Union((0..100).map(|_| GcRule::MaxVersions(1)).collect());
    assert!(ok.encoded_len() <= MAX_GC_RULE_BYTES);
    let big = GcRule::Union((0..200).map(|_| GcRule::MaxVersions(1)).collect());
    let spec = |r: GcRule| TableSpec {
        families: vec![(
            "f".into(),
            FamilySpec {
                gc_rule: r,
                ..FamilySpec::default()
            },
        )],
        ..TableSpec::default()
    };
    e.create_table(I, "gc-ok", spec(ok)).unwrap();
    assert_invalid(e.create_table(I, "gc-big", spec(big)), "500");
    assert!(matches!(
        e.get_table(I, "gc-big"),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn filter_nesting_and_labels() {
    fn nest(depth: usize) -> RowFilter {
        (1..depth).fold(RowFilter::PassAll, |f, _| {
            RowFilter::Chain(vec![f, RowFilter::PassAll])
        })
    }
    assert!(CompiledFilter::compile(&nest(MAX_FILTER_DEPTH)).is_ok());
    assert_invalid(
        CompiledFilter::compile(&nest(MAX_FILTER_DEPTH + 1)).map(|_| ()),
        "20",
    );
    assert!(CompiledFilter::compile(&RowFilter::ApplyLabel("a".repeat(MAX_LABEL_CHARS))).is_ok());
    assert_invalid(
        CompiledFilter::compile(&RowFilter::ApplyLabel("a".repeat(MAX_LABEL_CHARS + 1)))
            .map(|_| ()),
        "15",
    );
}

#[test]
fn delete_from_column_time_range_is_checked() {
    let e = engine("delrange");
    let del = |start_us, end_us| Mutation::DeleteFromColumn {
        family: "cf".into(),
        qualifier: b"q".to_vec(),
        start_us,
        end_us,
    };
    // As Cloud Bigtable: the start is >= 0 (no server time in a range), an end is
    // after the start; each rejection names the field and its value and writes nothing.
    for (m, mentions) in [
        (del(-1, None), "start_timestamp_micros -1"),
        (del(-1000, Some(5000)), "start_timestamp_micros -1000"),
        (del(0, Some(-1)), "end_timestamp_micros -1"),
        (del(5000, Some(5000)), "end_timestamp_micros 5000"),
        (del(5000, Some(2000)), "end_timestamp_micros 2000"),
        (del(0, Some(0)), "end_timestamp_micros 0"),
        (del(1500, None), "multiple of 1000"),
    ] {
        let muts = [set(b"q".to_vec(), 1000, b"v".to_vec()), m];
        assert_invalid(e.mutate_row(I, "t", b"r", &muts), mentions);
    }
    assert_eq!(rows(&e), 0);
    // Valid ranges: open end, and end after start.
    e.mutate_row(I, "t", b"r", &[set(b"q".to_vec(), 1000, b"v".to_vec())])
        .unwrap();
    e.mutate_row(I, "t", b"r", &[del(0, Some(1000))]).unwrap();
    assert_eq!(rows(&e), 1);
    e.mutate_row(I, "t", b"r", &[del(1000, Some(2000))])
        .unwrap();
    assert_eq!(rows(&e), 0);
    e.mutate_row(I, "t", b"r", &[set(b"q".to_vec(), 1000, b"v".to_vec())])
        .unwrap();
    e.mutate_row(I, "t", b"r", &[del(0, None)]).unwrap();
    assert_eq!(rows(&e), 0);
}

/// An engine whose warnings land in the returned list.
fn warned_engine(name: &str) -> (ScratchEngine, Arc<Mutex<Vec<Warning>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let options = Options {
        on_warning: Some(Arc::new(move |w: &Warning| {
            sink.lock().unwrap().push(w.clone())
        })),
        ..Options::default()
    };
    (engine_with(name, options), seen)
}

fn taken(seen: &Mutex<Vec<Warning>>) -> Vec<Warning> {
    std::mem::take(&mut *seen.lock().unwrap())
}

#[test]
fn recommended_value_size_warns_but_succeeds() {
    let (e, seen) = warned_engine("warn-value");
    e.mutate_row(
        I,
        "t",
        b"r",
        &[set(b"q".to_vec(), 0, vec![0; RECOMMENDED_VALUE_BYTES])],
    )
    .unwrap();
    assert_eq!(taken(&seen), vec![]);
    e.mutate_row(
        I,
        "t",
        b"r",
        &[set(
            b"q".to_vec(),
            1000,
            vec![0; RECOMMENDED_VALUE_BYTES + 1],
        )],
    )
    .unwrap();
    let w = taken(&seen);
    assert_eq!(
        w,
        vec![Warning::LargeValue {
            table: format!("{I}/tables/t"),
            row: b"r".to_vec(),
            bytes: RECOMMENDED_VALUE_BYTES + 1,
        }]
    );
    assert_eq!(w[0].limit(), RECOMMENDED_VALUE_BYTES as u64);
    assert!(w[0].to_string().contains("10485761"), "{}", w[0]);
    assert_eq!(
        e.read_row(I, "t", b"r", None).unwrap().unwrap().cells[0]
            .value
            .len(),
        RECOMMENDED_VALUE_BYTES + 1
    );
    // A rejected request warns about nothing.
    let muts = [
        set(b"q".to_vec(), 2000, vec![0; RECOMMENDED_VALUE_BYTES + 1]),
        set(b"q".to_vec(), 1, vec![]),
    ];
    assert_invalid(e.mutate_row(I, "t", b"r", &muts), "multiple of 1000");
    assert_eq!(taken(&seen), vec![]);
}

#[test]
fn recommended_families_per_table_warns_but_succeeds() {
    let (e, seen) = warned_engine("warn-families");
    let spec = |n: usize| TableSpec {
        families: (0..n)
            .map(|i| (format!("f{i}"), FamilySpec::default()))
            .collect(),
        ..TableSpec::default()
    };
    e.create_table(I, "at", spec(RECOMMENDED_FAMILIES_PER_TABLE))
        .unwrap();
    assert_eq!(taken(&seen), vec![]);
    e.create_table(I, "past", spec(RECOMMENDED_FAMILIES_PER_TABLE + 1))
        .unwrap();
    assert_eq!(
        taken(&seen),
        vec![Warning::ManyFamilies {
            table: format!("{I}/tables/past"),
            families: RECOMMENDED_FAMILIES_PER_TABLE + 1,
        }]
    );
    let create = FamilyChange::Create("one-more".into(), FamilySpec::default());
    e.modify_families(I, "at", &[create]).unwrap();
    assert_eq!(
        taken(&seen),
        vec![Warning::ManyFamilies {
            table: format!("{I}/tables/at"),
            families: RECOMMENDED_FAMILIES_PER_TABLE + 1,
        }]
    );
    assert_eq!(
        e.get_table(I, "at").unwrap().families.len(),
        RECOMMENDED_FAMILIES_PER_TABLE + 1
    );
    // Dropping a family creates nothing: no new warning.
    e.modify_families(I, "at", &[FamilyChange::Drop("f0".into())])
        .unwrap();
    assert_eq!(taken(&seen), vec![]);
}

/// Cells of 8 MiB: large enough to fill a row in a few dozen writes, and stored apart
/// from their keys, as large values are.
const CHUNK: usize = 8 * 1024 * 1024;

fn chunk(family: &str, q: &str) -> Mutation {
    Mutation::SetCell {
        family: family.into(),
        qualifier: q.as_bytes().to_vec(),
        timestamp_us: -1,
        value: vec![7; CHUNK],
    }
}

/// The row's cells as (family, qualifier, value size).
fn row_cells(e: &Engine, key: &[u8]) -> Vec<(String, Vec<u8>, usize)> {
    e.read_row(I, "t", key, None)
        .unwrap()
        .map(|r| {
            r.cells
                .into_iter()
                .map(|c| (c.family.to_string(), c.qualifier.to_vec(), c.value.len()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn row_size_limit_holds_for_the_stored_row() {
    use almanac_engine::clock::ManualClock;
    const HOUR: i64 = 3_600_000_000;
    let scratch = common::scratch("limits-rowsize");
    let dir = scratch.path();
    let clock = Arc::new(ManualClock::new(1000 * HOUR));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let open = || {
        let sink = Arc::clone(&seen);
        Engine::open(
            dir,
            Options {
                durability: Durability::None,
                sweep_interval: None,
                clock: clock.clone(),
                on_warning: Some(Arc::new(move |w: &Warning| {
                    sink.lock().unwrap().push(w.clone())
                })),
                ..Options::default()
            },
        )
        .unwrap()
    };
    let e = open();
    let aged = FamilySpec {
        gc_rule: GcRule::MaxAge { max_age_us: HOUR },
        ..FamilySpec::default()
    };
    let spec = TableSpec {
        families: vec![("cf".into(), FamilySpec::default()), ("aged".into(), aged)],
        granularity: Granularity::Millis,
        deletion_protection: false,
        change_retention_us: None,
    };
    e.create_table(I, "t", spec).unwrap();

    // Many writes, each far under the limit, fill the row to just under it: row key
    // (1 byte) plus 31 cells of a 3-byte qualifier and 8 MiB.
    let fill = MAX_ROW_BYTES / (CHUNK + 3);
    for i in 0..fill {
        e.mutate_row(I, "t", b"r", &[chunk("aged", &format!("a{i:02}"))])
            .unwrap();
    }
    let full = 1 + fill * (CHUNK + 3);
    assert!(full + CHUNK + 3 > MAX_ROW_BYTES);
    // Passing 100 MiB was reported once, at the write that crossed it.
    let large_rows: Vec<Warning> = taken(&seen)
        .into_iter()
        .filter(|w| matches!(w, Warning::LargeRow { .. }))
        .collect();
    let crossing = 1 + RECOMMENDED_ROW_BYTES.div_ceil(CHUNK + 3) * (CHUNK + 3);
    assert_eq!(
        large_rows,
        vec![Warning::LargeRow {
            table: format!("{I}/tables/t"),
            row: b"r".to_vec(),
            bytes: crossing as u64,
        }]
    );

    // The size survives a reopen, also while the survey of stored rows runs in the
    // background (writes measure their rows until it is done).
    drop(e);
    let e = Engine::open(
        dir,
        Options {
            durability: Durability::None,
            sweep_interval: Some(std::time::Duration::from_secs(3600)),
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    assert_invalid(
        e.mutate_row(I, "t", b"r", &[chunk("cf", "x00")]),
        &MAX_ROW_BYTES.to_string(),
    );
    e.shutdown().unwrap();
    drop(e);
    // Background threads let go of the directory once the engine is shut down.
    let mut tries = 0;
    let e = loop {
        tries += 1;
        match Engine::open(
            dir,
            Options {
                durability: Durability::None,
                sweep_interval: None,
                clock: clock.clone(),
                on_warning: Some({
                    let sink = Arc::clone(&seen);
                    Arc::new(move |w: &Warning| sink.lock().unwrap().push(w.clone()))
                }),
                ..Options::default()
            },
        ) {
            Ok(e) => break e,
            Err(e) if tries > 250 => panic!("the directory stays locked: {e}"),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    };
    let before = row_cells(&e, b"r");
    assert_eq!(before.len(), fill);

    // The crossing write is refused whole, naming the size and the limit.
    let crossing_size = (full + CHUNK + 3).to_string();
    assert_invalid(
        e.mutate_row(I, "t", b"r", &[chunk("cf", "x00")]),
        &format!("row size in bytes after this write is {crossing_size}"),
    );
    assert_invalid(
        e.mutate_row(
            I,
            "t",
            b"r",
            &[set(b"small".to_vec(), 0, b"v".to_vec()), chunk("cf", "x00")],
        ),
        &MAX_ROW_BYTES.to_string(),
    );
    // In a batch, the entry that crosses fails alone; the batch's other rows land.
    let statuses = e
        .mutate_rows(
            I,
            "t",
            &[
                RowMutations {
                    key: b"r".to_vec(),
                    mutations: vec![chunk("cf", "x00")],
                },
                RowMutations {
                    key: b"other".to_vec(),
                    mutations: vec![set(b"q".to_vec(), 0, b"v".to_vec())],
                },
            ],
        )
        .unwrap();
    assert!(
        matches!(statuses[0], Err(Error::Invalid(_))),
        "{statuses:?}"
    );
    assert!(statuses[1].is_ok());
    assert_eq!(row_cells(&e, b"r"), before, "nothing partial was written");

    // A row that shrinks by a delete can grow again.
    let del = Mutation::DeleteFromColumn {
        family: "aged".into(),
        qualifier: b"a00".to_vec(),
        start_us: 0,
        end_us: None,
    };
    e.mutate_row(I, "t", b"r", &[del]).unwrap();
    e.mutate_row(I, "t", b"r", &[chunk("cf", "x00")]).unwrap();
    assert_invalid(
        e.mutate_row(I, "t", b"r", &[chunk("cf", "x01")]),
        &MAX_ROW_BYTES.to_string(),
    );

    // So can a row that shrinks by GC: collected cells count until the sweep removes
    // them (a relaxed rule could show them again), then the space is free.
    clock.advance(2 * HOUR);
    assert_eq!(row_cells(&e, b"r").len(), 1);
    assert_invalid(
        e.mutate_row(I, "t", b"r", &[chunk("cf", "x01")]),
        &MAX_ROW_BYTES.to_string(),
    );
    assert_eq!(e.sweep().unwrap().collected, fill as u64 - 1);
    for i in 1..fill {
        e.mutate_row(I, "t", b"r", &[chunk("cf", &format!("x{i:02}"))])
            .unwrap();
    }
    assert_invalid(
        e.mutate_row(I, "t", b"r", &[chunk("cf", "y00")]),
        &MAX_ROW_BYTES.to_string(),
    );

    // And a row emptied by DeleteFromRow, even in the same request.
    e.mutate_row(
        I,
        "t",
        b"r",
        &[
            Mutation::DeleteFromRow,
            chunk("cf", "z00"),
            chunk("cf", "z01"),
        ],
    )
    .unwrap();
    assert_eq!(row_cells(&e, b"r").len(), 2);
}
