//! Timestream and GoogleSQL spellings DataFusion's parser does not take, rewritten
//! token by token before parsing (text outside the rewritten tokens is kept byte for
//! byte, so string literals and positions elsewhere are untouched):
//! - `measure_value::double` (Timestream's column name, which DataFusion would read
//!   as a cast) becomes the quoted identifier `"measure_value::double"`;
//! - duration literals `15s`, `1h`, `500ms`, `2d`, `12second`, `1.5h` become
//!   `INTERVAL '15 seconds'`, …;
//! - a lambda's body, after `x ->` or `(s, x) ->` in a call's argument list, gets
//!   parentheses (the parser binds `->` tighter than `AND` and `OR`);
//! - GoogleSQL parameters `@name` become DataFusion's `$name`;
//! - GoogleSQL bytes literals `b'…'` (with their `\xHH`, `\n`, … escapes) become hex
//!   literals `X'…'`;
//! - GoogleSQL's table with named arguments, `t(with_history => TRUE, latest_n => 2,
//!   after => …)`, becomes the table function call `bigtable_history('t',
//!   'with_history', TRUE, 'latest_n', 2, 'after', …)` (each value rewritten too);
//! - GoogleSQL's type names in `CAST`/`SAFE_CAST` (`INT64`, `FLOAT64`, `FLOAT32`,
//!   `BYTES`, `NUMERIC`) become DataFusion's (`BIGINT`, `DOUBLE`, `REAL`, `BYTEA`,
//!   `DECIMAL(38, 9)`);
//! - in GoogleSQL only ([`rewrite_googlesql`]): backslash escapes in string literals
//!   (`'a\nb'`, `'\x41'`), double-quoted and raw (`r'\d+'`) strings, hexadecimal
//!   integers (`0x1F`), and
//!   `.field` after a subscript or a call (`cf['q'][OFFSET(0)].value`, read as
//!   `['value']`);
//! - a date part written as a bare word after the first argument of `TIMESTAMP_DIFF`,
//!   `TIMESTAMP_TRUNC`, `DATE_DIFF`, `DATE_TRUNC` or `LAST_DAY` (`… , HOUR)`) becomes a
//!   string (`'HOUR'`), as do the modes of `NORMALIZE` (`NFKC`) and `ARRAY_OFFSET`
//!   (`LAST`);
//! - in GoogleSQL, `#` comments and every quoted literal form first ([`lexical`]), then
//!   typed `ARRAY<T>[…]` and `STRUCT<…>(…)` constructors and the `SAFE.` prefix
//!   ([`typed`]).

mod lexical;
mod typed;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{Error, Result};

/// Timestream's scalar type names that follow `measure_value::`.
const VALUE_TYPES: [&str; 5] = ["double", "bigint", "varchar", "boolean", "timestamp"];

/// The interval spelling of a duration unit: Timestream's short and long names (the
/// long ones not pluralized, as Timestream writes them), and `y`/`year`/`month` for
/// its year-to-month intervals. Case matters, as in Timestream (`1M` is no unit).
fn unit_name(unit: &str) -> Option<&'static str> {
    Some(match unit {
        "ns" | "nanosecond" => "nanoseconds",
        "us" | "microsecond" => "microseconds",
        "ms" | "millisecond" => "milliseconds",
        "s" | "second" => "seconds",
        "m" | "minute" => "minutes",
        "h" | "hour" => "hours",
        "d" | "day" => "days",
        "y" | "year" => "years",
        "month" => "months",
        _ => return None,
    })
}

/// GoogleSQL's type names DataFusion's parser does not know, and what they become.
const CAST_TYPES: [(&str, &str); 5] = [
    ("int64", "BIGINT"),
    ("float64", "DOUBLE"),
    ("float32", "REAL"),
    ("bytes", "BYTEA"),
    ("numeric", "DECIMAL(38, 9)"),
];

/// Functions whose later arguments may be a bare word of a set (a date part, a mode).
const WORD_FUNCTIONS: [(&str, &[&str]); 8] = [
    ("timestamp_diff", &DATE_PARTS),
    ("timestamp_trunc", &DATE_PARTS),
    ("date_diff", &DATE_PARTS),
    ("date_trunc", &DATE_PARTS),
    ("last_day", &DATE_PARTS),
    ("normalize", &NORMALIZATION_MODES),
    ("normalize_and_casefold", &NORMALIZATION_MODES),
    ("array_offset", &FIND_MODES),
];

/// `NORMALIZE`'s modes.
const NORMALIZATION_MODES: [&str; 4] = ["nfc", "nfkc", "nfd", "nfkd"];

/// `ARRAY_OFFSET`'s modes.
const FIND_MODES: [&str; 2] = ["first", "last"];

/// GoogleSQL's date parts.
const DATE_PARTS: [&str; 14] = [
    "microsecond",
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "dayofweek",
    "dayofyear",
    "week",
    "isoweek",
    "month",
    "quarter",
    "year",
    "isoyear",
];

/// What an open parenthesis belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paren {
    Cast,
    /// A function of [`WORD_FUNCTIONS`], with its words.
    Words(&'static [&'static str]),
    Other,
}

/// Rewrites `sql` (see the module docs), in Timestream's dialect.
pub fn rewrite(sql: &str) -> Result<String> {
    rewrite_with(sql, false)
}

/// Rewrites `sql` (see the module docs), in GoogleSQL's dialect.
pub fn rewrite_googlesql(sql: &str) -> Result<String> {
    rewrite_with(sql, true)
}

/// A string literal with `text` as its value.
fn string_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn rewrite_with(sql: &str, googlesql: bool) -> Result<String> {
    let normalized;
    let sql = if googlesql {
        normalized = lexical::normalize(sql);
        normalized.as_str()
    } else {
        sql
    };
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| Error::Syntax {
            message: e.message.clone(),
            line: e.location.line,
            column: e.location.column,
        })?;
    let starts = byte_offsets(
        sql,
        tokens
            .iter()
            .map(|t| (t.span.start.line, t.span.start.column)),
    );
    let text = |i: usize| -> &str {
        let end = starts.get(i + 1).copied().unwrap_or(sql.len());
        &sql[starts[i]..end]
    };
    let mut out = String::with_capacity(sql.len() + 16);
    let mut parens: Vec<Paren> = Vec::new();
    let significant = |from: usize, step_back: bool| -> Option<&Token> {
        let mut j = from;
        loop {
            let t = &tokens.get(j)?.token;
            if !matches!(t, Token::Whitespace(_)) {
                return Some(t);
            }
            j = if step_back { j.checked_sub(1)? } else { j + 1 };
        }
    };
    let mut i = 0;
    while i < tokens.len() {
        let tok = &tokens[i].token;
        if googlesql && let Some((form, last)) = typed::form_at(&tokens, i, |j| text(j).to_string())
        {
            let span = |r: std::ops::Range<usize>| -> Result<String> {
                let t: String = r.map(text).collect();
                Ok(rewrite_with(t.trim(), true)?.trim().to_string())
            };
            match form {
                typed::Form::Array { literal, element } => {
                    out.push_str(&format!("CAST({} AS {element}[])", span(literal)?));
                }
                typed::Form::Struct { fields, args } => {
                    let named = fields.iter().all(|(n, _)| n.is_some());
                    let mut parts = Vec::with_capacity(args.len());
                    for ((name, ty), arg) in fields.into_iter().zip(args) {
                        let value = format!("CAST({} AS {ty})", span(arg)?);
                        parts.push(match name {
                            Some(n) if named => format!("{}, {value}", string_literal(&n)),
                            _ => value,
                        });
                    }
                    let f = if named { "named_struct" } else { "struct" };
                    out.push_str(&format!("{f}({})", parts.join(", ")));
                }
                typed::Form::Safe { call } => {
                    out.push_str(&format!(
                        "{}({})",
                        crate::googlesql::SAFE_MARKER,
                        span(call)?
                    ));
                }
            }
            i = last + 1;
            continue;
        }
        if googlesql {
            let prev = i.checked_sub(1).map(|j| &tokens[j].token);
            match tok {
                Token::SingleQuotedString(s) if text(i).contains('\\') => {
                    let bytes = unescape_bytes(s);
                    match String::from_utf8(bytes) {
                        Ok(value) => out.push_str(&string_literal(&value)),
                        Err(_) => out.push_str(text(i)),
                    }
                    i += 1;
                    continue;
                }
                Token::Word(w) if w.quote_style == Some('"') => {
                    out.push_str(&string_literal(&w.value));
                    i += 1;
                    continue;
                }
                Token::SingleQuotedRawStringLiteral(s) | Token::DoubleQuotedRawStringLiteral(s) => {
                    out.push_str(&string_literal(s));
                    i += 1;
                    continue;
                }
                Token::HexStringLiteral(h)
                    if text(i).starts_with("0x") || text(i).starts_with("0X") =>
                {
                    if let Ok(n) = i64::from_str_radix(h, 16) {
                        out.push_str(&n.to_string());
                        i += 1;
                        continue;
                    }
                }
                Token::Period if matches!(prev, Some(Token::RBracket | Token::RParen)) => {
                    if let Some(Token::Word(field)) = tokens.get(i + 1).map(|t| &t.token)
                        && field.quote_style.is_none()
                    {
                        out.push_str(&format!("[{}]", string_literal(&field.value)));
                        i += 2;
                        continue;
                    }
                }
                _ => {}
            }
        }
        match tok {
            Token::LParen => {
                let before = i.checked_sub(1).and_then(|j| significant(j, true));
                parens.push(match before {
                    Some(Token::Word(w)) if w.quote_style.is_none() => {
                        let name = w.value.to_ascii_lowercase();
                        if name == "cast" || name == "safe_cast" {
                            Paren::Cast
                        } else if let Some((_, words)) =
                            WORD_FUNCTIONS.iter().find(|(f, _)| *f == name)
                        {
                            Paren::Words(words)
                        } else {
                            Paren::Other
                        }
                    }
                    _ => Paren::Other,
                });
            }
            Token::RParen => {
                parens.pop();
            }
            Token::Word(w) if w.quote_style.is_none() => {
                let lower = w.value.to_ascii_lowercase();
                let before = i.checked_sub(1).and_then(|j| significant(j, true));
                let after = significant(i + 1, false);
                let type_position = matches!(before, Some(Token::Lt))
                    || matches!(before, Some(Token::Word(a)) if a.value.eq_ignore_ascii_case("as"));
                if parens.last() == Some(&Paren::Cast)
                    && type_position
                    && let Some((_, to)) = CAST_TYPES.iter().find(|(from, _)| *from == lower)
                {
                    out.push_str(to);
                    i += 1;
                    continue;
                }
                if let Some(Paren::Words(words)) = parens.last()
                    && words.contains(&lower.as_str())
                    && matches!(before, Some(Token::Comma))
                    && matches!(after, Some(Token::RParen | Token::Comma))
                {
                    out.push_str(&format!("'{}'", lower.to_ascii_uppercase()));
                    i += 1;
                    continue;
                }
            }
            _ => {}
        }
        if let Token::Word(w) = tok
            && let Some((end, args)) = named_arguments(&tokens, i)
        {
            out.push_str(&format!(
                "{}('{}'",
                crate::catalog::HISTORY_FUNCTION,
                w.value.replace('\'', "''")
            ));
            for (name, values) in args {
                let value: String = values.map(text).collect();
                out.push_str(&format!(
                    ", '{name}', {}",
                    rewrite_with(value.trim(), googlesql)?
                ));
            }
            out.push(')');
            i = end + 1;
            continue;
        }
        if let Token::Word(w) = tok
            && w.quote_style.is_none()
        {
            // measure_value::<type>
            if w.value.eq_ignore_ascii_case("measure_value")
                && matches!(
                    tokens.get(i + 1).map(|t| &t.token),
                    Some(Token::DoubleColon)
                )
                && let Some(Token::Word(t)) = tokens.get(i + 2).map(|t| &t.token)
                && VALUE_TYPES.iter().any(|v| t.value.eq_ignore_ascii_case(v))
            {
                out.push_str(&format!("\"measure_value::{}\"", t.value.to_lowercase()));
                i += 3;
                continue;
            }
            // @param
            if let Some(name) = w.value.strip_prefix('@')
                && !name.is_empty()
            {
                out.push('$');
                out.push_str(name);
                i += 1;
                continue;
            }
        }
        // <number><unit>, as one number token followed at once by a unit word.
        if let Token::SingleQuotedByteStringLiteral(b) | Token::DoubleQuotedByteStringLiteral(b) =
            tok
        {
            out.push_str("X'");
            for byte in unescape_bytes(b) {
                out.push_str(&format!("{byte:02X}"));
            }
            out.push('\'');
            i += 1;
            continue;
        }
        if matches!(tok, Token::Arrow) && lambda_head_before(&tokens, i) {
            let end = argument_end(&tokens, i + 1);
            let body: String = (i + 1..end).map(text).collect();
            out.push_str(&format!("-> ({})", rewrite_with(body.trim(), googlesql)?));
            i = end;
            continue;
        }
        // A fraction (`1.5h`) is a duration too: Timestream's literal is "a numeric
        // value", and DataFusion's interval text takes fractions of every unit.
        if let Token::Number(n, false) = tok
            && let Some(Token::Word(w)) = tokens.get(i + 1).map(|t| &t.token)
            && w.quote_style.is_none()
            && let Some(unit) = unit_name(&w.value)
            && is_duration_number(n)
        {
            out.push_str(&format!("INTERVAL '{n} {unit}'"));
            i += 2;
            continue;
        }
        // `2hours` would read as `2 AS hours`: Timestream refuses plural units.
        if let Token::Number(n, false) = tok
            && let Some(Token::Word(w)) = tokens.get(i + 1).map(|t| &t.token)
            && w.quote_style.is_none()
            && let Some(singular) = w.value.strip_suffix('s')
            && singular.len() > 2
            && unit_name(singular).is_some()
            && is_duration_number(n)
        {
            return Err(Error::Syntax {
                message: format!(
                    "{n}{}: interval units are not pluralized; write {n}{singular}",
                    w.value
                ),
                line: tokens[i].span.start.line,
                column: tokens[i].span.start.column,
            });
        }
        out.push_str(text(i));
        i += 1;
    }
    Ok(out)
}

/// Whether the `->` at token `arrow` ends a lambda's parameters: one name, or names in
/// parentheses, that begin a function argument (after `(` or `,`).
fn lambda_head_before(tokens: &[TokenWithSpan], arrow: usize) -> bool {
    let back = |from: usize| {
        (0..from)
            .rev()
            .find(|&j| !matches!(tokens[j].token, Token::Whitespace(_)))
    };
    let starts_argument = |j: Option<usize>| {
        j.is_some_and(|j| matches!(tokens[j].token, Token::LParen | Token::Comma))
    };
    let name = |j: usize| matches!(&tokens[j].token, Token::Word(w) if w.quote_style.is_none());
    match back(arrow) {
        Some(j) if name(j) => starts_argument(back(j)),
        Some(j) if matches!(tokens[j].token, Token::RParen) => {
            // `(a, b) ->`: names and commas back to the opening parenthesis.
            let mut k = j;
            let mut want_name = true;
            loop {
                let Some(p) = back(k) else {
                    return false;
                };
                match &tokens[p].token {
                    _ if want_name && name(p) => want_name = false,
                    Token::Comma if !want_name => want_name = true,
                    Token::LParen if !want_name => return starts_argument(back(p)),
                    _ => return false,
                }
                k = p;
            }
        }
        _ => false,
    }
}

/// The token index where the argument going on at `from` ends: the `,` or `)` closing
/// it at depth 0, or the end of the text.
fn argument_end(tokens: &[TokenWithSpan], from: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(from) {
        match t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket if depth > 0 => depth -= 1,
            Token::RParen | Token::RBracket | Token::Comma if depth == 0 => return j,
            _ => {}
        }
    }
    tokens.len()
}

/// Whether `n` is the number of a duration literal: digits, at most one `.` between
/// digits (no exponent, no sign).
fn is_duration_number(n: &str) -> bool {
    let mut parts = n.split('.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    parts.next().is_none() && digits(whole) && fraction.is_none_or(digits)
}

/// The bytes of a GoogleSQL literal's text: `\xHH`, octal `\NNN`, `\uHHHH` and
/// `\UHHHHHHHH` (as UTF-8), `\n`, `\r`, `\t`, `\\`, and a backslash before a quote;
/// any other backslash stays.
fn unescape_bytes(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |s: &[u8]| {
        std::str::from_utf8(s)
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|s| u8::from_str_radix(s, 16).ok())
    };
    let octal = |s: &[u8]| {
        std::str::from_utf8(s)
            .ok()
            .filter(|s| s.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            .and_then(|s| u8::from_str_radix(s, 8).ok())
    };
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let (byte, used) = match b[i + 1] {
            b'x' | b'X' => match b.get(i + 2..i + 4).and_then(hex) {
                Some(v) => (v, 4),
                None => (b'\\', 1),
            },
            b'0'..=b'7' => match b.get(i + 1..i + 4).and_then(octal) {
                Some(v) => (v, 4),
                None => (b'\\', 1),
            },
            b'u' | b'U' => {
                let digits = if b[i + 1] == b'u' { 4 } else { 8 };
                let c = b
                    .get(i + 2..i + 2 + digits)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32);
                match c {
                    Some(c) => {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        i += 2 + digits;
                        continue;
                    }
                    None => (b'\\', 1),
                }
            }
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            c @ (b'\\' | b'\'' | b'"' | b'`' | b'?') => (c, 2),
            _ => (b'\\', 1),
        };
        out.push(byte);
        i += used;
    }
    out
}

/// The named arguments GoogleSQL for Bigtable gives a table in FROM.
const TABLE_ARGUMENTS: [&str; 7] = [
    "with_history",
    "latest_n",
    "after",
    "before",
    "after_or_equal",
    "before_or_equal",
    "as_of",
];

/// If `name ( argument => value, … )` with GoogleSQL's table arguments starts at token
/// `i`: the index of its `)`, and each argument's name (lowercase) with the token
/// indexes of its value.
#[expect(clippy::type_complexity, reason = "a private helper's one result")]
fn named_arguments(
    tokens: &[TokenWithSpan],
    i: usize,
) -> Option<(usize, Vec<(String, std::ops::Range<usize>)>)> {
    let significant = |from: usize| {
        (from..tokens.len()).find(|&j| !matches!(tokens[j].token, Token::Whitespace(_)))
    };
    let open = significant(i + 1)?;
    matches!(tokens[open].token, Token::LParen).then_some(())?;
    let mut args = Vec::new();
    let mut at = open + 1;
    loop {
        let name_at = significant(at)?;
        let Token::Word(name) = &tokens[name_at].token else {
            return None;
        };
        let name = name.value.to_ascii_lowercase();
        if !TABLE_ARGUMENTS.contains(&name.as_str()) {
            return None;
        }
        let arrow = significant(name_at + 1)?;
        matches!(tokens[arrow].token, Token::RArrow).then_some(())?;
        // The value: up to the next comma or closing parenthesis at depth 0.
        let start = arrow + 1;
        let mut depth = 0usize;
        let mut end = start;
        loop {
            match tokens.get(end)?.token {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket if depth > 0 => depth -= 1,
                Token::RParen | Token::Comma if depth == 0 => break,
                _ => {}
            }
            end += 1;
        }
        args.push((name, start..end));
        if matches!(tokens[end].token, Token::RParen) {
            return Some((end, args));
        }
        at = end + 1;
    }
}

/// Byte offsets of 1-based (line, column-in-chars) positions, in order.
fn byte_offsets(sql: &str, positions: impl Iterator<Item = (u64, u64)>) -> Vec<usize> {
    let mut line_starts = vec![0usize];
    for (i, b) in sql.bytes().enumerate() {
        if b == b'\n' {
            line_starts.push(i + 1);
        }
    }
    positions
        .map(|(line, column)| {
            let Some(&start) = line_starts.get((line.max(1) - 1) as usize) else {
                return sql.len();
            };
            sql[start..]
                .char_indices()
                .nth((column.max(1) - 1) as usize)
                .map_or(sql.len(), |(off, _)| start + off)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(s: &str) -> String {
        rewrite(s).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn measure_value_columns_become_identifiers() {
        assert_eq!(
            rw("SELECT measure_value::double FROM t"),
            "SELECT \"measure_value::double\" FROM t"
        );
        assert_eq!(rw("SELECT x::double FROM t"), "SELECT x::double FROM t");
    }

    #[test]
    fn durations_become_intervals() {
        assert_eq!(rw("bin(time, 15s)"), "bin(time, INTERVAL '15 seconds')");
        assert_eq!(rw("ago(1h)"), "ago(INTERVAL '1 hours')");
        assert_eq!(rw("LIMIT 10 m"), "LIMIT 10 m");
        assert_eq!(rw("SELECT '15s', 2d"), "SELECT '15s', INTERVAL '2 days'");
        assert_eq!(
            rw("ago(12second) + 21hour - 1ms"),
            "ago(INTERVAL '12 seconds') + INTERVAL '21 hours' - INTERVAL '1 milliseconds'"
        );
        assert_eq!(rw("SELECT 1.5h"), "SELECT INTERVAL '1.5 hours'");
        assert_eq!(
            rw("SELECT 1year, 8month"),
            "SELECT INTERVAL '1 years', INTERVAL '8 months'"
        );
        // Plurals are refused, as in Timestream; an exponent is no duration.
        assert!(rw("SELECT 2hours").contains("interval units are not pluralized; write 2hour"));
        assert_eq!(rw("SELECT 1e3s"), "SELECT 1e3s");
        assert_eq!(
            rw("SELECT 2ms, 3ns, 4us"),
            "SELECT INTERVAL '2 milliseconds', INTERVAL '3 nanoseconds', INTERVAL '4 microseconds'"
        );
    }

    #[test]
    fn lambda_bodies_are_parenthesized() {
        // The parser reads `->` as an operator binding tighter than AND/OR: the body
        // gets parentheses so the whole argument is the lambda's.
        assert_eq!(
            rw("filter(ts, x -> x.value < 75 AND x.time > t + 1m)"),
            "filter(ts, x -> (x.value < 75 AND x.time > t + INTERVAL '1 minutes'))"
        );
        assert_eq!(
            rw("reduce(ts, 0, (s, x) -> s + f(x, 1), s -> s)"),
            "reduce(ts, 0, (s, x) -> (s + f(x, 1)), s -> (s))"
        );
        assert_eq!(
            rw("f(a, x -> g(x, y -> y OR x))"),
            "f(a, x -> (g(x, y -> (y OR x))))"
        );
        // Not a lambda: an operand before the arrow.
        assert_eq!(rw("SELECT a + b -> 'k'"), "SELECT a + b -> 'k'");
        assert_eq!(rw("f((1, x) -> y)"), "f((1, x) -> y)");
    }

    #[test]
    fn history_form_becomes_a_table_function() {
        assert_eq!(
            rw("SELECT * FROM `my-t`( with_history => TRUE ) WHERE x"),
            "SELECT * FROM bigtable_history('my-t', 'with_history', TRUE) WHERE x"
        );
        assert_eq!(
            rw(
                "FROM t(WITH_HISTORY => TRUE, latest_n => 2, after => TIMESTAMP(@t), \
                before => ts(1, (2)))"
            ),
            "FROM bigtable_history('t', 'with_history', TRUE, 'latest_n', 2, \
             'after', TIMESTAMP($t), 'before', ts(1, (2)))"
        );
        assert_eq!(rw("SELECT f(x => 1)"), "SELECT f(x => 1)");
        assert_eq!(rw("SELECT f(as_of)"), "SELECT f(as_of)");
    }

    #[test]
    fn googlesql_literals_and_field_access() {
        let g = |s: &str| rewrite_googlesql(s).unwrap_or_else(|e| format!("error: {e}"));
        assert_eq!(
            g(r"SELECT 'a\nb', '\x41', 'it''s'"),
            "SELECT 'a\nb', 'A', 'it''s'"
        );
        assert_eq!(g("SELECT \"abc\", 0x1F, X'1F'"), "SELECT 'abc', 31, X'1F'");
        assert_eq!(g(r"SELECT r'\d+', R'it''s'"), r"SELECT '\d+', 'it''s'");
        assert_eq!(
            g("SELECT cf['q'][OFFSET(0)].value, f(x).a, t.b"),
            "SELECT cf['q'][OFFSET(0)]['value'], f(x)['a'], t.b"
        );
        // Timestream's dialect keeps all of them.
        assert_eq!(rw(r"SELECT 'a\nb', x.y"), r"SELECT 'a\nb', x.y");
    }

    #[test]
    fn googlesql_cast_types_and_date_parts() {
        assert_eq!(
            rw("SELECT CAST(x AS INT64), SAFE_CAST(y AS float64), CAST(z AS ARRAY<INT64>)"),
            "SELECT CAST(x AS BIGINT), SAFE_CAST(y AS DOUBLE), CAST(z AS ARRAY<BIGINT>)"
        );
        // An alias named like a type stays.
        assert_eq!(
            rw("SELECT length(v) AS bytes, CAST((SELECT 1 AS int64) AS BYTES)"),
            "SELECT length(v) AS bytes, CAST((SELECT 1 AS int64) AS BYTEA)"
        );
        assert_eq!(
            rw("SELECT TIMESTAMP_DIFF(a, b, HOUR), date_trunc(d, month), f(a, day)"),
            "SELECT TIMESTAMP_DIFF(a, b, 'HOUR'), date_trunc(d, 'MONTH'), f(a, day)"
        );
    }

    #[test]
    fn bytes_literals_become_hex_literals() {
        assert_eq!(rw("SELECT b'ab'"), "SELECT X'6162'");
        assert_eq!(rw(r"SELECT B'\xff\n\\', b''"), "SELECT X'FF0A5C', X''");
        assert_eq!(rw(r"SELECT b'\101\q'"), r"SELECT X'415C71'");
    }

    /// Arbitrary text built from the pieces the rewrite reacts to never makes it panic
    /// (it answers with text or a syntax error).
    #[test]
    fn arbitrary_text_never_panics() {
        const PIECES: [&str; 24] = [
            "'", "\"", "`", "#", "r", "b", "rb", "\\", "'''", "<", ">", ">>", "[", "]", "(", ")",
            ",", ".", "SAFE", "ARRAY", "STRUCT", "é", "x => 1", "\n",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..(seed % 12) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(PIECES[(seed % PIECES.len() as u64) as usize]);
            }
            seed = seed.wrapping_add(1);
            let _ = rewrite_googlesql(&text);
            let _ = rewrite(&text);
        }
    }

    #[test]
    fn parameters_and_literals() {
        assert_eq!(rw("WHERE _key = @k"), "WHERE _key = $k");
        assert_eq!(rw("SELECT 'it''s @k 1h'"), "SELECT 'it''s @k 1h'");
        assert_eq!(
            rw("SELECT\n  'é', 5m"),
            "SELECT\n  'é', INTERVAL '5 minutes'"
        );
    }
}
