//! GoogleSQL's string functions DataFusion lacks (GoogleSQL's session only), over
//! STRING and, where GoogleSQL takes it, BYTES:
//!
//! | function | result |
//! |---|---|
//! | `INSTR(value, sub[, position[, occurrence]])` | 1-based position of the `occurrence`th match at or after `position` (negative: searching back from the end); 0 if none |
//! | `REGEXP_EXTRACT_ALL(value, regexp)` | every match (or its one group), as an ARRAY |
//! | `REGEXP_SUBSTR(value, regexp[, position[, occurrence]])` | the `occurrence`th match at or after `position` |
//! | `TO_BASE32(bytes)`, `FROM_BASE32(string)` | RFC 4648 base32 with padding |
//! | `TO_CODE_POINTS(value)` | Unicode code points of a STRING, bytes of BYTES, as ARRAY<INT64> |
//! | `CODE_POINTS_TO_STRING(array)`, `CODE_POINTS_TO_BYTES(array)` | the inverse |
//! | `UNICODE(value)` | the first character's code point, 0 for '' |
//! | `SOUNDEX(value)` | American Soundex, e.g. `A261` |
//! | `NORMALIZE(value[, NFC\|NFKC\|NFD\|NFKD])` | Unicode normalization (NFC by default) |
//! | `NORMALIZE_AND_CASEFOLD(value[, mode])` | the same after case folding |
//! | `FORMAT(format, …)` | printf-style: `%d %i %u %x %X %o %f %F %e %E %g %G %s %t %T %%`, flags `-+ #0`, width and precision (also `*`) |

use std::cell::RefCell;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;
use unicode_normalization::UnicodeNormalization as _;

use super::rowwise::{
    self, Def, arity, bytes, bytes_type, elements, int, int_type, list_of, text, text_type,
};

/// The longest text `FORMAT` writes.
const MAX_FORMAT_BYTES: usize = 1024 * 1024;

const DEFS: [Def; 12] = [
    ("instr", instr_types, instr),
    ("regexp_extract_all", regexp_types, regexp_extract_all),
    ("regexp_substr", instr_types, regexp_substr),
    ("to_base32", to_base32_types, to_base32),
    ("from_base32", from_base32_types, from_base32),
    ("to_code_points", to_code_points_types, to_code_points),
    (
        "code_points_to_string",
        from_code_points_types,
        code_points_to_string,
    ),
    (
        "code_points_to_bytes",
        from_code_points_types,
        code_points_to_bytes,
    ),
    ("unicode", one_text_types, unicode),
    ("soundex", one_text_types, soundex),
    ("normalize", normalize_types, normalize),
    ("normalize_and_casefold", normalize_types, normalize),
];

/// Registers the string functions.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    rowwise::register(state, &DEFS)?;
    rowwise::register(state, &[("format", format_types, format)])
}

/// STRING stays STRING, BYTES stays BYTES; both arguments the same kind.
fn text_or_bytes(name: &str, args: &[DataType], n: usize) -> DfResult<DataType> {
    let kind = if args[..n].iter().any(bytes_type) {
        DataType::Binary
    } else {
        DataType::Utf8
    };
    if !args[..n].iter().all(|t| text_type(t) || bytes_type(t)) {
        return plan_err!("{name} takes STRING or BYTES values, got {args:?}");
    }
    Ok(kind)
}

fn instr_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 4)?;
    let kind = text_or_bytes(name, args, 2)?;
    if !args[2..].iter().all(int_type) {
        return plan_err!("{name} takes INT64 position and occurrence, got {args:?}");
    }
    let mut coerced = vec![kind.clone(), kind.clone()];
    coerced.extend(std::iter::repeat_n(DataType::Int64, args.len() - 2));
    let out = if name == "instr" {
        DataType::Int64
    } else {
        kind
    };
    Ok((coerced, out))
}

fn regexp_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    let kind = text_or_bytes(name, args, 2)?;
    Ok((vec![kind.clone(), kind.clone()], list_of(kind)))
}

fn to_base32_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    Ok((vec![DataType::Binary], DataType::Utf8))
}

fn from_base32_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    Ok((vec![DataType::Utf8], DataType::Binary))
}

fn to_code_points_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    let kind = text_or_bytes(name, args, 1)?;
    Ok((vec![kind], list_of(DataType::Int64)))
}

fn from_code_points_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    if !(args[0].is_null() || rowwise::element_type(&args[0]).is_some_and(int_type)) {
        return plan_err!("{name} takes an ARRAY<INT64>, got {}", args[0]);
    }
    let out = if name == "code_points_to_bytes" {
        DataType::Binary
    } else {
        DataType::Utf8
    };
    Ok((vec![list_of(DataType::Int64)], out))
}

fn one_text_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    if !text_type(&args[0]) {
        return plan_err!("{name} takes a STRING, got {}", args[0]);
    }
    let out = if name == "unicode" {
        DataType::Int64
    } else {
        DataType::Utf8
    };
    Ok((vec![DataType::Utf8], out))
}

fn normalize_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 2)?;
    if !args.iter().all(text_type) {
        return plan_err!("{name} takes a STRING and a mode (NFC, NFKC, NFD, NFKD), got {args:?}");
    }
    Ok((vec![DataType::Utf8; args.len()], DataType::Utf8))
}

fn format_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    if args.is_empty() || !text_type(&args[0]) {
        return plan_err!("{name} takes a format STRING first, got {args:?}");
    }
    Ok((args.to_vec(), DataType::Utf8))
}

/// A STRING or BYTES argument's bytes (None for NULL).
fn raw(v: &ScalarValue) -> Option<&[u8]> {
    text(v).map(str::as_bytes).or_else(|| bytes(v))
}

/// A STRING or BYTES result, as the first argument was.
fn like_first(first: &ScalarValue, value: Option<Vec<u8>>) -> ScalarValue {
    if text(first).is_some() || matches!(first, ScalarValue::Utf8(None)) {
        ScalarValue::Utf8(value.map(|v| String::from_utf8_lossy(&v).into_owned()))
    } else {
        ScalarValue::Binary(value)
    }
}

/// Start offsets (in bytes) of every match of `needle` in `hay`, overlapping ones too.
fn occurrences(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() {
        return Vec::new();
    }
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// GoogleSQL's `position` and `occurrence` as a filter over match offsets: which match
/// (0-based index into `starts`), or None.
fn pick(
    name: &str,
    starts: &[usize],
    len: usize,
    position: i64,
    occurrence: i64,
) -> DfResult<Option<usize>> {
    if position == 0 {
        return exec_err!("{name}: position must not be 0");
    }
    if occurrence < 1 {
        return exec_err!("{name}: occurrence must be at least 1, got {occurrence}");
    }
    let n = usize::try_from(occurrence - 1).unwrap_or(usize::MAX);
    if position > 0 {
        let from = usize::try_from(position - 1).unwrap_or(usize::MAX);
        Ok(starts
            .iter()
            .enumerate()
            .filter(|(_, s)| **s >= from)
            .nth(n)
            .map(|(i, _)| i))
    } else {
        let back = usize::try_from(-position).unwrap_or(usize::MAX);
        let until = len.checked_sub(back);
        Ok(until.and_then(|until| {
            starts
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, s)| **s <= until)
                .nth(n)
                .map(|(i, _)| i)
        }))
    }
}

/// A 1-based position (negative: counted back from the end) in characters of a
/// STRING `text`, as the same position in bytes; a BYTES position is in bytes already.
/// A position past either end stays past it.
fn byte_position(text: Option<&str>, position: i64) -> i64 {
    let Some(s) = text else {
        return position;
    };
    let len = s.len() as i64;
    let offset = |chars: i64| {
        usize::try_from(chars)
            .ok()
            .and_then(|c| s.char_indices().nth(c))
            .map(|(b, _)| b as i64)
    };
    match position {
        0 => 0,
        p if p > 0 => offset(p - 1).map_or(len + 1, |b| b + 1),
        p => {
            let chars = s.chars().count() as i64;
            match offset(chars + p) {
                Some(b) => -(len - b),
                None => -(len + 1),
            }
        }
    }
}

fn position_args(args: &[ScalarValue]) -> Option<(i64, i64)> {
    let position = args.get(2).map_or(Some(1), int)?;
    let occurrence = args.get(3).map_or(Some(1), int)?;
    Some((position, occurrence))
}

fn instr(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(hay), Some(needle), Some((position, occurrence))) =
        (raw(&args[0]), raw(&args[1]), position_args(args))
    else {
        return Ok(ScalarValue::Int64(None));
    };
    let starts = occurrences(hay, needle);
    let position = byte_position(text(&args[0]), position);
    let found = pick(name, &starts, hay.len(), position, occurrence)?;
    let at = found.map_or(0, |i| starts[i] + 1);
    // STRING positions count characters.
    let at = match text(&args[0]) {
        Some(s) if at > 0 => s[..at - 1].chars().count() + 1,
        _ => at,
    };
    Ok(ScalarValue::Int64(Some(at as i64)))
}

thread_local! {
    /// The last pattern compiled on this thread (its text and kind), so a column of one
    /// pattern compiles once.
    static LAST: RefCell<Option<(Vec<u8>, bool, super::Pattern)>> = const { RefCell::new(None) };
}

/// The texts of the matches of `pattern` in `value[from..]`: each match's one capturing
/// group ('' where it took no part), or the whole match. `text`: STRING values.
fn matches(
    name: &str,
    pattern: &[u8],
    value: &[u8],
    from: usize,
    text: bool,
) -> DfResult<Vec<Vec<u8>>> {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last
            .as_ref()
            .is_none_or(|(p, t, _)| p.as_slice() != pattern || *t != text)
        {
            let compiled = super::compile_pattern(name, pattern, text, true)?;
            *last = Some((pattern.to_vec(), text, compiled));
        }
        let Some((_, _, compiled)) = last.as_ref() else {
            return exec_err!("{name}: no regular expression");
        };
        Ok(compiled
            .spans(value, from)
            .into_iter()
            .map(|span| span.map_or_else(Vec::new, |r| value[r].to_vec()))
            .collect())
    })
}

fn regexp_extract_all(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (Some(value), Some(pattern)) = (raw(&args[0]), raw(&args[1])) else {
        return rowwise::null(out);
    };
    let found: Vec<_> = matches(name, pattern, value, 0, text(&args[0]).is_some())?
        .into_iter()
        .map(|m| like_first(&args[0], Some(m)))
        .collect();
    let element = rowwise::element_type(out)
        .cloned()
        .unwrap_or(DataType::Utf8);
    Ok(rowwise::array(&found, &element))
}

fn regexp_substr(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(value), Some(pattern), Some((position, occurrence))) =
        (raw(&args[0]), raw(&args[1]), position_args(args))
    else {
        return Ok(like_first(&args[0], None));
    };
    if position < 1 {
        return exec_err!("{name}: position must be at least 1, got {position}");
    }
    let position = byte_position(text(&args[0]), position);
    let from = usize::try_from(position - 1).unwrap_or(usize::MAX);
    if from > value.len() {
        return Ok(like_first(&args[0], None));
    }
    let n = usize::try_from(occurrence.max(1) - 1).unwrap_or(usize::MAX);
    let found = matches(name, pattern, value, from, text(&args[0]).is_some())?
        .into_iter()
        .nth(n);
    Ok(like_first(&args[0], found))
}

fn to_base32(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Utf8(
        bytes(&args[0]).map(|b| data_encoding::BASE32.encode(b)),
    ))
}

fn from_base32(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(s) = text(&args[0]) else {
        return Ok(ScalarValue::Binary(None));
    };
    match data_encoding::BASE32.decode(s.trim().as_bytes()) {
        Ok(b) => Ok(ScalarValue::Binary(Some(b))),
        Err(e) => exec_err!("{name}: {s:?} is not base32: {e}"),
    }
}

fn to_code_points(_: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let points: Vec<ScalarValue> = if let Some(s) = text(&args[0]) {
        s.chars()
            .map(|c| ScalarValue::Int64(Some(i64::from(u32::from(c)))))
            .collect()
    } else if let Some(b) = bytes(&args[0]) {
        b.iter()
            .map(|b| ScalarValue::Int64(Some(i64::from(*b))))
            .collect()
    } else {
        return rowwise::null(out);
    };
    Ok(rowwise::array(&points, &DataType::Int64))
}

/// The code points of an ARRAY<INT64> argument (None for a NULL array or element).
fn code_points(v: &ScalarValue) -> DfResult<Option<Vec<i64>>> {
    Ok(elements(v)?.and_then(|items| items.iter().map(int).collect()))
}

fn code_points_to_string(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(points) = code_points(&args[0])? else {
        return Ok(ScalarValue::Utf8(None));
    };
    let mut s = String::with_capacity(points.len());
    for p in points {
        match u32::try_from(p).ok().and_then(char::from_u32) {
            Some(c) => s.push(c),
            None => return exec_err!("{name}: {p} is not a Unicode code point"),
        }
    }
    Ok(ScalarValue::Utf8(Some(s)))
}

fn code_points_to_bytes(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(points) = code_points(&args[0])? else {
        return Ok(ScalarValue::Binary(None));
    };
    let mut b = Vec::with_capacity(points.len());
    for p in points {
        match u8::try_from(p) {
            Ok(v) => b.push(v),
            Err(_) => return exec_err!("{name}: {p} is not a byte (0 to 255)"),
        }
    }
    Ok(ScalarValue::Binary(Some(b)))
}

fn unicode(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Int64(text(&args[0]).map(|s| {
        s.chars().next().map_or(0, |c| i64::from(u32::from(c)))
    })))
}

/// American Soundex: the first letter, then the codes of the following letters with
/// repeats (also across H and W) dropped and vowels breaking runs, padded to 4.
fn soundex(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(s) = text(&args[0]) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let code = |c: char| match c.to_ascii_uppercase() {
        'B' | 'F' | 'P' | 'V' => Some('1'),
        'C' | 'G' | 'J' | 'K' | 'Q' | 'S' | 'X' | 'Z' => Some('2'),
        'D' | 'T' => Some('3'),
        'L' => Some('4'),
        'M' | 'N' => Some('5'),
        'R' => Some('6'),
        _ => None,
    };
    let mut letters = s.chars().filter(char::is_ascii_alphabetic);
    let Some(first) = letters.next() else {
        return Ok(ScalarValue::Utf8(Some(String::new())));
    };
    let mut out = String::from(first.to_ascii_uppercase());
    let mut last = code(first);
    for c in letters {
        if out.len() == 4 {
            break;
        }
        let this = code(c);
        if matches!(c.to_ascii_uppercase(), 'H' | 'W') {
            continue;
        }
        if let Some(d) = this
            && this != last
        {
            out.push(d);
        }
        last = this;
    }
    while out.len() < 4 {
        out.push('0');
    }
    Ok(ScalarValue::Utf8(Some(out)))
}

fn normalize(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(s) = text(&args[0]) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let folded;
    let s = if name == "normalize_and_casefold" {
        folded = s.to_lowercase();
        folded.as_str()
    } else {
        s
    };
    let mode = args.get(1).and_then(text).unwrap_or("NFC");
    let out: String = match mode.to_ascii_uppercase().as_str() {
        "NFC" => s.nfc().collect(),
        "NFKC" => s.nfkc().collect(),
        "NFD" => s.nfd().collect(),
        "NFKD" => s.nfkd().collect(),
        other => return exec_err!("{name}: the mode {other:?} is not NFC, NFKC, NFD or NFKD"),
    };
    Ok(ScalarValue::Utf8(Some(out)))
}

/// One `%` directive of a format.
#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

fn format(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(fmt) = text(&args[0]) else {
        return Ok(ScalarValue::Utf8(None));
    };
    let mut values = args[1..].iter();
    let mut next = |what: &str| match values.next() {
        Some(v) => Ok(v),
        None => exec_err!("{name}: the format {fmt:?} needs more arguments than given ({what})"),
    };
    let mut out = String::with_capacity(fmt.len());
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() > MAX_FORMAT_BYTES {
            return exec_err!("{name}: the result is longer than {MAX_FORMAT_BYTES} bytes");
        }
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(f) = chars.next_if(|c| "-+ #0".contains(*c)) {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                _ => spec.zero = true,
            }
        }
        let mut number =
            |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> DfResult<Option<usize>> {
                if chars.next_if_eq(&'*').is_some() {
                    return Ok(next("*")?
                        .clone()
                        .cast_to(&DataType::Int64)
                        .ok()
                        .as_ref()
                        .and_then(int)
                        .map(|n| n.max(0) as usize));
                }
                let digits: String =
                    std::iter::from_fn(|| chars.next_if(char::is_ascii_digit)).collect();
                Ok(digits.parse().ok())
            };
        spec.width = number(&mut chars)?;
        if chars.next_if_eq(&'.').is_some() {
            spec.precision = Some(number(&mut chars)?.unwrap_or(0));
        }
        let Some(kind) = chars.next() else {
            return exec_err!("{name}: the format {fmt:?} ends inside a % directive");
        };
        if kind == '%' {
            out.push('%');
            continue;
        }
        let v = next(&kind.to_string())?;
        if v.is_null() && kind != 'T' {
            return Ok(ScalarValue::Utf8(None));
        }
        let body = directive(name, kind, &spec, v)?;
        pad(
            &mut out,
            &body,
            &spec,
            matches!(
                kind,
                'd' | 'i' | 'u' | 'x' | 'X' | 'o' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G'
            ),
        );
    }
    Ok(ScalarValue::Utf8(Some(out)))
}

/// One directive's text before padding.
fn directive(name: &str, kind: char, spec: &Spec, v: &ScalarValue) -> DfResult<String> {
    let sign = |negative: bool| {
        if negative {
            "-"
        } else if spec.plus {
            "+"
        } else if spec.space {
            " "
        } else {
            ""
        }
    };
    Ok(match kind {
        'd' | 'i' | 'u' => {
            let Some(n) = int(v) else {
                return exec_err!("{name}: %{kind} takes an INT64, got {}", v.data_type());
            };
            format!("{}{}", sign(n < 0), n.unsigned_abs())
        }
        'x' | 'X' | 'o' => {
            let Some(n) = int(v) else {
                return exec_err!("{name}: %{kind} takes an INT64, got {}", v.data_type());
            };
            let digits = match kind {
                'x' => format!("{:x}", n.unsigned_abs()),
                'X' => format!("{:X}", n.unsigned_abs()),
                _ => format!("{:o}", n.unsigned_abs()),
            };
            let prefix = match (spec.alt, kind) {
                (true, 'x') => "0x",
                (true, 'X') => "0X",
                (true, _) => "0",
                _ => "",
            };
            format!("{}{prefix}{digits}", sign(n < 0))
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
            let Some(x) = rowwise::float(v) else {
                return exec_err!("{name}: %{kind} takes a number, got {}", v.data_type());
            };
            let p = spec.precision.unwrap_or(6);
            let body = if x.is_nan() {
                "nan".to_string()
            } else if x.is_infinite() {
                "inf".to_string()
            } else {
                match kind {
                    'f' | 'F' => format!("{:.p$}", x.abs()),
                    'e' | 'E' => exponent(x.abs(), p),
                    _ => general(x.abs(), p, spec.alt),
                }
            };
            let body = if kind.is_ascii_uppercase() {
                body.to_uppercase()
            } else {
                body
            };
            format!("{}{body}", sign(x.is_sign_negative() && !x.is_nan()))
        }
        's' | 't' => {
            let s = text_form(v);
            match spec.precision {
                Some(p) => s.chars().take(p).collect(),
                None => s,
            }
        }
        'T' => literal_form(v),
        other => return exec_err!("{name}: %{other} is not a format directive"),
    })
}

/// `%e`: one digit, `p` decimals, and a signed exponent of at least two digits.
fn exponent(x: f64, p: usize) -> String {
    let s = format!("{x:.p$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s,
    }
}

/// `%g`: `%e` or `%f`, whichever C's rule picks, trailing zeros removed.
fn general(x: f64, p: usize, alt: bool) -> String {
    let p = p.max(1);
    let e = if x == 0.0 {
        0
    } else {
        x.log10().floor() as i32
    };
    let s = if e < -4 || e >= p as i32 {
        exponent(x, p - 1)
    } else {
        let decimals = (p as i32 - 1 - e).max(0) as usize;
        format!("{x:.decimals$}")
    };
    if alt {
        return s;
    }
    match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        None if s.contains('.') => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        _ => s,
    }
}

/// A value as `CAST(v AS STRING)` writes it (`%t`).
fn text_form(v: &ScalarValue) -> String {
    if v.is_null() {
        return "NULL".to_string();
    }
    if let Some(b) = bytes(v) {
        return String::from_utf8_lossy(b).into_owned();
    }
    match v {
        ScalarValue::Float64(Some(x)) => float_text(*x),
        ScalarValue::Float32(Some(x)) => float_text(f64::from(*x)),
        ScalarValue::TimestampMicrosecond(Some(t), _) => {
            super::time::canonical(*t, "UTC").unwrap_or_else(|_| v.to_string())
        }
        _ => match rowwise::elements(v) {
            Ok(Some(items)) => format!(
                "[{}]",
                items.iter().map(text_form).collect::<Vec<_>>().join(", ")
            ),
            _ => v.to_string(),
        },
    }
}

/// A FLOAT64 as GoogleSQL writes it: the shortest text that reads back, `inf`, `nan`.
fn float_text(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{x}")
    }
}

/// A value as a GoogleSQL literal (`%T`).
fn literal_form(v: &ScalarValue) -> String {
    if v.is_null() {
        return "NULL".to_string();
    }
    if let Some(s) = text(v) {
        return format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    }
    if let Some(b) = bytes(v) {
        let escaped: String = b
            .iter()
            .map(|c| match c {
                b' '..=b'~' if *c != b'"' && *c != b'\\' => char::from(*c).to_string(),
                _ => format!("\\x{c:02x}"),
            })
            .collect();
        return format!("b\"{escaped}\"");
    }
    match v {
        ScalarValue::Float64(Some(x)) if x.is_finite() && x.fract() == 0.0 => format!("{x:.1}"),
        ScalarValue::Float64(Some(x)) if !x.is_finite() => {
            format!("CAST(\"{}\" AS FLOAT64)", float_text(*x))
        }
        ScalarValue::TimestampMicrosecond(Some(_), _) => format!("TIMESTAMP \"{}\"", text_form(v)),
        ScalarValue::Date32(Some(_)) => format!("DATE \"{v}\""),
        _ => match rowwise::elements(v) {
            Ok(Some(items)) => format!(
                "[{}]",
                items
                    .iter()
                    .map(literal_form)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => text_form(v),
        },
    }
}

/// Pads `body` to the directive's width.
fn pad(out: &mut String, body: &str, spec: &Spec, numeric: bool) {
    let len = body.chars().count();
    let width = spec.width.unwrap_or(0);
    if len >= width {
        out.push_str(body);
        return;
    }
    let fill = width - len;
    if spec.left {
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero && numeric {
        let sign_len = body.starts_with(['-', '+', ' ']) as usize;
        let prefix_len = sign_len
            + if body[sign_len..].starts_with("0x") || body[sign_len..].starts_with("0X") {
                2
            } else {
                0
            };
        out.push_str(&body[..prefix_len]);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(&body[prefix_len..]);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> ScalarValue {
        ScalarValue::Utf8(Some(v.into()))
    }

    fn call(f: rowwise::Eval, name: &str, args: &[ScalarValue]) -> ScalarValue {
        f(name, args, &DataType::Utf8)
            .unwrap_or_else(|e| ScalarValue::Utf8(Some(format!("error: {e}"))))
    }

    #[test]
    fn instr_positions_and_occurrences() {
        let i = |args: &[ScalarValue]| call(instr, "instr", args);
        let n = |x: i64| ScalarValue::Int64(Some(x));
        assert_eq!(i(&[s("banana"), s("an"), n(1), n(2)]), n(4));
        assert_eq!(i(&[s("banana"), s("an"), n(3), n(1)]), n(4));
        assert_eq!(i(&[s("banana"), s("an"), n(-1), n(1)]), n(4));
        assert_eq!(i(&[s("banana"), s("an"), n(-3), n(2)]), n(2));
        assert_eq!(i(&[s("banana"), s("ann")]), n(0));
        assert_eq!(i(&[s("héllo"), s("l")]), n(3));
        // STRING positions count characters, both ways.
        assert_eq!(i(&[s("héllo"), s("l"), n(4)]), n(4));
        assert_eq!(i(&[s("héllo"), s("é"), n(-4)]), n(2));
        assert_eq!(i(&[s("héllo"), s("é"), n(-3)]), n(2));
        assert_eq!(i(&[s("héllo"), s("o"), n(-2)]), n(0));
        assert_eq!(i(&[s("héllo"), s("o"), n(9)]), n(0));
        assert_eq!(i(&[s("héllo"), s("h"), n(-9)]), n(0));
        let r = |p: i64| call(regexp_substr, "regexp_substr", &[s("héllo"), s("l+"), n(p)]);
        assert_eq!(r(4), s("l"));
        assert_eq!(r(3), s("ll"));
        assert!(instr("instr", &[s("a"), s("a"), n(0)], &DataType::Int64).is_err());
    }

    #[test]
    fn soundex_examples() {
        for (word, code) in [
            ("Ashcraft", "A261"),
            ("Robert", "R163"),
            ("Rupert", "R163"),
            ("Tymczak", "T522"),
            ("Pfister", "P236"),
            ("Honeyman", "H555"),
        ] {
            assert_eq!(call(soundex, "soundex", &[s(word)]), s(code), "{word}");
        }
    }

    #[test]
    fn format_directives() {
        let f = |args: &[ScalarValue]| call(format, "format", args);
        let n = |x: i64| ScalarValue::Int64(Some(x));
        let x = |v: f64| ScalarValue::Float64(Some(v));
        assert_eq!(f(&[s("%d-%s"), n(10), s("x")]), s("10-x"));
        assert_eq!(
            f(&[s("|%5d|%-5d|%05d|%+d|"), n(42), n(42), n(-42), n(3)]),
            s("|   42|42   |-0042|+3|")
        );
        assert_eq!(
            f(&[
                s("%.2f %e %g %g"),
                x(1.23456),
                x(1234.5),
                x(0.0001),
                x(1e20)
            ]),
            s("1.23 1.234500e+03 0.0001 1e+20")
        );
        assert_eq!(
            f(&[s("%x %#X %o %%"), n(255), n(255), n(8)]),
            s("ff 0XFF 10 %")
        );
        assert_eq!(
            f(&[
                s("%T %T %t"),
                s("a\"b"),
                x(1.0),
                ScalarValue::Binary(Some(b"a\x01".to_vec()))
            ]),
            s("\"a\\\"b\" 1.0 a\u{1}")
        );
        assert_eq!(f(&[s("%*d|%.3s"), n(4), n(7), s("abcdef")]), s("   7|abc"));
        assert!(format("format", &[s("%d")], &DataType::Utf8).is_err());
        assert!(format("format", &[s("%q"), n(1)], &DataType::Utf8).is_err());
    }

    #[test]
    fn base32_and_code_points() {
        let b = ScalarValue::Binary(Some(b"abcde\xff".to_vec()));
        assert_eq!(
            call(to_base32, "to_base32", std::slice::from_ref(&b)),
            s("MFRGGZDF74======")
        );
        assert_eq!(
            call(from_base32, "from_base32", &[s("MFRGGZDF74======")]),
            b
        );
        assert_eq!(
            call(unicode, "unicode", &[s("âbcd")]),
            ScalarValue::Int64(Some(226))
        );
        assert_eq!(call(normalize, "normalize", &[s("e\u{302}")]), s("\u{ea}"));
    }
}
