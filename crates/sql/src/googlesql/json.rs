//! GoogleSQL's JSON functions over JSON-formatted STRING values (GoogleSQL's session
//! only). Bigtable has no JSON type; these read JSON text, such as a cell value cast to
//! STRING:
//!
//! | function | result |
//! |---|---|
//! | `JSON_QUERY(json, path)`, `JSON_EXTRACT(json, path)` | the JSON value at `path`, as compact JSON text |
//! | `JSON_VALUE(json[, path])`, `JSON_EXTRACT_SCALAR(json[, path])` | the scalar at `path` as STRING (strings unquoted); NULL for an object, array or null |
//! | `JSON_QUERY_ARRAY(json[, path])`, `JSON_EXTRACT_ARRAY` | the array at `path` as ARRAY<STRING> of JSON texts |
//! | `JSON_VALUE_ARRAY(json[, path])`, `JSON_EXTRACT_STRING_ARRAY` | the array of scalars at `path` as ARRAY<STRING>; NULL if an element is not a scalar |
//! | `TO_JSON_STRING(value[, pretty_print])` | any value as JSON text: INT64 beyond ±2^53 and non-finite FLOAT64 quoted, BYTES as base64, TIMESTAMP as RFC 3339 in UTC |
//!
//! A path is JSONPath as GoogleSQL takes it: `$`, then `.member`, `."member"`,
//! `['member']`, `["member"]` or `[index]`. A path that matches nothing gives NULL;
//! text that is not JSON, or a path that is not JSONPath, is an error naming it.

use base64::Engine as _;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;
use serde_json::Value;

use super::rowwise::{self, Def, arity, list_of, text, text_type};

/// The longest JSON text the functions read.
const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;
/// The largest INT64 `TO_JSON_STRING` writes as a JSON number: 2^53, beyond which a
/// JSON reader's doubles lose digits.
const MAX_EXACT_JSON_INT: i64 = 1 << 53;

const DEFS: [Def; 9] = [
    ("json_query", query_types, query),
    ("json_extract", query_types, query),
    ("json_value", query_types, value),
    ("json_extract_scalar", query_types, value),
    ("json_query_array", array_types, query_array),
    ("json_extract_array", array_types, query_array),
    ("json_value_array", array_types, value_array),
    ("json_extract_string_array", array_types, value_array),
    ("to_json_string", to_json_types, to_json_string),
];

/// Registers the JSON functions.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    rowwise::register(state, &DEFS)
}

fn path_args(name: &str, args: &[DataType]) -> DfResult<Vec<DataType>> {
    arity(name, args, 1, 2)?;
    if !args.iter().all(text_type) {
        return plan_err!("{name} takes a JSON STRING and a JSONPath STRING, got {args:?}");
    }
    Ok(vec![DataType::Utf8; args.len()])
}

fn query_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    Ok((path_args(name, args)?, DataType::Utf8))
}

fn array_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    Ok((path_args(name, args)?, list_of(DataType::Utf8)))
}

fn to_json_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 2)?;
    let mut coerced = vec![args[0].clone()];
    if args.len() == 2 {
        coerced.push(DataType::Boolean);
    }
    Ok((coerced, DataType::Utf8))
}

/// One step of a JSONPath.
#[derive(Debug, PartialEq)]
enum Step {
    Member(String),
    Index(usize),
}

/// Reads a JSONPath (see the module docs).
fn parse_path(name: &str, path: &str) -> DfResult<Vec<Step>> {
    let Some(mut rest) = path.strip_prefix('$') else {
        return exec_err!("{name}: the JSONPath {path:?} must begin with '$'");
    };
    let bad = |why: &str| exec_err!("{name}: the JSONPath {path:?} is not valid: {why}");
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            if let Some(r) = r.strip_prefix('"') {
                let Some(end) = r.find('"') else {
                    return bad("an unclosed \"");
                };
                steps.push(Step::Member(r[..end].to_string()));
                rest = &r[end + 1..];
            } else {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return bad("an empty member name");
                }
                steps.push(Step::Member(r[..end].to_string()));
                rest = &r[end..];
            }
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return bad("an unclosed [");
            };
            let inside = r[..end].trim();
            let quoted = ['\'', '"']
                .iter()
                .find_map(|q| inside.strip_prefix(*q).and_then(|s| s.strip_suffix(*q)));
            match (quoted, inside.parse::<usize>()) {
                (Some(member), _) => steps.push(Step::Member(member.to_string())),
                (None, Ok(i)) => steps.push(Step::Index(i)),
                (None, Err(_)) => return bad("a subscript must be an index or a quoted name"),
            }
            rest = &r[end + 1..];
        } else {
            return bad("expected '.' or '['");
        }
    }
    Ok(steps)
}

/// The JSON value at the path in the arguments (None: a NULL argument or no match).
fn at_path(name: &str, args: &[ScalarValue]) -> DfResult<Option<Value>> {
    let Some(json) = text(&args[0]) else {
        return Ok(None);
    };
    let path = match args.get(1) {
        Some(p) => match text(p) {
            Some(p) => p,
            None => return Ok(None),
        },
        None => "$",
    };
    let steps = parse_path(name, path)?;
    if json.len() > MAX_JSON_BYTES {
        return exec_err!(
            "{name}: the JSON text is {} bytes, more than the {MAX_JSON_BYTES} bytes allowed",
            json.len()
        );
    }
    let mut doc: Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return exec_err!("{name}: the text is not valid JSON: {e}"),
    };
    for step in &steps {
        let next = match (step, &mut doc) {
            (Step::Member(m), Value::Object(o)) => o.remove(m.as_str()),
            (Step::Index(i), Value::Array(a)) if *i < a.len() => Some(a.swap_remove(*i)),
            _ => None,
        };
        match next {
            Some(v) => doc = v,
            None => return Ok(None),
        }
    }
    Ok(Some(doc))
}

/// A scalar's STRING form: strings unquoted, numbers and booleans as written.
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn query(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Utf8(
        at_path(name, args)?.map(|v| v.to_string()),
    ))
}

fn value(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Utf8(
        at_path(name, args)?.as_ref().and_then(scalar_text),
    ))
}

fn query_array(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    match at_path(name, args)? {
        Some(Value::Array(items)) => {
            let items: Vec<_> = items
                .iter()
                .map(|v| ScalarValue::Utf8(Some(v.to_string())))
                .collect();
            Ok(rowwise::array(&items, &DataType::Utf8))
        }
        _ => rowwise::null(out),
    }
}

fn value_array(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let Some(Value::Array(items)) = at_path(name, args)? else {
        return rowwise::null(out);
    };
    let mut texts = Vec::with_capacity(items.len());
    for v in &items {
        match v {
            Value::Null => texts.push(ScalarValue::Utf8(None)),
            Value::Array(_) | Value::Object(_) => return rowwise::null(out),
            scalar => texts.push(ScalarValue::Utf8(scalar_text(scalar))),
        }
    }
    Ok(rowwise::array(&texts, &DataType::Utf8))
}

fn to_json_string(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let pretty = matches!(args.get(1), Some(ScalarValue::Boolean(Some(true))));
    let v = to_json(name, &args[0])?;
    let out = if pretty {
        serde_json::to_string_pretty(&v)
    } else {
        serde_json::to_string(&v)
    };
    match out {
        Ok(s) => Ok(ScalarValue::Utf8(Some(s))),
        Err(e) => exec_err!("{name}: {e}"),
    }
}

/// A SQL value as JSON (see the module docs).
fn to_json(name: &str, v: &ScalarValue) -> DfResult<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    if let Some(s) = text(v) {
        return Ok(Value::String(s.to_string()));
    }
    if let Some(b) = rowwise::bytes(v) {
        return Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(b),
        ));
    }
    if let Some(items) = rowwise::elements(v)? {
        return items
            .iter()
            .map(|i| to_json(name, i))
            .collect::<DfResult<Vec<_>>>()
            .map(Value::Array);
    }
    Ok(match v {
        ScalarValue::Boolean(Some(b)) => Value::Bool(*b),
        ScalarValue::Float64(_) | ScalarValue::Float32(_) => {
            let f = rowwise::float(v).unwrap_or_default();
            match serde_json::Number::from_f64(f) {
                Some(n) => Value::Number(n),
                None if f.is_nan() => Value::String("NaN".into()),
                None if f > 0.0 => Value::String("Infinity".into()),
                None => Value::String("-Infinity".into()),
            }
        }
        ScalarValue::Struct(s) => {
            let mut o = serde_json::Map::new();
            for (field, column) in s.fields().iter().zip(s.columns()) {
                let value = ScalarValue::try_from_array(column, 0)?;
                o.insert(field.name().clone(), to_json(name, &value)?);
            }
            Value::Object(o)
        }
        ScalarValue::TimestampMicrosecond(Some(t), _) => time_text(*t, TimeUnit::Microsecond),
        ScalarValue::TimestampNanosecond(Some(t), _) => time_text(*t, TimeUnit::Nanosecond),
        ScalarValue::TimestampMillisecond(Some(t), _) => time_text(*t, TimeUnit::Millisecond),
        ScalarValue::TimestampSecond(Some(t), _) => time_text(*t, TimeUnit::Second),
        ScalarValue::Date32(Some(_)) | ScalarValue::Date64(Some(_)) => Value::String(v.to_string()),
        other => match rowwise::int(other) {
            Some(i) if i.unsigned_abs() <= MAX_EXACT_JSON_INT.unsigned_abs() => Value::from(i),
            Some(i) => Value::String(i.to_string()),
            None => match other {
                ScalarValue::Map(_) => return exec_err!("{name}: a MAP has no JSON form"),
                _ => Value::String(other.to_string()),
            },
        },
    })
}

/// A timestamp as RFC 3339 text in UTC, with as many fraction digits as it needs.
fn time_text(t: i64, unit: TimeUnit) -> Value {
    let ns = match unit {
        TimeUnit::Second => t.saturating_mul(1_000_000_000),
        TimeUnit::Millisecond => t.saturating_mul(1_000_000),
        TimeUnit::Microsecond => t.saturating_mul(1_000),
        TimeUnit::Nanosecond => t,
    };
    let when = chrono::DateTime::from_timestamp_nanos(ns);
    Value::String(
        when.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(json: &str, path: &str) -> Option<String> {
        let args = [
            ScalarValue::Utf8(Some(json.into())),
            ScalarValue::Utf8(Some(path.into())),
        ];
        match query("json_query", &args, &DataType::Utf8) {
            Ok(ScalarValue::Utf8(s)) => s,
            other => Some(format!("unexpected: {other:?}")),
        }
    }

    #[test]
    fn paths() {
        let doc = r#"{"class": {"students": [{"name": "Jane"}, {"name": "John"}]}, "a.b": 1}"#;
        assert_eq!(
            q(doc, "$.class.students[1].name").as_deref(),
            Some("\"John\"")
        );
        assert_eq!(
            q(doc, "$['class']['students'][0]").as_deref(),
            Some(r#"{"name":"Jane"}"#)
        );
        assert_eq!(q(doc, "$.\"a.b\"").as_deref(), Some("1"));
        assert_eq!(q(doc, "$['a.b']").as_deref(), Some("1"));
        assert_eq!(q(doc, "$.missing"), None);
        assert_eq!(q(doc, "$.class.students[7]"), None);
        assert!(parse_path("f", "class").is_err());
        assert!(parse_path("f", "$.a[x]").is_err());
    }

    #[test]
    fn members_keep_their_order() {
        assert_eq!(
            q(r#"{"b": 1, "a": [2, 3]}"#, "$").as_deref(),
            Some(r#"{"b":1,"a":[2,3]}"#)
        );
    }

    #[test]
    fn values_as_json() {
        let j = |v: ScalarValue| {
            to_json("t", &v).map_or_else(|e| format!("error: {e}"), |j| j.to_string())
        };
        assert_eq!(j(ScalarValue::Int64(Some(5))), "5");
        assert_eq!(
            j(ScalarValue::Int64(Some(i64::MAX))),
            "\"9223372036854775807\""
        );
        assert_eq!(j(ScalarValue::Float64(Some(f64::NAN))), "\"NaN\"");
        assert_eq!(j(ScalarValue::Binary(Some(b"ab".to_vec()))), "\"YWI=\"");
        assert_eq!(
            j(ScalarValue::TimestampMicrosecond(Some(1_500_000), None)),
            "\"1970-01-01T00:00:01.500Z\""
        );
        assert_eq!(j(ScalarValue::Utf8(None)), "null");
    }
}
