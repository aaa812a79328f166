//! Records from files for `almanac ts write`.
//!
//! - JSON lines (`.jsonl`, `.json`): each non-empty line is one `Record` object exactly
//!   as WriteRecords takes it (`Dimensions`, `MeasureName`, `MeasureValue(s)`, `Time`…).
//! - CSV (`.csv`), with a header row: the `--time-column` (default `time`) holds the
//!   time in `--time-unit`; `--dimensions` names the dimension columns; the measure
//!   name comes from a `measure_name` column or `--measure-name`. With a
//!   `measure_value` column each row is a single-measure record (type from a
//!   `measure_value_type` column or `--type`); otherwise every other column is a value
//!   of one MULTI record, typed by `--types col:TYPE` or inferred from the first row
//!   (integer → BIGINT, number → DOUBLE, true/false → BOOLEAN, else VARCHAR). Empty
//!   cells are left out (sparse measures).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::{Value as Json, json};

/// Flags of `almanac ts write`.
#[derive(Debug, clap::Args)]
pub struct WriteArgs {
    /// Database.
    pub database: String,
    /// Table.
    pub table: String,
    /// Input file (.csv, .jsonl).
    pub file: PathBuf,
    /// `csv` or `jsonl`; default from the file extension.
    #[arg(long)]
    pub format: Option<String>,
    /// CSV: the dimension columns.
    #[arg(long, value_delimiter = ',')]
    pub dimensions: Vec<String>,
    /// CSV: the measure name when there is no `measure_name` column.
    #[arg(long)]
    pub measure_name: Option<String>,
    /// CSV: the time column.
    #[arg(long, default_value = "time")]
    pub time_column: String,
    /// CSV: unit of the time column (MILLISECONDS, SECONDS, MICROSECONDS, NANOSECONDS).
    #[arg(long, default_value = "MILLISECONDS")]
    pub time_unit: String,
    /// CSV: type of `measure_value` when there is no `measure_value_type` column.
    #[arg(long, default_value = "DOUBLE")]
    pub r#type: String,
    /// CSV: types of multi-measure columns, `col:TYPE,...` (others are inferred).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// Records per WriteRecords request (at most 100).
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
}

/// Calls `each(line_number, record, bytes_read_so_far)` for every record of the file.
pub fn for_each_record(
    args: &WriteArgs,
    each: &mut dyn FnMut(usize, Json, u64) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let format = match args.format.as_deref() {
        Some(f) => f.to_string(),
        None => match args.file.extension().and_then(|e| e.to_str()) {
            Some("csv") => "csv".into(),
            Some("jsonl" | "json" | "ndjson") => "jsonl".into(),
            _ => bail!(
                "{}: say --format csv or --format jsonl",
                args.file.display()
            ),
        },
    };
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("opening {}", args.file.display()))?;
    match format.as_str() {
        "jsonl" => {
            let mut offset = 0u64;
            for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
                let line = line.with_context(|| format!("reading line {}", i + 1))?;
                offset += line.len() as u64 + 1;
                if line.trim().is_empty() {
                    continue;
                }
                let record: Json = serde_json::from_str(&line)
                    .with_context(|| format!("line {}: not a JSON record", i + 1))?;
                if !record.is_object() {
                    bail!("line {}: a record is a JSON object", i + 1);
                }
                each(i + 1, record, offset)?;
            }
            Ok(())
        }
        "csv" => {
            let mut reader = csv::Reader::from_reader(file);
            let header: Vec<String> = reader.headers()?.iter().map(str::to_string).collect();
            let mut shape = CsvShape::new(args, &header)?;
            for (i, row) in reader.records().enumerate() {
                let row = row.with_context(|| format!("CSV line {}", i + 2))?;
                let offset = row.position().map_or(0, csv::Position::byte);
                let fields: Vec<&str> = row.iter().collect();
                let record = shape
                    .record(&fields)
                    .with_context(|| format!("CSV line {}", i + 2))?;
                each(i + 2, record, offset)?;
            }
            Ok(())
        }
        other => bail!("unknown --format {other}: csv or jsonl"),
    }
}

/// How a CSV header maps onto records.
#[derive(Debug)]
pub struct CsvShape {
    time: usize,
    time_unit: String,
    dims: Vec<(usize, String)>,
    measure_name: Result<usize, String>,
    single: Option<(usize, Result<usize, String>)>,
    multi: Vec<(usize, String, Option<String>)>,
}

/// The type a multi-measure value's text suggests.
pub fn infer_type(text: &str) -> &'static str {
    if text.parse::<i64>().is_ok() {
        "BIGINT"
    } else if text.parse::<f64>().is_ok_and(f64::is_finite) {
        "DOUBLE"
    } else if text.eq_ignore_ascii_case("true") || text.eq_ignore_ascii_case("false") {
        "BOOLEAN"
    } else {
        "VARCHAR"
    }
}

impl CsvShape {
    /// Reads the header.
    pub fn new(args: &WriteArgs, header: &[String]) -> anyhow::Result<Self> {
        let col = |name: &str| header.iter().position(|h| h == name);
        let time = col(&args.time_column)
            .with_context(|| format!("no time column {:?} in the header", args.time_column))?;
        let mut dims = Vec::new();
        for d in &args.dimensions {
            dims.push((
                col(d).with_context(|| format!("no dimension column {d:?} in the header"))?,
                d.clone(),
            ));
        }
        let measure_name = match (col("measure_name"), &args.measure_name) {
            (Some(i), _) => Ok(i),
            (None, Some(name)) => Err(name.clone()),
            (None, None) => bail!("the CSV has no measure_name column: give --measure-name"),
        };
        let single = col("measure_value").map(|i| {
            (
                i,
                col("measure_value_type").ok_or_else(|| args.r#type.clone()),
            )
        });
        let declared: HashMap<&str, &str> = args
            .types
            .iter()
            .filter_map(|t| t.split_once(':'))
            .collect();
        let special = |i: usize| {
            i == time
                || dims.iter().any(|(d, _)| *d == i)
                || matches!(
                    header[i].as_str(),
                    "measure_name" | "measure_value" | "measure_value_type"
                )
        };
        let multi = if single.is_some() {
            Vec::new()
        } else {
            (0..header.len())
                .filter(|i| !special(*i))
                .map(|i| {
                    (
                        i,
                        header[i].clone(),
                        declared.get(header[i].as_str()).map(|t| t.to_string()),
                    )
                })
                .collect()
        };
        if single.is_none() && multi.is_empty() {
            bail!("the CSV has no measure columns");
        }
        Ok(Self {
            time,
            time_unit: args.time_unit.clone(),
            dims,
            measure_name,
            single,
            multi,
        })
    }

    /// One row as a WriteRecords record.
    pub fn record(&mut self, fields: &[&str]) -> anyhow::Result<Json> {
        let get = |i: usize| fields.get(i).copied().unwrap_or("");
        let dims: Vec<Json> = self
            .dims
            .iter()
            .filter(|(i, _)| !get(*i).is_empty())
            .map(|(i, name)| json!({ "Name": name, "Value": get(*i) }))
            .collect();
        let measure_name = match &self.measure_name {
            Ok(i) => get(*i).to_string(),
            Err(name) => name.clone(),
        };
        let mut rec = json!({
            "Dimensions": dims,
            "MeasureName": measure_name,
            "Time": get(self.time),
            "TimeUnit": self.time_unit,
        });
        if let Some((value, kind)) = &self.single {
            rec["MeasureValue"] = json!(get(*value));
            rec["MeasureValueType"] = json!(match kind {
                Ok(i) => get(*i).to_string(),
                Err(t) => t.clone(),
            });
            return Ok(rec);
        }
        let mut values = Vec::new();
        for (i, name, kind) in &mut self.multi {
            let text = get(*i);
            if text.is_empty() {
                continue;
            }
            let kind = kind.get_or_insert_with(|| infer_type(text).to_string());
            values.push(json!({ "Name": name, "Value": text, "Type": kind }));
        }
        rec["MeasureValueType"] = json!("MULTI");
        rec["MeasureValues"] = Json::Array(values);
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dimensions: &[&str], measure_name: Option<&str>, types: &[&str]) -> WriteArgs {
        WriteArgs {
            database: "db".into(),
            table: "t".into(),
            file: "x.csv".into(),
            format: None,
            dimensions: dimensions.iter().map(|s| s.to_string()).collect(),
            measure_name: measure_name.map(str::to_string),
            time_column: "time".into(),
            time_unit: "SECONDS".into(),
            r#type: "DOUBLE".into(),
            types: types.iter().map(|s| s.to_string()).collect(),
            batch: 100,
        }
    }

    fn header(cols: &[&str]) -> Vec<String> {
        cols.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn csv_rows_become_multi_records_with_inferred_types() -> anyhow::Result<()> {
        let a = args(&["location", "balloon"], Some("reading"), &["note:VARCHAR"]);
        let mut shape = CsvShape::new(
            &a,
            &header(&[
                "time", "location", "balloon", "pressure", "temp", "ok", "note",
            ]),
        )?;
        let r = shape.record(&[
            "1614945600",
            "us-west2",
            "3698",
            "94558",
            "9.5",
            "true",
            "12",
        ])?;
        assert_eq!(r["MeasureName"], "reading");
        assert_eq!(r["TimeUnit"], "SECONDS");
        assert_eq!(
            r["Dimensions"][1],
            json!({"Name": "balloon", "Value": "3698"})
        );
        let types: Vec<&str> = r["MeasureValues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["Type"].as_str())
            .collect();
        assert_eq!(types, ["BIGINT", "DOUBLE", "BOOLEAN", "VARCHAR"]);
        // The type is fixed by the first row; sparse cells are left out.
        let r = shape.record(&["1614945660", "us-west2", "3698", "94122", "", "false", "x"])?;
        assert_eq!(r["MeasureValues"].as_array().map(Vec::len), Some(3));
        assert_eq!(r["MeasureValues"][0]["Type"], "BIGINT");
        Ok(())
    }

    #[test]
    fn csv_single_measure_rows() -> anyhow::Result<()> {
        let a = args(&["host"], None, &[]);
        let mut shape = CsvShape::new(
            &a,
            &header(&["host", "measure_name", "measure_value", "time"]),
        )?;
        let r = shape.record(&["h1", "cpu", "0.5", "1700000000"])?;
        assert_eq!(
            (
                r["MeasureName"].as_str(),
                r["MeasureValue"].as_str(),
                r["MeasureValueType"].as_str()
            ),
            (Some("cpu"), Some("0.5"), Some("DOUBLE"))
        );
        assert!(CsvShape::new(&args(&["nope"], Some("m"), &[]), &header(&["time", "v"])).is_err());
        assert!(CsvShape::new(&args(&[], None, &[]), &header(&["time", "v"])).is_err());
        assert!(CsvShape::new(&args(&["h"], Some("m"), &[]), &header(&["time", "h"])).is_err());
        Ok(())
    }
}
