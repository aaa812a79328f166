//! Access counters on disk, in the `meta` keyspace (docs/format.md#key-visualizer).
//!
//! ```text
//! `w` table_id (u32 BE) generation (u32 BE) → varint n, then n × (varint len, key bytes):
//!     the start keys of ranges 1..=n of that generation (range 0 starts at the empty key)
//! `v` table_id (u32 BE) step_ms (i64 BE) generation (u32 BE) → u8 version (1),
//!     varint n, then n × (varint range, 5 × varint count): one closed step's
//!     non-zero counters, in the order writes, reads, bytes written, bytes read,
//!     rows scanned
//! ```
//! Decoding never panics: a short record is `Error::Corrupt`.

use fjall::Readable;

use super::METRICS;
use crate::db::Engine;
use crate::error::{Error, Result};

const GENERATION_TAG: u8 = b'w';
const STEP_TAG: u8 = b'v';
/// Version of the step record written by this build.
const STEP_VERSION: u8 = 1;

/// One persisted step: its start, the generation of its ranges, its counters.
pub(super) struct Step {
    pub step_ms: i64,
    pub generation: u32,
    pub counts: Vec<(u32, [u64; METRICS])>,
}

fn generation_key(table_id: u32, generation: u32) -> Vec<u8> {
    let mut k = vec![GENERATION_TAG];
    k.extend_from_slice(&table_id.to_be_bytes());
    k.extend_from_slice(&generation.to_be_bytes());
    k
}

fn step_prefix(table_id: u32) -> Vec<u8> {
    let mut k = vec![STEP_TAG];
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn step_key(table_id: u32, step_ms: i64, generation: Option<u32>) -> Vec<u8> {
    let mut k = step_prefix(table_id);
    k.extend_from_slice(&step_ms.max(0).to_be_bytes());
    if let Some(g) = generation {
        k.extend_from_slice(&g.to_be_bytes());
    }
    k
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &mut &[u8]) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let Some((&byte, rest)) = b.split_first() else {
            return Err(Error::Corrupt("access counters: short varint".into()));
        };
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err(Error::Corrupt("access counters: varint too long".into()))
}

fn encode_starts(starts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, starts.len() as u64);
    for s in starts {
        put_varint(&mut out, s.len() as u64);
        out.extend_from_slice(s);
    }
    out
}

pub(super) fn decode_starts(mut b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let n = get_varint(&mut b)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let len = get_varint(&mut b)? as usize;
        if b.len() < len {
            return Err(Error::Corrupt("access counters: short range start".into()));
        }
        let (k, rest) = b.split_at(len);
        out.push(k.to_vec());
        b = rest;
    }
    Ok(out)
}

fn encode_counts(counts: &[(u32, [u64; METRICS])]) -> Vec<u8> {
    let mut out = vec![STEP_VERSION];
    put_varint(&mut out, counts.len() as u64);
    for (range, values) in counts {
        put_varint(&mut out, u64::from(*range));
        for v in values {
            put_varint(&mut out, *v);
        }
    }
    out
}

fn decode_counts(b: &[u8]) -> Result<Vec<(u32, [u64; METRICS])>> {
    let Some((&version, mut b)) = b.split_first() else {
        return Err(Error::Corrupt("access counters: empty step record".into()));
    };
    if version != STEP_VERSION {
        return Err(Error::Corrupt(format!(
            "access counters: step record version {version}, this build reads {STEP_VERSION}"
        )));
    }
    let n = get_varint(&mut b)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let range = u32::try_from(get_varint(&mut b)?)
            .map_err(|_| Error::Corrupt("access counters: range index".into()))?;
        let mut values = [0u64; METRICS];
        for v in &mut values {
            *v = get_varint(&mut b)?;
        }
        out.push((range, values));
    }
    Ok(out)
}

/// Persists the start keys of a generation.
pub(super) fn put_generation(
    engine: &Engine,
    table_id: u32,
    generation: u32,
    starts: &[Vec<u8>],
) -> Result<()> {
    let inner = &engine.inner;
    inner
        .meta
        .insert(generation_key(table_id, generation), encode_starts(starts))?;
    Ok(())
}

/// The newest persisted generation of a table and its start keys.
pub(super) fn latest_generation(engine: &Engine, table_id: u32) -> Result<(u32, Vec<Vec<u8>>)> {
    let inner = &engine.inner;
    let mut prefix = vec![GENERATION_TAG];
    prefix.extend_from_slice(&table_id.to_be_bytes());
    let snapshot = inner.db.snapshot();
    let Some(guard) = snapshot.prefix(&inner.meta, &prefix).next_back() else {
        return Ok((0, Vec::new()));
    };
    let (k, v) = guard.into_inner()?;
    Ok((generation_of(&k)?, decode_starts(&v)?))
}

fn generation_of(key: &[u8]) -> Result<u32> {
    let b: [u8; 4] = key
        .get(key.len().saturating_sub(4)..)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::Corrupt("access counters: key".into()))?;
    Ok(u32::from_be_bytes(b))
}

/// The start keys of one generation (empty if it was never persisted).
pub(super) fn generation(engine: &Engine, table_id: u32, generation: u32) -> Result<Vec<Vec<u8>>> {
    let inner = &engine.inner;
    match inner.meta.get(generation_key(table_id, generation))? {
        Some(v) => decode_starts(&v),
        None => Ok(Vec::new()),
    }
}

/// Adds counters to a step's record (a step persisted at shutdown is continued after).
pub(super) fn add_step(
    engine: &Engine,
    table_id: u32,
    step_ms: i64,
    generation: u32,
    counts: &[(u32, [u64; METRICS])],
) -> Result<()> {
    let inner = &engine.inner;
    let key = step_key(table_id, step_ms, Some(generation));
    let mut merged: Vec<(u32, [u64; METRICS])> = match inner.meta.get(&key)? {
        Some(v) => decode_counts(&v)?,
        None => Vec::new(),
    };
    for (range, values) in counts {
        match merged.iter_mut().find(|(r, _)| r == range) {
            Some((_, have)) => {
                for (h, v) in have.iter_mut().zip(values.iter()) {
                    *h = h.saturating_add(*v);
                }
            }
            None => merged.push((*range, *values)),
        }
    }
    inner.meta.insert(key, encode_counts(&merged))?;
    Ok(())
}

/// Deletes a table's steps that start before `before_ms`.
pub(super) fn expire(engine: &Engine, table_id: u32, before_ms: i64) -> Result<()> {
    let inner = &engine.inner;
    let lo = step_key(table_id, 0, None);
    let hi = step_key(table_id, before_ms, None);
    if lo >= hi {
        return Ok(());
    }
    let snapshot = inner.db.snapshot();
    for guard in snapshot.range(&inner.meta, lo..hi) {
        let key = guard.key()?;
        inner.meta.remove(key)?;
    }
    Ok(())
}

/// Deletes a table's range generations older than its newest `kept`.
pub(super) fn expire_generations(engine: &Engine, table_id: u32, kept: u32) -> Result<()> {
    let (newest, _) = latest_generation(engine, table_id)?;
    let Some(oldest_kept) = newest.checked_sub(kept) else {
        return Ok(());
    };
    let inner = &engine.inner;
    let snapshot = inner.db.snapshot();
    for guard in snapshot.range(
        &inner.meta,
        generation_key(table_id, 0)..generation_key(table_id, oldest_kept),
    ) {
        inner.meta.remove(guard.key()?)?;
    }
    Ok(())
}

/// Ids of the tables with persisted range generations.
pub(super) fn tables_with_history(engine: &Engine) -> Result<Vec<u32>> {
    let inner = &engine.inner;
    let snapshot = inner.db.snapshot();
    let mut ids: Vec<u32> = Vec::new();
    for guard in snapshot.prefix(&inner.meta, [GENERATION_TAG]) {
        let k = guard.key()?;
        let id: [u8; 4] = k
            .get(1..5)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| Error::Corrupt("access counters: generation key".into()))?;
        let id = u32::from_be_bytes(id);
        if ids.last() != Some(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// A table's steps that start in `[from_ms, to_ms]`, oldest first.
pub(super) fn steps(engine: &Engine, table_id: u32, from_ms: i64, to_ms: i64) -> Result<Vec<Step>> {
    let inner = &engine.inner;
    let lo = step_key(table_id, from_ms, None);
    let hi = step_key(table_id, to_ms.saturating_add(1), None);
    let snapshot = inner.db.snapshot();
    let mut out = Vec::new();
    let at = step_prefix(table_id).len();
    for guard in snapshot.range(&inner.meta, lo..hi) {
        let (k, v) = guard.into_inner()?;
        let ms: [u8; 8] = k
            .get(at..at + 8)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| Error::Corrupt("access counters: step key".into()))?;
        out.push(Step {
            step_ms: i64::from_be_bytes(ms),
            generation: generation_of(&k)?,
            counts: decode_counts(&v)?,
        });
    }
    Ok(out)
}

/// A table's stored steps and the bytes of its step and generation records.
pub(super) fn stored(engine: &Engine, table_id: u32) -> Result<(usize, u64)> {
    let inner = &engine.inner;
    let snapshot = inner.db.snapshot();
    let mut steps = 0;
    let mut bytes = 0u64;
    for tag in [STEP_TAG, GENERATION_TAG] {
        let mut prefix = vec![tag];
        prefix.extend_from_slice(&table_id.to_be_bytes());
        for guard in snapshot.prefix(&inner.meta, &prefix) {
            let (k, v) = guard.into_inner()?;
            bytes += (k.len() + v.len()) as u64;
            if tag == STEP_TAG {
                steps += 1;
            }
        }
    }
    Ok((steps, bytes))
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let starts = vec![b"a".to_vec(), b"hot#".to_vec(), vec![0, 255]];
        assert_eq!(decode_starts(&encode_starts(&starts)).unwrap(), starts);
        let counts = vec![(0, [1, 2, 3, 4, 5]), (999, [u64::MAX, 0, 0, 0, 1])];
        assert_eq!(decode_counts(&encode_counts(&counts)).unwrap(), counts);
    }

    #[test]
    fn short_records_are_corrupt_not_panics() {
        let full = encode_counts(&[(3, [300, 2, 3, 4, 5])]);
        for cut in 0..full.len() {
            assert!(decode_counts(&full[..cut]).is_err());
        }
        let starts = encode_starts(&[b"abc".to_vec()]);
        for cut in 0..starts.len() {
            assert!(decode_starts(&starts[..cut]).is_err());
        }
        assert!(get_varint(&mut &[0xff; 11][..]).is_err());
    }
}
