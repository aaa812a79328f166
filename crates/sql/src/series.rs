//! A Timestream table in Timestream's flat model: one column per dimension (VARCHAR),
//! `measure_name`, `time`, `measure_value::<type>` for single-measure records of each
//! type the table holds, and one column per attribute of multi-measure records.
//!
//! A scan turns DataFusion's filters into a [`Selection`] whatever the storage pattern:
//! `measure_name = …` and `<dimension> = …` pick key prefixes, comparisons and BETWEEN
//! on `time` bound the time range (keys and cell timestamps), and a measure compared
//! with a literal drops the points that cannot pass before they become rows
//! ([`crate::value_filter`]). DataFusion still applies every filter itself, so
//! pushdown only narrows what is read.

use std::collections::HashSet;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use almanac_timeseries::block::{BlockColumn, BlockColumns};
use almanac_timeseries::model::{MeasureType, Measures, Point, Value};
use almanac_timeseries::query::{self, Chunk, Part, Selection, SeriesQueue};
use almanac_timeseries::{DimensionPair, SharedStore, TableMeta, TimeSeries};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::utils::expr_to_columns;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use crate::builder::Builder;
use crate::source::{Batches, Placement, Producer, Sink, scan_plan, sharing};
use crate::stats::ScanCounters;
use crate::value_filter::{ValueFilter, passing_runs};

/// The measure-name column.
pub const MEASURE_NAME: &str = "measure_name";
/// The time column.
pub const TIME: &str = "time";
/// A scan of a time-series table runs in at most this many partitions (each a
/// blocking thread), however many the session allows.
const MAX_SCAN_PARTITIONS: usize = 16;
/// Prefix of the single-measure value columns (`measure_value::double`, …).
pub const MEASURE_VALUE_PREFIX: &str = "measure_value::";

/// The single-measure value types, in column order.
const SINGLE_TYPES: [MeasureType; 5] = [
    MeasureType::Double,
    MeasureType::Bigint,
    MeasureType::Varchar,
    MeasureType::Boolean,
    MeasureType::Timestamp,
];

/// The Arrow type of a Timestream scalar type.
pub fn arrow_type(t: MeasureType) -> DataType {
    match t {
        MeasureType::Double => DataType::Float64,
        MeasureType::Bigint => DataType::Int64,
        MeasureType::Boolean => DataType::Boolean,
        MeasureType::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, None),
        MeasureType::Varchar | MeasureType::Multi => DataType::Utf8,
    }
}

/// What a column of the flat model holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Column {
    Dimension(String),
    MeasureName,
    Time,
    /// `measure_value::<type>` of single-measure records.
    Single(MeasureType),
    /// One attribute of multi-measure records.
    Attribute(String, MeasureType),
}

impl Column {
    /// The block column holding this measure column's values (`None` for the other
    /// columns, or when no point of the block has the measure).
    pub(crate) fn in_block<'b>(&self, block: &'b BlockColumns) -> Option<&'b BlockColumn> {
        let (name, kind) = match self {
            Self::Attribute(name, kind) => (name.as_str(), *kind),
            // A single-value block's one column is named "".
            Self::Single(kind) => ("", *kind),
            _ => return None,
        };
        block
            .columns
            .iter()
            .find(|bc| bc.name == name && bc.values.kind() == kind)
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Self::Dimension(n) | Self::Attribute(n, _) => n.clone(),
            Self::MeasureName => MEASURE_NAME.into(),
            Self::Time => TIME.into(),
            Self::Single(t) => format!("{MEASURE_VALUE_PREFIX}{}", t.as_str().to_lowercase()),
        }
    }

    pub(crate) fn field(&self) -> Field {
        match self {
            Self::Dimension(n) => Field::new(n, DataType::Utf8, true),
            Self::MeasureName => Field::new(MEASURE_NAME, DataType::Utf8, false),
            Self::Time => Field::new(TIME, arrow_type(MeasureType::Timestamp), false),
            Self::Single(t) => Field::new(self.name(), arrow_type(*t), true),
            Self::Attribute(n, t) => Field::new(n, arrow_type(*t), true),
        }
    }
}

/// One time-series table as a DataFusion table.
#[derive(Debug, Clone)]
pub struct SeriesTable {
    ts: Arc<TimeSeries<SharedStore>>,
    meta: Arc<TableMeta>,
    columns: Vec<Column>,
    schema: SchemaRef,
    counters: Arc<ScanCounters>,
    /// Only the newest point of each series in the selection
    /// ([`almanac_timeseries::query::latest`]): what [`crate::latest_join`] reads.
    newest_only: bool,
}

impl SeriesTable {
    /// The table `meta` of `ts`, counting reads into `counters`.
    pub fn new(
        ts: Arc<TimeSeries<SharedStore>>,
        meta: Arc<TableMeta>,
        counters: Arc<ScanCounters>,
    ) -> Self {
        let s = &meta.schema;
        let mut columns: Vec<Column> = s
            .dimensions
            .iter()
            .cloned()
            .map(Column::Dimension)
            .collect();
        columns.push(Column::MeasureName);
        columns.push(Column::Time);
        for t in SINGLE_TYPES {
            if s.measures.values().any(|m| *m == t) {
                columns.push(Column::Single(t));
            }
        }
        for (name, t) in &s.attributes {
            columns.push(Column::Attribute(name.clone(), *t));
        }
        let schema = Arc::new(Schema::new(
            columns.iter().map(Column::field).collect::<Vec<_>>(),
        ));
        Self {
            ts,
            meta,
            columns,
            schema,
            counters,
            newest_only: false,
        }
    }

    /// The same table, read as the newest point of each series only.
    pub(crate) fn newest_only(&self) -> Self {
        Self {
            newest_only: true,
            ..self.clone()
        }
    }

    /// Whether this is [`SeriesTable::newest_only`].
    pub(crate) fn is_newest_only(&self) -> bool {
        self.newest_only
    }

    /// Whether a plan made over this table holds over `other`, the table read again:
    /// the same table (not one made again under its name), with the same columns,
    /// layout, summaries, guards and directory.
    pub(crate) fn plans_as(&self, other: &SeriesTable) -> bool {
        let (a, b) = (&self.meta, &other.meta);
        a.same_table(b)
            && a.layout == b.layout
            && a.schema == b.schema
            && a.summarized == b.summarized
            && a.guarded == b.guarded
            && a.indexed == b.indexed
            && self.schema == other.schema
    }

    /// The table's metadata.
    pub(crate) fn meta(&self) -> &Arc<TableMeta> {
        &self.meta
    }

    /// The time-series service the table is read through.
    pub(crate) fn service(&self) -> &Arc<TimeSeries<SharedStore>> {
        &self.ts
    }

    /// The read counters of the query.
    pub(crate) fn counters(&self) -> &Arc<ScanCounters> {
        &self.counters
    }

    /// The columns, in `SELECT *` order.
    pub(crate) fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The table's columns an expression reads, or `None` if it reads one the table
    /// lacks.
    pub(crate) fn columns_in(&self, e: &Expr) -> Option<Vec<&Column>> {
        let mut cols = HashSet::new();
        expr_to_columns(e, &mut cols).ok()?;
        cols.iter().map(|c| self.column(&c.name)).collect()
    }

    /// The column named `name`.
    pub(crate) fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name() == name)
    }

    fn is_dimension(&self, name: &str) -> bool {
        self.meta.schema.dimension_index(name).is_some()
    }

    /// `measure_name IN (…)` or `<dimension> IN (…)` of string literals: the column
    /// and the values, each becoming its own selection.
    fn alternatives(&self, e: &Expr) -> Option<(String, Vec<String>)> {
        let (name, values) = match e {
            Expr::InList(list) if !list.negated => (
                column_name(&list.expr)?.to_string(),
                list.list
                    .iter()
                    .map(string_literal)
                    .collect::<Option<Vec<_>>>()?,
            ),
            // DataFusion turns short IN lists into ORs of equalities.
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Or,
                right,
            }) => {
                let (l, mut lv) = self.alternatives(left)?;
                let (r, rv) = self.alternatives(right)?;
                if l != r {
                    return None;
                }
                lv.extend(rv);
                (l, lv)
            }
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Eq,
                right,
            }) => match (column_name(left), column_name(right)) {
                (Some(n), None) => (n.to_string(), vec![string_literal(right)?]),
                (None, Some(n)) => (n.to_string(), vec![string_literal(left)?]),
                _ => return None,
            },
            _ => return None,
        };
        (name == MEASURE_NAME || self.is_dimension(&name)).then_some((name, values))
    }

    /// The selections a scan reads one after the other: the filters folded into one,
    /// then split by the first IN list on the measure name or a dimension.
    pub(crate) fn selections(&self, filters: &[Expr]) -> Vec<Selection> {
        let mut base = Selection::default();
        let mut split = None;
        for f in filters {
            if split.is_none()
                && let Some(alt) = self.alternatives(f).filter(|(_, v)| v.len() > 1)
            {
                split = Some(alt);
                continue;
            }
            self.narrow(&mut base, f);
        }
        let Some((column, mut values)) = split else {
            return vec![base];
        };
        values.sort();
        values.dedup();
        values
            .into_iter()
            .map(|v| {
                let mut sel = base.clone();
                if column == MEASURE_NAME {
                    if sel.measure_name.as_ref().is_some_and(|m| *m != v) {
                        sel.end_ns = sel.start_ns;
                    }
                    sel.measure_name = Some(v);
                } else {
                    sel.dimensions.push((column.clone(), v));
                }
                sel
            })
            .collect()
    }

    /// What each of at most `partitions` parallel partitions of a scan reads: several
    /// selections are dealt out in turn; one selection read series by series is shared
    /// by series ([`Selection::part`]) unless it is narrowed by a dimension to a window
    /// within two buckets ([`Self::small`]); anything else stays one partition.
    pub(crate) fn partitioned(
        &self,
        selections: Vec<Selection>,
        partitions: usize,
    ) -> Vec<Vec<Selection>> {
        let n = partitions.clamp(1, MAX_SCAN_PARTITIONS);
        match selections.as_slice() {
            [one]
                if n > 1
                    && !self.small(one)
                    && query::splits_by_series(&self.meta, one, self.newest_only) =>
            {
                (0..n)
                    .map(|index| {
                        let mut sel = one.clone();
                        sel.part = Some(Part {
                            index,
                            count: n,
                            queue: None,
                        });
                        vec![sel]
                    })
                    .collect()
            }
            _ if n > 1 && selections.len() > 1 => {
                let mut parts = vec![Vec::new(); n.min(selections.len())];
                let count = parts.len();
                for (i, sel) in selections.into_iter().enumerate() {
                    parts[i % count].push(sel);
                }
                parts
            }
            _ => vec![selections],
        }
    }

    /// Whether `sel` is narrowed by a dimension to a window within two adjacent buckets
    /// (an hour's window, even one closed at both ends as `BETWEEN` is): a few series,
    /// each read in one or two blocks, is less work than the walk over every series of
    /// the range that each partition would repeat to find them. Over the TSBS day (one
    /// host or one region of eleven hosts, one hour, max by minute), one partition
    /// saves 15% and 27% of the server's CPU a query; over twelve hours a region's
    /// hosts took 40% longer on one core than on two (docs/benchmarks.md).
    fn small(&self, sel: &Selection) -> bool {
        let bucket_ns = self.meta.layout.bucket_ns().max(1);
        let first = sel.start_ns.div_euclid(bucket_ns);
        let last = sel.end_ns.saturating_sub(1).div_euclid(bucket_ns);
        !sel.dimensions.is_empty() && sel.end_ns > sel.start_ns && last - first < 2
    }

    /// Whether a scan under `filters` reads in one partition, however many cores,
    /// because it is small ([`Self::small`]); a scan that cannot be split (a window
    /// without an end, the whole table) may be large, and its rows are still dealt
    /// out to the cores after it.
    pub(crate) fn reads_in_one_partition(&self, filters: &[Expr]) -> bool {
        matches!(self.selections(filters).as_slice(), [one] if self.small(one))
    }

    /// Whether a filter conjunct passes either every point of a series that the scan's
    /// time window keeps or none of them: a deterministic filter on dimensions and
    /// `measure_name` only, or a comparison (or BETWEEN) of the plain `time` column
    /// with timestamps, which the scan folds into its window exactly. Rewrites that
    /// read a series' newest point, or a bucket's summary, instead of its points are
    /// right only under such filters.
    pub(crate) fn filter_is_exact(&self, e: &Expr) -> bool {
        let Some(cols) = self.columns_in(e).filter(|_| !e.is_volatile()) else {
            return false;
        };
        if cols
            .iter()
            .all(|c| matches!(c, Column::Dimension(_) | Column::MeasureName))
        {
            return true;
        }
        let plain_time = |e: &Expr| matches!(e, Expr::Column(c) if c.name == TIME);
        let compares_time = match e {
            Expr::BinaryExpr(BinaryExpr { left, right, .. }) => {
                plain_time(left) || plain_time(right)
            }
            Expr::Between(b) => plain_time(&b.expr),
            _ => false,
        };
        cols.iter().all(|c| **c == Column::Time)
            && compares_time
            && self.narrow(&mut Selection::default(), e)
    }

    /// Folds one filter into the selection; `false` if it says nothing we can use.
    pub(crate) fn narrow(&self, sel: &mut Selection, e: &Expr) -> bool {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                if *op == Operator::And {
                    let l = self.narrow(sel, left);
                    let r = self.narrow(sel, right);
                    return l || r;
                }
                let (name, op, value) = match (column_name(left), column_name(right)) {
                    (Some(n), None) => (n, *op, &**right),
                    (None, Some(n)) => match op.swap() {
                        Some(op) => (n, op, &**left),
                        None => return false,
                    },
                    _ => return false,
                };
                if name == TIME {
                    let Some(ns) = timestamp_ns(value) else {
                        return false;
                    };
                    return narrow_time(sel, op, ns);
                }
                if op != Operator::Eq {
                    return false;
                }
                let Some(text) = string_literal(value) else {
                    return false;
                };
                if name == MEASURE_NAME {
                    if sel.measure_name.as_ref().is_some_and(|m| *m != text) {
                        // Contradiction: nothing matches. An impossible time range says so.
                        sel.end_ns = sel.start_ns;
                    }
                    sel.measure_name = Some(text);
                    true
                } else if self.is_dimension(name) {
                    sel.dimensions.push((name.to_string(), text));
                    true
                } else {
                    false
                }
            }
            Expr::Between(Between {
                expr,
                negated: false,
                low,
                high,
            }) if column_name(expr) == Some(TIME) => {
                match (timestamp_ns(low), timestamp_ns(high)) {
                    (Some(lo), Some(hi)) => {
                        narrow_time(sel, Operator::GtEq, lo);
                        narrow_time(sel, Operator::LtEq, hi);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

fn narrow_time(sel: &mut Selection, op: Operator, ns: i64) -> bool {
    match op {
        Operator::Gt => sel.start_ns = sel.start_ns.max(ns.saturating_add(1)),
        Operator::GtEq => sel.start_ns = sel.start_ns.max(ns),
        Operator::Lt => sel.end_ns = sel.end_ns.min(ns),
        Operator::LtEq => sel.end_ns = sel.end_ns.min(ns.saturating_add(1)),
        Operator::Eq => {
            sel.start_ns = sel.start_ns.max(ns);
            sel.end_ns = sel.end_ns.min(ns.saturating_add(1));
        }
        _ => return false,
    }
    true
}

fn column_name(e: &Expr) -> Option<&str> {
    match e {
        Expr::Column(c) => Some(c.name.as_str()),
        Expr::Cast(c) => column_name(&c.expr),
        _ => None,
    }
}

fn string_literal(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s.clone()),
        _ => None,
    }
}

/// A timestamp literal in nanoseconds, whatever its unit.
fn timestamp_ns(e: &Expr) -> Option<i64> {
    let Expr::Literal(v, _) = e else { return None };
    match v {
        ScalarValue::TimestampNanosecond(Some(x), _) => Some(*x),
        ScalarValue::TimestampMicrosecond(Some(x), _) => x.checked_mul(1_000),
        ScalarValue::TimestampMillisecond(Some(x), _) => x.checked_mul(1_000_000),
        ScalarValue::TimestampSecond(Some(x), _) => x.checked_mul(1_000_000_000),
        _ => None,
    }
}

/// One scan: the selections to read in turn and the columns to fill.
struct SeriesScan {
    ts: Arc<TimeSeries<SharedStore>>,
    meta: Arc<TableMeta>,
    selections: Vec<Selection>,
    columns: Vec<Column>,
    schema: SchemaRef,
    limit: Option<usize>,
    counters: Arc<ScanCounters>,
    newest_only: bool,
    /// Comparisons of measures with literals among the scan's filters: points that
    /// cannot pass them are not appended.
    value_filters: Arc<[ValueFilter]>,
}

/// The value of a measure column in a point (`None` for the other columns).
pub(crate) fn value_of<'p>(c: &Column, p: &'p Point) -> Option<&'p Value> {
    match (c, &p.measures) {
        (Column::Single(t), Measures::Single(v)) if v.kind() == *t => Some(v),
        (Column::Attribute(name, _), Measures::Multi(vs)) => {
            vs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
        }
        _ => None,
    }
}

impl SeriesScan {
    fn append(&self, builders: &mut [Builder], p: &Point) {
        for (c, b) in self.columns.iter().zip(builders.iter_mut()) {
            match c {
                Column::Dimension(d) => {
                    b.append_text(p.dimensions.iter().find(|(n, _)| n == d).map(|(_, v)| &**v))
                }
                Column::MeasureName => b.append_text(Some(&p.measure_name)),
                Column::Time => b.append_time(p.time_ns),
                Column::Single(_) | Column::Attribute(..) => b.append(value_of(c, p)),
            }
        }
    }

    /// The points `range` of a sealed block of one series.
    fn append_block(
        &self,
        builders: &mut [Builder],
        measure_name: &str,
        dimensions: &[DimensionPair<'static>],
        block: &BlockColumns,
        range: &Range<usize>,
    ) {
        let n = range.len();
        for (c, b) in self.columns.iter().zip(builders.iter_mut()) {
            match c {
                Column::Dimension(d) => b.append_text_n(
                    dimensions.iter().find(|(k, _)| k == d).map(|(_, v)| &**v),
                    n,
                ),
                Column::MeasureName => b.append_text_n(Some(measure_name), n),
                Column::Time => b.append_times(&block.times_ns[range.clone()]),
                Column::Single(_) | Column::Attribute(..) => match c.in_block(block) {
                    Some(bc) => b.append_column(bc, range.clone()),
                    None => b.append_nulls(n),
                },
            }
        }
    }
}

impl Producer for SeriesScan {
    fn produce(&self, sink: &Sink, queue: &Arc<SeriesQueue>) -> crate::Result<()> {
        let builders = self.columns.iter().map(Builder::new).collect();
        let mut out = Batches::new(sink, self.schema.clone(), builders);
        for selection in &self.selections {
            let selection = &*sharing(selection, queue);
            let store = self.ts.store().as_ref();
            let mut each = |chunk: Chunk| {
                let n = match &chunk {
                    Chunk::Point(p) => {
                        if !self.value_filters.iter().all(|f| f.may_pass(p)) {
                            return ControlFlow::Continue(());
                        }
                        self.append(&mut out.builders, p);
                        1
                    }
                    Chunk::Block {
                        measure_name,
                        dimensions,
                        columns,
                        range,
                    } => {
                        let b = &mut out.builders;
                        let mut n = 0;
                        for run in passing_runs(&self.value_filters, columns, range) {
                            self.append_block(b, measure_name, dimensions, columns, &run);
                            n += run.len();
                        }
                        n
                    }
                };
                if out.appended(n).is_break() || self.limit.is_some_and(|l| out.total >= l) {
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            };
            let stats = if self.newest_only {
                let (points, stats) = query::latest(store, &self.meta, selection)?;
                for p in points {
                    if each(Chunk::Point(p)).is_break() {
                        break;
                    }
                }
                stats
            } else {
                query::scan_columns(store, &self.meta, selection, &mut each)?
            };
            self.counters.add(stats.rows, stats.cells, stats.points);
            if out.stop.is_some() || self.limit.is_some_and(|l| out.total >= l) {
                break;
            }
        }
        out.finish()
    }
}

#[async_trait]
impl TableProvider for SeriesTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                let mut probe = Selection::default();
                if self.narrow(&mut probe, f)
                    || self.alternatives(f).is_some()
                    || ValueFilter::supports(f, &self.columns)
                {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (schema, columns) = match projection {
            Some(p) => (
                Arc::new(self.schema.project(p)?),
                p.iter().map(|i| self.columns[*i].clone()).collect(),
            ),
            None => (self.schema.clone(), self.columns.clone()),
        };
        // Only the projected attributes of multi-measure records are decoded.
        let project: Option<Vec<String>> = projection.map(|_| {
            columns
                .iter()
                .filter_map(|c| match c {
                    Column::Attribute(name, _) => Some(name.clone()),
                    _ => None,
                })
                .collect()
        });
        let mut selections = self.selections(filters);
        for s in &mut selections {
            s.project.clone_from(&project);
        }
        let mut value_filters = Vec::new();
        for f in filters {
            // Any comparison of a conjunction may be applied alone.
            ValueFilter::collect(f, &self.columns, &mut value_filters);
        }
        let value_filters: Arc<[ValueFilter]> = value_filters.into();
        let placement = match selections.as_slice() {
            [one] if self.small(one) => Placement::InPlace,
            _ => Placement::Blocking,
        };
        let partitions = self.partitioned(selections, state.config().target_partitions());
        let scans = partitions
            .into_iter()
            .map(|selections| SeriesScan {
                ts: self.ts.clone(),
                meta: self.meta.clone(),
                selections,
                columns: columns.clone(),
                schema: schema.clone(),
                limit,
                counters: self.counters.clone(),
                newest_only: self.newest_only,
                value_filters: value_filters.clone(),
            })
            .collect();
        scan_plan(schema, scans, limit, placement)
    }
}
