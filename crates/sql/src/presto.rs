//! Timestream's functions that come from Presto, where DataFusion's are missing or
//! answer differently. Registered in the Timestream dialect's session
//! ([`crate::dialect::Dialect::Timestream`]); most are rewritten into DataFusion
//! expressions when the plan is simplified, the rest are computed here.
//!
//! | function | Timestream's meaning |
//! |---|---|
//! | `regexp_replace(s, p[, r])` | every match replaced (DataFusion's: the first) |
//! | `regexp_extract(s, p[, group])` | the first match, or its group |
//! | `regexp_extract_all(s, p[, group])`, `regexp_split(s, p)` | arrays |
//! | `date_format(t, fmt)`, `date_parse(s, fmt)` | MySQL's format codes (`%Y-%m-%d %H:%i:%s`) |
//! | `format_datetime(t, fmt)`, `parse_datetime(s, fmt)` | Joda-Time's pattern letters (`yyyy-MM-dd HH:mm z`), [`joda`] |
//! | `to_base`, `from_base`, `bit_count`, `bitwise_*`, `parse_duration` | [`numbers`] |
//! | `to_unixtime(t)` | DOUBLE seconds |
//! | `to_iso8601(t)`, `from_iso8601_timestamp(s)`, `from_iso8601_date(s)` | ISO 8601 text |
//! | `date_add(unit, n, t)`, `date_diff(unit, t1, t2)` | units `millisecond` … `year` |
//! | `year`, `quarter`, `month`, `week`, `day`, `day_of_month`, `day_of_week`, `dow`, `day_of_year`, `doy`, `hour`, `minute`, `second`, `millisecond` | BIGINT fields (`day_of_week`: Monday 1 … Sunday 7) |
//! | `last_day_of_month(t)` | DATE |
//! | `element_at(array, i)`, `element_at(map, k)` | the element (1-based; negative from the end), or the map's value |
//! | `if(c, a[, b])` | `CASE WHEN c THEN a ELSE b END` |
//! | `mod`, `sign`, `truncate`, `levenshtein_distance` | `%`, `signum`, `trunc`, `levenshtein` |
//! | `is_nan`, `is_finite`, `is_infinite`, `nan()`, `infinity()` | IEEE tests and constants |
//! | `current_timezone()` | `'UTC'` (every time is UTC) |
//! | `count_if(b)`, `max_by(x, y)`, `min_by(x, y)`, `arbitrary(x)`, `every(b)`, `geometric_mean(x)` | aggregates |

mod joda;
mod numbers;

use std::sync::Arc;

use chrono::{DateTime, Datelike, Months, NaiveDate, NaiveDateTime, Timelike, Utc};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Float64Array, Int64Array, ListBuilder,
    StringArray, StringBuilder, TimestampNanosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Field, Float64Type, TimeUnit, TimestampNanosecondType,
};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::type_coercion::binary::{comparison_coercion, type_union_resolution};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, ColumnarValue, Expr, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, SortExpr, Volatility, lit, when,
};

/// Nanoseconds in a second.
const NS_PER_SEC: i64 = 1_000_000_000;
/// The longest regular expression these functions compile.
const MAX_PATTERN_BYTES: usize = 20 * 1024;

/// Registers the module's functions in `state`, over DataFusion's of the same names.
pub fn register(state: &mut SessionState) -> DfResult<()> {
    use datafusion::functions::{math, string};
    use datafusion::functions_aggregate::{any_value, bool_and_or};
    for f in [
        Op::RegexpReplace,
        Op::RegexpExtract,
        Op::RegexpExtractAll,
        Op::RegexpSplit,
        Op::DateFormat,
        Op::DateParse,
        Op::FormatDatetime,
        Op::ParseDatetime,
        Op::ToUnixtime,
        Op::ToIso8601,
        Op::FromIso8601Timestamp,
        Op::FromIso8601Date,
        Op::DateAdd,
        Op::DateDiff,
        Op::LastDayOfMonth,
        Op::ElementAt,
        Op::If,
        Op::Mod,
        Op::IsNan,
        Op::IsFinite,
        Op::IsInfinite,
        Op::Nan,
        Op::Infinity,
        Op::CurrentTimezone,
    ]
    .into_iter()
    .chain(FIELDS.iter().map(|(name, _)| Op::Field(name)))
    {
        state.register_udf(Arc::new(ScalarUDF::from(Presto::new(f))))?;
    }
    for (udf, alias) in [
        (math::signum(), "sign"),
        (math::trunc(), "truncate"),
        (string::levenshtein(), "levenshtein_distance"),
    ] {
        state.register_udf(Arc::new(udf.as_ref().clone().with_aliases([alias])))?;
    }
    for (udaf, alias) in [
        (any_value::any_value_udaf(), "arbitrary"),
        (bool_and_or::bool_and_udaf(), "every"),
    ] {
        state.register_udaf(Arc::new(udaf.as_ref().clone().with_aliases([alias])))?;
    }
    for a in [Agg::CountIf, Agg::MaxBy, Agg::MinBy, Agg::GeometricMean] {
        state.register_udaf(Arc::new(AggregateUDF::from(PrestoAgg::new(a))))?;
    }
    numbers::register(state)
}

/// The functions GoogleSQL shares with Timestream, under GoogleSQL's names: `IF`,
/// `MOD`, `IS_NAN`, `IS_INF`, `COUNTIF`.
pub fn register_for_googlesql(state: &mut SessionState) -> DfResult<()> {
    for (op, alias) in [
        (Op::If, None),
        (Op::Mod, None),
        (Op::IsNan, None),
        (Op::IsInfinite, Some("is_inf")),
    ] {
        let udf = ScalarUDF::from(Presto::new(op));
        let udf = match alias {
            Some(a) => udf.with_aliases([a]),
            None => udf,
        };
        state.register_udf(Arc::new(udf))?;
    }
    let countif = AggregateUDF::from(PrestoAgg::new(Agg::CountIf)).with_aliases(["countif"]);
    state.register_udaf(Arc::new(countif))?;
    Ok(())
}

/// Timestamp fields: the name and DataFusion's `date_part` of it.
const FIELDS: [(&str, &str); 14] = [
    ("year", "year"),
    ("quarter", "quarter"),
    ("month", "month"),
    ("week", "week"),
    ("day", "day"),
    ("day_of_month", "day"),
    ("day_of_week", "isodow"),
    ("dow", "isodow"),
    ("day_of_year", "doy"),
    ("doy", "doy"),
    ("hour", "hour"),
    ("minute", "minute"),
    ("second", "second"),
    ("millisecond", "millisecond"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    RegexpReplace,
    RegexpExtract,
    RegexpExtractAll,
    RegexpSplit,
    DateFormat,
    DateParse,
    FormatDatetime,
    ParseDatetime,
    ToUnixtime,
    ToIso8601,
    FromIso8601Timestamp,
    FromIso8601Date,
    DateAdd,
    DateDiff,
    LastDayOfMonth,
    ElementAt,
    If,
    Mod,
    IsNan,
    IsFinite,
    IsInfinite,
    Nan,
    Infinity,
    CurrentTimezone,
    Field(&'static str),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::RegexpReplace => "regexp_replace",
            Self::RegexpExtract => "regexp_extract",
            Self::RegexpExtractAll => "regexp_extract_all",
            Self::RegexpSplit => "regexp_split",
            Self::DateFormat => "date_format",
            Self::DateParse => "date_parse",
            Self::FormatDatetime => "format_datetime",
            Self::ParseDatetime => "parse_datetime",
            Self::ToUnixtime => "to_unixtime",
            Self::ToIso8601 => "to_iso8601",
            Self::FromIso8601Timestamp => "from_iso8601_timestamp",
            Self::FromIso8601Date => "from_iso8601_date",
            Self::DateAdd => "date_add",
            Self::DateDiff => "date_diff",
            Self::LastDayOfMonth => "last_day_of_month",
            Self::ElementAt => "element_at",
            Self::If => "if",
            Self::Mod => "mod",
            Self::IsNan => "is_nan",
            Self::IsFinite => "is_finite",
            Self::IsInfinite => "is_infinite",
            Self::Nan => "nan",
            Self::Infinity => "infinity",
            Self::CurrentTimezone => "current_timezone",
            Self::Field(name) => name,
        }
    }
}

/// One scalar function of the module.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Presto {
    op: Op,
    signature: Signature,
}

impl Presto {
    fn new(op: Op) -> Self {
        Self {
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn ts_ns() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, None)
}

fn is_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

impl ScalarUDFImpl for Presto {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, t: &[DataType]) -> DfResult<Vec<DataType>> {
        let name = self.name();
        let text = DataType::Utf8;
        let arity = |lo: usize, hi: usize| {
            if t.len() < lo || t.len() > hi {
                plan_err!("{name} takes {lo} to {hi} arguments, got {}", t.len())
            } else {
                Ok(())
            }
        };
        let time = |i: usize| {
            if is_time(&t[i]) || t[i].is_null() {
                Ok(ts_ns())
            } else {
                plan_err!("{name} takes a TIMESTAMP, got {}", t[i])
            }
        };
        let string = |i: usize| {
            if is_text(&t[i]) {
                Ok(DataType::Utf8)
            } else {
                plan_err!("{name} takes a VARCHAR, got {}", t[i])
            }
        };
        Ok(match self.op {
            Op::RegexpReplace => {
                arity(2, 3)?;
                (0..t.len()).map(string).collect::<DfResult<_>>()?
            }
            Op::RegexpExtract | Op::RegexpExtractAll => {
                arity(2, 3)?;
                let mut out = vec![string(0)?, string(1)?];
                if t.len() == 3 {
                    out.push(DataType::Int64);
                }
                out
            }
            Op::RegexpSplit => {
                arity(2, 2)?;
                vec![string(0)?, string(1)?]
            }
            Op::DateFormat | Op::FormatDatetime => {
                arity(2, 2)?;
                vec![time(0)?, string(1)?]
            }
            Op::DateParse | Op::ParseDatetime => {
                arity(2, 2)?;
                vec![string(0)?, string(1)?]
            }
            Op::ToUnixtime | Op::ToIso8601 | Op::LastDayOfMonth | Op::Field(_) => {
                arity(1, 1)?;
                vec![time(0)?]
            }
            Op::FromIso8601Timestamp | Op::FromIso8601Date => {
                arity(1, 1)?;
                vec![string(0)?]
            }
            Op::DateAdd => {
                arity(3, 3)?;
                vec![text, DataType::Int64, time(2)?]
            }
            Op::DateDiff => {
                arity(3, 3)?;
                vec![text, time(1)?, time(2)?]
            }
            Op::IsNan | Op::IsFinite | Op::IsInfinite => {
                arity(1, 1)?;
                vec![DataType::Float64]
            }
            Op::Nan | Op::Infinity | Op::CurrentTimezone => {
                arity(0, 0)?;
                vec![]
            }
            // Rewritten before they run; the types are what the rewrite gives, so the
            // plan's schema does not change when it is simplified.
            Op::ElementAt => {
                arity(2, 2)?;
                t.to_vec()
            }
            Op::If => {
                arity(2, 3)?;
                let common = type_union_resolution(&t[1..]).map_or_else(
                    || plan_err!("if: the branches' types {:?} have no common type", &t[1..]),
                    Ok,
                )?;
                std::iter::once(DataType::Boolean)
                    .chain(std::iter::repeat_n(common, t.len() - 1))
                    .collect()
            }
            Op::Mod => {
                arity(2, 2)?;
                let common = comparison_coercion(&t[0], &t[1])
                    .filter(DataType::is_numeric)
                    .map_or_else(
                        || plan_err!("mod takes two numbers, got {} and {}", t[0], t[1]),
                        Ok,
                    )?;
                vec![common.clone(), common]
            }
        })
    }

    fn return_type(&self, t: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::RegexpReplace
            | Op::RegexpExtract
            | Op::DateFormat
            | Op::FormatDatetime
            | Op::ToIso8601 => DataType::Utf8,
            Op::CurrentTimezone => DataType::Utf8,
            Op::RegexpExtractAll | Op::RegexpSplit => {
                DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
            }
            Op::DateParse | Op::ParseDatetime | Op::FromIso8601Timestamp | Op::DateAdd => ts_ns(),
            Op::FromIso8601Date | Op::LastDayOfMonth => DataType::Date32,
            Op::ToUnixtime | Op::Nan | Op::Infinity => DataType::Float64,
            Op::DateDiff | Op::Field(_) => DataType::Int64,
            Op::IsNan | Op::IsFinite | Op::IsInfinite => DataType::Boolean,
            Op::ElementAt => match t.first() {
                Some(
                    DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _),
                ) => f.data_type().clone(),
                Some(DataType::Map(entries, _)) => match entries.data_type() {
                    DataType::Struct(fields) if fields.len() == 2 => fields[1].data_type().clone(),
                    other => return plan_err!("element_at: unexpected map entries {other}"),
                },
                other => return plan_err!("element_at takes an array or a map, got {other:?}"),
            },
            Op::If => t.get(1).cloned().unwrap_or(DataType::Null),
            Op::Mod => t.first().cloned().unwrap_or(DataType::Null),
        })
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        use datafusion::functions::expr_fn as f;
        use datafusion::functions_nested::expr_fn as nested;
        let out = match (self.op, args.as_slice()) {
            (Op::If, [c, a]) => when(c.clone(), a.clone()).end()?,
            (Op::If, [c, a, b]) => when(c.clone(), a.clone()).otherwise(b.clone())?,
            (Op::Mod, [a, b]) => a.clone() % b.clone(),
            (Op::Nan, []) => lit(f64::NAN),
            (Op::Infinity, []) => lit(f64::INFINITY),
            (Op::CurrentTimezone, []) => lit("UTC"),
            (Op::IsNan, [x]) => f::isnan(x.clone()),
            (Op::ElementAt, [container, key]) => match info.get_data_type(container)? {
                DataType::Map(..) => nested::array_element(
                    nested::map_extract(container.clone(), key.clone()),
                    lit(1i64),
                ),
                _ => nested::array_element(container.clone(), key.clone()),
            },
            (Op::Field(name), [t]) => {
                let part = FIELDS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or("year", |(_, p)| *p);
                let whole = datafusion::logical_expr::cast(
                    f::date_part(lit(part), t.clone()),
                    DataType::Int64,
                );
                // `isodow` counts Monday 1 … Sunday 7 already, as Presto does.
                if name == "millisecond" {
                    whole % lit(1000i64)
                } else {
                    whole
                }
            }
            (_, _) => return Ok(ExprSimplifyResult::Original(args)),
        };
        Ok(ExprSimplifyResult::Simplified(out))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        crate::functions::invoke_rowwise(args, |arrays, rows| eval(self.op, arrays, rows))
    }
}

/// Strings of an argument, row by row.
fn strings(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// Timestamps of an argument in nanoseconds, row by row.
fn times(a: &ArrayRef) -> DfResult<TimestampNanosecondArray> {
    Ok(cast(a, &ts_ns())?
        .as_primitive::<TimestampNanosecondType>()
        .clone())
}

fn datetime(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

/// A compiled pattern, reused while rows repeat it.
struct Patterns {
    name: &'static str,
    last: Option<(String, regex::Regex)>,
}

impl Patterns {
    fn get(&mut self, source: &str) -> DfResult<&regex::Regex> {
        let name = self.name;
        if self.last.as_ref().is_none_or(|(s, _)| s != source) {
            if source.len() > MAX_PATTERN_BYTES {
                return exec_err!(
                    "{name}: the pattern is {} bytes, over the limit of {MAX_PATTERN_BYTES}",
                    source.len()
                );
            }
            let r = regex::Regex::new(source)
                .or_else(|e| exec_err!("{name}: invalid regular expression: {e}"))?;
            self.last = Some((source.to_string(), r));
        }
        match &self.last {
            Some((_, r)) => Ok(r),
            None => exec_err!("{name}: no pattern"),
        }
    }
}

fn eval(op: Op, args: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    let name = op.name();
    let mut patterns = Patterns { name, last: None };
    Ok(match op {
        Op::RegexpReplace => {
            let (s, p) = (strings(&args[0])?, strings(&args[1])?);
            let r = args.get(2).map(strings).transpose()?;
            let mut out = StringBuilder::new();
            for i in 0..rows {
                let replacement = match &r {
                    Some(r) if r.is_null(i) => None,
                    Some(r) => Some(r.value(i)),
                    None => Some(""),
                };
                match (s.is_null(i) || p.is_null(i), replacement) {
                    (false, Some(with)) => {
                        let with = java_replacement(with);
                        let re = patterns.get(p.value(i))?;
                        out.append_value(re.replace_all(s.value(i), with.as_str()));
                    }
                    _ => out.append_null(),
                }
            }
            Arc::new(out.finish())
        }
        Op::RegexpExtract | Op::RegexpExtractAll | Op::RegexpSplit => {
            let (s, p) = (strings(&args[0])?, strings(&args[1])?);
            let group = args.get(2).map(|g| cast(g, &DataType::Int64)).transpose()?;
            let group_of = |i: usize| -> Option<usize> {
                match &group {
                    None => Some(0),
                    Some(g) => {
                        let g = g.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
                        (!g.is_null(i))
                            .then(|| usize::try_from(g.value(i)).ok())
                            .flatten()
                    }
                }
            };
            if op == Op::RegexpExtract {
                let mut out = StringBuilder::new();
                for i in 0..rows {
                    let (Some(g), false) = (group_of(i), s.is_null(i) || p.is_null(i)) else {
                        out.append_null();
                        continue;
                    };
                    let re = patterns.get(p.value(i))?;
                    if g >= re.captures_len() {
                        return exec_err!("{name}: the pattern has no group {g}");
                    }
                    out.append_option(
                        re.captures(s.value(i))
                            .and_then(|c| c.get(g))
                            .map(|m| m.as_str()),
                    );
                }
                Arc::new(out.finish())
            } else {
                let mut out = ListBuilder::new(StringBuilder::new());
                for i in 0..rows {
                    let (Some(g), false) = (group_of(i), s.is_null(i) || p.is_null(i)) else {
                        out.append(false);
                        continue;
                    };
                    let re = patterns.get(p.value(i))?;
                    let text = s.value(i);
                    if op == Op::RegexpSplit {
                        for piece in re.split(text) {
                            out.values().append_value(piece);
                        }
                    } else {
                        if g >= re.captures_len() {
                            return exec_err!("{name}: the pattern has no group {g}");
                        }
                        for c in re.captures_iter(text) {
                            out.values().append_option(c.get(g).map(|m| m.as_str()));
                        }
                    }
                    out.append(true);
                }
                Arc::new(out.finish())
            }
        }
        Op::DateFormat => {
            let (t, f) = (times(&args[0])?, strings(&args[1])?);
            let mut out = StringBuilder::new();
            for i in 0..rows {
                if t.is_null(i) || f.is_null(i) {
                    out.append_null();
                } else {
                    out.append_value(mysql_format(datetime(t.value(i)), f.value(i)));
                }
            }
            Arc::new(out.finish())
        }
        Op::DateParse => {
            let (s, f) = (strings(&args[0])?, strings(&args[1])?);
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if s.is_null(i) || f.is_null(i) {
                    out.push(None);
                    continue;
                }
                let pattern = mysql_to_strftime(f.value(i));
                let parsed = NaiveDateTime::parse_from_str(s.value(i), &pattern)
                    .or_else(|_| {
                        NaiveDate::parse_from_str(s.value(i), &pattern)
                            .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
                    })
                    .or_else(|e| {
                        exec_err!(
                            "date_parse: {:?} does not match {:?}: {e}",
                            s.value(i),
                            f.value(i)
                        )
                    })?;
                out.push(parsed.and_utc().timestamp_nanos_opt());
            }
            Arc::new(TimestampNanosecondArray::from(out))
        }
        Op::FormatDatetime => joda::format(name, args, rows)?,
        Op::ParseDatetime => joda::parse(name, args, rows)?,
        Op::ToUnixtime => {
            let t = times(&args[0])?;
            Arc::new(
                (0..rows)
                    .map(|i| {
                        (!t.is_null(i)).then(|| {
                            let ns = t.value(i);
                            ns.div_euclid(NS_PER_SEC) as f64
                                + ns.rem_euclid(NS_PER_SEC) as f64 / NS_PER_SEC as f64
                        })
                    })
                    .collect::<Float64Array>(),
            )
        }
        Op::ToIso8601 => {
            let t = times(&args[0])?;
            Arc::new(
                (0..rows)
                    .map(|i| {
                        (!t.is_null(i)).then(|| {
                            datetime(t.value(i))
                                .format("%Y-%m-%dT%H:%M:%S%.9fZ")
                                .to_string()
                        })
                    })
                    .collect::<StringArray>(),
            )
        }
        Op::FromIso8601Timestamp | Op::FromIso8601Date => {
            let s = strings(&args[0])?;
            let mut ns = Vec::with_capacity(rows);
            let mut days = Vec::with_capacity(rows);
            for i in 0..rows {
                if s.is_null(i) {
                    ns.push(None);
                    days.push(None);
                    continue;
                }
                let t = parse_iso8601(s.value(i))
                    .map_or_else(|| exec_err!("{name}: {:?} is not ISO 8601", s.value(i)), Ok)?;
                ns.push(t.timestamp_nanos_opt());
                days.push(Some(t.date_naive().to_epoch_days()));
            }
            if op == Op::FromIso8601Date {
                Arc::new(Date32Array::from(days))
            } else {
                Arc::new(TimestampNanosecondArray::from(ns))
            }
        }
        Op::DateAdd | Op::DateDiff => {
            let units = strings(&args[0])?;
            let b = times(&args[2])?;
            let counts = cast(&args[1], &DataType::Int64)?;
            let starts = if op == Op::DateDiff {
                Some(times(&args[1])?)
            } else {
                None
            };
            let mut out_ns = Vec::with_capacity(rows);
            let mut out_n = Vec::with_capacity(rows);
            for i in 0..rows {
                if units.is_null(i) || args[1].is_null(i) || b.is_null(i) {
                    out_ns.push(None);
                    out_n.push(None);
                    continue;
                }
                let unit = Unit::parse(name, units.value(i))?;
                match &starts {
                    None => {
                        let n = counts
                            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                            .value(i);
                        out_ns.push(Some(unit.add(name, b.value(i), n)?));
                    }
                    Some(from) => out_n.push(Some(unit.diff(from.value(i), b.value(i)))),
                }
            }
            if op == Op::DateAdd {
                Arc::new(TimestampNanosecondArray::from(out_ns))
            } else {
                Arc::new(Int64Array::from(out_n))
            }
        }
        Op::LastDayOfMonth => {
            let t = times(&args[0])?;
            Arc::new(
                (0..rows)
                    .map(|i| {
                        if t.is_null(i) {
                            return None;
                        }
                        let d = datetime(t.value(i)).date_naive();
                        let first = d.with_day(1)?;
                        let last = first.checked_add_months(Months::new(1))?.pred_opt()?;
                        Some(last.to_epoch_days())
                    })
                    .collect::<Date32Array>(),
            )
        }
        Op::IsFinite | Op::IsInfinite | Op::IsNan => {
            let x = cast(&args[0], &DataType::Float64)?;
            let x = x.as_primitive::<Float64Type>();
            Arc::new(
                (0..rows)
                    .map(|i| {
                        (!x.is_null(i)).then(|| {
                            let v = x.value(i);
                            match op {
                                Op::IsFinite => v.is_finite(),
                                Op::IsInfinite => v.is_infinite(),
                                _ => v.is_nan(),
                            }
                        })
                    })
                    .collect::<BooleanArray>(),
            )
        }
        Op::Nan => Arc::new(Float64Array::from(vec![f64::NAN; rows.max(1)])),
        Op::Infinity => Arc::new(Float64Array::from(vec![f64::INFINITY; rows.max(1)])),
        Op::CurrentTimezone => Arc::new(StringArray::from(vec!["UTC"; rows.max(1)])),
        Op::ElementAt | Op::If | Op::Mod | Op::Field(_) => {
            return exec_err!("{name} runs only as its rewrite; simplify the plan first");
        }
    })
}

/// A replacement in Java's syntax (`$1` a group, `\\$` a dollar sign) in the regex
/// crate's (`${1}`, `$$`), so `$1px` is group 1 then `px`, as in Timestream.
fn java_replacement(with: &str) -> String {
    let mut out = String::with_capacity(with.len() + 4);
    let mut chars = with.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    out.push(d);
                }
                out.push('}');
            }
            '$' => out.push_str("$$"),
            other => out.push(other),
        }
    }
    out
}

/// Presto's ISO 8601 forms: a date, a date and time (`T`), with fractional seconds and
/// an offset or `Z` (no offset: UTC).
fn parse_iso8601(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    if let Ok(t) = DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%#z") {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// MySQL's format codes as Presto's `date_format` reads them.
fn mysql_format(t: DateTime<Utc>, format: &str) -> String {
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(code) = chars.next() else {
            out.push('%');
            break;
        };
        let piece = match code {
            'Y' => format!("{:04}", t.year()),
            'y' => format!("{:02}", t.year().rem_euclid(100)),
            'm' => format!("{:02}", t.month()),
            'c' => t.month().to_string(),
            'd' => format!("{:02}", t.day()),
            'e' => t.day().to_string(),
            'H' => format!("{:02}", t.hour()),
            'k' => t.hour().to_string(),
            'h' | 'I' => format!("{:02}", (t.hour() + 11) % 12 + 1),
            'l' => ((t.hour() + 11) % 12 + 1).to_string(),
            'i' => format!("{:02}", t.minute()),
            's' | 'S' => format!("{:02}", t.second()),
            'f' => format!("{:06}", t.nanosecond() / 1_000),
            'p' => (if t.hour() < 12 { "AM" } else { "PM" }).to_string(),
            'a' => t.format("%a").to_string(),
            'W' => t.format("%A").to_string(),
            'b' => t.format("%b").to_string(),
            'M' => t.format("%B").to_string(),
            'j' => format!("{:03}", t.ordinal()),
            'T' => t.format("%H:%M:%S").to_string(),
            'r' => t.format("%I:%M:%S %p").to_string(),
            'v' => format!("{:02}", t.iso_week().week()),
            'x' => format!("{:04}", t.iso_week().year()),
            'w' => t.weekday().num_days_from_sunday().to_string(),
            '%' => "%".to_string(),
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    out
}

/// MySQL's format codes as chrono's, for parsing.
fn mysql_to_strftime(format: &str) -> String {
    let mut out = String::with_capacity(format.len());
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let code = chars.next().unwrap_or('%');
        out.push_str(match code {
            'Y' => "%Y",
            'y' => "%y",
            'm' | 'c' => "%m",
            'd' | 'e' => "%d",
            'H' | 'k' => "%H",
            'h' | 'I' | 'l' => "%I",
            'i' => "%M",
            's' | 'S' => "%S",
            'f' => "%6f",
            'p' => "%p",
            'a' => "%a",
            'W' => "%A",
            'b' => "%b",
            'M' => "%B",
            'j' => "%j",
            'T' => "%H:%M:%S",
            'r' => "%I:%M:%S %p",
            _ => "%%",
        });
    }
    out
}

/// A unit of `date_add` / `date_diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Fixed(i64),
    Months(i64),
}

impl Unit {
    fn parse(name: &str, unit: &str) -> DfResult<Self> {
        Ok(match unit.to_ascii_lowercase().as_str() {
            "millisecond" => Self::Fixed(1_000_000),
            "second" => Self::Fixed(NS_PER_SEC),
            "minute" => Self::Fixed(60 * NS_PER_SEC),
            "hour" => Self::Fixed(3_600 * NS_PER_SEC),
            "day" => Self::Fixed(86_400 * NS_PER_SEC),
            "week" => Self::Fixed(7 * 86_400 * NS_PER_SEC),
            "month" => Self::Months(1),
            "quarter" => Self::Months(3),
            "year" => Self::Months(12),
            other => {
                return exec_err!(
                    "{name}: unknown unit {other:?} (millisecond, second, minute, hour, day, week, month, quarter, year)"
                );
            }
        })
    }

    fn add(self, name: &str, t: i64, n: i64) -> DfResult<i64> {
        let overflow = || exec_err!("{name}: the result is out of range");
        match self {
            Self::Fixed(ns) => n
                .checked_mul(ns)
                .and_then(|d| t.checked_add(d))
                .map_or_else(overflow, Ok),
            Self::Months(m) => {
                let months = n.checked_mul(m).map_or_else(overflow, Ok)?;
                let base = datetime(t);
                let moved = u32::try_from(months.unsigned_abs()).ok().and_then(|m| {
                    if months >= 0 {
                        base.checked_add_months(Months::new(m))
                    } else {
                        base.checked_sub_months(Months::new(m))
                    }
                });
                moved
                    .and_then(|d| d.timestamp_nanos_opt())
                    .map_or_else(overflow, Ok)
            }
        }
    }

    /// Whole units from `a` to `b` (negative when `b` is earlier).
    fn diff(self, a: i64, b: i64) -> i64 {
        match self {
            Self::Fixed(ns) => (i128::from(b) - i128::from(a))
                .checked_div(i128::from(ns))
                .and_then(|d| i64::try_from(d).ok())
                .unwrap_or(0),
            Self::Months(m) => {
                let (from, to) = (datetime(a), datetime(b));
                let mut months = (i64::from(to.year()) - i64::from(from.year())) * 12
                    + i64::from(to.month())
                    - i64::from(from.month());
                // As Joda (and so Presto) counts: a month is whole when adding it to
                // the earlier time (the day clamped to the month's last) does not
                // pass the later one, so Jan 31 to Feb 29 is one month.
                let add = |n: i64| {
                    u32::try_from(n.unsigned_abs()).ok().and_then(|k| {
                        if n >= 0 {
                            from.checked_add_months(Months::new(k))
                        } else {
                            from.checked_sub_months(Months::new(k))
                        }
                    })
                };
                if months > 0 && add(months).is_some_and(|t| t > to) {
                    months -= 1;
                } else if months < 0 && add(months).is_some_and(|t| t < to) {
                    months += 1;
                }
                months / m
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Agg {
    CountIf,
    MaxBy,
    MinBy,
    GeometricMean,
}

/// One aggregate of the module: `count_if`, `max_by`, `min_by` are rewritten into
/// DataFusion's; `geometric_mean` runs here.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PrestoAgg {
    agg: Agg,
    signature: Signature,
}

impl PrestoAgg {
    fn new(agg: Agg) -> Self {
        let arity = match agg {
            Agg::CountIf | Agg::GeometricMean => 1,
            Agg::MaxBy | Agg::MinBy => 2,
        };
        Self {
            agg,
            signature: Signature::any(arity, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for PrestoAgg {
    fn name(&self) -> &str {
        match self.agg {
            Agg::CountIf => "count_if",
            Agg::MaxBy => "max_by",
            Agg::MinBy => "min_by",
            Agg::GeometricMean => "geometric_mean",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, t: &[DataType]) -> DfResult<DataType> {
        Ok(match self.agg {
            Agg::CountIf => DataType::Int64,
            Agg::GeometricMean => DataType::Float64,
            Agg::MaxBy | Agg::MinBy => t.first().cloned().unwrap_or(DataType::Null),
        })
    }

    fn state_fields(&self, args: StateFieldsArgs) -> DfResult<Vec<Arc<Field>>> {
        Ok(vec![
            Arc::new(Field::new(
                format!("{}_ln_sum", args.name),
                DataType::Float64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}_count", args.name),
                DataType::Int64,
                true,
            )),
        ])
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        match self.agg {
            Agg::GeometricMean => Ok(Box::new(GeometricMean::default())),
            _ => exec_err!(
                "{} runs only as its rewrite; simplify the plan first",
                self.name()
            ),
        }
    }

    fn simplify(
        &self,
    ) -> Option<datafusion::logical_expr::function::AggregateFunctionSimplification> {
        let agg = self.agg;
        if agg == Agg::GeometricMean {
            return None;
        }
        Some(Box::new(move |f: AggregateFunction, _info| {
            use datafusion::functions_aggregate::{count, first_last};
            let args = f.params.args.clone();
            let rewritten = match (agg, args.as_slice()) {
                (Agg::CountIf, [b]) => Expr::AggregateFunction(AggregateFunction::new_udf(
                    count::count_udaf(),
                    vec![when(b.clone(), lit(1i64)).end()?],
                    f.params.distinct,
                    f.params.filter.clone(),
                    vec![],
                    None,
                )),
                (Agg::MaxBy | Agg::MinBy, [x, y]) => {
                    // The x of the row with the greatest (least) y; rows without a y
                    // do not count.
                    let y_present = y.clone().is_not_null();
                    let filter = match &f.params.filter {
                        Some(other) => other.as_ref().clone().and(y_present),
                        None => y_present,
                    };
                    Expr::AggregateFunction(AggregateFunction::new_udf(
                        first_last::first_value_udaf(),
                        vec![x.clone()],
                        false,
                        Some(Box::new(filter)),
                        vec![SortExpr::new(y.clone(), agg == Agg::MinBy, false)],
                        None,
                    ))
                }
                _ => return plan_err!("{agg:?}: wrong number of arguments"),
            };
            Ok(rewritten)
        }))
    }
}

#[derive(Debug, Default)]
struct GeometricMean {
    ln_sum: f64,
    count: i64,
}

impl Accumulator for GeometricMean {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        let x = cast(&values[0], &DataType::Float64)?;
        let x = x.as_primitive::<Float64Type>();
        for v in x.iter().flatten() {
            self.ln_sum += v.ln();
            self.count += 1;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let sums = states[0].as_primitive::<Float64Type>();
        let counts = states[1].as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        for i in 0..sums.len() {
            if !sums.is_null(i) && !counts.is_null(i) {
                self.ln_sum += sums.value(i);
                self.count += counts.value(i);
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::Float64(Some(self.ln_sum)),
            ScalarValue::Int64(Some(self.count)),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        Ok(ScalarValue::Float64(
            (self.count > 0).then(|| (self.ln_sum / self.count as f64).exp()),
        ))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> i64 {
        parse_iso8601(s)
            .and_then(|t| t.timestamp_nanos_opt())
            .unwrap_or_default()
    }

    #[test]
    fn mysql_codes_format_as_presto() {
        let at = datetime(t("2019-12-04T19:05:09.123456789Z"));
        assert_eq!(mysql_format(at, "%Y-%m-%d %H:%i:%s"), "2019-12-04 19:05:09");
        assert_eq!(
            mysql_format(at, "%y/%c/%e %l%p %f %j %%"),
            "19/12/4 7PM 123456 338 %"
        );
        assert_eq!(mysql_to_strftime("%Y-%m-%d %H:%i:%s"), "%Y-%m-%d %H:%M:%S");
    }

    #[test]
    fn units_add_and_count_whole_units() {
        let jan31 = t("2020-01-31T10:00:00Z");
        let month = Unit::parse("date_add", "month").unwrap_or(Unit::Fixed(1));
        assert_eq!(
            month.add("date_add", jan31, 1).ok(),
            Some(t("2020-02-29T10:00:00Z"))
        );
        assert_eq!(month.diff(jan31, t("2020-02-29T10:00:00Z")), 1);
        assert_eq!(month.diff(jan31, t("2020-02-28T10:00:00Z")), 0);
        assert_eq!(month.diff(jan31, t("2020-03-31T10:00:00Z")), 2);
        assert_eq!(month.diff(t("2020-03-31T10:00:00Z"), jan31), -2);
        let hour = Unit::parse("date_diff", "HOUR").unwrap_or(Unit::Fixed(1));
        assert_eq!(hour.diff(jan31, jan31 + 5_400 * NS_PER_SEC), 1);
        assert_eq!(hour.diff(jan31 + 5_400 * NS_PER_SEC, jan31), -1);
        assert!(Unit::parse("date_add", "fortnight").is_err());
    }

    #[test]
    fn replacements_read_as_java_writes_them() {
        assert_eq!(java_replacement("$1px"), "${1}px");
        assert_eq!(java_replacement("\\$5 and $"), "$$5 and $$");
        assert_eq!(java_replacement("a\\\\b"), "a\\b");
    }

    #[test]
    fn iso8601_forms() {
        assert_eq!(t("2020-05-01"), t("2020-05-01T00:00:00Z"));
        assert_eq!(t("2020-05-01T12:00"), t("2020-05-01T12:00:00Z"));
        assert_eq!(t("2020-05-01T14:00:00+02:00"), t("2020-05-01T12:00:00Z"));
        assert!(parse_iso8601("yesterday").is_none());
    }
}
