//! Key Visualizer's matrix: one metric of one table by key range and step.
//!
//! The rows are the table's current ranges within the requested keys (merged evenly
//! down to the requested number); each step's counters, whatever generation of
//! ranges they were counted in, go to the row holding their range's start (clamped to
//! the requested keys). The step being counted is included, so activity shows at once.

use super::{AccessMetric, METRICS, STEP_MS, codec};
use crate::db::Engine;
use crate::error::{Error, Result};

/// Most columns a matrix has: past it, consecutive steps are summed into one column.
pub const MAX_COLUMNS: usize = 1440;
/// Longest window drawn: the counters' retention and a step.
pub const MAX_WINDOW_MS: i64 = super::RETENTION_MS + STEP_MS;
/// Most rows a matrix has.
pub const MAX_ROWS: usize = super::MAX_RANGES;

/// What to draw.
#[derive(Debug, Clone)]
pub struct HeatmapRequest {
    /// The metric.
    pub metric: AccessMetric,
    /// First and last millisecond of the window.
    pub from_ms: i64,
    /// See `from_ms`.
    pub to_ms: i64,
    /// First row key drawn (empty: the table's start).
    pub lo: Vec<u8>,
    /// Key after the last one drawn (empty: the table's end).
    pub hi: Vec<u8>,
    /// Most rows (key ranges), at most [`MAX_ROWS`].
    pub rows: usize,
}

/// The matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heatmap {
    /// Milliseconds each column covers.
    pub column_ms: i64,
    /// Start of each column (ms since the epoch).
    pub times: Vec<i64>,
    /// `[start, end)` of each row; an empty end is the table's end.
    pub ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// `values[row][column]`.
    pub values: Vec<Vec<u64>>,
    /// Largest value.
    pub max: u64,
    /// Sum of all values.
    pub total: u64,
}

impl Engine {
    /// One metric of table `instance`/`table` by key range and step ([`crate::access`]).
    pub fn heatmap(&self, instance: &str, table: &str, req: &HeatmapRequest) -> Result<Heatmap> {
        if req.from_ms < 0 || req.to_ms < req.from_ms {
            return Err(Error::Invalid(format!(
                "the window must start at or after 0 and end at or after its start, not {}..{}",
                req.from_ms, req.to_ms
            )));
        }
        if req.to_ms - req.from_ms > MAX_WINDOW_MS {
            return Err(Error::Invalid(format!(
                "the window spans {} ms; at most {MAX_WINDOW_MS} ms (the counters' retention) can be drawn",
                req.to_ms - req.from_ms
            )));
        }
        if req.rows == 0 || req.rows > MAX_ROWS {
            return Err(Error::Invalid(format!(
                "rows must be between 1 and {MAX_ROWS}, not {}",
                req.rows
            )));
        }
        if !req.hi.is_empty() && req.hi <= req.lo {
            return Err(Error::Invalid("the key range is empty (hi ≤ lo)".into()));
        }
        let meta = self.table(instance, table)?;
        let access = self.inner.access.table(self, meta.id);
        let first = req.from_ms - req.from_ms.rem_euclid(STEP_MS);
        let last = req.to_ms - req.to_ms.rem_euclid(STEP_MS);
        let steps = ((last - first) / STEP_MS + 1) as usize;
        let per_column = steps.div_ceil(MAX_COLUMNS).max(1);
        let column_ms = STEP_MS * per_column as i64;
        let columns = steps.div_ceil(per_column);
        let times: Vec<i64> = (0..columns).map(|c| first + c as i64 * column_ms).collect();

        let (live_generation, live_starts, live_step, live_counts) = {
            let r = access
                .state
                .read()
                .map_err(|_| Error::Storage("access counters lock poisoned".into()))?;
            (r.generation, r.starts.clone(), r.step_ms, r.peek())
        };
        let bounds = rows_within(&live_starts, &req.lo, &req.hi, req.rows);
        let mut values = vec![vec![0u64; columns]; bounds.len()];
        let m = req.metric.index();
        let mut add = |step_ms: i64, starts: &[Vec<u8>], counts: &[(u32, [u64; METRICS])]| {
            if step_ms < first || step_ms > last {
                return;
            }
            let column = ((step_ms - first) / column_ms) as usize;
            for (range, v) in counts {
                let value = v[m];
                if value == 0 {
                    continue;
                }
                if let Some(row) = row_of(starts, *range as usize, &req.lo, &req.hi, &bounds)
                    && let Some(cell) = values.get_mut(row).and_then(|r| r.get_mut(column))
                {
                    *cell = cell.saturating_add(value);
                }
            }
        };
        let mut generations: Vec<(u32, Vec<Vec<u8>>)> = vec![(live_generation, live_starts)];
        for step in codec::steps(self, meta.id, first, last)? {
            if !generations.iter().any(|(g, _)| *g == step.generation) {
                generations.push((
                    step.generation,
                    codec::generation(self, meta.id, step.generation)?,
                ));
            }
            if let Some((_, starts)) = generations.iter().find(|(g, _)| *g == step.generation) {
                add(step.step_ms, starts, &step.counts);
            }
        }
        if live_step != 0
            && let Some((_, starts)) = generations.first()
        {
            add(live_step, starts, &live_counts);
        }
        let ranges = bounds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let end = bounds.get(i + 1).cloned().unwrap_or_else(|| req.hi.clone());
                (s.clone(), end)
            })
            .collect();
        let max = values.iter().flatten().copied().max().unwrap_or(0);
        let total = values
            .iter()
            .flatten()
            .fold(0u64, |sum, v| sum.saturating_add(*v));
        Ok(Heatmap {
            column_ms,
            times,
            ranges,
            values,
            max,
            total,
        })
    }
}

/// Start keys of the drawn rows: `lo`, then the range starts inside `(lo, hi)`,
/// evenly thinned to at most `rows`.
fn rows_within(starts: &[Vec<u8>], lo: &[u8], hi: &[u8], rows: usize) -> Vec<Vec<u8>> {
    let inside: Vec<&Vec<u8>> = starts
        .iter()
        .filter(|s| s.as_slice() > lo && (hi.is_empty() || s.as_slice() < hi))
        .collect();
    let mut out = vec![lo.to_vec()];
    let keep = rows - 1;
    if inside.len() <= keep {
        out.extend(inside.into_iter().cloned());
    } else {
        let n = inside.len();
        out.extend((0..keep).filter_map(|i| inside.get(i * n / keep).map(|s| (*s).clone())));
        out.dedup();
    }
    out
}

/// The drawn row holding range `range` of a generation with `starts`, or `None` when
/// the range lies outside `[lo, hi)`.
fn row_of(
    starts: &[Vec<u8>],
    range: usize,
    lo: &[u8],
    hi: &[u8],
    rows: &[Vec<u8>],
) -> Option<usize> {
    let start: &[u8] = match range.checked_sub(1) {
        Some(i) => starts.get(i)?,
        None => &[],
    };
    let end: Option<&[u8]> = starts.get(range).map(Vec::as_slice);
    if end.is_some_and(|e| e <= lo) || (!hi.is_empty() && start >= hi) {
        return None;
    }
    let key = start.max(lo);
    Some(
        rows.partition_point(|r| r.as_slice() <= key)
            .saturating_sub(1),
    )
}
