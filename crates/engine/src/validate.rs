//! Checks a row's mutations against the schema and every limit before anything is
//! written: a request that fails here leaves no trace.

use crate::aggregate;
use crate::catalog::TableMeta;
use crate::error::{Error, Result};
use crate::filter::RowFilter;
use crate::limits::{
    MAX_MUTATIONS_PER_REQUEST, MAX_QUALIFIER_BYTES, MAX_ROW_BYTES, MAX_ROW_KEY_BYTES,
    MAX_VALUE_BYTES, MICROS_PER_MILLI,
};
use crate::mutation::{Mutation, SERVER_TIME};
use crate::schema::{Granularity, ValueType};

/// Checks a row key: non-empty and within [`MAX_ROW_KEY_BYTES`].
pub fn row_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::Invalid("row key must not be empty".into()));
    }
    if key.len() > MAX_ROW_KEY_BYTES {
        return Err(Error::limit(
            "row key size in bytes",
            key.len(),
            MAX_ROW_KEY_BYTES,
        ));
    }
    Ok(())
}

/// Checks a qualifier against [`MAX_QUALIFIER_BYTES`].
pub fn qualifier(q: &[u8]) -> Result<()> {
    if q.len() > MAX_QUALIFIER_BYTES {
        return Err(Error::limit(
            "column qualifier size in bytes",
            q.len(),
            MAX_QUALIFIER_BYTES,
        ));
    }
    Ok(())
}

/// Checks a cell timestamp: [`SERVER_TIME`], or non-negative and a multiple of 1000 on
/// MILLIS tables.
pub fn timestamp(meta: &TableMeta, ts_us: i64, what: &str) -> Result<()> {
    if ts_us == SERVER_TIME {
        return Ok(());
    }
    if ts_us < 0 {
        return Err(Error::Invalid(format!(
            "{what} {ts_us} must be -1 (server time) or non-negative"
        )));
    }
    granularity(meta, ts_us, what)
}

/// Checks a DeleteFromColumn time range as Cloud Bigtable does: the start is a
/// non-negative timestamp (a range has no server time), and an end, when set, is a
/// non-negative timestamp after the start: an empty or inverted range is an error, not
/// a no-op. Both bounds follow the table's granularity. (On the wire an end of 0 means
/// "no end"; the server passes it as `None`.)
pub fn delete_time_range(meta: &TableMeta, start_us: i64, end_us: Option<i64>) -> Result<()> {
    const START: &str = "DeleteFromColumn time_range start_timestamp_micros";
    const END: &str = "DeleteFromColumn time_range end_timestamp_micros";
    if start_us < 0 {
        return Err(Error::Invalid(format!(
            "{START} {start_us} must be non-negative"
        )));
    }
    granularity(meta, start_us, START)?;
    if let Some(end_us) = end_us {
        if end_us < 0 {
            return Err(Error::Invalid(format!(
                "{END} {end_us} must be non-negative (or unset for no end)"
            )));
        }
        granularity(meta, end_us, END)?;
        if end_us <= start_us {
            return Err(Error::Invalid(format!(
                "{END} {end_us} must be after start_timestamp_micros {start_us}: the range is empty or inverted"
            )));
        }
    }
    Ok(())
}

/// Checks that a non-negative timestamp suits the table's granularity: a multiple of
/// 1000 on MILLIS tables.
fn granularity(meta: &TableMeta, ts_us: i64, what: &str) -> Result<()> {
    if meta.granularity == Granularity::Millis && ts_us % MICROS_PER_MILLI != 0 {
        return Err(Error::Invalid(format!(
            "{what} {ts_us} must be a multiple of 1000 microseconds: table {} has MILLIS granularity",
            meta.name
        )));
    }
    Ok(())
}

/// Checks one row's mutations; returns the bytes they carry (for batch limits).
pub fn mutations(meta: &TableMeta, key: &[u8], muts: &[Mutation]) -> Result<usize> {
    row_key(key)?;
    if muts.is_empty() {
        return Err(Error::Invalid(
            "a row mutation needs at least one mutation".into(),
        ));
    }
    if muts.len() > MAX_MUTATIONS_PER_REQUEST {
        return Err(Error::limit(
            "mutations in one request",
            muts.len(),
            MAX_MUTATIONS_PER_REQUEST,
        ));
    }
    let mut bytes = key.len();
    for m in muts {
        let family = match m.family() {
            Some(f) => Some(meta.family(f).ok_or_else(|| Error::no_family(f))?),
            None => None,
        };
        match m {
            Mutation::SetCell {
                family: fname,
                qualifier: q,
                timestamp_us,
                value,
            } => {
                qualifier(q)?;
                timestamp(meta, *timestamp_us, "SetCell timestamp")?;
                if value.len() > MAX_VALUE_BYTES {
                    return Err(Error::limit(
                        "cell value size in bytes",
                        value.len(),
                        MAX_VALUE_BYTES,
                    ));
                }
                if family.is_some_and(|f| f.spec.value_type != ValueType::Bytes) {
                    return Err(Error::Invalid(format!(
                        "SetCell into aggregate family {fname:?}: use AddToCell or MergeToCell"
                    )));
                }
                bytes += q.len() + value.len();
            }
            Mutation::DeleteFromColumn {
                qualifier: q,
                start_us,
                end_us,
                ..
            } => {
                qualifier(q)?;
                delete_time_range(meta, *start_us, *end_us)?;
                bytes += q.len();
            }
            Mutation::DeleteFromFamily { .. } | Mutation::DeleteFromRow => {}
            Mutation::AddToCell {
                family: fname,
                qualifier: q,
                timestamp_us,
                input,
            }
            | Mutation::MergeToCell {
                family: fname,
                qualifier: q,
                timestamp_us,
                input,
            } => {
                qualifier(q)?;
                timestamp(meta, *timestamp_us, "aggregate timestamp")?;
                let merge = matches!(m, Mutation::MergeToCell { .. });
                match family.map(|f| f.spec.value_type) {
                    Some(ValueType::Aggregate(kind)) => {
                        aggregate::validate_input(kind, fname, merge, input)?
                    }
                    _ => {
                        return Err(Error::Invalid(format!(
                            "AddToCell/MergeToCell into family {fname:?}, which is not an aggregate family"
                        )));
                    }
                }
                bytes += q.len() + 8;
            }
        }
    }
    if bytes > MAX_ROW_BYTES {
        return Err(Error::limit(
            "row mutation size in bytes",
            bytes,
            MAX_ROW_BYTES,
        ));
    }
    Ok(bytes)
}

/// Checks that every timestamp range in a filter suits the table's granularity:
/// on MILLIS tables both bounds must be whole milliseconds, as on the service.
pub fn filter_timestamps(meta: &TableMeta, filter: &RowFilter) -> Result<()> {
    let mut result = Ok(());
    filter.visit(&mut |f| {
        if let RowFilter::TimestampRange { start_us, end_us } = f {
            for ts in std::iter::once(*start_us).chain(*end_us) {
                if result.is_ok() && ts > 0 {
                    result = timestamp(meta, ts, "timestamp_range_filter bound");
                }
            }
        }
    });
    result
}
