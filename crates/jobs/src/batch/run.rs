//! Running a task: file by file, chunk by chunk, keeping the position after each
//! chunk, then the end state and the error report (see the module docs of
//! [`super`]).

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use super::{BatchLoads, CHUNK_ROWS, Status, Task, source, wire};
use crate::error::{Error, Result};
use crate::mapping::Model;
use crate::report;
use crate::sink::{self, Rejection, Written};

/// `[start, end]` pairs of consecutive line numbers.
fn line_ranges(lines: &[u64]) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for &l in lines {
        match out.last_mut() {
            Some(r) if l == r[1] + 1 || l == r[1] => r[1] = l,
            _ => out.push([l, l]),
        }
    }
    out
}

/// The rows of one file gathered between two saved positions.
struct Chunk {
    model: Model,
    /// The file's index in the task and its name.
    index: usize,
    name: String,
    rows: Vec<Vec<Option<String>>>,
    numbers: Vec<u64>,
    /// Rows that could not be read as CSV or have the wrong shape.
    refused: Vec<Rejection>,
    /// The line of the last row handled (the header is line 1).
    lines_done: u64,
    /// Bytes read since the last save.
    bytes: u64,
}

impl BatchLoads {
    /// Runs a task from its position to the end.
    pub(super) fn run(&self, id: &str) -> Result<()> {
        let task = self.update(id, |t| t.status = Status::InProgress)?;
        let csv_config = task.source.csv_configuration.clone().unwrap_or_default();
        let null_value = csv_config.null_value.clone();
        for (index, (name, _)) in task.files.iter().enumerate().skip(task.next_file) {
            let skip = if index == task.next_file {
                task.lines_done
            } else {
                1
            };
            let path = task.source_dir.join(name);
            let outcome = self.load_file(
                &task,
                &path,
                &csv_config,
                null_value.as_deref(),
                index,
                skip,
            );
            if let Err(e) = outcome {
                self.update(id, |t| {
                    t.progress.file_failures += 1;
                    t.file_errors.insert(name.clone(), e.to_string());
                    t.next_file = index + 1;
                    t.lines_done = 1;
                })?;
            }
        }
        self.finish(id, None)
    }

    /// Reads one file from line `skip + 1` on; saves the position after each chunk.
    fn load_file(
        &self,
        task: &Task,
        path: &std::path::Path,
        config: &wire::CsvConfiguration,
        null_value: Option<&str>,
        index: usize,
        skip: u64,
    ) -> Result<()> {
        let file = std::fs::File::open(path)
            .map_err(|e| Error::invalid(format!("Cannot open {}: {e}", path.display())))?;
        let mut reader = source::reader(config, std::io::BufReader::new(file))?;
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| Error::invalid(format!("Cannot read the header: {e}")))?
            .iter()
            .map(|h| h.trim_start_matches('\u{feff}').to_string())
            .collect();
        let mut chunk = Chunk {
            model: task.spec.bind(&header).map_err(Error::invalid)?,
            index,
            name: task.files[index].0.clone(),
            rows: Vec::with_capacity(CHUNK_ROWS),
            numbers: Vec::with_capacity(CHUNK_ROWS),
            refused: Vec::new(),
            lines_done: skip,
            bytes: 0,
        };
        let mut record = csv::StringRecord::new();
        let mut bytes_at = reader.position().byte();
        loop {
            if chunk.rows.len() + chunk.refused.len() >= CHUNK_ROWS {
                let pos = reader.position().byte();
                chunk.bytes = pos - bytes_at;
                bytes_at = pos;
                self.flush(task, &mut chunk)?;
            }
            let more = match reader.read_record(&mut record) {
                Ok(more) => more,
                Err(e) => {
                    // A malformed row: count it and go on from the next one.
                    let line = e.position().map_or(0, csv::Position::line);
                    chunk.refused.push(Rejection {
                        row: line,
                        reason: format!("The row cannot be read as CSV: {e}"),
                    });
                    continue;
                }
            };
            if !more {
                break;
            }
            let line = record
                .position()
                .map_or(chunk.lines_done + 1, csv::Position::line);
            if line <= skip {
                continue;
            }
            chunk.lines_done = line;
            if record.as_slice().len() > source::MAX_ROW_BYTES || record.len() != header.len() {
                chunk.refused.push(Rejection {
                    row: line,
                    reason: format!(
                        "The row has {} fields and {} bytes; the header has {} fields, and a row may hold {} bytes.",
                        record.len(),
                        record.as_slice().len(),
                        header.len(),
                        source::MAX_ROW_BYTES
                    ),
                });
                continue;
            }
            chunk.rows.push(source::cells(&record, null_value));
            chunk.numbers.push(line);
        }
        chunk.bytes = reader.position().byte() - bytes_at;
        self.flush(task, &mut chunk)?;
        self.update(&task.id, |t| {
            t.next_file = index + 1;
            t.lines_done = 1;
        })?;
        Ok(())
    }

    /// Writes the rows gathered, counts the rows refused while reading, and saves the
    /// position after them.
    fn flush(&self, task: &Task, chunk: &mut Chunk) -> Result<()> {
        if chunk.rows.is_empty() && chunk.refused.is_empty() && chunk.bytes == 0 {
            return Ok(());
        }
        let mut written = Written::default();
        let to = sink::Destination {
            database: &task.database,
            table: &task.table,
            model: &chunk.model,
            version: task.version,
        };
        sink::write_rows(&self.ts, to, &chunk.rows, &chunk.numbers, &mut written)?;
        let unreadable = std::mem::take(&mut chunk.refused);
        self.update(&task.id, |t| {
            t.progress.records_processed += written.rows + unreadable.len() as u64;
            t.progress.records_ingested += written.records;
            t.progress.parse_failures += written.parse_failures + unreadable.len() as u64;
            t.progress.record_ingestion_failures += written.ingestion_failures;
            t.progress.bytes_metered += chunk.bytes;
            let list = t.refused.entry(chunk.name.clone()).or_default();
            let room = sink::MAX_REJECTIONS_KEPT.saturating_sub(list.len());
            list.extend(unreadable.into_iter().chain(written.rejected).take(room));
            t.next_file = chunk.index;
            t.lines_done = chunk.lines_done;
        })?;
        chunk.rows.clear();
        chunk.numbers.clear();
        chunk.bytes = 0;
        Ok(())
    }

    /// Ends a task: SUCCEEDED, or FAILED with a report.
    pub(super) fn finish(&self, id: &str, failure: Option<String>) -> Result<()> {
        let task = self.task(id)?;
        let p = task.progress;
        let failed = failure.is_some()
            || p.parse_failures + p.record_ingestion_failures + p.file_failures > 0;
        let message = failure.clone().or_else(|| {
            failed.then(|| {
                format!(
                    "{} rows could not be parsed, {} records were refused and {} files could not be read; see the error report.",
                    p.parse_failures, p.record_ingestion_failures, p.file_failures
                )
            })
        });
        if failed && let Some(r) = &task.report.report_s3_configuration {
            let mut file_errors: Vec<Json> = Vec::new();
            for (file, list) in &task.refused {
                let mut by_reason: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
                for rej in list {
                    by_reason
                        .entry(rej.reason.as_str())
                        .or_default()
                        .push(rej.row);
                }
                let errors: Vec<Json> = by_reason
                    .into_iter()
                    .map(|(reason, mut lines)| {
                        lines.sort_unstable();
                        json!({"reason": reason, "lineRanges": line_ranges(&lines)})
                    })
                    .collect();
                file_errors.push(json!({"fileName": file, "errors": errors}));
            }
            for (file, reason) in &task.file_errors {
                file_errors.push(
                    json!({"fileName": file, "errors": [{"reason": reason, "lineRanges": []}]}),
                );
            }
            let task_errors: Vec<Json> = failure.iter().map(|f| json!({"reason": f})).collect();
            let body = json!({"taskId": id, "taskErrors": task_errors, "fileErrors": file_errors});
            report::write(
                &self.bucket_dir,
                &r.bucket_name,
                r.object_key_prefix.as_deref(),
                &format!("{id}.json"),
                &body,
            )?;
        }
        self.update(id, |t| {
            t.status = if failed {
                Status::Failed
            } else {
                Status::Succeeded
            };
            t.error = message;
        })?;
        Ok(())
    }
}
