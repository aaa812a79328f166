//! The batch-load operations of `timestream-write`, over
//! [`almanac_jobs::BatchLoads`]: `CreateBatchLoadTask` → `{"TaskId"}`,
//! `DescribeBatchLoadTask` → `{"BatchLoadTaskDescription"}`, `ListBatchLoadTasks`
//! → `{"BatchLoadTasks", "NextToken"}`, `ResumeBatchLoadTask` → `{}`. A task runs
//! on its own thread after Create answers.

use almanac_jobs::batch::{CreateRequest, Status};
use serde::Deserialize;
use serde_json::json;

use super::{App, OpError};

/// The batch-load operations.
pub const OPERATIONS: [&str; 4] = [
    "CreateBatchLoadTask",
    "DescribeBatchLoadTask",
    "ListBatchLoadTasks",
    "ResumeBatchLoadTask",
];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TaskRequest {
    task_id: Option<String>,
    max_results: Option<i64>,
    next_token: Option<String>,
    task_status: Option<Status>,
}

fn malformed(e: serde_json::Error) -> OpError {
    OpError::Request(format!("Malformed request body: {e}"))
}

fn task_id(req: &TaskRequest) -> Result<&str, OpError> {
    req.task_id
        .as_deref()
        .ok_or_else(|| OpError::Request("Missing required member TaskId.".into()))
}

/// Runs batch-load operation `op` (one of [`OPERATIONS`]).
pub fn handle(app: &App, op: &str, body: &[u8]) -> Result<String, OpError> {
    let loads = &app.batch;
    if op == "CreateBatchLoadTask" {
        let req: CreateRequest = serde_json::from_slice(body).map_err(malformed)?;
        return Ok(json!({ "TaskId": loads.create(req)? }).to_string());
    }
    let req: TaskRequest = if body.is_empty() {
        TaskRequest::default()
    } else {
        serde_json::from_slice(body).map_err(malformed)?
    };
    let out = match op {
        "DescribeBatchLoadTask" => {
            json!({ "BatchLoadTaskDescription": loads.describe(task_id(&req)?)? })
        }
        "ListBatchLoadTasks" => {
            let (items, next) =
                loads.list(req.max_results, req.next_token.as_deref(), req.task_status)?;
            let mut o = json!({ "BatchLoadTasks": items });
            if let (Some(t), Some(obj)) = (next, o.as_object_mut()) {
                obj.insert("NextToken".into(), json!(t));
            }
            o
        }
        "ResumeBatchLoadTask" => {
            loads.resume(task_id(&req)?)?;
            json!({})
        }
        _ => return Err(OpError::NotImplemented(op.to_string())),
    };
    Ok(out.to_string())
}
