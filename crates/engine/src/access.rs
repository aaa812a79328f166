//! Access counters by key range, in one-minute steps: what Key Visualizer draws.
//!
//! Every row the engine writes or reads (for clients, and for its own seal passes
//! and the schema advisor's samples alike) is counted twice: in engine-wide totals
//! ([`Totals`], for `/metrics`) and in its table's counters by key range
//! ([`TableAccess`]). Key ranges adapt to where the keys are: a table's ranges split
//! its key space at up to [`MAX_RANGES`] − 1 keys drawn from the distinct keys it
//! recently touched (a sample kept as requests pass). A new table gets ranges after
//! its first [`FIRST_RANGES_EVENTS`] requests; ranges are redrawn every
//! [`REDRAW_EVERY_STEPS`] steps.
//!
//! A count is a few atomic adds under a read lock after a binary search of the range
//! starts. [`Engine::roll_access`], called by the server every few seconds, closes a
//! step once its minute has passed: the non-zero counters go into the `meta`
//! keyspace (docs/format.md#key-visualizer), and steps older than
//! [`RETENTION_MS`] are deleted. Memory per table is bounded: one step of counters,
//! the ranges, the key sample. History survives a restart; the ranges in use are
//! reloaded from their last persisted generation.

mod codec;
mod heatmap;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use crate::db::Engine;
use crate::error::{Error, Result};

pub use heatmap::{Heatmap, HeatmapRequest};

/// Length of one step of counters.
pub const STEP_MS: i64 = 60_000;
/// Most key ranges a table is split into (Key Visualizer draws up to about 1,000).
pub const MAX_RANGES: usize = 1000;
/// How long closed steps are kept.
pub const RETENTION_MS: i64 = 3 * 24 * 3600 * 1000;
/// Keys kept in a table's sample of touched keys (recent ones replace older ones).
const SAMPLE_KEYS: usize = 4096;
/// One request in this many adds its key to the sample.
const SAMPLE_EVERY: u64 = 4;
/// A table with fewer ranges than [`MAX_RANGES`] redraws them when its request count
/// reaches this, and again at each multiple of 4 of it up to [`SAMPLE_KEYS`] × 4, so a
/// new table is split within its first requests.
const FIRST_RANGES_EVENTS: u64 = 64;
/// Steps between two redraws of a table's ranges.
const REDRAW_EVERY_STEPS: i64 = 60;
/// Range generations kept per table: enough for every step within [`RETENTION_MS`]
/// (one redraw an hour, plus the first few of a new table).
const GENERATIONS_KEPT: u32 = 96;
/// Longest prefix of a key the sample keeps: range starts need no more.
const SAMPLE_KEY_BYTES: usize = 256;

/// What is counted per key range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMetric {
    /// Rows written (one per row mutation applied).
    Writes,
    /// Rows returned by reads.
    Reads,
    /// Row key, qualifier and value bytes written.
    BytesWritten,
    /// Row key, qualifier and value bytes returned.
    BytesRead,
    /// Rows a read walked, returned or not.
    RowsScanned,
}

impl AccessMetric {
    /// Every metric, in the order of the counters.
    pub const ALL: [AccessMetric; METRICS] = [
        Self::Writes,
        Self::Reads,
        Self::BytesWritten,
        Self::BytesRead,
        Self::RowsScanned,
    ];

    /// The metric's name in the console's API.
    pub fn name(self) -> &'static str {
        match self {
            Self::Writes => "writes",
            Self::Reads => "reads",
            Self::BytesWritten => "bytes_written",
            Self::BytesRead => "bytes_read",
            Self::RowsScanned => "rows_scanned",
        }
    }

    /// The metric named `name`.
    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|m| m.name()).collect();
                Error::Invalid(format!(
                    "unknown metric {name:?}: expected one of {}",
                    names.join(", ")
                ))
            })
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Number of [`AccessMetric`]s.
pub const METRICS: usize = 5;

/// Engine-wide counters since the engine opened.
#[derive(Debug, Default)]
pub struct Totals {
    /// Rows written.
    pub rows_written: AtomicU64,
    /// Cells written or deleted (one per mutation).
    pub cells_written: AtomicU64,
    /// Row key, qualifier and value bytes written.
    pub bytes_written: AtomicU64,
    /// Rows returned by reads.
    pub rows_read: AtomicU64,
    /// Cells returned by reads.
    pub cells_read: AtomicU64,
    /// Bytes returned by reads.
    pub bytes_read: AtomicU64,
    /// Rows walked by reads.
    pub rows_scanned: AtomicU64,
}

/// The counters of every table touched since the engine opened.
pub(crate) struct AccessLog {
    tables: RwLock<HashMap<u32, Arc<TableAccess>>>,
    pub totals: Totals,
    /// The step at which old steps were last deleted.
    expired_at: AtomicI64,
    /// Whether requests are counted by key range ([`crate::Options::count_access`]).
    enabled: bool,
}

/// One table's ranges and the counters of its current step.
pub(crate) struct TableAccess {
    table_id: u32,
    state: RwLock<Ranges>,
    sample: Mutex<Vec<Vec<u8>>>,
    events: AtomicU64,
}

/// Key ranges and their counters for one step.
struct Ranges {
    /// Generation of `starts` (persisted with each step that used it).
    generation: u32,
    /// Whether `starts` of this generation are persisted.
    persisted: bool,
    /// Start keys of ranges 1.. (range 0 starts at the empty key).
    starts: Vec<Vec<u8>>,
    /// `(starts.len() + 1) × METRICS` counters.
    counts: Vec<AtomicU64>,
    /// Start of the step being counted (ms).
    step_ms: i64,
    /// Step of the last redraw.
    drawn_at_ms: i64,
}

impl Ranges {
    fn range_of(&self, key: &[u8]) -> usize {
        self.starts.partition_point(|s| s.as_slice() <= key)
    }

    fn zeroed(n: usize) -> Vec<AtomicU64> {
        (0..n * METRICS).map(|_| AtomicU64::new(0)).collect()
    }

    /// The counters as `(range, values)` for ranges with any count, zeroing them.
    fn take(&self) -> Vec<(u32, [u64; METRICS])> {
        self.read(true)
    }

    /// The counters as [`Ranges::take`] gives them, without zeroing.
    fn peek(&self) -> Vec<(u32, [u64; METRICS])> {
        self.read(false)
    }

    fn read(&self, zero: bool) -> Vec<(u32, [u64; METRICS])> {
        let mut out = Vec::new();
        for (i, chunk) in self.counts.chunks(METRICS).enumerate() {
            let mut v = [0u64; METRICS];
            for (slot, c) in v.iter_mut().zip(chunk) {
                *slot = if zero {
                    c.swap(0, Relaxed)
                } else {
                    c.load(Relaxed)
                };
            }
            if v.iter().any(|&x| x != 0) {
                out.push((i as u32, v));
            }
        }
        out
    }
}

impl TableAccess {
    fn new(table_id: u32, generation: u32, starts: Vec<Vec<u8>>, step_ms: i64) -> Self {
        let counts = Ranges::zeroed(starts.len() + 1);
        Self {
            table_id,
            state: RwLock::new(Ranges {
                generation,
                persisted: true,
                starts,
                counts,
                step_ms,
                drawn_at_ms: step_ms,
            }),
            sample: Mutex::new(Vec::new()),
            events: AtomicU64::new(0),
        }
    }

    /// Counts one row: `amounts` in [`AccessMetric::ALL`] order.
    pub fn add(&self, key: &[u8], amounts: [u64; METRICS]) {
        let n = self.events.fetch_add(1, Relaxed);
        if n.is_multiple_of(SAMPLE_EVERY) {
            self.remember(key, n);
        }
        let mut needs_ranges = false;
        if let Ok(r) = self.state.read() {
            let i = r.range_of(key);
            for (m, &a) in amounts.iter().enumerate() {
                if a != 0
                    && let Some(c) = r.counts.get(i * METRICS + m)
                {
                    c.fetch_add(a, Relaxed);
                }
            }
            needs_ranges = r.starts.len() + 1 < MAX_RANGES;
        }
        if needs_ranges && is_first_ranges_point(n + 1) {
            let step = self.state.read().map(|r| r.step_ms).unwrap_or(0);
            self.redraw(step);
        }
    }

    /// Adds `key` to the sample; once full, a pseudo-random slot is replaced, so the
    /// sample leans to recent keys.
    fn remember(&self, key: &[u8], n: u64) {
        let Ok(mut s) = self.sample.lock() else {
            return;
        };
        let key = &key[..key.len().min(SAMPLE_KEY_BYTES)];
        if s.len() < SAMPLE_KEYS {
            s.push(key.to_vec());
        } else {
            let slot = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % SAMPLE_KEYS;
            if let Some(k) = s.get_mut(slot) {
                k.clear();
                k.extend_from_slice(key);
            }
        }
    }

    /// Draws new ranges from the key sample and the current starts. The current
    /// step's counts of each old range move to the new ranges in proportion to the
    /// sampled requests that fell in each (the sample is of requests, so a hot key is
    /// in it many times); an old range no sampled request fell in moves whole to the
    /// new range holding its start.
    fn redraw(&self, step_ms: i64) {
        let mut sampled = match self.sample.lock() {
            Ok(s) => s.clone(),
            Err(_) => return,
        };
        sampled.sort_unstable();
        let Ok(mut r) = self.state.write() else {
            return;
        };
        let mut candidates = sampled.clone();
        candidates.extend(r.starts.iter().cloned());
        candidates.sort_unstable();
        candidates.dedup();
        candidates.retain(|k| !k.is_empty());
        let starts = spread(candidates, MAX_RANGES - 1);
        if starts == r.starts {
            r.drawn_at_ms = step_ms;
            return;
        }
        let counts = Ranges::zeroed(starts.len() + 1);
        let new = Ranges {
            generation: r.generation.wrapping_add(1),
            persisted: false,
            starts,
            counts,
            step_ms: r.step_ms,
            drawn_at_ms: step_ms,
        };
        for (i, values) in r.take() {
            let i = i as usize;
            let lo: &[u8] = match i.checked_sub(1) {
                Some(j) => r.starts.get(j).map(Vec::as_slice).unwrap_or_default(),
                None => &[],
            };
            let hi = r.starts.get(i).map(Vec::as_slice);
            let first = sampled.partition_point(|k| k.as_slice() < lo);
            let last = hi.map_or(sampled.len(), |h| {
                sampled.partition_point(|k| k.as_slice() < h)
            });
            let mut shares: Vec<(usize, u64)> = Vec::new();
            for k in sampled.get(first..last).unwrap_or_default() {
                let to = new.range_of(k);
                match shares.last_mut() {
                    Some((t, n)) if *t == to => *n += 1,
                    _ => shares.push((to, 1)),
                }
            }
            if shares.is_empty() {
                shares.push((new.range_of(lo), 1));
            }
            let weight: u64 = shares.iter().map(|(_, n)| n).sum();
            for (m, v) in values.iter().enumerate() {
                let mut left = *v;
                for (k, (to, n)) in shares.iter().enumerate() {
                    let part = if k + 1 == shares.len() {
                        left
                    } else {
                        v * n / weight
                    };
                    left -= part.min(left);
                    if let Some(c) = new.counts.get(to * METRICS + m) {
                        c.fetch_add(part, Relaxed);
                    }
                }
            }
        }
        *r = new;
    }
}

/// Whether the `n`th request of a table is a point where it redraws its ranges.
fn is_first_ranges_point(n: u64) -> bool {
    let mut p = FIRST_RANGES_EVENTS;
    while p <= SAMPLE_KEYS as u64 * 4 {
        if n == p {
            return true;
        }
        p *= 4;
    }
    false
}

/// At most `n` of the sorted keys, evenly spaced.
fn spread(keys: Vec<Vec<u8>>, n: usize) -> Vec<Vec<u8>> {
    if keys.len() <= n {
        return keys;
    }
    let len = keys.len();
    let mut out: Vec<Vec<u8>> = (0..n)
        .filter_map(|i| keys.get((i + 1) * len / (n + 1)).cloned())
        .collect();
    out.dedup();
    out
}

impl AccessLog {
    /// An empty log; `enabled` says whether requests are counted by key range.
    pub fn new(enabled: bool) -> Self {
        Self {
            tables: RwLock::default(),
            totals: Totals::default(),
            expired_at: AtomicI64::new(0),
            enabled,
        }
    }

    /// The counters requests of table `table_id` add to, or `None` when counting by
    /// key range is off.
    pub fn counter(&self, engine: &Engine, table_id: u32) -> Option<Arc<TableAccess>> {
        self.enabled.then(|| self.table(engine, table_id))
    }

    /// The counters of table `table_id`, loading its last ranges on first use.
    pub fn table(&self, engine: &Engine, table_id: u32) -> Arc<TableAccess> {
        if let Ok(t) = self.tables.read()
            && let Some(a) = t.get(&table_id)
        {
            return Arc::clone(a);
        }
        let Ok(mut t) = self.tables.write() else {
            return Arc::new(TableAccess::new(table_id, 0, Vec::new(), 0));
        };
        let now_ms = engine.now_us().div_euclid(1000);
        Arc::clone(t.entry(table_id).or_insert_with(|| {
            let (generation, starts) =
                codec::latest_generation(engine, table_id).unwrap_or_default();
            Arc::new(TableAccess::new(
                table_id,
                generation,
                starts,
                now_ms - now_ms.rem_euclid(STEP_MS),
            ))
        }))
    }

    fn all(&self) -> Vec<Arc<TableAccess>> {
        self.tables
            .read()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }
}

impl Engine {
    /// Engine-wide read and write counters since open.
    pub fn totals(&self) -> &Totals {
        &self.inner.access.totals
    }

    /// Closes the step of every table whose minute has passed: persists its counters,
    /// redraws ranges that are due; once a minute, deletes every table's steps past
    /// [`RETENTION_MS`] and range generations past [`GENERATIONS_KEPT`]. `force`
    /// persists the current step too (at shutdown), without closing it. A table that
    /// fails does not stop the others; the first failure is returned.
    pub fn roll_access(&self, force: bool) -> Result<()> {
        let now_ms = self.now_us().div_euclid(1000);
        let step = now_ms - now_ms.rem_euclid(STEP_MS);
        let mut first = Ok(());
        for t in self.inner.access.all() {
            if let Err(e) = self.roll_table(&t, step, force)
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        if self.inner.access.expired_at.swap(step, Relaxed) != step
            && let Err(e) = self.expire_access(step)
            && first.is_ok()
        {
            first = Err(e);
        }
        first
    }

    /// Deletes the steps and old range generations of every table with history.
    fn expire_access(&self, step: i64) -> Result<()> {
        let mut ids = codec::tables_with_history(self)?;
        ids.extend(self.inner.access.all().iter().map(|t| t.table_id));
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            codec::expire(self, id, step - RETENTION_MS)?;
            codec::expire_generations(self, id, GENERATIONS_KEPT)?;
        }
        Ok(())
    }

    fn roll_table(&self, t: &TableAccess, step: i64, force: bool) -> Result<()> {
        let poisoned = || Error::Storage("access counters lock poisoned".into());
        let (closed_step, counts, generation, starts, redraw) = {
            let mut r = t.state.write().map_err(|_| poisoned())?;
            if r.step_ms == step && !force {
                return Ok(());
            }
            let closed_step = r.step_ms;
            let counts = r.take();
            r.step_ms = step;
            let starts = (!r.persisted).then(|| r.starts.clone());
            let redraw = step - r.drawn_at_ms >= REDRAW_EVERY_STEPS * STEP_MS;
            (closed_step, counts, r.generation, starts, redraw)
        };
        if let Some(starts) = starts {
            codec::put_generation(self, t.table_id, generation, &starts)?;
            let mut r = t.state.write().map_err(|_| poisoned())?;
            if r.generation == generation {
                r.persisted = true;
            }
        }
        if !counts.is_empty() {
            codec::add_step(self, t.table_id, closed_step, generation, &counts)?;
        }
        if redraw {
            t.redraw(step);
        }
        Ok(())
    }
}

/// What Key Visualizer keeps for one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessFootprint {
    /// Key ranges in use.
    pub ranges: usize,
    /// Closed steps stored.
    pub steps: usize,
    /// Bytes of the stored steps and range generations (keys and values, before the
    /// storage engine's compression).
    pub stored_bytes: u64,
    /// Bytes held in memory: the current step's counters, the range starts, the key
    /// sample.
    pub memory_bytes: u64,
}

impl Engine {
    /// What Key Visualizer keeps for table `instance`/`table`.
    pub fn access_footprint(&self, instance: &str, table: &str) -> Result<AccessFootprint> {
        let meta = self.table(instance, table)?;
        let t = self.inner.access.table(self, meta.id);
        let vec_bytes = |v: &[Vec<u8>]| {
            v.iter()
                .map(|k| (k.capacity() + std::mem::size_of::<Vec<u8>>()) as u64)
                .sum::<u64>()
        };
        let (ranges, mut memory_bytes) = {
            let r = t
                .state
                .read()
                .map_err(|_| Error::Storage("access counters lock poisoned".into()))?;
            let counters = (r.counts.len() * std::mem::size_of::<AtomicU64>()) as u64;
            (r.starts.len() + 1, counters + vec_bytes(&r.starts))
        };
        if let Ok(s) = t.sample.lock() {
            memory_bytes += vec_bytes(&s);
        }
        let (steps, stored_bytes) = codec::stored(self, meta.id)?;
        Ok(AccessFootprint {
            ranges,
            steps,
            stored_bytes,
            memory_bytes,
        })
    }
}
