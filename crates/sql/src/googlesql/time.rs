//! GoogleSQL's date and timestamp functions (GoogleSQL's session only): every time is
//! a `TIMESTAMP` in microseconds, UTC, and a `DATE` is days since 1970-01-01.
//!
//! | function | what |
//! |---|---|
//! | `TIMESTAMP_SECONDS/MILLIS/MICROS(n)` | epoch integer → TIMESTAMP |
//! | `UNIX_SECONDS/MILLIS/MICROS(t)` | TIMESTAMP → epoch integer (rounded down) |
//! | `TIMESTAMP(s[, tz])`, `TIMESTAMP(date)` | text (a zone in the text wins over `tz`) or a date's midnight |
//! | `TIMESTAMP_ADD/SUB(t, INTERVAL n part)`, `DATE_ADD/SUB(d, INTERVAL n part)` | calendar arithmetic |
//! | `TIMESTAMP_DIFF(a, b, part)` | whole parts from `b` to `a`, MICROSECOND … DAY (a DAY is 24 hours) |
//! | `DATE_DIFF(a, b, part)` | part boundaries crossed: DAY, WEEK (Sunday), ISOWEEK (Monday), MONTH, QUARTER, YEAR |
//! | `TIMESTAMP_TRUNC(t, part[, tz])`, `DATE_TRUNC(d, part)` | start of the part (WEEK starts on Sunday, ISOWEEK on Monday) |
//! | `FORMAT_TIMESTAMP(fmt, t[, tz])`, `FORMAT_DATE(fmt, d)` | strftime elements plus `%E<n>S`, `%E*S`, `%Ez`, `%E4Y` |
//! | `PARSE_TIMESTAMP(fmt, s[, tz])`, `PARSE_DATE(fmt, s)` | the reverse |
//! | `DATE(y, m, d)`, `DATE(t[, tz])`, `UNIX_DATE(d)`, `DATE_FROM_UNIX_DATE(n)`, `LAST_DAY(d[, part])` | dates |
//!
//! A time zone is `UTC`, an offset (`+05:30`) or an IANA name.

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Offset as _, TimeZone, Utc};
use datafusion::arrow::array::timezone::Tz;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::kernels::numeric;
use datafusion::arrow::datatypes::{DataType, Date32Type, Int64Type, TimeUnit};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

const US_PER_SECOND: i64 = 1_000_000;
const US_PER_DAY: i64 = 86_400 * US_PER_SECOND;
/// 1970-01-01 was a Thursday: day 0 is 4 days after a Sunday, 3 after a Monday.
const EPOCH_AFTER_SUNDAY: i64 = 4;
const EPOCH_AFTER_MONDAY: i64 = 3;

/// The functions of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    FromEpoch(i64),
    ToEpoch(i64),
    Timestamp,
    Add(bool),
    DateAdd(bool),
    TimestampDiff,
    DateDiff,
    TimestampTrunc,
    DateTrunc,
    FormatTimestamp,
    FormatDate,
    ParseTimestamp,
    ParseDate,
    Date,
    UnixDate,
    DateFromUnixDate,
    LastDay,
    String,
}

const OPS: [(&str, Op); 22] = [
    ("string", Op::String),
    ("timestamp_seconds", Op::FromEpoch(US_PER_SECOND)),
    ("timestamp_millis", Op::FromEpoch(1_000)),
    ("timestamp_micros", Op::FromEpoch(1)),
    ("unix_seconds", Op::ToEpoch(US_PER_SECOND)),
    ("unix_millis", Op::ToEpoch(1_000)),
    ("unix_micros", Op::ToEpoch(1)),
    ("timestamp", Op::Timestamp),
    ("timestamp_add", Op::Add(true)),
    ("timestamp_sub", Op::Add(false)),
    ("date_add", Op::DateAdd(true)),
    ("date_sub", Op::DateAdd(false)),
    ("timestamp_diff", Op::TimestampDiff),
    ("date_diff", Op::DateDiff),
    ("timestamp_trunc", Op::TimestampTrunc),
    ("date_trunc", Op::DateTrunc),
    ("format_timestamp", Op::FormatTimestamp),
    ("format_date", Op::FormatDate),
    ("parse_timestamp", Op::ParseTimestamp),
    ("parse_date", Op::ParseDate),
    ("date", Op::Date),
    ("last_day", Op::LastDay),
];

/// Registers the module's functions (over DataFusion's `date_trunc`).
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for (name, op) in OPS {
        state.register_udf(Arc::new(ScalarUDF::from(TimeFn::new(name, op))))?;
    }
    for (name, op) in [
        ("unix_date", Op::UnixDate),
        ("date_from_unix_date", Op::DateFromUnixDate),
        ("timestamp_from_unix_seconds", Op::FromEpoch(US_PER_SECOND)),
        ("timestamp_from_unix_millis", Op::FromEpoch(1_000)),
        ("timestamp_from_unix_micros", Op::FromEpoch(1)),
    ] {
        state.register_udf(Arc::new(ScalarUDF::from(TimeFn::new(name, op))))?;
    }
    Ok(())
}

/// `STRING(timestamp[, zone])`, which `CAST(timestamp AS STRING)` becomes.
pub(super) fn string_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::from(TimeFn::new("string", Op::String)))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimeFn {
    name: &'static str,
    op: Op,
    signature: Signature,
}

impl TimeFn {
    fn new(name: &'static str, op: Op) -> Self {
        Self {
            name,
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn is_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

impl ScalarUDFImpl for TimeFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        let name = self.name;
        let arity = |lo: usize, hi: usize| -> DfResult<()> {
            if args.len() < lo || args.len() > hi {
                return plan_err!("{name} takes {lo} to {hi} arguments, got {}", args.len());
            }
            Ok(())
        };
        let text = DataType::Utf8;
        Ok(match self.op {
            Op::FromEpoch(_) | Op::DateFromUnixDate => {
                arity(1, 1)?;
                vec![DataType::Int64]
            }
            Op::ToEpoch(_) => {
                arity(1, 1)?;
                vec![ts_type()]
            }
            Op::Timestamp => {
                arity(1, 2)?;
                let first = if is_time(&args[0]) {
                    ts_type()
                } else {
                    text.clone()
                };
                let mut v = vec![first];
                v.extend(args.iter().skip(1).map(|_| text.clone()));
                v
            }
            Op::Add(_) | Op::DateAdd(_) => {
                arity(2, 2)?;
                if !matches!(args[1], DataType::Interval(_)) {
                    return plan_err!("{name} takes an INTERVAL second, got {}", args[1]);
                }
                let date = matches!(self.op, Op::DateAdd(_))
                    && (args[0] == DataType::Date32 || !is_time(&args[0]));
                let first = if date { DataType::Date32 } else { ts_type() };
                vec![first, args[1].clone()]
            }
            Op::TimestampDiff => {
                arity(3, 3)?;
                vec![ts_type(), ts_type(), text]
            }
            Op::DateDiff => {
                arity(3, 3)?;
                vec![DataType::Date32, DataType::Date32, text]
            }
            Op::TimestampTrunc => {
                arity(2, 3)?;
                let mut v = vec![ts_type(), text.clone()];
                v.extend(args.iter().skip(2).map(|_| text.clone()));
                v
            }
            Op::DateTrunc => {
                arity(2, 2)?;
                // DataFusion's order, date_trunc('month', t), keeps working.
                if super::is_text(&args[0]) && !super::is_text(&args[1]) {
                    return Ok(vec![text, ts_type()]);
                }
                let first = if args[0] == DataType::Date32 || !is_time(&args[0]) {
                    DataType::Date32
                } else {
                    ts_type()
                };
                vec![first, text]
            }
            Op::FormatTimestamp => {
                arity(2, 3)?;
                let mut v = vec![text.clone(), ts_type()];
                v.extend(args.iter().skip(2).map(|_| text.clone()));
                v
            }
            Op::FormatDate => {
                arity(2, 2)?;
                vec![text, DataType::Date32]
            }
            Op::ParseTimestamp => {
                arity(2, 3)?;
                vec![text; args.len()]
            }
            Op::ParseDate => {
                arity(2, 2)?;
                vec![text; 2]
            }
            Op::Date => {
                arity(1, 3)?;
                if args.len() == 3 {
                    vec![DataType::Int64; 3]
                } else if is_time(&args[0]) {
                    let mut v = vec![ts_type()];
                    v.extend(args.iter().skip(1).map(|_| text.clone()));
                    v
                } else {
                    let mut v = vec![text.clone()];
                    v.extend(args.iter().skip(1).map(|_| text.clone()));
                    v
                }
            }
            Op::UnixDate => {
                arity(1, 1)?;
                vec![DataType::Date32]
            }
            Op::String => {
                arity(1, 2)?;
                let mut v = vec![ts_type()];
                v.extend(args.iter().skip(1).map(|_| text.clone()));
                v
            }
            Op::LastDay => {
                arity(1, 2)?;
                let mut v = vec![DataType::Date32];
                v.extend(args.iter().skip(1).map(|_| text.clone()));
                v
            }
        })
    }

    fn return_type(&self, args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::FromEpoch(_) | Op::Timestamp | Op::Add(_) | Op::TimestampTrunc => ts_type(),
            Op::ParseTimestamp => ts_type(),
            Op::ToEpoch(_) | Op::TimestampDiff | Op::DateDiff | Op::UnixDate => DataType::Int64,
            Op::DateTrunc if args.first().is_some_and(super::is_text) => ts_type(),
            Op::DateAdd(_) | Op::DateTrunc => args.first().cloned().unwrap_or(DataType::Date32),
            Op::FormatTimestamp | Op::FormatDate | Op::String => DataType::Utf8,
            Op::ParseDate | Op::Date | Op::DateFromUnixDate | Op::LastDay => DataType::Date32,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let op = self.op;
        let name = self.name;
        crate::functions::invoke_rowwise(args, |a, rows| eval(name, op, a, rows))
    }
}

/// Row by row with each row's time zone (the optional zone argument `tz`; UTC
/// without it): `f` of the row and its zone, NULL where `null` says so or the zone is.
fn zoned<T>(
    rows: usize,
    tz: Option<&ArrayRef>,
    null: impl Fn(usize) -> bool,
    mut f: impl FnMut(usize, &str) -> DfResult<T>,
) -> DfResult<Vec<Option<T>>> {
    let tz = tz.map(text_of).transpose()?;
    let mut out = Vec::with_capacity(rows);
    for i in 0..rows {
        if null(i) || tz.as_ref().is_some_and(|z| z.is_null(i)) {
            out.push(None);
            continue;
        }
        let zone_name = tz.as_ref().map_or("UTC", |z| z.value(i));
        out.push(Some(f(i, zone_name)?));
    }
    Ok(out)
}

fn micros_of(a: &ArrayRef) -> DfResult<TimestampMicrosecondArray> {
    Ok(cast(a, &ts_type())?
        .as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>()
        .clone())
}

fn text_of(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

fn dates_of(a: &ArrayRef) -> DfResult<Date32Array> {
    Ok(cast(a, &DataType::Date32)?
        .as_primitive::<Date32Type>()
        .clone())
}

fn ints_of(a: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(a, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

fn ts_array(values: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from(values).with_timezone("UTC"))
}

fn date_of_days(days: i32) -> Option<NaiveDate> {
    NaiveDate::from_num_days_from_ce_opt(days.checked_add(719_163)?)
}

fn days_of(d: NaiveDate) -> i32 {
    d.num_days_from_ce() - 719_163
}

fn utc(us: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us)
}

/// The time zone named `tz`.
fn zone(tz: &str) -> DfResult<Tz> {
    let named = match tz {
        "UTC" | "utc" | "Z" => "+00:00",
        other => other,
    };
    match Tz::from_str(named) {
        Ok(z) => Ok(z),
        Err(_) => exec_err!(
            "unknown time zone {tz:?}: use UTC, an offset such as +05:30, or an IANA name"
        ),
    }
}

fn eval(name: &str, op: Op, a: &[ArrayRef], rows: usize) -> DfResult<ArrayRef> {
    Ok(match op {
        Op::FromEpoch(unit) => {
            let n = ints_of(&a[0])?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                out.push(match n.is_null(i) {
                    true => None,
                    false => match n.value(i).checked_mul(unit) {
                        Some(us) => Some(us),
                        None => return exec_err!("{name}({}) is out of range", n.value(i)),
                    },
                });
            }
            ts_array(out)
        }
        Op::ToEpoch(unit) => {
            let t = micros_of(&a[0])?;
            Arc::new(
                (0..rows)
                    .map(|i| (!t.is_null(i)).then(|| t.value(i).div_euclid(unit)))
                    .collect::<Int64Array>(),
            )
        }
        Op::Timestamp => {
            if is_time(a[0].data_type()) {
                return Ok(cast(&a[0], &ts_type())?);
            }
            let s = text_of(&a[0])?;
            let out = zoned(
                rows,
                a.get(1),
                |i| s.is_null(i),
                |i, zone_name| parse_text(name, s.value(i), zone_name),
            )?;
            ts_array(out)
        }
        Op::Add(add) => {
            let r = if add {
                numeric::add(&a[0], &a[1])?
            } else {
                numeric::sub(&a[0], &a[1])?
            };
            cast(&r, &ts_type())?
        }
        Op::DateAdd(add) => {
            let r = if add {
                numeric::add(&a[0], &a[1])?
            } else {
                numeric::sub(&a[0], &a[1])?
            };
            cast(&r, a[0].data_type())?
        }
        Op::TimestampDiff => {
            let (x, y, part) = (micros_of(&a[0])?, micros_of(&a[1])?, text_of(&a[2])?);
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if x.is_null(i) || y.is_null(i) || part.is_null(i) {
                    out.push(None);
                    continue;
                }
                let unit = match part.value(i).to_ascii_uppercase().as_str() {
                    "MICROSECOND" => 1,
                    "MILLISECOND" => 1_000,
                    "SECOND" => US_PER_SECOND,
                    "MINUTE" => 60 * US_PER_SECOND,
                    "HOUR" => 3_600 * US_PER_SECOND,
                    "DAY" => US_PER_DAY,
                    p => {
                        return exec_err!(
                            "{name} takes MICROSECOND, MILLISECOND, SECOND, MINUTE, HOUR or \
                             DAY, got {p}"
                        );
                    }
                };
                out.push(Some((x.value(i) - y.value(i)) / unit));
            }
            Arc::new(Int64Array::from(out))
        }
        Op::DateDiff => {
            let (x, y, part) = (dates_of(&a[0])?, dates_of(&a[1])?, text_of(&a[2])?);
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if x.is_null(i) || y.is_null(i) || part.is_null(i) {
                    out.push(None);
                    continue;
                }
                let (dx, dy) = (i64::from(x.value(i)), i64::from(y.value(i)));
                let (cx, cy) = (date_of_days(x.value(i)), date_of_days(y.value(i)));
                let (Some(cx), Some(cy)) = (cx, cy) else {
                    out.push(None);
                    continue;
                };
                let months = |d: NaiveDate| i64::from(d.year()) * 12 + i64::from(d.month0());
                out.push(Some(match part.value(i).to_ascii_uppercase().as_str() {
                    "DAY" => dx - dy,
                    "WEEK" => {
                        (dx + EPOCH_AFTER_SUNDAY).div_euclid(7)
                            - (dy + EPOCH_AFTER_SUNDAY).div_euclid(7)
                    }
                    "ISOWEEK" => {
                        (dx + EPOCH_AFTER_MONDAY).div_euclid(7)
                            - (dy + EPOCH_AFTER_MONDAY).div_euclid(7)
                    }
                    "MONTH" => months(cx) - months(cy),
                    "QUARTER" => months(cx).div_euclid(3) - months(cy).div_euclid(3),
                    "YEAR" => i64::from(cx.year() - cy.year()),
                    "ISOYEAR" => i64::from(cx.iso_week().year() - cy.iso_week().year()),
                    p => {
                        return exec_err!(
                            "{name} takes DAY, WEEK, ISOWEEK, MONTH, QUARTER, YEAR or ISOYEAR, \
                             got {p}"
                        );
                    }
                }));
            }
            Arc::new(Int64Array::from(out))
        }
        Op::TimestampTrunc => {
            let (t, part) = (micros_of(&a[0])?, text_of(&a[1])?);
            let out = zoned(
                rows,
                a.get(2),
                |i| t.is_null(i) || part.is_null(i),
                |i, z| trunc(name, t.value(i), part.value(i), z),
            )?;
            ts_array(out)
        }
        Op::DateTrunc => {
            let swapped = super::is_text(a[0].data_type());
            if swapped || matches!(a[0].data_type(), DataType::Timestamp(..)) {
                let (t, part) = if swapped {
                    (&a[1], &a[0])
                } else {
                    (&a[0], &a[1])
                };
                let (t, part) = (micros_of(t)?, text_of(part)?);
                let mut out = Vec::with_capacity(rows);
                for i in 0..rows {
                    out.push(match t.is_null(i) || part.is_null(i) {
                        true => None,
                        false => Some(trunc(name, t.value(i), part.value(i), "UTC")?),
                    });
                }
                return Ok(ts_array(out));
            }
            let (d, part) = (dates_of(&a[0])?, text_of(&a[1])?);
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if d.is_null(i) || part.is_null(i) {
                    out.push(None);
                    continue;
                }
                let us = i64::from(d.value(i)) * US_PER_DAY;
                let t = trunc(name, us, part.value(i), "UTC")?;
                out.push(Some(t.div_euclid(US_PER_DAY) as i32));
            }
            Arc::new(Date32Array::from(out))
        }
        Op::String => {
            let t = micros_of(&a[0])?;
            let out = zoned(
                rows,
                a.get(1),
                |i| t.is_null(i),
                |i, z| canonical(t.value(i), z),
            )?;
            Arc::new(StringArray::from(out))
        }
        Op::FormatTimestamp | Op::FormatDate => {
            let fmt = text_of(&a[0])?;
            let (t, date) = if op == Op::FormatDate {
                let d = dates_of(&a[1])?;
                let us: TimestampMicrosecondArray = (0..rows)
                    .map(|i| (!d.is_null(i)).then(|| i64::from(d.value(i)) * US_PER_DAY))
                    .collect();
                (us, true)
            } else {
                (micros_of(&a[1])?, false)
            };
            let out = zoned(
                rows,
                a.get(2),
                |i| fmt.is_null(i) || t.is_null(i),
                |i, z| format(name, fmt.value(i), t.value(i), z, date),
            )?;
            Arc::new(StringArray::from(out))
        }
        Op::ParseTimestamp | Op::ParseDate => {
            let (fmt, s) = (text_of(&a[0])?, text_of(&a[1])?);
            let out = zoned(
                rows,
                a.get(2),
                |i| fmt.is_null(i) || s.is_null(i),
                |i, z| parse(name, fmt.value(i), s.value(i), z),
            )?;
            if op == Op::ParseDate {
                Arc::new(Date32Array::from(
                    out.into_iter()
                        .map(|v| v.map(|us| us.div_euclid(US_PER_DAY) as i32))
                        .collect::<Vec<_>>(),
                ))
            } else {
                ts_array(out)
            }
        }
        Op::Date => {
            if a.len() == 3 {
                let (y, m, d) = (ints_of(&a[0])?, ints_of(&a[1])?, ints_of(&a[2])?);
                let mut out = Vec::with_capacity(rows);
                for i in 0..rows {
                    if y.is_null(i) || m.is_null(i) || d.is_null(i) {
                        out.push(None);
                        continue;
                    }
                    let date = i32::try_from(y.value(i)).ok().and_then(|y| {
                        NaiveDate::from_ymd_opt(
                            y,
                            u32::try_from(m.value(i)).ok()?,
                            u32::try_from(d.value(i)).ok()?,
                        )
                    });
                    match date {
                        Some(d) => out.push(Some(days_of(d))),
                        None => {
                            return exec_err!(
                                "DATE({}, {}, {}) is not a date",
                                y.value(i),
                                m.value(i),
                                d.value(i)
                            );
                        }
                    }
                }
                return Ok(Arc::new(Date32Array::from(out)));
            }
            let t = if is_time(a[0].data_type()) {
                micros_of(&a[0])?
            } else {
                let s = text_of(&a[0])?;
                let mut us = Vec::with_capacity(rows);
                for i in 0..rows {
                    us.push(match s.is_null(i) {
                        true => None,
                        false => Some(parse_text(name, s.value(i), "UTC")?),
                    });
                }
                TimestampMicrosecondArray::from(us)
            };
            let tz = a.get(1).map(text_of).transpose()?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if t.is_null(i) || tz.as_ref().is_some_and(|z| z.is_null(i)) {
                    out.push(None);
                    continue;
                }
                let zone_name = tz.as_ref().map_or("UTC", |z| z.value(i));
                let Some(when) = utc(t.value(i)) else {
                    out.push(None);
                    continue;
                };
                out.push(Some(days_of(
                    when.with_timezone(&zone(zone_name)?).date_naive(),
                )));
            }
            Arc::new(Date32Array::from(out))
        }
        Op::UnixDate => {
            let d = dates_of(&a[0])?;
            Arc::new(
                (0..rows)
                    .map(|i| (!d.is_null(i)).then(|| i64::from(d.value(i))))
                    .collect::<Int64Array>(),
            )
        }
        Op::DateFromUnixDate => {
            let n = ints_of(&a[0])?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                out.push(match n.is_null(i) {
                    true => None,
                    false => match i32::try_from(n.value(i)) {
                        Ok(d) => Some(d),
                        Err(_) => return exec_err!("{name}({}) is out of range", n.value(i)),
                    },
                });
            }
            Arc::new(Date32Array::from(out))
        }
        Op::LastDay => {
            let d = dates_of(&a[0])?;
            let part = a.get(1).map(text_of).transpose()?;
            let mut out = Vec::with_capacity(rows);
            for i in 0..rows {
                if d.is_null(i) || part.as_ref().is_some_and(|p| p.is_null(i)) {
                    out.push(None);
                    continue;
                }
                let Some(date) = date_of_days(d.value(i)) else {
                    out.push(None);
                    continue;
                };
                let p = part
                    .as_ref()
                    .map_or("MONTH".to_owned(), |p| p.value(i).to_ascii_uppercase());
                let last = match p.as_str() {
                    "MONTH" => next_month(date, 1),
                    "QUARTER" => next_month(date, 3 - date.month0() % 3),
                    "YEAR" => NaiveDate::from_ymd_opt(date.year() + 1, 1, 1),
                    "WEEK" => Some(
                        date + Duration::days(7 - i64::from(date.weekday().num_days_from_sunday())),
                    ),
                    "ISOWEEK" => Some(
                        date + Duration::days(7 - i64::from(date.weekday().num_days_from_monday())),
                    ),
                    other => {
                        return exec_err!(
                            "{name} takes MONTH, QUARTER, YEAR, WEEK or ISOWEEK, got {other}"
                        );
                    }
                };
                out.push(last.map(|next| days_of(next) - 1));
            }
            Arc::new(Date32Array::from(out))
        }
    })
}

/// The first day of the month `n` months after `d`'s.
fn next_month(d: NaiveDate, n: u32) -> Option<NaiveDate> {
    let months = d.year() * 12 + d.month0() as i32 + n as i32;
    NaiveDate::from_ymd_opt(months.div_euclid(12), months.rem_euclid(12) as u32 + 1, 1)
}

/// Text read as a TIMESTAMP: RFC 3339 or GoogleSQL's `YYYY-MM-DD[ HH:MM:SS[.f]][zone]`;
/// without a zone in the text, `zone_name` is the zone.
fn parse_text(name: &str, s: &str, zone_name: &str) -> DfResult<i64> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_micros());
    }
    for f in [
        "%Y-%m-%d %H:%M:%S%.f%#z",
        "%Y-%m-%dT%H:%M:%S%.f%#z",
        "%Y-%m-%d %H:%M:%S%.f %#z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(s, f) {
            return Ok(t.timestamp_micros());
        }
    }
    let tz = zone(zone_name)?;
    let local = [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    });
    match local.and_then(|l| tz.from_local_datetime(&l).earliest()) {
        Some(t) => Ok(t.timestamp_micros()),
        None => exec_err!("{name}: {s:?} is not a timestamp"),
    }
}

/// `t` truncated to the start of `part` in zone `zone_name`.
fn trunc(name: &str, t: i64, part: &str, zone_name: &str) -> DfResult<i64> {
    let tz = zone(zone_name)?;
    let Some(when) = utc(t) else {
        return exec_err!("{name}: timestamp out of range");
    };
    let local = when.with_timezone(&tz).naive_local();
    let day = local.date();
    let start = match part.to_ascii_uppercase().as_str() {
        "MICROSECOND" => return Ok(t),
        "MILLISECOND" => return Ok(t - t.rem_euclid(1_000)),
        "SECOND" => return Ok(t - t.rem_euclid(US_PER_SECOND)),
        "MINUTE" => local
            .date()
            .and_hms_opt(local.time().hour(), local.time().minute(), 0),
        "HOUR" => local.date().and_hms_opt(local.time().hour(), 0, 0),
        "DAY" => day.and_hms_opt(0, 0, 0),
        "WEEK" => (day - Duration::days(i64::from(day.weekday().num_days_from_sunday())))
            .and_hms_opt(0, 0, 0),
        "ISOWEEK" => (day - Duration::days(i64::from(day.weekday().num_days_from_monday())))
            .and_hms_opt(0, 0, 0),
        "MONTH" => {
            NaiveDate::from_ymd_opt(day.year(), day.month(), 1).and_then(|d| d.and_hms_opt(0, 0, 0))
        }
        "QUARTER" => NaiveDate::from_ymd_opt(day.year(), day.month0() / 3 * 3 + 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0)),
        "YEAR" => NaiveDate::from_ymd_opt(day.year(), 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)),
        "ISOYEAR" => NaiveDate::from_isoywd_opt(day.iso_week().year(), 1, chrono::Weekday::Mon)
            .and_then(|d| d.and_hms_opt(0, 0, 0)),
        p => {
            return exec_err!(
                "{name} takes MICROSECOND, MILLISECOND, SECOND, MINUTE, HOUR, DAY, WEEK, \
                 ISOWEEK, MONTH, QUARTER, YEAR or ISOYEAR, got {p}"
            );
        }
    };
    match start.and_then(|s| tz.from_local_datetime(&s).earliest()) {
        Some(s) => Ok(s.timestamp_micros()),
        None => exec_err!("{name}: the start of the {part} does not exist in {zone_name}"),
    }
}

use chrono::Timelike as _;

/// GoogleSQL's format elements as chrono's.
fn chrono_format(name: &str, fmt: &str) -> DfResult<String> {
    let mut out = String::with_capacity(fmt.len());
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('E') => {
                let spec: String = std::iter::from_fn(|| {
                    chars.next_if(|c| c.is_ascii_digit() || *c == '*' || *c == '#')
                })
                .collect();
                match (spec.as_str(), chars.next()) {
                    ("", Some('z')) => out.push_str("%:z"),
                    ("4", Some('Y')) => out.push_str("%Y"),
                    ("*", Some('S')) => out.push_str("%S%.f"),
                    (n, Some('S')) if n.parse::<u8>().is_ok_and(|n| n <= 9) => {
                        if n == "0" {
                            out.push_str("%S");
                        } else {
                            let _ = write!(out, "%S%.{n}f");
                        }
                    }
                    (spec, next) => {
                        return exec_err!(
                            "{name}: format element %E{spec}{} is not supported",
                            next.map(String::from).unwrap_or_default()
                        );
                    }
                }
            }
            Some('Q') => out.push_str("%Q"),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => return exec_err!("{name}: the format ends with a lone %"),
        }
    }
    Ok(out)
}

/// `t` in GoogleSQL's canonical text form in zone `zone_name`:
/// `2008-12-25 15:30:00[.ffffff]+00[:MM]`, with as many fraction digits as needed.
pub(super) fn canonical(t: i64, zone_name: &str) -> DfResult<String> {
    let tz = zone(zone_name)?;
    let Some(when) = utc(t) else {
        return exec_err!("STRING: timestamp out of range");
    };
    let local = when.with_timezone(&tz);
    let mut out = local.format("%Y-%m-%d %H:%M:%S").to_string();
    let micros = t.rem_euclid(US_PER_SECOND);
    if micros != 0 {
        let digits = format!("{micros:06}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
    let offset = local.offset().fix().local_minus_utc();
    let sign = if offset < 0 { '-' } else { '+' };
    let (h, m) = (offset.abs() / 3600, offset.abs() % 3600 / 60);
    let _ = write!(out, "{sign}{h:02}");
    if m != 0 {
        let _ = write!(out, ":{m:02}");
    }
    Ok(out)
}

/// `t` formatted with GoogleSQL's `fmt` in zone `zone_name`.
fn format(name: &str, fmt: &str, t: i64, zone_name: &str, date: bool) -> DfResult<String> {
    use chrono::format::{Item, StrftimeItems};
    let tz = if date { zone("UTC")? } else { zone(zone_name)? };
    let Some(when) = utc(t) else {
        return exec_err!("{name}: timestamp out of range");
    };
    let local = when.with_timezone(&tz);
    let quarter = local.month0() / 3 + 1;
    let translated = chrono_format(name, fmt)?.replace("%Q", &quarter.to_string());
    let items: Vec<Item<'_>> = StrftimeItems::new(&translated).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        return exec_err!("{name}: {fmt:?} has a format element Almanac does not know");
    }
    let mut out = String::new();
    if write!(out, "{}", local.format_with_items(items.into_iter())).is_err() {
        return exec_err!("{name}: {fmt:?} cannot format this value");
    }
    Ok(out)
}

/// `s` read with GoogleSQL's `fmt`, in zone `zone_name` unless the text has one.
fn parse(name: &str, fmt: &str, s: &str, zone_name: &str) -> DfResult<i64> {
    let f = chrono_format(name, fmt)?;
    if let Ok(t) = DateTime::parse_from_str(s, &f) {
        return Ok(t.timestamp_micros());
    }
    let local = NaiveDateTime::parse_from_str(s, &f).ok().or_else(|| {
        NaiveDate::parse_from_str(s, &f)
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    });
    let tz = zone(zone_name)?;
    match local.and_then(|l| tz.from_local_datetime(&l).earliest()) {
        Some(t) => Ok(t.timestamp_micros()),
        None => exec_err!("{name}: {s:?} does not match the format {fmt:?}"),
    }
}
