//! Residual streams: the entropy coder under every numeric column.
//!
//! A column transforms its values into unsigned residuals (offsets from a base, zigzag
//! deltas, zigzag XOR-free differences of ordered doubles …) whose size is mostly in
//! their bit length. A residual `r` of bit length `L` (`0` for `r = 0`) is written as
//! the Huffman code of a *symbol* `(L + ctx) mod 128`, then the `L - 1` bits of `r`
//! below its leading one (none for `L <= 1`). `ctx` is a context the decoder knows
//! before the residual (the exponent of the previous double; 0 for integers), which
//! keeps the symbol's distribution steady when a column's scale drifts.
//!
//! The code is canonical, at most [`MAX_CODE_BITS`] long, and sent as its code lengths:
//!
//! ```text
//! u8 lo      first symbol of the range
//! u8 count   symbols in the range lo, lo+1, … (mod 128), 1..=128
//! count == 1: the only symbol is lo and its code is empty (zero bits per residual)
//! count >= 2: ceil(count / 2) bytes of 4-bit code lengths, high nibble first,
//!             0 = symbol unused, else 1..=MAX_CODE_BITS
//! bits       per residual: code, then L - 1 low bits; MSB first; zero-padded
//! ```
//!
//! Canonical order: by code length, then by symbol number. A stream of zero residuals
//! has no table and no bits. The stream runs to the end of its section.

use super::bits::{BitReader, BitWriter, bit_len, corrupt, mask, shr};
use crate::error::Result;

/// Symbols of the length code: bit lengths 0..=64 plus a context, modulo this.
const SYMBOLS: usize = 128;
/// Longest code word: the decoder's lookup table has `2^MAX_CODE_BITS` entries, small
/// enough to build per column in well under a microsecond; the loss against unlimited
/// Huffman codes is below 0.1 % on the measured columns.
pub(super) const MAX_CODE_BITS: u32 = 8;
/// A lookup-table entry that no code reaches.
const NO_CODE: u16 = u16::MAX;

/// The symbol of residual `r` in context `ctx`.
#[inline]
fn symbol(r: u64, ctx: u32) -> usize {
    (bit_len(r).wrapping_add(ctx) as usize) & (SYMBOLS - 1)
}

/// What a stream would cost: symbol counts and the bits below the leading ones.
#[derive(Debug, Clone)]
pub(super) struct Stats {
    freq: [u64; SYMBOLS],
    extra_bits: u64,
    count: u64,
}

impl Stats {
    /// Statistics of `(residual, ctx)` pairs.
    pub(super) fn of(residuals: impl Iterator<Item = (u64, u32)>) -> Self {
        let mut s = Self {
            freq: [0; SYMBOLS],
            extra_bits: 0,
            count: 0,
        };
        for (r, ctx) in residuals {
            s.freq[symbol(r, ctx)] += 1;
            s.extra_bits += u64::from(bit_len(r).saturating_sub(1));
            s.count += 1;
        }
        s
    }
}

/// A canonical code fitted to some [`Stats`].
#[derive(Debug, Clone)]
pub(super) struct Code {
    lengths: [u8; SYMBOLS],
    /// Code words, right-aligned.
    words: [u16; SYMBOLS],
    /// `(lo, count)` of the table.
    range: (usize, usize),
    /// Bits of the whole stream: table, codes, extra bits.
    pub(super) cost_bits: u64,
}

impl Code {
    /// The Huffman code of `stats`, limited to [`MAX_CODE_BITS`].
    pub(super) fn fit(stats: &Stats) -> Self {
        let lengths = limited_lengths(&stats.freq);
        let used: Vec<bool> = stats.freq.iter().map(|&f| f > 0).collect();
        let range = circular_range(&used);
        let words = canonical_words(&lengths);
        let table_bytes = if stats.count == 0 {
            0
        } else if range.1 == 1 {
            2
        } else {
            2 + range.1.div_ceil(2) as u64
        };
        let code_bits: u64 = (0..SYMBOLS)
            .map(|s| stats.freq[s] * u64::from(lengths[s]))
            .sum();
        Self {
            lengths,
            words,
            range,
            cost_bits: table_bytes * 8 + code_bits + stats.extra_bits,
        }
    }

    /// Appends the stream of `residuals` (those the stats were taken of) to `out`.
    pub(super) fn write(&self, residuals: impl Iterator<Item = (u64, u32)>, out: &mut Vec<u8>) {
        let mut residuals = residuals.peekable();
        if residuals.peek().is_none() {
            return;
        }
        let (lo, count) = self.range;
        out.push(lo as u8);
        out.push(count as u8);
        if count >= 2 {
            for pair in 0..count.div_ceil(2) {
                let len = |i: usize| {
                    if i < count {
                        self.lengths[(lo + i) % SYMBOLS]
                    } else {
                        0
                    }
                };
                out.push((len(2 * pair) << 4) | len(2 * pair + 1));
            }
        }
        let mut bits = BitWriter::new(std::mem::take(out));
        for (r, ctx) in residuals {
            let s = symbol(r, ctx);
            let code_len = u32::from(self.lengths[s]);
            let extra = bit_len(r).saturating_sub(1);
            let word = u64::from(self.words[s]);
            if code_len + extra <= 64 {
                bits.write((word << extra) | (r & mask(extra)), code_len + extra);
            } else {
                bits.write(word, code_len);
                bits.write(r, extra);
            }
        }
        *out = bits.finish();
    }
}

/// Huffman code lengths, flattened by halving the counts until none exceeds
/// [`MAX_CODE_BITS`] (all counts equal gives depth ceil(log2 128) = 7, so this ends).
fn limited_lengths(freq: &[u64; SYMBOLS]) -> [u8; SYMBOLS] {
    let mut weights = *freq;
    loop {
        let lengths = huffman_lengths(&weights);
        if lengths.iter().all(|&l| u32::from(l) <= MAX_CODE_BITS) {
            return lengths;
        }
        for w in weights.iter_mut().filter(|w| **w > 0) {
            *w = (*w / 2).max(1);
        }
    }
}

/// Plain Huffman code lengths (two-queue construction); a lone symbol gets length 0.
fn huffman_lengths(freq: &[u64; SYMBOLS]) -> [u8; SYMBOLS] {
    let mut lengths = [0u8; SYMBOLS];
    let mut leaves: Vec<(u64, usize)> = (0..SYMBOLS)
        .filter(|&s| freq[s] > 0)
        .map(|s| (freq[s], s))
        .collect();
    let m = leaves.len();
    if m <= 1 {
        return lengths;
    }
    leaves.sort_unstable();
    // Nodes 0..m are the leaves, m..2m-1 the internal nodes in order of creation
    // (so of non-decreasing weight, and every parent after its children).
    let mut weight: Vec<u64> = leaves.iter().map(|&(w, _)| w).collect();
    let mut parent = vec![0usize; 2 * m - 1];
    let (mut next_leaf, mut next_inner) = (0, m);
    for node in m..2 * m - 1 {
        let mut pick = || {
            let leaf_first =
                next_leaf < m && (next_inner >= node || weight[next_leaf] <= weight[next_inner]);
            if leaf_first {
                next_leaf += 1;
                next_leaf - 1
            } else {
                next_inner += 1;
                next_inner - 1
            }
        };
        let (a, b) = (pick(), pick());
        parent[a] = node;
        parent[b] = node;
        weight.push(weight[a] + weight[b]);
    }
    let mut depth = vec![0u8; 2 * m - 1];
    for node in (0..2 * m - 2).rev() {
        depth[node] = depth[parent[node]].saturating_add(1);
    }
    for (i, &(_, s)) in leaves.iter().enumerate() {
        lengths[s] = depth[i];
    }
    lengths
}

/// The shortest circular range `(lo, count)` of symbols that holds every used one.
fn circular_range(used: &[bool]) -> (usize, usize) {
    let n = used.len();
    if !used.iter().any(|&u| u) {
        return (0, 1);
    }
    // The longest circular run of unused symbols; the range starts right after it.
    let (mut best_gap, mut best_end) = (0, 0);
    let mut gap = 0;
    for i in 0..2 * n {
        if used[i % n] {
            if gap > best_gap {
                (best_gap, best_end) = (gap, i % n);
            }
            gap = 0;
        } else {
            gap += 1;
        }
    }
    if best_gap == 0 {
        // No gap: find any used start (all are used).
        return (0, n);
    }
    (best_end, n - best_gap.min(n))
}

/// Canonical code words of `lengths` (by length, then symbol).
fn canonical_words(lengths: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    let mut words = [0u16; SYMBOLS];
    let mut order: Vec<usize> = (0..SYMBOLS).filter(|&s| lengths[s] > 0).collect();
    order.sort_by_key(|&s| (lengths[s], s));
    let mut code: u32 = 0;
    let mut prev_len = 0u8;
    for s in order {
        code <<= lengths[s] - prev_len;
        words[s] = code as u16;
        code += 1;
        prev_len = lengths[s];
    }
    words
}

/// Reads a stream of a known number of residuals.
#[derive(Debug)]
pub(super) struct StreamReader<'a> {
    bits: BitReader<'a>,
    /// Entry = symbol << 8 | code length, indexed by the next `table_bits` bits.
    table: [u16; 1 << MAX_CODE_BITS],
    table_bits: u32,
    bad: bool,
}

impl<'a> StreamReader<'a> {
    /// Parses the table of a stream of `count` residuals held by `bytes`.
    pub(super) fn new(bytes: &'a [u8], count: usize) -> Result<Self> {
        let mut r = Self {
            bits: BitReader::new(&[]),
            table: [NO_CODE; 1 << MAX_CODE_BITS],
            table_bits: 0,
            bad: false,
        };
        if count == 0 {
            return Ok(r);
        }
        let [lo, n, rest @ ..] = bytes else {
            return Err(corrupt("residual stream without a code table"));
        };
        let (lo, n) = (usize::from(*lo), usize::from(*n));
        if lo >= SYMBOLS || n == 0 || n > SYMBOLS {
            return Err(corrupt("code table out of range"));
        }
        if n == 1 {
            r.table[0] = (lo as u16) << 8;
            r.bits = BitReader::new(rest);
            return Ok(r);
        }
        let nibbles = rest
            .get(..n.div_ceil(2))
            .ok_or_else(|| corrupt("code table truncated"))?;
        let mut lengths = [0u8; SYMBOLS];
        for i in 0..n {
            let byte = nibbles[i / 2];
            lengths[(lo + i) % SYMBOLS] = if i % 2 == 0 { byte >> 4 } else { byte & 15 };
        }
        let max = lengths.iter().copied().max().unwrap_or(0);
        if max == 0 || u32::from(max) > MAX_CODE_BITS {
            return Err(corrupt("code lengths out of range"));
        }
        let kraft: u32 = lengths
            .iter()
            .filter(|&&l| l > 0)
            .map(|&l| 1u32 << (max - l))
            .sum();
        if kraft > 1 << max {
            return Err(corrupt("code lengths over-subscribed"));
        }
        r.table_bits = u32::from(max);
        let words = canonical_words(&lengths);
        for s in 0..SYMBOLS {
            let len = u32::from(lengths[s]);
            if len == 0 {
                continue;
            }
            let span = 1usize << (r.table_bits - len);
            let start = usize::from(words[s]) << (r.table_bits - len);
            for e in &mut r.table[start..start + span] {
                *e = ((s as u16) << 8) | len as u16;
            }
        }
        r.bits = BitReader::new(&rest[n.div_ceil(2)..]);
        Ok(r)
    }

    /// The next residual, decoded in context `ctx`. Corruption is remembered and
    /// reported by [`StreamReader::finish`].
    #[inline]
    pub(super) fn next(&mut self, ctx: u32) -> u64 {
        let window = self.bits.peek();
        let entry = self.table[shr(window, 64 - self.table_bits) as usize];
        if entry == NO_CODE {
            self.bad = true;
            return 0;
        }
        let code_len = u32::from(entry & 0xff);
        let len = u32::from(entry >> 8).wrapping_sub(ctx) & (SYMBOLS as u32 - 1);
        if len <= 1 {
            self.bits.consume(code_len);
            return u64::from(len);
        }
        if len > 64 {
            self.bad = true;
            return 0;
        }
        let extra = len - 1;
        if code_len + extra <= 56 {
            // One window holds both the code and the bits below the leading one.
            self.bits.consume(code_len + extra);
            (1 << extra) | shr(window << code_len, 64 - extra)
        } else {
            self.bits.consume(code_len);
            (1 << extra) | self.bits.read(extra)
        }
    }

    /// Fails if a residual was corrupt or the bits ran out.
    pub(super) fn finish(&self) -> Result<()> {
        if self.bad {
            return Err(corrupt("residual stream holds an invalid code"));
        }
        self.bits.check()
    }
}
