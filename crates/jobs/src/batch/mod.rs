//! Batch-load tasks: CreateBatchLoadTask, DescribeBatchLoadTask, ListBatchLoadTasks
//! and ResumeBatchLoadTask, reading CSV from local directories ([`source`]).
//!
//! A task, step by step:
//! 1. [`BatchLoads::create`] checks the target table, the data model ([`wire`]; a
//!    model in a bucket is read from there), the CSV options and the report
//!    destination, lists the source files once ([`source::list`]) and keeps the task
//!    (row `b/TASK_ID` of the jobs table) as CREATED.
//! 2. A blocking task runs it (IN_PROGRESS): file by file, each CSV header resolves
//!    the mapping ([`crate::mapping`]) and rows go to the table in chunks of
//!    [`CHUNK_ROWS`] ([`crate::sink`]), every record with `RecordVersion` (default
//!    1). After each chunk the progress and the position (file, line) are kept.
//! 3. At the end the task is SUCCEEDED, or FAILED when a file could not be read or a
//!    row or record was refused; a FAILED task has an error report in Timestream's
//!    shape (`{"taskId", "taskErrors", "fileErrors": [{"fileName", "errors":
//!    [{"reason", "lineRanges"}]}]}`) at `REPORT_BUCKET/PREFIX/TASK_ID.json`.
//!
//! A task that was running when the server stopped is PROGRESS_STOPPED after a
//! restart, resumable for [`RESUME_WINDOW_MS`]: ResumeBatchLoadTask continues it from
//! its last kept position (PENDING_RESUME, then IN_PROGRESS). Rows after that
//! position are written again, with the same version and values, which replaces
//! them unchanged.

mod run;
pub mod source;
pub mod wire;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use almanac_engine::clock::Clock;
use almanac_timeseries::{SharedStore, TimeSeries};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::error::{Error, Result};
use crate::mapping::Spec;
use crate::requests::{now_ms, time_json};
use crate::sink::Rejection;
use crate::stored::JobTable;
use crate::{paging, report};
use wire::{DataModelConfiguration, DataSourceConfiguration, ReportConfiguration};

/// Rows written between two saved positions.
pub const CHUNK_ROWS: usize = 10_000;
/// Tasks running or waiting at once on one table (Timestream's limit).
pub const MAX_ACTIVE_PER_TABLE: usize = 5;
/// Tasks running or waiting at once (Timestream's per-account limit).
pub const MAX_ACTIVE: usize = 10;
/// How long a stopped task stays resumable: Timestream shows a "resume by" date
/// without documenting its distance; two weeks.
pub const RESUME_WINDOW_MS: i64 = 14 * 86_400_000;
/// `MaxResults` of ListBatchLoadTasks, per the service model.
pub const MAX_LIST_RESULTS: usize = 100;
/// Row-key prefix of tasks in the jobs table.
const KEY_PREFIX: &str = "b/";

/// `BatchLoadStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// Kept, not started.
    Created,
    /// Running.
    InProgress,
    /// Done with errors.
    Failed,
    /// Done.
    Succeeded,
    /// Stopped before the end (the server stopped); resumable.
    ProgressStopped,
    /// Resumed, about to run.
    PendingResume,
}

impl Status {
    fn active(self) -> bool {
        matches!(self, Self::Created | Self::InProgress | Self::PendingResume)
    }
}

/// `BatchLoadProgressReport`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Progress {
    /// Rows read.
    pub records_processed: u64,
    /// Records written.
    pub records_ingested: u64,
    /// Rows the mapping could not read.
    pub parse_failures: u64,
    /// Records the table refused.
    pub record_ingestion_failures: u64,
    /// Files that could not be read.
    pub file_failures: u64,
    /// Bytes read.
    pub bytes_metered: u64,
}

/// CreateBatchLoadTask's members.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateRequest {
    /// `ClientToken`.
    #[serde(default)]
    pub client_token: Option<String>,
    /// `DataModelConfiguration`.
    #[serde(default)]
    pub data_model_configuration: Option<DataModelConfiguration>,
    /// `DataSourceConfiguration`.
    pub data_source_configuration: DataSourceConfiguration,
    /// `ReportConfiguration`.
    #[serde(default)]
    pub report_configuration: Option<ReportConfiguration>,
    /// `TargetDatabaseName`.
    pub target_database_name: String,
    /// `TargetTableName`.
    pub target_table_name: String,
    /// `RecordVersion`.
    #[serde(default)]
    pub record_version: Option<i64>,
}

/// A task as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Task {
    id: String,
    client_token: Option<String>,
    model: DataModelConfiguration,
    spec: Spec,
    source: DataSourceConfiguration,
    source_dir: PathBuf,
    report: ReportConfiguration,
    database: String,
    table: String,
    version: Option<i64>,
    status: Status,
    error: Option<String>,
    progress: Progress,
    files: Vec<(String, u64)>,
    /// Position: the file being read and the line of its last row handled.
    next_file: usize,
    lines_done: u64,
    /// Refusals so far, by file.
    refused: BTreeMap<String, Vec<Rejection>>,
    file_errors: BTreeMap<String, String>,
    created_ms: i64,
    updated_ms: i64,
    resumable_until_ms: Option<i64>,
}

/// The batch-load tasks of a server.
pub struct BatchLoads {
    jobs: JobTable<SharedStore>,
    ts: Arc<TimeSeries<SharedStore>>,
    clock: Arc<dyn Clock>,
    bucket_dir: PathBuf,
    tasks: Mutex<BTreeMap<String, Task>>,
}

impl std::fmt::Debug for BatchLoads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchLoads").finish_non_exhaustive()
    }
}

/// A task id as Timestream's look (32 upper-case hex digits): the creation time
/// and a SplitMix64 mix of it with the number of tasks, so ids differ within a
/// millisecond.
fn task_id(now_ms: i64, count: u64) -> String {
    let mut z = (now_ms as u64) ^ count.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    format!("{:016X}{:016X}", now_ms, z ^ (z >> 31))
}

impl BatchLoads {
    /// Opens the tasks kept in `ts`'s store; a task that was running is stopped
    /// (resumable). Buckets are directories under `bucket_dir`.
    pub fn open(
        ts: Arc<TimeSeries<SharedStore>>,
        clock: Arc<dyn Clock>,
        bucket_dir: PathBuf,
    ) -> Result<Self> {
        let jobs = JobTable::open(Arc::clone(ts.store()))?;
        let now = now_ms(&*clock);
        let mut tasks = BTreeMap::new();
        for mut t in jobs.load::<Task>(KEY_PREFIX)? {
            if t.status.active() {
                t.status = Status::ProgressStopped;
                t.error = Some(format!(
                    "The server stopped while the task ran; ResumeBatchLoadTask continues it from line {} of file {}.",
                    t.lines_done + 1,
                    t.files.get(t.next_file).map_or("(none)", |f| f.0.as_str())
                ));
                t.resumable_until_ms = Some(now + RESUME_WINDOW_MS);
                jobs.put(&format!("{KEY_PREFIX}{}", t.id), &t)?;
            }
            tasks.insert(t.id.clone(), t);
        }
        Ok(Self {
            jobs,
            ts,
            clock,
            bucket_dir,
            tasks: Mutex::new(tasks),
        })
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Task>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn save(&self, t: &Task) -> Result<()> {
        self.jobs.put(&format!("{KEY_PREFIX}{}", t.id), t)
    }

    fn task(&self, id: &str) -> Result<Task> {
        self.tasks()
            .get(id)
            .cloned()
            .ok_or_else(|| Error::NotFound {
                kind: "batch load task",
                name: id.to_string(),
            })
    }

    /// CreateBatchLoadTask: checks and keeps the task, and starts it. Returns the
    /// task id.
    pub fn create(self: &Arc<Self>, req: CreateRequest) -> Result<String> {
        self.ts
            .describe_table(&req.target_database_name, &req.target_table_name)?;
        let source = &req.data_source_configuration;
        if source.data_format != "CSV" {
            return Err(Error::invalid(format!(
                "DataFormat {:?} is not supported: batch load reads CSV.",
                source.data_format
            )));
        }
        let csv = source.csv_configuration.clone().unwrap_or_default();
        source::check(&csv)?;
        let mut model = req.data_model_configuration.clone().unwrap_or_default();
        let mut data_model = match (&model.data_model, &model.data_model_s3_configuration) {
            (Some(m), _) => m.clone(),
            (None, Some(loc)) => {
                let path =
                    source::bucket_path(&self.bucket_dir, &loc.bucket_name)?.join(&loc.object_key);
                let text = std::fs::read(&path).map_err(|e| {
                    Error::invalid(format!(
                        "Cannot read the data model {}: {e}",
                        path.display()
                    ))
                })?;
                serde_json::from_slice(&text).map_err(|e| {
                    Error::invalid(format!(
                        "The data model {} is not a DataModel: {e}",
                        path.display()
                    ))
                })?
            }
            (None, None) => {
                return Err(Error::invalid(
                    "DataModelConfiguration needs DataModel or DataModelS3Configuration.",
                ));
            }
        };
        let spec = data_model.spec().map_err(Error::invalid)?;
        if model.data_model.is_some() {
            model.data_model = Some(data_model);
        }
        let report = req.report_configuration.clone().unwrap_or_default();
        let Some(r) = &report.report_s3_configuration else {
            return Err(Error::invalid(
                "ReportConfiguration needs ReportS3Configuration.",
            ));
        };
        report::check_destination(&r.bucket_name, r.object_key_prefix.as_deref())?;
        let loc = &source.data_source_s3_configuration;
        let source_dir = source::bucket_path(&self.bucket_dir, &loc.bucket_name)?;
        let files = source::list(&source_dir, loc.object_key_prefix.as_deref().unwrap_or(""))?;
        let now = now_ms(&*self.clock);
        let mut tasks = self.tasks();
        if let Some(t) = req
            .client_token
            .as_ref()
            .and_then(|c| tasks.values().find(|t| t.client_token.as_ref() == Some(c)))
        {
            return Ok(t.id.clone());
        }
        let active: Vec<&Task> = tasks.values().filter(|t| t.status.active()).collect();
        if active.len() >= MAX_ACTIVE
            || active
                .iter()
                .filter(|t| {
                    t.database == req.target_database_name && t.table == req.target_table_name
                })
                .count()
                >= MAX_ACTIVE_PER_TABLE
        {
            return Err(Error::Quota(format!(
                "At most {MAX_ACTIVE_PER_TABLE} batch load tasks run on a table, and {MAX_ACTIVE} in all; wait for one to finish."
            )));
        }
        let id = task_id(now, tasks.len() as u64);
        let task = Task {
            id: id.clone(),
            client_token: req.client_token,
            model,
            spec,
            source: req.data_source_configuration,
            source_dir,
            report,
            database: req.target_database_name,
            table: req.target_table_name,
            version: req.record_version,
            status: Status::Created,
            error: None,
            progress: Progress::default(),
            files,
            next_file: 0,
            lines_done: 1,
            refused: BTreeMap::new(),
            file_errors: BTreeMap::new(),
            created_ms: now,
            updated_ms: now,
            resumable_until_ms: None,
        };
        self.save(&task)?;
        tasks.insert(id.clone(), task);
        drop(tasks);
        self.start(&id);
        Ok(id)
    }

    fn start(self: &Arc<Self>, id: &str) {
        let this = Arc::clone(self);
        let id = id.to_string();
        std::thread::spawn(move || {
            if let Err(e) = this.run(&id) {
                let _ = this.finish(&id, Some(e.to_string()));
            }
        });
    }

    fn update(&self, id: &str, f: impl FnOnce(&mut Task)) -> Result<Task> {
        let now = now_ms(&*self.clock);
        let t = {
            let mut tasks = self.tasks();
            let t = tasks.get_mut(id).ok_or_else(|| Error::NotFound {
                kind: "batch load task",
                name: id.to_string(),
            })?;
            f(t);
            t.updated_ms = now;
            t.clone()
        };
        self.save(&t)?;
        Ok(t)
    }

    /// DescribeBatchLoadTask: the `BatchLoadTaskDescription` member.
    pub fn describe(&self, id: &str) -> Result<Json> {
        let t = self.task(id)?;
        let mut o = json!({
            "TaskId": t.id,
            "DataSourceConfiguration": t.source,
            "ProgressReport": t.progress,
            "ReportConfiguration": t.report,
            "DataModelConfiguration": t.model,
            "TargetDatabaseName": t.database,
            "TargetTableName": t.table,
            "TaskStatus": t.status,
            "RecordVersion": t.version.unwrap_or(1),
            "CreationTime": time_json(t.created_ms),
            "LastUpdatedTime": time_json(t.updated_ms),
        });
        if let Some(obj) = o.as_object_mut() {
            if let Some(e) = &t.error {
                obj.insert("ErrorMessage".into(), json!(e));
            }
            if let Some(r) = t.resumable_until_ms {
                obj.insert("ResumableUntil".into(), time_json(r));
            }
        }
        Ok(o)
    }

    /// ListBatchLoadTasks: a page after `next_token` (a task id), optionally of one
    /// status, and the next page's token.
    pub fn list(
        &self,
        max_results: Option<i64>,
        next_token: Option<&str>,
        status: Option<Status>,
    ) -> Result<(Vec<Json>, Option<String>)> {
        let max = paging::max_results(max_results, MAX_LIST_RESULTS)?;
        let tasks = self.tasks();
        let matching = tasks
            .values()
            .filter(|t| status.is_none_or(|s| t.status == s));
        let (page, next) = paging::page(matching, next_token, max, |t| t.id.as_str());
        let items = page
            .iter()
            .map(|t| {
                let mut o = json!({
                    "TaskId": t.id,
                    "TaskStatus": t.status,
                    "DatabaseName": t.database,
                    "TableName": t.table,
                    "CreationTime": time_json(t.created_ms),
                    "LastUpdatedTime": time_json(t.updated_ms),
                });
                if let (Some(r), Some(obj)) = (t.resumable_until_ms, o.as_object_mut()) {
                    obj.insert("ResumableUntil".into(), time_json(r));
                }
                o
            })
            .collect();
        Ok((items, next))
    }

    /// ResumeBatchLoadTask: continues a stopped task from its kept position.
    pub fn resume(self: &Arc<Self>, id: &str) -> Result<()> {
        let t = self.task(id)?;
        let now = now_ms(&*self.clock);
        if t.status != Status::ProgressStopped {
            return Err(Error::invalid(format!(
                "Task {id} is {:?}; only a PROGRESS_STOPPED task can be resumed.",
                t.status
            )));
        }
        if t.resumable_until_ms.is_some_and(|u| now > u) {
            return Err(Error::invalid(format!(
                "Task {id} could be resumed until {}; it is too late.",
                t.resumable_until_ms.unwrap_or_default()
            )));
        }
        self.update(id, |t| {
            t.status = Status::PendingResume;
            t.error = None;
            t.resumable_until_ms = None;
        })?;
        self.start(id);
        Ok(())
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests;
