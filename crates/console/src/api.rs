//! The JSON the console draws (docs/console.md), and `/metrics`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use almanac_engine::access::{AccessMetric, HeatmapRequest};
use almanac_engine::schema::{GcRule, ValueType};
use almanac_sql::Scope;
use almanac_sql::arrow::array::{Array, ArrayRef, AsArray};
use almanac_sql::arrow::compute::cast;
use almanac_sql::arrow::datatypes::{DataType, Float64Type, Int64Type};
use almanac_sql::arrow::util::display::{ArrayFormatter, FormatOptions};
use almanac_timeseries::DEFAULT_INSTANCE;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::{Console, Error, Result, keys};

/// Most rows `/api/sql` returns.
pub const MAX_SQL_ROWS: usize = 10_000;
/// Key ranges `/api/keyvis` draws unless told otherwise.
pub const DEFAULT_KEYVIS_ROWS: usize = 100;
/// Window `/api/keyvis` draws unless told otherwise: the last hour.
pub const DEFAULT_KEYVIS_WINDOW_MS: i64 = 3600 * 1000;

/// Runs `f` on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

/// `/metrics`.
pub async fn metrics(State(c): State<Arc<Console>>) -> Response {
    let text = c.metrics.render(&c.engine, &c.sql.load());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `/api/stats`.
pub async fn stats(State(c): State<Arc<Console>>) -> Result<Json<Value>> {
    let console = Arc::clone(&c);
    let (s, text) = blocking(move || {
        let s = crate::metrics::StorageSnapshot::of(&console.engine);
        Ok((s, console.metrics.rendered()))
    })
    .await?;
    let sum = |name: &str| crate::metrics::sum_of(&text, name);
    Ok(Json(json!({
        "time_ms": c.engine.now_us() / 1000,
        "requests": sum("almanac_grpc_requests_total") + sum("almanac_timestream_requests_total"),
        "errors": sum("almanac_grpc_errors_total") + sum("almanac_timestream_errors_total"),
        "rows_read": s.rows_read,
        "rows_written": s.rows_written,
        "bytes_read": s.bytes_read,
        "bytes_written": s.bytes_written,
        "points_ingested": sum("almanac_points_ingested_total"),
        "points_rejected": sum("almanac_points_rejected_total"),
        "memtable_bytes": s.memtable_bytes,
        "disk_bytes": s.disk_bytes,
        "journal_bytes": s.journal_bytes,
        "open_connections": sum("almanac_open_connections"),
    })))
}

/// A GC rule as the console writes it: `max_versions(1)`, `max_age(7d)`,
/// `union(…)`, `intersection(…)`, `none`.
pub fn gc_rule_text(rule: &GcRule) -> String {
    let list = |rules: &[GcRule]| {
        rules
            .iter()
            .map(gc_rule_text)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match rule {
        GcRule::KeepAll => "none".into(),
        GcRule::MaxVersions(n) => format!("max_versions({n})"),
        GcRule::MaxAge { max_age_us } => format!("max_age({})", age_text(*max_age_us)),
        GcRule::Intersection(r) => format!("intersection({})", list(r)),
        GcRule::Union(r) => format!("union({})", list(r)),
    }
}

fn age_text(us: i64) -> String {
    let s = us / 1_000_000;
    for (unit, secs) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s > 0 && s % secs == 0 {
            return format!("{}{unit}", s / secs);
        }
    }
    if us % 1_000_000 == 0 {
        format!("{s}s")
    } else {
        format!("{us}us")
    }
}

fn value_type_text(v: &ValueType) -> String {
    match v {
        ValueType::Bytes => "bytes".into(),
        ValueType::Aggregate(a) => format!("{a:?}").to_lowercase(),
    }
}

/// `/api/overview`.
pub async fn overview(State(c): State<Arc<Console>>) -> Result<Json<Value>> {
    let console = Arc::clone(&c);
    let body = blocking(move || overview_json(&console)).await?;
    Ok(Json(body))
}

fn overview_json(c: &Console) -> Result<Value> {
    let mut instances = Vec::new();
    for instance in c.engine.list_instances()? {
        if instance == DEFAULT_INSTANCE {
            continue;
        }
        let mut tables = Vec::new();
        for t in c.engine.list_tables(&instance)? {
            if t.name.starts_with('_') {
                continue;
            }
            let families: Vec<Value> = t
                .families
                .iter()
                .map(|(name, spec)| {
                    json!({
                        "name": name,
                        "gc_rule": gc_rule_text(&spec.gc_rule),
                        "value_type": value_type_text(&spec.value_type),
                    })
                })
                .collect();
            tables.push(json!({
                "name": t.name,
                "deletion_protection": t.deletion_protection,
                "change_stream": t.change_retention_us.is_some(),
                "families": families,
            }));
        }
        instances.push(json!({ "name": instance, "tables": tables }));
    }
    let mut databases: Vec<Value> = Vec::new();
    for db in c.ts.list_databases(None, usize::MAX)? {
        let tables: Vec<Value> =
            c.ts.list_tables(Some(&db.name), None, usize::MAX)?
                .iter()
                .map(|t| ts_table_json(t))
                .collect();
        databases.push(json!({ "database": db.name, "tables": tables }));
    }
    Ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "data_dir": c.data_dir.display().to_string(),
        "instances": instances,
        "timeseries": databases,
    }))
}

fn ts_table_json(t: &almanac_timeseries::TableMeta) -> Value {
    let partition: Vec<Value> = t
        .partition_key
        .as_ref()
        .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
        .into_iter()
        .collect();
    let measures: Vec<Value> =
        t.schema
            .measures
            .iter()
            .map(|(name, ty)| json!({ "name": name, "type": ty.as_str() }))
            .chain(
                t.schema.attributes.iter().map(
                    |(name, ty)| json!({ "name": name, "type": ty.as_str(), "attribute": true }),
                ),
            )
            .collect();
    let layout = &t.layout;
    json!({
        "name": t.name,
        "storage": { "instance": DEFAULT_INSTANCE, "table": t.store_table },
        "memory_hours": t.retention.memory_hours,
        "magnetic_days": t.retention.magnetic_days,
        "magnetic_writes": t.magnetic_writes.enabled,
        "layout": format!(
            "{}, {} s buckets{}{}",
            layout.pattern.as_str(),
            layout.bucket_secs,
            if layout.reverse_time { ", newest first" } else { "" },
            if layout.seal { ", closed buckets sealed" } else { "" },
        ),
        "partition_key": partition,
        "dimensions": t.schema.dimensions,
        "measures": measures,
    })
}

/// `/api/sql`'s body.
#[derive(Debug, serde::Deserialize)]
pub struct SqlRequest {
    sql: String,
    #[serde(default)]
    instance: Option<String>,
}

/// `/api/sql`.
pub async fn sql(
    State(c): State<Arc<Console>>,
    axum::Extension(visitor): axum::Extension<crate::Visitor>,
    Json(req): Json<SqlRequest>,
) -> Result<Json<Value>> {
    let started = Instant::now();
    let scope = Scope {
        access: visitor.tables,
        ..Scope::instance(req.instance.unwrap_or_else(|| c.default_instance.clone()))
    };
    let prepared = c.sql.prepare(&req.sql, &scope, None).await?;
    let schema = prepared.schema.clone();
    let (mut stream, _) = prepared.stream().await?;
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut truncated = false;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(almanac_sql::Error::from)?;
        for row in batch_rows(batch.columns())? {
            if rows.len() == MAX_SQL_ROWS {
                truncated = true;
                break;
            }
            rows.push(row);
        }
        if truncated {
            break;
        }
    }
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| json!({ "name": f.name(), "type": column_kind(f.data_type()) }))
        .collect();
    Ok(Json(json!({
        "columns": columns,
        "rows": rows,
        "truncated": truncated,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
    })))
}

fn column_kind(t: &DataType) -> &'static str {
    match t {
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => "timestamp",
        DataType::Boolean => "boolean",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        t if t.is_numeric() => "number",
        _ => "other",
    }
}

/// Rows of a batch as JSON values: numbers as numbers (NaN and infinities as text),
/// timestamps in Timestream's form, everything else as Arrow displays it.
fn batch_rows(columns: &[ArrayRef]) -> Result<Vec<Vec<Value>>> {
    let n = columns.first().map_or(0, |c| c.len());
    let options = FormatOptions::default()
        .with_null("NULL")
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.9f"));
    let mut cells: Vec<Vec<Value>> = vec![Vec::with_capacity(columns.len()); n];
    for col in columns {
        let kind = column_kind(col.data_type());
        if col.data_type().is_integer() {
            let i = cast(col, &DataType::Int64).map_err(|e| Error::Request(e.to_string()))?;
            let i = i.as_primitive::<Int64Type>();
            for (r, row) in cells.iter_mut().enumerate() {
                row.push(if i.is_null(r) {
                    Value::Null
                } else {
                    Value::from(i.value(r))
                });
            }
            continue;
        }
        if kind == "number" {
            let f = cast(col, &DataType::Float64).map_err(|e| Error::Request(e.to_string()))?;
            let f = f.as_primitive::<Float64Type>();
            for (i, row) in cells.iter_mut().enumerate() {
                row.push(if f.is_null(i) {
                    Value::Null
                } else {
                    let v = f.value(i);
                    serde_json::Number::from_f64(v)
                        .map_or_else(|| Value::from(v.to_string()), Value::Number)
                });
            }
            continue;
        }
        let fmt = ArrayFormatter::try_new(col.as_ref(), &options)
            .map_err(|e| Error::Request(e.to_string()))?;
        for (i, row) in cells.iter_mut().enumerate() {
            row.push(if col.is_null(i) {
                Value::Null
            } else if kind == "boolean" {
                Value::Bool(col.as_boolean().value(i))
            } else {
                Value::from(fmt.value(i).to_string())
            });
        }
    }
    Ok(cells)
}

/// Parameters naming a table: a Bigtable table of an instance, or a time-series table.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct TableParams {
    instance: Option<String>,
    table: Option<String>,
    database: Option<String>,
    ts_table: Option<String>,
}

/// The table a request names.
#[derive(Debug, Clone)]
pub enum TableRef {
    /// A Bigtable table.
    Bigtable {
        /// `projects/p/instances/i`.
        instance: String,
        /// Table id.
        table: String,
    },
    /// A time-series table.
    Series {
        /// Database.
        database: String,
        /// Table.
        table: String,
    },
}

impl TableRef {
    /// The table a request's query parameters name ([`TableRef::from_params`]).
    pub fn from_query(q: &HashMap<String, String>, default_instance: &str) -> Result<Self> {
        let params: TableParams = serde_json::from_value(json!(q))
            .map_err(|e| Error::Request(format!("parameters: {e}")))?;
        Self::from_params(&params, default_instance)
    }

    /// Reads `instance`+`table` or `database`+`ts_table`; a bare `table` is in the
    /// default instance.
    pub fn from_params(p: &TableParams, default_instance: &str) -> Result<Self> {
        match (&p.database, &p.ts_table, &p.table) {
            (Some(d), Some(t), _) => Ok(Self::Series {
                database: d.clone(),
                table: t.clone(),
            }),
            (None, None, Some(t)) => Ok(Self::Bigtable {
                instance: p
                    .instance
                    .clone()
                    .unwrap_or_else(|| default_instance.to_owned()),
                table: t.clone(),
            }),
            _ => Err(Error::Request(
                "name a table: instance and table, or database and ts_table".into(),
            )),
        }
    }

    /// The engine table holding it: `(instance, table)`.
    pub fn storage(&self, c: &Console) -> Result<(String, String)> {
        match self {
            Self::Bigtable { instance, table } => Ok((instance.clone(), table.clone())),
            Self::Series { database, table } => {
                let meta = c.ts.describe_table(database, table)?;
                Ok((DEFAULT_INSTANCE.to_owned(), meta.store_table.clone()))
            }
        }
    }

    /// How the console names it.
    pub fn label(&self) -> String {
        match self {
            Self::Bigtable { instance, table } => format!("{instance}/tables/{table}"),
            Self::Series { database, table } => format!("{database}.{table}"),
        }
    }
}

/// `/api/keyvis`.
pub async fn keyvis(
    State(c): State<Arc<Console>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>> {
    let table = TableRef::from_query(&q, &c.default_instance)?;
    let metric = AccessMetric::parse(q.get("metric").map_or("writes", String::as_str))?;
    let int = |name: &str| -> Result<Option<i64>> {
        q.get(name)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| Error::Request(format!("{name} must be an integer, not {v:?}")))
            })
            .transpose()
    };
    let to_ms = int("to")?.unwrap_or_else(|| c.engine.now_us() / 1000);
    let from_ms = match int("from")? {
        Some(v) => v,
        None => to_ms.saturating_sub(DEFAULT_KEYVIS_WINDOW_MS),
    };
    let rows = match int("rows")? {
        Some(n) => usize::try_from(n)
            .map_err(|_| Error::Request(format!("rows must be positive, not {n}")))?,
        None => DEFAULT_KEYVIS_ROWS,
    };
    let key = |name: &str| -> Result<Vec<u8>> {
        q.get(name)
            .map_or(Ok(Vec::new()), |v| keys::from_b64(v, name))
    };
    let req = HeatmapRequest {
        metric,
        from_ms,
        to_ms,
        lo: key("lo")?,
        hi: key("hi")?,
        rows,
    };
    let console = Arc::clone(&c);
    let body = blocking(move || {
        let (instance, storage) = table.storage(&console)?;
        let h = console.engine.heatmap(&instance, &storage, &req)?;
        let ranges: Vec<Value> = h
            .ranges
            .iter()
            .map(|(s, e)| {
                json!({
                    "start": keys::display(s),
                    "end": keys::display(e),
                    "start_b64": keys::b64(s),
                    "end_b64": keys::b64(e),
                    "prefix": keys::display(if e.is_empty() { s } else { keys::common_prefix(s, e) }),
                })
            })
            .collect();
        Ok(json!({
            "table": table.label(),
            "metric": metric.name(),
            "metrics": AccessMetric::ALL.iter().map(|m| m.name()).collect::<Vec<_>>(),
            "step_ms": h.column_ms,
            "times": h.times,
            "ranges": ranges,
            "values": h.values,
            "max": h.max,
            "total": h.total,
        }))
    })
    .await?;
    Ok(Json(body))
}
