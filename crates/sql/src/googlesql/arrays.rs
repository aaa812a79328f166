//! GoogleSQL's array functions DataFusion lacks, and the finishing step of its
//! approximate aggregates (GoogleSQL's session only):
//!
//! | function | result |
//! |---|---|
//! | `ARRAY_IS_DISTINCT(a)` | whether no two elements are equal (NULL for a NULL array) |
//! | `ARRAY_LAST_N(a, n)` | the last `n` elements |
//! | `ARRAY_OFFSET(a, target[, 'FIRST'\|'LAST'])` | the 0-based offset of the first (or last) element equal to `target`, NULL if none |
//! | `ARRAY_OFFSETS(a, target)` | every such offset |
//! | `GENERATE_DATE_ARRAY(start, end[, INTERVAL n part])` | dates from `start` to `end` by the step (1 DAY by default) |
//! | `GENERATE_TIMESTAMP_ARRAY(start, end, INTERVAL n part)` | timestamps likewise |
//!
//! `APPROX_QUANTILES(x, n)`, `APPROX_TOP_COUNT(x, n)` and `APPROX_TOP_SUM(x, w, n)` are
//! planned as `ARRAY_AGG` of the values followed by `__approx_quantiles`,
//! `__approx_top_count`, `__approx_top_sum` here, which compute them exactly: the
//! `n + 1` boundaries (minimum, the `k/n` quantiles as elements of the sorted values,
//! maximum), the `n` most frequent values with their counts, the `n` values of greatest
//! total weight with their sums.

use std::collections::HashMap;

use datafusion::arrow::datatypes::{DataType, Field, Fields, IntervalMonthDayNano, TimeUnit};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;

use super::rowwise::{self, Def, arity, element_type, elements, int, int_type, list_of};

/// The most elements a generated array may have.
const MAX_GENERATED: usize = 1_000_000;
/// The name of `__approx_top_count`'s and `__approx_top_sum`'s value field.
const VALUE: &str = "value";

const DEFS: [Def; 9] = [
    ("array_is_distinct", is_distinct_types, is_distinct),
    ("array_last_n", last_n_types, last_n),
    ("array_offset", offset_types, offset),
    ("array_offsets", offset_types, offsets),
    ("generate_date_array", date_array_types, date_array),
    (
        "generate_timestamp_array",
        timestamp_array_types,
        timestamp_array,
    ),
    ("__approx_quantiles", quantiles_types, quantiles),
    ("__approx_top_count", top_types, top),
    ("__approx_top_sum", top_types, top),
];

/// Registers the array functions.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    rowwise::register(state, &DEFS)
}

fn array_arg(name: &str, t: &DataType) -> DfResult<DataType> {
    match (element_type(t), t) {
        (Some(e), _) => Ok(list_of(e.clone())),
        (None, DataType::Null) => Ok(list_of(DataType::Null)),
        _ => plan_err!("{name} takes an ARRAY first, got {t}"),
    }
}

fn is_distinct_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    Ok((vec![array_arg(name, &args[0])?], DataType::Boolean))
}

fn last_n_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    let a = array_arg(name, &args[0])?;
    if !int_type(&args[1]) {
        return plan_err!("{name} takes an INT64 count, got {}", args[1]);
    }
    Ok((vec![a.clone(), DataType::Int64], a))
}

fn offset_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, if name == "array_offset" { 3 } else { 2 })?;
    let a = array_arg(name, &args[0])?;
    let element = element_type(&a).cloned().unwrap_or(DataType::Null);
    let mut coerced = vec![a, element];
    if args.len() == 3 {
        coerced.push(DataType::Utf8);
    }
    let out = if name == "array_offset" {
        DataType::Int64
    } else {
        list_of(DataType::Int64)
    };
    Ok((coerced, out))
}

fn date_array_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 3)?;
    let mut coerced = vec![DataType::Date32, DataType::Date32];
    if args.len() == 3 {
        coerced.push(DataType::Interval(
            datafusion::arrow::datatypes::IntervalUnit::MonthDayNano,
        ));
    }
    Ok((coerced, list_of(DataType::Date32)))
}

fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn timestamp_array_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 3, 3)?;
    let coerced = vec![
        timestamp_type(),
        timestamp_type(),
        DataType::Interval(datafusion::arrow::datatypes::IntervalUnit::MonthDayNano),
    ];
    Ok((coerced, list_of(timestamp_type())))
}

fn quantiles_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    let a = array_arg(name, &args[0])?;
    Ok((vec![a.clone(), DataType::Int64], a))
}

/// `__approx_top_count(ARRAY_AGG(x), n)` or `__approx_top_sum(ARRAY_AGG(STRUCT(x, w)), n)`.
fn top_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    let a = array_arg(name, &args[0])?;
    let element = element_type(&a).cloned().unwrap_or(DataType::Null);
    let (value, count) = if name == "__approx_top_sum" {
        let DataType::Struct(fields) = &element else {
            return plan_err!("{name} takes an ARRAY of STRUCT(value, weight), got {a}");
        };
        let [v, w] = fields.iter().collect::<Vec<_>>()[..] else {
            return plan_err!("{name} takes an ARRAY of STRUCT(value, weight), got {a}");
        };
        let sum = if w.data_type().is_floating() {
            DataType::Float64
        } else if int_type(w.data_type()) {
            DataType::Int64
        } else {
            return plan_err!(
                "APPROX_TOP_SUM takes a numeric weight, got {}",
                w.data_type()
            );
        };
        (v.data_type().clone(), (sum, "sum"))
    } else {
        (element, (DataType::Int64, "count"))
    };
    let entry = DataType::Struct(Fields::from(vec![
        Field::new(VALUE, value, true),
        Field::new(count.1, count.0, true),
    ]));
    Ok((vec![a, DataType::Int64], list_of(entry)))
}

fn is_distinct(_: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(items) = elements(&args[0])? else {
        return Ok(ScalarValue::Boolean(None));
    };
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    Ok(ScalarValue::Boolean(Some(
        items.into_iter().all(|v| seen.insert(v)),
    )))
}

fn last_n(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (Some(items), Some(n)) = (elements(&args[0])?, int(&args[1])) else {
        return rowwise::null(out);
    };
    if n < 0 {
        return exec_err!("{name}: n must not be negative, got {n}");
    }
    let keep = usize::try_from(n).unwrap_or(usize::MAX).min(items.len());
    let element = element_type(out).cloned().unwrap_or(DataType::Null);
    Ok(rowwise::array(&items[items.len() - keep..], &element))
}

/// Offsets of the elements equal to `target` (NULL never equals).
fn matching(args: &[ScalarValue]) -> DfResult<Option<Vec<i64>>> {
    let Some(items) = elements(&args[0])? else {
        return Ok(None);
    };
    if args[1].is_null() {
        return Ok(None);
    }
    Ok(Some(
        items
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_null() && **v == args[1])
            .map(|(i, _)| i as i64)
            .collect(),
    ))
}

fn offset(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let last = match args.get(2).map(rowwise::text) {
        None => false,
        Some(Some(m)) if m.eq_ignore_ascii_case("first") => false,
        Some(Some(m)) if m.eq_ignore_ascii_case("last") => true,
        Some(m) => return exec_err!("{name}: the mode must be FIRST or LAST, got {m:?}"),
    };
    let found = matching(args)?;
    Ok(ScalarValue::Int64(found.and_then(|o| {
        if last {
            o.last().copied()
        } else {
            o.first().copied()
        }
    })))
}

fn offsets(_: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    match matching(args)? {
        Some(o) => {
            let o: Vec<_> = o.into_iter().map(|i| ScalarValue::Int64(Some(i))).collect();
            Ok(rowwise::array(&o, &DataType::Int64))
        }
        None => rowwise::null(out),
    }
}

/// The step of a generated array (1 DAY when absent).
fn step(name: &str, v: Option<&ScalarValue>) -> DfResult<Option<IntervalMonthDayNano>> {
    match v {
        None => Ok(Some(IntervalMonthDayNano::new(0, 1, 0))),
        Some(ScalarValue::IntervalMonthDayNano(i)) => {
            if i.is_some_and(|i| i.months == 0 && i.days == 0 && i.nanoseconds == 0) {
                return exec_err!("{name}: the step must not be 0");
            }
            Ok(*i)
        }
        Some(other) => exec_err!("{name}: the step must be an INTERVAL, got {other}"),
    }
}

/// Walks from `start` to `end` (inclusive) by `next`, in the step's direction.
fn walk<T: Copy + PartialOrd>(
    name: &str,
    start: T,
    end: T,
    forward: bool,
    next: impl Fn(T) -> Option<T>,
) -> DfResult<Vec<T>> {
    let mut out = Vec::new();
    let mut at = Some(start);
    while let Some(t) = at {
        if (forward && t > end) || (!forward && t < end) {
            break;
        }
        if out.len() == MAX_GENERATED {
            return exec_err!("{name}: the array would have more than {MAX_GENERATED} elements");
        }
        out.push(t);
        at = next(t);
    }
    Ok(out)
}

fn date_array(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (ScalarValue::Date32(Some(start)), ScalarValue::Date32(Some(end)), Some(step)) =
        (&args[0], &args[1], step(name, args.get(2))?)
    else {
        return rowwise::null(out);
    };
    if step.nanoseconds != 0 {
        return exec_err!("{name}: the step must be whole days, weeks, months, quarters or years");
    }
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let date = |d: i32| epoch.checked_add_signed(chrono::TimeDelta::days(i64::from(d)));
    let forward = step.months > 0 || (step.months == 0 && step.days > 0);
    let (Some(s), Some(e)) = (date(*start), date(*end)) else {
        return exec_err!("{name}: a date is out of range");
    };
    let days = walk(name, s, e, forward, |d| {
        let d = if step.months >= 0 {
            d.checked_add_months(chrono::Months::new(step.months.unsigned_abs()))
        } else {
            d.checked_sub_months(chrono::Months::new(step.months.unsigned_abs()))
        }?;
        d.checked_add_signed(chrono::TimeDelta::days(i64::from(step.days)))
    })?;
    let values: Vec<_> = days
        .into_iter()
        .map(|d| ScalarValue::Date32(i32::try_from((d - epoch).num_days()).ok()))
        .collect();
    Ok(rowwise::array(&values, &DataType::Date32))
}

fn timestamp_array(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (
        ScalarValue::TimestampMicrosecond(Some(start), _),
        ScalarValue::TimestampMicrosecond(Some(end), _),
        Some(step),
    ) = (&args[0], &args[1], step(name, args.get(2))?)
    else {
        return rowwise::null(out);
    };
    if step.months != 0 {
        return exec_err!("{name}: the step must be in days or smaller parts, not months or years");
    }
    let us = i64::from(step.days) * 86_400_000_000 + step.nanoseconds / 1_000;
    if us == 0 {
        return exec_err!("{name}: the step must be at least 1 microsecond");
    }
    let times = walk(name, *start, *end, us > 0, |t| t.checked_add(us))?;
    let zone = Some("UTC".into());
    let values: Vec<_> = times
        .into_iter()
        .map(|t| ScalarValue::TimestampMicrosecond(Some(t), zone.clone()))
        .collect();
    Ok(rowwise::array(&values, &timestamp_type()))
}

/// The boundary count `n` of `APPROX_QUANTILES` / the entry count of `APPROX_TOP_*`.
fn count_arg(name: &str, v: &ScalarValue) -> DfResult<Option<usize>> {
    match int(v) {
        Some(n) if n >= 1 => Ok(usize::try_from(n).ok()),
        Some(n) => exec_err!("{}: the count must be at least 1, got {n}", public(name)),
        None => Ok(None),
    }
}

/// The name a user wrote.
fn public(name: &str) -> String {
    name.trim_start_matches('_').to_ascii_uppercase()
}

fn quantiles(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (Some(items), Some(n)) = (elements(&args[0])?, count_arg(name, &args[1])?) else {
        return rowwise::null(out);
    };
    let mut values: Vec<ScalarValue> = items.into_iter().filter(|v| !v.is_null()).collect();
    let element = element_type(out).cloned().unwrap_or(DataType::Null);
    if values.is_empty() {
        return rowwise::null(out);
    }
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let m = values.len();
    let bounds: Vec<_> = (0..=n)
        .map(|k| {
            let i = (k * m).div_ceil(n).saturating_sub(1).min(m - 1);
            values[i].clone()
        })
        .collect();
    Ok(rowwise::array(&bounds, &element))
}

fn top(name: &str, args: &[ScalarValue], out: &DataType) -> DfResult<ScalarValue> {
    let (Some(items), Some(n)) = (elements(&args[0])?, count_arg(name, &args[1])?) else {
        return rowwise::null(out);
    };
    let Some(DataType::Struct(fields)) = element_type(out).cloned() else {
        return exec_err!("{name}: unexpected result type {out}");
    };
    let weighted = name == "__approx_top_sum";
    // Value → (first seen, total), kept in first-seen order for ties.
    let mut totals: HashMap<ScalarValue, (usize, f64, i64)> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let (value, weight) = if weighted {
            let ScalarValue::Struct(s) = item else {
                continue;
            };
            let v = ScalarValue::try_from_array(s.column(0), 0)?;
            let w = ScalarValue::try_from_array(s.column(1), 0)?;
            if w.is_null() {
                continue;
            }
            (v, w)
        } else {
            (item.clone(), ScalarValue::Int64(Some(1)))
        };
        let e = totals.entry(value).or_insert((i, 0.0, 0));
        e.1 += rowwise::float(&weight).unwrap_or(0.0);
        e.2 = e.2.saturating_add(int(&weight).unwrap_or(0));
    }
    let mut ranked: Vec<_> = totals.into_iter().collect();
    ranked.sort_by(|a, b| {
        b.1.1
            .partial_cmp(&a.1.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.0.cmp(&b.1.0))
    });
    ranked.truncate(n);
    let total_type = fields[1].data_type().clone();
    let entries = ranked
        .into_iter()
        .map(|(value, (_, f, i))| {
            let total = if total_type == DataType::Float64 {
                ScalarValue::Float64(Some(f))
            } else {
                ScalarValue::Int64(Some(i))
            };
            let value = value.cast_to(fields[0].data_type())?;
            Ok(ScalarValue::Struct(std::sync::Arc::new(
                datafusion::arrow::array::StructArray::try_new(
                    fields.clone(),
                    vec![value.to_array()?, total.to_array()?],
                    None,
                )?,
            )))
        })
        .collect::<DfResult<Vec<_>>>()?;
    Ok(rowwise::array(&entries, &DataType::Struct(fields.clone())))
}
