//! ListBackups' `filter` and `order_by` (AIP-160 and AIP-132, the subset the Table
//! Admin API documents): `field OP value` terms over `name`, `source_table`, `state`,
//! `start_time`, `end_time`, `expire_time` and `size_bytes`, with `OP` one of `<`,
//! `>`, `<=`, `>=`, `!=`, `=` or `:` (has: the text contains the value), joined by
//! `AND`, `OR` and `NOT` and grouped by parentheses; terms side by side are ANDed.
//! Times are `YYYY-MM-DDTHH:MM:SSZ`. Keywords and field names are case-insensitive.

use std::cmp::Ordering;

use almanac_api::google::bigtable::admin::v2 as pb;

use crate::convert::micros;

/// Longest filter or order_by accepted.
pub const MAX_FILTER_CHARS: usize = 2_048;
/// Deepest nesting of parentheses and NOTs.
const MAX_DEPTH: usize = 32;

/// A parsed filter.
#[derive(Debug)]
pub enum Filter {
    /// Every term holds.
    And(Vec<Filter>),
    /// Some term holds.
    Or(Vec<Filter>),
    /// The term does not hold.
    Not(Box<Filter>),
    /// `field op value`.
    Term(Field, Op, String),
}

/// A field a filter or ordering names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Name,
    SourceTable,
    State,
    StartTime,
    EndTime,
    ExpireTime,
    SizeBytes,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Gt,
    Le,
    Ge,
    Ne,
    Eq,
    Has,
}

fn field(name: &str) -> Result<Field, String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "name" => Field::Name,
        "source_table" => Field::SourceTable,
        "state" => Field::State,
        "start_time" => Field::StartTime,
        "end_time" => Field::EndTime,
        "expire_time" => Field::ExpireTime,
        "size_bytes" => Field::SizeBytes,
        _ => {
            return Err(format!(
                "unknown backup field {name:?}: name, source_table, state, start_time, \
                 end_time, expire_time and size_bytes can be filtered and ordered by"
            ));
        }
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Op(Op),
    Word(String),
    Quoted(String),
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let two = b.get(i + 1).copied();
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => (out.push(Token::Open), i += 1).1,
            b')' => (out.push(Token::Close), i += 1).1,
            b'<' | b'>' | b'!' | b'=' | b':' => {
                let (op, n) = match (c, two) {
                    (b'<', Some(b'=')) => (Op::Le, 2),
                    (b'>', Some(b'=')) => (Op::Ge, 2),
                    (b'!', Some(b'=')) => (Op::Ne, 2),
                    (b'<', _) => (Op::Lt, 1),
                    (b'>', _) => (Op::Gt, 1),
                    (b'=', _) => (Op::Eq, 1),
                    (b':', _) => (Op::Has, 1),
                    _ => return Err(format!("unexpected '!' at offset {i} of the filter")),
                };
                out.push(Token::Op(op));
                i += n;
            }
            b'"' | b'\'' => {
                let mut s = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err("a quoted value of the filter is not closed".into()),
                        Some(&q) if q == c => break,
                        Some(b'\\') if i + 1 < b.len() => {
                            s.push(b[i + 1]);
                            i += 2;
                        }
                        Some(&x) => {
                            s.push(x);
                            i += 1;
                        }
                    }
                }
                i += 1;
                out.push(Token::Quoted(String::from_utf8_lossy(&s).into_owned()));
            }
            _ => {
                let start = i;
                while i < b.len() && !b" \t\n\r()<>!=:\"'".contains(&b[i]) {
                    i += 1;
                }
                out.push(Token::Word(text[start..i].to_owned()));
            }
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn keyword(&self, k: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(k))
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the filter nests deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    /// or := and ("OR" and)*
    fn or(&mut self) -> Result<Filter, String> {
        let mut terms = vec![self.and()?];
        while self.keyword("OR") {
            self.at += 1;
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Filter::Or(terms)
        })
    }

    /// and := unary (["AND"] unary)*
    fn and(&mut self) -> Result<Filter, String> {
        let mut terms = vec![self.unary()?];
        loop {
            if self.keyword("AND") {
                self.at += 1;
            } else if self.keyword("OR") || matches!(self.peek(), None | Some(Token::Close)) {
                break;
            }
            terms.push(self.unary()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Filter::And(terms)
        })
    }

    fn unary(&mut self) -> Result<Filter, String> {
        if self.keyword("NOT") || self.peek() == Some(&Token::Word("-".into())) {
            self.at += 1;
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Filter::Not(Box::new(inner)));
        }
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            self.deeper()?;
            let inner = self.or()?;
            self.depth -= 1;
            if self.peek() != Some(&Token::Close) {
                return Err("a '(' of the filter is not closed".into());
            }
            self.at += 1;
            return Ok(inner);
        }
        let Some(Token::Word(name)) = self.peek().cloned() else {
            return Err("the filter expects a field name".into());
        };
        let f = field(&name)?;
        self.at += 1;
        let Some(Token::Op(op)) = self.peek().cloned() else {
            return Err(format!("the filter expects an operator after {name}"));
        };
        self.at += 1;
        let value = match self.peek().cloned() {
            Some(Token::Word(v) | Token::Quoted(v)) => v,
            _ => return Err(format!("the filter expects a value after {name}")),
        };
        self.at += 1;
        Ok(Filter::Term(f, op, value))
    }
}

/// Parses a filter (an empty one keeps every backup).
pub fn parse(text: &str) -> Result<Option<Filter>, String> {
    if text.len() > MAX_FILTER_CHARS {
        return Err(format!(
            "the filter is {} characters, over the limit of {MAX_FILTER_CHARS}",
            text.len()
        ));
    }
    let tokens = tokens(text)?;
    if tokens.is_empty() {
        return Ok(None);
    }
    let mut p = Parser {
        tokens,
        at: 0,
        depth: 0,
    };
    let f = p.or()?;
    if p.at != p.tokens.len() {
        return Err(format!("unexpected {:?} in the filter", p.tokens[p.at]));
    }
    Ok(Some(f))
}

/// A backup's value of `field`, as text or a number.
enum Value<'a> {
    Text(&'a str),
    Number(i64),
}

fn value(b: &pb::Backup, f: Field) -> Value<'_> {
    let time = |t: &Option<prost_types::Timestamp>| Value::Number(t.as_ref().map_or(0, micros));
    match f {
        Field::Name => Value::Text(&b.name),
        Field::SourceTable => Value::Text(&b.source_table),
        Field::State => Value::Text(if b.state == pb::backup::State::Ready as i32 {
            "READY"
        } else {
            "CREATING"
        }),
        Field::StartTime => time(&b.start_time),
        Field::EndTime => time(&b.end_time),
        Field::ExpireTime => time(&b.expire_time),
        Field::SizeBytes => Value::Number(b.size_bytes),
    }
}

/// The number a filter's value stands for on `field` (µs for times).
fn number(f: Field, v: &str) -> Result<i64, String> {
    if f == Field::SizeBytes {
        return v
            .parse()
            .map_err(|_| format!("size_bytes is compared with a whole number, not {v:?}"));
    }
    almanac_engine::calendar::parse_rfc3339_secs(v)
        .map(|s| s.saturating_mul(1_000_000))
        .ok_or_else(|| format!("times are compared with YYYY-MM-DDTHH:MM:SSZ, not {v:?}"))
}

/// Whether backup `b` passes `filter`.
pub fn matches(filter: &Filter, b: &pb::Backup) -> Result<bool, String> {
    Ok(match filter {
        Filter::And(t) => {
            for f in t {
                if !matches(f, b)? {
                    return Ok(false);
                }
            }
            true
        }
        Filter::Or(t) => {
            for f in t {
                if matches(f, b)? {
                    return Ok(true);
                }
            }
            false
        }
        Filter::Not(f) => !matches(f, b)?,
        Filter::Term(f, op, v) => {
            let ord = match value(b, *f) {
                Value::Text(t) if *op == Op::Has => {
                    return Ok(t.to_ascii_lowercase().contains(&v.to_ascii_lowercase()));
                }
                Value::Text(t) => t.to_ascii_lowercase().cmp(&v.to_ascii_lowercase()),
                Value::Number(n) => n.cmp(&number(*f, v)?),
            };
            match op {
                Op::Lt => ord == Ordering::Less,
                Op::Gt => ord == Ordering::Greater,
                Op::Le => ord != Ordering::Greater,
                Op::Ge => ord != Ordering::Less,
                Op::Ne => ord != Ordering::Equal,
                Op::Eq | Op::Has => ord == Ordering::Equal,
            }
        }
    })
}

/// Sorts `backups` by `order_by` (`field [asc|desc], …`); empty: newest start first.
pub fn sort(backups: &mut [pb::Backup], order_by: &str) -> Result<(), String> {
    if order_by.len() > MAX_FILTER_CHARS {
        return Err(format!(
            "order_by is {} characters, over the limit of {MAX_FILTER_CHARS}",
            order_by.len()
        ));
    }
    let mut keys = Vec::new();
    for part in order_by.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut words = part.split_whitespace();
        let f = field(words.next().unwrap_or_default())?;
        let desc = match words.next().map(str::to_ascii_lowercase).as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(other) => return Err(format!("order_by direction {other:?}: asc or desc")),
        };
        keys.push((f, desc));
    }
    if keys.is_empty() {
        keys.push((Field::StartTime, true));
    }
    keys.push((Field::Name, false));
    backups.sort_by(|a, b| {
        for &(f, desc) in &keys {
            let ord = match (value(a, f), value(b, f)) {
                (Value::Text(x), Value::Text(y)) => x.cmp(y),
                (Value::Number(x), Value::Number(y)) => x.cmp(&y),
                _ => Ordering::Equal,
            };
            let ord = if desc { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::convert::timestamp;

    fn backup(name: &str, table: &str, start_s: i64, size: i64) -> pb::Backup {
        pb::Backup {
            name: format!("projects/p/instances/i/clusters/c/backups/{name}"),
            source_table: format!("projects/p/instances/i/tables/{table}"),
            start_time: Some(timestamp(start_s * 1_000_000)),
            size_bytes: size,
            state: pb::backup::State::Ready as i32,
            ..pb::Backup::default()
        }
    }

    fn pass(filter: &str, b: &pb::Backup) -> bool {
        parse(filter)
            .unwrap()
            .is_none_or(|f| matches(&f, b).unwrap())
    }

    #[test]
    fn documented_examples_filter_as_the_api_describes() {
        let b = backup("howl-1", "prod-users", 1_522_248_000, 20_000_000_000); // 2018-03-28T14:40Z
        assert!(pass("name:howl", &b));
        assert!(pass("source_table:prod", &b));
        assert!(pass("state:READY", &b) && !pass("state:CREATING", &b));
        assert!(pass(
            r#"(name:howl) AND (start_time < "2018-03-28T14:50:00Z")"#,
            &b
        ));
        assert!(!pass(
            r#"(name:howl) AND (start_time > "2018-03-28T14:50:00Z")"#,
            &b
        ));
        assert!(pass("size_bytes > 10000000000", &b));
        assert!(pass("name:nope OR size_bytes >= 20000000000", &b));
        assert!(pass("NOT name:nope name:HOWL", &b));
        assert!(pass("", &b));
        for bad in [
            "name",
            "name:",
            "colour:red",
            "(name:x",
            "size_bytes > big",
            "start_time < soon",
        ] {
            let r = parse(bad).and_then(|f| f.map_or(Ok(true), |f| matches(&f, &b)));
            assert!(r.is_err(), "{bad}");
        }
        assert!(parse(&"(".repeat(100)).is_err());
    }

    #[test]
    fn order_by_sorts_by_each_key_then_name() {
        let mut v = vec![
            backup("a", "t", 3, 10),
            backup("b", "t", 1, 30),
            backup("c", "t", 2, 20),
        ];
        sort(&mut v, "").unwrap();
        assert!(v[0].name.ends_with("/a") && v[2].name.ends_with("/b"));
        sort(&mut v, "size_bytes desc").unwrap();
        assert!(v[0].name.ends_with("/b"));
        sort(&mut v, " name ").unwrap();
        assert!(v[0].name.ends_with("/a"));
        assert!(sort(&mut v, "colour").is_err() && sort(&mut v, "name sideways").is_err());
    }
}
