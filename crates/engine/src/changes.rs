//! Change streams: every mutation of a table whose change stream is on, kept for the
//! table's retention in the `changes` keyspace, in commit order.
//!
//! ## A write, step by step
//! 1. [`crate::write`] applies a row's mutations; with the table's change stream on, it
//!    keeps them (server timestamps resolved) beside the overlay.
//! 2. At commit, [`ChangeClock::reserve`] gives each changed row a commit timestamp:
//!    the clock, but always past the last one given, so commit timestamps are unique
//!    and increase in the order rows are committed (a row's writes hold its lock, so
//!    a row's changes are in its commit order).
//! 3. The change records join the cells in the same fjall batch: a change is durable
//!    exactly when the write is.
//! 4. The reservation stays **in flight** until the batch is committed. The low
//!    watermark is the oldest in-flight timestamp (or the next one to give): readers
//!    return only changes below it, so a reader never passes a change that is still
//!    being committed under a smaller timestamp.
//!
//! The GC sweep records the cells it collects as garbage-collection changes.
//!
//! ## Keys and records (`changes` keyspace), integers big-endian
//! Key: table id `u32`, commit timestamp `i64` with its sign bit flipped (so keys sort
//! by time). Record:
//! ```text
//! u8  version (1)
//! u8  kind: 0 user, 1 garbage collection
//! u32 + row key
//! u32 mutation count, then per mutation a u8 tag and its fields:
//!     0 SetCell            str family, bytes qualifier, i64 timestamp, bytes value
//!     1 DeleteFromColumn   str family, bytes qualifier, i64 start, u8 0|1 (+ i64 end)
//!     2 DeleteFromFamily   str family
//!     3 DeleteFromRow
//!     4 AddToCell / 5 MergeToCell
//!                          str family, bytes qualifier, i64 timestamp,
//!                          u8 0 (+ i64) | 1 (+ bytes)
//! str = u16 + UTF-8, bytes = u32 + bytes
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::db::Engine;
use crate::error::{Error, Result};
use crate::mutation::{AggregateInput, Mutation};

/// Record format version written by this build.
const RECORD_VERSION: u8 = 1;
/// Longest change-stream retention (Bigtable's limit: 7 days), in µs.
pub const MAX_CHANGE_RETENTION_US: i64 = 7 * 24 * 3_600_000_000;
/// Shortest change-stream retention (Bigtable's limit: 1 day), in µs.
pub const MIN_CHANGE_RETENTION_US: i64 = 24 * 3_600_000_000;

/// One change of one row: what a ReadChangeStream `DataChange` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// When it was committed (µs since the epoch); unique within the engine.
    pub commit_us: i64,
    /// The row changed.
    pub row_key: Vec<u8>,
    /// Whether the GC sweep made it (else a user's request did).
    pub garbage_collection: bool,
    /// Its mutations, in order, with server timestamps resolved.
    pub mutations: Vec<Mutation>,
}

/// What [`Engine::read_changes`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    /// Changes in commit order.
    pub records: Vec<ChangeRecord>,
    /// Every change not yet returned will have a commit timestamp at or above this,
    /// unless the batch stopped at its limit (then the next read goes on from the last
    /// record).
    pub low_watermark_us: i64,
    /// The oldest commit timestamp still retained.
    pub retained_from_us: i64,
}

/// Commit timestamps of changes and the low watermark (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ChangeClock {
    state: Mutex<ClockState>,
}

#[derive(Debug, Default)]
struct ClockState {
    last_us: i64,
    in_flight: BTreeMap<i64, usize>,
}

/// Commit timestamps `first..first + n`, in flight until dropped: the write that holds
/// it drops it once durable, so readers never see a change a crash could undo.
pub(crate) struct Reservation {
    clock: Arc<ChangeClock>,
    pub first: i64,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("first", &self.first)
            .finish()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut s) = self.clock.state.lock()
            && let Some(n) = s.in_flight.get_mut(&self.first)
        {
            *n -= 1;
            if *n == 0 {
                s.in_flight.remove(&self.first);
            }
        }
    }
}

impl ChangeClock {
    /// A clock that gives timestamps after `last_us` (the newest on disk).
    pub fn after(last_us: i64) -> Self {
        Self {
            state: Mutex::new(ClockState {
                last_us,
                in_flight: BTreeMap::new(),
            }),
        }
    }

    /// Reserves `n` commit timestamps at or after `now_us`.
    pub fn reserve(self: &Arc<Self>, now_us: i64, n: usize) -> Result<Reservation> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| Error::Storage("change clock lock poisoned".into()))?;
        let first = now_us.max(s.last_us.saturating_add(1));
        s.last_us = first.saturating_add(n as i64 - 1);
        *s.in_flight.entry(first).or_default() += 1;
        Ok(Reservation {
            clock: Arc::clone(self),
            first,
        })
    }

    /// The low watermark at `now_us`: no change below it is still being committed, and
    /// none will be (with nothing in flight it is `now_us`, and later reservations
    /// start there even if the clock steps back).
    pub fn watermark(&self, now_us: i64) -> i64 {
        let Ok(mut s) = self.state.lock() else {
            return i64::MIN;
        };
        if let Some(oldest) = s.in_flight.keys().next() {
            return *oldest;
        }
        let w = now_us.max(s.last_us.saturating_add(1));
        s.last_us = w.saturating_sub(1);
        w
    }
}

/// Key of a change of table `table_id` at `commit_us`.
pub(crate) fn change_key(table_id: u32, commit_us: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(12);
    k.extend_from_slice(&table_id.to_be_bytes());
    k.extend_from_slice(&((commit_us as u64) ^ (1 << 63)).to_be_bytes());
    k
}

fn key_time(key: &[u8]) -> Result<i64> {
    let t: [u8; 8] = key
        .get(4..12)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::Corrupt("change key".into()))?;
    Ok((u64::from_be_bytes(t) ^ (1 << 63)) as i64)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_input(out: &mut Vec<u8>, input: &AggregateInput) {
    match input {
        AggregateInput::Int(i) => {
            out.push(0);
            out.extend_from_slice(&i.to_be_bytes());
        }
        AggregateInput::Bytes(b) => {
            out.push(1);
            put_bytes(out, b);
        }
    }
}

/// Encodes a change record (its commit time is in its key).
pub(crate) fn encode(row_key: &[u8], gc: bool, mutations: &[Mutation]) -> Vec<u8> {
    let mut out = vec![RECORD_VERSION, u8::from(gc)];
    put_bytes(&mut out, row_key);
    out.extend_from_slice(&(mutations.len() as u32).to_be_bytes());
    for m in mutations {
        match m {
            Mutation::SetCell {
                family,
                qualifier,
                timestamp_us,
                value,
            } => {
                out.push(0);
                put_str(&mut out, family);
                put_bytes(&mut out, qualifier);
                out.extend_from_slice(&timestamp_us.to_be_bytes());
                put_bytes(&mut out, value);
            }
            Mutation::DeleteFromColumn {
                family,
                qualifier,
                start_us,
                end_us,
            } => {
                out.push(1);
                put_str(&mut out, family);
                put_bytes(&mut out, qualifier);
                out.extend_from_slice(&start_us.to_be_bytes());
                match end_us {
                    Some(e) => {
                        out.push(1);
                        out.extend_from_slice(&e.to_be_bytes());
                    }
                    None => out.push(0),
                }
            }
            Mutation::DeleteFromFamily { family } => {
                out.push(2);
                put_str(&mut out, family);
            }
            Mutation::DeleteFromRow => out.push(3),
            Mutation::AddToCell {
                family,
                qualifier,
                timestamp_us,
                input,
            }
            | Mutation::MergeToCell {
                family,
                qualifier,
                timestamp_us,
                input,
            } => {
                out.push(if matches!(m, Mutation::AddToCell { .. }) {
                    4
                } else {
                    5
                });
                put_str(&mut out, family);
                put_bytes(&mut out, qualifier);
                out.extend_from_slice(&timestamp_us.to_be_bytes());
                put_input(&mut out, input);
            }
        }
    }
    out
}

/// A bounds-checked cursor over a record.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Corrupt("change record truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn i64(&mut self) -> Result<i64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
    fn u32(&mut self) -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn str(&mut self) -> Result<String> {
        let mut a = [0u8; 2];
        a.copy_from_slice(self.take(2)?);
        let n = usize::from(u16::from_be_bytes(a));
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Error::Corrupt("change record family is not UTF-8".into()))
    }
    fn input(&mut self) -> Result<AggregateInput> {
        match self.u8()? {
            0 => Ok(AggregateInput::Int(self.i64()?)),
            1 => Ok(AggregateInput::Bytes(self.bytes()?)),
            t => Err(Error::Corrupt(format!("unknown aggregate input tag {t}"))),
        }
    }
}

/// Decodes the change stored under `key`.
#[doc(hidden)]
pub fn decode(key: &[u8], bytes: &[u8]) -> Result<ChangeRecord> {
    let mut c = Cursor(bytes);
    let version = c.u8()?;
    if version != RECORD_VERSION {
        return Err(Error::Corrupt(format!(
            "unknown change record version {version}"
        )));
    }
    let garbage_collection = match c.u8()? {
        0 => false,
        1 => true,
        k => return Err(Error::Corrupt(format!("unknown change kind {k}"))),
    };
    let row_key = c.bytes()?;
    let n = c.u32()?;
    let mut mutations = Vec::new();
    for _ in 0..n {
        let m = match c.u8()? {
            0 => Mutation::SetCell {
                family: c.str()?,
                qualifier: c.bytes()?,
                timestamp_us: c.i64()?,
                value: c.bytes()?,
            },
            1 => Mutation::DeleteFromColumn {
                family: c.str()?,
                qualifier: c.bytes()?,
                start_us: c.i64()?,
                end_us: match c.u8()? {
                    0 => None,
                    1 => Some(c.i64()?),
                    t => return Err(Error::Corrupt(format!("unknown end tag {t}"))),
                },
            },
            2 => Mutation::DeleteFromFamily { family: c.str()? },
            3 => Mutation::DeleteFromRow,
            tag @ (4 | 5) => {
                let (family, qualifier, timestamp_us, input) =
                    (c.str()?, c.bytes()?, c.i64()?, c.input()?);
                if tag == 4 {
                    Mutation::AddToCell {
                        family,
                        qualifier,
                        timestamp_us,
                        input,
                    }
                } else {
                    Mutation::MergeToCell {
                        family,
                        qualifier,
                        timestamp_us,
                        input,
                    }
                }
            }
            t => return Err(Error::Corrupt(format!("unknown mutation tag {t}"))),
        };
        mutations.push(m);
    }
    if !c.0.is_empty() {
        return Err(Error::Corrupt("trailing bytes in change record".into()));
    }
    Ok(ChangeRecord {
        commit_us: key_time(key)?,
        row_key,
        garbage_collection,
        mutations,
    })
}

impl Engine {
    /// Turns the change stream of a table on (keeping changes `retention_us`, between
    /// one and seven days) or off (`None`: its kept changes are purged by the sweep).
    pub fn set_change_retention(
        &self,
        instance: &str,
        name: &str,
        retention_us: Option<i64>,
    ) -> Result<crate::schema::TableInfo> {
        self.update_table(instance, name, None, Some(retention_us))
    }

    /// Up to `limit` changes of a table committed after `after_us` (exclusive) and below
    /// the low watermark, in commit order.
    pub fn read_changes(
        &self,
        instance: &str,
        table: &str,
        after_us: i64,
        limit: usize,
    ) -> Result<ChangeBatch> {
        let meta = self.table(instance, table)?;
        let Some(retention) = meta.change_retention_us else {
            return Err(Error::Precondition(format!(
                "table {} has no change stream; set change_stream_config.retention_period \
                 (UpdateTable) to turn it on",
                meta.resource_name()
            )));
        };
        // The watermark first: every change below it is committed, so visible to the
        // snapshot taken after.
        let watermark = self.inner.change_clock.watermark(self.now_us());
        let snapshot = self.inner.db.snapshot();
        let lo = change_key(meta.id, after_us.saturating_add(1));
        let hi = change_key(meta.id, watermark);
        let mut records = Vec::new();
        let range = if limit == 0 || lo >= hi {
            hi.clone()..hi
        } else {
            lo..hi
        };
        for g in fjall::Readable::range(&snapshot, &self.inner.changes, range) {
            let (k, v) = g.into_inner()?;
            records.push(decode(&k, &v)?);
            if records.len() >= limit {
                break;
            }
        }
        Ok(ChangeBatch {
            records,
            low_watermark_us: watermark,
            retained_from_us: self.now_us().saturating_sub(retention),
        })
    }

    /// Deletes the changes of `table_id` committed before `before_us` (all of them
    /// with `i64::MAX`). Returns how many went.
    pub(crate) fn purge_changes(&self, table_id: u32, before_us: i64) -> Result<u64> {
        let lo = change_key(table_id, i64::MIN);
        let hi = change_key(table_id, before_us);
        let mut removed = 0u64;
        loop {
            let mut batch = self.inner.db.batch();
            let mut n = 0usize;
            for g in self.inner.changes.range(lo.as_slice()..hi.as_slice()) {
                batch.remove(&self.inner.changes, g.key()?);
                n += 1;
                if n >= crate::db::PURGE_BATCH_KEYS {
                    break;
                }
            }
            self.commit(batch)?;
            removed += n as u64;
            if n < crate::db::PURGE_BATCH_KEYS {
                return Ok(removed);
            }
        }
    }

    /// The newest commit timestamp on disk (for the clock at open).
    pub(crate) fn newest_change(changes: &fjall::Keyspace) -> Result<i64> {
        match changes.iter().next_back() {
            Some(g) => key_time(&g.key()?),
            None => Ok(i64::MIN),
        }
    }
}

/// Checks a retention against Bigtable's bounds.
pub(crate) fn check_retention(retention_us: Option<i64>) -> Result<()> {
    match retention_us {
        Some(r) if !(MIN_CHANGE_RETENTION_US..=MAX_CHANGE_RETENTION_US).contains(&r) => {
            Err(Error::Invalid(format!(
                "change stream retention is {} s; it must be between {} s (1 day) and {} s \
                 (7 days)",
                r / 1_000_000,
                MIN_CHANGE_RETENTION_US / 1_000_000,
                MAX_CHANGE_RETENTION_US / 1_000_000
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::Rng;

    #[test]
    fn records_round_trip_and_corruption_never_panics() {
        let muts = vec![
            Mutation::SetCell {
                family: "cf".into(),
                qualifier: b"q\0".to_vec(),
                timestamp_us: -5,
                value: vec![1, 2, 3],
            },
            Mutation::DeleteFromColumn {
                family: "cf".into(),
                qualifier: vec![],
                start_us: 0,
                end_us: Some(9),
            },
            Mutation::DeleteFromColumn {
                family: "cf".into(),
                qualifier: b"x".to_vec(),
                start_us: 3,
                end_us: None,
            },
            Mutation::DeleteFromFamily { family: "f".into() },
            Mutation::DeleteFromRow,
            Mutation::AddToCell {
                family: "sum".into(),
                qualifier: b"n".to_vec(),
                timestamp_us: 0,
                input: AggregateInput::Int(-7),
            },
            Mutation::MergeToCell {
                family: "hll".into(),
                qualifier: b"h".to_vec(),
                timestamp_us: 1,
                input: AggregateInput::Bytes(vec![9; 3]),
            },
        ];
        let key = change_key(7, -1_234);
        let good = encode(b"row", true, &muts);
        let want = ChangeRecord {
            commit_us: -1_234,
            row_key: b"row".to_vec(),
            garbage_collection: true,
            mutations: muts,
        };
        assert_eq!(decode(&key, &good).unwrap(), want);
        for i in 0..good.len() {
            assert!(decode(&key, &good[..i]).is_err(), "truncation at {i}");
        }
        let rng = Rng::new(11);
        for _ in 0..5_000 {
            let mut b = good.clone();
            let at = (rng.next_u64() as usize) % b.len();
            b[at] = rng.next_u64() as u8;
            let _ = decode(&key, &b);
        }
    }

    #[test]
    fn keys_sort_by_time_and_the_watermark_waits_for_commits() {
        assert!(change_key(1, -1) < change_key(1, 0));
        assert!(change_key(1, i64::MAX) < change_key(2, i64::MIN));
        let clock = Arc::new(ChangeClock::after(100));
        let a = clock.reserve(50, 2).unwrap();
        assert_eq!(a.first, 101);
        let b = clock.reserve(500, 1).unwrap();
        assert_eq!(b.first, 500);
        assert_eq!(clock.watermark(0), 101);
        drop(a);
        assert_eq!(clock.watermark(0), 500);
        drop(b);
        assert_eq!(clock.watermark(0), 501);
        // With nothing in flight the watermark follows the clock, and later
        // reservations start at or after it.
        assert_eq!(clock.watermark(900), 900);
        assert_eq!(clock.reserve(800, 1).unwrap().first, 900);
    }
}
