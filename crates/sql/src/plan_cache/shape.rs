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

/// Nanoseconds in a millisecond.
const NS_PER_MS: i64 = 1_000_000;

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
    let mut key = String::with_capacity(sql.len());
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
                        Token::Number(..) | Token::SingleQuotedString(_) => push(&mut key, "?"),
                        t => push(&mut key, &t.to_string()),
                    }
                }
                params.extend(values);
                len
            }
            None => {
                push(&mut key, &tokens[i].to_string());
                1
            }
        };
        i += step;
    }
    Some(Shape { key, params })
}

fn push(key: &mut String, text: &str) {
    if !key.is_empty() {
        key.push(' ');
    }
    key.push_str(text);
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

    #[test]
    fn times_and_compared_strings_are_taken_out() {
        let s = shape(
            "SELECT max(usage_user) FROM \"db\".\"cpu\" WHERE hostname = 'host_1' \
             AND time >= from_nanoseconds(1451606400000000000) \
             AND time < from_milliseconds(1451610000000) GROUP BY 1",
        )
        .unwrap_or_else(|| Shape {
            key: String::new(),
            params: vec![],
        });
        assert_eq!(
            s.params,
            vec![
                Param::Text("host_1".into()),
                Param::Time(1_451_606_400_000_000_000),
                Param::Time(1_451_610_000_000_000_000),
            ]
        );
        assert_eq!(
            s.key,
            "SELECT max ( usage_user ) FROM \"db\" . \"cpu\" WHERE hostname = ? AND time >= \
             from_nanoseconds ( ? ) AND time < from_milliseconds ( ? ) GROUP BY 1"
        );
    }

    #[test]
    fn another_instance_has_the_same_key_and_other_values() {
        let a = "SELECT * FROM t WHERE h IN ('a', 'b') AND time > from_nanoseconds(5)";
        let b = "select * from t where h in ('c','d')\n and time > from_nanoseconds(7) -- x";
        assert_eq!(
            key(a).to_lowercase(),
            key(b).to_lowercase(),
            "spaces and comments do not count"
        );
        let c = "SELECT * FROM t WHERE h IN ('a', 'b', 'c') AND time > from_nanoseconds(5)";
        assert_ne!(key(a), key(c), "a longer list is another shape");
        assert_eq!(
            shape(b).map(|s| s.params),
            Some(vec![
                Param::Text("c".into()),
                Param::Text("d".into()),
                Param::Time(7)
            ])
        );
    }

    #[test]
    fn other_literals_stay_in_the_key() {
        let params = |sql: &str| shape(sql).map(|s| s.params);
        assert_eq!(params("SELECT 1, 'a' FROM t WHERE x > 3"), Some(vec![]));
        assert_eq!(
            key("SELECT 1, 'a' FROM t WHERE x > 3"),
            "SELECT 1 , 'a' FROM t WHERE x > 3"
        );
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
}
