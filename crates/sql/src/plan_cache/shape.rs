//! A query's shape: its text with the values a dashboard or a benchmark changes from
//! one run to the next taken out, and those values.
//!
//! Two kinds of literal are taken out, each where it reaches a plan as one literal of
//! its own:
//! - the integer of `from_nanoseconds(n)` / `from_milliseconds(n)`: a timestamp,
//!   held as nanoseconds (the functions fold to one, [`crate::functions`]);
//! - a string compared with a name, `name = 'v'`, or listed after one,
//!   `name IN ('a', 'b')`.
//!
//! Everything else — the other literals, names, keywords, how many values a list
//! holds — stays in the key. Spaces and comments do not count.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// What stands in a key for a value taken out.
const VALUE: &str = "#value";
/// Nanoseconds in a millisecond.
pub(super) const NS_PER_MS: i64 = 1_000_000;

/// A value taken out of a query's text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Param {
    /// A timestamp, in nanoseconds.
    Time(i64),
    /// A string.
    Text(String),
}

/// A query's key and the values taken out of it, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) key: String,
    pub(crate) params: Vec<Param>,
}

/// The shape of `sql` (as [`crate::rewrite`] leaves it), or `None` if it does not
/// tokenize. A query without values to take out is its own shape.
pub(crate) fn shape(sql: &str) -> Option<Shape> {
    let tokens: Vec<Token> = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .ok()?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut key = String::with_capacity(sql.len() * 3);
    let mut params = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let taken = epoch_call(&tokens[i..])
            .or_else(|| compared_text(&tokens[i..]))
            .or_else(|| listed_texts(&tokens[i..]));
        let step = match taken {
            Some((len, values)) => {
                for t in &tokens[i..i + len] {
                    match t {
                        Token::Number(..) | Token::SingleQuotedString(_) => push(&mut key, None),
                        t => push(&mut key, Some(t)),
                    }
                }
                params.extend(values);
                len
            }
            None => {
                push(&mut key, Some(&tokens[i]));
                1
            }
        };
        i += step;
    }
    Some(Shape { key, params })
}

/// Appends a token to a key, or [`VALUE`] for a value taken out. Tokens go in as
/// their debug form, which quotes and escapes their text and names their kind: no
/// two token sequences share a key, and no token reads as [`VALUE`].
fn push(key: &mut String, token: Option<&Token>) {
    use std::fmt::Write as _;
    if !key.is_empty() {
        key.push(' ');
    }
    match token {
        Some(t) => {
            let _ = write!(key, "{t:?}");
        }
        None => key.push_str(VALUE),
    }
}

/// `from_nanoseconds ( n )` or `from_milliseconds ( n )`: four tokens and the time.
fn epoch_call(t: &[Token]) -> Option<(usize, Vec<Param>)> {
    let [
        Token::Word(w),
        Token::LParen,
        Token::Number(n, false),
        Token::RParen,
        ..,
    ] = t
    else {
        return None;
    };
    if w.quote_style.is_some() {
        return None;
    }
    let per_unit = if w.value.eq_ignore_ascii_case("from_nanoseconds") {
        1
    } else if w.value.eq_ignore_ascii_case("from_milliseconds") {
        NS_PER_MS
    } else {
        return None;
    };
    let ns = n.parse::<i64>().ok()?.checked_mul(per_unit)?;
    Some((4, vec![Param::Time(ns)]))
}

/// `name = 'v'`: three tokens and the string.
fn compared_text(t: &[Token]) -> Option<(usize, Vec<Param>)> {
    let [Token::Word(_), Token::Eq, Token::SingleQuotedString(s), ..] = t else {
        return None;
    };
    Some((3, vec![Param::Text(s.clone())]))
}

/// `name IN ( 'a' , 'b' … )`: the list's tokens and its strings, if it holds strings
/// only.
fn listed_texts(t: &[Token]) -> Option<(usize, Vec<Param>)> {
    let [Token::Word(_), Token::Word(kw), Token::LParen, ..] = t else {
        return None;
    };
    if kw.keyword != Keyword::IN || kw.quote_style.is_some() {
        return None;
    }
    let mut values = Vec::new();
    let mut i = 3;
    loop {
        let Some(Token::SingleQuotedString(s)) = t.get(i) else {
            return None;
        };
        values.push(Param::Text(s.clone()));
        match t.get(i + 1)? {
            Token::Comma => i += 2,
            Token::RParen => return Some((i + 2, values)),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sql: &str) -> String {
        shape(sql).map(|s| s.key).unwrap_or_default()
    }

    fn params(sql: &str) -> Option<Vec<Param>> {
        shape(sql).map(|s| s.params)
    }

    #[test]
    fn times_and_compared_strings_are_taken_out() {
        let a = "SELECT max(usage_user) FROM \"db\".\"cpu\" WHERE hostname = 'host_1' \
                 AND time >= from_nanoseconds(1451606400000000000) \
                 AND time < from_milliseconds(1451610000000) GROUP BY 1";
        assert_eq!(
            params(a),
            Some(vec![
                Param::Text("host_1".into()),
                Param::Time(1_451_606_400_000_000_000),
                Param::Time(1_451_610_000_000_000_000),
            ])
        );
        let b = "SELECT max(usage_user) FROM \"db\".\"cpu\" WHERE hostname = 'host_2' \
                 AND time >= from_nanoseconds(1) AND time < from_milliseconds(2) GROUP BY 1";
        assert_eq!(key(a), key(b));
        assert!(!key(a).is_empty());
    }

    #[test]
    fn another_instance_has_the_same_key_and_other_values() {
        let a = "SELECT * FROM t WHERE h IN ('a', 'b') AND time > from_nanoseconds(5)";
        let b = "SELECT * FROM t WHERE h IN ('c','d')\n AND time > from_nanoseconds(7) -- x";
        assert_eq!(key(a), key(b), "spaces and comments do not count");
        assert_ne!(key(a), key(&a.to_lowercase()), "names are case-sensitive");
        let c = "SELECT * FROM t WHERE h IN ('a', 'b', 'c') AND time > from_nanoseconds(5)";
        assert_ne!(key(a), key(c), "a longer list is another shape");
        assert_eq!(
            params(b),
            Some(vec![
                Param::Text("c".into()),
                Param::Text("d".into()),
                Param::Time(7)
            ])
        );
    }

    #[test]
    fn other_literals_stay_in_the_key() {
        assert_eq!(params("SELECT 1, 'a' FROM t WHERE x > 3"), Some(vec![]));
        assert_ne!(key("SELECT 1 FROM t"), key("SELECT 2 FROM t"));
        assert_eq!(
            params("SELECT date_trunc('hour', time) FROM t"),
            Some(vec![])
        );
        // A string before `=` is no name, a list with a number is no list of strings.
        assert_eq!(
            params("SELECT CASE WHEN 'a' = 'a' THEN 1 END"),
            Some(vec![])
        );
        assert_eq!(params("SELECT * FROM t WHERE h IN ('a', 1)"), Some(vec![]));
        // A timestamp past the range of nanoseconds stays a literal.
        assert_eq!(
            params("SELECT from_milliseconds(9223372036854775807)"),
            Some(vec![])
        );
        assert_eq!(shape("SELECT 'unterminated"), None);
    }

    #[test]
    fn no_two_texts_share_a_key() {
        // Quotes inside a text are no token boundary, nor is an unbound `?` a value.
        assert_ne!(
            key("SELECT 'a'' , ''b' FROM t"),
            key("SELECT 'a' , 'b' FROM t")
        );
        assert_ne!(
            key("SELECT * FROM t WHERE h = ? AND time > from_nanoseconds(5)"),
            key("SELECT * FROM t WHERE h = 'x' AND time > from_nanoseconds(5)")
        );
        assert_ne!(key("SELECT \"a b\" FROM t"), key("SELECT a b FROM t"));
        assert_ne!(key("SELECT \"a\" FROM t"), key("SELECT a FROM t"));
    }
}
