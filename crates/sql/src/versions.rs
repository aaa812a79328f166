//! GoogleSQL for Bigtable's table arguments, as `bigtable_history('t', 'name', value,
//! …)` receives them ([`crate::rewrite`] turns `t(name => value, …)` into that):
//!
//! | argument | type | meaning |
//! |---|---|---|
//! | `with_history` | BOOL | every version: each family maps a qualifier to `{timestamp, value}` structs, newest first |
//! | `latest_n` | INT64 ≥ 1 | with history: the newest n versions of each column |
//! | `after` / `after_or_equal` | TIMESTAMP | with history: versions after (or at) the time |
//! | `before` / `before_or_equal` | TIMESTAMP | with history: versions before (or at) the time |
//! | `as_of` | TIMESTAMP | without history: the newest value of each column at or before the time |
//!
//! Values are constant expressions (`TIMESTAMP '…'`, `TIMESTAMP('…')`) or query
//! parameters (`@n`, whose values are put in before planning), evaluated once while
//! planning. The bounds are
//! kept in microseconds; a table of millisecond granularity (Bigtable's default)
//! takes them to the millisecond boundary that keeps exactly the cells the comparison
//! keeps ([`crate::bigtable::Versions::for_granularity`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit, TimestampMicrosecondType};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{ColumnarValue, Expr};

use crate::bigtable::Versions;

/// The value of a constant expression.
fn constant(e: &Expr, session: &dyn Session) -> DfResult<ScalarValue> {
    let physical = session.create_physical_expr(e.clone(), &DFSchema::empty())?;
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        Vec::new(),
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    match physical.evaluate(&one_row)? {
        ColumnarValue::Scalar(v) => Ok(v),
        ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0),
    }
}

/// A TIMESTAMP argument in microseconds (a string is read as RFC 3339).
fn micros(name: &str, v: &ScalarValue) -> DfResult<i64> {
    let array = v.to_array()?;
    let target = DataType::Timestamp(TimeUnit::Microsecond, None);
    let t = match cast(&array, &target) {
        Ok(t) if !t.is_null(0) => t,
        _ => return plan_err!("table argument {name} takes a TIMESTAMP, got {v}"),
    };
    Ok(t.as_primitive::<TimestampMicrosecondType>().value(0))
}

/// Microseconds in a millisecond, the granularity of most tables' cell timestamps.
const MILLISECOND_US: i64 = 1_000;

/// The first whole millisecond at or after `us`.
pub(crate) fn ceil_ms(us: i64) -> i64 {
    us.div_euclid(MILLISECOND_US)
        .saturating_add(i64::from(us.rem_euclid(MILLISECOND_US) != 0))
        .saturating_mul(MILLISECOND_US)
}

/// The versions the arguments `args` (name, value pairs) select.
pub(crate) fn parse(args: &[Expr], session: &dyn Session) -> DfResult<Versions> {
    if !args.len().is_multiple_of(2) {
        return plan_err!("table arguments come as name => value pairs");
    }
    let mut v = Versions::default();
    let mut seen: Vec<String> = Vec::new();
    let mut as_of = false;
    let mut windowed = false;
    for pair in args.chunks(2) {
        let [Expr::Literal(ScalarValue::Utf8(Some(name)), _), value] = pair else {
            return plan_err!("table arguments come as name => value pairs");
        };
        if seen.contains(name) {
            return plan_err!("table argument {name} is given twice");
        }
        seen.push(name.clone());
        let value = constant(value, session)?;
        match name.as_str() {
            "with_history" => match value {
                ScalarValue::Boolean(Some(b)) => v.history = b,
                other => return plan_err!("with_history takes TRUE or FALSE, got {other}"),
            },
            "latest_n" => {
                let n = match value {
                    ScalarValue::Int64(Some(n)) => n,
                    ScalarValue::Int32(Some(n)) => n.into(),
                    other => return plan_err!("latest_n takes an INT64, got {other}"),
                };
                match u32::try_from(n) {
                    Ok(n) if n >= 1 => v.latest_n = Some(n),
                    _ => return plan_err!("latest_n must be at least 1, got {n}"),
                }
                windowed = true;
            }
            "after" => {
                let t = micros(name, &value)?.saturating_add(1);
                v.start_us = v.start_us.max(t);
                windowed = true;
            }
            "after_or_equal" => {
                v.start_us = v.start_us.max(micros(name, &value)?);
                windowed = true;
            }
            "before" => {
                let end = micros(name, &value)?;
                v.end_us = Some(v.end_us.map_or(end, |e| e.min(end)));
                windowed = true;
            }
            "before_or_equal" | "as_of" => {
                let end = micros(name, &value)?.saturating_add(1);
                v.end_us = Some(v.end_us.map_or(end, |e| e.min(end)));
                if name == "as_of" {
                    as_of = true;
                } else {
                    windowed = true;
                }
            }
            other => return plan_err!("unknown table argument {other}"),
        }
    }
    if windowed && !v.history {
        return plan_err!(
            "latest_n, after, after_or_equal, before and before_or_equal need with_history => TRUE"
        );
    }
    if as_of && v.history {
        return plan_err!("as_of cannot be used with with_history => TRUE");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::ceil_ms;

    #[test]
    fn bounds_round_to_whole_milliseconds() {
        assert_eq!(ceil_ms(0), 0);
        assert_eq!(ceil_ms(1), 1_000);
        assert_eq!(ceil_ms(1_000), 1_000);
        assert_eq!(ceil_ms(-1), 0);
        assert_eq!(ceil_ms(-1_001), -1_000);
    }
}
