//! Rules on row keys, over the sampled rows.

use almanac_engine::Row;

use super::skew::WriteSkew;
use super::{BIGTABLE_GUIDE, Finding, Severity, percent};
use crate::keys::display;

/// Share of sampled keys (%) that must show a pattern for a key rule to fire.
const MOST_KEYS_PERCENT: usize = 50;
/// Share of sampled keys (%) with raw bytes past which `raw-bytes-key` fires.
const RAW_KEYS_PERCENT: usize = 10;
/// Average sampled key length past which `long-key` fires (keys may be up to 4 KiB).
const LONG_KEY_BYTES: usize = 1024;
/// Fewest sampled rows a key rule judges.
const MIN_KEYS: usize = 20;
/// Bytes that separate the segments of a row key.
const DELIMITERS: &[u8] = b"#:/|_-.,;";
/// Epoch seconds, milliseconds, microseconds and nanoseconds of 2000-01-01 and
/// 2100-01-01: a leading number in these ranges reads as a timestamp.
const EPOCH_RANGES: [(u64, u64); 4] = [
    (946_684_800, 4_102_444_800),
    (946_684_800_000, 4_102_444_800_000),
    (946_684_800_000_000, 4_102_444_800_000_000),
    (946_684_800_000_000_000, 4_102_444_800_000_000_000),
];

/// The key's first segment, up to the first delimiter.
pub fn leading_segment(key: &[u8]) -> &[u8] {
    let end = key
        .iter()
        .position(|b| DELIMITERS.contains(b))
        .unwrap_or(key.len());
    &key[..end]
}

/// Whether the key begins with a timestamp: an epoch number in seconds to
/// nanoseconds (2000–2100), or an ISO date (`2026-11-27…`, `20261127…`).
pub fn starts_with_timestamp(key: &[u8]) -> bool {
    let seg = leading_segment(key);
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if digits(seg)
        && let Some(n) = std::str::from_utf8(seg)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        && EPOCH_RANGES.iter().any(|(lo, hi)| (*lo..*hi).contains(&n))
    {
        return true;
    }
    let iso = key.len() >= 10
        && digits(&key[..4])
        && key[4] == b'-'
        && digits(&key[5..7])
        && key[7] == b'-'
        && digits(&key[8..10]);
    let compact = seg.len() >= 8
        && digits(&seg[..8])
        && (b"19".as_slice() == &seg[..2] || b"20".as_slice() == &seg[..2])
        && (b"01".as_slice()..=b"12".as_slice()).contains(&&seg[4..6])
        && (seg.len() == 8 || seg.len() == 12 || seg.len() == 14);
    iso || compact
}

/// Whether the segment looks like a hash: 32, 40 or 64 hex digits (MD5, SHA-1,
/// SHA-256), or 16+ hex digits with both digits and letters.
pub fn looks_hashed(seg: &[u8]) -> bool {
    if !seg.iter().all(u8::is_ascii_hexdigit) {
        return false;
    }
    matches!(seg.len(), 32 | 40 | 64)
        || (seg.len() >= 16
            && seg.iter().any(u8::is_ascii_digit)
            && seg.iter().any(u8::is_ascii_alphabetic))
}

/// Checks the sampled keys.
pub fn check(
    rows: &[Row],
    skew: Option<&WriteSkew>,
    findings: &mut Vec<Finding>,
    checked: &mut Vec<&'static str>,
) {
    checked.extend([
        "timestamp-first-key",
        "sequential-key",
        "hashed-key",
        "raw-bytes-key",
        "long-key",
    ]);
    let n = rows.len();
    if n < MIN_KEYS {
        return;
    }
    let keys: Vec<&[u8]> = rows.iter().map(|r| r.key.as_slice()).collect();
    let example = |pred: &dyn Fn(&[u8]) -> bool| {
        keys.iter()
            .find(|k| pred(k))
            .map(|k| display(k))
            .unwrap_or_default()
    };
    let skew_text = skew
        .filter(|s| s.concentrated())
        .map(|s| format!("; {}", s.describe()))
        .unwrap_or_default();

    let stamped = keys.iter().filter(|k| starts_with_timestamp(k)).count();
    if percent(stamped, n) >= MOST_KEYS_PERCENT {
        findings.push(Finding {
            rule: "timestamp-first-key",
            severity: Severity::Warning,
            title: "Row keys begin with a timestamp".into(),
            evidence: format!(
                "{stamped} of {n} sampled row keys begin with a timestamp (e.g. \"{}\"){skew_text}",
                example(&starts_with_timestamp)
            ),
            fix: "Row keys that start with a timestamp push sequential writes onto a single node and create a hotspot. Put a high-cardinality identifier (device, user, host) first and the timestamp last, e.g. machine_4223421#1425330757685; for newest-first reads, reverse the timestamp.".into(),
            guide: BIGTABLE_GUIDE,
        });
    } else {
        let numeric = |k: &[u8]| {
            let s = leading_segment(k);
            !s.is_empty() && s.iter().all(u8::is_ascii_digit)
        };
        let ids = keys.iter().filter(|k| numeric(k)).count();
        if percent(ids, n) >= MOST_KEYS_PERCENT
            && let Some(s) = skew.filter(|s| s.at_the_end())
        {
            findings.push(Finding {
                rule: "sequential-key",
                severity: Severity::Warning,
                title: "Row keys begin with sequential numeric IDs".into(),
                evidence: format!(
                    "{ids} of {n} sampled row keys begin with a number (e.g. \"{}\"); {}",
                    example(&numeric),
                    s.describe()
                ),
                fix: "New IDs are the most active, so sequential IDs push most traffic to a few nodes. Use the reversed ID (or put a well-spread value first) so traffic spreads over the key space.".into(),
                guide: BIGTABLE_GUIDE,
            });
        }
    }

    let hashed = keys
        .iter()
        .filter(|k| looks_hashed(leading_segment(k)))
        .count();
    if percent(hashed, n) >= MOST_KEYS_PERCENT {
        findings.push(Finding {
            rule: "hashed-key",
            severity: Severity::Warning,
            title: "Row keys begin with hashed values".into(),
            evidence: format!(
                "{hashed} of {n} sampled row keys begin with a hex hash (e.g. \"{}\")",
                example(&|k| looks_hashed(leading_segment(k)))
            ),
            fix: "A hashed key gives up Bigtable's sort order: related rows cannot be read as one range, and Key Visualizer cannot tell you which rows are hot. Use human-readable values, generic first and specific last (asia#india#mumbai).".into(),
            guide: BIGTABLE_GUIDE,
        });
    }

    let raw = |k: &[u8]| k.iter().any(|b| !(0x20..=0x7e).contains(b));
    let raw_count = keys.iter().filter(|k| raw(k)).count();
    if percent(raw_count, n) >= RAW_KEYS_PERCENT {
        findings.push(Finding {
            rule: "raw-bytes-key",
            severity: Severity::Info,
            title: "Row keys hold raw bytes".into(),
            evidence: format!(
                "{raw_count} of {n} sampled row keys hold non-printable bytes (e.g. \"{}\")",
                example(&raw)
            ),
            fix: "Raw bytes are fine in values, but in row keys they make reading and troubleshooting hard. Store key parts as readable strings (numbers zero-padded so they sort).".into(),
            guide: BIGTABLE_GUIDE,
        });
    }

    let average = keys.iter().map(|k| k.len()).sum::<usize>() / n;
    if average > LONG_KEY_BYTES {
        findings.push(Finding {
            rule: "long-key",
            severity: Severity::Warning,
            title: "Row keys are long".into(),
            evidence: format!("sampled row keys average {average} bytes (the limit is 4 KiB)"),
            fix: "Long row keys take memory and storage and slow every response. Keep keys short: the identifiers you query by, separated by a delimiter.".into(),
            guide: BIGTABLE_GUIDE,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_ids_and_hashes_are_told_apart() {
        assert!(starts_with_timestamp(b"1764237600#h1"));
        assert!(starts_with_timestamp(b"1764237600123#h1"));
        assert!(starts_with_timestamp(b"2026-11-27T10:00:00Z#h1"));
        assert!(starts_with_timestamp(b"20261127#h1"));
        assert!(!starts_with_timestamp(b"phone#4c410523#20200501"));
        assert!(!starts_with_timestamp(b"000123#x"));
        assert!(!starts_with_timestamp(b"42"));
        assert!(looks_hashed(b"5d41402abc4b2a76b9719d911017c592"));
        assert!(!looks_hashed(b"4c410523"));
        assert!(!looks_hashed(b"phone"));
        assert_eq!(leading_segment(b"a#b"), b"a");
    }
}
