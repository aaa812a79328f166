//! Arrow columns as rows of text cells, the form [`crate::mapping`] reads: what a
//! scheduled query's result and an imported Parquet file become before mapping.

use std::sync::Arc;

use almanac_sql::arrow::array::{Array, ArrayRef, AsArray};
use almanac_sql::arrow::compute::cast;
use almanac_sql::arrow::datatypes::{DataType, TimeUnit};

use crate::error::{Error, Result};

/// The rows of `columns` as text cells: timestamps as nanoseconds since the epoch,
/// every other scalar as Arrow casts it to text.
pub fn text_rows(columns: &[ArrayRef]) -> Result<Vec<Vec<Option<String>>>> {
    let rows = columns.first().map_or(0, |c| c.len());
    let texts: Vec<ArrayRef> = columns
        .iter()
        .map(|c| {
            let c = match c.data_type() {
                DataType::Timestamp(..) => {
                    let ns = cast(c, &DataType::Timestamp(TimeUnit::Nanosecond, None))?;
                    cast(&ns, &DataType::Int64)?
                }
                _ => Arc::clone(c),
            };
            if !matches!(
                c.data_type(),
                DataType::Int64 | DataType::Utf8 | DataType::Boolean
            ) && !c.data_type().is_numeric()
                && !matches!(
                    c.data_type(),
                    DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
                )
            {
                return Err(datafusion::arrow::error::ArrowError::CastError(format!(
                    "a column of type {} cannot be written to a table",
                    c.data_type()
                )));
            }
            cast(&c, &DataType::Utf8)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| Error::invalid(e.to_string()))?;
    let strings: Vec<_> = texts.iter().map(|a| a.as_string::<i32>()).collect();
    Ok((0..rows)
        .map(|i| {
            strings
                .iter()
                .map(|s| (!s.is_null(i)).then(|| s.value(i).to_string()))
                .collect()
        })
        .collect())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;
    use almanac_sql::arrow::array::{Float64Array, StringArray, TimestampMillisecondArray};

    #[test]
    fn text_rows_write_times_in_nanoseconds_and_keep_nulls() {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(TimestampMillisecondArray::from(vec![Some(1_000), None])),
            Arc::new(StringArray::from(vec![Some("h1"), Some("h2")])),
            Arc::new(Float64Array::from(vec![Some(0.5), None])),
        ];
        let rows = text_rows(&cols).unwrap();
        assert_eq!(
            rows,
            vec![
                vec![
                    Some("1000000000".into()),
                    Some("h1".into()),
                    Some("0.5".into())
                ],
                vec![None, Some("h2".into()), None],
            ]
        );
    }
}
