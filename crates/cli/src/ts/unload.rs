//! What Timestream's UNLOAD leaves in a directory, read for `almanac ts import`: the
//! data files (from the manifest, else found under `results/`), the columns and
//! types (from the metadata file), the partition folders, and the mapping inferred
//! from them (see [`super::import`] for the rules).

use std::path::{Path, PathBuf};

use almanac_jobs::mapping::{AttributeSpec, DimensionSpec, MeasuresSpec, MixedSpec, Spec};
use almanac_timeseries::MeasureType;
use anyhow::{Context, bail};
use serde_json::Value as Json;

use super::import::ImportArgs;

/// A column: its name and Timestream type name (`VARCHAR`, `TIMESTAMP`, …; `ARRAY`,
/// `ROW` or `TIMESERIES` for the complex ones).
pub type Column = (String, String);

fn scalar(t: &str) -> Option<MeasureType> {
    match t {
        "VARCHAR" => Some(MeasureType::Varchar),
        "BIGINT" | "INTEGER" => Some(MeasureType::Bigint),
        "DOUBLE" => Some(MeasureType::Double),
        "BOOLEAN" => Some(MeasureType::Boolean),
        "TIMESTAMP" => Some(MeasureType::Timestamp),
        _ => None,
    }
}

/// The columns of a metadata file's `ColumnInfo`.
pub fn metadata_columns(meta: &Json) -> anyhow::Result<Vec<Column>> {
    let infos = meta["ColumnInfo"]
        .as_array()
        .context("the metadata file has no ColumnInfo")?;
    Ok(infos
        .iter()
        .map(|c| {
            let name = c["Name"].as_str().unwrap_or_default().to_string();
            let t = &c["Type"];
            let kind = match t["ScalarType"].as_str() {
                Some(s) => s.to_string(),
                None if t.get("TimeSeriesMeasureValueColumnInfo").is_some() => "TIMESERIES".into(),
                None if t.get("ArrayColumnInfo").is_some() => "ARRAY".into(),
                None => "ROW".into(),
            };
            (name, kind)
        })
        .collect())
}

/// The file named `*suffix` directly in `dir`, if any.
pub fn named(dir: &Path, suffix: &str) -> anyhow::Result<Option<PathBuf>> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(suffix))
        {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

fn data_file(p: &Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("csv" | "gz" | "parquet")
    )
}

/// The data files, relative to `dir`, in order.
pub fn files(dir: &Path) -> anyhow::Result<Vec<String>> {
    if let Some(manifest) = named(dir, "_manifest.json")? {
        let m: Json = serde_json::from_slice(&std::fs::read(&manifest)?)
            .with_context(|| format!("reading {}", manifest.display()))?;
        let mut out = Vec::new();
        for f in m["result_files"].as_array().into_iter().flatten() {
            let url = f["url"].as_str().unwrap_or_default();
            let Some(at) = url.find("results/") else {
                bail!(
                    "{}: the file {url} is not under results/",
                    manifest.display()
                );
            };
            out.push(url[at..].to_string());
        }
        return Ok(out);
    }
    let root = if dir.join("results").is_dir() {
        dir.join("results")
    } else {
        dir.to_path_buf()
    };
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if data_file(&p) {
                out.push(p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no .csv, .gz or .parquet file under {}", dir.display());
    }
    Ok(out)
}

/// The `col=value` folders of a file's path.
pub fn partitions(file: &str) -> Vec<(String, String)> {
    let mut parts: Vec<&str> = file.split('/').collect();
    parts.pop();
    parts
        .into_iter()
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The mapping of `columns` under `args` (see the module docs), and notes on the
/// columns left out.
pub fn spec(args: &ImportArgs, columns: &[Column]) -> anyhow::Result<(Spec, Vec<String>)> {
    let has = |n: &str| columns.iter().any(|(c, _)| c == n);
    if !has(&args.time_column) {
        bail!(
            "there is no time column {:?} (columns: {}); name it with --time-column",
            args.time_column,
            columns
                .iter()
                .map(|c| c.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let name_column = match &args.measure_name_column {
        Some(c) if !has(c) => bail!("there is no measure name column {c:?}"),
        Some(c) => Some(c.clone()),
        None => has("measure_name").then(|| "measure_name".to_string()),
    };
    if name_column.is_none() && args.measure_name.is_none() {
        bail!("no column holds the measure name: give --measure-name or --measure-name-column");
    }
    let dimensions: Vec<String> = if args.dimensions.is_empty() {
        columns
            .iter()
            .filter(|(c, t)| {
                t == "VARCHAR"
                    && Some(c) != name_column.as_ref()
                    && *c != args.time_column
                    && !c.starts_with("measure_value::")
            })
            .map(|(c, _)| c.clone())
            .collect()
    } else {
        for d in &args.dimensions {
            if !has(d) {
                bail!("there is no dimension column {d:?}");
            }
        }
        args.dimensions.clone()
    };
    let mut notes = Vec::new();
    let mut singles = Vec::new();
    let mut attributes = Vec::new();
    for (c, t) in columns {
        if *c == args.time_column || Some(c) == name_column.as_ref() || dimensions.contains(c) {
            continue;
        }
        let Some(kind) = scalar(t) else {
            notes.push(format!(
                "column {c} ({t}) is left out: only scalar values are measures"
            ));
            continue;
        };
        if let Some(suffix) = c.strip_prefix("measure_value::") {
            let kind = MeasureType::parse(&suffix.to_ascii_uppercase()).unwrap_or(kind);
            singles.push(MixedSpec {
                when: None,
                name: args.measure_name.clone(),
                column: Some(c.clone()),
                kind,
                attributes: Vec::new(),
            });
        } else {
            attributes.push(AttributeSpec {
                column: c.clone(),
                name: c.clone(),
                kind,
            });
        }
    }
    let measures = if !singles.is_empty() {
        if !attributes.is_empty() {
            notes.push(format!(
                "columns {} are left out: the table's measure_value:: columns make single-measure records",
                attributes.iter().map(|a| a.column.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        MeasuresSpec::Mixed(singles)
    } else if attributes.is_empty() {
        bail!("no column is left for measures");
    } else {
        MeasuresSpec::Multi {
            name: args.measure_name.clone(),
            attributes,
        }
    };
    let spec = Spec {
        time_column: args.time_column.clone(),
        time_unit: "NANOSECONDS".into(),
        dimensions: dimensions
            .into_iter()
            .map(|c| DimensionSpec {
                column: c.clone(),
                name: c,
            })
            .collect(),
        measure_name_column: if args.measure_name.is_some() {
            None
        } else {
            name_column
        },
        measures,
    };
    Ok((spec, notes))
}

/// A TIMESTAMP as UNLOAD writes it in CSV (`2016-01-01 00:00:00.000000000`), or an
/// integer of nanoseconds, as nanoseconds.
pub fn timestamp_ns(text: &str) -> Option<i64> {
    if let Ok(n) = text.parse::<i64>() {
        return Some(n);
    }
    let t = chrono::NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?;
    t.and_utc().timestamp_nanos_opt()
}

pub fn names(columns: &[Column]) -> Vec<String> {
    columns.iter().map(|(c, _)| c.clone()).collect()
}

/// Timestream's type name of an Arrow type read from Parquet.
pub fn arrow_type(t: &almanac_sql::arrow::datatypes::DataType) -> String {
    use almanac_sql::arrow::datatypes::DataType as T;
    match t {
        T::Utf8 | T::LargeUtf8 | T::Utf8View => "VARCHAR",
        T::Int8 | T::Int16 | T::Int32 | T::Int64 | T::UInt8 | T::UInt16 | T::UInt32 | T::UInt64 => {
            "BIGINT"
        }
        T::Float16 | T::Float32 | T::Float64 | T::Decimal128(..) | T::Decimal256(..) => "DOUBLE",
        T::Boolean => "BOOLEAN",
        T::Timestamp(..) | T::Date32 | T::Date64 => "TIMESTAMP",
        T::List(_) | T::LargeList(_) => "ARRAY",
        _ => "ROW",
    }
    .to_string()
}

/// The positions of TIMESTAMP columns (their CSV text becomes nanoseconds).
pub fn timestamp_columns(columns: &[Column]) -> Vec<usize> {
    columns
        .iter()
        .enumerate()
        .filter(|(_, (_, t))| t == "TIMESTAMP")
        .map(|(i, _)| i)
        .collect()
}
