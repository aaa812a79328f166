//! Timestream's base conversion, bitwise and duration functions (Presto's), with
//! Trino's rules and messages:
//!
//! | function | result |
//! |---|---|
//! | `to_base(x, radix)` | VARCHAR: `x` in base `radix` (2 to 36), lowercase digits, `-` before a negative |
//! | `from_base(s, radix)` | BIGINT: `s` read in base `radix` (an optional sign, digits in either case) |
//! | `bit_count(x, bits)` | BIGINT: the bits set in `x` as a `bits`-bit two's complement integer (2 to 64) |
//! | `bitwise_and`, `bitwise_or`, `bitwise_xor(x, y)`, `bitwise_not(x)` | BIGINT, two's complement |
//! | `bitwise_left_shift(x, n)`, `bitwise_right_shift(x, n)`, `bitwise_right_shift_arithmetic(x, n)` | BIGINT; shifting by 64 or more gives 0 (-1 for a negative `x` shifted arithmetically) |
//! | `parse_duration(s)` | INTERVAL: a number (fractions too) and a unit, `ns`, `us`, `ms`, `s`, `m`, `h`, `d` or their names (`42.8ms`, `3.81 d`, `1day`), kept to the nanosecond |

use datafusion::arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;

use crate::googlesql::rowwise::{self, Def, arity, int, int_type, text, text_type};

/// Java's `Character.MIN_RADIX` and `MAX_RADIX`, which Trino checks the radix against:
/// digits are `0-9a-z`.
const RADIXES: std::ops::RangeInclusive<i64> = 2..=36;
/// The widths `bit_count` counts in: a two's complement integer needs a sign bit and
/// one more, and BIGINT has 64.
const BIT_WIDTHS: std::ops::RangeInclusive<i64> = 2..=64;
/// Nanoseconds in a day: `parse_duration`'s intervals are days and nanoseconds.
const DAY_NS: i128 = 86_400_000_000_000;
/// The longest text `parse_duration` reads: a duration is short, and the number's
/// digits are multiplied out exactly.
const MAX_DURATION_CHARS: usize = 64;

const DEFS: [Def; 11] = [
    ("to_base", to_base_types, to_base),
    ("from_base", from_base_types, from_base),
    ("bit_count", two_ints, bit_count),
    ("bitwise_and", two_ints, bitwise),
    ("bitwise_or", two_ints, bitwise),
    ("bitwise_xor", two_ints, bitwise),
    ("bitwise_not", one_int, bitwise),
    ("bitwise_left_shift", two_ints, bitwise),
    ("bitwise_right_shift", two_ints, bitwise),
    ("bitwise_right_shift_arithmetic", two_ints, bitwise),
    ("parse_duration", duration_types, parse_duration),
];

/// Registers the module's functions.
pub(super) fn register(state: &mut SessionState) -> DfResult<()> {
    rowwise::register(state, &DEFS)
}

fn int_arg(name: &str, t: &DataType) -> DfResult<DataType> {
    if int_type(t) {
        Ok(DataType::Int64)
    } else {
        plan_err!("{name} takes a BIGINT, got {t}")
    }
}

fn text_arg(name: &str, t: &DataType) -> DfResult<DataType> {
    if text_type(t) {
        Ok(DataType::Utf8)
    } else {
        plan_err!("{name} takes a VARCHAR, got {t}")
    }
}

fn one_int(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    Ok((vec![int_arg(name, &args[0])?], DataType::Int64))
}

fn two_ints(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    Ok((
        vec![int_arg(name, &args[0])?, int_arg(name, &args[1])?],
        DataType::Int64,
    ))
}

fn to_base_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    Ok((
        vec![int_arg(name, &args[0])?, int_arg(name, &args[1])?],
        DataType::Utf8,
    ))
}

fn from_base_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 2, 2)?;
    Ok((
        vec![text_arg(name, &args[0])?, int_arg(name, &args[1])?],
        DataType::Int64,
    ))
}

fn duration_types(name: &str, args: &[DataType]) -> DfResult<(Vec<DataType>, DataType)> {
    arity(name, args, 1, 1)?;
    Ok((
        vec![text_arg(name, &args[0])?],
        DataType::Interval(IntervalUnit::MonthDayNano),
    ))
}

/// The radix, checked as Trino checks it.
fn radix(name: &str, r: i64) -> DfResult<u32> {
    match u32::try_from(r) {
        Ok(r32) if RADIXES.contains(&r) => Ok(r32),
        _ => exec_err!(
            "{name}: Radix must be between {} and {}, got {r}",
            RADIXES.start(),
            RADIXES.end()
        ),
    }
}

/// `x` in base `r` as Java's `Long.toString(x, r)` writes it.
fn in_base(x: i64, r: u32) -> String {
    let mut magnitude = x.unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let d = (magnitude % u64::from(r)) as u32;
        digits.push(char::from_digit(d, r).unwrap_or('?'));
        magnitude /= u64::from(r);
        if magnitude == 0 {
            break;
        }
    }
    if x < 0 {
        digits.push('-');
    }
    digits.iter().rev().collect()
}

fn to_base(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(x), Some(r)) = (int(&args[0]), int(&args[1])) else {
        return Ok(ScalarValue::Utf8(None));
    };
    Ok(ScalarValue::Utf8(Some(in_base(x, radix(name, r)?))))
}

fn from_base(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(s), Some(r)) = (text(&args[0]), int(&args[1])) else {
        return Ok(ScalarValue::Int64(None));
    };
    let r = radix(name, r)?;
    // Rust reads what Java's Long.parseLong does: a sign, then ASCII digits of the base
    // in either case; nothing else (no prefix, no spaces), and no overflow.
    match i64::from_str_radix(s, r) {
        Ok(v) => Ok(ScalarValue::Int64(Some(v))),
        Err(_) => exec_err!("{name}: Not a valid base-{r} number: {s}"),
    }
}

fn bit_count(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let (Some(x), Some(bits)) = (int(&args[0]), int(&args[1])) else {
        return Ok(ScalarValue::Int64(None));
    };
    if !BIT_WIDTHS.contains(&bits) {
        return exec_err!(
            "{name}: Bits specified in bit_count must be between {} and {}, got {bits}",
            BIT_WIDTHS.start(),
            BIT_WIDTHS.end()
        );
    }
    if bits == 64 {
        return Ok(ScalarValue::Int64(Some(i64::from(x.count_ones()))));
    }
    let low = (1i64 << (bits - 1)) - 1;
    if x > low || x < !low {
        return exec_err!(
            "{name}: Number must be representable with the bits specified. {x} can not be represented with {bits} bits"
        );
    }
    let mask = (1i64 << bits) - 1;
    Ok(ScalarValue::Int64(Some(i64::from((x & mask).count_ones()))))
}

fn bitwise(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let values: Option<Vec<i64>> = args.iter().map(int).collect();
    let Some(v) = values else {
        return Ok(ScalarValue::Int64(None));
    };
    let shift = |n: i64| -> DfResult<Option<u32>> {
        if n < 0 {
            return exec_err!("{name}: the shift must not be negative, got {n}");
        }
        Ok(u32::try_from(n).ok().filter(|n| *n < 64))
    };
    let out = match (name, v.as_slice()) {
        ("bitwise_and", [a, b]) => a & b,
        ("bitwise_or", [a, b]) => a | b,
        ("bitwise_xor", [a, b]) => a ^ b,
        ("bitwise_not", [a]) => !a,
        ("bitwise_left_shift", [a, n]) => shift(*n)?.map_or(0, |n| a << n),
        ("bitwise_right_shift", [a, n]) => shift(*n)?.map_or(0, |n| ((*a as u64) >> n) as i64),
        ("bitwise_right_shift_arithmetic", [a, n]) => {
            shift(*n)?.map_or(if *a < 0 { -1 } else { 0 }, |n| a >> n)
        }
        _ => return exec_err!("{name}: wrong number of arguments"),
    };
    Ok(ScalarValue::Int64(Some(out)))
}

/// The nanoseconds in one of a duration's units.
fn unit_ns(unit: &str) -> Option<i128> {
    Some(match unit {
        "ns" | "nanosecond" => 1,
        "us" | "microsecond" => 1_000,
        "ms" | "millisecond" => 1_000_000,
        "s" | "second" => 1_000_000_000,
        "m" | "minute" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => DAY_NS,
        _ => return None,
    })
}

/// `s` as a number of nanoseconds, rounded half up; `None` if it is not a duration.
fn duration_ns(s: &str) -> Option<i128> {
    let s = s.trim();
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(number_end);
    let ns = unit_ns(unit.trim())?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || (number.contains('.') && fraction.is_empty()) {
        return None;
    }
    let scale = 10i128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let digits: i128 = format!("{whole}{fraction}").parse().ok()?;
    let scaled = digits.checked_mul(ns)?;
    Some((scaled + scale / 2) / scale)
}

fn parse_duration(name: &str, args: &[ScalarValue], _: &DataType) -> DfResult<ScalarValue> {
    let Some(s) = text(&args[0]) else {
        return Ok(ScalarValue::IntervalMonthDayNano(None));
    };
    if s.len() > MAX_DURATION_CHARS {
        return exec_err!(
            "{name}: the text is {} characters, over the limit of {MAX_DURATION_CHARS}",
            s.len()
        );
    }
    let Some(ns) = duration_ns(s) else {
        return exec_err!(
            "{name}: {s:?} is not a duration (a number and a unit: ns, us, ms, s, m, h or d)"
        );
    };
    let (days, nanoseconds) = (ns / DAY_NS, ns % DAY_NS);
    let (Ok(days), Ok(nanoseconds)) = (i32::try_from(days), i64::try_from(nanoseconds)) else {
        return exec_err!("{name}: {s:?} is out of range");
    };
    Ok(ScalarValue::IntervalMonthDayNano(Some(
        IntervalMonthDayNano {
            months: 0,
            days,
            nanoseconds,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(
        f: fn(&str, &[ScalarValue], &DataType) -> DfResult<ScalarValue>,
        name: &str,
        args: &[ScalarValue],
    ) -> String {
        match f(name, args, &DataType::Null) {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    fn i(v: i64) -> ScalarValue {
        ScalarValue::Int64(Some(v))
    }

    fn s(v: &str) -> ScalarValue {
        ScalarValue::Utf8(Some(v.to_string()))
    }

    #[test]
    fn bases_as_java_writes_and_reads_them() {
        assert_eq!(call(to_base, "to_base", &[i(255), i(16)]), "ff");
        assert_eq!(call(to_base, "to_base", &[i(-10), i(2)]), "-1010");
        assert_eq!(call(to_base, "to_base", &[i(0), i(36)]), "0");
        assert_eq!(
            call(to_base, "to_base", &[i(i64::MIN), i(2)]),
            format!("-1{}", "0".repeat(63))
        );
        assert!(call(to_base, "to_base", &[i(1), i(1)]).contains("Radix must be between 2 and 36"));
        assert_eq!(call(from_base, "from_base", &[s("FF"), i(16)]), "255");
        assert_eq!(call(from_base, "from_base", &[s("-zz"), i(36)]), "-1295");
        assert_eq!(call(from_base, "from_base", &[s("+7"), i(8)]), "7");
        for bad in ["0x1F", " 1", "", "-", "9223372036854775808"] {
            assert!(
                call(from_base, "from_base", &[s(bad), i(16)])
                    .contains("Not a valid base-16 number"),
                "{bad}"
            );
        }
        assert!(call(from_base, "from_base", &[s("1"), i(37)]).contains("Radix"));
    }

    #[test]
    fn bit_counts_as_trino() {
        // Timestream's and Trino's documented examples.
        assert_eq!(call(bit_count, "bit_count", &[i(19), i(8)]), "3");
        assert_eq!(call(bit_count, "bit_count", &[i(9), i(64)]), "2");
        assert_eq!(call(bit_count, "bit_count", &[i(-7), i(64)]), "62");
        assert_eq!(call(bit_count, "bit_count", &[i(-7), i(8)]), "6");
        assert_eq!(call(bit_count, "bit_count", &[i(-1), i(26)]), "26");
        assert_eq!(call(bit_count, "bit_count", &[i(33554132), i(26)]), "20");
        assert_eq!(
            call(bit_count, "bit_count", &[i(1152921504598458367), i(62)]),
            "59"
        );
        assert_eq!(
            call(bit_count, "bit_count", &[i(19), i(2)]),
            "error: Execution error: bit_count: Number must be representable with the bits specified. 19 can not be represented with 2 bits"
        );
        assert!(call(bit_count, "bit_count", &[i(1), i(65)]).contains("between 2 and 64"));
    }

    #[test]
    fn bitwise_as_trino() {
        assert_eq!(call(bitwise, "bitwise_and", &[i(12), i(7)]), "4");
        assert_eq!(call(bitwise, "bitwise_not", &[i(12)]), "-13");
        assert_eq!(call(bitwise, "bitwise_or", &[i(12), i(7)]), "15");
        assert_eq!(call(bitwise, "bitwise_xor", &[i(12), i(7)]), "11");
        assert_eq!(call(bitwise, "bitwise_left_shift", &[i(5), i(2)]), "20");
        assert_eq!(call(bitwise, "bitwise_right_shift", &[i(9), i(1)]), "4");
        assert_eq!(call(bitwise, "bitwise_right_shift", &[i(-45), i(64)]), "0");
        assert_eq!(
            call(bitwise, "bitwise_right_shift_arithmetic", &[i(-45), i(64)]),
            "-1"
        );
        assert_eq!(call(bitwise, "bitwise_right_shift", &[i(-1), i(60)]), "15");
        assert!(call(bitwise, "bitwise_left_shift", &[i(1), i(-1)]).contains("negative"));
    }

    #[test]
    fn durations_to_the_nanosecond() {
        assert_eq!(duration_ns("42.8ms"), Some(42_800_000));
        assert_eq!(duration_ns("3.81 d"), Some(3 * DAY_NS + 69_984_000_000_000));
        assert_eq!(duration_ns("5m"), Some(300_000_000_000));
        assert_eq!(duration_ns("1day"), Some(DAY_NS));
        assert_eq!(duration_ns(" 2 h "), Some(7_200_000_000_000));
        assert_eq!(duration_ns("1.5ns"), Some(2));
        for bad in [
            "", "ms", "1", "1 days", "-1s", "1.s", ".5s", "1e3s", "1 week",
        ] {
            assert_eq!(duration_ns(bad), None, "{bad}");
        }
        assert_eq!(
            call(parse_duration, "parse_duration", &[s("1.5h")]),
            "IntervalMonthDayNano { months: 0, days: 0, nanoseconds: 5400000000000 }"
        );
    }
}
