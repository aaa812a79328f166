//! Scheduled queries: Create, Describe, List, Update, Delete and
//! ExecuteScheduledQuery, and the scheduler that runs them.
//!
//! A definition, step by step:
//! 1. [`ScheduledQueries::create`] checks the name, the schedule ([`schedule`]), the
//!    report destination ([`crate::report`]) and the target mapping ([`wire`]), plans
//!    the query with `@scheduled_runtime` bound and holds the mapping against its
//!    columns and the target table ([`run::check`]), then keeps the definition in the
//!    store ([`crate::stored`], row `q/NAME`) and in memory.
//! 2. The scheduler (`serve` calls [`ScheduledQueries::run_due`] every
//!    [`TICK_MS`]) runs each ENABLED query whose next invocation time has come, with
//!    that time as `@scheduled_runtime`, then moves its next invocation to the first
//!    time of its schedule after now: a server that was down runs a missed query once,
//!    not once per missed time.
//! 3. A run ([`run`]) writes its rows into the target table; its summary (status,
//!    counts, time, failure reason, report location) becomes `LastRunSummary`, and a
//!    failed run joins `RecentlyFailedRuns` (the last [`RECENT_FAILURES_KEPT`]).
//!
//! ExecuteScheduledQuery runs a query at the `InvocationTime` it is given, before it
//! answers, and leaves the schedule as it was. Notifications (SNS) are not sent; the
//! topic is kept as given. Runs of one query never overlap: a query still running
//! when it is due again waits for its next time.

pub mod run;
pub mod schedule;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use almanac_engine::clock::Clock;
use almanac_sql::SqlEngine;
use almanac_timeseries::{SharedStore, Tag, TimeSeries};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::error::{Error, Result};
use crate::requests::{self, now_ms, time_json};
use crate::stored::JobTable;
use crate::{paging, report};
use schedule::Schedule;
use wire::{
    ErrorReportConfiguration, NotificationConfiguration, ScheduleConfiguration, TargetConfiguration,
};

/// Scheduled queries one server keeps (Timestream's default quota per account).
pub const MAX_SCHEDULED_QUERIES: usize = 10_000;
/// Failed runs kept for `RecentlyFailedRuns` (Timestream lists the last five).
pub const RECENT_FAILURES_KEPT: usize = 5;
/// How often `serve` looks for due queries: schedules are whole minutes.
pub const TICK_MS: u64 = 1_000;
/// Name length bounds, per the service model.
const NAME_CHARS: std::ops::RangeInclusive<usize> = 1..=64;
/// `MaxResults` of ListScheduledQueries, per the service model.
pub const MAX_LIST_RESULTS: usize = 1000;
/// Account named in ARNs: one local namespace.
const ACCOUNT: &str = "000000000000";
/// Row-key prefix of scheduled queries in the jobs table.
const KEY_PREFIX: &str = "q/";

/// `ENABLED` or `DISABLED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    /// Runs on its schedule.
    Enabled,
    /// Runs only when executed.
    Disabled,
}

/// How a run was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// By the schedule.
    Auto,
    /// By ExecuteScheduledQuery.
    Manual,
}

/// `ScheduledQueryRunSummary`, times in ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    invocation_ms: i64,
    trigger_ms: i64,
    status: String,
    execution_ms: i64,
    records_ingested: u64,
    result_rows: u64,
    failure: Option<String>,
    report: Option<(String, String)>,
}

/// A scheduled query as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Definition {
    arn: String,
    name: String,
    query: String,
    schedule: ScheduleConfiguration,
    notification: NotificationConfiguration,
    target: Option<TargetConfiguration>,
    role_arn: String,
    kms_key_id: Option<String>,
    error_report: ErrorReportConfiguration,
    tags: Vec<Tag>,
    client_token: Option<String>,
    state: State,
    created_ms: i64,
    previous_ms: Option<i64>,
    next_ms: Option<i64>,
    last_run: Option<RunSummary>,
    failed_runs: Vec<RunSummary>,
}

/// CreateScheduledQuery's members.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateRequest {
    /// `Name`.
    pub name: String,
    /// `QueryString`.
    pub query_string: String,
    /// `ScheduleConfiguration`.
    pub schedule_configuration: ScheduleConfiguration,
    /// `NotificationConfiguration`.
    pub notification_configuration: NotificationConfiguration,
    /// `TargetConfiguration`.
    #[serde(default)]
    pub target_configuration: Option<TargetConfiguration>,
    /// `ClientToken`.
    #[serde(default)]
    pub client_token: Option<String>,
    /// `ScheduledQueryExecutionRoleArn`.
    pub scheduled_query_execution_role_arn: String,
    /// `Tags`.
    #[serde(default)]
    pub tags: Vec<Tag>,
    /// `KmsKeyId`.
    #[serde(default)]
    pub kms_key_id: Option<String>,
    /// `ErrorReportConfiguration`.
    pub error_report_configuration: ErrorReportConfiguration,
}

/// The scheduled queries of a server.
pub struct ScheduledQueries {
    jobs: JobTable<SharedStore>,
    sql: Arc<SqlEngine>,
    ts: Arc<TimeSeries<SharedStore>>,
    clock: Arc<dyn Clock>,
    bucket_dir: PathBuf,
    defs: Mutex<BTreeMap<String, Definition>>,
    running: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for ScheduledQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduledQueries").finish_non_exhaustive()
    }
}

fn target_of(t: &TargetConfiguration) -> Result<run::Target> {
    let c = &t.timestream_configuration;
    Ok(run::Target {
        database: c.database_name.clone(),
        table: c.table_name.clone(),
        spec: c.spec().map_err(Error::invalid)?,
    })
}

fn check_name(name: &str) -> Result<()> {
    let ok_first = |c: char| c.is_ascii_alphanumeric() || "|!-_*'()".contains(c);
    let ok_rest = |c: char| c.is_ascii_alphanumeric() || "!-_*'()/.".contains(c);
    let mut chars = name.chars();
    let valid = NAME_CHARS.contains(&name.chars().count())
        && name.chars().count() >= 2
        && chars.next().is_some_and(ok_first)
        && chars.all(ok_rest);
    if valid {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "Name {name:?} must be 2 to {} characters of letters, digits and !-_*'() (and / . after the first).",
            NAME_CHARS.end()
        )))
    }
}

impl ScheduledQueries {
    /// Opens the scheduled queries kept in `ts`'s store; reports go under
    /// `bucket_dir`.
    pub fn open(
        sql: Arc<SqlEngine>,
        ts: Arc<TimeSeries<SharedStore>>,
        clock: Arc<dyn Clock>,
        bucket_dir: PathBuf,
    ) -> Result<Self> {
        let jobs = JobTable::open(Arc::clone(ts.store()))?;
        let defs = jobs
            .load::<Definition>(KEY_PREFIX)?
            .into_iter()
            .map(|d| (d.name.clone(), d))
            .collect();
        Ok(Self {
            jobs,
            sql,
            ts,
            clock,
            bucket_dir,
            defs: Mutex::new(defs),
            running: Mutex::new(BTreeSet::new()),
        })
    }

    fn defs(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Definition>> {
        self.defs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn save(&self, def: &Definition) -> Result<()> {
        self.jobs.put(&format!("{KEY_PREFIX}{}", def.name), def)
    }

    /// The definition an ARN names.
    fn by_arn(&self, arn: &str) -> Result<Definition> {
        let name = arn
            .rsplit_once(":scheduled-query/")
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.rsplit_once('-').map(|(n, _)| n));
        name.and_then(|n| self.defs().get(n).filter(|d| d.arn == arn).cloned())
            .ok_or_else(|| Error::NotFound {
                kind: "scheduled query",
                name: arn.to_string(),
            })
    }

    /// CreateScheduledQuery: the new query's ARN.
    pub async fn create(&self, region: &str, req: CreateRequest) -> Result<String> {
        check_name(&req.name)?;
        requests::check_query_string(&req.query_string)?;
        requests::check_client_token(req.client_token.as_deref())?;
        let schedule = Schedule::parse(&req.schedule_configuration.schedule_expression)
            .map_err(Error::invalid)?;
        let s3 = &req.error_report_configuration.s3_configuration;
        report::check_destination(&s3.bucket_name, s3.object_key_prefix.as_deref())?;
        almanac_timeseries::check_tags(&req.tags)?;
        let target = req
            .target_configuration
            .as_ref()
            .map(target_of)
            .transpose()?;
        if let Some(t) = &target {
            self.ts.describe_table(&t.database, &t.table)?;
        }
        let now = now_ms(&*self.clock);
        if let Some(existing) = self.defs().get(&req.name) {
            if existing.client_token.is_some() && existing.client_token == req.client_token {
                return Ok(existing.arn.clone());
            }
            return Err(Error::Conflict(format!(
                "A scheduled query named {} already exists.",
                req.name
            )));
        }
        run::check(&self.sql, &req.query_string, target.as_ref(), now).await?;
        let def = Definition {
            arn: format!(
                "arn:aws:timestream:{region}:{ACCOUNT}:scheduled-query/{}-{:016x}",
                req.name,
                now.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64)
            ),
            next_ms: schedule.next_after(now, now),
            name: req.name,
            query: req.query_string,
            schedule: req.schedule_configuration,
            notification: req.notification_configuration,
            target: req.target_configuration,
            role_arn: req.scheduled_query_execution_role_arn,
            kms_key_id: req.kms_key_id,
            error_report: req.error_report_configuration,
            tags: req.tags,
            client_token: req.client_token,
            state: State::Enabled,
            created_ms: now,
            previous_ms: None,
            last_run: None,
            failed_runs: Vec::new(),
        };
        let mut defs = self.defs();
        if defs.contains_key(&def.name) {
            return Err(Error::Conflict(format!(
                "A scheduled query named {} already exists.",
                def.name
            )));
        }
        if defs.len() >= MAX_SCHEDULED_QUERIES {
            return Err(Error::Quota(format!(
                "This server keeps at most {MAX_SCHEDULED_QUERIES} scheduled queries."
            )));
        }
        self.save(&def)?;
        let arn = def.arn.clone();
        defs.insert(def.name.clone(), def);
        Ok(arn)
    }

    /// DescribeScheduledQuery: the `ScheduledQuery` member.
    pub fn describe(&self, arn: &str) -> Result<Json> {
        let d = self.by_arn(arn)?;
        let mut out = json!({
            "Arn": d.arn,
            "Name": d.name,
            "QueryString": d.query,
            "CreationTime": time_json(d.created_ms),
            "State": d.state,
            "ScheduleConfiguration": d.schedule,
            "NotificationConfiguration": d.notification,
            "ScheduledQueryExecutionRoleArn": d.role_arn,
            "ErrorReportConfiguration": d.error_report,
            "RecentlyFailedRuns": d.failed_runs.iter().map(summary_json).collect::<Vec<_>>(),
        });
        let extra = [
            ("PreviousInvocationTime", d.previous_ms.map(time_json)),
            ("NextInvocationTime", d.next_ms.map(time_json)),
            ("TargetConfiguration", d.target.as_ref().map(|t| json!(t))),
            ("KmsKeyId", d.kms_key_id.as_ref().map(|k| json!(k))),
            ("LastRunSummary", d.last_run.as_ref().map(summary_json)),
        ];
        if let Some(o) = out.as_object_mut() {
            for (k, v) in extra {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            }
        }
        Ok(out)
    }

    /// ListScheduledQueries: a page of `ScheduledQueries` after `next_token` (a name)
    /// and the token of the next page.
    pub fn list(
        &self,
        max_results: Option<i64>,
        next_token: Option<&str>,
    ) -> Result<(Vec<Json>, Option<String>)> {
        let max = paging::max_results(max_results, MAX_LIST_RESULTS)?;
        let defs = self.defs();
        let (page, next) = paging::page(defs.values(), next_token, max, |d| d.name.as_str());
        let items = page
            .iter()
            .map(|d| {
                let mut o = json!({
                    "Arn": d.arn,
                    "Name": d.name,
                    "CreationTime": time_json(d.created_ms),
                    "State": d.state,
                    "ErrorReportConfiguration": d.error_report,
                });
                let target = d.target.as_ref().map(|t| {
                    let c = &t.timestream_configuration;
                    json!({"TimestreamDestination": {"DatabaseName": c.database_name, "TableName": c.table_name}})
                });
                let extra = [
                    ("PreviousInvocationTime", d.previous_ms.map(time_json)),
                    ("NextInvocationTime", d.next_ms.map(time_json)),
                    ("TargetDestination", target),
                    ("LastRunStatus", d.last_run.as_ref().map(|r| json!(r.status))),
                ];
                if let Some(obj) = o.as_object_mut() {
                    for (k, v) in extra {
                        if let Some(v) = v {
                            obj.insert(k.into(), v);
                        }
                    }
                }
                o
            })
            .collect();
        Ok((items, next))
    }

    /// UpdateScheduledQuery: sets the state. Enabling moves the next invocation to
    /// the schedule's first time after now.
    pub fn update(&self, arn: &str, state: State) -> Result<()> {
        let name = self.by_arn(arn)?.name;
        let now = now_ms(&*self.clock);
        let mut defs = self.defs();
        let def = defs.get_mut(&name).ok_or_else(|| Error::NotFound {
            kind: "scheduled query",
            name: arn.to_string(),
        })?;
        let mut changed = def.clone();
        changed.state = state;
        changed.next_ms = match state {
            State::Enabled => Schedule::parse(&def.schedule.schedule_expression)
                .map_err(Error::Internal)?
                .next_after(now, def.created_ms),
            State::Disabled => None,
        };
        self.save(&changed)?;
        *def = changed;
        Ok(())
    }

    /// DeleteScheduledQuery.
    pub fn delete(&self, arn: &str) -> Result<()> {
        let def = self.by_arn(arn)?;
        self.jobs.delete(&format!("{KEY_PREFIX}{}", def.name))?;
        self.defs().remove(&def.name);
        Ok(())
    }

    /// ExecuteScheduledQuery: runs the query at `invocation_ms` now.
    pub async fn execute(&self, arn: &str, invocation_ms: i64) -> Result<()> {
        let def = self.by_arn(arn)?;
        self.run(def, invocation_ms, Trigger::Manual).await;
        Ok(())
    }

    /// Runs every ENABLED query whose time has come (the scheduler's tick); returns
    /// how many ran.
    pub async fn run_due(&self) -> usize {
        let now = now_ms(&*self.clock);
        let due: Vec<Definition> = self
            .defs()
            .values()
            .filter(|d| d.state == State::Enabled && d.next_ms.is_some_and(|n| n <= now))
            .cloned()
            .collect();
        let mut ran = 0;
        for def in due {
            let Some(invocation) = def.next_ms else {
                continue;
            };
            let next = Schedule::parse(&def.schedule.schedule_expression)
                .ok()
                .and_then(|s| s.next_after(now, def.created_ms));
            // Move the schedule first, so a failing store or query cannot make the
            // same time run again at every tick.
            if let Some(d) = self.defs().get_mut(&def.name) {
                d.previous_ms = Some(invocation);
                d.next_ms = next;
            }
            if self.run(def, invocation, Trigger::Auto).await {
                ran += 1;
            }
        }
        ran
    }

    /// One run; false when the query was running already.
    async fn run(&self, def: Definition, invocation_ms: i64, trigger: Trigger) -> bool {
        if !self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(def.name.clone())
        {
            return false;
        }
        let started = std::time::Instant::now();
        let trigger_ms = now_ms(&*self.clock);
        let target = def.target.as_ref().map(target_of).transpose();
        let mut done = run::Outcome::default();
        let result = match target {
            Ok(t) => {
                run::execute(
                    &self.sql,
                    &self.ts,
                    &def.query,
                    t.as_ref(),
                    (invocation_ms, trigger_ms),
                    &mut done,
                )
                .await
            }
            Err(e) => Err(e),
        };
        let (ok_status, failed_status) = match trigger {
            Trigger::Auto => ("AUTO_TRIGGER_SUCCESS", "AUTO_TRIGGER_FAILURE"),
            Trigger::Manual => ("MANUAL_TRIGGER_SUCCESS", "MANUAL_TRIGGER_FAILURE"),
        };
        let failure = match &result {
            Err(e) => Some(e.to_string()),
            Ok(()) if done.written.any_refused() => Some(format!(
                "Of {} result rows, {}; see the error report.",
                done.result_rows,
                done.written.refusals()
            )),
            Ok(()) => None,
        };
        let (rows, result_rows, records) = (
            done.written.rejected.clone(),
            done.result_rows,
            done.written.records,
        );
        let report = failure.as_ref().and_then(|reason| {
            let s3 = &def.error_report.s3_configuration;
            let object = format!("{}/{invocation_ms}-{trigger_ms}.json", def.name);
            let body = json!({
                "reportId": object,
                "errors": [{ "reason": reason, "rows": rows }],
            });
            report::write(
                &self.bucket_dir,
                &s3.bucket_name,
                s3.object_key_prefix.as_deref(),
                &object,
                &body,
            )
            .ok()
            .map(|l| (l.bucket, l.key))
        });
        let summary = RunSummary {
            invocation_ms,
            trigger_ms,
            status: if failure.is_some() {
                failed_status
            } else {
                ok_status
            }
            .into(),
            execution_ms: started.elapsed().as_millis() as i64,
            records_ingested: records,
            result_rows,
            failure,
            report,
        };
        let updated = {
            let mut defs = self.defs();
            defs.get_mut(&def.name).map(|d| {
                if summary.failure.is_some() {
                    d.failed_runs.insert(0, summary.clone());
                    d.failed_runs.truncate(RECENT_FAILURES_KEPT);
                }
                d.last_run = Some(summary);
                d.clone()
            })
        };
        if let Some(d) = updated {
            // A summary that cannot be kept is lost with the store's failure; the run's
            // rows are written either way.
            let _ = self.save(&d);
        }
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&def.name);
        true
    }
}

fn summary_json(r: &RunSummary) -> Json {
    let mut o = json!({
        "InvocationTime": time_json(r.invocation_ms),
        "TriggerTime": time_json(r.trigger_ms),
        "RunStatus": r.status,
        "ExecutionStats": {
            "ExecutionTimeInMillis": r.execution_ms,
            "DataWrites": 0,
            "BytesMetered": 0,
            "CumulativeBytesScanned": 0,
            "RecordsIngested": r.records_ingested,
            "QueryResultRows": r.result_rows,
        },
    });
    if let Some(obj) = o.as_object_mut() {
        if let Some(f) = &r.failure {
            obj.insert("FailureReason".into(), json!(f));
        }
        if let Some((bucket, key)) = &r.report {
            obj.insert(
                "ErrorReportLocation".into(),
                json!({"S3ReportLocation": {"BucketName": bucket, "ObjectKey": key}}),
            );
        }
    }
    o
}
