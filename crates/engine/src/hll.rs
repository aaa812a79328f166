//! HyperLogLog++ count-distinct sketches for HLL aggregate families.
//!
//! Precision 14 (16,384 registers, about 0.8% standard error), 64-bit hashes. Small
//! sets stay sparse (a sorted list of set registers); a sketch turns dense when the
//! sparse list would outgrow the dense array. Estimates use linear counting while
//! many registers are empty and the bias-corrected harmonic mean otherwise, the two
//! regimes HLL++ combines.
//!
//! ## Format (version 1), the bytes of an HLL cell
//! ```text
//! u8 version (1) | u8 precision (14) | u8 mode
//! mode 0 (sparse): u32 BE count, then count × (u16 BE register, u8 rank), registers ascending
//! mode 1 (dense):  2^precision bytes, one rank per register
//! ```
//! Decoding never panics; anything else is `Error::Invalid` (the bytes come from
//! clients via MergeToCell).
//!
//! Byte layout: docs/format.md#hll-sketches

use crate::error::{Error, Result};

const VERSION: u8 = 1;
/// Register-index bits: 2^14 registers, 0.81% standard error (HLL++'s default).
const PRECISION: u8 = 14;
const REGISTERS: usize = 1 << PRECISION;
/// Sparse entries before a sketch turns dense (3 bytes each vs 1 byte per register).
const SPARSE_MAX: usize = REGISTERS / 3;

/// A count-distinct sketch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sketch {
    /// Set registers, ascending by index.
    Sparse(Vec<(u16, u8)>),
    /// One rank per register.
    Dense(Vec<u8>),
}

impl Default for Sketch {
    fn default() -> Self {
        Self::new()
    }
}

/// 64-bit hash of the input: FNV-1a folded through murmur3's finalizer, which is
/// well mixed in every bit (HLL needs uniform low and high bits).
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Sketch {
    /// An empty sketch.
    pub fn new() -> Self {
        Sketch::Sparse(Vec::new())
    }

    /// Adds one value.
    pub fn add(&mut self, value: &[u8]) {
        let h = hash(value);
        let idx = (h >> (64 - PRECISION)) as u16;
        let rest = (h << PRECISION) | (1 << (PRECISION - 1));
        let rank = (rest.leading_zeros() + 1) as u8;
        self.set(idx, rank);
    }

    fn set(&mut self, idx: u16, rank: u8) {
        match self {
            Sketch::Dense(r) => {
                let slot = &mut r[usize::from(idx)];
                *slot = (*slot).max(rank);
            }
            Sketch::Sparse(list) => {
                match list.binary_search_by_key(&idx, |e| e.0) {
                    Ok(i) => list[i].1 = list[i].1.max(rank),
                    Err(i) => list.insert(i, (idx, rank)),
                }
                if list.len() > SPARSE_MAX {
                    let mut dense = vec![0u8; REGISTERS];
                    for &(i, r) in list.iter() {
                        dense[usize::from(i)] = r;
                    }
                    *self = Sketch::Dense(dense);
                }
            }
        }
    }

    /// Folds another sketch in (register-wise max).
    pub fn merge(&mut self, other: &Sketch) {
        match other {
            Sketch::Sparse(list) => list.iter().for_each(|&(i, r)| self.set(i, r)),
            Sketch::Dense(regs) => {
                for (i, &r) in regs.iter().enumerate() {
                    if r > 0 {
                        self.set(i as u16, r);
                    }
                }
            }
        }
    }

    /// The estimated number of distinct values added (the tests' measure of the
    /// sketch's accuracy).
    #[cfg(test)]
    pub fn estimate(&self) -> u64 {
        let m = REGISTERS as f64;
        let (zeros, sum) = match self {
            Sketch::Sparse(list) => {
                let set: f64 = list.iter().map(|&(_, r)| 2f64.powi(-i32::from(r))).sum();
                (
                    REGISTERS - list.len(),
                    set + (REGISTERS - list.len()) as f64,
                )
            }
            Sketch::Dense(r) => (
                r.iter().filter(|&&x| x == 0).count(),
                r.iter().map(|&x| 2f64.powi(-i32::from(x))).sum(),
            ),
        };
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        let est = if zeros > 0 && raw <= 5.0 * m {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        est.round() as u64
    }

    /// The cell bytes (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Sketch::Sparse(list) => {
                let mut out = Vec::with_capacity(7 + 3 * list.len());
                out.extend_from_slice(&[VERSION, PRECISION, 0]);
                out.extend_from_slice(&(list.len() as u32).to_be_bytes());
                for &(i, r) in list {
                    out.extend_from_slice(&i.to_be_bytes());
                    out.push(r);
                }
                out
            }
            Sketch::Dense(r) => {
                let mut out = Vec::with_capacity(3 + r.len());
                out.extend_from_slice(&[VERSION, PRECISION, 1]);
                out.extend_from_slice(r);
                out
            }
        }
    }

    /// Parses cell bytes; empty bytes are an empty sketch.
    pub fn decode(bytes: &[u8]) -> Result<Sketch> {
        let bad = |why: &str| Error::Invalid(format!("not an Almanac HLL sketch: {why}"));
        if bytes.is_empty() {
            return Ok(Sketch::new());
        }
        let [version, precision, mode, body @ ..] = bytes else {
            return Err(bad("shorter than its 3-byte header"));
        };
        if *version != VERSION || *precision != PRECISION {
            return Err(bad("unknown version or precision"));
        }
        let max_rank = 64 - PRECISION + 1;
        match mode {
            0 => {
                let [a, b, c, d, entries @ ..] = body else {
                    return Err(bad("truncated count"));
                };
                let n = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
                if n > SPARSE_MAX || entries.len() != 3 * n {
                    return Err(bad("sparse length mismatch"));
                }
                let mut list = Vec::with_capacity(n);
                for e in entries.chunks_exact(3) {
                    let (i, r) = (u16::from_be_bytes([e[0], e[1]]), e[2]);
                    if usize::from(i) >= REGISTERS
                        || r == 0
                        || r > max_rank
                        || list.last().is_some_and(|&(p, _)| p >= i)
                    {
                        return Err(bad("sparse entry out of range or order"));
                    }
                    list.push((i, r));
                }
                Ok(Sketch::Sparse(list))
            }
            1 if body.len() == REGISTERS && body.iter().all(|&r| r <= max_rank) => {
                Ok(Sketch::Dense(body.to_vec()))
            }
            _ => Err(bad("unknown mode or dense length")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn estimates_within_error_and_merges() {
        for n in [0u64, 1, 10, 1_000, 100_000] {
            let mut s = Sketch::new();
            for i in 0..n {
                s.add(&i.to_be_bytes());
                s.add(&i.to_be_bytes());
            }
            let est = s.estimate() as f64;
            let err = if n == 0 {
                est
            } else {
                (est - n as f64).abs() / n as f64
            };
            assert!(err <= 0.03, "n={n} est={est}");
            assert_eq!(Sketch::decode(&s.encode()).unwrap(), s);
        }
        let (mut a, mut b) = (Sketch::new(), Sketch::new());
        for i in 0..20_000u64 {
            a.add(&i.to_be_bytes());
            b.add(&(i + 10_000).to_be_bytes());
        }
        a.merge(&b);
        let est = a.estimate() as f64;
        assert!((est - 30_000.0).abs() / 30_000.0 < 0.03, "{est}");
    }

    #[test]
    fn garbage_is_rejected_not_panicking() {
        let rng = crate::clock::Rng::new(1);
        for len in 0..64 {
            let b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let _ = Sketch::decode(&b);
        }
        assert!(Sketch::decode(&[1, 14, 0, 0, 0, 0, 1, 0, 0, 0]).is_err());
        assert!(Sketch::decode(&[1, 14, 2]).is_err());
    }
}
