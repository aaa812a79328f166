//! The body of a WriteRecords request, parsed by hand straight into the model's
//! [`Record`]s.
//!
//! Why: WriteRecords is the hot path of ingest, and serde's derive spent about a
//! quarter of a request's server CPU (matching member names through serde's visitor
//! machinery, validating UTF-8 string by string). Here the body is validated as UTF-8
//! once, every string without escapes is borrowed from it, members are matched
//! directly, and each record's two lists are gathered in reused scratch lists and
//! moved out once at their exact length.
//!
//! One body, step by step:
//! 1. Check the body is UTF-8 (so any slice between ASCII delimiters is a `&str`).
//! 2. Read the top-level object: `DatabaseName`, `TableName`, `CommonAttributes` and
//!    `Records` are parsed; any other member is skipped after a syntax check (the
//!    operation does not use it).
//! 3. Each record: `Dimensions`, `MeasureName`, `MeasureValue`, `MeasureValueType`,
//!    `MeasureValues`, `Time`, `TimeUnit`, `Version`; unknown members skipped, a
//!    repeated member is an error, `null` is an absent optional member. A dimension or
//!    measure value written as the SDKs write it (compact, `Name`, `Value`[, `Type`] in
//!    that order, nothing else) is read in one pass; any other spelling goes back to
//!    its start and takes the general path. Strings are scanned eight bytes at a time.
//! 4. Nothing but whitespace may follow the object.
//!
//! The differential fuzz in the tests holds this to serde_json's derive of the
//! botocore shapes (kept there as the oracle) on random and mutated bodies: the same
//! records, or an error for both. One difference is deliberate: serde's derive also
//! reads a struct from an array of its fields in order (`"CommonAttributes": []`);
//! this parser wants an object there, as the service's JSON protocol does. And a body
//! that is not UTF-8 is refused even where the bad bytes sit in a member serde_json
//! would skip unread.

use std::borrow::Cow;

use almanac_timeseries::{Dimension, MeasureValue, Record};

/// Nesting depth of skipped values accepted (serde_json's recursion limit).
const MAX_DEPTH: usize = 128;

type Result<T> = std::result::Result<T, String>;

/// A WriteRecords request.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WriteRequest<'a> {
    /// `DatabaseName`.
    pub database_name: Option<String>,
    /// `TableName`.
    pub table_name: Option<String>,
    /// `CommonAttributes`.
    pub common_attributes: Option<Record<'a>>,
    /// `Records`.
    pub records: Vec<Record<'a>>,
}

/// Parses a WriteRecords body (an empty body is an empty request).
pub fn parse_write_records(body: &[u8]) -> Result<WriteRequest<'_>> {
    let mut req = WriteRequest::default();
    if body.is_empty() {
        return Ok(req);
    }
    let text = std::str::from_utf8(body).map_err(|e| format!("the body is not UTF-8: {e}"))?;
    let mut p = Parser {
        text,
        pos: 0,
        dimensions: Vec::new(),
        measure_values: Vec::new(),
    };
    let mut seen = Seen::default();
    p.object(|p, key| {
        match &*key {
            "DatabaseName" => {
                seen.once(&key, 0)?;
                req.database_name = p.optional(Parser::string)?.map(Cow::into_owned);
            }
            "TableName" => {
                seen.once(&key, 1)?;
                req.table_name = p.optional(Parser::string)?.map(Cow::into_owned);
            }
            "CommonAttributes" => {
                seen.once(&key, 2)?;
                req.common_attributes = p.optional(Parser::record)?;
            }
            "Records" => {
                seen.once(&key, 3)?;
                req.records = p.array(Parser::record)?;
            }
            _ => p.skip_value(0)?,
        }
        Ok(())
    })?;
    p.ws();
    if p.pos < p.text.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(req)
}

/// Bytes that end a run of plain string characters: the closing quote, a backslash
/// (an escape) and the control characters JSON forbids inside strings.
const ENDS_RUN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = true;
        b += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// The index of the first byte at or after `from` that ends a run of plain string
/// characters ([`ENDS_RUN`]), eight bytes at a time: a word's bytes equal to `"` or
/// `\\`, or below 0x20, set their high bit in `found` (the borrow of the subtraction
/// can only mark bytes above the first real match, so the lowest mark is exact).
fn run_end(bytes: &[u8], from: usize) -> Option<usize> {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(LOW) & !x & HIGH;
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let v = u64::from_le_bytes(w);
        let found = zero_byte(v ^ (LOW * u64::from(b'"')))
            | zero_byte(v ^ (LOW * u64::from(b'\\')))
            | (v.wrapping_sub(LOW * 0x20) & !v & HIGH);
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i.min(bytes.len())..]
        .iter()
        .position(|&b| ENDS_RUN[usize::from(b)])
        .map(|n| i + n)
}

/// Members of one object already read (serde's derive refuses a repeated field).
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn once(&mut self, key: &str, bit: u32) -> Result<()> {
        if self.0 & (1 << bit) != 0 {
            return Err(format!("duplicate field `{key}`"));
        }
        self.0 |= 1 << bit;
        Ok(())
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    /// Scratch for the dimensions of the record being read.
    dimensions: Vec<Dimension<'a>>,
    /// Scratch for its measure values.
    measure_values: Vec<MeasureValue<'a>>,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> String {
        format!("{what} at byte {}", self.pos)
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes().get(self.pos).copied()
    }

    #[inline]
    fn expect(&mut self, b: u8) -> Result<()> {
        // Compact JSON has no whitespace between tokens: try the byte itself first.
        if self.bytes().get(self.pos) == Some(&b) || self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.expected(b))
        }
    }

    #[cold]
    fn expected(&self, b: u8) -> String {
        self.err(&format!("expected `{}`", b as char))
    }

    fn literal(&mut self, word: &str) -> Result<()> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("expected a value"))
        }
    }

    /// `null` gives `None`; anything else is read by `f`.
    fn optional<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<Option<T>> {
        if self.peek() == Some(b'n') {
            self.literal("null")?;
            return Ok(None);
        }
        f(self).map(Some)
    }

    /// `{ "key": value, … }`, each value read by `member`.
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            member(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected `,` or `}`")),
            }
        }
    }

    /// `[ value, … ]`, each read by `elem`.
    fn array<T>(&mut self, elem: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.array_into(&mut out, elem)?;
        Ok(out)
    }

    /// `[ value, … ]`, each read by `elem` and pushed onto `out`.
    fn array_into<T>(
        &mut self,
        out: &mut Vec<T>,
        mut elem: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<()> {
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            out.push(elem(self)?);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected `,` or `]`")),
            }
        }
    }

    /// `[ value, … ]` gathered in the parser's scratch list that `scratch` selects,
    /// then moved into a list of exactly its length (the scratch keeps its capacity
    /// for the next record).
    fn list<T>(
        &mut self,
        scratch: fn(&mut Self) -> &mut Vec<T>,
        elem: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut items = std::mem::take(scratch(self));
        items.clear();
        let read = self.array_into(&mut items, elem);
        let mut out = Vec::with_capacity(items.len());
        out.append(&mut items);
        *scratch(self) = items;
        read.map(|()| out)
    }

    /// A string, borrowed when it has no escapes.
    fn string(&mut self) -> Result<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.pos;
        let bytes = self.bytes();
        let Some(end) = run_end(bytes, start) else {
            self.pos = bytes.len();
            return Err(self.err("EOF while parsing a string"));
        };
        self.pos = end;
        match bytes[self.pos] {
            b'"' => {
                let s = &self.text[start..self.pos];
                self.pos += 1;
                return Ok(Cow::Borrowed(s));
            }
            b'\\' => {}
            _ => return Err(self.err("control character found while parsing a string")),
        }
        let mut out = self.text[start..self.pos].to_string();
        loop {
            match bytes.get(self.pos) {
                None => return Err(self.err("EOF while parsing a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(c) if *c < 0x20 => {
                    return Err(self.err("control character found while parsing a string"));
                }
                Some(_) => {
                    // Copy up to the next quote, backslash or control character.
                    let run = run_end(bytes, self.pos).unwrap_or(bytes.len());
                    out.push_str(&self.text[self.pos..run]);
                    self.pos = run;
                }
            }
        }
    }

    /// One escape after its backslash.
    fn escape(&mut self, out: &mut String) -> Result<()> {
        let Some(&c) = self.bytes().get(self.pos) else {
            return Err(self.err("EOF while parsing a string"));
        };
        self.pos += 1;
        out.push(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => self.unicode_escape()?,
            _ => return Err(self.err("invalid escape")),
        });
        Ok(())
    }

    /// The character of `\uXXXX` (and its low surrogate's `\uXXXX`, if a pair).
    fn unicode_escape(&mut self) -> Result<char> {
        let hi = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            if !self.text[self.pos..].starts_with("\\u") {
                return Err(self.err("lone leading surrogate in hex escape"));
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return Err(self.err("lone leading surrogate in hex escape"));
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        char::from_u32(code).ok_or_else(|| self.err("lone trailing surrogate in hex escape"))
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .bytes()
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("EOF while parsing a string"))?;
        let mut v = 0u32;
        for d in digits {
            let n = (*d as char)
                .to_digit(16)
                .ok_or_else(|| self.err("invalid escape"))?;
            v = v * 16 + n;
        }
        self.pos += 4;
        Ok(v)
    }

    /// A JSON number that is an integer in i64's range.
    fn integer(&mut self) -> Result<i64> {
        self.ws();
        let start = self.pos;
        let bytes = self.bytes();
        if bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let digits = self.pos;
        while bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        let n = self.pos - digits;
        if n == 0 {
            return Err(self.err("expected an integer"));
        }
        if n > 1 && bytes[digits] == b'0' {
            return Err(self.err("invalid number"));
        }
        if matches!(bytes.get(self.pos), Some(b'.' | b'e' | b'E')) {
            return Err(self.err("invalid type: floating point, expected i64"));
        }
        self.text[start..self.pos]
            .parse()
            .map_err(|_| self.err("number out of range"))
    }

    /// Any value, checked for syntax and dropped.
    fn skip_value(&mut self, depth: usize) -> Result<()> {
        if depth >= MAX_DEPTH {
            return Err(self.err("recursion limit exceeded"));
        }
        match self.peek() {
            Some(b'"') => self.skip_string(),
            Some(b'{') => self.object(|p, _| p.skip_value(depth + 1)),
            Some(b'[') => self.array(|p| p.skip_value(depth + 1)).map(drop),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("expected a value")),
        }
    }

    /// A string that is dropped: escapes are checked for syntax only (as serde_json
    /// does for ignored values; a lone surrogate there is not an error).
    fn skip_string(&mut self) -> Result<()> {
        self.expect(b'"')?;
        loop {
            match self.bytes().get(self.pos) {
                None => return Err(self.err("EOF while parsing a string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.bytes().get(self.pos) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        None => return Err(self.err("EOF while parsing a string")),
                        Some(_) => return Err(self.err("invalid escape")),
                    }
                }
                Some(c) if *c < 0x20 => {
                    return Err(self.err("control character found while parsing a string"));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Any JSON number (`-? int frac? exp?`), dropped.
    fn number(&mut self) -> Result<()> {
        let bytes = self.bytes();
        let digits = |p: &mut Self| {
            let start = p.pos;
            while bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - start
        };
        if bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let first = self.pos;
        match digits(self) {
            0 => return Err(self.err("invalid number")),
            n if n > 1 && bytes[first] == b'0' => return Err(self.err("invalid number")),
            _ => {}
        }
        if bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if matches!(bytes.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        Ok(())
    }

    fn optional_string(&mut self) -> Result<Option<Cow<'a, str>>> {
        self.optional(Self::string)
    }

    /// `Record` (or `CommonAttributes`).
    fn record(&mut self) -> Result<Record<'a>> {
        let mut r = Record::default();
        let mut seen = Seen::default();
        self.object(|p, key| {
            match &*key {
                "Dimensions" => {
                    seen.once(&key, 0)?;
                    r.dimensions = p.list(|p| &mut p.dimensions, Self::dimension)?;
                }
                "MeasureName" => {
                    seen.once(&key, 1)?;
                    r.measure_name = p.optional_string()?;
                }
                "MeasureValue" => {
                    seen.once(&key, 2)?;
                    r.measure_value = p.optional_string()?;
                }
                "MeasureValueType" => {
                    seen.once(&key, 3)?;
                    r.measure_value_type = p.optional_string()?;
                }
                "MeasureValues" => {
                    seen.once(&key, 4)?;
                    r.measure_values = p.list(|p| &mut p.measure_values, Self::measure_value)?;
                }
                "Time" => {
                    seen.once(&key, 5)?;
                    r.time = p.optional_string()?;
                }
                "TimeUnit" => {
                    seen.once(&key, 6)?;
                    r.time_unit = p.optional_string()?;
                }
                "Version" => {
                    seen.once(&key, 7)?;
                    r.version = p.optional(Self::integer)?;
                }
                _ => p.skip_value(0)?,
            }
            Ok(())
        })?;
        Ok(r)
    }

    /// Consumes `text` if the body continues with exactly it.
    fn skip_exactly(&mut self, text: &[u8]) -> bool {
        let found = self.bytes()[self.pos..].starts_with(text);
        if found {
            self.pos += text.len();
        }
        found
    }

    /// The string members `names` of an object written exactly as the SDKs write it:
    /// compact, in this order, nothing else. `None` (the position left anywhere) for
    /// any other spelling, which the general path then reads.
    fn compact_object<const N: usize>(&mut self, names: [&[u8]; N]) -> Option<[Cow<'a, str>; N]> {
        let mut out: [Cow<'a, str>; N] = std::array::from_fn(|_| Cow::Borrowed(""));
        for (i, (name, slot)) in names.iter().zip(&mut out).enumerate() {
            if !(self.skip_exactly(if i == 0 { b"{" } else { b"," })
                && self.skip_exactly(name)
                && self.bytes().get(self.pos) == Some(&b'"'))
            {
                return None;
            }
            *slot = self.string().ok()?;
        }
        self.skip_exactly(b"}").then_some(out)
    }

    /// `Dimension` (its `DimensionValueType`, always VARCHAR, is checked and dropped).
    fn dimension(&mut self) -> Result<Dimension<'a>> {
        let start = self.pos;
        if let Some([name, value]) = self.compact_object([b"\"Name\":", b"\"Value\":"]) {
            return Ok(Dimension { name, value });
        }
        self.pos = start;
        let mut d = Dimension::default();
        let mut seen = Seen::default();
        self.object(|p, key| {
            match &*key {
                "Name" => {
                    seen.once(&key, 0)?;
                    d.name = p.string()?;
                }
                "Value" => {
                    seen.once(&key, 1)?;
                    d.value = p.string()?;
                }
                "DimensionValueType" => {
                    seen.once(&key, 2)?;
                    p.optional_string()?;
                }
                _ => p.skip_value(0)?,
            }
            Ok(())
        })?;
        Ok(d)
    }

    /// `MeasureValue`.
    fn measure_value(&mut self) -> Result<MeasureValue<'a>> {
        let start = self.pos;
        if let Some([name, value, kind]) =
            self.compact_object([b"\"Name\":", b"\"Value\":", b"\"Type\":"])
        {
            return Ok(MeasureValue { name, value, kind });
        }
        self.pos = start;
        let mut m = MeasureValue::default();
        let mut seen = Seen::default();
        self.object(|p, key| {
            match &*key {
                "Name" => {
                    seen.once(&key, 0)?;
                    m.name = p.string()?;
                }
                "Value" => {
                    seen.once(&key, 1)?;
                    m.value = p.string()?;
                }
                "Type" => {
                    seen.once(&key, 2)?;
                    m.kind = p.string()?;
                }
                _ => p.skip_value(0)?,
            }
            Ok(())
        })?;
        Ok(m)
    }
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
