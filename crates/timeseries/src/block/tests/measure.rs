//! Sizes and speed on the data we care about: TSBS `cpu-only` (ten full-precision
//! random walks per record, 10 s apart; the generator of `almanac-bench tsbs`, copied
//! down to its walk) and the weather balloons of Google's "Schema design for time series
//! data" for Bigtable (one reading a minute). Sizes are asserted; speed is printed by
//! an ignored test, to be run in release:
//! `cargo test -p almanac-timeseries --release --lib block -- --ignored --nocapture`.

use std::time::Instant;

use super::super::*;
use super::XorShift;

/// TSBS's ten CPU fields.
const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];
/// 2016-01-01T00:00:00Z, TSBS's default start.
const T0_NS: i64 = 1_451_606_400_000_000_000;
/// One hour of readings every 10 s.
const TSBS_POINTS: usize = 360;

/// SplitMix64 and Box-Muller, as `crates/cli/src/tsbs/data.rs` draws them.
struct SplitMix {
    state: u64,
    spare: Option<f64>,
}

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// One host's hour: ten walks started uniform in [0, 100), N(0, 1) steps clamped.
fn tsbs_block(seed: u64) -> Vec<BlockPoint> {
    let mut rng = SplitMix {
        state: seed,
        spare: None,
    };
    let mut values: [f64; 10] = std::array::from_fn(|_| rng.next_f64() * 100.0);
    (0..TSBS_POINTS)
        .map(|i| {
            if i > 0 {
                for v in &mut values {
                    *v = (*v + rng.normal()).clamp(0.0, 100.0);
                }
            }
            BlockPoint {
                time_ns: T0_NS + i as i64 * 10_000_000_000,
                version: 1,
                measures: Measures::multi(
                    FIELDS
                        .iter()
                        .zip(values)
                        .map(|(n, v)| (n.to_string(), Value::Double(v))),
                ),
            }
        })
        .collect()
}

/// Bits of the doubles under Gorilla's XOR encoding (InfluxDB's TSM float encoding).
fn gorilla_bits(values: &[f64]) -> u64 {
    let mut bits = 64;
    let (mut lead, mut trail) = (u32::MAX, 0);
    for w in values.windows(2) {
        let x = w[0].to_bits() ^ w[1].to_bits();
        if x == 0 {
            bits += 1;
            continue;
        }
        let (l, t) = (x.leading_zeros().min(31), x.trailing_zeros());
        if lead != u32::MAX && l >= lead && t >= trail {
            bits += 2 + u64::from(64 - lead - trail);
        } else {
            bits += 2 + 5 + 6 + u64::from(64 - l - t);
            (lead, trail) = (l, t);
        }
    }
    bits
}

fn values_of(points: &[BlockPoint]) -> usize {
    points
        .iter()
        .map(|p| match &p.measures {
            Measures::Single(_) => 1,
            Measures::Multi(vs) => vs.len(),
        })
        .sum()
}

/// Bytes per value of blocks, and what Gorilla's XOR alone takes for the doubles.
fn bytes_per_point(blocks: &[(Vec<BlockPoint>, bool)]) -> (f64, f64) {
    let (mut bytes, mut values, mut gorilla) = (0, 0, 0);
    for (points, multi) in blocks {
        let block = encode_block(points, *multi).unwrap();
        assert_eq!(decode_block(&block, *multi).unwrap(), *points);
        bytes += block.len();
        values += values_of(points);
        let names: Vec<&str> = match &points[0].measures {
            Measures::Multi(vs) => vs.iter().map(|(n, _)| &**n).collect(),
            Measures::Single(_) => vec![""],
        };
        for (i, _) in names.iter().enumerate() {
            let column: Vec<f64> = points
                .iter()
                .map(|p| match &p.measures {
                    Measures::Multi(vs) => &vs[i].1,
                    Measures::Single(v) => v,
                })
                .map(|v| match v {
                    Value::Double(x) => *x,
                    Value::Bigint(x) | Value::Timestamp(x) => *x as f64,
                    _ => 0.0,
                })
                .collect();
            gorilla += gorilla_bits(&column);
        }
    }
    (
        bytes as f64 / values as f64,
        gorilla as f64 / 8.0 / values as f64,
    )
}

#[test]
fn tsbs_cpu_hour_is_small() {
    let blocks: Vec<(Vec<BlockPoint>, bool)> =
        (0..40).map(|seed| (tsbs_block(seed), true)).collect();
    let (ours, gorilla) = bytes_per_point(&blocks);
    println!(
        "TSBS cpu-only, 360 points x 10 fields a block: {ours:.3} B/point (Gorilla XOR of the values alone: {gorilla:.3})"
    );
    assert!(ours < 6.4, "{ours:.3} B/point");
}

/// One balloon's hour, as `almanac-bench patterns` writes it: pressure, humidity and
/// altitude are integers, temperature has one decimal.
fn balloon_hour(balloon: u64, hour: u64, rng: &mut XorShift) -> Vec<[Value; 4]> {
    let base = (balloon % 17) as f64;
    (0..60)
        .map(|m| {
            let minute = hour * 60 + m;
            let pressure = 94_000 + rng.below(2000) as i64;
            let temperature = format!("{:.1}", 5.0 + base + (rng.below(100) as f64) / 10.0);
            [
                Value::Bigint(pressure),
                Value::Double(temperature.parse().unwrap()),
                Value::Bigint(40 + rng.below(50) as i64),
                Value::Bigint(500 + (minute % 600) as i64 + rng.below(10) as i64),
            ]
        })
        .collect()
}

#[test]
fn balloon_hours_are_small() {
    let mut rng = XorShift(3698);
    let names = ["pressure", "temperature", "humidity", "altitude"];
    let (mut multi, mut single) = (Vec::new(), Vec::new());
    for balloon in 0..20 {
        for hour in 0..24 {
            let readings = balloon_hour(balloon, hour, &mut rng);
            let time = |m: usize| T0_NS + (hour as i64 * 60 + m as i64) * 60_000_000_000;
            multi.push((
                readings
                    .iter()
                    .enumerate()
                    .map(|(m, r)| BlockPoint {
                        time_ns: time(m),
                        version: 1,
                        measures: Measures::multi(
                            names.iter().map(|n| n.to_string()).zip(r.iter().cloned()),
                        ),
                    })
                    .collect(),
                true,
            ));
            for i in 0..4 {
                single.push((
                    readings
                        .iter()
                        .enumerate()
                        .map(|(m, r)| BlockPoint {
                            time_ns: time(m),
                            version: 1,
                            measures: Measures::Single(r[i].clone()),
                        })
                        .collect(),
                    false,
                ));
            }
        }
    }
    let (m, m_gorilla) = bytes_per_point(&multi);
    let (s, s_gorilla) = bytes_per_point(&single);
    println!(
        "balloons, 1 h blocks (60 readings): MULTI {m:.3} B/point, single {s:.3} B/point (Gorilla XOR of the values as doubles: {m_gorilla:.3})"
    );
    let _ = s_gorilla;
    assert!(m < 1.5, "{m:.3}");
    assert!(s < 1.9, "{s:.3}");
}

/// The best of `rounds` timings of `f`, in ns per value of the TSBS blocks.
fn best_ns(values: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / values as f64
        })
        .fold(f64::MAX, f64::min)
}

#[test]
fn floats_widened_from_f32_drop_their_zero_bits() {
    // A walk of single-precision readings stored as doubles: 29 mantissa bits are
    // always zero, and DELTA's shift drops them.
    let mut rng = SplitMix {
        state: 5,
        spare: None,
    };
    let mut v = 20.0f32;
    let points: Vec<BlockPoint> = (0..360)
        .map(|i| {
            v = (v + rng.normal() as f32 * 0.1).clamp(-40.0, 60.0);
            BlockPoint {
                time_ns: T0_NS + i * 10_000_000_000,
                version: 1,
                measures: Measures::Single(Value::Double(f64::from(v))),
            }
        })
        .collect();
    let (bytes, _) = bytes_per_point(&[(points, false)]);
    println!("f32 walk as doubles: {bytes:.3} B/point");
    assert!(bytes < 3.5, "{bytes:.3}");
}

#[test]
#[ignore = "timing; run in release"]
fn speed() {
    let blocks: Vec<Vec<BlockPoint>> = (0..50).map(tsbs_block).collect();
    let encoded: Vec<Vec<u8>> = blocks
        .iter()
        .map(|b| encode_block(b, true).unwrap())
        .collect();
    let values = blocks.len() * TSBS_POINTS * FIELDS.len();
    let per_block = |ns: f64| ns * (TSBS_POINTS * FIELDS.len()) as f64 / 1000.0;
    let encode = best_ns(values, 10, || {
        for b in &blocks {
            std::hint::black_box(encode_block(b, true).unwrap());
        }
    });
    let points = best_ns(values, 10, || {
        for b in &encoded {
            std::hint::black_box(decode_block(b, true).unwrap());
        }
    });
    let columns = best_ns(values, 30, || {
        for b in &encoded {
            std::hint::black_box(decode_block_columns(b, true, &|_| true).unwrap());
        }
    });
    let one = best_ns(values, 30, || {
        for b in &encoded {
            std::hint::black_box(decode_block_columns(b, true, &|n| n == "usage_user").unwrap());
        }
    });
    println!(
        "TSBS blocks of 360 x 10 doubles, ns per value (us per block): encode {encode:.1} ({:.1}), \
         decode_block {points:.1} ({:.1}), decode_block_columns {columns:.1} ({:.1}), \
         one column of ten {one:.2} ({:.1})",
        per_block(encode),
        per_block(points),
        per_block(columns),
        per_block(one),
    );
}
