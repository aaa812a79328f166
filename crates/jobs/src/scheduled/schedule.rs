//! Schedule expressions as Timestream (EventBridge) writes them:
//! - `rate(N unit)`: every N minutes, hours or days (`minute` when N is 1,
//!   `minutes` otherwise), counted from the query's creation;
//! - `cron(minutes hours day-of-month month day-of-week year)`, in UTC: six fields,
//!   `?` in one of the two day fields, days of the week `1-7` or `SUN-SAT`. The
//!   fields are read by the `cron` crate with a seconds field of 0 put in front.
//!   `L`, `W` and `#` are refused with an error that names them.

use std::str::FromStr;

use chrono::{DateTime, Utc};

/// The shortest rate Timestream accepts.
pub const MIN_RATE_MS: i64 = 60_000;
/// Longest schedule expression, per the service model.
pub const MAX_EXPRESSION_CHARS: usize = 256;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Every `period_ms`, from `anchor_ms`.
    Rate {
        /// Period.
        period_ms: i64,
    },
    /// A cron schedule.
    Cron(Box<cron::Schedule>),
}

fn bad(expr: &str, why: &str) -> String {
    format!("ScheduleExpression {expr:?} is not valid: {why}")
}

impl Schedule {
    /// Parses a `ScheduleExpression`.
    pub fn parse(expr: &str) -> Result<Self, String> {
        if expr.is_empty() || expr.chars().count() > MAX_EXPRESSION_CHARS {
            return Err(bad(
                expr,
                &format!("it must be 1 to {MAX_EXPRESSION_CHARS} characters"),
            ));
        }
        let body = |prefix: &str| {
            expr.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(')'))
                .map(str::trim)
        };
        if let Some(b) = body("rate(") {
            return Self::rate(expr, b);
        }
        if let Some(b) = body("cron(") {
            return Self::cron(expr, b);
        }
        Err(bad(expr, "write rate(N unit) or cron(6 fields)"))
    }

    fn rate(expr: &str, body: &str) -> Result<Self, String> {
        let mut parts = body.split_whitespace();
        let (Some(n), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(
                expr,
                "rate takes a number and a unit, as rate(5 minutes)",
            ));
        };
        let n: i64 = n
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(expr, "the rate's value must be a positive integer"))?;
        let unit_ms = match (unit, n == 1) {
            ("minute", true) | ("minutes", false) => 60_000,
            ("hour", true) | ("hours", false) => 3_600_000,
            ("day", true) | ("days", false) => 86_400_000,
            _ => {
                return Err(bad(
                    expr,
                    "the unit is minute, hour or day for 1, and minutes, hours or days otherwise",
                ));
            }
        };
        let period_ms = n
            .checked_mul(unit_ms)
            .ok_or_else(|| bad(expr, "the rate is too long"))?;
        if period_ms < MIN_RATE_MS {
            return Err(bad(expr, "the shortest rate is 1 minute"));
        }
        Ok(Self::Rate { period_ms })
    }

    fn cron(expr: &str, body: &str) -> Result<Self, String> {
        let fields: Vec<&str> = body.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(bad(
                expr,
                "cron takes six fields: minutes hours day-of-month month day-of-week year",
            ));
        }
        let (dom, dow) = (fields[2], fields[4]);
        if (dom == "?") == (dow == "?") {
            return Err(bad(
                expr,
                "exactly one of day-of-month and day-of-week must be ?",
            ));
        }
        if fields.iter().any(|f| {
            f.contains('L') && !f.contains("JUL")
                || f.contains('W') && !f.contains("WED")
                || f.contains('#')
        }) {
            return Err(bad(
                expr,
                "Almanac's schedules do not take L, W or # (last day, nearest weekday, nth weekday)",
            ));
        }
        let quartz = format!("0 {}", fields.join(" "));
        let schedule = cron::Schedule::from_str(&quartz).map_err(|e| bad(expr, &e.to_string()))?;
        Ok(Self::Cron(Box::new(schedule)))
    }

    /// The first time of the schedule after `after_ms`; a rate counts from
    /// `anchor_ms`. `None` when a cron schedule has no time left.
    pub fn next_after(&self, after_ms: i64, anchor_ms: i64) -> Option<i64> {
        match self {
            Self::Rate { period_ms } => {
                let since = after_ms.saturating_sub(anchor_ms).max(-1);
                let periods = since.div_euclid(*period_ms) + 1;
                anchor_ms.checked_add(periods.checked_mul(*period_ms)?)
            }
            Self::Cron(s) => {
                let after: DateTime<Utc> = DateTime::from_timestamp_millis(after_ms)?;
                s.after(&after).next().map(|t| t.timestamp_millis())
            }
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_000; // 2023-11-14T22:13:20Z

    #[test]
    fn rates_count_from_the_anchor() {
        let s = Schedule::parse("rate(5 minutes)").unwrap();
        assert_eq!(s.next_after(T0, T0), Some(T0 + 300_000));
        assert_eq!(s.next_after(T0 + 299_999, T0), Some(T0 + 300_000));
        assert_eq!(s.next_after(T0 + 300_000, T0), Some(T0 + 600_000));
        assert_eq!(s.next_after(T0 - 5, T0), Some(T0));
        assert!(Schedule::parse("rate(1 minute)").is_ok());
        for bad in [
            "rate(1 minutes)",
            "rate(2 minute)",
            "rate(0 hours)",
            "rate(5 seconds)",
            "rate(5)",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cron_is_six_fields_in_utc() {
        let s = Schedule::parse("cron(0/15 * * * ? *)").unwrap();
        // 22:13:20 → 22:15:00.
        assert_eq!(s.next_after(T0, 0), Some(1_700_000_100_000));
        // Mondays at 08:00: 2023-11-14 is a Tuesday, so the next is 2023-11-20.
        let s = Schedule::parse("cron(0 8 ? * MON *)").unwrap();
        assert_eq!(s.next_after(T0, 0), Some(1_700_467_200_000));
        let s = Schedule::parse("cron(0 8 ? * 2 *)").unwrap();
        assert_eq!(s.next_after(T0, 0), Some(1_700_467_200_000));
        let s = Schedule::parse("cron(30 1 1 JUL ? 2030)").unwrap();
        assert_eq!(s.next_after(T0, 0), Some(1_909_099_800_000));
        for bad in [
            "cron(* * * * *)",
            "cron(0 8 * * MON *)",
            "cron(0 8 L * ? *)",
            "cron(0 8 ? * 6#3 *)",
            "cron(0 25 * * ? *)",
            "every 5 minutes",
        ] {
            let e = Schedule::parse(bad).unwrap_err();
            assert!(e.contains("ScheduleExpression"), "{bad}: {e}");
        }
    }
}
