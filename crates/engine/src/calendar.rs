//! Dates and times without a date library: the proleptic Gregorian calendar in UTC
//! (Howard Hinnant's `days_from_civil` / `civil_from_days`), the RFC 3339 texts
//! Almanac prints, and the RFC 3339 form its tools accept. Every caller that turns
//! epoch counts into dates or back comes here.

/// Seconds in a day.
pub const SECS_PER_DAY: i64 = 86_400;
/// Nanoseconds in a second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Days since 1970-01-01 to (year, month, day).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of (year, month, day). Out-of-range days roll over
/// (31 February is 3 March); callers that must refuse them compare the round trip.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A UTC time split into calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilTime {
    /// Year (proleptic Gregorian; 0 is 1 BC).
    pub year: i64,
    /// Month, 1-12.
    pub month: i64,
    /// Day of the month, 1-31.
    pub day: i64,
    /// Hour, 0-23.
    pub hour: i64,
    /// Minute, 0-59.
    pub minute: i64,
    /// Second, 0-59.
    pub second: i64,
    /// Nanoseconds within the second.
    pub nanos: i64,
}

impl CivilTime {
    /// The calendar fields of `ns` nanoseconds since the epoch.
    pub fn from_unix_nanos(ns: i128) -> Self {
        let day_ns = i128::from(SECS_PER_DAY * NANOS_PER_SEC);
        let days = ns.div_euclid(day_ns) as i64;
        let in_day = ns.rem_euclid(day_ns) as i64;
        let (year, month, day) = civil_from_days(days);
        let secs = in_day / NANOS_PER_SEC;
        Self {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            nanos: in_day % NANOS_PER_SEC,
        }
    }

    /// The calendar fields of `secs` seconds since the epoch.
    pub fn from_unix_secs(secs: i64) -> Self {
        Self::from_unix_nanos(i128::from(secs) * i128::from(NANOS_PER_SEC))
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of `ns` nanoseconds since the epoch.
pub fn rfc3339_millis(ns: i64) -> String {
    let t = CivilTime::from_unix_nanos(i128::from(ns));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        t.nanos / 1_000_000
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` of `secs` seconds since the epoch.
pub fn rfc3339_secs(secs: i64) -> String {
    let t = CivilTime::from_unix_secs(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Seconds since the epoch of RFC 3339 text with whole seconds and a `Z` or `±HH:MM`
/// offset (`2024-01-01T00:00:00Z`, `2024-01-01T02:00:00+02:00`; `t` or a space may
/// stand for `T`); `None` for anything else.
pub fn parse_rfc3339_secs(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        s.get(from..to)
            .filter(|x| x.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|x| x.parse().ok())
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let offset = match s.get(19..)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && tz.as_bytes()[3] == b':' => {
            let sign = match tz.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            sign * (num(20, 22)? * 3600 + num(23, 25)? * 60)
        }
        _ => return None,
    };
    Some(
        days_from_civil(year, month, day) * SECS_PER_DAY + hour * 3600 + minute * 60 + second
            - offset,
    )
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]

    use super::*;

    #[test]
    fn days_round_trip_across_eras_and_leap_days() {
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn prints_rfc3339() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_614_945_600_123_000_000),
            "2021-03-05T12:00:00.123Z"
        );
        assert_eq!(rfc3339_millis(-1_000_000), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_secs(1_709_210_096), "2024-02-29T12:34:56Z");
        let t = CivilTime::from_unix_nanos(1_700_000_000_123_456_789);
        assert_eq!(
            (t.hour, t.minute, t.second, t.nanos),
            (22, 13, 20, 123_456_789)
        );
    }

    #[test]
    fn parses_what_it_prints_and_offsets() {
        for secs in [0, 1_451_606_400, 1_709_210_096, -86_401] {
            assert_eq!(parse_rfc3339_secs(&rfc3339_secs(secs)), Some(secs));
        }
        assert_eq!(
            parse_rfc3339_secs("2024-01-01T02:00:00+02:00"),
            parse_rfc3339_secs("2024-01-01T00:00:00Z")
        );
        assert_eq!(
            parse_rfc3339_secs("2016-01-01 00:00:00z"),
            Some(1_451_606_400)
        );
        for bad in [
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+0200",
            "2024-01-01X00:00:00Z",
            "yesterday",
        ] {
            assert_eq!(parse_rfc3339_secs(bad), None, "{bad}");
        }
        assert!(parse_rfc3339_secs("2024-02-29T00:00:00Z").unwrap() > 0);
    }
}
