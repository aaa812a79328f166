//! DOUBLE columns.
//!
//! ```text
//! u8 transform   the cheaper of:
//!   0 DECIMAL    u8 e (0..=22), then an integer column (see ints) of m[i], where
//!                v[i] == m[i] as f64 / 10^e bit for bit (|m[i]| <= 2^53)
//!   1 DELTA      u8 k (0..=52), u64 big-endian bits of v[0], then a residual stream
//!                of n-1 residuals zigzag(o[i] - o[i-1]), o[i] = order(bits(v[i])) >> k
//! ```
//!
//! `order(b)` maps the bits of a double to an unsigned number in the order of the
//! values (`!b` for a negative sign, `b | 1 << 63` else), so that the difference of two
//! close values is their distance in units in the last place: a random walk costs the
//! bits of its step, not of its level (Gorilla's XOR of neighbours pays for every
//! mantissa bit below the first one that changes, which a step of ±1 near 50 flips
//! through carries). `k` drops trailing zero bits that every value shares (floats
//! widened to doubles have 29).
//!
//! DECIMAL catches values written with few decimals (`12.3`, `94558`): their bits look
//! random, but their scaled integers are small. Every value round-trips bit for bit,
//! `-0.0`, infinities and NaN payloads included (they never qualify for DECIMAL).
//!
//! Byte layout: docs/format.md#block-format

use super::bits::{ByteReader, corrupt, mask, unzigzag, zigzag};
use super::entropy::{self, Code, Stats};
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

/// Inverse of [`order`], for a number shifted right by `k` (`fill` = `mask(k)`).
/// Branch-free: it runs once per decoded value.
#[inline(always)]
fn unorder(shifted: u64, k: u32, fill: u64) -> u64 {
    // All ones when the value is positive (the top bit of the unshifted order is set).
    let positive = 0u64.wrapping_sub((shifted >> (63 - k)) & 1);
    let o = (shifted << k) | (fill & !positive);
    // Positive: clear the top bit; negative: flip every bit.
    o ^ (!positive | 1 << 63)
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

fn delta_residuals(values: &[f64], k: u32) -> impl Iterator<Item = u64> + '_ {
    values.windows(2).map(move |w| {
        let d = (order(w[1].to_bits()) >> k).wrapping_sub(order(w[0].to_bits()) >> k);
        zigzag(d as i64)
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
            // The residuals are decoded into the output words, then turned into values
            // in place.
            let mut words = vec![0u64; n];
            words[0] = r.u64_be()?;
            entropy::decode(r.rest(), &mut words[1..])?;
            let mut o = order(words[0]) >> k;
            if k == 0 {
                // The common case, without the shifts.
                for w in &mut words[1..] {
                    o = o.wrapping_add(unzigzag(*w) as u64);
                    *w = unorder(o, 0, 0);
                }
            } else {
                let fill = mask(k);
                for w in &mut words[1..] {
                    o = o.wrapping_add(unzigzag(*w) as u64);
                    *w = unorder(o, k, fill);
                }
            }
            Ok(words.into_iter().map(f64::from_bits).collect())
        }
        _ => Err(corrupt("unknown double transform")),
    }
}
