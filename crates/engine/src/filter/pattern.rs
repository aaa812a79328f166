//! RE2 patterns from `RowFilter`s, compiled to whole-target matchers.
//!
//! Bigtable evaluates `row_key_regex_filter`, `family_name_regex_filter`,
//! `column_qualifier_regex_filter` and `value_regex_filter` with RE2. This module
//! turns an RE2 pattern into an equivalent pattern for the `regex` crate:
//!
//! 1. Byte targets (row keys, qualifiers, values) are matched byte-wise, as RE2's
//!    Latin-1 mode does: the pattern runs with Unicode off, every pattern byte
//!    `>= 0x80` is a literal byte, and `.` matches any one byte except `\n` (the
//!    proto says to use `\C` for a true wildcard, and mentions only `\n` as what
//!    `.` misses). The Go emulator matches the same way (`binaryregexp` over
//!    `\xHH`-escaped patterns). Family names are UTF-8 text and keep Unicode mode.
//! 2. RE2-only syntax is translated: `\C` (any byte) becomes `(?s-u:.)`, `\Q…\E`
//!    becomes escaped literals, and the Perl classes `\d \D \w \W \s \S \b \B`, which
//!    are ASCII-only in RE2, become their ASCII forms. Inside a character class, `[`,
//!    `&` and `~` are escaped, because the `regex` crate reads them as nested classes
//!    and set operators while RE2 reads them as literals.
//! 3. The result is anchored as `^(?:…)$`: the whole target must match. An
//!    unbalanced `)` is rejected before anchoring, so a pattern cannot escape the
//!    group.
//! 4. The compiled program is capped at [`MAX_REGEX_PROGRAM_BYTES`].
//!
//! Compiled patterns are kept in a small process-wide cache, so the same filter sent
//! again (by a client per request, or by the time-series layer per series) neither
//! recompiles its regexes nor rebuilds their search caches: compiling a one-class
//! family pattern costs more than reading a series' hour. Only short patterns without
//! counted repetition are kept, so the cache stays small whatever clients send.

use std::sync::{Arc, LazyLock};

use quick_cache::sync::Cache;

use crate::error::{Error, Result};
use crate::limits::{MAX_CACHED_PATTERN_BYTES, MAX_CACHED_REGEXES, MAX_REGEX_PROGRAM_BYTES};

/// Compiled byte patterns by proto field and pattern.
type BytePatterns = Cache<(&'static str, Vec<u8>), Arc<regex::bytes::Regex>>;

static BYTE_PATTERNS: LazyLock<BytePatterns> = LazyLock::new(|| Cache::new(MAX_CACHED_REGEXES));
static TEXT_PATTERNS: LazyLock<Cache<String, Arc<regex::Regex>>> =
    LazyLock::new(|| Cache::new(MAX_CACHED_REGEXES));

/// Whether a compiled `pattern` may be kept: short, and no `{n}` repetition, which is
/// what makes a short pattern's program large.
fn cacheable(pattern: &[u8]) -> bool {
    pattern.len() <= MAX_CACHED_PATTERN_BYTES && !pattern.contains(&b'{')
}

/// The `regex` crate's spelling of RE2's `\C` over bytes: any byte, newline included.
const ANY_BYTE: &str = "(?s-u:.)";
/// The spelling of `\C` in a text (family name) pattern: any code point.
const ANY_CHAR: &str = "(?s:.)";

/// Which kind of target a pattern matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Arbitrary bytes (row keys, qualifiers, values).
    Bytes,
    /// UTF-8 text (family names).
    Text,
}

/// Compiles an RE2 pattern over raw bytes that must match the whole target.
/// `field` names the proto field in error messages.
/// Compiled patterns are shared through the cache.
pub(super) fn compile_bytes(
    field: &'static str,
    pattern: &[u8],
) -> Result<Arc<regex::bytes::Regex>> {
    if !cacheable(pattern) {
        return build_bytes(field, pattern).map(Arc::new);
    }
    BYTE_PATTERNS.get_or_insert_with(&(field, pattern.to_vec()), || {
        build_bytes(field, pattern).map(Arc::new)
    })
}

fn build_bytes(field: &str, pattern: &[u8]) -> Result<regex::bytes::Regex> {
    let translated = translate(field, pattern, Target::Bytes)?;
    regex::bytes::RegexBuilder::new(&anchor(&translated))
        .size_limit(MAX_REGEX_PROGRAM_BYTES)
        .build()
        .map_err(|e| regex_error(field, &e))
}

/// Compiles an RE2 pattern over UTF-8 text that must match the whole target.
pub(super) fn compile_text(field: &str, pattern: &str) -> Result<Arc<regex::Regex>> {
    if !cacheable(pattern.as_bytes()) {
        return build_text(field, pattern).map(Arc::new);
    }
    TEXT_PATTERNS.get_or_insert_with(pattern, || build_text(field, pattern).map(Arc::new))
}

fn build_text(field: &str, pattern: &str) -> Result<regex::Regex> {
    let translated = translate(field, pattern.as_bytes(), Target::Text)?;
    regex::RegexBuilder::new(&anchor(&translated))
        .size_limit(MAX_REGEX_PROGRAM_BYTES)
        .build()
        .map_err(|e| regex_error(field, &e))
}

fn anchor(translated: &str) -> String {
    format!("^(?:{translated})$")
}

fn regex_error(field: &str, e: &regex::Error) -> Error {
    match e {
        regex::Error::CompiledTooBig(limit) => Error::Invalid(format!(
            "{field}: regex compiles to more than the limit of {limit} bytes \
             (MAX_REGEX_PROGRAM_BYTES)"
        )),
        other => Error::Invalid(format!("{field}: invalid RE2 regex: {other}")),
    }
}

/// The literal byte range a qualifier pattern is confined to, when it is easy to
/// see: a pattern that is a plain literal matches exactly that qualifier, and one
/// that starts with a literal (and has no alternation) matches only qualifiers with
/// that prefix. Returns `(prefix, exact)`, or `None` if no literal prefix is known.
pub(super) fn literal_prefix(pattern: &[u8]) -> Option<(Vec<u8>, bool)> {
    if pattern.contains(&b'|') {
        return None;
    }
    let mut prefix = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        let b = pattern[i];
        if b.is_ascii_alphanumeric() || b"_-!\"#%&',/:;<=>@`~ ".contains(&b) {
            prefix.push(b);
            i += 1;
        } else if b == b'\\' && pattern.get(i + 1).is_some_and(u8::is_ascii_punctuation) {
            prefix.push(pattern[i + 1]);
            i += 2;
        } else {
            break;
        }
    }
    if i == pattern.len() {
        return Some((prefix, true));
    }
    if matches!(pattern[i], b'?' | b'*' | b'{') {
        // The quantifier applies to the last literal byte, which may be absent.
        prefix.pop();
    }
    (!prefix.is_empty()).then_some((prefix, false))
}

/// One unit of a pattern: a character, or (in byte mode) a raw byte `>= 0x80`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Char(char),
    Byte(u8),
}

impl Unit {
    fn is(self, c: char) -> bool {
        self == Unit::Char(c)
    }
}

/// Splits a pattern into units: characters for a text target, else bytes (ASCII
/// bytes as characters).
fn units(pattern: &[u8], target: Target) -> (Vec<Unit>, bool) {
    match (target, std::str::from_utf8(pattern)) {
        (Target::Text, Ok(text)) => (text.chars().map(Unit::Char).collect(), true),
        _ => {
            let unit = |&b: &u8| {
                if b.is_ascii() {
                    Unit::Char(b as char)
                } else {
                    Unit::Byte(b)
                }
            };
            (pattern.iter().map(unit).collect(), false)
        }
    }
}

/// Rewrites an RE2 pattern into `regex` crate syntax (see the module docs).
fn translate(field: &str, pattern: &[u8], target: Target) -> Result<String> {
    let (units, utf8) = units(pattern, target);
    let mut out = String::with_capacity(pattern.len() + 8);
    if !utf8 {
        out.push_str("(?-u)");
    }
    let mut class = ClassState::Outside;
    let mut depth = 0usize;
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        let in_class = class != ClassState::Outside;
        let was_class_start = class == ClassState::Start;
        if in_class {
            class = ClassState::Inside;
        }
        i += 1;
        let Unit::Char(c) = u else {
            push_unit(u, &mut out);
            continue;
        };
        match c {
            '\\' => {
                let Some(&next) = units.get(i) else {
                    return Err(Error::Invalid(format!(
                        "{field}: invalid RE2 regex: trailing backslash"
                    )));
                };
                i += 1;
                if next.is('Q') {
                    i = quote_literal(&units, i, &mut out);
                } else {
                    escape(next, in_class, target, &mut out);
                }
            }
            '[' if !in_class => {
                out.push('[');
                class = ClassState::Start;
                if units.get(i).is_some_and(|u| u.is('^')) {
                    out.push('^');
                    i += 1;
                }
            }
            '[' if units.get(i).is_some_and(|u| u.is(':')) => {
                // A POSIX class such as `[:alpha:]`: copy through its closing `:]`.
                let end = (i + 1..units.len())
                    .find(|&j| units[j].is(']') && units[j - 1].is(':'))
                    .map_or(units.len(), |j| j + 1);
                out.push('[');
                units[i..end].iter().for_each(|&u| push_unit(u, &mut out));
                i = end;
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            ']' if in_class && !was_class_start => {
                out.push(']');
                class = ClassState::Outside;
            }
            ']' if in_class => out.push_str("\\]"),
            '(' if !in_class => {
                depth += 1;
                out.push('(');
            }
            ')' if !in_class => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    Error::Invalid(format!("{field}: invalid RE2 regex: unmatched ')'"))
                })?;
                out.push(')');
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Where the translator stands relative to a character class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClassState {
    Outside,
    /// Just after `[` or `[^`: a `]` here is a literal.
    Start,
    Inside,
}

/// RE2's ASCII-only Perl classes: `(members, negated)`.
fn perl_class(c: char) -> Option<(&'static str, bool)> {
    match c {
        'd' => Some(("0-9", false)),
        'D' => Some(("0-9", true)),
        'w' => Some(("0-9A-Za-z_", false)),
        'W' => Some(("0-9A-Za-z_", true)),
        's' => Some(("\\t\\n\\f\\r ", false)),
        'S' => Some(("\\t\\n\\f\\r ", true)),
        _ => None,
    }
}

/// Emits the translation of `\<next>`.
fn escape(next: Unit, in_class: bool, target: Target, out: &mut String) {
    let c = match next {
        Unit::Byte(_) => return push_unit(next, out),
        Unit::Char(c) if !c.is_ascii() => return push_unit(next, out),
        Unit::Char(c) => c,
    };
    if let Some((members, negated)) = perl_class(c) {
        match (in_class, negated) {
            (false, false) => out.push_str(&format!("[{members}]")),
            (false, true) => out.push_str(&format!("[^{members}]")),
            (true, false) => out.push_str(members),
            (true, true) => out.push_str(match c {
                'D' => "[:^digit:]",
                'W' => "[:^word:]",
                // RE2's \S excludes exactly [\t\n\f\r ]; the closest spelling that
                // works inside a class also excludes \v.
                _ => "[:^space:]",
            }),
        }
        return;
    }
    match c {
        'C' if !in_class => out.push_str(match target {
            Target::Bytes => ANY_BYTE,
            Target::Text => ANY_CHAR,
        }),
        'b' | 'B' if !in_class => {
            out.push_str("(?-u:\\");
            out.push(c);
            out.push(')');
        }
        _ => {
            out.push('\\');
            out.push(c);
        }
    }
}

/// Emits `\Q…\E` content starting at `start` as escaped literals; returns the index
/// after the closing `\E` (or the end of the pattern).
fn quote_literal(units: &[Unit], start: usize, out: &mut String) -> usize {
    let close = (start..units.len())
        .find(|&j| units[j].is('\\') && units.get(j + 1).is_some_and(|u| u.is('E')));
    for &u in &units[start..close.unwrap_or(units.len())] {
        match u {
            Unit::Char(c) => out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            Unit::Byte(_) => push_unit(u, out),
        }
    }
    close.map_or(units.len(), |j| j + 2)
}

/// Emits one unit literally: a character as itself, a raw byte as `\xHH` (only in
/// byte mode, where Unicode is off and `\xHH` is that byte).
fn push_unit(u: Unit, out: &mut String) {
    match u {
        Unit::Char(c) => out.push(c),
        Unit::Byte(b) => out.push_str(&format!("\\x{b:02X}")),
    }
}
