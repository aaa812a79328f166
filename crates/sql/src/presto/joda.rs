//! `format_datetime(t, format)` and `parse_datetime(s, format)`: Joda-Time's pattern
//! letters, as Timestream documents them, and the `u` (year) and `L` (month) of
//! java.time its own example uses. Every time is UTC; `parse_datetime` gives the
//! UTC TIMESTAMP of a time read with a zone.
//!
//! | letter | meaning | format | parse |
//! |---|---|---|---|
//! | `G` | era | `AD`, `BC` | `AD`, `BC` |
//! | `C` | century | number | number |
//! | `y`, `Y`, `u` | year (`yy`: two digits) | number | number (`yy`: within 50 years of 30 years ago) |
//! | `x` | ISO week-based year | number | number |
//! | `w` | ISO week | number | number |
//! | `e` | day of week, Monday 1 | number | number |
//! | `E` | day of week | `Tue` (`EEEE`: `Tuesday`) | either |
//! | `D` | day of year | number | number |
//! | `M`, `L` | month | number (`MMM`: `Jan`, `MMMM`: `January`) | likewise |
//! | `d` | day of month | number | number |
//! | `a` | AM/PM | `AM`, `PM` | either |
//! | `K`, `h`, `H`, `k` | hour 0–11, 1–12, 0–23, 1–24 | number | number |
//! | `m`, `s` | minute, second | number | number |
//! | `S` | fraction of a second, as many digits as letters | digits | up to 9 digits |
//! | `z` | zone name | `UTC` (`zzzz`: `Coordinated Universal Time`) | `UTC`, `GMT`, `Z`, the US and common abbreviations (`PST` is −08:00 all year), or an IANA name |
//! | `Z` | offset | `+0000` (`ZZ`: `+00:00`, `ZZZ`: `UTC`) | `+0800`, `+08:00`, `Z`, or (`ZZZ`) an IANA name |
//! | `'…'` | literal text (`''`: a quote) | | |
//!
//! A number takes at least as many digits as letters; when parsing, two numbers
//! written next to each other (`yyyyMMdd`) take exactly that many. Any other ASCII
//! letter is refused ("Illegal pattern component"), as Joda refuses it; other
//! characters are literal.

mod fields;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use datafusion::arrow::array::{Array, ArrayRef, StringBuilder, TimestampNanosecondArray};
use datafusion::common::exec_err;
use datafusion::error::Result as DfResult;

use super::{datetime, strings, times};

/// The longest pattern these functions read: a date format is short, and each row's
/// pattern is compiled.
const MAX_PATTERN_CHARS: usize = 256;

/// One piece of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// Text written (and matched) as it is.
    Literal(String),
    /// A field: its letter and how many times it is repeated.
    Field(char, usize),
}

/// The letters of the table in the module docs.
const LETTERS: &str = "GCYyuxweEDMLdaKhHkmsSzZ";

/// The tokens of `pattern`, or the message refusing it.
fn compile(pattern: &str) -> Result<Vec<Token>, String> {
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!(
            "the pattern is over the limit of {MAX_PATTERN_CHARS} characters"
        ));
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out: Vec<Token> = Vec::new();
    let literal = |out: &mut Vec<Token>, c: char| match out.last_mut() {
        Some(Token::Literal(s)) => s.push(c),
        _ => out.push(Token::Literal(c.to_string())),
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\'') {
                literal(&mut out, '\'');
                i += 2;
                continue;
            }
            // Quoted text up to the next lone quote ('' inside is a quote).
            i += 1;
            loop {
                match (chars.get(i), chars.get(i + 1)) {
                    (None, _) => return Err("the pattern has an unclosed quote".to_string()),
                    (Some('\''), Some('\'')) => {
                        literal(&mut out, '\'');
                        i += 2;
                    }
                    (Some('\''), _) => {
                        i += 1;
                        break;
                    }
                    (Some(&q), _) => {
                        literal(&mut out, q);
                        i += 1;
                    }
                }
            }
            continue;
        }
        if c.is_ascii_alphabetic() {
            let count = chars[i..].iter().take_while(|&&d| d == c).count();
            if !LETTERS.contains(c) {
                return Err(format!(
                    "Illegal pattern component: {}",
                    c.to_string().repeat(count)
                ));
            }
            out.push(Token::Field(c, count));
            i += count;
            continue;
        }
        literal(&mut out, c);
        i += 1;
    }
    Ok(out)
}

/// `format_datetime` over a batch.
pub(super) fn format(name: &str, args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let (t, f) = (times(&args[0])?, strings(&args[1])?);
    let mut out = StringBuilder::new();
    let mut compiled: Option<(String, Vec<Token>)> = None;
    for i in 0..rows {
        if t.is_null(i) || f.is_null(i) {
            out.append_null();
            continue;
        }
        let tokens = tokens_of(name, f.value(i), &mut compiled)?;
        out.append_value(fields::write(datetime(t.value(i)), tokens));
    }
    Ok(Arc::new(out.finish()))
}

/// `parse_datetime` over a batch.
pub(super) fn parse(name: &str, args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let (s, f) = (strings(&args[0])?, strings(&args[1])?);
    let mut out = Vec::with_capacity(rows);
    let mut compiled: Option<(String, Vec<Token>)> = None;
    for i in 0..rows {
        if s.is_null(i) || f.is_null(i) {
            out.push(None);
            continue;
        }
        let tokens = tokens_of(name, f.value(i), &mut compiled)?;
        let parsed: DateTime<Utc> = fields::read(s.value(i), tokens).or_else(|e| {
            exec_err!(
                "{name}: {:?} does not match {:?}: {e}",
                s.value(i),
                f.value(i)
            )
        })?;
        let Some(ns) = parsed.timestamp_nanos_opt() else {
            return exec_err!("{name}: {:?} is out of the timestamp range", s.value(i));
        };
        out.push(Some(ns));
    }
    Ok(Arc::new(TimestampNanosecondArray::from(out)))
}

/// The tokens of `pattern`, compiled once while rows repeat it.
fn tokens_of<'a>(
    name: &str,
    pattern: &str,
    compiled: &'a mut Option<(String, Vec<Token>)>,
) -> DfResult<&'a [Token]> {
    if compiled.as_ref().is_none_or(|(p, _)| p != pattern) {
        let tokens = compile(pattern).or_else(|e| exec_err!("{name}: {e}"))?;
        *compiled = Some((pattern.to_string(), tokens));
    }
    match compiled {
        Some((_, tokens)) => Ok(tokens),
        None => exec_err!("{name}: no pattern"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile_as_joda_reads_them() {
        assert_eq!(
            compile("yyyy-MM-dd'T'HH 'o''clock' ''"),
            Ok(vec![
                Token::Field('y', 4),
                Token::Literal("-".into()),
                Token::Field('M', 2),
                Token::Literal("-".into()),
                Token::Field('d', 2),
                Token::Literal("T".into()),
                Token::Field('H', 2),
                Token::Literal(" o'clock '".into()),
            ])
        );
        assert_eq!(
            compile("yyyy QQ"),
            Err("Illegal pattern component: QQ".to_string())
        );
        assert!(compile("'open").is_err());
        assert!(compile(&"y".repeat(MAX_PATTERN_CHARS + 1)).is_err());
    }
}
