//! Integer columns: BIGINT and TIMESTAMP values, the times and versions of a block, and
//! the scaled mantissas of decimal doubles ([`super::floats`]).
//!
//! ```text
//! u8 transform   chosen per column, the cheapest of:
//!   0 FOR        zigzag varint base (the minimum); n residuals v[i] - base
//!   1 DELTA      zigzag varint v[0]; n-1 residuals zigzag(v[i] - v[i-1])
//!   2 DOD        zigzag varint v[0]; if n >= 2: zigzag varint v[1] - v[0];
//!                n-2 residuals zigzag((v[i] - v[i-1]) - (v[i-1] - v[i-2]))
//! residual stream (entropy) to the end of the section
//! ```
//!
//! All arithmetic wraps (two's complement), so every i64 sequence round-trips. FOR
//! suits noise around a level, DELTA random walks and counters, DOD regular clocks
//! (a fixed interval costs no bits at all). A column of no values has no bytes.
//!
//! Byte layout: docs/format.md#block-format

use super::bits::{ByteReader, corrupt, put_varint, unzigzag, varint_len, zigzag};
use super::entropy::{self, Code, Stats};
use crate::error::Result;

const FOR: u8 = 0;
const DELTA: u8 = 1;
const DOD: u8 = 2;

fn residuals(transform: u8, values: &[i64]) -> Box<dyn Iterator<Item = u64> + '_> {
    match transform {
        FOR => {
            let base = values.iter().copied().min().unwrap_or(0);
            Box::new(values.iter().map(move |&v| v.wrapping_sub(base) as u64))
        }
        DELTA => Box::new(values.windows(2).map(|w| zigzag(w[1].wrapping_sub(w[0])))),
        _ => Box::new(values.windows(3).map(|w| {
            zigzag(
                w[2].wrapping_sub(w[1])
                    .wrapping_sub(w[1].wrapping_sub(w[0])),
            )
        })),
    }
}

/// The header of `transform` (without the transform byte).
fn header(transform: u8, values: &[i64]) -> Vec<u64> {
    match (transform, values) {
        (FOR, _) => vec![zigzag(values.iter().copied().min().unwrap_or(0))],
        (DELTA, [v0, ..]) | (DOD, [v0]) => vec![zigzag(*v0)],
        (DOD, [v0, v1, ..]) => vec![zigzag(*v0), zigzag(v1.wrapping_sub(*v0))],
        _ => Vec::new(),
    }
}

/// Appends the column of `values` to `out`.
pub(super) fn encode(values: &[i64], out: &mut Vec<u8>) {
    if values.is_empty() {
        return;
    }
    let mut best: Option<(u64, u8, Code, Vec<u64>)> = None;
    for t in [FOR, DELTA, DOD] {
        let code = Code::fit(&Stats::of(residuals(t, values)));
        let head = header(t, values);
        let cost = code.cost_bits + 8 * head.iter().map(|&h| varint_len(h)).sum::<u64>();
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((cost, t, code, head));
        }
    }
    let Some((_, transform, code, head)) = best else {
        return;
    };
    out.push(transform);
    for h in head {
        put_varint(out, h);
    }
    code.write(residuals(transform, values), out);
}

/// Decodes a column of `n` values (the caller has checked that the block can hold `n`).
pub(super) fn decode(section: &[u8], n: usize) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut r = ByteReader::new(section);
    let transform = r.u8()?;
    let first = r.zigzag()?;
    // The residuals are decoded into the output words, then turned into values in place.
    let mut words = vec![0u64; n];
    match transform {
        FOR => {
            entropy::decode(r.rest(), &mut words)?;
            for w in &mut words {
                *w = w.wrapping_add(first as u64);
            }
        }
        DELTA => {
            words[0] = first as u64;
            entropy::decode(r.rest(), &mut words[1..])?;
            let mut v = first;
            for w in &mut words[1..] {
                v = v.wrapping_add(unzigzag(*w));
                *w = v as u64;
            }
        }
        DOD => {
            words[0] = first as u64;
            if n >= 2 {
                let mut d = r.zigzag()?;
                let mut v = first.wrapping_add(d);
                words[1] = v as u64;
                entropy::decode(r.rest(), &mut words[2..])?;
                for w in &mut words[2..] {
                    d = d.wrapping_add(unzigzag(*w));
                    v = v.wrapping_add(d);
                    *w = v as u64;
                }
            }
        }
        _ => return Err(corrupt("unknown integer transform")),
    }
    Ok(words.into_iter().map(|w| w as i64).collect())
}
