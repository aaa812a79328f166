//! The decoder against corrupt bytes: crafted headers, and a fuzz of random bytes and
//! of mutated valid blocks of every shape. Errors are fine; panics are not, and
//! neither is output larger than the expansion rule lets the bytes justify.

use super::super::bits::put_varint;
use super::super::*;
use super::{XorShift, all_values, golden_points, point, random_points, round_trip};
use crate::error::Error;

#[test]
fn corrupt_headers_are_refused_before_allocating() {
    let valid = encode_block(&[point(0, Measures::Single(Value::Bigint(1)))], false).unwrap();
    // A point count of 2^60.
    let mut huge = vec![FORMAT_VERSION, 0];
    put_varint(&mut huge, 1 << 60);
    huge.extend_from_slice(&valid[3..]);
    assert!(matches!(decode_block(&huge, false), Err(Error::Corrupt(_))));
    assert!(decode_block_times(&huge).is_err());
    // The largest legal count, with a block far too short to pay for it.
    let mut big = vec![FORMAT_VERSION, 0];
    put_varint(&mut big, MAX_BLOCK_POINTS as u64);
    big.extend_from_slice(&[0, 0, 1, 0, 1, 1]);
    assert!(matches!(decode_block(&big, false), Err(Error::Corrupt(_))));
    // Other versions, flags, kinds.
    for (i, b) in [(0, 2u8), (0, 0), (1, 2), (1, 1)] {
        let mut v = valid.clone();
        v[i] = b;
        assert!(
            matches!(decode_block(&v, false), Err(Error::Corrupt(_))),
            "{i} {b}"
        );
    }
    assert!(decode_block(&valid, true).is_err());
    assert!(decode_block(&[], false).is_err());
    // Trailing garbage, but zero padding is fine.
    let mut v = valid.clone();
    v.push(0);
    assert!(decode_block(&v, false).is_ok());
    v.push(1);
    assert!(decode_block(&v, false).is_err());
}

#[test]
fn sets_of_all_columns_cannot_multiply_memory() {
    // 4,000 columns and 40,000 sets of all of them, one varint each: 1.3 GB of set
    // members if the decoder believed them.
    let (d, s) = (4000u64, 40_000u64);
    let mut b = vec![FORMAT_VERSION, 1];
    put_varint(&mut b, s);
    b.extend([0, 0]);
    put_varint(&mut b, d);
    for c in 0..d {
        let name = format!("a{c}");
        b.push(0);
        put_varint(&mut b, name.len() as u64);
        b.extend(name.as_bytes());
    }
    put_varint(&mut b, s);
    for _ in 0..s {
        put_varint(&mut b, d);
    }
    b.resize(b.len() + 10_000, 0);
    match decode_block(&b, true) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("attribute sets larger"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn constant_blocks_are_padded_to_pay_for_their_points() {
    let points: Vec<BlockPoint> = (0..100_000)
        .map(|i| {
            point(
                i,
                Measures::Multi(vec![("x".into(), Value::Varchar("y".repeat(100)))]),
            )
        })
        .collect();
    let bytes = round_trip(&points, true);
    // n + v bits, plus a bit per 8 string bytes.
    assert_eq!(bytes.len(), (200_000 + 10_000_000 / 8usize).div_ceil(8));
}

/// Decodes anything: errors are fine, panics are not, and what decodes is no larger
/// than the expansion rule allows.
fn decode_anything(bytes: &[u8]) {
    for multi in [false, true] {
        if let Ok(points) = decode_block(bytes, multi) {
            let values: usize = points
                .iter()
                .map(|p| match &p.measures {
                    Measures::Single(_) => 1,
                    Measures::Multi(vs) => vs.len(),
                })
                .sum();
            assert!(points.len() + values <= bytes.len() * 8);
        }
    }
    let _ = decode_block_times(bytes);
}

#[test]
fn fuzz_decoder() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for len in 0..3000 {
        let bytes: Vec<u8> = (0..len % 64).map(|_| rng.next() as u8).collect();
        decode_anything(&bytes);
        let mut with_header = vec![FORMAT_VERSION, (len % 2) as u8];
        with_header.extend(&bytes);
        decode_anything(&with_header);
    }
    // Mutations of valid blocks of every shape.
    let mut seeds = Vec::new();
    for (i, v) in all_values().into_iter().enumerate() {
        let points: Vec<BlockPoint> = (0..20)
            .map(|t| point(t * 1000 + i as i64, Measures::Single(v.clone())))
            .collect();
        seeds.push(encode_block(&points, false).unwrap());
    }
    let multi: Vec<BlockPoint> = (0..40)
        .map(|t| {
            let vs = all_values()
                .into_iter()
                .enumerate()
                .filter(|(i, _)| (i + t) % 3 != 0)
                .map(|(i, v)| (format!("a{}", i % 9), v))
                .fold(Vec::<(String, Value)>::new(), |mut acc, (n, v)| {
                    if !acc.iter().any(|(m, w)| *m == n && w.kind() == v.kind()) {
                        acc.push((n, v));
                    }
                    acc
                });
            point(t as i64 * 10, Measures::multi(vs))
        })
        .collect();
    seeds.push(encode_block(&multi, true).unwrap());
    seeds.push(encode_block(&golden_points(), true).unwrap());
    for case in 0..40 {
        let multi = case % 2 == 0;
        seeds.push(encode_block(&random_points(&mut rng, 60, multi), multi).unwrap());
    }
    for round in 0..6000 {
        let mut b = seeds[round % seeds.len()].clone();
        match rng.below(5) {
            0 => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next() as u8;
            }
            2 => b.truncate(rng.below(b.len() as u64) as usize),
            3 => {
                let i = rng.below(b.len() as u64 + 1) as usize;
                b.insert(i, rng.next() as u8);
            }
            _ => {
                for _ in 0..4 {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] = [0x00, 0xff, 0x80, 0x7f][rng.below(4) as usize];
                }
            }
        }
        decode_anything(&b);
    }
}
