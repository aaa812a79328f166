//! Residual streams: the entropy coder under every numeric column.
//!
//! A column transforms its values into unsigned residuals (offsets from a base, zigzag
//! deltas, zigzag differences of ordered doubles …) whose size is mostly in their bit
//! length. The residuals go in groups of [`GROUP`] (the last group may be shorter);
//! the *width* `w` of a group is the largest bit length in it (0..=64). The stream
//! holds the Huffman codes of all widths, then each group's residuals in `w` bits. The
//! decoder's serial work (finding where the next code starts) is one short code per
//! group, in a tight loop of its own; the residuals then sit at offsets that are sums
//! of widths, so the CPU reads them in parallel. Against coding each residual's own
//! bit length this costs about 0.7 % on TSBS data and decodes twice as fast.
//!
//! The code is canonical, at most [`MAX_CODE_BITS`] long, and sent as code lengths:
//!
//! ```text
//! u8 lo      first width of the range
//! u8 count   widths in the range lo, lo+1, …; 1..=65 - lo
//! count == 1: every group has width lo and its code is empty (zero bits a group)
//! count >= 2: ceil(count / 2) bytes of 4-bit code lengths, high nibble first,
//!             0 = width unused, else 1..=MAX_CODE_BITS; the code is complete
//! bits       the codes of the widths of all groups, then the residuals of each
//!            group, each in its group's w bits; MSB first; the last byte zero-padded
//! ```
//!
//! Canonical order: by code length, then by width. A stream of zero residuals has no
//! table and no bits. The stream runs to the end of its section.
//!
//! Byte layout: docs/format.md#block-format

use super::bits::{BitReader, BitWriter, bit_len, corrupt};
use crate::error::Result;

/// Residuals per group (one width code each).
pub(super) const GROUP: usize = 4;
/// Widths 0..=64.
const SYMBOLS: usize = 65;
/// Longest code word: the decoder's lookup table has `2^MAX_CODE_BITS` entries, cheap
/// to build per column; 65 widths fit, and longer codes would only serve widths rarer
/// than one group in 256.
pub(super) const MAX_CODE_BITS: u32 = 8;
/// Valid bits of [`BitReader::peek`] that pass 1 uses before it refills.
const WINDOW_BITS: u32 = 56;

fn width(group: &[u64]) -> usize {
    group.iter().map(|&r| bit_len(r)).max().unwrap_or(0) as usize
}

/// What a stream would cost: width counts and the bits of the residuals.
#[derive(Debug, Clone)]
pub(super) struct Stats {
    freq: [u64; SYMBOLS],
    residual_bits: u64,
    count: u64,
}

impl Stats {
    /// Statistics of `residuals`.
    pub(super) fn of(residuals: impl Iterator<Item = u64>) -> Self {
        let mut s = Self {
            freq: [0; SYMBOLS],
            residual_bits: 0,
            count: 0,
        };
        for_groups(residuals, |group| {
            let w = width(group);
            s.freq[w] += 1;
            s.residual_bits += (w * group.len()) as u64;
            s.count += group.len() as u64;
        });
        s
    }
}

/// Calls `f` with each group of `residuals`.
fn for_groups(residuals: impl Iterator<Item = u64>, mut f: impl FnMut(&[u64])) {
    let mut group = [0u64; GROUP];
    let mut len = 0;
    for r in residuals {
        group[len] = r;
        len += 1;
        if len == GROUP {
            f(&group);
            len = 0;
        }
    }
    if len > 0 {
        f(&group[..len]);
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
    /// Bits of the whole stream: table, codes, residuals.
    pub(super) cost_bits: u64,
}

impl Code {
    /// The Huffman code of `stats`, limited to [`MAX_CODE_BITS`].
    pub(super) fn fit(stats: &Stats) -> Self {
        let lengths = limited_lengths(&stats.freq);
        let lo = stats.freq.iter().position(|&f| f > 0).unwrap_or(0);
        let hi = stats.freq.iter().rposition(|&f| f > 0).unwrap_or(0);
        let range = (lo, hi + 1 - lo.min(hi + 1));
        let words = canonical_words(&lengths);
        let table_bytes = match (stats.count, range.1) {
            (0, _) => 0,
            (_, 1) => 2,
            (_, n) => 2 + n.div_ceil(2) as u64,
        };
        let code_bits: u64 = (0..SYMBOLS)
            .map(|s| stats.freq[s] * u64::from(lengths[s]))
            .sum();
        Self {
            lengths,
            words,
            range,
            cost_bits: table_bytes * 8 + code_bits + stats.residual_bits,
        }
    }

    /// Appends the stream of `residuals` (those the stats were taken of) to `out`.
    pub(super) fn write(&self, residuals: impl Iterator<Item = u64>, out: &mut Vec<u8>) {
        let residuals: Vec<u64> = residuals.collect();
        if residuals.is_empty() {
            return;
        }
        let (lo, count) = self.range;
        out.push(lo as u8);
        out.push(count as u8);
        if count >= 2 {
            let len = |i: usize| if i < count { self.lengths[lo + i] } else { 0 };
            for pair in 0..count.div_ceil(2) {
                out.push((len(2 * pair) << 4) | len(2 * pair + 1));
            }
        }
        let widths: Vec<usize> = residuals.chunks(GROUP).map(width).collect();
        let mut bits = BitWriter::new(std::mem::take(out));
        for &w in &widths {
            bits.write(u64::from(self.words[w]), u32::from(self.lengths[w]));
        }
        for (group, &w) in residuals.chunks(GROUP).zip(&widths) {
            for &r in group {
                bits.write(r, w as u32);
            }
        }
        *out = bits.finish();
    }
}

/// Huffman code lengths, flattened by halving the counts until none exceeds
/// [`MAX_CODE_BITS`] (equal counts give depth ceil(log2 65) = 7 at most, so this ends).
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

/// Canonical code words of `lengths` (by length, then symbol).
fn canonical_words(lengths: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    // DEFLATE's construction: the first code of each length follows the last code of
    // the shorter lengths.
    const MAX: usize = MAX_CODE_BITS as usize;
    let mut count = [0u16; MAX + 1];
    for &l in lengths.iter().filter(|&&l| l > 0) {
        count[usize::from(l).min(MAX)] += 1;
    }
    let mut next = [0u16; MAX + 1];
    let mut code = 0u16;
    for len in 1..=MAX {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    let mut words = [0u16; SYMBOLS];
    for (w, &l) in words.iter_mut().zip(lengths) {
        if l > 0 {
            let l = usize::from(l).min(MAX);
            *w = next[l];
            next[l] = next[l].wrapping_add(1);
        }
    }
    words
}

/// Decodes the stream held by `bytes` into `out`, one residual per slot. (The columns
/// undo their transforms in a second loop: fused into this one, the state of both
/// spills out of the registers and the whole runs slower.)
pub(super) fn decode(bytes: &[u8], out: &mut [u64]) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let [lo, n, rest @ ..] = bytes else {
        return Err(corrupt("residual stream without a code table"));
    };
    let (lo, n) = (usize::from(*lo), usize::from(*n));
    if n == 0 || lo + n > SYMBOLS {
        return Err(corrupt("code table out of range"));
    }
    let mut table = [0u16; 1 << MAX_CODE_BITS];
    let mut table_bits = 0;
    let mut rest = rest;
    if n == 1 {
        table[0] = (lo as u16) << 8;
    } else {
        let nibbles = rest
            .get(..n.div_ceil(2))
            .ok_or_else(|| corrupt("code table truncated"))?;
        rest = &rest[n.div_ceil(2)..];
        let mut lengths = [0u8; SYMBOLS];
        for i in 0..n {
            let byte = nibbles[i / 2];
            lengths[lo + i] = if i % 2 == 0 { byte >> 4 } else { byte & 15 };
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
        // Huffman codes are complete; requiring it fills every table entry, so that the
        // loops below need no check for a missing code.
        if kraft != 1 << max {
            return Err(corrupt("code lengths do not form a complete code"));
        }
        table_bits = u32::from(max);
        let words = canonical_words(&lengths);
        for w in 0..SYMBOLS {
            let len = u32::from(lengths[w]);
            if len > 0 {
                let span = 1usize << (table_bits - len);
                let start = usize::from(words[w]) << (table_bits - len);
                table[start..start + span].fill(((w as u16) << 8) | len as u16);
            }
        }
    }

    // Pass 1: the widths, from a 64-bit buffer refilled when it may hold less than a
    // code (a serial chain of a shift, a table load and a shift per group).
    let mut widths = vec![0u8; out.len().div_ceil(GROUP)];
    let mut bits = BitReader::new(rest);
    let (mut buf, mut avail) = (bits.peek(), WINDOW_BITS);
    for slot in &mut widths {
        if avail < MAX_CODE_BITS {
            bits.consume(WINDOW_BITS - avail);
            (buf, avail) = (bits.peek(), WINDOW_BITS);
        }
        // `table_bits <= 8`: two shifts make a shift by 64 - 0 well defined.
        let index = ((buf >> 1) >> (63 - table_bits)) as usize;
        let entry = table[index & ((1 << MAX_CODE_BITS) - 1)];
        let code_len = u32::from(entry & 0xff);
        buf <<= code_len;
        avail -= code_len;
        *slot = (entry >> 8) as u8;
    }
    bits.consume(WINDOW_BITS - avail);
    // Pass 2: the residuals, at offsets that only depend on the widths.
    for (group, &w) in out.chunks_mut(GROUP).zip(&widths) {
        let w = u32::from(w).min(64);
        if w == 0 {
            // (Also keeps constant columns from peeking past the end, the slow path.)
            group.fill(0);
        } else if w <= 56 {
            bits.read_group(w, group);
        } else {
            for r in group {
                *r = bits.read(w);
            }
        }
    }
    bits.check()
}
