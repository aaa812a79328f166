//! Jobs kept in the store itself (table [`JOBS_TABLE`], one row per job, the job as
//! JSON in `j:d`), so they survive a restart and work on any [`WideColumnStore`].
//! Row keys: `q/{name}` for a scheduled query, `b/{task id}` for a batch-load task.
//!
//! Record layout: docs/format.md#jobs

use std::ops::ControlFlow;
use std::sync::Arc;

use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::schema::GcRule;
use almanac_engine::{ReadRequest, RowMutations};
use almanac_timeseries::WideColumnStore;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// The store table holding the jobs.
pub const JOBS_TABLE: &str = "_jobs";
/// Its one family.
const FAMILY: &str = "j";
/// The qualifier of a job's JSON.
const QUALIFIER: &[u8] = b"d";

/// The jobs table of a store.
pub struct JobTable<S> {
    store: Arc<S>,
}

impl<S> std::fmt::Debug for JobTable<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTable").finish_non_exhaustive()
    }
}

impl<S: WideColumnStore> JobTable<S> {
    /// Opens (creating on first use) the jobs table of `store`.
    pub fn open(store: Arc<S>) -> Result<Self> {
        if !store.table_exists(JOBS_TABLE)? {
            store.create_table(JOBS_TABLE, &[(FAMILY, GcRule::MaxVersions(1))])?;
        }
        Ok(Self { store })
    }

    /// Every job whose key starts with `prefix`, in key order.
    pub fn load<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut failure = None;
        let req = ReadRequest {
            rows: RowSet {
                keys: Vec::new(),
                ranges: vec![RowRange::prefix(prefix.as_bytes())],
            },
            ..ReadRequest::default()
        };
        self.store.read_rows(JOBS_TABLE, req, &mut |row| {
            let Some(cell) = row.cells.iter().find(|c| &*c.qualifier == QUALIFIER) else {
                return ControlFlow::Continue(());
            };
            match serde_json::from_slice(&cell.value) {
                Ok(job) => {
                    out.push(job);
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    failure = Some(Error::Internal(format!(
                        "corrupt job {}: {e}",
                        String::from_utf8_lossy(&row.key)
                    )));
                    ControlFlow::Break(())
                }
            }
        })?;
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Writes `job` under `key`, replacing what was there.
    pub fn put<T: Serialize>(&self, key: &str, job: &T) -> Result<()> {
        let value = serde_json::to_vec(job).map_err(|e| Error::Internal(e.to_string()))?;
        self.apply(RowMutations {
            key: key.as_bytes().to_vec(),
            mutations: vec![Mutation::SetCell {
                family: FAMILY.into(),
                qualifier: QUALIFIER.to_vec(),
                timestamp_us: 0,
                value,
            }],
        })
    }

    /// Deletes the job under `key`.
    pub fn delete(&self, key: &str) -> Result<()> {
        self.apply(RowMutations {
            key: key.as_bytes().to_vec(),
            mutations: vec![Mutation::DeleteFromRow],
        })
    }

    fn apply(&self, row: RowMutations) -> Result<()> {
        for r in self
            .store
            .mutate_rows(JOBS_TABLE, std::slice::from_ref(&row))?
        {
            r?;
        }
        self.store.sync()?;
        Ok(())
    }
}
