//! The time-series service on the embedded engine, for every pattern: records round
//! trip, versions upsert or are rejected with the stored version, retention windows
//! hold, schemas stay typed, selections prune, and everything survives a reopen.
#![expect(
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use almanac_timeseries::MagneticWrites;
use common::*;

#[test]
fn every_pattern_round_trips_single_and_multi_records() -> Result {
    for pattern in Pattern::ALL {
        for reverse in [false, true] {
            let f = fixture("roundtrip")?;
            let t = table(&f, pattern, reverse)?;
            let base = now_ms() - 3_600_000;
            let mut records = Vec::new();
            for balloon in ["3698", "3699"] {
                for minute in 0..5 {
                    let time = base + minute * 60_000 + 7; // sub-second times too
                    let d = [("location", "us-west2"), ("balloon", balloon)];
                    records.push(single(
                        &d,
                        "pressure",
                        "BIGINT",
                        &(94_000 + minute).to_string(),
                        time,
                    ));
                    records.push(single(&d, "temperature", "DOUBLE", "9.5", time));
                    records.push(multi(
                        &d,
                        &[
                            ("humidity", "65.5", "DOUBLE"),
                            ("ok", "true", "BOOLEAN"),
                            ("note", "a#b@c", "VARCHAR"),
                            ("seen", "5", "TIMESTAMP"),
                        ],
                        time,
                    ));
                }
            }
            let got = f.ts.write_records("db1", &t, None, &records)?;
            assert_eq!(got.total, 30, "{pattern:?}");
            let points = all(&f.ts, &t, &Selection::default())?;
            assert_eq!(points.len(), 30, "{pattern:?} reverse={reverse}");
            let one = points
                .iter()
                .find(|p| {
                    p.measure_name == "pressure"
                        && p.time_ns == (base + 120_007) * 1_000_000
                        && p.dimensions[1].1 == "3699"
                })
                .ok_or("pressure point missing")?;
            assert_eq!(one.measures, Measures::Single(Value::Bigint(94_002)));
            assert_eq!(
                one.dimensions,
                vec![
                    ("location".into(), "us-west2".into()),
                    ("balloon".into(), "3699".into())
                ]
            );
            let m = points
                .iter()
                .find(|p| p.measure_name == "readings")
                .ok_or("multi missing")?;
            let Measures::Multi(vs) = &m.measures else {
                panic!("not multi")
            };
            assert!(vs.contains(&("note".into(), Value::Varchar("a#b@c".into()))));
            assert!(vs.contains(&("seen".into(), Value::Timestamp(5_000_000))));
            // Selections prune: one measure, one balloon, one time range.
            let sel = Selection {
                measure_name: Some("temperature".into()),
                dimensions: vec![("balloon".into(), "3698".into())],
                start_ns: (base + 60_000) * 1_000_000,
                end_ns: (base + 180_000) * 1_000_000,
                ..Selection::default()
            };
            let got = all(&f.ts, &t, &sel)?;
            assert_eq!(got.len(), 2, "{pattern:?} reverse={reverse}: {got:?}");
            assert!(
                got.iter()
                    .all(|p| p.measure_name == "temperature" && p.dimensions[1].1 == "3698")
            );
            // Attribute projection of multi-measure records.
            let sel = Selection {
                attributes: Some(vec!["humidity".into()]),
                measure_name: Some("readings".into()),
                ..Selection::default()
            };
            let got = all(&f.ts, &t, &sel)?;
            assert_eq!(got.len(), 10);
            assert!(
                got.iter().all(|p| p.measures
                    == Measures::Multi(vec![("humidity".into(), Value::Double(65.5))]))
            );
            // Latest per series.
            let (latest, _) = f.ts.latest(
                "db1",
                &t,
                &Selection {
                    measure_name: Some("pressure".into()),
                    ..Selection::default()
                },
            )?;
            assert_eq!(latest.len(), 2, "{pattern:?} reverse={reverse}");
            assert!(
                latest
                    .iter()
                    .all(|p| p.time_ns == (base + 240_007) * 1_000_000
                        && p.measures == Measures::Single(Value::Bigint(94_004)))
            );
        }
    }
    Ok(())
}

#[test]
fn versions_upsert_idempotent_or_rejected_with_the_stored_version() -> Result {
    for pattern in Pattern::ALL {
        let f = fixture("versions")?;
        let t = table(&f, pattern, false)?;
        let d = [("host", "h1")];
        let time = now_ms() - 1000;
        let mut r = single(&d, "cpu", "DOUBLE", "1.5", time);
        f.ts.write_records("db1", &t, None, std::slice::from_ref(&r))?;
        // Same version, same value: accepted, nothing changes.
        assert_eq!(
            f.ts.write_records("db1", &t, None, std::slice::from_ref(&r))?
                .total,
            1
        );
        // Same version, different value: rejected with version 1.
        r.measure_value = Some("2.5".into());
        assert_eq!(
            rejected(f.ts.write_records("db1", &t, None, std::slice::from_ref(&r))),
            vec![(0, Some(1))]
        );
        // Higher version: upserts.
        r.version = Some(5);
        f.ts.write_records("db1", &t, None, std::slice::from_ref(&r))?;
        let got = all(&f.ts, &t, &Selection::default())?;
        assert_eq!(got.len(), 1, "{pattern:?}: {got:?}");
        assert_eq!(
            (got[0].version, &got[0].measures),
            (5, &Measures::Single(Value::Double(2.5)))
        );
        // Lower version: rejected with 5.
        r.version = Some(4);
        r.measure_value = Some("9".into());
        assert_eq!(
            rejected(f.ts.write_records("db1", &t, None, std::slice::from_ref(&r))),
            vec![(0, Some(5))]
        );
        // Within one request: the later record sees the earlier one.
        let a = single(&d, "cpu", "DOUBLE", "7", time + 1);
        let mut b = a.clone();
        b.measure_value = Some("8".into());
        let mut c = b.clone();
        c.version = Some(2);
        assert_eq!(
            rejected(f.ts.write_records("db1", &t, None, &[a, b, c])),
            vec![(1, Some(1))]
        );
        let got = all(&f.ts, &t, &Selection::default())?;
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[1].version, &got[1].measures),
            (2, &Measures::Single(Value::Double(8.0)))
        );
        // After a restart of the process (marks forgotten) the stored versions still hold.
        let path = f._dir.0.clone();
        let clock = f.clock.clone();
        drop(f.ts);
        let ts = open_at(&path, clock)?;
        let mut r = single(&d, "cpu", "DOUBLE", "3", time);
        r.version = Some(5);
        assert_eq!(
            rejected(ts.write_records("db1", &t, None, std::slice::from_ref(&r))),
            vec![(0, Some(5))]
        );
        assert_eq!(all(&ts, &t, &Selection::default())?.len(), 2);
    }
    Ok(())
}

#[test]
fn bucketed_patterns_keep_one_point_per_series_per_millisecond() -> Result {
    for pattern in [Pattern::BucketColumns, Pattern::BucketCells] {
        let f = fixture("collide")?;
        let t = table(&f, pattern, false)?;
        let ns = (now_ms() - 10) * 1_000_000;
        let mut a = single(&[("h", "1")], "cpu", "DOUBLE", "1", ns + 1);
        a.time_unit = Some("NANOSECONDS".into());
        let mut b = a.clone();
        b.time = Some((ns + 2).to_string().into());
        assert_eq!(
            rejected(f.ts.write_records("db1", &t, None, &[a, b])).len(),
            1
        );
        let got = all(&f.ts, &t, &Selection::default())?;
        assert_eq!(
            got.iter().map(|p| p.time_ns).collect::<Vec<_>>(),
            vec![ns + 1],
            "nanoseconds survive"
        );
    }
    Ok(())
}

#[test]
fn retention_windows_and_magnetic_writes() -> Result {
    let f = fixture("retention")?;
    let t = table(&f, Pattern::BucketCells, false)?;
    let hour = 3_600_000;
    let old = single(&[("h", "1")], "cpu", "DOUBLE", "1", now_ms() - 25 * hour);
    let future = single(&[("h", "1")], "cpu", "DOUBLE", "1", now_ms() + 16 * 60_000);
    let ancient = single(
        &[("h", "1")],
        "cpu",
        "DOUBLE",
        "1",
        now_ms() - 31 * 24 * hour,
    );
    let ok = single(&[("h", "1")], "cpu", "DOUBLE", "1", now_ms() - 23 * hour);
    let r = rejected(f.ts.write_records(
        "db1",
        &t,
        None,
        &[old.clone(), future.clone(), ancient.clone(), ok],
    ));
    assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    f.ts.update_table(
        "db1",
        &t,
        None,
        Some(MagneticWrites {
            enabled: true,
            rejected_report_location: None,
        }),
        None,
    )?;
    let out =
        f.ts.write_records_outcome("db1", &t, None, &[old, future, ancient])?;
    assert_eq!(
        out.rejected.iter().map(|x| x.index).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!((out.ingested.total, out.ingested.magnetic_store), (1, 1));
    // GC enforces the retention on reads: 31 days later everything is gone.
    f.clock.advance(31 * 24 * hour * 1000);
    assert!(all(&f.ts, &t, &Selection::default())?.is_empty());
    Ok(())
}

#[test]
fn schema_types_and_request_limits() -> Result {
    let f = fixture("schema")?;
    let t = table(&f, Pattern::RowColumns, false)?;
    let time = now_ms() - 1;
    f.ts.write_records(
        "db1",
        &t,
        None,
        &[single(&[("h", "1")], "cpu", "DOUBLE", "1", time)],
    )?;
    let r = rejected(f.ts.write_records(
        "db1",
        &t,
        None,
        &[
            single(&[("h", "1")], "cpu", "BIGINT", "1", time + 1),
            single(&[("h", "")], "cpu", "DOUBLE", "1", time + 2),
            single(&[("h", "2")], "mem", "VARCHAR", "x", time + 3),
        ],
    ));
    assert_eq!(r, vec![(0, None), (1, None)]);
    let meta = f.ts.describe_table("db1", &t)?;
    assert_eq!(
        meta.schema.measures.len(),
        2,
        "mem was admitted, the BIGINT cpu was not"
    );
    assert!(matches!(
        f.ts.write_records("db1", &t, None, &[]),
        Err(Error::Validation(_))
    ));
    let many = vec![single(&[("h", "1")], "cpu", "DOUBLE", "1", time); 101];
    assert!(matches!(
        f.ts.write_records("db1", &t, None, &many),
        Err(Error::Validation(_))
    ));
    assert!(matches!(
        f.ts.write_records("db1", "nope", None, &many),
        Err(Error::NotFound { kind: "table", .. })
    ));
    assert!(matches!(
        f.ts.write_records("nodb", "nope", None, &many),
        Err(Error::NotFound {
            kind: "database",
            ..
        })
    ));
    Ok(())
}

#[test]
fn catalog_crud_and_reopen() -> Result {
    let f = fixture("catalog")?;
    f.ts.create_database("alpha", None)?;
    assert!(matches!(
        f.ts.create_database("alpha", None),
        Err(Error::Conflict { .. })
    ));
    assert!(matches!(
        f.ts.create_database("a", None),
        Err(Error::Validation(_))
    ));
    for i in 0..5 {
        f.ts.create_table("alpha", &format!("t{i:02}"), NewTable::default())?;
    }
    assert!(matches!(
        f.ts.create_table("alpha", "t00", NewTable::default()),
        Err(Error::Conflict { .. })
    ));
    assert!(matches!(
        f.ts.delete_database("alpha"),
        Err(Error::Validation(_))
    ));
    assert_eq!(f.ts.describe_database("alpha")?.table_count, 5);
    let page = f.ts.list_tables(Some("alpha"), Some(("alpha", "t01")), 2)?;
    assert_eq!(
        page.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["t02", "t03"]
    );
    f.ts.update_table(
        "alpha",
        "t00",
        Some(Retention {
            memory_hours: 2,
            magnetic_days: 9,
        }),
        None,
        None,
    )?;
    f.ts.delete_table("alpha", "t04")?;
    let path = f._dir.0.clone();
    drop(f.ts);
    let ts = open_at(&path, f.clock.clone())?;
    assert_eq!(ts.describe_database("alpha")?.table_count, 4);
    assert_eq!(
        ts.describe_table("alpha", "t00")?.retention,
        Retention {
            memory_hours: 2,
            magnetic_days: 9
        }
    );
    assert!(matches!(
        ts.describe_table("alpha", "t04"),
        Err(Error::NotFound { .. })
    ));
    Ok(())
}

#[test]
fn a_required_dimension_partition_key_rejects_records_without_it() -> Result {
    let f = fixture("partition")?;
    f.ts.create_database("db1", None)?;
    let schema = |enforcement: &str| {
        almanac_timeseries::TableSchema::from_json(&serde_json::json!({
            "CompositePartitionKey": [
                {"Type": "DIMENSION", "Name": "host", "EnforcementInRecord": enforcement}
            ]
        }))
    };
    f.ts.create_table(
        "db1",
        "keyed",
        NewTable {
            partition_key: Some(schema("REQUIRED")?),
            ..NewTable::default()
        },
    )?;
    let t = now_ms() - 60_000;
    let with = single(&[("host", "a"), ("dc", "x")], "cpu", "DOUBLE", "1", t);
    let without = single(&[("dc", "x")], "cpu", "DOUBLE", "2", t + 1);
    let r =
        f.ts.write_records("db1", "keyed", None, &[with.clone(), without.clone()]);
    let Err(Error::Rejected(r)) = r else {
        panic!("expected a rejection, got {r:?}");
    };
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].index, 1);
    assert!(r[0].reason.contains("Dimension host"), "{}", r[0].reason);
    // The key may come from CommonAttributes.
    let common = almanac_timeseries::Record {
        dimensions: dims(&[("host", "b")]),
        ..almanac_timeseries::Record::default()
    };
    f.ts.write_records(
        "db1",
        "keyed",
        Some(&common),
        std::slice::from_ref(&without),
    )?;
    assert_eq!(all(&f.ts, "keyed", &Selection::default())?.len(), 2);
    // It survives a reopen; then OPTIONAL lets records without it in, and the key
    // itself cannot change.
    let path = f._dir.0.clone();
    drop(f.ts);
    let ts = open_at(&path, f.clock.clone())?;
    assert_eq!(
        ts.describe_table("db1", "keyed")?.partition_key,
        Some(schema("REQUIRED")?)
    );
    assert_eq!(
        rejected(ts.write_records("db1", "keyed", None, std::slice::from_ref(&without))),
        vec![(0, None)]
    );
    ts.update_table("db1", "keyed", None, None, Some(schema("OPTIONAL")?))?;
    ts.write_records("db1", "keyed", None, &[without])?;
    let other = almanac_timeseries::TableSchema::from_json(&serde_json::json!({
        "CompositePartitionKey": [{"Type": "MEASURE"}]
    }))?;
    let Err(e) = ts.update_table("db1", "keyed", None, None, Some(other)) else {
        panic!("changing the partition key was accepted");
    };
    assert!(e.to_string().contains("cannot change"), "{e}");
    assert_eq!(
        ts.describe_table("db1", "keyed")?.partition_key,
        Some(schema("OPTIONAL")?)
    );
    Ok(())
}

#[test]
fn tags_survive_a_reopen() -> Result {
    use almanac_timeseries::{Resource, Tag};
    let tag = |k: &str, v: &str| Tag {
        key: k.into(),
        value: v.into(),
    };
    let f = fixture("tags")?;
    f.ts.create_database_tagged("db1", None, vec![tag("team", "a")])?;
    f.ts.create_table(
        "db1",
        "tagged",
        NewTable {
            tags: vec![tag("env", "prod")],
            ..NewTable::default()
        },
    )?;
    let table = Resource::Table("db1".into(), "tagged".into());
    f.ts.tag_resource(&table, vec![tag("env", "dev"), tag("owner", "me")])?;
    f.ts.untag_resource(&table, &["owner".into()])?;
    let refused = f.ts.tag_resource(&table, vec![tag("aws:x", "1")]);
    assert!(refused.is_err(), "{refused:?}");
    let missing = f.ts.tags(&Resource::Table("db1".into(), "nope".into()));
    assert!(
        matches!(missing, Err(Error::NotFound { .. })),
        "{missing:?}"
    );
    let path = f._dir.0.clone();
    drop(f.ts);
    let ts = open_at(&path, f.clock.clone())?;
    assert_eq!(ts.tags(&table)?, vec![tag("env", "dev")]);
    assert_eq!(
        ts.tags(&Resource::Database("db1".into()))?,
        vec![tag("team", "a")]
    );
    Ok(())
}
