//! Row keys of time-series tables, the same for every pattern (as Google's "Schema
//! design best practices" for Bigtable advise: what you query by first, never a
//! leading timestamp, fixed-width numbers):
//!
//! ```text
//! row key   = series time
//! series    = measure ('#' dim_i)* '@'
//! measure   = the record's measure name, escaped
//! dim_i     = the value of the table's i-th dimension (first-seen order), escaped;
//!             empty when the record lacks it; trailing empty dimensions are dropped
//! time      = bucketed patterns: bucket start in seconds since the epoch, 10 digits
//!             single-timestamp patterns: time in nanoseconds since the epoch, 19 digits
//!             reversed tables: 9999999999 - seconds, or i64::MAX - nanoseconds (same width)
//! escaping  = '\', '#' and '@' inside names and values are preceded by '\'
//! ```
//!
//! Example (weather balloons, bucket of one hour, dimensions location then balloon):
//! `pressure#us-west2#3698@1614945600`. Because an escaped component never starts with
//! '@', the rows of one series are exactly the keys starting with its series prefix
//! (`pressure#us-west2#3698@`), a contiguous range; and `measure_name = 'pressure'` is
//! the two ranges `pressure#…` and `pressure@…` (the second holds the series without
//! dimensions). Adding `location = 'us-west2'` narrows them to `pressure#us-west2#…`
//! and `pressure#us-west2@…` ([`selection_prefixes`]).
//!
//! Byte layout: docs/format.md#time-series-row-keys

use crate::error::{Error, Result};

/// Separator between key components.
pub const SEP: u8 = b'#';
/// Separator between the series and the time.
pub const TIME_SEP: u8 = b'@';
/// Escape byte inside components.
pub const ESC: u8 = b'\\';
/// Digits of a bucket start in seconds.
pub const BUCKET_DIGITS: usize = 10;
/// Largest bucket start representable in [`BUCKET_DIGITS`] digits.
pub const MAX_BUCKET_SECS_VALUE: i64 = 9_999_999_999;
/// Digits of a time in nanoseconds.
pub const TIME_DIGITS: usize = 19;

/// Appends `component`, escaped, to `out`.
pub fn push_escaped(out: &mut Vec<u8>, component: &[u8]) {
    for &b in component {
        if b == SEP || b == TIME_SEP || b == ESC {
            out.push(ESC);
        }
        out.push(b);
    }
}

/// The series prefix of a point: measure and dimension values, then '@'.
/// `dims` holds, per table dimension index, the value or `None`.
pub fn series_prefix(measure: &str, dims: &[Option<&str>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(measure.len() + 16 * dims.len() + 24);
    push_escaped(&mut out, measure.as_bytes());
    let used = dims.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    for d in &dims[..used] {
        out.push(SEP);
        push_escaped(&mut out, d.unwrap_or("").as_bytes());
    }
    out.push(TIME_SEP);
    out
}

/// The key prefixes holding the series of a measure whose first dimensions have the
/// values `leading` (in table dimension order): series with more dimensions, and the
/// series with exactly these. Each prefix is a contiguous key range.
pub fn selection_prefixes(measure: &str, leading: &[&str]) -> [Vec<u8>; 2] {
    let mut base = Vec::new();
    push_escaped(&mut base, measure.as_bytes());
    for d in leading {
        base.push(SEP);
        push_escaped(&mut base, d.as_bytes());
    }
    let mut more = base.clone();
    more.push(SEP);
    base.push(TIME_SEP);
    [more, base]
}

/// The time component for a bucket starting at `secs`.
pub fn bucket_component(secs: i64, reversed: bool) -> String {
    let mut out = Vec::with_capacity(BUCKET_DIGITS);
    push_bucket_component(&mut out, secs, reversed);
    String::from_utf8_lossy(&out).into_owned()
}

/// The time component for a point at `ns`.
pub fn time_component(ns: i64, reversed: bool) -> String {
    let mut out = Vec::with_capacity(TIME_DIGITS);
    push_time_component(&mut out, ns, reversed);
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends [`bucket_component`] to a key.
pub fn push_bucket_component(out: &mut Vec<u8>, secs: i64, reversed: bool) {
    let v = if reversed {
        MAX_BUCKET_SECS_VALUE - secs
    } else {
        secs
    };
    push_padded(out, v, BUCKET_DIGITS);
}

/// Appends [`time_component`] to a key.
pub fn push_time_component(out: &mut Vec<u8>, ns: i64, reversed: bool) {
    let v = if reversed { i64::MAX - ns } else { ns };
    push_padded(out, v, TIME_DIGITS);
}

/// Appends `v` in decimal, zero-padded to `width` digits, as `format!("{v:0width$}")`
/// does (the write path's keys; a negative `v`, which no valid key holds, takes the
/// formatter).
fn push_padded(out: &mut Vec<u8>, v: i64, width: usize) {
    let Ok(mut n) = u64::try_from(v) else {
        out.extend_from_slice(format!("{v:0width$}").as_bytes());
        return;
    };
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    out.resize(out.len() + width.saturating_sub(len), b'0');
    out.extend_from_slice(&digits[i..]);
}

/// A row key split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    /// Measure name.
    pub measure: String,
    /// Dimension values by table dimension index (`None` = absent).
    pub dims: Vec<Option<String>>,
    /// Length of the series prefix in the key (measure and dimensions with separators).
    pub series_len: usize,
    /// The time component, decoded: seconds (bucketed) or nanoseconds.
    pub time: i64,
}

/// Splits a row key written by this module. `bucketed` says which time width to expect.
pub fn decode(key: &[u8], bucketed: bool, reversed: bool) -> Result<KeyParts> {
    let bad =
        |why: &str| Error::Corrupt(format!("row key {:?}: {why}", String::from_utf8_lossy(key)));
    let mut comps: Vec<Vec<u8>> = vec![Vec::new()];
    let mut series_len = None;
    let mut i = 0;
    while i < key.len() && series_len.is_none() {
        match key[i] {
            ESC => {
                let b = *key.get(i + 1).ok_or_else(|| bad("dangling escape"))?;
                comps.last_mut().ok_or_else(|| bad("empty"))?.push(b);
                i += 1;
            }
            SEP => comps.push(Vec::new()),
            TIME_SEP => series_len = Some(i + 1),
            b => comps.last_mut().ok_or_else(|| bad("empty"))?.push(b),
        }
        i += 1;
    }
    let series_len = series_len.ok_or_else(|| bad("no time component"))?;
    let time = decode_time(key, &key[series_len..], bucketed, reversed)?;
    let text = |c: Vec<u8>| String::from_utf8(c).map_err(|_| bad("component is not UTF-8"));
    let mut comps = comps.into_iter();
    let measure = text(comps.next().ok_or_else(|| bad("no measure"))?)?;
    let dims = comps
        .map(|c| {
            if c.is_empty() {
                Ok(None)
            } else {
                text(c).map(Some)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(KeyParts {
        measure,
        dims,
        series_len,
        time,
    })
}

/// Where the series prefix of row key `key` ends (just past its `@`): what [`decode`]
/// finds first, without copying the measure name and dimensions out. For readers that
/// need only the series prefix and, with [`decode_time`], the time.
pub fn series_len(key: &[u8]) -> Result<usize> {
    let mut i = 0;
    while let Some(&b) = key.get(i) {
        match b {
            ESC if i + 1 < key.len() => i += 2,
            ESC => break,
            TIME_SEP => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(Error::Corrupt(format!(
        "row key {:?}: no time component",
        String::from_utf8_lossy(key)
    )))
}

/// The series prefix's length and the time of row key `key`: [`decode`]'s
/// `series_len` and `time` alone.
pub fn decode_series_time(key: &[u8], bucketed: bool, reversed: bool) -> Result<(usize, i64)> {
    let len = series_len(key)?;
    Ok((len, decode_time(key, &key[len..], bucketed, reversed)?))
}

/// The time component `time_text` of row key `key` (named in errors), decoded:
/// seconds (`bucketed`) or nanoseconds.
pub fn decode_time(key: &[u8], time_text: &[u8], bucketed: bool, reversed: bool) -> Result<i64> {
    let bad =
        |why: &str| Error::Corrupt(format!("row key {:?}: {why}", String::from_utf8_lossy(key)));
    let digits = if bucketed { BUCKET_DIGITS } else { TIME_DIGITS };
    if time_text.len() != digits || !time_text.iter().all(u8::is_ascii_digit) {
        return Err(bad("time component is not fixed-width digits"));
    }
    let raw: i64 = std::str::from_utf8(time_text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("time component out of range"))?;
    Ok(match (reversed, bucketed) {
        (false, _) => raw,
        (true, true) => MAX_BUCKET_SECS_VALUE - raw,
        (true, false) => i64::MAX - raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_and_time_alone_match_a_whole_decode() -> Result<()> {
        let mut key = series_prefix("a#b", &[None, Some("x\\y@"), None]);
        key.extend_from_slice(time_component(5, true).as_bytes());
        let whole = decode(&key, false, true)?;
        assert_eq!(
            decode_series_time(&key, false, true)?,
            (whole.series_len, whole.time)
        );
        assert_eq!(whole.series_len, b"a\\#b##x\\\\y\\@@".len());
        for bad in [&b"m#x"[..], b"m\\", b"", b"m\\@"] {
            assert!(series_len(bad).is_err(), "{bad:?}");
        }
        Ok(())
    }

    #[test]
    fn golden_keys() {
        let p = series_prefix("pressure", &[Some("us-west2"), Some("3698")]);
        let mut key = p.clone();
        key.extend_from_slice(bucket_component(1_614_945_600, false).as_bytes());
        assert_eq!(key, b"pressure#us-west2#3698@1614945600");
        let p = series_prefix("a#b", &[None, Some("x\\y@"), None]);
        assert_eq!(p, b"a\\#b##x\\\\y\\@@");
        let mut key = p;
        key.extend_from_slice(time_component(5, true).as_bytes());
        assert_eq!(key, b"a\\#b##x\\\\y\\@@9223372036854775802");
        assert_eq!(series_prefix("m", &[None, None]), b"m@");
        assert_eq!(bucket_component(0, true), "9999999999");
        for v in [
            0,
            1,
            9,
            10,
            999_999_999,
            1_614_945_600,
            MAX_BUCKET_SECS_VALUE,
            12_345_678_901,
            1_700_000_000_123_456_789,
            i64::MAX,
            -1,
            -1_234,
            i64::MIN,
        ] {
            // Reversal of a negative time would overflow; no valid key has one.
            for reversed in [false, true].into_iter().filter(|r| !r || v >= 0) {
                let mut t = b"k@".to_vec();
                push_time_component(&mut t, v, reversed);
                let tv = if reversed { i64::MAX - v } else { v };
                let want = format!("k@{tv:0TIME_DIGITS$}");
                assert_eq!(String::from_utf8_lossy(&t), want, "time {v} {reversed}");
                assert_eq!(format!("k@{}", time_component(v, reversed)), want);
                let mut b = b"k@".to_vec();
                push_bucket_component(&mut b, v, reversed);
                let bv = if reversed {
                    MAX_BUCKET_SECS_VALUE - v
                } else {
                    v
                };
                let want = format!("k@{bv:0BUCKET_DIGITS$}");
                assert_eq!(String::from_utf8_lossy(&b), want, "bucket {v} {reversed}");
                assert_eq!(format!("k@{}", bucket_component(v, reversed)), want);
            }
        }
        assert_eq!(time_component(1, false), "0000000000000000001");
    }

    #[test]
    fn decode_round_trips() -> Result<()> {
        for reversed in [false, true] {
            let prefix = series_prefix("m#1", &[None, Some("a\\b#c@"), Some("d")]);
            let mut key = prefix.clone();
            key.extend_from_slice(time_component(1_700_000_000_123_456_789, reversed).as_bytes());
            let parts = decode(&key, false, reversed)?;
            assert_eq!(parts.measure, "m#1");
            assert_eq!(
                parts.dims,
                vec![None, Some("a\\b#c@".into()), Some("d".into())]
            );
            assert_eq!(parts.time, 1_700_000_000_123_456_789);
            assert_eq!(&key[..parts.series_len], &prefix[..]);
            let mut key = prefix.clone();
            key.extend_from_slice(bucket_component(1_700_000_000, reversed).as_bytes());
            assert_eq!(decode(&key, true, reversed)?.time, 1_700_000_000);
        }
        assert!(decode(b"m@123", false, false).is_err());
        assert!(decode(b"m@12x4567890", true, false).is_err());
        assert!(decode(b"nosep", true, false).is_err());
        assert!(decode(b"m\\", true, false).is_err());
        Ok(())
    }

    #[test]
    fn a_series_is_one_contiguous_range() {
        // Series with one more dimension whose value starts with a digit must not
        // interleave with the rows of the shorter series.
        let short = series_prefix("cpu", &[Some("h1")]);
        let long = series_prefix("cpu", &[Some("h1"), Some("1eu")]);
        let mut a = short.clone();
        a.extend_from_slice(bucket_component(1, false).as_bytes());
        let mut b = long.clone();
        b.extend_from_slice(bucket_component(1, false).as_bytes());
        assert!(a.starts_with(&short) && !b.starts_with(&short));
        let [more, exact] = selection_prefixes("cpu", &["h1"]);
        assert!(a.starts_with(&exact) && b.starts_with(&more));
        let [more, exact] = selection_prefixes("cpu", &[]);
        assert!(a.starts_with(&more) && !a.starts_with(&exact));
        assert!(series_prefix("cpu", &[]).starts_with(&exact));
        assert!(!series_prefix("cpux", &[]).starts_with(&exact));
        assert!(!series_prefix("cpux", &[Some("a")]).starts_with(&more));
    }
}
