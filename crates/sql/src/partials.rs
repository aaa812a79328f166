//! Partial aggregates of a time-series table, one row per sealed bucket: what
//! [`crate::bucket_aggregates`] reads instead of the points when an aggregate's groups
//! are whole buckets.
//!
//! A row is a sealed bucket's points inside the selection (the bucket's stored
//! summary when all of them are, else a summary of the decoded part inside the time
//! window: record count, first and last time, and per measure column the count, sum,
//! minimum and maximum of its values), or one row-form point (the same columns over
//! that one point). The key columns are those of the flat model: the dimensions,
//! `measure_name`, and `time` (the first summarized point's time, so a time filter
//! that holds for every summarized point holds for the row, and a bin of whole buckets
//! puts it where its points belong).

use std::sync::Arc;

use almanac_timeseries::block::{BlockSummary, Stats};
use almanac_timeseries::model::{DimensionPair, MeasureType, Value};
use almanac_timeseries::query::{Piece, Selection, SeriesQueue, scan_partials};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use crate::builder::Builder;
use crate::series::{Column, SeriesTable, arrow_type, value_of};
use crate::source::{Batches, Placement, Producer, Sink, scan_plan, sharing};

/// One partial-aggregate column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Partial {
    /// Records in the row (a bucket's points, or 1).
    Records,
    /// Time of the row's first record.
    MinTime,
    /// Time of the row's last record.
    MaxTime,
    /// Values of a measure column (non-null ones).
    Count(Column),
    /// Sum of a DOUBLE or BIGINT column's values; null when there are none.
    Sum(Column),
    /// Smallest value; null when there are none.
    Min(Column),
    /// Largest value; null when there are none.
    Max(Column),
}

impl Partial {
    /// The column's name (the rule steps aside for a table with a dimension of that
    /// name).
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Records => "#records".into(),
            Self::MinTime => "#min(time)".into(),
            Self::MaxTime => "#max(time)".into(),
            Self::Count(c) => format!("#count({})", c.name()),
            Self::Sum(c) => format!("#sum({})", c.name()),
            Self::Min(c) => format!("#min({})", c.name()),
            Self::Max(c) => format!("#max({})", c.name()),
        }
    }

    fn kind(&self) -> MeasureType {
        match self {
            Self::Records | Self::Count(_) => MeasureType::Bigint,
            Self::MinTime | Self::MaxTime => MeasureType::Timestamp,
            Self::Sum(c) | Self::Min(c) | Self::Max(c) => measure_kind(c),
        }
    }

    fn field(&self) -> Field {
        let nullable = matches!(self, Self::Sum(_) | Self::Min(_) | Self::Max(_));
        Field::new(self.name(), arrow_type(self.kind()), nullable)
    }

    /// Its value over a bucket.
    fn of_bucket(&self, s: &BlockSummary) -> Option<Value> {
        let column = |c: &Column| match c {
            Column::Single(t) => s.column("", *t),
            Column::Attribute(n, t) => s.column(n, *t),
            _ => None,
        };
        let stat = |c: &Column, pick: fn(Stats) -> Value| column(c).and_then(|c| c.stats).map(pick);
        match self {
            Self::Records => Some(Value::Bigint(s.points as i64)),
            Self::MinTime => Some(Value::Timestamp(s.first_ns)),
            Self::MaxTime => Some(Value::Timestamp(s.last_ns)),
            Self::Count(c) => Some(Value::Bigint(column(c).map_or(0, |c| c.count as i64))),
            Self::Sum(c) => stat(c, |s| match s {
                Stats::Double { sum, .. } => Value::Double(sum),
                Stats::Bigint { sum, .. } => Value::Bigint(sum),
            }),
            Self::Min(c) => stat(c, |s| match s {
                Stats::Double { min, .. } => Value::Double(min),
                Stats::Bigint { min, .. } => Value::Bigint(min),
            }),
            Self::Max(c) => stat(c, |s| match s {
                Stats::Double { max, .. } => Value::Double(max),
                Stats::Bigint { max, .. } => Value::Bigint(max),
            }),
        }
    }

    /// Its value over one point.
    fn of_point(&self, p: &almanac_timeseries::Point) -> Option<Value> {
        match self {
            Self::Records => Some(Value::Bigint(1)),
            Self::MinTime | Self::MaxTime => Some(Value::Timestamp(p.time_ns)),
            Self::Count(c) => Some(Value::Bigint(i64::from(value_of(c, p).is_some()))),
            Self::Sum(c) | Self::Min(c) | Self::Max(c) => value_of(c, p).cloned(),
        }
    }
}

/// The value type of a measure column.
pub(crate) fn measure_kind(c: &Column) -> MeasureType {
    match c {
        Column::Single(t) | Column::Attribute(_, t) => *t,
        Column::Time => MeasureType::Timestamp,
        Column::Dimension(_) | Column::MeasureName => MeasureType::Varchar,
    }
}

/// A time-series table's partial aggregates as a DataFusion table.
#[derive(Debug)]
pub(crate) struct PartialsTable {
    base: SeriesTable,
    /// Dimensions, `measure_name` and `time`, then one column per partial.
    keys: Vec<Column>,
    partials: Vec<Partial>,
    schema: SchemaRef,
}

impl PartialsTable {
    /// The table the partials are read from.
    pub(crate) fn base(&self) -> &SeriesTable {
        &self.base
    }

    /// The partial aggregates, in column order after the keys.
    pub(crate) fn partials(&self) -> &[Partial] {
        &self.partials
    }

    /// The partials of `base`'s table; the key columns are always all there.
    pub(crate) fn new(base: SeriesTable, partials: Vec<Partial>) -> Self {
        let meta = base.meta().clone();
        let mut keys: Vec<Column> = meta
            .schema
            .dimensions
            .iter()
            .cloned()
            .map(Column::Dimension)
            .collect();
        keys.push(Column::MeasureName);
        keys.push(Column::Time);
        let fields: Vec<Field> = keys
            .iter()
            .map(Column::field)
            .chain(partials.iter().map(Partial::field))
            .collect();
        Self {
            base,
            keys,
            partials,
            schema: Arc::new(Schema::new(fields)),
        }
    }
}

/// One output column of a scan.
#[derive(Debug, Clone)]
enum Output {
    Key(Column),
    Partial(Partial),
}

struct PartialsScan {
    base: SeriesTable,
    selections: Vec<Selection>,
    outputs: Vec<Output>,
    schema: SchemaRef,
}

impl PartialsScan {
    fn append(&self, builders: &mut [Builder], piece: &Piece) {
        for (o, b) in self.outputs.iter().zip(builders.iter_mut()) {
            match (o, piece) {
                (Output::Key(Column::Dimension(d)), Piece::Bucket { dimensions, .. }) => {
                    b.append_text(dimension(dimensions, d))
                }
                (Output::Key(Column::Dimension(d)), Piece::Point(p)) => {
                    b.append_text(dimension(&p.dimensions, d))
                }
                (Output::Key(Column::MeasureName), Piece::Bucket { measure_name, .. }) => {
                    b.append_text(Some(&**measure_name))
                }
                (Output::Key(Column::MeasureName), Piece::Point(p)) => {
                    b.append_text(Some(&p.measure_name))
                }
                (Output::Key(Column::Time), Piece::Bucket { summary, .. }) => {
                    b.append_time(summary.first_ns)
                }
                (Output::Key(Column::Time), Piece::Point(p)) => b.append_time(p.time_ns),
                (Output::Key(_), _) => b.append(None),
                (Output::Partial(x), Piece::Bucket { summary, .. }) => {
                    b.append(x.of_bucket(summary).as_ref())
                }
                (Output::Partial(x), Piece::Point(p)) => b.append(x.of_point(p).as_ref()),
            }
        }
    }
}

/// The value of dimension `name` among a series' dimensions.
fn dimension<'a>(dimensions: &'a [DimensionPair<'static>], name: &str) -> Option<&'a str> {
    dimensions
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| &**v)
}

impl Producer for PartialsScan {
    fn produce(&self, sink: &Sink, queue: &Arc<SeriesQueue>) -> crate::Result<()> {
        let builders = self
            .outputs
            .iter()
            .map(|o| match o {
                Output::Key(c) => Builder::new(c),
                Output::Partial(p) => Builder::of(p.kind()),
            })
            .collect();
        let mut out = Batches::new(sink, self.schema.clone(), builders);
        for selection in &self.selections {
            let stats = scan_partials(
                self.base.service().store().as_ref(),
                self.base.meta(),
                &sharing(selection, queue),
                &mut |piece| {
                    self.append(&mut out.builders, &piece);
                    out.appended(1)
                },
            )?;
            self.base
                .counters()
                .add(stats.rows, stats.cells, stats.points);
            if out.stop.is_some() {
                break;
            }
        }
        out.finish()
    }
}

#[async_trait]
impl TableProvider for PartialsTable {
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
        self.base.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let all: Vec<Output> = self
            .keys
            .iter()
            .cloned()
            .map(Output::Key)
            .chain(self.partials.iter().cloned().map(Output::Partial))
            .collect();
        let (schema, outputs) = match projection {
            Some(p) => (
                Arc::new(self.schema.project(p)?),
                p.iter().filter_map(|i| all.get(*i).cloned()).collect(),
            ),
            None => (self.schema.clone(), all),
        };
        // Points outside whole buckets decode only the measures the partials read.
        let project: Vec<String> = self
            .partials
            .iter()
            .filter_map(|p| match p {
                Partial::Count(Column::Attribute(n, _))
                | Partial::Sum(Column::Attribute(n, _))
                | Partial::Min(Column::Attribute(n, _))
                | Partial::Max(Column::Attribute(n, _)) => Some(n.clone()),
                _ => None,
            })
            .collect();
        let mut selections = self.base.selections(filters);
        for s in &mut selections {
            s.project = Some(project.clone());
        }
        let partitions = self
            .base
            .partitioned(selections, state.config().target_partitions());
        let scans = partitions
            .into_iter()
            .map(|selections| PartialsScan {
                base: self.base.clone(),
                selections,
                outputs: outputs.clone(),
                schema: schema.clone(),
            })
            .collect();
        scan_plan(schema, scans, None, Placement::Blocking)
    }
}
