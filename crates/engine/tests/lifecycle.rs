//! Deletion protection, undelete, instance deletion, settings and saved copies, on a
//! real data directory and across reopening it.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use almanac_engine::clock::ManualClock;
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilyChange, FamilySpec, TableSpec};
use almanac_engine::{Durability, Engine, Error, Options};

mod common;

const I: &str = "projects/p/instances/i";
const HOUR_US: i64 = 3_600_000_000;

fn open(dir: &std::path::Path, clock: Arc<ManualClock>, window: Duration) -> Engine {
    Engine::open(
        dir,
        Options {
            durability: Durability::None,
            clock,
            sweep_interval: None,
            undelete_window: window,
            ..Options::default()
        },
    )
    .unwrap()
}

fn spec() -> TableSpec {
    TableSpec {
        families: vec![
            ("cf".into(), FamilySpec::default()),
            ("old".into(), FamilySpec::default()),
        ],
        ..TableSpec::default()
    }
}

fn put(e: &Engine, table: &str, row: &str, v: &str) {
    let m = Mutation::SetCell {
        family: "cf".into(),
        qualifier: b"q".to_vec(),
        timestamp_us: 1_000,
        value: v.as_bytes().to_vec(),
    };
    e.mutate_row(I, table, row.as_bytes(), &[m]).unwrap();
}

fn value(e: &Engine, instance: &str, table: &str, row: &str) -> Option<String> {
    let row = e.read_row(instance, table, row.as_bytes(), None).unwrap()?;
    Some(String::from_utf8_lossy(&row.cells[0].value).into_owned())
}

/// Every (row, value) of a table, in order.
fn all_rows(e: &Engine, instance: &str, table: &str) -> Vec<(String, String)> {
    e.read_rows(instance, table, almanac_engine::ReadRequest::default())
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (
                String::from_utf8_lossy(&r.key).into_owned(),
                String::from_utf8_lossy(&r.cells[0].value).into_owned(),
            )
        })
        .collect()
}

#[test]
fn deletion_protection_refuses_delete_and_family_drop_until_lifted() {
    let dir = common::scratch("protect");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    e.create_table(I, "t", spec()).unwrap();
    assert!(
        e.set_deletion_protection(I, "t", true)
            .unwrap()
            .deletion_protection
    );
    let refused = e.delete_table(I, "t").unwrap_err();
    assert!(matches!(refused, Error::Precondition(ref m) if m.contains("deletion protection")));
    let drop_old = [FamilyChange::Drop("old".into())];
    assert!(matches!(
        e.modify_families(I, "t", &drop_old),
        Err(Error::Precondition(_))
    ));
    assert!(matches!(e.delete_instance(I), Err(Error::Precondition(_))));
    // Adding a family is still allowed.
    let create = [FamilyChange::Create("new".into(), FamilySpec::default())];
    e.modify_families(I, "t", &create).unwrap();
    drop(e);
    // The flag survives a reopen, and lifting it allows the delete.
    let e = open(dir.path(), clock, Duration::from_secs(3600));
    assert!(e.get_table(I, "t").unwrap().deletion_protection);
    e.set_deletion_protection(I, "t", false).unwrap();
    e.modify_families(I, "t", &drop_old).unwrap();
    e.delete_table(I, "t").unwrap();
}

#[test]
fn undelete_within_the_window_brings_the_cells_back_and_not_after() {
    let dir = common::scratch("undelete");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    e.create_table(I, "t", spec()).unwrap();
    put(&e, "t", "r1", "one");
    e.delete_table(I, "t").unwrap();
    assert!(e.get_table(I, "t").is_err());
    e.sweep().unwrap();
    // A new table of the same name blocks the undelete until it goes.
    e.create_table(I, "t", spec()).unwrap();
    assert!(matches!(
        e.undelete_table(I, "t"),
        Err(Error::AlreadyExists { .. })
    ));
    put(&e, "t", "r2", "two");
    e.delete_table(I, "t").unwrap();
    drop(e);
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    // Deleting the second table replaced the first deleted one: undelete gives r2.
    e.undelete_table(I, "t").unwrap();
    assert_eq!(value(&e, I, "t", "r2").as_deref(), Some("two"));
    assert_eq!(value(&e, I, "t", "r1"), None);
    // Past the window, a deleted table is gone for good.
    e.delete_table(I, "t").unwrap();
    clock.advance(HOUR_US + 1);
    assert!(matches!(
        e.undelete_table(I, "t"),
        Err(Error::NotFound { .. })
    ));
    e.sweep().unwrap();
    assert!(matches!(
        e.undelete_table(I, "t"),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn a_zero_window_deletes_at_once() {
    let dir = common::scratch("undelete0");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock, Duration::ZERO);
    e.create_table(I, "t", spec()).unwrap();
    put(&e, "t", "r1", "one");
    e.delete_table(I, "t").unwrap();
    assert!(e.undelete_table(I, "t").is_err());
    assert!(e.sweep().unwrap().purged >= 1);
}

#[test]
fn saved_copies_keep_their_instant_restore_and_expire() {
    let dir = common::scratch("copies");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    e.create_table(I, "t", spec()).unwrap();
    for i in 0..2_500 {
        put(&e, "t", &format!("row{i:05}"), &format!("v{i}"));
    }
    let holder = format!("{I}/clusters/c");
    let copy = e
        .save_copy(I, "t", &holder, "snap", Some(2 * HOUR_US), b"n".to_vec())
        .unwrap();
    assert!(copy.bytes > 0);
    assert_eq!(copy.source.name, "t");
    assert!(matches!(
        e.save_copy(I, "t", &holder, "snap", None, Vec::new()),
        Err(Error::AlreadyExists { .. })
    ));
    // Writes after the copy's instant are not in it.
    put(&e, "t", "row00000", "changed");
    put(&e, "t", "zzz", "late");
    let before = all_rows(&e, I, "t");
    drop(e);
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    assert_eq!(e.saved_copies(&holder).unwrap().len(), 1);
    assert_eq!(e.saved_copy(&holder, "snap").unwrap().note, b"n");
    e.restore_copy(&holder, "snap", I, "restored").unwrap();
    let restored = all_rows(&e, I, "restored");
    assert_eq!(restored.len(), 2_500);
    assert_eq!(restored[0], ("row00000".into(), "v0".into()));
    assert_eq!(&restored[1..], &before[1..2_500]);
    assert_eq!(e.get_table(I, "restored").unwrap().families.len(), 2);
    // The restored table is a table like any other.
    put(&e, "restored", "row00001", "new");
    assert_eq!(value(&e, I, "t", "row00001").as_deref(), Some("v1"));
    assert!(matches!(
        e.restore_copy(&holder, "snap", I, "restored"),
        Err(Error::AlreadyExists { .. })
    ));
    // Expired copies are gone, and the sweep purges their cells.
    clock.advance(HOUR_US);
    assert!(e.saved_copies(&holder).unwrap().is_empty());
    assert!(matches!(
        e.saved_copy(&holder, "snap"),
        Err(Error::NotFound { .. })
    ));
    assert!(e.sweep().unwrap().purged >= 2_500);
    assert_eq!(all_rows(&e, I, "restored").len(), 2_500);
}

#[test]
fn deleting_an_instance_takes_its_tables_copies_and_settings() {
    let dir = common::scratch("instance");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock, Duration::from_secs(3600));
    let other = "projects/p/instances/i2";
    for inst in [I, other] {
        e.create_table(inst, "t", spec()).unwrap();
        put(&e, "t", "r", "x");
    }
    e.create_table(other, "t2", spec()).unwrap();
    e.create_table(I, "gone", spec()).unwrap();
    e.delete_table(I, "gone").unwrap();
    e.save_copy(I, "t", &format!("{I}/clusters/c"), "s", None, Vec::new())
        .unwrap();
    e.put_settings(&[
        (I.to_owned(), Some(b"inst".to_vec())),
        (format!("{I}/clusters/c"), Some(b"cluster".to_vec())),
        (format!("{I}/tables/t#iam"), Some(b"policy".to_vec())),
        (other.to_owned(), Some(b"other".to_vec())),
    ])
    .unwrap();
    e.delete_instance(I).unwrap();
    assert!(e.list_tables(I).unwrap().is_empty());
    assert!(e.undelete_table(I, "gone").is_err());
    assert!(e.saved_copies(I).unwrap().is_empty());
    assert_eq!(e.settings(I).unwrap().len(), 1, "only {other} is left");
    assert_eq!(e.setting(other).unwrap().as_deref(), Some(&b"other"[..]));
    assert_eq!(e.list_tables(other).unwrap().len(), 2);
    assert!(e.sweep().unwrap().purged >= 1);
    // The name can be used again at once.
    e.create_table(I, "t", spec()).unwrap();
    assert_eq!(value(&e, I, "t", "r"), None);
}

#[test]
fn settings_round_trip_and_remove() {
    let dir = common::scratch("settings");
    let clock = Arc::new(ManualClock::new(HOUR_US));
    let e = open(dir.path(), clock.clone(), Duration::from_secs(3600));
    e.put_settings(&[("a/b".into(), Some(vec![1])), ("a/c".into(), Some(vec![2]))])
        .unwrap();
    drop(e);
    let e = open(dir.path(), clock, Duration::from_secs(3600));
    assert_eq!(e.settings("a/").unwrap().len(), 2);
    e.put_settings(&[("a/b".into(), None)]).unwrap();
    assert_eq!(e.setting("a/b").unwrap(), None);
    assert_eq!(e.setting("a/c").unwrap(), Some(vec![2]));
}
