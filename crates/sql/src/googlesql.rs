//! GoogleSQL for Bigtable's functions over BYTES. Row keys (`_key`) and cell values
//! are BYTES in GoogleSQL, and its string functions take BYTES as well as STRING,
//! comparing byte by byte. DataFusion's take strings only, so queries copied from
//! Google's documentation (`STARTS_WITH(_key, 'phone#')`, `SPLIT(_key, '#')[0]`,
//! `TO_INT64(cf['q'])`) would fail.
//!
//! - DataFusion's `starts_with`, `ends_with`, `length`, `lower`, `upper`, `substr`,
//!   `replace`, `concat`, `to_hex` are wrapped ([`Bytewise`]): with a BYTES first
//!   argument they work on bytes (string literals beside it are taken as their UTF-8
//!   bytes) and return BYTES where GoogleSQL does; otherwise DataFusion's own runs
//!   unchanged. `LENGTH` of BYTES counts bytes, `LOWER`/`UPPER` change ASCII letters
//!   only, `SUBSTR` positions count bytes (1-based, negative from the end), `CONCAT`
//!   of BYTES is NULL when an argument is.
//! - GoogleSQL names DataFusion lacks, for STRING and BYTES: `byte_length`,
//!   `split(value[, delimiter])` (STRING's default delimiter is `,`; BYTES needs one;
//!   an empty delimiter splits into characters or bytes), `regexp_contains`,
//!   `regexp_extract` (the first match, or its one capturing group),
//!   `to_base64`, `from_base64`, `from_hex`, `safe_convert_bytes_to_string`.
//! - `to_int64`, `to_float64`, `to_float32`: Bigtable's big-endian encodings of cell
//!   values (8, 8 and 4 bytes); another length is an error naming the length.

mod arrays;
mod extras;
mod hash;
mod json;
mod math;
mod numbers;
pub(crate) mod rowwise;
mod semantics;
mod text;
mod time;

pub use extras::FloatDivision;
pub use semantics::{SAFE_MARKER, Semantics};

use std::sync::Arc;

use base64::Engine as _;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryBuilder, BooleanArray, Int64Array, ListBuilder,
    PrimitiveBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, FieldRef, Float32Type, Float64Type, Int64Type,
};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult};
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};

/// The longest regular expression the GoogleSQL `REGEXP_` functions compile.
const MAX_PATTERN_BYTES: usize = 20 * 1024;

/// Registers GoogleSQL's own functions (GoogleSQL's session only): dates and
/// timestamps, map functions and aliases of DataFusion's, and `SUBSTR`/`REPLACE` with
/// GoogleSQL's rules for STRING too.
pub fn register_dialect(state: &mut SessionState) -> DfResult<()> {
    use datafusion::functions::{string, unicode};
    for (op, inner) in [
        (Op::Substr, unicode::substr()),
        (Op::Replace, string::replace()),
    ] {
        let mut f = Bytewise::new(op, Some(inner));
        f.own_strings = true;
        state.register_udf(Arc::new(ScalarUDF::from(f)))?;
    }
    time::register(state)?;
    extras::register(state)?;
    math::register(state)?;
    hash::register(state)?;
    json::register(state)?;
    text::register(state)?;
    arrays::register(state)?;
    numbers::register(state)?;
    state.register_udf(Arc::new(ScalarUDF::from(semantics::SafeMarker::default())))?;
    crate::presto::register_for_googlesql(state)
}

/// Registers the module's functions in `state`, over DataFusion's of the same names.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    use datafusion::functions::{string, unicode};
    let wrapped = [
        (Op::StartsWith, string::starts_with()),
        (Op::EndsWith, string::ends_with()),
        (Op::Length, unicode::character_length()),
        (Op::Lower, string::lower()),
        (Op::Upper, string::upper()),
        (Op::Substr, unicode::substr()),
        (Op::Replace, string::replace()),
        (Op::Concat, string::concat()),
        (Op::ToHex, string::to_hex()),
    ];
    for (op, inner) in wrapped {
        state.register_udf(Arc::new(ScalarUDF::from(Bytewise::new(op, Some(inner)))))?;
    }
    for op in [
        Op::ByteLength,
        Op::Split,
        Op::RegexpContains,
        Op::RegexpExtract,
        Op::ToBase64,
        Op::FromBase64,
        Op::FromHex,
        Op::SafeConvert,
        Op::BigEndian(Width::Int64),
        Op::BigEndian(Width::Float64),
        Op::BigEndian(Width::Float32),
    ] {
        state.register_udf(Arc::new(ScalarUDF::from(Bytewise::new(op, None))))?;
    }
    Ok(())
}

/// `SUBSTR(x, …)` / `SUBSTRING(x FROM …)`: the parser hands them to the expression
/// planners, whose default plans DataFusion's `substr` directly; this one, consulted
/// first, plans the BYTES-aware wrapper (with GoogleSQL's rules for STRING too in
/// GoogleSQL's session).
#[derive(Debug, Default)]
pub struct SubstrPlanner {
    /// GoogleSQL's session.
    pub googlesql: bool,
}

impl ExprPlanner for SubstrPlanner {
    fn plan_substring(&self, args: Vec<Expr>) -> DfResult<PlannerResult<Vec<Expr>>> {
        let mut f = Bytewise::new(Op::Substr, Some(datafusion::functions::unicode::substr()));
        f.own_strings = self.googlesql;
        let udf = ScalarUDF::from(f);
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::new(udf), args),
        )))
    }
}

/// A big-endian cell encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    Int64,
    Float64,
    Float32,
}

/// What a function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    StartsWith,
    EndsWith,
    Length,
    Lower,
    Upper,
    Substr,
    Replace,
    Concat,
    ToHex,
    ByteLength,
    Split,
    RegexpContains,
    RegexpExtract,
    ToBase64,
    FromBase64,
    FromHex,
    SafeConvert,
    BigEndian(Width),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::StartsWith => "starts_with",
            Self::EndsWith => "ends_with",
            Self::Length => "length",
            Self::Lower => "lower",
            Self::Upper => "upper",
            Self::Substr => "substr",
            Self::Replace => "replace",
            Self::Concat => "concat",
            Self::ToHex => "to_hex",
            Self::ByteLength => "byte_length",
            Self::Split => "split",
            Self::RegexpContains => "regexp_contains",
            Self::RegexpExtract => "regexp_extract",
            Self::ToBase64 => "to_base64",
            Self::FromBase64 => "from_base64",
            Self::FromHex => "from_hex",
            Self::SafeConvert => "safe_convert_bytes_to_string",
            Self::BigEndian(Width::Int64) => "to_int64",
            Self::BigEndian(Width::Float64) => "to_float64",
            Self::BigEndian(Width::Float32) => "to_float32",
        }
    }

    /// Arguments after the first: (least, most).
    fn arity(self) -> (usize, usize) {
        match self {
            Self::Length
            | Self::Lower
            | Self::Upper
            | Self::ToHex
            | Self::ByteLength
            | Self::ToBase64
            | Self::FromBase64
            | Self::FromHex
            | Self::SafeConvert
            | Self::BigEndian(_) => (1, 1),
            Self::StartsWith | Self::EndsWith | Self::RegexpContains | Self::RegexpExtract => {
                (2, 2)
            }
            Self::Substr => (2, 3),
            Self::Replace => (3, 3),
            Self::Split => (1, 2),
            Self::Concat => (1, usize::MAX),
        }
    }

    /// Whether the function takes STRING as well as BYTES (its own, not DataFusion's).
    fn takes_strings(self) -> bool {
        matches!(
            self,
            Self::ByteLength | Self::Split | Self::RegexpContains | Self::RegexpExtract
        )
    }

    /// Whether its first argument must be a STRING (decoders of text).
    fn decodes_text(self) -> bool {
        matches!(self, Self::FromBase64 | Self::FromHex)
    }
}

/// One GoogleSQL function over BYTES (and STRING), or a wrapper of DataFusion's
/// `inner` that handles BYTES itself.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Bytewise {
    op: Op,
    inner: Option<Arc<ScalarUDF>>,
    /// GoogleSQL's session: STRING arguments get GoogleSQL's rules too, not `inner`'s.
    own_strings: bool,
    signature: Signature,
}

impl Bytewise {
    fn new(op: Op, inner: Option<Arc<ScalarUDF>>) -> Self {
        Self {
            op,
            inner,
            own_strings: false,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Whether a call with `first` as its first argument's type goes to `inner`.
    fn delegates(&self, first: &DataType) -> bool {
        self.inner.is_some() && !is_bytes(first) && !(self.own_strings && is_text(first))
    }
}

fn is_bytes(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

impl ScalarUDFImpl for Bytewise {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let name = self.op.name();
        let (least, most) = self.op.arity();
        if arg_types.len() < least || arg_types.len() > most {
            return plan_err!(
                "{name} takes {least} to {most} arguments, got {}",
                arg_types.len()
            );
        }
        let first = &arg_types[0];
        let bytes = is_bytes(first);
        if self.delegates(first)
            && let Some(inner) = &self.inner
        {
            let fields: Vec<FieldRef> = arg_types
                .iter()
                .map(|t| Arc::new(Field::new("", t.clone(), true)))
                .collect();
            return Ok(fields_with_udf(&fields, inner.as_ref())?
                .iter()
                .map(|f| f.data_type().clone())
                .collect());
        }
        let base = if self.op.decodes_text() {
            if !(is_text(first) || first.is_null()) {
                return plan_err!("{name} takes a STRING, got {first}");
            }
            DataType::Utf8
        } else if bytes {
            DataType::Binary
        } else if (self.op.takes_strings() || self.own_strings)
            && (is_text(first) || first.is_null())
        {
            DataType::Utf8
        } else {
            return plan_err!("{name} takes BYTES, got {first}");
        };
        arg_types
            .iter()
            .enumerate()
            .map(|(i, t)| match (self.op, i) {
                (_, 0) => Ok(base.clone()),
                (Op::Substr, _) if t.is_integer() || t.is_null() => Ok(DataType::Int64),
                (Op::Substr, _) => plan_err!("{name} takes INT64 positions, got {t}"),
                _ if is_text(t) || is_bytes(t) || t.is_null() => Ok(base.clone()),
                _ => plan_err!("{name} takes {base} arguments, got {t}"),
            })
            .collect()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let first = arg_types.first().cloned().unwrap_or(DataType::Null);
        if self.delegates(&first)
            && let Some(inner) = &self.inner
        {
            return inner.return_type(arg_types);
        }
        Ok(match self.op {
            Op::StartsWith | Op::EndsWith | Op::RegexpContains => DataType::Boolean,
            Op::Length | Op::ByteLength => DataType::Int64,
            Op::ToHex | Op::ToBase64 | Op::SafeConvert => DataType::Utf8,
            Op::FromBase64 | Op::FromHex => DataType::Binary,
            Op::Split => DataType::List(Arc::new(Field::new_list_field(first_kind(&first), true))),
            Op::BigEndian(Width::Int64) => DataType::Int64,
            Op::BigEndian(Width::Float64) => DataType::Float64,
            Op::BigEndian(Width::Float32) => DataType::Float32,
            Op::Lower | Op::Upper | Op::Substr | Op::Replace | Op::Concat | Op::RegexpExtract => {
                first_kind(&first)
            }
        })
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let first = args.arg_fields.first().map(|f| f.data_type().clone());
        if self.delegates(first.as_ref().unwrap_or(&DataType::Null))
            && let Some(inner) = &self.inner
        {
            return inner.return_field_from_args(args);
        }
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            true,
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let first = args.arg_fields.first().map(|f| f.data_type().clone());
        if self.delegates(first.as_ref().unwrap_or(&DataType::Null))
            && let Some(inner) = &self.inner
        {
            return inner.invoke_with_args(args);
        }
        crate::functions::invoke_rowwise(args, |arrays, rows| eval(self.op, arrays, rows))
    }
}

/// BYTES stays BYTES, anything else is STRING.
fn first_kind(t: &DataType) -> DataType {
    if is_bytes(t) {
        DataType::Binary
    } else {
        DataType::Utf8
    }
}

/// A column of BYTES or STRING as byte slices per row.
enum Column {
    Bytes(BinaryArray),
    Text(StringArray),
}

impl Column {
    fn of(a: &ArrayRef) -> DfResult<Self> {
        Ok(if is_bytes(a.data_type()) {
            Self::Bytes(cast(a, &DataType::Binary)?.as_binary::<i32>().clone())
        } else {
            Self::Text(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
        })
    }

    fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            Self::Bytes(a) => (!a.is_null(i)).then(|| a.value(i)),
            Self::Text(a) => (!a.is_null(i)).then(|| a.value(i).as_bytes()),
        }
    }

    fn is_text(&self) -> bool {
        matches!(self, Self::Text(_))
    }
}

/// Rows of BYTES or STRING out, as the first argument was.
enum Out {
    Bytes(BinaryBuilder),
    Text(StringBuilder),
}

impl Out {
    fn like(c: &Column) -> Self {
        if c.is_text() {
            Self::Text(StringBuilder::new())
        } else {
            Self::Bytes(BinaryBuilder::new())
        }
    }

    fn push(&mut self, v: Option<&[u8]>) -> DfResult<()> {
        match (self, v) {
            (Self::Bytes(b), v) => b.append_option(v),
            (Self::Text(b), Some(v)) => match std::str::from_utf8(v) {
                Ok(s) => b.append_value(s),
                Err(_) => return exec_err!("a STRING result is not valid UTF-8"),
            },
            (Self::Text(b), None) => b.append_null(),
        }
        Ok(())
    }

    fn finish(self) -> ArrayRef {
        match self {
            Self::Bytes(mut b) => Arc::new(b.finish()),
            Self::Text(mut b) => Arc::new(b.finish()),
        }
    }
}

fn eval(op: Op, args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let name = op.name();
    let cols = if op == Op::Substr {
        Vec::new()
    } else {
        args.iter().map(Column::of).collect::<DfResult<Vec<_>>>()?
    };
    let value = |c: usize, i: usize| cols.get(c).and_then(|col| col.get(i));
    Ok(match op {
        Op::StartsWith | Op::EndsWith => Arc::new(
            (0..rows)
                .map(|i| {
                    let (v, p) = (value(0, i)?, value(1, i)?);
                    Some(if op == Op::StartsWith {
                        v.starts_with(p)
                    } else {
                        v.ends_with(p)
                    })
                })
                .collect::<BooleanArray>(),
        ),
        Op::Length | Op::ByteLength => Arc::new(
            (0..rows)
                .map(|i| value(0, i).map(|v| v.len() as i64))
                .collect::<Int64Array>(),
        ),
        Op::Lower | Op::Upper => {
            let mut out = Out::like(&cols[0]);
            for i in 0..rows {
                out.push(
                    value(0, i)
                        .map(|v| {
                            if op == Op::Lower {
                                v.to_ascii_lowercase()
                            } else {
                                v.to_ascii_uppercase()
                            }
                        })
                        .as_deref(),
                )?;
            }
            out.finish()
        }
        Op::Replace => {
            let mut out = Out::like(&cols[0]);
            for i in 0..rows {
                let r = match (value(0, i), value(1, i), value(2, i)) {
                    (Some(v), Some(from), Some(to)) => Some(replace_bytes(v, from, to)),
                    _ => None,
                };
                out.push(r.as_deref())?;
            }
            out.finish()
        }
        Op::Concat => {
            let mut out = Out::like(&cols[0]);
            for i in 0..rows {
                let parts: Option<Vec<&[u8]>> = (0..cols.len()).map(|c| value(c, i)).collect();
                out.push(parts.map(|p| p.concat()).as_deref())?;
            }
            out.finish()
        }
        Op::ToHex | Op::ToBase64 | Op::SafeConvert => Arc::new(
            (0..rows)
                .map(|i| {
                    value(0, i).map(|v| match op {
                        Op::ToHex => v.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                        Op::ToBase64 => base64::engine::general_purpose::STANDARD.encode(v),
                        _ => String::from_utf8_lossy(v).into_owned(),
                    })
                })
                .collect::<StringArray>(),
        ),
        Op::FromBase64 | Op::FromHex => {
            let mut out = BinaryBuilder::new();
            for i in 0..rows {
                match value(0, i) {
                    None => out.append_null(),
                    Some(v) => out.append_value(decode_text(op, v)?),
                }
            }
            Arc::new(out.finish())
        }
        Op::Split => split(&cols, rows)?,
        Op::RegexpContains | Op::RegexpExtract => regexp(op, &cols, rows)?,
        Op::BigEndian(width) => {
            let bytes = cast(&args[0], &DataType::Binary)?;
            let bytes = bytes.as_binary::<i32>();
            match width {
                Width::Int64 => big_endian::<8, Int64Type>(name, bytes, true, i64::from_be_bytes)?,
                Width::Float64 => {
                    big_endian::<8, Float64Type>(name, bytes, true, f64::from_be_bytes)?
                }
                Width::Float32 => {
                    big_endian::<4, Float32Type>(name, bytes, true, f32::from_be_bytes)?
                }
            }
        }
        Op::Substr if is_text(args[0].data_type()) => substr_text(args, rows)?,
        Op::Substr => substr(args, rows)?,
    })
}

/// Bigtable's big-endian encoding of `N` bytes, row by row; a value of another length
/// fails naming it (`strict`, GoogleSQL's `TO_INT64`) or gives NULL (`be_int64`).
pub(crate) fn big_endian<const N: usize, T: ArrowPrimitiveType>(
    name: &str,
    bytes: &BinaryArray,
    strict: bool,
    decode: fn([u8; N]) -> T::Native,
) -> DfResult<ArrayRef> {
    let mut out = PrimitiveBuilder::<T>::with_capacity(bytes.len());
    for i in 0..bytes.len() {
        if bytes.is_null(i) {
            out.append_null();
            continue;
        }
        match <[u8; N]>::try_from(bytes.value(i)) {
            Ok(b) => out.append_value(decode(b)),
            Err(_) if !strict => out.append_null(),
            Err(_) => {
                return exec_err!(
                    "{name} needs a value of {N} bytes (a big-endian encoding), got {} bytes",
                    bytes.value(i).len()
                );
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

fn decode_text(op: Op, v: &[u8]) -> DfResult<Vec<u8>> {
    let name = op.name();
    let text = std::str::from_utf8(v).unwrap_or_default().trim();
    match op {
        Op::FromBase64 => base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|e| exec_err!("{name}: not base64 ({e})")),
        _ => {
            let digits = text.as_bytes();
            let padded: Vec<u8> = if digits.len() % 2 == 1 {
                std::iter::once(b'0')
                    .chain(digits.iter().copied())
                    .collect()
            } else {
                digits.to_vec()
            };
            padded
                .chunks(2)
                .map(|pair| {
                    std::str::from_utf8(pair)
                        .ok()
                        .filter(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
                        .and_then(|p| u8::from_str_radix(p, 16).ok())
                        .map_or_else(|| exec_err!("{name}: {text:?} is not hexadecimal"), Ok)
                })
                .collect()
        }
    }
}

fn replace_bytes(v: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return v.to_vec();
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(v[i]);
            i += 1;
        }
    }
    out
}

/// The `[start, end)` GoogleSQL's SUBSTR takes of `n` units: 1-based, 0 is 1,
/// negative counts from the end; a negative length is an error.
fn substr_range(n: i64, p: i64, len: Option<i64>) -> DfResult<(usize, usize)> {
    let start = match p {
        0 => 0,
        p if p > 0 => (p - 1).min(n),
        p => (n + p).max(0),
    };
    let end = match len {
        None => n,
        Some(l) if l < 0 => return exec_err!("substr: the length {l} is negative"),
        Some(l) => start.saturating_add(l).min(n),
    };
    Ok((start as usize, end as usize))
}

/// GoogleSQL's SUBSTR over a STRING, counting characters.
fn substr_text(args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let v = cast(&args[0], &DataType::Utf8)?;
    let v = v.as_string::<i32>();
    let ints = args[1..]
        .iter()
        .map(|a| cast(a, &DataType::Int64))
        .collect::<Result<Vec<_>, _>>()?;
    let pos = ints[0].as_primitive::<Int64Type>();
    let len = ints.get(1).map(|l| l.as_primitive::<Int64Type>());
    let mut out = Vec::with_capacity(rows);
    for i in 0..rows {
        if v.is_null(i) || pos.is_null(i) || len.is_some_and(|l| l.is_null(i)) {
            out.push(None);
            continue;
        }
        let chars: Vec<char> = v.value(i).chars().collect();
        let (start, end) = substr_range(chars.len() as i64, pos.value(i), len.map(|l| l.value(i)))?;
        out.push(Some(chars[start..end].iter().collect::<String>()));
    }
    Ok(Arc::new(StringArray::from(out)))
}

/// GoogleSQL's SUBSTR over bytes: 1-based, 0 is 1, negative counts from the end;
/// a negative length is an error.
fn substr(args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let v = cast(&args[0], &DataType::Binary)?;
    let v = v.as_binary::<i32>();
    let ints = args[1..]
        .iter()
        .map(|a| cast(a, &DataType::Int64))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = BinaryBuilder::new();
    for i in 0..rows {
        let pos = ints[0].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let len = ints
            .get(1)
            .map(|l| l.as_primitive::<datafusion::arrow::datatypes::Int64Type>());
        if v.is_null(i) || pos.is_null(i) || len.is_some_and(|l| l.is_null(i)) {
            out.append_null();
            continue;
        }
        let bytes = v.value(i);
        let (start, end) = substr_range(bytes.len() as i64, pos.value(i), len.map(|l| l.value(i)))?;
        out.append_value(&bytes[start..end]);
    }
    Ok(Arc::new(out.finish()))
}

fn split(cols: &[Column], rows: usize) -> DfResult<ArrayRef> {
    let text = cols[0].is_text();
    let item = Out::like(&cols[0]);
    let mut out = match item {
        Out::Bytes(b) => SplitOut::Bytes(ListBuilder::new(b)),
        Out::Text(b) => SplitOut::Text(ListBuilder::new(b)),
    };
    for i in 0..rows {
        let Some(v) = cols[0].get(i) else {
            out.null();
            continue;
        };
        let delimiter: &[u8] = match cols.get(1) {
            Some(d) => match d.get(i) {
                Some(d) => d,
                None => {
                    out.null();
                    continue;
                }
            },
            None if text => b",",
            None => return exec_err!("split of BYTES needs a delimiter"),
        };
        let parts: Vec<&[u8]> = if delimiter.is_empty() {
            if text {
                let s = std::str::from_utf8(v).unwrap_or_default();
                s.char_indices()
                    .map(|(at, c)| &v[at..at + c.len_utf8()])
                    .collect()
            } else {
                v.chunks(1).collect()
            }
        } else {
            split_on(v, delimiter)
        };
        out.push(&parts)?;
    }
    Ok(out.finish())
}

enum SplitOut {
    Bytes(ListBuilder<BinaryBuilder>),
    Text(ListBuilder<StringBuilder>),
}

impl SplitOut {
    fn null(&mut self) {
        match self {
            Self::Bytes(b) => b.append(false),
            Self::Text(b) => b.append(false),
        }
    }

    fn push(&mut self, parts: &[&[u8]]) -> DfResult<()> {
        match self {
            Self::Bytes(b) => {
                for p in parts {
                    b.values().append_value(p);
                }
                b.append(true);
            }
            Self::Text(b) => {
                for p in parts {
                    match std::str::from_utf8(p) {
                        Ok(s) => b.values().append_value(s),
                        Err(_) => return exec_err!("split: a piece is not valid UTF-8"),
                    }
                }
                b.append(true);
            }
        }
        Ok(())
    }

    fn finish(self) -> ArrayRef {
        match self {
            Self::Bytes(mut b) => Arc::new(b.finish()),
            Self::Text(mut b) => Arc::new(b.finish()),
        }
    }
}

fn split_on<'v>(v: &'v [u8], delimiter: &[u8]) -> Vec<&'v [u8]> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + delimiter.len() <= v.len() {
        if &v[i..i + delimiter.len()] == delimiter {
            parts.push(&v[start..i]);
            i += delimiter.len();
            start = i;
        } else {
            i += 1;
        }
    }
    parts.push(&v[start..]);
    parts
}

/// A compiled pattern of either kind.
enum Pattern {
    Bytes(regex::bytes::Regex),
    Text(regex::Regex),
}

impl Pattern {
    /// Each match in `v[from..]`, as the span in `v` of its one capturing group when the
    /// pattern has one (None where the group took no part), else of the whole match.
    /// A text pattern reads `v` as UTF-8, and `from` is a character boundary.
    fn spans(&self, v: &[u8], from: usize) -> Vec<Option<std::ops::Range<usize>>> {
        let shift = |m: Option<std::ops::Range<usize>>| m.map(|r| r.start + from..r.end + from);
        match self {
            Self::Bytes(r) => r
                .captures_iter(&v[from..])
                .map(|c| shift(c.get(c.len() - 1).map(|m| m.range())))
                .collect(),
            Self::Text(r) => std::str::from_utf8(&v[from..])
                .map(|h| {
                    r.captures_iter(h)
                        .map(|c| shift(c.get(c.len() - 1).map(|m| m.range())))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

fn compile(op: Op, pattern: &[u8], text: bool) -> DfResult<Pattern> {
    compile_pattern(op.name(), pattern, text, op == Op::RegexpExtract)
}

/// `pattern` compiled for STRING values (`text`: Unicode) or BYTES (byte by byte);
/// with `one_group`, a pattern of more than one capturing group is refused.
fn compile_pattern(name: &str, pattern: &[u8], text: bool, one_group: bool) -> DfResult<Pattern> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return exec_err!(
            "{name}: the pattern is {} bytes, over the limit of {MAX_PATTERN_BYTES}",
            pattern.len()
        );
    }
    let Ok(source) = std::str::from_utf8(pattern) else {
        return exec_err!("{name}: the pattern is not valid UTF-8");
    };
    let compiled = if text {
        regex::Regex::new(source).map(Pattern::Text)
    } else {
        regex::bytes::RegexBuilder::new(source)
            .unicode(false)
            .build()
            .map(Pattern::Bytes)
    };
    let pattern = compiled.or_else(|e| exec_err!("{name}: invalid regular expression: {e}"))?;
    let groups = match &pattern {
        Pattern::Bytes(r) => r.captures_len(),
        Pattern::Text(r) => r.captures_len(),
    };
    if one_group && groups > 2 {
        return exec_err!("{name}: the pattern may have at most one capturing group");
    }
    Ok(pattern)
}

fn regexp(op: Op, cols: &[Column], rows: usize) -> DfResult<ArrayRef> {
    let text = cols[0].is_text();
    let mut cached: Option<(Vec<u8>, Pattern)> = None;
    let mut found = Vec::with_capacity(rows);
    let mut extracted = Out::like(&cols[0]);
    for i in 0..rows {
        let (Some(v), Some(p)) = (cols[0].get(i), cols[1].get(i)) else {
            found.push(None);
            extracted.push(None)?;
            continue;
        };
        let (source, pattern) = match cached.take() {
            Some((source, pattern)) if source == p => (source, pattern),
            _ => (p.to_vec(), compile(op, p, text)?),
        };
        if op == Op::RegexpContains {
            found.push(Some(match &pattern {
                Pattern::Bytes(r) => r.is_match(v),
                Pattern::Text(r) => r.is_match(std::str::from_utf8(v).unwrap_or_default()),
            }));
            cached = Some((source, pattern));
            continue;
        }
        // The one capturing group if there is one, else the whole match.
        let span = match &pattern {
            Pattern::Bytes(r) => r
                .captures(v)
                .and_then(|c| c.get(c.len() - 1).map(|m| m.range())),
            Pattern::Text(r) => r
                .captures(std::str::from_utf8(v).unwrap_or_default())
                .and_then(|c| c.get(c.len() - 1).map(|m| m.range())),
        };
        extracted.push(span.map(|r| &v[r]))?;
        cached = Some((source, pattern));
    }
    Ok(if op == Op::RegexpContains {
        Arc::new(found.into_iter().collect::<BooleanArray>())
    } else {
        extracted.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_empty_pieces() {
        assert_eq!(split_on(b"a#b##c", b"#"), vec![&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(split_on(b"", b"#"), vec![&b""[..]]);
        assert_eq!(split_on(b"ab", b"ab"), vec![&b""[..], b""]);
    }

    #[test]
    fn replace_replaces_every_match() {
        assert_eq!(replace_bytes(b"a#b#c", b"#", b"::"), b"a::b::c".to_vec());
        assert_eq!(replace_bytes(b"abc", b"", b"x"), b"abc".to_vec());
    }
}
