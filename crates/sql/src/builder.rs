//! Arrow builders for the columns of the flat model, filled a point at a time or a
//! sealed block's columns at a time.

use std::ops::Range;
use std::sync::Arc;

use almanac_timeseries::block::{BlockColumn, ColumnValues};
use almanac_timeseries::model::{MeasureType, Value};
use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
    TimestampNanosecondBuilder,
};

use crate::series::Column;

/// An Arrow builder for one column of the flat model (or of its partial aggregates).
pub(crate) enum Builder {
    Text(StringBuilder),
    Float(Float64Builder),
    Int(Int64Builder),
    Bool(BooleanBuilder),
    Time(TimestampNanosecondBuilder),
}

impl Builder {
    pub(crate) fn new(c: &Column) -> Self {
        let t = match c {
            Column::Dimension(_) | Column::MeasureName => MeasureType::Varchar,
            Column::Time => MeasureType::Timestamp,
            Column::Single(t) | Column::Attribute(_, t) => *t,
        };
        Self::of(t)
    }

    /// A builder of the Arrow type of `t`.
    pub(crate) fn of(t: MeasureType) -> Self {
        match t {
            MeasureType::Double => Self::Float(Float64Builder::new()),
            MeasureType::Bigint => Self::Int(Int64Builder::new()),
            MeasureType::Boolean => Self::Bool(BooleanBuilder::new()),
            MeasureType::Timestamp => Self::Time(TimestampNanosecondBuilder::new()),
            MeasureType::Varchar | MeasureType::Multi => Self::Text(StringBuilder::new()),
        }
    }

    pub(crate) fn append(&mut self, v: Option<&Value>) {
        match (self, v) {
            (Self::Float(b), Some(Value::Double(x))) => b.append_value(*x),
            (Self::Int(b), Some(Value::Bigint(x))) => b.append_value(*x),
            (Self::Bool(b), Some(Value::Boolean(x))) => b.append_value(*x),
            (Self::Time(b), Some(Value::Timestamp(x))) => b.append_value(*x),
            (Self::Text(b), Some(Value::Varchar(x))) => b.append_value(x),
            (Self::Float(b), _) => b.append_null(),
            (Self::Int(b), _) => b.append_null(),
            (Self::Bool(b), _) => b.append_null(),
            (Self::Time(b), _) => b.append_null(),
            (Self::Text(b), _) => b.append_null(),
        }
    }

    pub(crate) fn append_text(&mut self, v: Option<&str>) {
        if let Self::Text(b) = self {
            b.append_option(v);
        }
    }

    pub(crate) fn append_time(&mut self, ns: i64) {
        if let Self::Time(b) = self {
            b.append_value(ns);
        }
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Text(b) => Arc::new(b.finish()),
            Self::Float(b) => Arc::new(b.finish()),
            Self::Int(b) => Arc::new(b.finish()),
            Self::Bool(b) => Arc::new(b.finish()),
            Self::Time(b) => Arc::new(b.finish()),
        }
    }
}

impl Builder {
    /// `n` times the same text (or null).
    pub(crate) fn append_text_n(&mut self, v: Option<&str>, n: usize) {
        if let Self::Text(b) = self {
            match v {
                Some(v) => (0..n).for_each(|_| b.append_value(v)),
                None => b.append_nulls(n),
            }
        }
    }

    /// `n` nulls.
    pub(crate) fn append_nulls(&mut self, n: usize) {
        match self {
            Self::Text(b) => b.append_nulls(n),
            Self::Float(b) => b.append_nulls(n),
            Self::Int(b) => b.append_nulls(n),
            Self::Bool(b) => b.append_nulls(n),
            Self::Time(b) => b.append_nulls(n),
        }
    }

    /// Times, ns.
    pub(crate) fn append_times(&mut self, ns: &[i64]) {
        if let Self::Time(b) = self {
            b.append_slice(ns);
        }
    }

    /// The values of a block column at the points `range` (null where a point has
    /// none); the column's type must be the builder's.
    pub(crate) fn append_column(&mut self, c: &BlockColumn, range: Range<usize>) {
        let Some(points) = &c.points else {
            match (self, &c.values) {
                (Self::Float(b), ColumnValues::Double(v)) => b.append_slice(&v[range]),
                (Self::Int(b), ColumnValues::Bigint(v)) => b.append_slice(&v[range]),
                (Self::Time(b), ColumnValues::Timestamp(v)) => b.append_slice(&v[range]),
                (Self::Bool(b), ColumnValues::Boolean(v)) => b.append_slice(&v[range]),
                (Self::Text(b), ColumnValues::Varchar(v)) => {
                    v[range].iter().for_each(|x| b.append_value(x))
                }
                (b, _) => b.append_nulls(range.len()),
            }
            return;
        };
        // `points` lists the points that have a value, increasing; walk both.
        let mut k = points.partition_point(|&p| (p as usize) < range.start);
        for i in range {
            if points.get(k).is_some_and(|&p| p as usize == i) {
                self.append_nth(&c.values, k);
                k += 1;
            } else {
                self.append(None);
            }
        }
    }

    /// The `k`-th of `values`.
    fn append_nth(&mut self, values: &ColumnValues, k: usize) {
        match (self, values) {
            (Self::Float(b), ColumnValues::Double(v)) => b.append_option(v.get(k).copied()),
            (Self::Int(b), ColumnValues::Bigint(v)) => b.append_option(v.get(k).copied()),
            (Self::Time(b), ColumnValues::Timestamp(v)) => b.append_option(v.get(k).copied()),
            (Self::Bool(b), ColumnValues::Boolean(v)) => b.append_option(v.get(k).copied()),
            (Self::Text(b), ColumnValues::Varchar(v)) => b.append_option(v.get(k)),
            (b, _) => b.append(None),
        }
    }
}
