//! `almanac ts import DB TABLE DIR`: loads what Timestream's UNLOAD wrote into DIR
//! (CSV, gzip-compressed CSV or Parquet), the route AWS documents for leaving
//! Timestream. Step by step:
//! 1. The files: those the `*_manifest.json` lists (their `results/…` part, under
//!    DIR), else every `.csv`, `.gz` and `.parquet` under `DIR/results` (or DIR).
//! 2. The columns and their types: the `*_metadata.json`'s `ColumnInfo`, in SELECT
//!    order; partition columns (`results/col=value/…` folders) are not in the files
//!    and are read from the folder names. Without a metadata file, a CSV file's
//!    header names the columns and its first row's values give their types.
//! 3. The mapping ([`almanac_jobs::mapping`]): `--time-column` (default `time`); the
//!    measure name from `--measure-name-column` (default `measure_name`, when there
//!    is one) or `--measure-name`; the dimensions from `--dimensions`, else every
//!    VARCHAR column that is not a measure name. Columns named `measure_value::TYPE`
//!    make single-measure records (Timestream's single-measure tables); otherwise
//!    the other scalar columns make one MULTI record a row. Array, row and time-series
//!    columns are left out, and said so.
//! 4. CSV is read as UNLOAD writes it: `--delimiter` (`,`), `"` quotes, `--escape`
//!    (`\`), no header unless the first line is the column names; TIMESTAMP text
//!    (`2016-01-01 00:00:00.000000000`) becomes nanoseconds. Parquet is read through
//!    Arrow (INT96 timestamps included).
//! 5. Records go in WriteRecords batches of 100, with a progress bar; each refusal
//!    is printed as FILE:LINE (Parquet: FILE:ROW). After every acknowledged batch
//!    the position is kept in `DIR/.almanac-import.json`, so running the same
//!    command again after a failure continues where it stopped (`--restart` starts
//!    over).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use almanac_jobs::mapping::Model;
use almanac_timeseries::Record;
use anyhow::{Context, bail};
use serde_json::{Value as Json, json};

use super::unload::{
    Column, arrow_type, files, metadata_columns, named, names, partitions, spec, timestamp_columns,
    timestamp_ns,
};
use super::{Api, MAX_BATCH, Tally, bytes_bar};

/// The file that keeps an import's position, in the import's directory.
const CHECKPOINT_FILE: &str = ".almanac-import.json";
/// Acknowledged batches between two writes of the position.
const CHECKPOINT_EVERY_BATCHES: u64 = 20;
/// CSV lines between two updates of the progress bar.
const PROGRESS_EVERY_LINES: u64 = 4096;

/// Flags of `almanac ts import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Database.
    pub database: String,
    /// Table (it must exist; enable magnetic-store writes for old data).
    pub table: String,
    /// The directory an UNLOAD wrote (with its results/ folder, manifest and
    /// metadata files).
    pub dir: PathBuf,
    /// The time column.
    #[arg(long, default_value = "time")]
    pub time_column: String,
    /// The column holding each row's measure name (default: measure_name, if any).
    #[arg(long)]
    pub measure_name_column: Option<String>,
    /// The measure name of every record, when no column holds one.
    #[arg(long)]
    pub measure_name: Option<String>,
    /// The dimension columns (default: every VARCHAR column but the measure name).
    #[arg(long, value_delimiter = ',')]
    pub dimensions: Vec<String>,
    /// CSV field delimiter (UNLOAD's field_delimiter).
    #[arg(long, default_value = ",")]
    pub delimiter: char,
    /// CSV escape character (UNLOAD's escaped_by).
    #[arg(long, default_value = "\\")]
    pub escape: char,
    /// Start over, ignoring the position kept by an earlier run.
    #[arg(long)]
    pub restart: bool,
}

/// A record as WriteRecords takes it.
fn record_json(r: &Record<'_>) -> Json {
    let mut o = json!({
        "Dimensions": r.dimensions.iter().map(|d| json!({"Name": d.name, "Value": d.value})).collect::<Vec<_>>(),
        "MeasureName": r.measure_name,
        "MeasureValueType": r.measure_value_type,
        "Time": r.time,
        "TimeUnit": r.time_unit,
    });
    if let Some(obj) = o.as_object_mut() {
        if let Some(v) = &r.measure_value {
            obj.insert("MeasureValue".into(), json!(v));
        }
        if !r.measure_values.is_empty() {
            obj.insert(
                "MeasureValues".into(),
                r.measure_values
                    .iter()
                    .map(|m| json!({"Name": m.name, "Value": m.value, "Type": m.kind}))
                    .collect(),
            );
        }
    }
    o
}

/// Where an import stands: per file, the last line (CSV) or row (Parquet) whose
/// records were acknowledged; `u64::MAX` once the file is done.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Checkpoint {
    target: String,
    files: BTreeMap<String, u64>,
}

/// A reader that counts the bytes it has read (the progress bar's position).
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

struct Importer<'a> {
    api: &'a mut Api,
    args: &'a ImportArgs,
    checkpoint: Checkpoint,
    checkpoint_path: PathBuf,
    tally: Tally,
    /// WriteRecords requests acknowledged.
    batches: u64,
    /// Records waiting for the next batch: (file, line, record).
    pending: Vec<(String, u64, Json)>,
    /// Bytes of the files done.
    done_bytes: u64,
}

impl Importer<'_> {
    fn save(&self) -> anyhow::Result<()> {
        let tmp = self.checkpoint_path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&self.checkpoint)?)?;
        std::fs::rename(&tmp, &self.checkpoint_path)
            .with_context(|| format!("keeping the position in {}", self.checkpoint_path.display()))
    }

    fn send(&mut self) -> anyhow::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let records: Vec<&Json> = self.pending.iter().map(|(_, _, r)| r).collect();
        let body = json!({"DatabaseName": self.args.database, "TableName": self.args.table, "Records": records});
        let answer = self.api.call("WriteRecords", &body)?;
        let pending = &self.pending;
        let at = |i: usize| {
            pending
                .get(i)
                .map_or(String::new(), |(f, l, _)| format!("{f}:{l}"))
        };
        if let Err(e) = self.tally.absorb(answer, pending.len(), at) {
            bail!("WriteRecords failed: {e} (run the same command again to continue)");
        }
        if let Some((file, line, _)) = self.pending.last() {
            self.checkpoint.files.insert(file.clone(), *line);
        }
        self.pending.clear();
        self.batches += 1;
        if self.batches.is_multiple_of(CHECKPOINT_EVERY_BATCHES) {
            self.save()?;
        }
        Ok(())
    }

    fn refuse(&mut self, file: &str, line: u64, reason: &str) {
        self.tally.refuse(&format!("{file}:{line}"), reason);
    }

    /// Maps and queues one row.
    fn row(
        &mut self,
        model: &Model,
        file: &str,
        line: u64,
        row: &[Option<String>],
    ) -> anyhow::Result<()> {
        match model.records(row) {
            Ok(records) => {
                for r in &records {
                    self.pending.push((file.to_string(), line, record_json(r)));
                }
            }
            Err(reason) => self.refuse(file, line, &reason),
        }
        if self.pending.len() >= MAX_BATCH {
            self.send()?;
        }
        Ok(())
    }
}

fn show_notes(shown: &mut bool, notes: &[String], bar: &indicatif::ProgressBar) {
    if !*shown {
        for n in notes {
            bar.println(format!("note: {n}"));
        }
        *shown = true;
    }
}

/// What one file needs besides its path.
struct FileJob<'a> {
    name: &'a str,
    path: PathBuf,
    partitions: Vec<(String, String)>,
    metadata: Option<&'a [Column]>,
    /// Rows (Parquet) or lines (CSV) already acknowledged.
    skip: u64,
    read: Arc<AtomicU64>,
}

impl Importer<'_> {
    fn parquet(
        &mut self,
        job: &FileJob<'_>,
        bar: &indicatif::ProgressBar,
        notes: &mut bool,
    ) -> anyhow::Result<()> {
        let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&job.path)?,
        )
        .with_context(|| format!("reading {}", job.path.display()))?;
        let schema = builder.schema().clone();
        let reader = builder.build()?;
        let mut columns: Vec<Column> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), arrow_type(f.data_type())))
            .collect();
        columns.extend(
            job.partitions
                .iter()
                .map(|(k, _)| (k.clone(), "VARCHAR".to_string())),
        );
        let (spec, found) = spec(self.args, &columns)?;
        show_notes(notes, &found, bar);
        let model = spec.bind(&names(&columns)).map_err(anyhow::Error::msg)?;
        let mut n = 0u64;
        for batch in reader {
            let batch = batch.with_context(|| format!("reading {}", job.path.display()))?;
            for mut row in almanac_jobs::rows::text_rows(batch.columns())? {
                n += 1;
                if n <= job.skip {
                    continue;
                }
                row.extend(job.partitions.iter().map(|(_, v)| Some(v.clone())));
                self.row(&model, job.name, n, &row)?;
            }
            self.progress(bar, job);
        }
        Ok(())
    }

    fn csv(
        &mut self,
        job: &FileJob<'_>,
        bar: &indicatif::ProgressBar,
        notes: &mut bool,
    ) -> anyhow::Result<()> {
        let input = Counting {
            inner: std::fs::File::open(&job.path)
                .with_context(|| format!("opening {}", job.path.display()))?,
            read: Arc::clone(&job.read),
        };
        let stream: Box<dyn Read> = if job.name.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(input))
        } else {
            Box::new(input)
        };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(u8::try_from(self.args.delimiter).context("--delimiter must be ASCII")?)
            .escape(Some(
                u8::try_from(self.args.escape).context("--escape must be ASCII")?,
            ))
            .double_quote(false)
            .from_reader(std::io::BufReader::new(stream));
        let mut record = csv::StringRecord::new();
        // The file's columns: from the metadata (less the partition columns), else
        // from its header, typed by the first data row.
        let mut columns: Option<Vec<Column>> = job.metadata.map(|m| {
            m.iter()
                .filter(|(c, _)| !job.partitions.iter().any(|(k, _)| k == c))
                .cloned()
                .collect()
        });
        let mut header: Option<Vec<String>> = None;
        let mut model: Option<(Model, Vec<usize>)> = None;
        let mut first = true;
        while reader
            .read_record(&mut record)
            .with_context(|| format!("reading {}", job.path.display()))?
        {
            let line = record.position().map_or(0, csv::Position::line);
            let cells: Vec<&str> = record.iter().collect();
            if first {
                first = false;
                let is_header = columns.as_ref().is_none_or(|c| {
                    cells.iter().zip(c).all(|(h, (n, _))| h == n) && cells.len() == c.len()
                });
                if is_header {
                    header = Some(cells.iter().map(|h| (*h).to_string()).collect());
                    continue;
                }
            }
            if line <= job.skip {
                continue;
            }
            if model.is_none() {
                let mut cols = match columns.take() {
                    Some(c) => c,
                    None => header
                        .clone()
                        .unwrap_or_default()
                        .into_iter()
                        .zip(&cells)
                        .map(|(h, v)| {
                            let t = if timestamp_ns(v).is_some() && h == self.args.time_column {
                                "TIMESTAMP"
                            } else {
                                super::input::infer_type(v)
                            };
                            (h, t.to_string())
                        })
                        .collect(),
                };
                cols.extend(
                    job.partitions
                        .iter()
                        .map(|(k, _)| (k.clone(), "VARCHAR".to_string())),
                );
                let (s, found) = spec(self.args, &cols)?;
                show_notes(notes, &found, bar);
                model = Some((
                    s.bind(&names(&cols)).map_err(anyhow::Error::msg)?,
                    timestamp_columns(&cols),
                ));
            }
            let Some((m, timestamps)) = &model else {
                continue;
            };
            let mut row: Vec<Option<String>> = cells
                .iter()
                .map(|c| (!c.is_empty()).then(|| (*c).to_string()))
                .collect();
            row.extend(job.partitions.iter().map(|(_, v)| Some(v.clone())));
            let mut bad = None;
            for &i in timestamps {
                if let Some(Some(t)) = row.get(i) {
                    match timestamp_ns(t) {
                        Some(ns) => row[i] = Some(ns.to_string()),
                        None => bad = Some(format!("{t:?} is not a timestamp")),
                    }
                }
            }
            match bad {
                Some(reason) => self.refuse(job.name, line, &reason),
                None => self.row(m, job.name, line, &row)?,
            }
            if line.is_multiple_of(PROGRESS_EVERY_LINES) {
                self.progress(bar, job);
            }
        }
        if first {
            bail!("{} is empty", job.path.display());
        }
        Ok(())
    }

    fn progress(&self, bar: &indicatif::ProgressBar, job: &FileJob<'_>) {
        bar.set_position(self.done_bytes + job.read.load(Ordering::Relaxed));
        bar.set_message(format!(
            "{} ingested, {} rejected",
            self.tally.ingested, self.tally.rejected
        ));
    }
}

/// Runs `almanac ts import`.
pub fn import(api: &mut Api, args: &ImportArgs) -> anyhow::Result<()> {
    let dir = &args.dir;
    let files = files(dir)?;
    let metadata = match named(dir, "_metadata.json")? {
        Some(p) => Some(metadata_columns(
            &serde_json::from_slice(&std::fs::read(&p)?)
                .with_context(|| format!("reading {}", p.display()))?,
        )?),
        None => None,
    };
    let checkpoint_path = dir.join(CHECKPOINT_FILE);
    let target = format!("{}.{}", args.database, args.table);
    let checkpoint = match std::fs::read(&checkpoint_path) {
        Ok(bytes) if !args.restart => {
            let c: Checkpoint = serde_json::from_slice(&bytes)
                .with_context(|| format!("reading {}", checkpoint_path.display()))?;
            if c.target != target {
                bail!(
                    "{} keeps an import into {}, not {target}; pass --restart to start over",
                    checkpoint_path.display(),
                    c.target
                );
            }
            c
        }
        _ => Checkpoint {
            target,
            files: BTreeMap::new(),
        },
    };
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(dir.join(f)).map_or(0, |m| m.len()))
        .sum();
    let bar = bytes_bar(total);
    let started = std::time::Instant::now();
    let mut im = Importer {
        api,
        args,
        checkpoint,
        checkpoint_path,
        tally: Tally::default(),
        batches: 0,
        pending: Vec::new(),
        done_bytes: 0,
    };
    let mut notes = false;
    for file in &files {
        let path = dir.join(file);
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        let skip = im.checkpoint.files.get(file).copied().unwrap_or(0);
        if skip != u64::MAX {
            let job = FileJob {
                name: file,
                path,
                partitions: partitions(file),
                metadata: metadata.as_deref(),
                skip,
                read: Arc::new(AtomicU64::new(0)),
            };
            if file.ends_with(".parquet") {
                im.parquet(&job, &bar, &mut notes)?;
            } else {
                im.csv(&job, &bar, &mut notes)?;
            }
            im.send()?;
            im.checkpoint.files.insert(file.clone(), u64::MAX);
            im.save()?;
        }
        im.done_bytes += size;
        bar.set_position(im.done_bytes);
    }
    bar.finish_and_clear();
    im.tally.print_refusals();
    println!(
        "ingested {} records from {} files, rejected {}, in {:.1} s",
        im.tally.ingested,
        files.len(),
        im.tally.rejected,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
