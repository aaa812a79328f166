//! A Bigtable table as GoogleSQL for Bigtable shows it: `_key` (bytes), `_timestamp`
//! (the newest cell of the row), and one column per family, a map from qualifier to
//! the latest value (`cf['qualifier']`). Aggregate int64 families map to int64 values;
//! other families hold bytes (cast them with `be_int64`, `be_float64`, `CAST(… AS
//! STRING)`).
//!
//! A scan turns DataFusion's hints into one engine read:
//! 1. filters on `_key` become row ranges ([`crate::keyrange`]): `WHERE _key = 'x'`
//!    reads one row;
//! 2. the projected families become a family filter, plus "latest cell per column";
//!    with no family projected only the first cell of each row is read, value stripped;
//! 3. LIMIT (when DataFusion passes it) becomes the read's row limit.
//!
//! The history form (`t(with_history => TRUE)`, or `bigtable_history('t')`) keeps every
//! version: each family maps a qualifier to an array of `{timestamp, value}` structs,
//! newest first, as GoogleSQL for Bigtable does.

use std::sync::Arc;

use almanac_engine::filter::RowFilter;
use almanac_engine::rowset::RowSet;
use almanac_engine::schema::{Aggregate, Granularity, TableInfo, ValueType};
use almanac_engine::{ReadRequest, Row};
use almanac_timeseries::query::SeriesQueue;
use async_trait::async_trait;
use datafusion::arrow::array::{
    Array, ArrayBuilder, ArrayRef, BinaryBuilder, Int64Builder, ListBuilder, MapBuilder,
    StructBuilder, TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;

use crate::keyrange::{KeySpace, is_key_predicate};
use crate::qualifiers::QualifierHints;
use crate::source::{BATCH_ROWS, Placement, Producer, Sink, batch, scan_plan};
use crate::stats::ScanCounters;
use crate::tables::{BigtableSources, Rows};

/// Name of the row-key column.
pub const KEY_COLUMN: &str = "_key";
/// Name of the row's newest-cell timestamp column.
pub const TIMESTAMP_COLUMN: &str = "_timestamp";

/// How a family's latest values appear in SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FamilyKind {
    Bytes,
    Int64,
}

impl FamilyKind {
    fn of(t: ValueType) -> Self {
        match t {
            ValueType::Aggregate(Aggregate::Sum | Aggregate::Min | Aggregate::Max) => Self::Int64,
            _ => Self::Bytes,
        }
    }
}

/// Which versions of each column a table reads: GoogleSQL's table arguments
/// (`t(with_history => TRUE, latest_n => 2, after => …)`, `t(as_of => …)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versions {
    /// Every version (the history form) instead of the latest per column.
    pub history: bool,
    /// History form: the newest this many versions of each column.
    pub latest_n: Option<u32>,
    /// Only cells at or after this time (microseconds).
    pub start_us: i64,
    /// Only cells before this time (microseconds); `None`: no bound.
    pub end_us: Option<i64>,
}

impl Versions {
    /// `filter` restricted to the cells of the time window.
    fn restrict(&self, filter: RowFilter) -> RowFilter {
        if self.start_us == 0 && self.end_us.is_none() {
            return filter;
        }
        RowFilter::Chain(vec![
            RowFilter::TimestampRange {
                start_us: self.start_us,
                end_us: self.end_us,
            },
            filter,
        ])
    }

    /// The same window on a table whose cell timestamps have `granularity`: on whole
    /// milliseconds, each bound moves to the millisecond boundary that keeps the same
    /// cells (the engine refuses bounds between them).
    fn for_granularity(mut self, granularity: Granularity) -> Self {
        if granularity == Granularity::Millis {
            self.start_us = crate::versions::ceil_ms(self.start_us);
            self.end_us = self.end_us.map(crate::versions::ceil_ms);
        }
        self
    }

    /// How many versions of each column a read keeps (`None`: all).
    fn per_column(&self) -> Option<u32> {
        if self.history { self.latest_n } else { Some(1) }
    }
}

/// One Bigtable table as a DataFusion table.
#[derive(Debug)]
pub struct BigtableTable {
    sources: BigtableSources,
    info: TableInfo,
    /// Which versions of each column it reads.
    versions: Versions,
    /// Every version (the history form) instead of the latest per column.
    history: bool,
    families: Vec<(String, FamilyKind)>,
    schema: SchemaRef,
    counters: Arc<ScanCounters>,
    /// Which qualifiers of each family the query reads.
    qualifiers: Arc<QualifierHints>,
}

/// The `{timestamp, value}` struct of one version in the history form.
fn version_fields(kind: FamilyKind) -> Fields {
    let value = match kind {
        FamilyKind::Bytes => DataType::Binary,
        FamilyKind::Int64 => DataType::Int64,
    };
    Fields::from(vec![
        Field::new("timestamp", timestamp_type(), false),
        Field::new("value", value, true),
    ])
}

/// A builder of history-form family maps.
fn history_builder(kind: FamilyKind) -> MapBuilder<BinaryBuilder, ListBuilder<StructBuilder>> {
    let value: Box<dyn ArrayBuilder> = match kind {
        FamilyKind::Bytes => Box::new(BinaryBuilder::new()),
        FamilyKind::Int64 => Box::new(Int64Builder::new()),
    };
    let versions = StructBuilder::new(
        version_fields(kind),
        vec![
            Box::new(TimestampMicrosecondBuilder::new().with_timezone("UTC")),
            value,
        ],
    );
    MapBuilder::new(None, BinaryBuilder::new(), ListBuilder::new(versions))
}

fn map_type(kind: FamilyKind, history: bool) -> DataType {
    if history {
        return history_builder(kind).finish().data_type().clone();
    }
    match kind {
        FamilyKind::Bytes => MapBuilder::new(None, BinaryBuilder::new(), BinaryBuilder::new())
            .finish()
            .data_type()
            .clone(),
        FamilyKind::Int64 => MapBuilder::new(None, BinaryBuilder::new(), Int64Builder::new())
            .finish()
            .data_type()
            .clone(),
    }
}

fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

impl BigtableTable {
    /// The table `info` of `sources`, counting reads into `counters`; `versions` says
    /// which versions it reads (the history form keeps several); `qualifiers` says
    /// which columns of each family the query reads.
    pub fn new(
        sources: BigtableSources,
        info: TableInfo,
        versions: Versions,
        counters: Arc<ScanCounters>,
        qualifiers: Arc<QualifierHints>,
    ) -> Self {
        let history = versions.history;
        let versions = versions.for_granularity(info.granularity);
        // In name order, as the Admin API's schema (a map) lists them: a table has the
        // same columns read from the engine and from a remote instance.
        let mut families: Vec<(String, FamilyKind)> = info
            .families
            .iter()
            .map(|(name, spec)| (name.clone(), FamilyKind::of(spec.value_type)))
            .collect();
        families.sort_by(|a, b| a.0.cmp(&b.0));
        let mut fields = vec![
            Field::new(KEY_COLUMN, DataType::Binary, false),
            Field::new(TIMESTAMP_COLUMN, timestamp_type(), true),
        ];
        for (name, kind) in &families {
            fields.push(Field::new(name, map_type(*kind, history), false));
        }
        Self {
            sources,
            info,
            versions,
            history,
            families,
            schema: Arc::new(Schema::new(fields)),
            counters,
            qualifiers,
        }
    }
}

/// What one scan reads and how it lays the rows out.
struct BigtableScan {
    sources: BigtableSources,
    instance: String,
    table: String,
    request: ReadRequest,
    /// When `request` may leave rows out (it reads some families or qualifiers only):
    /// a key-only read of the same rows, so every row appears (with empty maps).
    keys_request: Option<ReadRequest>,
    schema: SchemaRef,
    /// Output columns in order.
    columns: Vec<Column>,
    counters: Arc<ScanCounters>,
}

#[derive(Debug, Clone)]
enum Column {
    Key,
    Timestamp,
    Family(String, FamilyKind),
    History(String, FamilyKind),
}

enum Builder {
    Key(BinaryBuilder),
    Timestamp(TimestampMicrosecondBuilder),
    Bytes(String, MapBuilder<BinaryBuilder, BinaryBuilder>),
    Int64(String, MapBuilder<BinaryBuilder, Int64Builder>),
    History(
        String,
        FamilyKind,
        MapBuilder<BinaryBuilder, ListBuilder<StructBuilder>>,
    ),
}

fn arrow_error(e: datafusion::arrow::error::ArrowError) -> crate::Error {
    crate::Error::Execution(e.to_string())
}

/// Appends every version of every column of `family` to a history-form map.
fn append_history(
    b: &mut MapBuilder<BinaryBuilder, ListBuilder<StructBuilder>>,
    kind: FamilyKind,
    row: &Row,
    family: &str,
) -> crate::Result<()> {
    let mut open: Option<&[u8]> = None;
    for c in row.cells.iter().filter(|c| &*c.family == family) {
        if open != Some(&c.qualifier[..]) {
            if open.is_some() {
                b.values().append(true);
            }
            b.keys().append_value(&c.qualifier);
            open = Some(&c.qualifier[..]);
        }
        let versions = b.values().values();
        let missing =
            || crate::Error::Execution("history struct builder has the wrong shape".into());
        versions
            .field_builder::<TimestampMicrosecondBuilder>(0)
            .ok_or_else(missing)?
            .append_value(c.timestamp_us);
        match kind {
            FamilyKind::Bytes => versions
                .field_builder::<BinaryBuilder>(1)
                .ok_or_else(missing)?
                .append_value(&c.value),
            FamilyKind::Int64 => versions
                .field_builder::<Int64Builder>(1)
                .ok_or_else(missing)?
                .append_option(
                    <[u8; 8]>::try_from(c.value.as_slice())
                        .ok()
                        .map(i64::from_be_bytes),
                ),
        }
        versions.append(true);
    }
    if open.is_some() {
        b.values().append(true);
    }
    b.append(true).map_err(arrow_error)
}

impl Builder {
    fn new(c: &Column) -> Self {
        match c {
            Column::Key => Self::Key(BinaryBuilder::new()),
            Column::Timestamp => Self::Timestamp(TimestampMicrosecondBuilder::new()),
            Column::History(name, kind) => {
                Self::History(name.clone(), *kind, history_builder(*kind))
            }
            Column::Family(name, FamilyKind::Bytes) => Self::Bytes(
                name.clone(),
                MapBuilder::new(None, BinaryBuilder::new(), BinaryBuilder::new()),
            ),
            Column::Family(name, FamilyKind::Int64) => Self::Int64(
                name.clone(),
                MapBuilder::new(None, BinaryBuilder::new(), Int64Builder::new()),
            ),
        }
    }

    fn append(&mut self, row: &Row) -> crate::Result<()> {
        match self {
            Self::Key(b) => b.append_value(&row.key),
            Self::Timestamp(b) => b.append_option(row.cells.iter().map(|c| c.timestamp_us).max()),
            Self::Bytes(family, b) => {
                for c in latest_cells(row, family) {
                    b.keys().append_value(&c.qualifier);
                    b.values().append_value(&c.value);
                }
                b.append(true).map_err(arrow_error)?;
            }
            Self::History(family, kind, b) => append_history(b, *kind, row, family)?,
            Self::Int64(family, b) => {
                for c in latest_cells(row, family) {
                    b.keys().append_value(&c.qualifier);
                    let v = <[u8; 8]>::try_from(c.value.as_slice())
                        .ok()
                        .map(i64::from_be_bytes);
                    b.values().append_option(v);
                }
                b.append(true).map_err(arrow_error)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Key(b) => Arc::new(b.finish()),
            Self::Timestamp(b) => Arc::new(b.finish().with_timezone("UTC")),
            Self::Bytes(_, b) => Arc::new(b.finish()),
            Self::Int64(_, b) => Arc::new(b.finish()),
            Self::History(_, _, b) => Arc::new(b.finish()),
        }
    }
}

/// The newest cell of each column of `family` (cells come newest first per column).
fn latest_cells<'r>(
    row: &'r Row,
    family: &'r str,
) -> impl Iterator<Item = &'r almanac_engine::Cell> {
    let mut last: Option<&[u8]> = None;
    row.cells.iter().filter(move |c| {
        if &*c.family != family || last == Some(&c.qualifier[..]) {
            return false;
        }
        last = Some(&c.qualifier[..]);
        true
    })
}

impl Producer for BigtableScan {
    fn produce(&self, sink: &Sink, _queue: &Arc<SeriesQueue>) -> crate::Result<()> {
        let data = self
            .sources
            .read(&self.instance, &self.table, self.request.clone())?;
        let keys = match &self.keys_request {
            Some(r) => Some(self.sources.read(&self.instance, &self.table, r.clone())?),
            None => None,
        };
        let mut stream = Merged {
            data,
            keys,
            pending: None,
        };
        let mut builders: Vec<Builder> = self.columns.iter().map(Builder::new).collect();
        let mut rows = 0usize;
        let flush = |builders: &mut Vec<Builder>, rows: usize| -> crate::Result<bool> {
            let arrays: Vec<ArrayRef> = builders.iter_mut().map(Builder::finish).collect();
            let batch = batch(&self.schema, arrays, rows)?;
            Ok(sink.send(batch))
        };
        for row in stream.by_ref() {
            let row = row?;
            for b in &mut builders {
                b.append(&row)?;
            }
            rows += 1;
            if rows == BATCH_ROWS {
                if !flush(&mut builders, rows)? {
                    break;
                }
                rows = 0;
            }
        }
        // Counted before the last batch goes: once a consumer holds every row (a
        // LIMIT met), the query may end and report its counters at once.
        let (rows_read, cells_read, rows_out) = stream.stats();
        self.counters.add(rows_read, cells_read, rows_out);
        if rows > 0 {
            flush(&mut builders, rows)?;
        }
        Ok(())
    }
}

/// Every row of a data read, in key order: rows the data read left out (no cell in
/// the projected families or qualifiers) come from the key-only read, without cells.
struct Merged {
    data: Rows,
    keys: Option<Rows>,
    pending: Option<Row>,
}

impl Merged {
    /// Rows and cells read from storage, and rows produced.
    fn stats(&self) -> (u64, u64, u64) {
        let d = self.data.stats();
        match &self.keys {
            Some(k) => {
                let k = k.stats();
                (
                    k.rows_returned,
                    d.cells_loaded + k.cells_loaded,
                    k.rows_returned,
                )
            }
            None => (d.rows_returned, d.cells_loaded, d.rows_returned),
        }
    }
}

impl Iterator for Merged {
    type Item = almanac_engine::Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        let Some(keys) = self.keys.as_mut() else {
            return self.data.next();
        };
        let key = match keys.next()? {
            Ok(row) => row.key,
            Err(e) => return Some(Err(e)),
        };
        loop {
            if self.pending.is_none() {
                self.pending = match self.data.next() {
                    Some(Ok(row)) => Some(row),
                    Some(Err(e)) => return Some(Err(e)),
                    None => None,
                };
            }
            match self.pending.take() {
                // Each read has its own snapshot: a data row the key read did not see
                // was written in between; leave it out, as the key read did.
                Some(row) if row.key < key => continue,
                Some(row) if row.key == key => return Some(Ok(row)),
                other => {
                    self.pending = other;
                    return Some(Ok(Row {
                        key,
                        cells: Vec::new(),
                    }));
                }
            }
        }
    }
}

/// The read filter for the projected columns of a table with `all_families` families,
/// and whether it keeps every row (else a key-only read must supply the rest).
fn projection_filter(
    columns: &[Column],
    all_families: usize,
    per_column: Option<u32>,
    qualifiers_of: &dyn Fn(&str) -> Option<std::collections::BTreeSet<Vec<u8>>>,
) -> (Option<RowFilter>, bool) {
    let families: Vec<&str> = columns
        .iter()
        .filter_map(|c| match c {
            Column::Family(name, _) | Column::History(name, _) => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let wants_time = columns.iter().any(|c| matches!(c, Column::Timestamp));
    if families.is_empty() {
        return (
            Some(if wants_time {
                RowFilter::Chain(vec![
                    RowFilter::CellsPerColumnLimit(1),
                    RowFilter::StripValue,
                ])
            } else {
                RowFilter::Chain(vec![RowFilter::CellsPerRowLimit(1), RowFilter::StripValue])
            }),
            true,
        );
    }
    let latest = per_column.map_or(RowFilter::PassAll, RowFilter::CellsPerColumnLimit);
    if wants_time {
        // The timestamp looks at every family.
        return (Some(latest), true);
    }
    let mut complete = families.len() == all_families;
    let mut any: Vec<RowFilter> = Vec::new();
    for f in &families {
        match qualifiers_of(f) {
            Some(qualifiers) => {
                complete = false;
                any.extend(qualifiers.into_iter().map(|q| RowFilter::ColumnRange {
                    family: (*f).to_string(),
                    start: std::ops::Bound::Included(q.clone()),
                    end: std::ops::Bound::Included(q),
                }));
            }
            None => any.push(RowFilter::FamilyNameRegex(regex_escape(f))),
        }
    }
    let only = if any.len() == 1 {
        any.into_iter().next().unwrap_or(RowFilter::PassAll)
    } else {
        RowFilter::Interleave(any)
    };
    (Some(RowFilter::Chain(vec![only, latest])), complete)
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if !ch.is_ascii_alphanumeric() && ch != '_' {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[async_trait]
impl TableProvider for BigtableTable {
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
                if is_key_predicate(KEY_COLUMN, f) {
                    TableProviderFilterPushDown::Inexact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        let keys = KeySpace::from_filters(KEY_COLUMN, filters);
        if keys.is_empty() {
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        let columns: Vec<Column> = schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                KEY_COLUMN => Column::Key,
                TIMESTAMP_COLUMN => Column::Timestamp,
                name => {
                    let kind = self
                        .families
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(FamilyKind::Bytes, |(_, k)| *k);
                    if self.history {
                        Column::History(name.to_string(), kind)
                    } else {
                        Column::Family(name.to_string(), kind)
                    }
                }
            })
            .collect();
        let rows = RowSet {
            keys: Vec::new(),
            ranges: keys.ranges.unwrap_or_default(),
        };
        let hints = |family: &str| self.qualifiers.qualifiers(family);
        let (filter, complete) = projection_filter(
            &columns,
            self.families.len(),
            self.versions.per_column(),
            &hints,
        );
        let filter = filter.map(|f| self.versions.restrict(f));
        // A row is there when it has a cell in the window.
        let keys_request = (!complete).then(|| ReadRequest {
            rows: rows.clone(),
            filter: Some(self.versions.restrict(RowFilter::Chain(vec![
                RowFilter::CellsPerRowLimit(1),
                RowFilter::StripValue,
            ]))),
            limit: limit.map(|l| l as u64),
            reversed: false,
        });
        let request = ReadRequest {
            rows,
            filter,
            limit: limit.map(|l| l as u64),
            reversed: false,
        };
        let scan = BigtableScan {
            sources: self.sources.clone(),
            instance: self.info.instance.clone(),
            table: self.info.name.clone(),
            request,
            keys_request,
            schema: schema.clone(),
            columns,
            counters: self.counters.clone(),
        };
        scan_plan(schema, vec![scan], limit, Placement::Blocking)
    }
}
