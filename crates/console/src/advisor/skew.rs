//! Write skew over the last hour, from Key Visualizer's counters.

use almanac_engine::Engine;
use almanac_engine::access::{AccessMetric, HeatmapRequest, MAX_RANGES};

use super::{BIGTABLE_GUIDE, Finding, Severity, percent};
use crate::keys::display;

/// Fewest writes in the hour for skew to be judged.
const MIN_WRITES: u64 = 1000;
/// Fewest key ranges for skew to be judged.
const MIN_RANGES: usize = 8;
/// Writes are concentrated when half of them went to at most this share (%) of the
/// ranges.
const HOT_RANGES_PERCENT: usize = 10;
/// The hot ranges are "at the end" when they all lie in this last share (%) of ranges.
const END_PERCENT: usize = 10;
/// The window judged.
const WINDOW_MS: i64 = 3600 * 1000;

/// Writes per key range over the last hour, in key order.
#[derive(Debug, Clone)]
pub struct WriteSkew {
    ranges: Vec<(Vec<u8>, Vec<u8>, u64)>,
    total: u64,
    /// Indices of the fewest ranges holding half the writes.
    hot: Vec<usize>,
}

impl WriteSkew {
    /// The table's skew, or `None` with too few writes or ranges to judge.
    pub fn last_hour(engine: &Engine, instance: &str, table: &str) -> crate::Result<Option<Self>> {
        let now_ms = engine.now_us() / 1000;
        let h = engine.heatmap(
            instance,
            table,
            &HeatmapRequest {
                metric: AccessMetric::Writes,
                from_ms: now_ms - WINDOW_MS,
                to_ms: now_ms,
                lo: Vec::new(),
                hi: Vec::new(),
                rows: MAX_RANGES,
            },
        )?;
        let ranges: Vec<(Vec<u8>, Vec<u8>, u64)> = h
            .ranges
            .into_iter()
            .zip(&h.values)
            .map(|((s, e), v)| (s, e, v.iter().sum()))
            .collect();
        if h.total < MIN_WRITES || ranges.len() < MIN_RANGES {
            return Ok(None);
        }
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ranges[i].2));
        let mut hot = Vec::new();
        let mut sum = 0;
        for i in order {
            if sum * 2 >= h.total {
                break;
            }
            sum += ranges[i].2;
            hot.push(i);
        }
        Ok(Some(Self {
            ranges,
            total: h.total,
            hot,
        }))
    }

    /// Whether half the writes went to a small share of the ranges.
    pub fn concentrated(&self) -> bool {
        percent(self.hot.len(), self.ranges.len()) <= HOT_RANGES_PERCENT
    }

    /// Whether the writes are concentrated in the last ranges of the key space.
    pub fn at_the_end(&self) -> bool {
        let first_end = self.ranges.len() - self.ranges.len() * END_PERCENT / 100 - 1;
        self.concentrated() && self.hot.iter().all(|&i| i >= first_end)
    }

    fn hot_writes(&self) -> u64 {
        self.hot.iter().map(|&i| self.ranges[i].2).sum()
    }

    /// "82% of writes in the last hour went to 1 of 40 key ranges (keys "a" to "b")".
    pub fn describe(&self) -> String {
        let lo = self.hot.iter().min().copied().unwrap_or(0);
        let hi = self.hot.iter().max().copied().unwrap_or(0);
        let end = &self.ranges[hi].1;
        format!(
            "{}% of writes in the last hour went to {} of {} key ranges (keys \"{}\" to {})",
            percent(self.hot_writes() as usize, self.total as usize),
            self.hot.len(),
            self.ranges.len(),
            display(&self.ranges[lo].0),
            if end.is_empty() {
                "the end of the table".into()
            } else {
                format!("\"{}\"", display(end))
            }
        )
    }
}

/// `write-hotspot`: writes concentrated in few ranges, when no key rule already
/// explains them.
pub fn check(
    skew: Option<&WriteSkew>,
    earlier: &[Finding],
    findings: &mut Vec<Finding>,
    checked: &mut Vec<&'static str>,
) {
    checked.push("write-hotspot");
    let explained = earlier
        .iter()
        .any(|f| matches!(f.rule, "timestamp-first-key" | "sequential-key"));
    let Some(s) = skew.filter(|s| s.concentrated()) else {
        return;
    };
    if explained {
        return;
    }
    findings.push(Finding {
        rule: "write-hotspot",
        severity: Severity::Warning,
        title: "Writes concentrate on a few key ranges".into(),
        evidence: s.describe(),
        fix: "A few rows taking most writes become a hotspot on one node. Spread writes over the key space (a well-distributed identifier first); for a value updated again and again, keep it in memory and write a new row periodically rather than rewriting one row.".into(),
        guide: BIGTABLE_GUIDE,
    });
}
