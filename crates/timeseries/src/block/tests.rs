//! Round trips of every type and shape, a seeded property test, the encoder's refusals,
//! and a fuzz of the decoder with random and mutated blocks. Sizes and speed are in
//! [`measure`].

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

mod fuzz;
mod measure;
mod projection;

use super::*;

/// xorshift64: a seeded stream for the property and fuzz tests.
pub(super) struct XorShift(pub(super) u64);

impl XorShift {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub(super) fn point(time_ns: i64, measures: Measures<'static>) -> BlockPoint {
    BlockPoint {
        time_ns,
        version: 1,
        measures,
    }
}

/// Encodes, decodes, and checks every point; returns the block.
pub(super) fn round_trip(points: &[BlockPoint], multi: bool) -> Vec<u8> {
    let bytes = encode_block(points, multi).unwrap();
    let back = decode_block(&bytes, multi).unwrap();
    assert_eq!(back.len(), points.len());
    for (a, b) in points.iter().zip(&back) {
        assert_eq!((a.time_ns, a.version), (b.time_ns, b.version));
        assert!(a.measures.same_as(&b.measures), "{a:?} != {b:?}");
    }
    let (first, last, n) = decode_block_times(&bytes).unwrap();
    assert_eq!(first, points[0].time_ns);
    assert_eq!(last, points[points.len() - 1].time_ns);
    assert_eq!(n, points.len());
    bytes
}

fn edge_doubles() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        12.3,
        94558.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
        f64::from_bits(0xfff8_dead_beef_0042), // negative NaN with a payload
        f64::MIN_POSITIVE,
        f64::from_bits(1), // smallest subnormal
        -f64::from_bits(1),
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        std::f64::consts::PI,
        1e22,
        1e-22,
        f64::from(0.1f32),
        9_007_199_254_740_993.0,
    ];
    v.extend(v.clone().iter().rev());
    v
}

fn edge_ints() -> Vec<i64> {
    vec![
        0,
        -1,
        1,
        i64::MIN,
        i64::MAX,
        i64::MIN + 1,
        i64::MAX - 1,
        42,
        -7,
        1 << 62,
        -(1 << 62),
        0,
        0,
    ]
}

fn edge_strings() -> Vec<String> {
    vec![
        String::new(),
        "a".into(),
        "héllo wörld".into(),
        "🎈 balloon".into(),
        "x".repeat(2048),
        "a".into(),
        String::new(),
        "\0nul".into(),
    ]
}

pub(super) fn all_values() -> Vec<Value> {
    let mut v: Vec<Value> = edge_doubles().into_iter().map(Value::Double).collect();
    v.extend(edge_ints().into_iter().map(Value::Bigint));
    v.extend(edge_ints().into_iter().map(Value::Timestamp));
    v.extend(edge_strings().into_iter().map(Value::Varchar));
    v.extend([true, false, false, true].map(Value::Boolean));
    v
}

#[test]
fn single_values_of_every_type_round_trip() {
    let groups: Vec<Vec<Value>> = vec![
        edge_doubles().into_iter().map(Value::Double).collect(),
        edge_ints().into_iter().map(Value::Bigint).collect(),
        edge_ints().into_iter().map(Value::Timestamp).collect(),
        edge_strings().into_iter().map(Value::Varchar).collect(),
        [true, false, true, true].map(Value::Boolean).to_vec(),
        [true; 5].map(Value::Boolean).to_vec(),
        [false; 5].map(Value::Boolean).to_vec(),
        vec![Value::Varchar("same".into()); 100],
        vec![Value::Double(-0.0); 7],
        all_values(),
    ];
    for values in groups {
        let points: Vec<BlockPoint> = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| point(i as i64 * 1000, Measures::Single(v)))
            .collect();
        round_trip(&points, false);
    }
}

#[test]
fn multi_records_round_trip_in_order() {
    let names = ["a", "b", "c", "d", "e"];
    let points: Vec<BlockPoint> = (0..50)
        .map(|i| {
            let vs = all_values()
                .into_iter()
                .skip(i)
                .step_by(11)
                .zip(names)
                .map(|(v, n)| (n.to_string(), v));
            point(i as i64, Measures::multi(vs))
        })
        .collect();
    let bytes = round_trip(&points, true);
    // Same attributes in the same order: the order written comes back, exactly.
    let same: Vec<BlockPoint> = points
        .iter()
        .map(|p| {
            let Measures::Multi(vs) = &p.measures else {
                unreachable!()
            };
            let vs = vs
                .iter()
                .map(|(n, _)| (n.clone(), Value::Bigint(7)))
                .collect();
            point(p.time_ns, Measures::Multi(vs))
        })
        .collect();
    assert_eq!(
        decode_block(&encode_block(&same, true).unwrap(), true).unwrap(),
        same
    );
    assert!(decode_block(&bytes, false).is_err());
}

#[test]
fn differing_attribute_sets_round_trip() {
    let mut rng = XorShift(7);
    let pool: Vec<(String, Value)> = vec![
        ("temp".into(), Value::Double(9.5)),
        ("temp".into(), Value::Bigint(9)), // same name, other type: its own column
        ("humidity".into(), Value::Bigint(65)),
        ("ok".into(), Value::Boolean(true)),
        ("site".into(), Value::Varchar("us-west2".into())),
        ("at".into(), Value::Timestamp(-5)),
        ("".into(), Value::Double(1.5)),
    ];
    let points: Vec<BlockPoint> = (0..300)
        .map(|i| {
            let mut vs: Vec<(String, Value)> =
                pool.iter().filter(|_| rng.below(3) > 0).cloned().collect();
            // Any order.
            for j in (1..vs.len()).rev() {
                vs.swap(j, rng.below(j as u64 + 1) as usize);
            }
            point(i * 60_000_000_000, Measures::multi(vs))
        })
        .collect();
    let bytes = round_trip(&points, true);
    // Decoding only some attributes gives every point, each with just those.
    for keep in [&["temp"][..], &["humidity", "site"], &[]] {
        let got = decode_block_keeping(&bytes, true, &|n| keep.contains(&n)).unwrap();
        assert_eq!(got.len(), points.len());
        for (a, b) in points.iter().zip(&got) {
            let Measures::Multi(all) = &a.measures else {
                panic!("a MULTI point");
            };
            let kept: Vec<_> = all
                .iter()
                .filter(|(n, _)| keep.contains(&n.as_ref()))
                .cloned()
                .collect();
            assert!(
                Measures::Multi(kept).same_as(&b.measures),
                "{keep:?}: {b:?}"
            );
            assert_eq!((a.time_ns, a.version), (b.time_ns, b.version));
        }
    }
    // Empty sets and a single point.
    round_trip(&[point(5, Measures::Multi(vec![]))], true);
    round_trip(&points[..1], true);
}

#[test]
fn one_point_and_many_points() {
    round_trip(
        &[point(i64::MIN, Measures::Single(Value::Double(1.0)))],
        false,
    );
    round_trip(&[point(-1, Measures::Single(Value::Bigint(-1)))], false);
    let many: Vec<BlockPoint> = (0..10_000)
        .map(|i| {
            point(
                1_600_000_000_000_000_000 + i * 1_000_000_000,
                Measures::Single(Value::Double((i as f64).sin() * 40.0 + 50.0)),
            )
        })
        .collect();
    let bytes = round_trip(&many, false);
    assert!(bytes.len() < 10_000 * 8, "{} bytes", bytes.len());
}

#[test]
fn times_and_versions_of_any_i64() {
    let times = [
        i64::MIN,
        i64::MIN + 1,
        -1_000_000_000_000,
        -1,
        0,
        1,
        1 << 40,
        i64::MAX - 1,
        i64::MAX,
    ];
    let versions = [i64::MAX, 1, i64::MIN, 0, 1, 1, -3, 1, 2];
    let points: Vec<BlockPoint> = times
        .iter()
        .zip(versions)
        .map(|(&t, version)| BlockPoint {
            time_ns: t,
            version,
            measures: Measures::Single(Value::Boolean(t > 0)),
        })
        .collect();
    round_trip(&points, false);
    // Regular times with one irregular gap, versions that change once.
    let points: Vec<BlockPoint> = (0..500)
        .map(|i| BlockPoint {
            time_ns: i * 10_000_000_000 + if i > 300 { 7 } else { 0 },
            version: if i < 250 { 1 } else { 1_700_000_000_000 },
            measures: Measures::Single(Value::Timestamp(i * 3)),
        })
        .collect();
    round_trip(&points, false);
}

/// A random value of a random flavour: walks, decimals, edge values, constants.
fn random_value(rng: &mut XorShift, kind: u64, state: &mut f64) -> Value {
    match kind {
        0 => {
            *state = (*state + rng.unit() - 0.5).clamp(0.0, 100.0);
            Value::Double(*state)
        }
        1 => Value::Double((rng.below(2000) as f64 - 1000.0) / 10.0),
        2 => Value::Double(f64::from_bits(rng.next())),
        3 => Value::Bigint(rng.next() as i64 >> rng.below(64)),
        4 => Value::Timestamp(1_600_000_000_000_000_000 + rng.below(1 << 30) as i64),
        5 => Value::Boolean(rng.below(2) == 0),
        6 => Value::Varchar(
            ["", "a", "bb", "héllo"][rng.below(4) as usize].repeat(rng.below(3) as usize),
        ),
        7 => Value::Double(f64::from(rng.unit() as f32)),
        _ => {
            let edges = all_values();
            edges[rng.below(edges.len() as u64) as usize].clone()
        }
    }
}

/// A random block: 1..=`max_points` points, single or MULTI, of random flavours,
/// regular or irregular times, versions mostly 1.
pub(super) fn random_points(rng: &mut XorShift, max_points: u64, multi: bool) -> Vec<BlockPoint> {
    let n = 1 + rng.below(max_points) as usize;
    let attrs = 1 + rng.below(6);
    let kinds: Vec<u64> = (0..attrs).map(|_| rng.below(9)).collect();
    let mut states = vec![50.0; attrs as usize];
    let regular = rng.below(2) == 0;
    let mut t = rng.next() as i64 >> 2;
    (0..n)
        .map(|_| {
            t += if regular {
                10_000_000_000
            } else {
                1 + rng.below(1 << 40) as i64
            };
            let version = if rng.below(20) == 0 {
                rng.next() as i64
            } else {
                1
            };
            let measures = if multi {
                let mut vs = Vec::new();
                for a in 0..attrs as usize {
                    if rng.below(8) > 0 {
                        let v = random_value(rng, kinds[a], &mut states[a]);
                        vs.push((format!("m{a}"), v));
                    }
                }
                Measures::multi(vs)
            } else {
                Measures::Single(random_value(rng, kinds[0], &mut states[0]))
            };
            BlockPoint {
                time_ns: t,
                version,
                measures,
            }
        })
        .collect()
}

#[test]
fn random_blocks_round_trip() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    for case in 0..300 {
        let max_points = if case % 10 == 0 { 2000 } else { 120 };
        let multi = case % 2 == 0;
        round_trip(&random_points(&mut rng, max_points, multi), multi);
    }
}

#[test]
fn encoder_refuses_what_it_cannot_store() {
    let p = |t| point(t, Measures::Single(Value::Bigint(1)));
    assert!(encode_block(&[], false).is_err());
    assert!(encode_block(&[p(2), p(1)], false).is_err());
    assert!(encode_block(&[p(1), p(1)], false).is_err());
    assert!(encode_block(&[p(1)], true).is_err());
    let m = |vs: Vec<(&str, Value)>| {
        point(
            0,
            Measures::multi(vs.into_iter().map(|(n, v)| (n.to_string(), v))),
        )
    };
    assert!(encode_block(&[m(vec![("a", Value::Bigint(1))])], false).is_err());
    let twice = m(vec![("a", Value::Bigint(1)), ("a", Value::Bigint(2))]);
    assert!(encode_block(&[twice], true).is_err());
    let two_types = m(vec![("a", Value::Bigint(1)), ("a", Value::Double(2.0))]);
    round_trip(&[two_types], true);
}

#[test]
fn golden_block() {
    // Two readings 10 s apart: the bytes of format version 1, pinned.
    let points: Vec<BlockPoint> = (0..2)
        .map(|i| {
            point(
                1_000_000_000 + i * 10_000_000_000,
                Measures::Multi(vec![
                    ("temp".into(), Value::Double(9.5 + i as f64)),
                    ("ok".into(), Value::Boolean(true)),
                ]),
            )
        })
        .collect();
    let bytes = encode_block(&points, true).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, GOLDEN_HEX, "format version 1 changed");
    assert_eq!(decode_block(&bytes, true).unwrap(), points);
}

/// `01 01 02` version, MULTI, 2 points; `80a8d6b907` zigzag first time;
/// `80c8afa025` span; `02 00 04 "temp" 03 02 "ok"` columns DOUBLE temp, BOOLEAN ok;
/// `01 02` one set, of both columns (so no per-point set numbers);
/// times: `07 02 00 8090dfc04a` (DOD of the offsets from the first: 0, then the first
/// delta); versions: `03 02 02 00`; temp: `06 00 01 02 be01 14` (DECIMAL e=1 of 95,
/// 105 by DOD); ok: `01 01` (all true).
const GOLDEN_HEX: &str = concat!(
    "010102",
    "80a8d6b907",
    "80c8afa025",
    "02",
    "000474656d70",
    "03026f6b",
    "0102",
    "0702008090dfc04a",
    "03020200",
    "06000102be0114",
    "0101",
);

/// Six readings with every kind of column and stream (decimal and full-precision
/// doubles, integers, booleans, a dictionary of strings, a point without one
/// attribute): pinned as a whole.
pub(super) fn golden_points() -> Vec<BlockPoint> {
    (0..6)
        .map(|i| {
            let mut vs = vec![
                ("temp".to_string(), Value::Double(20.5 + i as f64 * 0.25)),
                ("load".to_string(), Value::Double(1.0 / (i as f64 + 3.0))),
                ("n".to_string(), Value::Bigint(1000 - 7 * i * i)),
                ("ok".to_string(), Value::Boolean(i % 3 == 0)),
            ];
            if i != 4 {
                vs.push((
                    "site".to_string(),
                    Value::Varchar(["a", "b"][i as usize % 2].into()),
                ));
            }
            point(
                1_700_000_000_000_000_000 + i * 10_000_000_000,
                Measures::multi(vs),
            )
        })
        .collect()
}

/// Header and dictionary; two sets (columns 0-4, 0-3: point 4 lacks `site`), a bit a point
/// (`08`); times by DOD with a stream of zero-width groups (`0001`); versions by FOR;
/// `temp` DECIMAL e=2 by DOD; `load` DELTA, widths 51 and 52 of one bit each;
/// `n` DOD, five-bit groups; `ok` bits; `site` a dictionary of two.
const GOLDEN_STREAMS_HEX: &str = concat!(
    "0101068080d0e2c6bfce972f80e8eda1ba01",
    "05000474656d7000046c6f616401016e03026f6b020473697465",
    "0205040000000008",
    "0902008090dfc04a0001",
    "0400020001",
    "080002028420320001",
    "2e01003fd5555555555555330211aaaaaaaaaaaaa7333333333332e222222222222586186186186164924924924918",
    "0902d00f0d0501def7b0",
    "020290",
    "0701020161016258",
);

#[test]
fn golden_block_with_streams() {
    let points = golden_points();
    let bytes = encode_block(&points, true).unwrap();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, GOLDEN_STREAMS_HEX, "format version 1 changed");
    assert_eq!(decode_block(&bytes, true).unwrap(), points);
}
