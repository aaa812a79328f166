//! DOUBLE columns.
//!
//! ```text
//! u8 transform   the cheaper of:
//!   0 DECIMAL    u8 e (0..=22), then an integer column (see ints) of m[i], where
//!                v[i] == m[i] as f64 / 10^e bit for bit (|m[i]| <= 2^53)
//!   1 DELTA      u8 k (0..=52), u64 big-endian bits of v[0], then a residual stream
//!                of n-1 residuals zigzag(o[i] - o[i-1]) in context exponent(v[i-1]),
//!                where o[i] = order(bits(v[i])) >> k
//! ```
//!
//! `order(b)` maps the bits of a double to an unsigned number in the order of the
//! values (`!b` for a negative sign, `b | 1 << 63` else), so that the difference of two
//! close values is their distance in units in the last place: a random walk costs the
//! bits of its step, not of its level (Gorilla's XOR of neighbours pays for every
//! mantissa bit below the first one that changes, which a step of ±1 near 50 flips
//! through carries). `k` drops trailing zero bits that every value shares (floats
//! widened to doubles have 29). `exponent(v)` is the 11-bit biased exponent; a value
//! twice as large has half as many units in the last place per step, so the bit length
//! of a residual plus that exponent stays steady when the level drifts.
//!
//! DECIMAL catches values written with few decimals (`12.3`, `94558`): their bits look
//! random, but their scaled integers are small. Every value round-trips bit for bit,
//! `-0.0`, infinities and NaN payloads included (they never qualify for DECIMAL).

use super::bits::{ByteReader, corrupt, mask, unzigzag, zigzag};
use super::entropy::{Code, Stats, StreamReader};
use super::ints;
use crate::error::Result;

const DECIMAL: u8 = 0;
const DELTA: u8 = 1;
/// Largest decimal exponent: 10^22 is the largest power of ten a double holds exactly.
const MAX_DECIMAL_EXP: usize = 22;
/// Largest scaled magnitude: integers up to 2^53 are exact doubles.
const MAX_EXACT_INT: f64 = 9_007_199_254_740_992.0;
/// Trailing zero bits DELTA may drop: the mantissa's width.
const MAX_SHIFT: u32 = 52;
const POW10: [f64; MAX_DECIMAL_EXP + 1] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Order-preserving map of double bits to unsigned numbers.
#[inline]
fn order(bits: u64) -> u64 {
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// Inverse of [`order`], for a number shifted right by `k`.
#[inline]
fn unorder(shifted: u64, k: u32) -> u64 {
    let positive = (shifted >> (63 - k)) & 1 == 1;
    let o = (shifted << k) | if positive { 0 } else { mask(k) };
    if positive { o & !(1 << 63) } else { !o }
}

#[inline]
fn exponent(bits: u64) -> u32 {
    ((bits >> 52) & 0x7ff) as u32
}

/// `x` as `m / 10^e`, if that division gives back exactly `x`.
fn scaled(x: f64, e: usize) -> Option<i64> {
    let m = (x * POW10[e]).round();
    if m.is_nan() || m.abs() > MAX_EXACT_INT {
        return None;
    }
    let m = m as i64;
    ((m as f64 / POW10[e]).to_bits() == x.to_bits()).then_some(m)
}

/// The smallest exponent that writes every value as a decimal, and the scaled values.
fn decimal(values: &[f64]) -> Option<(u8, Vec<i64>)> {
    let mut e = 0;
    for &x in values {
        while scaled(x, e).is_none() {
            e += 1;
            if e > MAX_DECIMAL_EXP {
                return None;
            }
        }
    }
    let scaled: Option<Vec<i64>> = values.iter().map(|&x| scaled(x, e)).collect();
    scaled.map(|m| (e as u8, m))
}

fn delta_residuals(values: &[f64], k: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
    values.windows(2).map(move |w| {
        let (prev, cur) = (w[0].to_bits(), w[1].to_bits());
        let d = (order(cur) >> k).wrapping_sub(order(prev) >> k);
        (zigzag(d as i64), exponent(prev))
    })
}

/// Appends the column of `values` to `out`.
pub(super) fn encode(values: &[f64], out: &mut Vec<u8>) {
    let Some(first) = values.first() else {
        return;
    };
    let k = values
        .iter()
        .map(|v| v.to_bits().trailing_zeros())
        .min()
        .unwrap_or(0)
        .min(MAX_SHIFT);
    let code = Code::fit(&Stats::of(delta_residuals(values, k)));
    if let Some((e, m)) = decimal(values) {
        let mut dec = vec![DECIMAL, e];
        ints::encode(&m, &mut dec);
        if (dec.len() as u64) * 8 < (2 + 8) * 8 + code.cost_bits {
            out.extend_from_slice(&dec);
            return;
        }
    }
    out.push(DELTA);
    out.push(k as u8);
    out.extend_from_slice(&first.to_bits().to_be_bytes());
    code.write(delta_residuals(values, k), out);
}

/// Decodes a column of `n` values (the caller has checked that the block can hold `n`).
pub(super) fn decode(section: &[u8], n: usize) -> Result<Vec<f64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut r = ByteReader::new(section);
    match r.u8()? {
        DECIMAL => {
            let e = usize::from(r.u8()?);
            let pow = *POW10
                .get(e)
                .ok_or_else(|| corrupt("decimal exponent out of range"))?;
            let m = ints::decode(r.rest(), n)?;
            Ok(m.into_iter().map(|m| m as f64 / pow).collect())
        }
        DELTA => {
            let k = u32::from(r.u8()?);
            if k > MAX_SHIFT {
                return Err(corrupt("double shift out of range"));
            }
            let mut bits = r.u64_be()?;
            let mut o = order(bits) >> k;
            let mut out = Vec::with_capacity(n);
            out.push(f64::from_bits(bits));
            let mut s = StreamReader::new(r.rest(), n - 1)?;
            for _ in 1..n {
                o = o.wrapping_add(unzigzag(s.next(exponent(bits))) as u64);
                bits = unorder(o, k);
                out.push(f64::from_bits(bits));
            }
            s.finish()?;
            Ok(out)
        }
        _ => Err(corrupt("unknown double transform")),
    }
}
