//! The text of Timestream's scalar values (`Datum.ScalarValue` is always a string), as
//! the service writes them:
//!
//! | type | text |
//! |---|---|
//! | `TIMESTAMP` | `2020-08-08 01:00:00.000000000` (UTC, always nine fraction digits) |
//! | `DATE` | `2020-08-08` |
//! | `TIME` | `01:00:00.000000000` |
//! | `INTERVAL_DAY_TO_SECOND` | `1 21:00:00.000000000` (days, then the time; `-` first when negative) |
//! | `INTERVAL_YEAR_TO_MONTH` | `2-7` (years-months) |
//! | `DOUBLE` | Java's `Double.toString`, as Timestream (on Trino) prints: `1.0`, `0.5`, `1.0E7`, `1.0E-4`, `NaN`, `Infinity` |
//! | `BIGINT`, `INTEGER` | decimal |
//! | `BOOLEAN` | `true` / `false` |
//!
//! Almanac adds bytes (Bigtable keys and values): `VARCHAR` holding standard base64
//! with padding, the encoding of bytes in Bigtable's (and proto3's) JSON.

use std::fmt::Write as _;

use base64::Engine as _;

/// Nanoseconds per second.
const SECOND_NS: i128 = 1_000_000_000;
/// Nanoseconds per day.
const DAY_NS: i128 = 86_400 * SECOND_NS;
/// Java prints plain decimals for magnitudes in `[PLAIN_MIN, PLAIN_MAX)`, else
/// scientific notation.
const PLAIN_MIN: f64 = 1e-3;
/// See [`PLAIN_MIN`].
const PLAIN_MAX: f64 = 1e7;

/// A double as Java's `Double.toString` (shortest digits that read back the same).
#[cfg(test)]
pub fn double(x: f64) -> String {
    let mut out = String::new();
    push_double(&mut out, x);
    out
}

/// Appends [`double`]'s text, without a string per value in the common range.
pub fn push_double(out: &mut String, x: f64) {
    if x.is_finite() && x != 0.0 && (PLAIN_MIN..PLAIN_MAX).contains(&x.abs()) {
        // `ryu` prints the shortest round-trip digits, as `{}` does, and in this range
        // plain decimals with `.0` on whole numbers: Java's text exactly.
        out.push_str(ryu::Buffer::new().format_finite(x));
        return;
    }
    out.push_str(&java_float(x, || format!("{x}"), || format!("{x:e}")));
}

/// A float as Java's `Float.toString`, digits shortest for `f32`.
pub fn float(x: f32) -> String {
    java_float(f64::from(x), || format!("{x}"), || format!("{x:e}"))
}

fn java_float(x: f64, plain: impl Fn() -> String, scientific: impl Fn() -> String) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    if (PLAIN_MIN..PLAIN_MAX).contains(&x.abs()) {
        let mut s = plain();
        if !s.contains('.') {
            s.push_str(".0");
        }
        return s;
    }
    let s = scientific();
    let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

/// `YYYY-MM-DD` of a day count since the epoch.
pub fn date(days: i64) -> String {
    let mut out = String::with_capacity(10);
    push_date(&mut out, days);
    out
}

fn push_date(out: &mut String, days: i64) {
    let (y, m, d) = almanac_engine::calendar::civil_from_days(days);
    match u64::try_from(y) {
        Ok(y) if y <= 9999 => push_digits(out, y, 4),
        _ => {
            let _ = write!(out, "{y:04}");
        }
    }
    out.push('-');
    push_digits(out, m.unsigned_abs(), 2);
    out.push('-');
    push_digits(out, d.unsigned_abs(), 2);
}

/// Appends the last `width` (at most 20) decimal digits of `v`, zero-padded.
fn push_digits(out: &mut String, mut v: u64, width: u32) {
    let mut buf = [b'0'; 20];
    let digits = &mut buf[..(width as usize).min(20)];
    for b in digits.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend(digits.iter().map(|&b| char::from(b)));
}

/// Appends `HH:MM:SS.nnnnnnnnn` of `ns` in `[0, DAY_NS)`.
fn push_time_of_day(out: &mut String, ns: i128) {
    // In [0, DAY_NS): u64 arithmetic, not i128.
    let ns = ns.clamp(0, DAY_NS - 1) as u64;
    let second = SECOND_NS as u64;
    let secs = ns / second;
    push_digits(out, secs / 3600, 2);
    out.push(':');
    push_digits(out, secs / 60 % 60, 2);
    out.push(':');
    push_digits(out, secs % 60, 2);
    out.push('.');
    push_digits(out, ns % second, 9);
}

/// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` of nanoseconds since the epoch (UTC).
#[cfg(test)]
pub fn timestamp(ns: i128) -> String {
    let mut out = String::with_capacity(29);
    push_timestamp(&mut out, ns);
    out
}

/// Appends [`timestamp`]'s text.
pub fn push_timestamp(out: &mut String, ns: i128) {
    if let Ok(ns) = i64::try_from(ns) {
        // Every timestamp of nanoseconds in an i64: i64 arithmetic, not i128.
        let day = DAY_NS as i64;
        push_date(out, ns.div_euclid(day));
        out.push(' ');
        push_time_of_day(out, i128::from(ns.rem_euclid(day)));
        return;
    }
    push_timestamp_wide(out, ns);
}

/// [`push_timestamp`] in i128 arithmetic, for times past an i64 of nanoseconds.
fn push_timestamp_wide(out: &mut String, ns: i128) {
    push_date(out, ns.div_euclid(DAY_NS) as i64);
    out.push(' ');
    push_time_of_day(out, ns.rem_euclid(DAY_NS));
}

/// `HH:MM:SS.nnnnnnnnn` of nanoseconds since midnight.
pub fn time(ns: i128) -> String {
    let mut out = String::with_capacity(18);
    push_time_of_day(&mut out, ns.rem_euclid(DAY_NS));
    out
}

/// `D HH:MM:SS.nnnnnnnnn` of a duration in nanoseconds.
pub fn interval_day_to_second(ns: i128) -> String {
    let mut out = String::with_capacity(24);
    if ns < 0 {
        out.push('-');
    }
    let abs = ns.unsigned_abs() as i128;
    let _ = write!(out, "{} ", abs / DAY_NS);
    push_time_of_day(&mut out, abs % DAY_NS);
    out
}

/// `Y-M` of a month count.
pub fn interval_year_to_month(months: i32) -> String {
    let sign = if months < 0 { "-" } else { "" };
    let abs = months.unsigned_abs();
    format!("{sign}{}-{}", abs / 12, abs % 12)
}

/// Bytes as standard base64 with padding.
pub fn bytes(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Appends `s` as a JSON string literal.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java_does() {
        for (x, want) in [
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (1e7, "1.0E7"),
            (12345678.9, "1.23456789E7"),
            (80.2135278815294, "80.2135278815294"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
            (1.5e300, "1.5E300"),
        ] {
            assert_eq!(double(x), want, "{x:?}");
        }
        assert_eq!(
            float(0.1),
            "0.1",
            "shortest for f32, not 0.10000000149011612"
        );
    }

    #[test]
    fn times_and_dates() {
        assert_eq!(timestamp(0), "1970-01-01 00:00:00.000000000");
        assert_eq!(
            timestamp(1_596_848_400_123_456_789),
            "2020-08-08 01:00:00.123456789"
        );
        assert_eq!(timestamp(-1), "1969-12-31 23:59:59.999999999");
        assert_eq!(date(18_482), "2020-08-08");
        assert_eq!(date(-719_468), "0000-03-01");
        assert_eq!(date(11_016), "2000-02-29");
        assert_eq!(time(3_600 * SECOND_NS + 5), "01:00:00.000000005");
        assert_eq!(
            timestamp(253_402_300_799_999_999_999),
            "9999-12-31 23:59:59.999999999"
        );
        assert_eq!(&timestamp(253_402_300_800 * SECOND_NS)[..6], "10000-");
    }

    /// xorshift64: the next of a reproducible stream of random bits.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn timestamps_in_i64_read_the_same_as_in_i128() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200_000 {
            let state = next(&mut state);
            for ns in [state as i64, (state >> 8) as i64, -((state >> 3) as i64)] {
                let mut wide = String::new();
                push_timestamp_wide(&mut wide, i128::from(ns));
                assert_eq!(timestamp(i128::from(ns)), wide, "{ns}");
            }
        }
    }

    #[test]
    fn doubles_in_the_plain_range_match_the_general_formatting() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            let state = next(&mut state);
            let x = f64::from_bits(state);
            let general = java_float(x, || format!("{x}"), || format!("{x:e}"));
            assert_eq!(double(x), general, "{x:?}");
            let scaled = (state % 10_000_000_000) as f64 / 1000.0;
            let general = java_float(scaled, || format!("{scaled}"), || format!("{scaled:e}"));
            assert_eq!(double(scaled), general, "{scaled:?}");
        }
    }

    #[test]
    fn intervals() {
        assert_eq!(
            interval_day_to_second(DAY_NS + 21 * 3600 * SECOND_NS),
            "1 21:00:00.000000000"
        );
        assert_eq!(
            interval_day_to_second(-SECOND_NS / 2),
            "-0 00:00:00.500000000"
        );
        assert_eq!(interval_year_to_month(31), "2-7");
        assert_eq!(interval_year_to_month(-13), "-1-1");
    }

    #[test]
    fn bytes_and_json_strings() {
        assert_eq!(bytes(b"row#1"), "cm93IzE=");
        let mut s = String::new();
        push_json_string(&mut s, "a\"b\\c\n\u{1}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001é\"");
        let back: String = serde_json::from_str(&s).unwrap_or_default();
        assert_eq!(back, "a\"b\\c\n\u{1}é");
    }
}
