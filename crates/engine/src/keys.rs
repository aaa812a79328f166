//! The key layout of the `cells` keyspace, byte by byte.
//!
//! Every cell is one fjall key-value pair. The key is:
//!
//! ```text
//! table_id   u32 big-endian         4 bytes  (ids are never reused)
//! row_key    escaped, terminated    |row| + escapes + 2
//! family_id  u32 big-endian         4 bytes  (creation order; never reused in a table)
//! qualifier  escaped, terminated    |qualifier| + escapes + 2
//! timestamp  u64 big-endian of !(ts ^ 2^63)   8 bytes (newest first)
//! ```
//!
//! Escaping keeps byte order: each `0x00` in a row key or qualifier is written as
//! `0x00 0xFF`, and the field ends with `0x00 0x01`. So `"a"` (`61 00 01`) sorts
//! before `"a\0"` (`61 00 FF 00 01`) and before `"b"` (`62 00 01`), exactly as the
//! unescaped byte strings do, and every cell of a row, a family or a column is one
//! contiguous key range. A scan of a row range, a family or a column is one seek
//! plus a sequential read. The value is the cell value, unchanged.
//!
//! Bounds: the first key of row `k` is `T|esc(k)|00 01`; every key of row `k` sorts
//! before `T|esc(k)|00 02`, which in turn sorts before any longer row `k\0…` (whose
//! escape is `00 FF`). The same holds for qualifiers inside a family.
//!
//! Byte layout: docs/format.md#cell-keys

use crate::error::{Error, Result};

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;
/// Second byte just past every key of a field value (see the module docs).
const PAST_FIELD: u8 = 0x02;

/// A decoded cell key, borrowing nothing (row and qualifier unescaped). The read path
/// parses keys in place ([`KeyParts`]); tests check both against each other.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    /// Table id.
    pub table_id: u32,
    /// Row key.
    pub row: Vec<u8>,
    /// Family id.
    pub family_id: u32,
    /// Column qualifier.
    pub qualifier: Vec<u8>,
    /// Timestamp in µs.
    pub timestamp_us: i64,
}

/// Appends `bytes` escaped and terminated.
pub fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == ESCAPE {
            out.push(ESCAPED_ZERO);
        }
    }
    out.push(ESCAPE);
    out.push(TERMINATOR);
}

/// Order-preserving encoding of a timestamp, newest first.
pub fn ts_desc(ts_us: i64) -> [u8; 8] {
    (!((ts_us as u64) ^ (1 << 63))).to_be_bytes()
}

fn ts_from_desc(b: [u8; 8]) -> i64 {
    ((!u64::from_be_bytes(b)) ^ (1 << 63)) as i64
}

/// The prefix of every key of a table.
pub fn table_prefix(table_id: u32) -> Vec<u8> {
    table_id.to_be_bytes().to_vec()
}

/// The first key of the next table: the exclusive end of a table's keys.
pub fn table_end(table_id: u32) -> Vec<u8> {
    (u64::from(table_id) + 1).to_be_bytes()[4..].to_vec()
}

/// The prefix of every key of row `row` (also its first possible key).
pub fn row_prefix(table_id: u32, row: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + row.len() + 2);
    k.extend_from_slice(&table_id.to_be_bytes());
    push_escaped(&mut k, row);
    k
}

/// A key after every key of row `row` and before every later row.
pub fn row_end(table_id: u32, row: &[u8]) -> Vec<u8> {
    let mut k = row_prefix(table_id, row);
    if let Some(last) = k.last_mut() {
        *last = PAST_FIELD;
    }
    k
}

/// The prefix of every key of one family in one row.
pub fn family_prefix(row_prefix: &[u8], family_id: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(row_prefix.len() + 4);
    k.extend_from_slice(row_prefix);
    k.extend_from_slice(&family_id.to_be_bytes());
    k
}

/// The prefix of every key of one column (also its first possible key).
pub fn column_prefix(row_prefix: &[u8], family_id: u32, qualifier: &[u8]) -> Vec<u8> {
    let mut k = family_prefix(row_prefix, family_id);
    push_escaped(&mut k, qualifier);
    k
}

/// A key after every key of the column and before the next qualifier.
pub fn column_end(row_prefix: &[u8], family_id: u32, qualifier: &[u8]) -> Vec<u8> {
    let mut k = column_prefix(row_prefix, family_id, qualifier);
    if let Some(last) = k.last_mut() {
        *last = PAST_FIELD;
    }
    k
}

/// The full key of one cell.
pub fn cell_key(row_prefix: &[u8], family_id: u32, qualifier: &[u8], ts_us: i64) -> Vec<u8> {
    let mut k = column_prefix(row_prefix, family_id, qualifier);
    k.extend_from_slice(&ts_desc(ts_us));
    k
}

/// Length of the escaped-and-terminated field that starts at `from`, if well formed.
/// Every cell read parses its key, so the escapes are found with `memchr`, not byte
/// by byte.
fn escaped_len(key: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        i += memchr::memchr(ESCAPE, key.get(i..)?)?;
        match *key.get(i + 1)? {
            TERMINATOR => return Some(i + 2 - from),
            ESCAPED_ZERO => i += 2,
            _ => return None,
        }
    }
}

fn unescape(field: &[u8]) -> Vec<u8> {
    let mut rest = &field[..field.len().saturating_sub(2)];
    let mut out = Vec::with_capacity(rest.len());
    while let Some(at) = memchr::memchr(ESCAPE, rest) {
        // The escape byte is the zero; the byte after it only marks it.
        out.extend_from_slice(&rest[..=at]);
        rest = rest.get(at + 2..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    out
}

/// Where the fields of a cell key lie, without copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyParts {
    /// End of the row prefix (table id + escaped row): `key[..row_end]` is the row prefix.
    pub row_end: usize,
    /// Family id.
    pub family_id: u32,
    /// End of the escaped qualifier: `key[row_end + 4..qualifier_end]`.
    pub qualifier_end: usize,
    /// Timestamp in µs.
    pub timestamp_us: i64,
}

impl KeyParts {
    /// Splits a stored cell key; an error means corrupt data.
    pub fn parse(key: &[u8]) -> Result<Self> {
        let corrupt = || Error::Corrupt(format!("malformed cell key of {} bytes", key.len()));
        let row_len = escaped_len(key, 4).ok_or_else(corrupt)?;
        let row_end = 4 + row_len;
        let fam: [u8; 4] = key
            .get(row_end..row_end + 4)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(corrupt)?;
        let q_len = escaped_len(key, row_end + 4).ok_or_else(corrupt)?;
        let qualifier_end = row_end + 4 + q_len;
        let ts: [u8; 8] = key
            .get(qualifier_end..)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(corrupt)?;
        Ok(Self {
            row_end,
            family_id: u32::from_be_bytes(fam),
            qualifier_end,
            timestamp_us: ts_from_desc(ts),
        })
    }

    /// The unescaped row key.
    #[cfg(test)]
    pub fn row(&self, key: &[u8]) -> Vec<u8> {
        unescape(&key[4..self.row_end])
    }

    /// The unescaped qualifier.
    pub fn qualifier(&self, key: &[u8]) -> Vec<u8> {
        unescape(&key[self.row_end + 4..self.qualifier_end])
    }

    /// The length of the unescaped qualifier, without copying it: the escaped body
    /// less one byte per escaped zero (each `0x00` in the body is one escape).
    pub fn qualifier_len(&self, key: &[u8]) -> usize {
        let body = &key[self.row_end + 4..self.qualifier_end - 2];
        body.len() - body.iter().filter(|&&b| b == ESCAPE).count()
    }

    /// The key up to and including the escaped qualifier: identifies the column.
    pub fn column<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        &key[..self.qualifier_end]
    }
}

/// The unescaped row key of a row prefix (as made by [`row_prefix`]).
pub fn row_of_prefix(row_prefix: &[u8]) -> Vec<u8> {
    unescape(row_prefix.get(4..).unwrap_or_default())
}

/// Decodes a whole cell key.
#[cfg(test)]
pub fn decode(key: &[u8]) -> Result<CellKey> {
    let parts = KeyParts::parse(key)?;
    let table: [u8; 4] = key[..4]
        .try_into()
        .map_err(|_| Error::Corrupt("short key".into()))?;
    Ok(CellKey {
        table_id: u32::from_be_bytes(table),
        row: parts.row(key),
        family_id: parts.family_id,
        qualifier: parts.qualifier(key),
        timestamp_us: parts.timestamp_us,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_with_zero_bytes() {
        let rp = row_prefix(7, b"a\0b\xff");
        let k = cell_key(&rp, 3, b"\0q\0", -5);
        assert_eq!(KeyParts::parse(&k).unwrap().qualifier_len(&k), 3);
        let d = decode(&k).unwrap();
        assert_eq!(
            d,
            CellKey {
                table_id: 7,
                row: b"a\0b\xff".to_vec(),
                family_id: 3,
                qualifier: b"\0q\0".to_vec(),
                timestamp_us: -5
            }
        );
    }

    #[test]
    fn order_matches_bigtable_order() {
        let k = |row: &[u8], fam, q: &[u8], ts| cell_key(&row_prefix(1, row), fam, q, ts);
        let ordered = [
            k(b"a", 1, b"q", 10),
            k(b"a", 1, b"q", 5),
            k(b"a", 1, b"q\0", 99),
            k(b"a", 1, b"r", 99),
            k(b"a", 2, b"", 1),
            k(b"a\0", 1, b"q", 1),
            k(b"a\x01", 1, b"q", 1),
            k(b"b", 1, b"q", i64::MAX),
            k(b"b", 1, b"q", i64::MIN),
        ];
        for w in ordered.windows(2) {
            assert!(w[0] < w[1], "{:?} !< {:?}", decode(&w[0]), decode(&w[1]));
        }
        assert!(row_end(1, b"a") > ordered[4]);
        assert!(row_end(1, b"a") < ordered[5]);
        assert!(column_end(&row_prefix(1, b"a"), 1, b"q") > ordered[1]);
        assert!(column_end(&row_prefix(1, b"a"), 1, b"q") < ordered[2]);
        assert!(table_end(1) > ordered[8]);
    }

    #[test]
    fn corrupt_keys_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"\0\0\0\x01",
            b"\0\0\0\x01a\0\x07",
            b"\0\0\0\x01a\0\x01\0\0\0\x01q\0\x01\0",
        ] {
            assert!(KeyParts::parse(bad).is_err());
        }
    }
}
