//! Integer columns: BIGINT and TIMESTAMP values, the times and versions of a block, and
//! the scaled mantissas of decimal doubles ([`super::floats`]).
//!
//! ```text
//! u8 transform   chosen per column, the cheapest of:
//!   0 FOR        zigzag varint base (the minimum); n residuals v[i] - base
//!   1 DELTA      zigzag varint v[0]; n-1 residuals zigzag(v[i] - v[i-1])
//!   2 DOD        zigzag varint v[0]; if n >= 2: zigzag varint v[1] - v[0];
//!                n-2 residuals zigzag((v[i] - v[i-1]) - (v[i-1] - v[i-2]))
//! residual stream (context 0) to the end of the section
//! ```
//!
//! All arithmetic wraps (two's complement), so every i64 sequence round-trips. FOR
//! suits noise around a level, DELTA random walks and counters, DOD regular clocks
//! (a fixed interval costs no bits at all). A column of no values has no bytes.

use super::bits::{ByteReader, corrupt, unzigzag, varint_len, zigzag};
use super::entropy::{Code, Stats, StreamReader};
use crate::error::Result;

const FOR: u8 = 0;
const DELTA: u8 = 1;
const DOD: u8 = 2;

fn residuals(transform: u8, values: &[i64]) -> Box<dyn Iterator<Item = (u64, u32)> + '_> {
    match transform {
        FOR => {
            let base = values.iter().copied().min().unwrap_or(0);
            Box::new(
                values
                    .iter()
                    .map(move |&v| (v.wrapping_sub(base) as u64, 0)),
            )
        }
        DELTA => Box::new(
            values
                .windows(2)
                .map(|w| (zigzag(w[1].wrapping_sub(w[0])), 0)),
        ),
        _ => Box::new(values.windows(3).map(|w| {
            let dd = w[2]
                .wrapping_sub(w[1])
                .wrapping_sub(w[1].wrapping_sub(w[0]));
            (zigzag(dd), 0)
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
    let (transform, code, head) = [FOR, DELTA, DOD]
        .into_iter()
        .map(|t| {
            let code = Code::fit(&Stats::of(residuals(t, values)));
            (t, code, header(t, values))
        })
        .min_by_key(|(_, code, head)| {
            code.cost_bits + 8 * head.iter().map(|&h| varint_len(h)).sum::<u64>()
        })
        .unwrap_or_else(|| (FOR, Code::fit(&Stats::of(std::iter::empty())), Vec::new()));
    out.push(transform);
    for h in head {
        super::bits::put_varint(out, h);
    }
    code.write(residuals(transform, values), out);
}

/// Decodes a column of `n` values (the caller has checked that the block can hold `n`).
pub(super) fn decode(section: &[u8], n: usize) -> Result<Vec<i64>> {
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return Ok(out);
    }
    let mut r = ByteReader::new(section);
    let transform = r.u8()?;
    match transform {
        FOR => {
            let base = r.zigzag()?;
            let mut s = StreamReader::new(r.rest(), n)?;
            out.extend((0..n).map(|_| base.wrapping_add(s.next(0) as i64)));
            s.finish()?;
        }
        DELTA => {
            let mut v = r.zigzag()?;
            out.push(v);
            let mut s = StreamReader::new(r.rest(), n - 1)?;
            for _ in 1..n {
                v = v.wrapping_add(unzigzag(s.next(0)));
                out.push(v);
            }
            s.finish()?;
        }
        DOD => {
            let mut v = r.zigzag()?;
            out.push(v);
            if n >= 2 {
                let mut d = r.zigzag()?;
                v = v.wrapping_add(d);
                out.push(v);
                let mut s = StreamReader::new(r.rest(), n - 2)?;
                for _ in 2..n {
                    d = d.wrapping_add(unzigzag(s.next(0)));
                    v = v.wrapping_add(d);
                    out.push(v);
                }
                s.finish()?;
            }
        }
        _ => return Err(corrupt("unknown integer transform")),
    }
    Ok(out)
}
