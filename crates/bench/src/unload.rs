//! `almanac-bench unload-files`: writes one TSBS-shaped cpu table three ways, for
//! `scripts/bench-import`: a CSV with a header and millisecond times (what `ts write`
//! and batch load read), and two directories shaped as Timestream's UNLOAD leaves them
//! (`results/` data files, a manifest and a metadata file): CSV without a header and
//! with UNLOAD's timestamp text, and Parquet (Arrow's writer, nanosecond timestamps).
//! Rows: `--hosts` hosts × `--rows` readings 10 s apart from 2016-01-01, each with
//! `hostname`, `region`, `measure_name` (`cpu`), `time` and ten DOUBLE measures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use almanac_sql::arrow::array::{
    ArrayRef, Float64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use anyhow::Context;
use serde_json::json;

/// The ten measures, as TSBS names them.
pub use crate::devops::CPU_FIELDS as MEASURES;
/// 2016-01-01T00:00:00Z, TSBS's default start, in ms.
const START_MS: i64 = 1_451_606_400_000;
/// Readings per Parquet row group: bounds the writer's memory.
const ROWS_PER_BATCH: usize = 65_536;

/// Flags of `unload-files`.
#[derive(Debug, clap::Args)]
pub struct UnloadArgs {
    /// Where to write `cpu.csv`, `unload-csv/` and `unload-parquet/`.
    #[arg(long)]
    pub dir: PathBuf,
    /// Hosts.
    #[arg(long, default_value_t = 100)]
    pub hosts: u64,
    /// Readings per host, 10 s apart.
    #[arg(long, default_value_t = 8640)]
    pub rows: u64,
}

/// A reading's ten values: a fixed function of host, row and measure, 6 decimals.
fn value(host: u64, row: u64, m: usize) -> f64 {
    let x = (host * 7919 + row * 104_729 + m as u64 * 15_485_863) % 100_000_000;
    (x as f64 / 1_000_000.0 * 1e6).round() / 1e6
}

fn metadata(dir: &Path) -> anyhow::Result<()> {
    let mut cols = vec![
        json!({"Name": "hostname", "Type": {"ScalarType": "VARCHAR"}}),
        json!({"Name": "region", "Type": {"ScalarType": "VARCHAR"}}),
        json!({"Name": "measure_name", "Type": {"ScalarType": "VARCHAR"}}),
        json!({"Name": "time", "Type": {"ScalarType": "TIMESTAMP"}}),
    ];
    cols.extend(
        MEASURES
            .iter()
            .map(|m| json!({"Name": m, "Type": {"ScalarType": "DOUBLE"}})),
    );
    let meta = json!({"ColumnInfo": cols, "Author": {"Name": "Amazon Timestream", "MetadataFileVersion": "1.0"}});
    std::fs::write(dir.join("Q_metadata.json"), meta.to_string())?;
    Ok(())
}

/// Writes the three forms; prints what it wrote.
pub fn run(args: UnloadArgs) -> anyhow::Result<()> {
    let csv_dir = args.dir.join("unload-csv");
    let parquet_dir = args.dir.join("unload-parquet");
    std::fs::create_dir_all(csv_dir.join("results"))?;
    std::fs::create_dir_all(parquet_dir.join("results"))?;
    metadata(&csv_dir)?;
    metadata(&parquet_dir)?;
    let mut plain = std::io::BufWriter::new(std::fs::File::create(args.dir.join("cpu.csv"))?);
    let mut unload =
        std::io::BufWriter::new(std::fs::File::create(csv_dir.join("results/Q_1.csv"))?);
    writeln!(plain, "time,hostname,region,{}", MEASURES.join(","))?;
    let names: Vec<String> = (0..args.hosts).map(|h| format!("host_{h}")).collect();
    let regions: Vec<String> = (0..args.hosts)
        .map(|h| format!("region_{}", h % 9))
        .collect();
    let mut batch: Vec<(u64, u64)> = Vec::with_capacity(ROWS_PER_BATCH);
    let file = std::fs::File::create(parquet_dir.join("results/Q_1.parquet"))?;
    let mut writer: Option<parquet::arrow::ArrowWriter<std::fs::File>> = None;
    let mut file = Some(file);
    let mut flush = |batch: &mut Vec<(u64, u64)>| -> anyhow::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut columns: Vec<(&str, ArrayRef)> = vec![
            (
                "hostname",
                Arc::new(StringArray::from_iter_values(
                    batch.iter().map(|(h, _)| &names[*h as usize]),
                )),
            ),
            (
                "region",
                Arc::new(StringArray::from_iter_values(
                    batch.iter().map(|(h, _)| &regions[*h as usize]),
                )),
            ),
            (
                "measure_name",
                Arc::new(StringArray::from_iter_values(batch.iter().map(|_| "cpu"))),
            ),
            (
                "time",
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    batch
                        .iter()
                        .map(|(_, r)| (START_MS + *r as i64 * 10_000) * 1_000_000),
                )),
            ),
        ];
        for (m, name) in MEASURES.iter().enumerate() {
            columns.push((
                name,
                Arc::new(Float64Array::from_iter_values(
                    batch.iter().map(|(h, r)| value(*h, *r, m)),
                )),
            ));
        }
        let rb = RecordBatch::try_from_iter(columns)?;
        if writer.is_none() {
            let f = file.take().context("the Parquet file")?;
            writer = Some(parquet::arrow::ArrowWriter::try_new(f, rb.schema(), None)?);
        }
        if let Some(w) = writer.as_mut() {
            w.write(&rb)?;
        }
        batch.clear();
        Ok(())
    };
    for r in 0..args.rows {
        let ms = START_MS + r as i64 * 10_000;
        let text = chrono::DateTime::from_timestamp_millis(ms)
            .context("a time")?
            .format("%Y-%m-%d %H:%M:%S%.9f")
            .to_string();
        for h in 0..args.hosts {
            let vals: Vec<String> = (0..MEASURES.len())
                .map(|m| format!("{:.6}", value(h, r, m)))
                .collect();
            let vals = vals.join(",");
            let (name, region) = (&names[h as usize], &regions[h as usize]);
            writeln!(plain, "{ms},{name},{region},{vals}")?;
            writeln!(unload, "{name},{region},cpu,{text},{vals}")?;
            batch.push((h, r));
            if batch.len() == ROWS_PER_BATCH {
                flush(&mut batch)?;
            }
        }
    }
    flush(&mut batch)?;
    if let Some(w) = writer {
        w.close()?;
    }
    plain.flush()?;
    unload.flush()?;
    let rows = args.hosts * args.rows;
    println!(
        "wrote {rows} rows ({} points) to {}",
        rows * MEASURES.len() as u64,
        args.dir.display()
    );
    Ok(())
}
