//! Whole-store dumps: a dump taken while writes go on holds exactly what was written
//! before it, loads into a new data directory that opens like the original, and a
//! damaged dump is refused without leaving a directory behind.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilySpec, TableSpec};
use almanac_engine::{Durability, Engine, Error, Options, ReadRequest, load_dump};

mod common;

const I: &str = "projects/p/instances/i";

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(
        dir,
        Options {
            durability: Durability::None,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .unwrap()
}

fn put(e: &Engine, table: &str, row: &str, v: &[u8]) {
    let m = Mutation::SetCell {
        family: "cf".into(),
        qualifier: b"q".to_vec(),
        timestamp_us: 1_000,
        value: v.to_vec(),
    };
    e.mutate_row(I, table, row.as_bytes(), &[m]).unwrap();
}

fn rows(e: &Engine, table: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    e.read_rows(I, table, ReadRequest::default())
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.key.clone(), r.cells[0].value.clone())
        })
        .collect()
}

fn spec() -> TableSpec {
    TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        ..TableSpec::default()
    }
}

#[test]
fn a_dump_loads_into_a_directory_that_opens_like_the_original() {
    let src = common::scratch("dump-src");
    let e = open(src.path());
    e.create_table(I, "t", spec()).unwrap();
    e.create_table(I, "big", spec()).unwrap();
    for i in 0..12_000 {
        put(&e, "t", &format!("row{i:05}"), format!("v{i}").as_bytes());
    }
    // Values past the blob threshold are stored apart from keys; they come back too.
    put(&e, "big", "blob", &vec![7u8; 300_000]);
    let mut dump = Vec::new();
    let files = vec![("principals.json".to_string(), b"{}".to_vec())];
    let summary = e.dump(&mut dump, &files).unwrap();
    assert!(summary.entries >= 12_001, "{summary:?}");
    // Writes after the dump's instant are not in it.
    put(&e, "t", "row00000", b"changed");
    e.create_table(I, "later", spec()).unwrap();

    let out = common::scratch("dump-out");
    let target = out.path().join("data");
    let loaded = load_dump(&target, dump.as_slice()).unwrap();
    assert_eq!(loaded.entries, summary.entries);
    assert_eq!(loaded.files, vec!["principals.json".to_string()]);
    assert_eq!(
        std::fs::read(target.join("principals.json")).unwrap(),
        b"{}"
    );
    let r = open(&target);
    let got = rows(&r, "t");
    assert_eq!(got.len(), 12_000);
    assert_eq!(got[0].1, b"v0");
    assert_eq!(rows(&e, "t")[1..], got[1..]);
    assert_eq!(rows(&r, "big")[0].1.len(), 300_000);
    assert!(matches!(
        r.get_table(I, "later"),
        Err(Error::NotFound { .. })
    ));
    // The loaded directory is a live one: new tables get fresh ids.
    r.create_table(I, "new", spec()).unwrap();
    put(&r, "new", "a", b"b");
    assert_eq!(rows(&r, "new").len(), 1);
    assert_eq!(rows(&r, "t").len(), 12_000);
}

#[test]
fn a_damaged_dump_is_refused_and_leaves_nothing() {
    let src = common::scratch("dump-bad-src");
    let e = open(src.path());
    e.create_table(I, "t", spec()).unwrap();
    for i in 0..50 {
        put(&e, "t", &format!("row{i}"), b"value");
    }
    let mut dump = Vec::new();
    e.dump(&mut dump, &[]).unwrap();
    let out = common::scratch("dump-bad-out");
    let mut cases: Vec<Vec<u8>> = (0..dump.len())
        .step_by(dump.len() / 40 + 1)
        .map(|n| dump[..n].to_vec())
        .collect();
    for at in [0, 14, dump.len() / 2, dump.len() - 5, dump.len() - 1] {
        let mut flipped = dump.clone();
        flipped[at] ^= 0x40;
        cases.push(flipped);
    }
    let mut longer = dump.clone();
    longer.push(0);
    cases.push(longer);
    for (i, bad) in cases.iter().enumerate() {
        let target = out.path().join(format!("d{i}"));
        match load_dump(&target, bad.as_slice()) {
            Err(Error::Corrupt(_)) => {}
            other => panic!("case {i} ({} bytes): {other:?}", bad.len()),
        }
        assert!(!target.exists(), "case {i} left a directory");
    }
    // A directory that holds something is never written into.
    let taken = out.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("x"), b"keep").unwrap();
    assert!(matches!(
        load_dump(&taken, dump.as_slice()),
        Err(Error::Precondition(_))
    ));
    assert_eq!(std::fs::read(taken.join("x")).unwrap(), b"keep");
}
