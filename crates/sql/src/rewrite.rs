//! Timestream and GoogleSQL spellings DataFusion's parser does not take, rewritten
//! token by token before parsing (text outside the rewritten tokens is kept byte for
//! byte, so string literals and positions elsewhere are untouched):
//! - `measure_value::double` (Timestream's column name, which DataFusion would read
//!   as a cast) becomes the quoted identifier `"measure_value::double"`;
//! - duration literals `15s`, `1h`, `500ms`, `2d` become `INTERVAL '15 seconds'`, …;
//! - GoogleSQL parameters `@name` become DataFusion's `$name`;
//! - GoogleSQL's history form `t(with_history => TRUE)` becomes the table function
//!   call `bigtable_history('t')`.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::error::{Error, Result};

/// Timestream's scalar type names that follow `measure_value::`.
const VALUE_TYPES: [&str; 5] = ["double", "bigint", "varchar", "boolean", "timestamp"];

/// The interval spelling of a duration unit.
fn unit_name(unit: &str) -> Option<&'static str> {
    Some(match unit {
        "ns" => "nanoseconds",
        "us" => "microseconds",
        "ms" => "milliseconds",
        "s" => "seconds",
        "m" => "minutes",
        "h" => "hours",
        "d" => "days",
        _ => return None,
    })
}

/// Rewrites `sql` (see the module docs).
pub fn rewrite(sql: &str) -> Result<String> {
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
    let mut i = 0;
    while i < tokens.len() {
        let tok = &tokens[i].token;
        if let Token::Word(w) = tok
            && let Some(end) = with_history_call(&tokens, i)
        {
            out.push_str(&format!(
                "{}('{}')",
                crate::catalog::HISTORY_FUNCTION,
                w.value.replace('\'', "''")
            ));
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
        if let Token::Number(n, false) = tok
            && let Some(Token::Word(w)) = tokens.get(i + 1).map(|t| &t.token)
            && w.quote_style.is_none()
            && let Some(unit) = unit_name(&w.value)
            && n.chars().all(|c| c.is_ascii_digit())
        {
            out.push_str(&format!("INTERVAL '{n} {unit}'"));
            i += 2;
            continue;
        }
        out.push_str(text(i));
        i += 1;
    }
    Ok(out)
}

/// If `name ( with_history => TRUE )` starts at token `i`, the index of its `)`.
fn with_history_call(tokens: &[TokenWithSpan], i: usize) -> Option<usize> {
    let mut rest = tokens
        .iter()
        .enumerate()
        .skip(i + 1)
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)));
    let mut next = || rest.next();
    matches!(next()?.1.token, Token::LParen).then_some(())?;
    matches!(&next()?.1.token, Token::Word(w) if w.value.eq_ignore_ascii_case("with_history"))
        .then_some(())?;
    matches!(next()?.1.token, Token::RArrow).then_some(())?;
    matches!(&next()?.1.token, Token::Word(w) if w.value.eq_ignore_ascii_case("true"))
        .then_some(())?;
    let (end, close) = next()?;
    matches!(close.token, Token::RParen).then_some(end)
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
    }

    #[test]
    fn history_form_becomes_a_table_function() {
        assert_eq!(
            rw("SELECT * FROM `my-t`( with_history => TRUE ) WHERE x"),
            "SELECT * FROM bigtable_history('my-t') WHERE x"
        );
        assert_eq!(
            rw("SELECT f(with_history => FALSE)"),
            "SELECT f(with_history => FALSE)"
        );
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
