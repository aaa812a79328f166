//! Byte and bit primitives of the block format: LEB128 varints, zigzag, a byte cursor
//! that refuses to read past its slice, and MSB-first bit streams over 64-bit words.

use crate::error::{Error, Result};

/// A `Corrupt` error about a block.
pub(super) fn corrupt(what: &str) -> Error {
    Error::Corrupt(format!("block: {what}"))
}

/// Maps signed to unsigned so that small magnitudes get small numbers.
#[inline]
pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bits needed to write `v` (0 for 0).
#[inline]
pub(super) fn bit_len(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// `x << n`, 0 when `n >= 64`.
#[inline]
pub(super) fn shl(x: u64, n: u32) -> u64 {
    x.checked_shl(n).unwrap_or(0)
}

/// `x >> n`, 0 when `n >= 64`.
#[inline]
pub(super) fn shr(x: u64, n: u32) -> u64 {
    x.checked_shr(n).unwrap_or(0)
}

/// The low `n` bits set (`n <= 64`).
#[inline]
pub(super) fn mask(n: u32) -> u64 {
    shr(u64::MAX, 64 - n)
}

/// Appends `v` as a LEB128 varint.
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a byte-length-prefixed section.
pub(super) fn put_section(out: &mut Vec<u8>, section: &[u8]) {
    put_varint(out, section.len() as u64);
    out.extend_from_slice(section);
}

/// Bytes of `v` as a varint.
pub(super) fn varint_len(v: u64) -> u64 {
    u64::from(bit_len(v).max(1).div_ceil(7))
}

/// Reads bytes front to back; every read checks the remaining length.
#[derive(Debug)]
pub(super) struct ByteReader<'a> {
    bytes: &'a [u8],
}

impl<'a> ByteReader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Bytes not read yet.
    pub(super) fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    pub(super) fn remaining(&self) -> usize {
        self.bytes.len()
    }

    pub(super) fn u8(&mut self) -> Result<u8> {
        let (&b, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| corrupt("truncated"))?;
        self.bytes = rest;
        Ok(b)
    }

    pub(super) fn u64_be(&mut self) -> Result<u64> {
        let (word, rest) = self
            .bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("truncated"))?;
        self.bytes = rest;
        Ok(u64::from_be_bytes(*word))
    }

    pub(super) fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(corrupt("varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt("varint longer than 10 bytes"))
    }

    /// A varint that counts something of which at most `max` can exist.
    pub(super) fn count(&mut self, max: usize, what: &str) -> Result<usize> {
        let v = self.varint()?;
        if v > max as u64 {
            return Err(corrupt(what));
        }
        Ok(v as usize)
    }

    pub(super) fn zigzag(&mut self) -> Result<i64> {
        Ok(unzigzag(self.varint()?))
    }

    /// The next `n` bytes.
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(corrupt("truncated"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// A varint-length-prefixed section.
    pub(super) fn section(&mut self) -> Result<&'a [u8]> {
        let len = self.count(self.remaining(), "section longer than the block")?;
        self.take(len)
    }
}

/// Writes bits MSB-first, 64 at a time.
#[derive(Debug, Default)]
pub(super) struct BitWriter {
    out: Vec<u8>,
    /// Pending bits, in the low `used` bits.
    acc: u64,
    used: u32,
}

impl BitWriter {
    /// Appends the bits to `out` (which may already hold bytes).
    pub(super) fn new(out: Vec<u8>) -> Self {
        Self {
            out,
            acc: 0,
            used: 0,
        }
    }

    /// Writes the low `n` bits of `v` (`n <= 64`; higher bits of `v` are ignored).
    #[inline]
    pub(super) fn write(&mut self, v: u64, n: u32) {
        let v = v & mask(n);
        if self.used + n < 64 {
            self.acc = shl(self.acc, n) | v;
            self.used += n;
        } else {
            let rest = self.used + n - 64;
            let full = shl(self.acc, 64 - self.used) | shr(v, rest);
            self.out.extend_from_slice(&full.to_be_bytes());
            self.acc = v & mask(rest);
            self.used = rest;
        }
    }

    /// The bytes, the last one padded with zero bits.
    pub(super) fn finish(mut self) -> Vec<u8> {
        let aligned = shl(self.acc, 64 - self.used);
        let bytes = self.used.div_ceil(8) as usize;
        self.out.extend_from_slice(&aligned.to_be_bytes()[..bytes]);
        self.out
    }
}

/// The last bytes of `bytes` from `byte` on, zero-padded to a word (kept out of line so
/// that the hot path loads its word straight into a register).
#[cold]
#[inline(never)]
fn tail_word(bytes: &[u8], byte: usize) -> u64 {
    let mut w = [0u8; 8];
    let tail = bytes.get(byte..).unwrap_or_default();
    let len = tail.len().min(8);
    w[..len].copy_from_slice(&tail[..len]);
    u64::from_be_bytes(w)
}

/// Reads bits MSB-first. Reading past the end yields zero bits and is reported by
/// [`BitReader::check`], so that hot loops need no error branch per read.
#[derive(Debug)]
pub(super) struct BitReader<'a> {
    bytes: &'a [u8],
    /// Bits read so far.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// The next 57 or more bits, left-aligned (the next bit is the MSB).
    #[inline(always)]
    pub(super) fn peek(&self) -> u64 {
        let byte = self.pos >> 3;
        let word = match self.bytes.get(byte..).and_then(<[u8]>::first_chunk::<8>) {
            Some(w) => u64::from_be_bytes(*w),
            None => tail_word(self.bytes, byte),
        };
        word << (self.pos & 7)
    }

    /// Skips `n` bits already peeked.
    #[inline(always)]
    pub(super) fn consume(&mut self, n: u32) {
        self.pos += n as usize;
    }

    /// Reads `n <= 56` bits.
    #[inline(always)]
    pub(super) fn read_short(&mut self, n: u32) -> u64 {
        let v = (self.peek() >> 1) >> (63 - n);
        self.consume(n);
        v
    }

    /// Reads `out.len() <= 4` values of `n <= 56` bits each, from one bounds-checked
    /// window (the hot loop of the residual streams).
    #[inline(always)]
    pub(super) fn read_group(&mut self, n: u32, out: &mut [u64]) {
        // 4 values of 56 bits from a bit offset of up to 7 end within 29 bytes; the
        // last word read starts at most 28 bytes in.
        const WINDOW: usize = 40;
        let byte = self.pos >> 3;
        let Some(window) = self
            .bytes
            .get(byte..)
            .and_then(<[u8]>::first_chunk::<WINDOW>)
        else {
            for r in out {
                *r = self.read_short(n);
            }
            return;
        };
        let mut bit = self.pos & 7;
        for r in out.iter_mut() {
            // `& 31` lets the compiler see every load in bounds.
            let at = (bit >> 3) & 31;
            let word = window[at..]
                .first_chunk::<8>()
                .map_or(0, |w| u64::from_be_bytes(*w));
            *r = ((word << (bit & 7)) >> 1) >> (63 - n);
            bit += n as usize;
        }
        self.pos += out.len() * n as usize;
    }

    /// Reads `n <= 64` bits.
    #[inline]
    pub(super) fn read(&mut self, n: u32) -> u64 {
        if n == 0 {
            0
        } else if n <= 56 {
            let v = shr(self.peek(), 64 - n);
            self.consume(n);
            v
        } else {
            let hi = shr(self.peek(), 32);
            self.consume(32);
            let lo = shr(self.peek(), 64 - (n - 32));
            self.consume(n - 32);
            (hi << (n - 32)) | lo
        }
    }

    /// Fails if more bits were read than the bytes hold.
    pub(super) fn check(&self) -> Result<()> {
        if self.pos > self.bytes.len() * 8 {
            return Err(corrupt("bit stream truncated"));
        }
        Ok(())
    }
}
