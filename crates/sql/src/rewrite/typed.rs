//! GoogleSQL's typed constructors and its `SAFE.` prefix, as token ranges the rewrite
//! replaces (GoogleSQL only):
//! - `ARRAY<T>[a, b]` becomes `CAST([a, b] AS T'[])` (`ARRAY<STRING>[]` is an empty
//!   ARRAY of STRING);
//! - `STRUCT<x T, y U>(a, b)` becomes `named_struct('x', CAST(a AS T'), 'y', …)`, and
//!   `STRUCT<T, U>(a, b)` `struct(CAST(a AS T'), …)`;
//! - `SAFE.f(…)` becomes `__safe(f(…))`, which the analyzer turns into `f` answering
//!   NULL where it fails.
//!
//! `T'` is the type's DataFusion spelling ([`sql_type`]).

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// The GoogleSQL types of a constructor and their DataFusion spellings.
const SCALAR_TYPES: [(&str, &str); 10] = [
    ("int64", "BIGINT"),
    ("float64", "DOUBLE"),
    ("float32", "REAL"),
    ("bool", "BOOLEAN"),
    ("boolean", "BOOLEAN"),
    ("string", "VARCHAR"),
    ("bytes", "BYTEA"),
    ("timestamp", "TIMESTAMP"),
    ("date", "DATE"),
    ("numeric", "DECIMAL(38, 9)"),
];

/// A GoogleSQL type's DataFusion spelling: scalars, `ARRAY<T>` and `STRUCT<…>`.
pub(super) fn sql_type(t: &str) -> Option<String> {
    let t = t.trim();
    let lower = t.to_ascii_lowercase();
    if let Some((_, s)) = SCALAR_TYPES.iter().find(|(g, _)| *g == lower) {
        return Some((*s).to_string());
    }
    let inner = |prefix: &str| {
        lower
            .strip_prefix(prefix)
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('<'))
            .and_then(|r| r.strip_suffix('>'))
            .map(|_| {
                let open = t.find('<').unwrap_or(0);
                &t[open + 1..t.len() - 1]
            })
    };
    if let Some(element) = inner("array") {
        return Some(format!("{}[]", sql_type(element)?));
    }
    if let Some(fields) = inner("struct") {
        let fields: Option<Vec<String>> = split_top(fields)
            .into_iter()
            .map(|f| {
                let f = f.trim();
                let (name, ty) = f.split_once(char::is_whitespace)?;
                Some(format!("{name} {}", sql_type(ty)?))
            })
            .collect();
        return Some(format!("STRUCT({})", fields?.join(", ")));
    }
    None
}

/// `s` split at commas outside `<…>` and `(…)`.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn significant(tokens: &[TokenWithSpan], from: usize) -> Option<usize> {
    (from..tokens.len()).find(|&j| !matches!(tokens[j].token, Token::Whitespace(_)))
}

/// The index of the token closing the bracket or parenthesis at `open`.
fn closing(tokens: &[TokenWithSpan], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index of the `>` closing the `<` at `open` (a `>>` closes two levels).
fn closing_angle(tokens: &[TokenWithSpan], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::Lt => depth += 1,
            Token::Gt => depth -= 1,
            Token::ShiftRight => depth -= 2,
            Token::LParen | Token::RParen | Token::SemiColon => return None,
            _ => {}
        }
        if depth == 0 {
            return Some(j);
        }
        if depth < 0 {
            return None;
        }
    }
    None
}

/// Token ranges of the arguments between the parenthesis at `open` and its `close`.
fn arguments(tokens: &[TokenWithSpan], open: usize, close: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = open + 1;
    for (j, t) in tokens.iter().enumerate().take(close).skip(open + 1) {
        match t.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                out.push(start..j);
                start = j + 1;
            }
            _ => {}
        }
    }
    if tokens[start..close]
        .iter()
        .any(|t| !matches!(t.token, Token::Whitespace(_)))
    {
        out.push(start..close);
    }
    out
}

/// What a constructor at a token becomes.
pub(super) enum Form {
    /// `CAST(` + the rewritten tokens + `suffix`.
    Array {
        literal: std::ops::Range<usize>,
        element: String,
    },
    /// Each argument cast to its field's type.
    Struct {
        fields: Vec<(Option<String>, String)>,
        args: Vec<std::ops::Range<usize>>,
    },
    /// `__safe(` + the rewritten call + `)`.
    Safe { call: std::ops::Range<usize> },
}

/// The constructor or `SAFE.` call starting at token `i`, and the index of its last
/// token.
pub(super) fn form_at(
    tokens: &[TokenWithSpan],
    i: usize,
    text: impl Fn(usize) -> String,
) -> Option<(Form, usize)> {
    let Token::Word(w) = &tokens[i].token else {
        return None;
    };
    if w.quote_style.is_some() {
        return None;
    }
    let word = w.value.to_ascii_lowercase();
    if word == "safe" {
        let dot = significant(tokens, i + 1)?;
        matches!(tokens[dot].token, Token::Period).then_some(())?;
        let name = significant(tokens, dot + 1)?;
        matches!(tokens[name].token, Token::Word(_)).then_some(())?;
        let open = significant(tokens, name + 1)?;
        matches!(tokens[open].token, Token::LParen).then_some(())?;
        let close = closing(tokens, open)?;
        return Some((
            Form::Safe {
                call: name..close + 1,
            },
            close,
        ));
    }
    if word != "array" && word != "struct" {
        return None;
    }
    let lt = significant(tokens, i + 1)?;
    matches!(tokens[lt].token, Token::Lt).then_some(())?;
    let gt = closing_angle(tokens, lt)?;
    let inner: String = (lt + 1..gt).map(&text).collect();
    let open = significant(tokens, gt + 1)?;
    if word == "array" {
        matches!(tokens[open].token, Token::LBracket).then_some(())?;
        let close = closing(tokens, open)?;
        let element = sql_type(&inner)?;
        return Some((
            Form::Array {
                literal: open..close + 1,
                element,
            },
            close,
        ));
    }
    matches!(tokens[open].token, Token::LParen).then_some(())?;
    let close = closing(tokens, open)?;
    let fields: Option<Vec<(Option<String>, String)>> = split_top(&inner)
        .into_iter()
        .map(|f| {
            let f = f.trim();
            match f.split_once(char::is_whitespace) {
                Some((name, ty)) if sql_type(name).is_none() || sql_type(ty).is_some() => {
                    Some((Some(name.to_string()), sql_type(ty)?))
                }
                _ => Some((None, sql_type(f)?)),
            }
        })
        .collect();
    let fields = fields?;
    let args = arguments(tokens, open, close);
    (args.len() == fields.len()).then_some(())?;
    Some((Form::Struct { fields, args }, close))
}

#[cfg(test)]
mod tests {
    use super::sql_type;

    #[test]
    fn types() {
        assert_eq!(sql_type("INT64").as_deref(), Some("BIGINT"));
        assert_eq!(sql_type("ARRAY<STRING>").as_deref(), Some("VARCHAR[]"));
        assert_eq!(
            sql_type("STRUCT<a INT64, b ARRAY<BYTES>>").as_deref(),
            Some("STRUCT(a BIGINT, b BYTEA[])")
        );
        assert_eq!(sql_type("JSON"), None);
    }
}
