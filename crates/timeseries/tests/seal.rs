//! Sealing closed buckets changes nothing a reader or writer can see: for every pattern,
//! forward and reversed time, random writes (new points, late points, upserts, equal
//! and lower versions) interleaved with seal passes give the same points, rejections,
//! windows and latest points as a plain map of what was accepted. Reproducible from
//! the printed seed.
#![expect(
    clippy::panic,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use almanac_engine::clock::Clock;
use almanac_timeseries::block::Stats;
use almanac_timeseries::query::{Part, Piece, SeriesQueue, scan_partials};

use common::*;

/// A point's identity in the model: measure, host, time in ms.
type Key = (String, String, i64);
/// What the model holds for it: version, the value as written.
type Stored = (i64, String);

const HOSTS: [&str; 3] = ["h1", "h2", "h3"];
const HOUR_MS: i64 = 3_600_000;

/// xorshift64*: small and reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn record(key: &Key, version: i64, value: &str) -> Record<'static> {
    let d = [("host", key.1.as_str())];
    let mut r = if key.0 == "cpu" {
        single(&d, "cpu", "DOUBLE", value, key.2)
    } else {
        multi(
            &d,
            &[
                ("a", value, "DOUBLE"),
                ("b", "7", "BIGINT"),
                ("c", "x", "VARCHAR"),
            ],
            key.2,
        )
    };
    r.version = Some(version);
    r
}

/// What the model expects of one record: accepted, or rejected with this version.
fn resolve(model: &mut BTreeMap<Key, Stored>, key: &Key, version: i64, value: &str) -> Option<i64> {
    match model.get(key) {
        Some((v, _)) if version > *v => {}
        Some((v, old)) if version == *v && old == value => return None,
        Some((v, _)) => return Some(*v),
        None => {}
    }
    model.insert(key.clone(), (version, value.to_string()));
    None
}

fn value_of(p: &Point) -> String {
    match &p.measures {
        Measures::Single(Value::Double(d)) => format!("{d}"),
        Measures::Multi(vs) => match vs.iter().find(|(n, _)| n == "a") {
            Some((_, Value::Double(d))) => format!("{d}"),
            other => panic!("attribute a missing: {other:?}"),
        },
        other => panic!("unexpected measures {other:?}"),
    }
}

fn as_model(points: &[Point]) -> BTreeMap<Key, Stored> {
    points
        .iter()
        .map(|p| {
            let host = p.dimensions[0].1.to_string();
            (
                (p.measure_name.to_string(), host, p.time_ns / 1_000_000),
                (p.version, value_of(p)),
            )
        })
        .collect()
}

/// Per series: points, and the minimum, maximum and sum of their double value.
type Folded = BTreeMap<(String, String), (u64, f64, f64, f64)>;

fn fold(out: &mut Folded, series: (String, String), points: u64, min: f64, max: f64, sum: f64) {
    let e = out
        .entry(series)
        .or_insert((0, f64::INFINITY, f64::NEG_INFINITY, 0.0));
    *e = (e.0 + points, e.1.min(min), e.2.max(max), e.3 + sum);
}

/// What an aggregate over `sel` reads through [`scan_partials`]: whole buckets by their
/// stored summaries, edge buckets by summaries of their points inside the window.
fn partials(f: &Fixture, t: &str, sel: &Selection) -> Result<Folded> {
    let meta = f.ts.describe_table("db1", t)?;
    let mut out = Folded::new();
    let mut failure = None;
    scan_partials(f.ts.store().as_ref(), &meta, sel, &mut |piece| {
        match piece {
            Piece::Bucket {
                measure_name,
                dimensions,
                summary,
            } => {
                let column = summary
                    .columns
                    .iter()
                    .find(|c| c.name.is_empty() || c.name == "a");
                match column.and_then(|c| c.stats.map(|s| (c.count, s))) {
                    Some((count, Stats::Double { min, max, sum })) => fold(
                        &mut out,
                        (measure_name.to_string(), dimensions[0].1.to_string()),
                        count,
                        min,
                        max,
                        sum,
                    ),
                    other => failure = Some(format!("no double column: {other:?}")),
                }
            }
            Piece::Point(p) => {
                let v: f64 = value_of(&p).parse().unwrap_or(f64::NAN);
                let series = (p.measure_name.to_string(), p.dimensions[0].1.to_string());
                fold(&mut out, series, 1, v, v, v);
            }
        }
        ControlFlow::Continue(())
    })?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(out),
    }
}

/// The model's [`partials`] of its points in `window` (ms) that `keep` selects.
fn folded_in(
    model: &BTreeMap<Key, Stored>,
    window: std::ops::Range<i64>,
    keep: impl Fn(&Key) -> bool,
) -> Folded {
    let mut out = Folded::new();
    for (key, (_, value)) in model
        .iter()
        .filter(|(k, _)| window.contains(&k.2) && keep(k))
    {
        let v: f64 = value.parse().unwrap_or(f64::NAN);
        fold(&mut out, (key.0.clone(), key.1.clone()), 1, v, v, v);
    }
    out
}

/// Series → newest time (ms) of the points given.
fn newest(points: &[Point]) -> BTreeMap<(String, String), i64> {
    points
        .iter()
        .map(|p| {
            (
                (p.measure_name.to_string(), p.dimensions[0].1.to_string()),
                p.time_ns / 1_000_000,
            )
        })
        .collect()
}

/// Series → newest time (ms) in the model within `window`.
fn newest_in(
    model: &BTreeMap<Key, Stored>,
    window: std::ops::Range<i64>,
) -> BTreeMap<(String, String), i64> {
    let mut out: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (m, h, time) in model.keys().filter(|(_, _, t)| window.contains(t)) {
        let e = out.entry((m.clone(), h.clone())).or_insert(*time);
        *e = (*e).max(*time);
    }
    out
}

/// What `count` partitions of `sel` read between them: one after another, each reading
/// its own series, or all at once on their own threads, sharing one series queue.
fn in_partitions(
    sel: &Selection,
    count: usize,
    queued: bool,
    read: impl Fn(&Selection) -> Result<Vec<Point<'static>>> + Sync,
) -> Result<Vec<Point<'static>>> {
    let queue = queued.then(|| Arc::new(SeriesQueue::default()));
    let part = |index| Selection {
        part: Some(Part {
            index,
            count,
            queue: queue.clone(),
        }),
        ..sel.clone()
    };
    if !queued {
        let mut out = Vec::new();
        for index in 0..count {
            out.extend(read(&part(index))?);
        }
        return Ok(out);
    }
    let read = &read;
    let results: Vec<std::result::Result<Vec<Point<'static>>, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..count)
            .map(|index| {
                let part = part(index);
                s.spawn(move || read(&part).map_err(|e| e.to_string()))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("a partition panicked".into()))
            })
            .collect()
    });
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn check(f: &Fixture, t: &str, model: &BTreeMap<Key, Stored>, rng: &mut Rng, ctx: &str) -> Result {
    let got = all(&f.ts, t, &Selection::default())?;
    let seen = as_model(&got);
    let missing: Vec<_> = model
        .iter()
        .filter(|(k, _)| !seen.contains_key(*k))
        .collect();
    assert_eq!(
        got.len(),
        model.len(),
        "{ctx}: duplicate or missing points {missing:?}"
    );
    assert_eq!(&as_model(&got), model, "{ctx}: full scan");
    // A window over one host (pinned: key range) and over every host (series by series).
    let now_ms = f.clock.now_us() / 1000;
    let start = now_ms - 22 * HOUR_MS + rng.below((22 * HOUR_MS) as u64) as i64;
    let end = start + rng.below((6 * HOUR_MS) as u64) as i64 + 1;
    let host = HOSTS[rng.below(3) as usize];
    for pinned in [true, false] {
        let sel = Selection {
            measure_name: Some("cpu".into()),
            dimensions: if pinned {
                vec![("host".into(), host.into())]
            } else {
                Vec::new()
            },
            start_ns: start * 1_000_000,
            end_ns: end * 1_000_000,
            ..Selection::default()
        };
        let want: BTreeMap<Key, Stored> = model
            .iter()
            .filter(|((m, h, time), _)| {
                m == "cpu" && (!pinned || h == host) && (start..end).contains(time)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got = all(&f.ts, t, &sel)?;
        assert_eq!(
            as_model(&got),
            want,
            "{ctx}: window {start}..{end} pinned={pinned}"
        );
        // What aggregates read: stored summaries of whole buckets, the edges decoded.
        assert_eq!(
            partials(f, t, &sel)?,
            folded_in(model, start..end, |(m, h, _)| m == "cpu"
                && (!pinned || h == host)),
            "{ctx}: partials of {start}..{end} pinned={pinned}"
        );
        // The partitions of a parallel scan read every point once between them, on
        // their own or sharing one series queue.
        let count = 1 + rng.below(4) as usize;
        for queued in [false, true] {
            let shared = in_partitions(&sel, count, queued, |part| all(&f.ts, t, part))?;
            assert_eq!(
                shared.len(),
                got.len(),
                "{ctx}: {count} partitions (queued={queued}) read a point twice or missed one"
            );
            assert_eq!(
                as_model(&shared),
                want,
                "{ctx}: {count} partitions (queued={queued}) of {start}..{end} pinned={pinned}"
            );
        }
    }
    // A window of whole hours has no edge bucket; one inside an hour is one edge.
    let hour = start - start.rem_euclid(HOUR_MS);
    for (start, end) in [(hour, hour + 3 * HOUR_MS), (hour + 1, hour + HOUR_MS - 1)] {
        let sel = Selection {
            start_ns: start * 1_000_000,
            end_ns: end * 1_000_000,
            ..Selection::default()
        };
        assert_eq!(
            partials(f, t, &sel)?,
            folded_in(model, start..end, |_| true),
            "{ctx}: partials of {start}..{end}"
        );
    }
    // The newest point of every series, and the newest before a time inside a window.
    let (latest, _) = f.ts.latest("db1", t, &Selection::default())?;
    assert_eq!(
        newest(&latest),
        newest_in(model, i64::MIN..i64::MAX),
        "{ctx}: latest"
    );
    let latest_of = |part: &Selection| Ok(f.ts.latest("db1", t, part)?.0);
    for queued in [false, true] {
        let shared = in_partitions(&Selection::default(), 2, queued, latest_of)?;
        assert_eq!(
            shared.len(),
            latest.len(),
            "{ctx}: latest in 2 partitions (queued={queued})"
        );
        assert_eq!(
            newest(&shared),
            newest(&latest),
            "{ctx}: latest in 2 partitions (queued={queued})"
        );
    }
    let (start, end) = (
        now_ms - 22 * HOUR_MS,
        now_ms - rng.below((20 * HOUR_MS) as u64) as i64,
    );
    let sel = Selection {
        start_ns: start * 1_000_000,
        end_ns: end * 1_000_000,
        ..Selection::default()
    };
    let (latest, _) = f.ts.latest("db1", t, &sel)?;
    assert_eq!(
        newest(&latest),
        newest_in(model, start..end),
        "{ctx}: latest before {end}"
    );
    for queued in [false, true] {
        let shared = in_partitions(&sel, 3, queued, latest_of)?;
        assert_eq!(
            shared.len(),
            latest.len(),
            "{ctx}: latest before {end} in 3 partitions (queued={queued})"
        );
        assert_eq!(
            newest(&shared),
            newest(&latest),
            "{ctx}: latest before {end} in 3 partitions (queued={queued})"
        );
    }
    // One series pinned: the walk to the next series stops at the pinned range's end.
    let host = HOSTS[rng.below(3) as usize];
    let pinned = Selection {
        dimensions: vec![("host".into(), host.into())],
        ..sel
    };
    let (latest, _) = f.ts.latest("db1", t, &pinned)?;
    let want: BTreeMap<(String, String), i64> = newest_in(model, start..end)
        .into_iter()
        .filter(|((_, h), _)| h == host)
        .collect();
    assert_eq!(
        newest(&latest),
        want,
        "{ctx}: latest of {host} before {end}"
    );
    Ok(())
}

fn run(pattern: Pattern, reverse: bool, seed: u64) -> Result {
    let ctx = format!("{pattern:?} reverse={reverse} seed={seed}");
    let mut f = fixture("seal")?;
    let t = table(&f, pattern, reverse)?;
    let mut rng = Rng(seed | 1);
    let mut model: BTreeMap<Key, Stored> = BTreeMap::new();
    let mut sealed = 0;
    for step in 0..120 {
        match rng.below(10) {
            0 => sealed += f.ts.seal("db1", &t)?.buckets,
            1 => f.clock.advance(rng.below(20 * 60_000_000) as i64),
            2 if rng.below(2) == 0 => {
                // Reopen: the seal watermark and the series marks come back from disk.
                let path = f._dir.0.clone();
                let placeholder = tempdir::Dir::new("seal-swap");
                let old = std::mem::replace(&mut f.ts, open_at(&placeholder.0, f.clock.clone())?);
                drop(old);
                f.ts = open_at(&path, f.clock.clone())?;
            }
            _ => {
                // A request of 1-5 records: mostly recent, some late, some repeats.
                let now_ms = f.clock.now_us() / 1000;
                let n = 1 + rng.below(5) as usize;
                let mut records = Vec::new();
                let mut expected = Vec::new();
                for i in 0..n {
                    let age = match rng.below(4) {
                        0 => rng.below((20 * HOUR_MS) as u64),
                        _ => rng.below((2 * HOUR_MS) as u64),
                    };
                    // Whole seconds: the bucketed patterns hold one point per ms.
                    let time = (now_ms - age as i64) / 1000 * 1000;
                    let measure = if rng.below(2) == 0 { "cpu" } else { "readings" };
                    let fresh = (
                        measure.to_string(),
                        HOSTS[rng.below(3) as usize].to_string(),
                        time,
                    );
                    // A third of the records hit a stored point: upserts, repeats, lower
                    // versions, in sealed buckets as much as in open ones.
                    let key = match rng.below(3) {
                        0 if !model.is_empty() => {
                            let i = rng.below(model.len() as u64) as usize;
                            model.keys().nth(i).cloned().unwrap_or(fresh)
                        }
                        _ => fresh,
                    };
                    let version = 1 + rng.below(3) as i64;
                    let value = format!("{}.5", rng.below(4));
                    if let Some(v) = resolve(&mut model, &key, version, &value) {
                        expected.push((i, Some(v)));
                    }
                    records.push(record(&key, version, &value));
                }
                let got = match f.ts.write_records("db1", &t, None, &records) {
                    Ok(_) => Vec::new(),
                    Err(_) if expected.is_empty() => {
                        panic!("{ctx} step {step}: unexpected rejection")
                    }
                    r => rejected(r),
                };
                assert_eq!(got, expected, "{ctx} step {step}: rejections");
            }
        }
        if step % 20 == 19 {
            check(&f, &t, &model, &mut rng, &format!("{ctx} step {step}"))?;
        }
    }
    // A last pass seals everything old enough; nothing changes for readers.
    f.clock.advance(2 * HOUR_MS * 1000);
    sealed += f.ts.seal("db1", &t)?.buckets;
    check(&f, &t, &model, &mut rng, &format!("{ctx} final"))?;
    assert!(sealed > 0, "{ctx}: no bucket was sealed");
    // And a second pass right after finds nothing left to do.
    assert_eq!(f.ts.seal("db1", &t)?.buckets, 0, "{ctx}");
    Ok(())
}

#[test]
fn sealing_is_invisible_to_readers_and_writers() -> Result {
    let seed = std::env::var("ALMANAC_SEAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5ea1_u64);
    println!("seed {seed} (ALMANAC_SEAL_SEED reproduces a run)");
    for pattern in Pattern::ALL {
        for reverse in [false, true] {
            for round in 0..3 {
                run(pattern, reverse, seed.wrapping_add(round))?;
            }
        }
    }
    Ok(())
}

#[test]
fn a_sealed_bucket_is_one_row_and_expires_point_by_point() -> Result {
    let f = fixture("seal-rows")?;
    let t = table(&f, Pattern::RowSerialized, false)?;
    let start = (now_ms() - 5 * HOUR_MS) / HOUR_MS * HOUR_MS;
    let records: Vec<Record> = (0..360)
        .map(|i| {
            single(
                &[("host", "h1")],
                "cpu",
                "DOUBLE",
                &format!("{i}.25"),
                start + i * 10_000,
            )
        })
        .collect();
    for chunk in records.chunks(100) {
        f.ts.write_records("db1", &t, None, chunk)?;
    }
    let stats = f.ts.seal("db1", &t)?;
    assert_eq!(
        (stats.buckets, stats.points, stats.rows_removed),
        (1, 360, 359)
    );
    let mut rows = 0;
    let read = f.ts.scan("db1", &t, &Selection::default(), &mut |_| {
        ControlFlow::Continue(())
    })?;
    rows += read.rows;
    assert_eq!((rows, read.points), (1, 360));
    // The table keeps max(24 h in memory, 30 days on magnetic storage): move the clock
    // so that the bucket's first half is past the retention and its second half is not.
    let keep_ms = 30 * 24 * HOUR_MS;
    let later_ms = start + keep_ms + 180 * 10_000;
    f.clock.advance((later_ms - now_ms()) * 1000);
    let got = all(&f.ts, &t, &Selection::default())?;
    assert_eq!(got.len(), 180, "points past the retention are not returned");
    assert!(
        got.iter()
            .all(|p| p.time_ns >= (start + 180 * 10_000) * 1_000_000)
    );
    Ok(())
}
