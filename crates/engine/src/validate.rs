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

/// Checks an explicit timestamp: non-negative (or [`SERVER_TIME`] where allowed) and a
/// multiple of 1000 on MILLIS tables.
pub fn timestamp(meta: &TableMeta, ts_us: i64, what: &str) -> Result<()> {
    if ts_us == SERVER_TIME {
        return Ok(());
    }
    if ts_us < 0 {
        return Err(Error::Invalid(format!(
            "{what} {ts_us} must be -1 (server time) or non-negative"
        )));
    }
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
                if *start_us != 0 {
                    timestamp(meta, *start_us, "DeleteFromColumn start timestamp")?;
                }
                if let Some(end) = end_us {
                    timestamp(meta, *end, "DeleteFromColumn end timestamp")?;
                    if *end < *start_us {
                        return Err(Error::Invalid(format!(
                            "DeleteFromColumn time range end {end} is before its start {start_us}"
                        )));
                    }
                }
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
