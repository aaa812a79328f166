//! Test vocabulary shared by the filter tests: a compact text syntax for cells,
//! filters and plans, so that tests and golden scripts read like the proto's
//! examples.
//!
//! - Cell: `family:qualifier@timestamp=value`, with `[label]` appended on output.
//!   Qualifiers and values use `\xHH` for any byte and `\\` for a backslash; `@` in
//!   a qualifier is `\x40`.
//! - Filter: an s-expression. Atoms `pass`, `block`, `sink`, `strip`; lists
//!   `(chain F…)`, `(interleave F…)`, `(cond P T F)` (`_` for a missing branch),
//!   `(key "re")`, `(sample P)`, `(family "re")`, `(qual "re")`, `(value "re")`,
//!   `(cols "fam" LO HI)`, `(vrange LO HI)` with `LO` one of `>= "x"`, `> "x"`, `*`
//!   and `HI` one of `<= "x"`, `< "x"`, `*`, `(ts START END)` (`_` for no end),
//!   `(offset N)`, `(limit N)`, `(col-limit N)`, `(label "l")`.
//!   In quoted strings `\"` is a quote, `\\` a backslash, `\xHH` a byte and `\n` a
//!   newline; any other backslash is kept, so regex escapes such as `\C` or `\d`
//!   are written as is.

#![allow(clippy::panic, reason = "tests")]

use std::ops::Bound;
use std::sync::Arc;

use super::RowFilter;
use crate::cell::Cell;
use crate::plan::{ColumnSelection, QualifierRange, ReadPlan};

/// A cell without labels.
pub fn cell(family: &str, qualifier: &[u8], timestamp_us: i64, value: &[u8]) -> Cell {
    Cell {
        family: Arc::from(family),
        qualifier: Arc::from(qualifier),
        timestamp_us,
        value: value.to_vec(),
        labels: Vec::new(),
    }
}

/// Decodes `\xHH` and `\\` (and, if `quoted`, `\"` and `\n`); other escapes are kept.
pub fn unescape(text: &str, quoted: bool) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 >= bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match bytes[i + 1] {
            b'x' => {
                let hex = text
                    .get(i + 2..i + 4)
                    .ok_or_else(|| format!("short \\x in {text:?}"))?;
                out.push(u8::from_str_radix(hex, 16).map_err(|e| format!("{e} in {text:?}"))?);
                i += 4;
            }
            b'\\' => {
                out.push(b'\\');
                i += 2;
            }
            b'"' if quoted => {
                out.push(b'"');
                i += 2;
            }
            b'n' if quoted => {
                out.push(b'\n');
                i += 2;
            }
            _ => {
                out.push(b'\\');
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Encodes bytes for the cell syntax: printable ASCII as is, except `\` and the
/// bytes in `special`.
pub fn escape(bytes: &[u8], special: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        if b == b'\\' {
            out.push_str("\\\\");
        } else if b.is_ascii_graphic() && !special.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Parses `family:qualifier@timestamp=value`.
pub fn parse_cell(line: &str) -> Result<Cell, String> {
    let (family, rest) = line
        .split_once(':')
        .ok_or_else(|| format!("no ':' in cell {line:?}"))?;
    let (qualifier, rest) = rest
        .split_once('@')
        .ok_or_else(|| format!("no '@' in cell {line:?}"))?;
    let (ts, value) = rest
        .split_once('=')
        .ok_or_else(|| format!("no '=' in cell {line:?}"))?;
    let ts = ts
        .parse()
        .map_err(|e| format!("bad timestamp in {line:?}: {e}"))?;
    Ok(cell(
        family,
        &unescape(qualifier, false)?,
        ts,
        &unescape(value, false)?,
    ))
}

/// Formats a cell as `family:qualifier@timestamp=value [labels]`.
pub fn show_cell(c: &Cell) -> String {
    let mut s = format!(
        "{}:{}@{}={}",
        c.family,
        escape(&c.qualifier, b"@"),
        c.timestamp_us,
        escape(&c.value, b"")
    );
    if !c.labels.is_empty() {
        s.push_str(&format!(" [{}]", c.labels.join(",")));
    }
    s
}

/// Formats cells one per line, or `(empty)`.
pub fn show_cells(cells: &[Cell]) -> Vec<String> {
    if cells.is_empty() {
        return vec!["(empty)".to_owned()];
    }
    cells.iter().map(show_cell).collect()
}

/// Formats a plan on one line.
pub fn show_plan(plan: &ReadPlan) -> String {
    let columns = match &plan.columns {
        ColumnSelection::All => "all".to_owned(),
        ColumnSelection::Families(m) if m.is_empty() => "none".to_owned(),
        ColumnSelection::Families(m) => m
            .iter()
            .map(|(fam, ranges)| {
                let ranges: Vec<String> = ranges.iter().map(show_range).collect();
                format!("{fam}{{{}}}", ranges.join(" "))
            })
            .collect::<Vec<_>>()
            .join(" "),
    };
    let start = if plan.ts_start_us == i64::MIN {
        "-inf".to_owned()
    } else {
        plan.ts_start_us.to_string()
    };
    let end = plan.ts_end_us.map_or("inf".to_owned(), |e| e.to_string());
    let limit = plan
        .cells_per_column
        .map_or("none".to_owned(), |n| n.to_string());
    format!("columns={columns} ts=[{start},{end}) cells_per_column={limit}")
}

fn show_range(r: &QualifierRange) -> String {
    let start = match &r.start {
        Bound::Unbounded => "*".to_owned(),
        Bound::Included(s) => format!("[{}", escape(s, b"")),
        Bound::Excluded(s) => format!("({}", escape(s, b"")),
    };
    let end = match &r.end {
        Bound::Unbounded => "*".to_owned(),
        Bound::Included(e) => format!("{}]", escape(e, b"")),
        Bound::Excluded(e) => format!("{})", escape(e, b"")),
    };
    format!("{start}..{end}")
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Str(Vec<u8>),
    Atom(String),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            c if c.is_whitespace() => {}
            '"' => {
                let mut end = None;
                let mut escaped = false;
                for (j, d) in chars.by_ref() {
                    match d {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => {
                            end = Some(j);
                            break;
                        }
                        _ => escaped = false,
                    }
                }
                let end = end.ok_or_else(|| format!("unterminated string in {text:?}"))?;
                tokens.push(Token::Str(unescape(&text[i + 1..end], true)?));
            }
            _ => {
                let mut end = text.len();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_whitespace() || d == '(' || d == ')' {
                        end = j;
                        break;
                    }
                    chars.next();
                }
                tokens.push(Token::Atom(text[i..end].to_owned()));
            }
        }
    }
    Ok(tokens)
}

/// Parses a filter s-expression (see the module docs).
pub fn parse_filter(text: &str) -> Result<RowFilter, String> {
    let tokens = tokenize(text)?;
    let mut p = Parser { tokens, pos: 0 };
    let f = p.filter()?;
    if p.pos != p.tokens.len() {
        return Err(format!("trailing input in {text:?}"));
    }
    Ok(f)
}

/// Parses a filter, panicking on a syntax error: for unit tests.
pub fn f(text: &str) -> RowFilter {
    parse_filter(text).unwrap_or_else(|e| panic!("bad filter {text:?}: {e}"))
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn next(&mut self) -> Result<Token, String> {
        let t = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or("unexpected end of filter")?;
        self.pos += 1;
        Ok(t)
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        match self.next()? {
            Token::Str(s) => Ok(s),
            t => Err(format!("expected a string, got {t:?}")),
        }
    }

    fn text(&mut self) -> Result<String, String> {
        String::from_utf8(self.string()?).map_err(|e| e.to_string())
    }

    fn atom(&mut self) -> Result<String, String> {
        match self.next()? {
            Token::Atom(a) => Ok(a),
            t => Err(format!("expected an atom, got {t:?}")),
        }
    }

    fn number<T: std::str::FromStr>(&mut self) -> Result<T, String> {
        let a = self.atom()?;
        a.parse().map_err(|_| format!("bad number {a:?}"))
    }

    fn bound(&mut self, lower: bool) -> Result<Bound<Vec<u8>>, String> {
        match (self.atom()?.as_str(), lower) {
            ("*", _) => Ok(Bound::Unbounded),
            (">=", true) | ("<=", false) => Ok(Bound::Included(self.string()?)),
            (">", true) | ("<", false) => Ok(Bound::Excluded(self.string()?)),
            (a, _) => Err(format!("bad bound {a:?}")),
        }
    }

    fn branch(&mut self) -> Result<Option<Box<RowFilter>>, String> {
        if self.tokens.get(self.pos) == Some(&Token::Atom("_".to_owned())) {
            self.pos += 1;
            return Ok(None);
        }
        Ok(Some(Box::new(self.filter()?)))
    }

    fn list(&mut self) -> Result<Vec<RowFilter>, String> {
        let mut out = Vec::new();
        while self.tokens.get(self.pos) != Some(&Token::Close) {
            out.push(self.filter()?);
        }
        Ok(out)
    }

    fn filter(&mut self) -> Result<RowFilter, String> {
        match self.next()? {
            Token::Atom(a) => match a.as_str() {
                "pass" => Ok(RowFilter::PassAll),
                "block" => Ok(RowFilter::BlockAll),
                "sink" => Ok(RowFilter::Sink),
                "strip" => Ok(RowFilter::StripValue),
                other => Err(format!("unknown filter {other:?}")),
            },
            Token::Open => {
                let head = self.atom()?;
                let f = match head.as_str() {
                    "chain" => RowFilter::Chain(self.list()?),
                    "interleave" => RowFilter::Interleave(self.list()?),
                    "cond" => RowFilter::Condition {
                        predicate: Box::new(self.filter()?),
                        true_filter: self.branch()?,
                        false_filter: self.branch()?,
                    },
                    "key" => RowFilter::RowKeyRegex(self.string()?),
                    "sample" => RowFilter::RowSample(self.number()?),
                    "family" => RowFilter::FamilyNameRegex(self.text()?),
                    "qual" => RowFilter::ColumnQualifierRegex(self.string()?),
                    "value" => RowFilter::ValueRegex(self.string()?),
                    "cols" => RowFilter::ColumnRange {
                        family: self.text()?,
                        start: self.bound(true)?,
                        end: self.bound(false)?,
                    },
                    "vrange" => RowFilter::ValueRange {
                        start: self.bound(true)?,
                        end: self.bound(false)?,
                    },
                    "ts" => {
                        let start_us = self.number()?;
                        let end = self.atom()?;
                        let end_us = if end == "_" {
                            None
                        } else {
                            Some(end.parse().map_err(|_| "bad ts end")?)
                        };
                        RowFilter::TimestampRange { start_us, end_us }
                    }
                    "offset" => RowFilter::CellsPerRowOffset(self.number()?),
                    "limit" => RowFilter::CellsPerRowLimit(self.number()?),
                    "col-limit" => RowFilter::CellsPerColumnLimit(self.number()?),
                    "label" => RowFilter::ApplyLabel(self.text()?),
                    other => return Err(format!("unknown filter ({other} …)")),
                };
                match self.next()? {
                    Token::Close => Ok(f),
                    t => Err(format!("expected ')' after ({head} …), got {t:?}")),
                }
            }
            t => Err(format!("expected a filter, got {t:?}")),
        }
    }
}
