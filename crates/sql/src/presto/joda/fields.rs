//! Writing and reading the fields of a compiled Joda pattern ([`super::Token`]).

use chrono::{
    DateTime, Datelike, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc, Weekday,
};
use datafusion::arrow::array::timezone::Tz;

use super::Token;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Zone abbreviations `z` reads, as fixed offsets in minutes (Joda reads none; java.time,
/// which Timestream's example follows, reads these). Standard and daylight names are
/// fixed: `PST` is −08:00 in July too.
const ZONE_NAMES: [(&str, i32); 24] = [
    ("UTC", 0),
    ("UT", 0),
    ("GMT", 0),
    ("Z", 0),
    ("EST", -5 * 60),
    ("EDT", -4 * 60),
    ("CST", -6 * 60),
    ("CDT", -5 * 60),
    ("MST", -7 * 60),
    ("MDT", -6 * 60),
    ("PST", -8 * 60),
    ("PDT", -7 * 60),
    ("AKST", -9 * 60),
    ("AKDT", -8 * 60),
    ("HST", -10 * 60),
    ("WET", 0),
    ("BST", 60),
    ("CET", 60),
    ("CEST", 2 * 60),
    ("EET", 2 * 60),
    ("EEST", 3 * 60),
    ("IST", 5 * 60 + 30),
    ("JST", 9 * 60),
    ("AEST", 10 * 60),
];

/// The fewest and most digits a number field of `letter` reads on its own.
fn digits_of(letter: char, count: usize) -> usize {
    let most = match letter {
        'y' | 'Y' | 'u' | 'x' | 'C' | 'S' => 9,
        'D' => 3,
        _ => 2,
    };
    most.max(count)
}

/// Whether the field is written as a number.
fn numeric(token: &Token) -> bool {
    match token {
        Token::Field('M' | 'L', n) => *n < 3,
        Token::Field(c, _) => !matches!(c, 'G' | 'E' | 'a' | 'z' | 'Z'),
        Token::Literal(_) => false,
    }
}

/// `v` with at least `width` digits.
fn padded(v: i64, width: usize) -> String {
    if v < 0 {
        format!("-{:0width$}", v.unsigned_abs())
    } else {
        format!("{v:0width$}")
    }
}

/// `t` written by `tokens`.
pub(super) fn write(t: DateTime<Utc>, tokens: &[Token]) -> String {
    let mut out = String::new();
    for token in tokens {
        let (c, n) = match token {
            Token::Literal(s) => {
                out.push_str(s);
                continue;
            }
            Token::Field(c, n) => (*c, *n),
        };
        let year = i64::from(t.year());
        let piece = match c {
            'G' => (if year > 0 { "AD" } else { "BC" }).to_string(),
            'C' => padded(if year > 0 { year } else { 1 - year } / 100, n),
            'y' | 'u' | 'Y' | 'x' => {
                let y = match c {
                    'Y' if year <= 0 => 1 - year,
                    'x' => i64::from(t.iso_week().year()),
                    _ => year,
                };
                if n == 2 {
                    padded(y.rem_euclid(100), 2)
                } else {
                    padded(y, n)
                }
            }
            'w' => padded(i64::from(t.iso_week().week()), n),
            'e' => padded(i64::from(t.weekday().number_from_monday()), n),
            'E' => {
                let day = DAYS[t.weekday().num_days_from_monday() as usize];
                if n >= 4 { day } else { &day[..3] }.to_string()
            }
            'D' => padded(i64::from(t.ordinal()), n),
            'M' | 'L' => {
                let month = MONTHS[t.month0() as usize];
                match n {
                    1 | 2 => padded(i64::from(t.month()), n),
                    3 => month[..3].to_string(),
                    _ => month.to_string(),
                }
            }
            'd' => padded(i64::from(t.day()), n),
            'a' => (if t.hour() < 12 { "AM" } else { "PM" }).to_string(),
            'K' => padded(i64::from(t.hour() % 12), n),
            'h' => padded(i64::from((t.hour() + 11) % 12 + 1), n),
            'H' => padded(i64::from(t.hour()), n),
            'k' => padded(i64::from(if t.hour() == 0 { 24 } else { t.hour() }), n),
            'm' => padded(i64::from(t.minute()), n),
            's' => padded(i64::from(t.second()), n),
            'S' => {
                let nanos = format!("{:09}", t.nanosecond() % 1_000_000_000);
                if n <= 9 {
                    nanos[..n].to_string()
                } else {
                    format!("{nanos:0<n$}")
                }
            }
            'z' => (if n >= 4 {
                "Coordinated Universal Time"
            } else {
                "UTC"
            })
            .to_string(),
            'Z' => match n {
                1 => "+0000".to_string(),
                2 => "+00:00".to_string(),
                _ => "UTC".to_string(),
            },
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    out
}

/// The fields read so far.
#[derive(Debug, Default)]
struct Fields {
    bc: bool,
    century: Option<i64>,
    year: Option<i64>,
    week_year: Option<i64>,
    week: Option<i64>,
    weekday: Option<i64>,
    day_of_year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    pm: Option<bool>,
    /// The hour and the letter it was read with.
    hour: Option<(i64, char)>,
    minute: Option<i64>,
    second: Option<i64>,
    nanos: Option<i64>,
    offset_minutes: Option<i32>,
    zone: Option<Tz>,
}

/// The input left to read.
struct Input<'a>(&'a str);

impl Input<'_> {
    /// Takes `text` if the input starts with it (in any case).
    fn take(&mut self, text: &str) -> bool {
        match self.0.get(..text.len()) {
            Some(head) if head.eq_ignore_ascii_case(text) => {
                self.0 = &self.0[text.len()..];
                true
            }
            _ => false,
        }
    }

    /// The first of `names` the input starts with (longest first), by index.
    fn one_of(&mut self, names: &[&str]) -> Option<usize> {
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(names[i].len()));
        order.into_iter().find(|&i| self.take(names[i]))
    }

    /// A number of `fewest..=most` digits, with a sign if `signed`.
    fn number(&mut self, fewest: usize, most: usize, signed: bool) -> Result<(i64, usize), String> {
        let negative = signed && !self.take("+") && self.take("-");
        let count = self
            .0
            .bytes()
            .take(most)
            .take_while(u8::is_ascii_digit)
            .count();
        if count < fewest {
            return Err(format!("expected {fewest} or more digits at {:?}", self.0));
        }
        let (digits, rest) = self.0.split_at(count);
        self.0 = rest;
        let v: i64 = digits
            .parse()
            .map_err(|_| format!("bad number {digits:?}"))?;
        Ok((if negative { -v } else { v }, count))
    }

    /// The next run of letters, digits and `/_+-:` (a zone's name or offset).
    fn word(&mut self) -> &str {
        let end = self
            .0
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/_+-:".contains(c)))
            .unwrap_or(self.0.len());
        let (w, rest) = self.0.split_at(end);
        self.0 = rest;
        w
    }
}

/// An offset `+08`, `+0800`, `+08:00` or `Z`, in minutes.
fn offset(text: &str) -> Option<i32> {
    if text.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return None;
    }
    let hours: i32 = digits[..2].parse().ok()?;
    let minutes: i32 = digits.get(2..).map_or(Some(0), |m| m.parse().ok())?;
    (hours < 24 && minutes < 60).then_some(sign * (hours * 60 + minutes))
}

/// A zone read by `z`, `Z` or `ZZZ`: into the offset or the named zone.
fn zone(fields: &mut Fields, text: &str, names: bool) -> Result<(), String> {
    if let Some(minutes) = offset(text) {
        fields.offset_minutes = Some(minutes);
        return Ok(());
    }
    if names
        && let Some((_, minutes)) = ZONE_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(text))
    {
        fields.offset_minutes = Some(*minutes);
        return Ok(());
    }
    if names && let Ok(tz) = text.parse::<Tz>() {
        fields.zone = Some(tz);
        return Ok(());
    }
    Err(format!("unknown time zone {text:?}"))
}

/// A two-digit year as Joda reads it: within 50 years of a pivot 30 years ago.
fn two_digit_year(yy: i64) -> i64 {
    let pivot = i64::from(Utc::now().year()) - 30;
    let low = pivot - 50;
    let t = low.rem_euclid(100);
    yy + low + if yy < t { 100 } else { 0 } - t
}

/// `s` read by `tokens`, as a UTC time.
pub(super) fn read(s: &str, tokens: &[Token]) -> Result<DateTime<Utc>, String> {
    let mut input = Input(s);
    let mut f = Fields::default();
    for (i, token) in tokens.iter().enumerate() {
        let (c, n) = match token {
            Token::Literal(text) => {
                if !input.take(text) {
                    return Err(format!("expected {text:?} at {:?}", input.0));
                }
                continue;
            }
            Token::Field(c, n) => (*c, *n),
        };
        if numeric(token) {
            // Next to another number, a field takes exactly as many digits as letters.
            let exact = tokens.get(i + 1).is_some_and(numeric);
            let (fewest, most) = if exact { (n, n) } else { (1, digits_of(c, n)) };
            let signed = matches!(c, 'y' | 'u' | 'x') && !exact;
            let (v, count) = input.number(fewest, most, signed)?;
            match c {
                'C' => f.century = Some(v),
                'y' | 'u' | 'Y' if n == 2 && count == 2 => f.year = Some(two_digit_year(v)),
                'y' | 'u' | 'Y' => f.year = Some(v),
                'x' if n == 2 && count == 2 => f.week_year = Some(two_digit_year(v)),
                'x' => f.week_year = Some(v),
                'w' => f.week = Some(v),
                'e' => f.weekday = Some(v),
                'D' => f.day_of_year = Some(v),
                'M' | 'L' => f.month = Some(v),
                'd' => f.day = Some(v),
                'K' | 'h' | 'H' | 'k' => f.hour = Some((v, c)),
                'm' => f.minute = Some(v),
                's' => f.second = Some(v),
                'S' => {
                    let scale = 10i64.pow(9u32.saturating_sub(count as u32));
                    f.nanos = Some(v * scale);
                }
                _ => {}
            }
            continue;
        }
        match c {
            'G' => match input.one_of(&["AD", "BC"]) {
                Some(i) => f.bc = i == 1,
                None => return Err(format!("expected AD or BC at {:?}", input.0)),
            },
            'E' => {
                let names: Vec<&str> = DAYS
                    .iter()
                    .copied()
                    .chain(DAYS.iter().map(|d| &d[..3]))
                    .collect();
                match input.one_of(&names) {
                    Some(i) => f.weekday = Some((i % 7) as i64 + 1),
                    None => return Err(format!("expected a day's name at {:?}", input.0)),
                }
            }
            'M' | 'L' => {
                let names: Vec<&str> = MONTHS
                    .iter()
                    .copied()
                    .chain(MONTHS.iter().map(|m| &m[..3]))
                    .collect();
                match input.one_of(&names) {
                    Some(i) => f.month = Some((i % 12) as i64 + 1),
                    None => return Err(format!("expected a month's name at {:?}", input.0)),
                }
            }
            'a' => match input.one_of(&["AM", "PM"]) {
                Some(i) => f.pm = Some(i == 1),
                None => return Err(format!("expected AM or PM at {:?}", input.0)),
            },
            'z' => {
                let w = input.word().to_string();
                zone(&mut f, &w, true)?;
            }
            'Z' => {
                let w = input.word().to_string();
                zone(&mut f, &w, n >= 3)?;
            }
            _ => {}
        }
    }
    if !input.0.is_empty() {
        return Err(format!("unexpected {:?} at the end", input.0));
    }
    resolve(&f)
}

/// The UTC time the fields name.
fn resolve(f: &Fields) -> Result<DateTime<Utc>, String> {
    let mut year = f.year.or(f.century.map(|c| c * 100)).unwrap_or(1970);
    if f.bc {
        year = 1 - year;
    }
    let int =
        |v: i64, what: &str| i32::try_from(v).map_err(|_| format!("{what} {v} is out of range"));
    let small =
        |v: i64, what: &str| u32::try_from(v).map_err(|_| format!("{what} {v} is out of range"));
    let date = if let Some(doy) = f.day_of_year {
        NaiveDate::from_yo_opt(int(year, "year")?, small(doy, "day of year")?)
    } else if f.month.is_none() && f.day.is_none() && (f.week.is_some() || f.week_year.is_some()) {
        let weekday = Weekday::try_from(
            u8::try_from(f.weekday.unwrap_or(1) - 1).map_err(|_| "bad day of week".to_string())?,
        )
        .map_err(|_| "bad day of week".to_string())?;
        NaiveDate::from_isoywd_opt(
            int(f.week_year.unwrap_or(year), "year")?,
            small(f.week.unwrap_or(1), "week")?,
            weekday,
        )
    } else {
        NaiveDate::from_ymd_opt(
            int(year, "year")?,
            small(f.month.unwrap_or(1), "month")?,
            small(f.day.unwrap_or(1), "day")?,
        )
    }
    .ok_or("not a valid date")?;
    let hour = match f.hour {
        None => 0,
        Some((h, 'H')) => h,
        Some((24, 'k')) => 0,
        Some((h, 'k')) => h,
        Some((h, c)) => {
            let h = if c == 'h' && h == 12 { 0 } else { h };
            if h >= 12 {
                return Err(format!("hour {h} of a half day is out of range"));
            }
            h + if f.pm == Some(true) { 12 } else { 0 }
        }
    };
    let time = date
        .and_hms_nano_opt(
            small(hour, "hour")?,
            small(f.minute.unwrap_or(0), "minute")?,
            small(f.second.unwrap_or(0), "second")?,
            small(f.nanos.unwrap_or(0), "fraction")?,
        )
        .ok_or("not a valid time of day")?;
    local_to_utc(time, f)
}

fn local_to_utc(time: NaiveDateTime, f: &Fields) -> Result<DateTime<Utc>, String> {
    if let Some(tz) = &f.zone {
        return tz
            .from_local_datetime(&time)
            .earliest()
            .map(|t| t.with_timezone(&Utc))
            .ok_or_else(|| format!("{time} does not exist in that zone"));
    }
    let minutes = f.offset_minutes.unwrap_or(0);
    let zone = FixedOffset::east_opt(minutes * 60).ok_or("bad offset")?;
    zone.from_local_datetime(&time)
        .single()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| "not a valid time".to_string())
}

#[cfg(test)]
mod tests {
    use super::super::compile;
    use super::*;

    fn fmt(t: &str, pattern: &str) -> String {
        match (DateTime::parse_from_rfc3339(t), compile(pattern)) {
            (Ok(t), Ok(tokens)) => write(t.with_timezone(&Utc), &tokens),
            (t, tokens) => format!("bad test input: {t:?} {tokens:?}"),
        }
    }

    fn parse(s: &str, pattern: &str) -> String {
        let tokens = match compile(pattern) {
            Ok(tokens) => tokens,
            Err(e) => return format!("bad pattern: {e}"),
        };
        match read(s, &tokens) {
            Ok(t) => t.format("%Y-%m-%d %H:%M:%S%.9f").to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn every_letter_formats() {
        let t = "2019-12-04T19:05:09.123456789Z";
        assert_eq!(
            fmt(t, "G C yyyy yy Y u x w e E EEEE D M MM MMM MMMM L d"),
            "AD 20 2019 19 2019 2019 2019 49 3 Wed Wednesday 338 12 12 Dec December 12 4"
        );
        assert_eq!(
            fmt(t, "a K h H k m s S SSS SSSSSSSSS SSSSSSSSSSS"),
            "PM 7 7 19 19 5 9 1 123 123456789 12345678900"
        );
        assert_eq!(
            fmt(t, "z zzzz Z ZZ ZZZ"),
            "UTC Coordinated Universal Time +0000 +00:00 UTC"
        );
        assert_eq!(fmt(t, "hh 'o''clock' ''"), "07 o'clock '");
        assert_eq!(fmt("2020-01-01T00:30:00Z", "K h H k"), "0 12 0 24");
    }

    #[test]
    fn parses_with_zones() {
        // Timestream's documented example: 10:10 PST is 18:10 UTC.
        assert_eq!(
            parse("2019-12-29 10:10 PST", "uuuu-LL-dd HH:mm z"),
            "2019-12-29 18:10:00.000000000"
        );
        assert_eq!(
            parse("1968-01-13 12", "yyyy-MM-dd HH"),
            "1968-01-13 12:00:00.000000000"
        );
        assert_eq!(
            parse("2019-12-29T10:10:00.5+05:30", "yyyy-MM-dd'T'HH:mm:ss.SSSZZ"),
            "2019-12-29 04:40:00.500000000"
        );
        assert_eq!(
            parse(
                "2019-07-01 10:00 America/Los_Angeles",
                "yyyy-MM-dd HH:mm ZZZ"
            ),
            "2019-07-01 17:00:00.000000000"
        );
        assert_eq!(
            parse("20191204", "yyyyMMdd"),
            "2019-12-04 00:00:00.000000000"
        );
        assert_eq!(
            parse("Wed, 4 dec 2019 07:05 pm", "EEE, d MMM yyyy hh:mm a"),
            "2019-12-04 19:05:00.000000000"
        );
        assert_eq!(parse("2019 338", "yyyy D"), "2019-12-04 00:00:00.000000000");
        assert_eq!(
            parse("2019-W49-3", "xxxx-'W'ww-e"),
            "2019-12-04 00:00:00.000000000"
        );
        assert!(parse("2019-02-30", "yyyy-MM-dd").starts_with("error: not a valid date"));
        assert!(parse("2019-12-04 extra", "yyyy-MM-dd").starts_with("error: unexpected"));
        assert!(parse("2019-12-04 10:10 XYZ", "yyyy-MM-dd HH:mm z").contains("unknown time zone"));
    }
}
