//! The Bigtable Data API (`google.bigtable.v2.Bigtable`).
//!
//! Every handler: parse the table name, convert the request ([`crate::convert`]),
//! run the engine call, and map errors through [`crate::status`]. ReadRows answers
//! point reads on the async worker and streams scans from the blocking pool
//! ([`crate::read_rows`]); PrepareQuery and ExecuteQuery run SQL
//! ([`crate::execute_query`]).

use almanac_api::google::bigtable::v2 as pb;
use almanac_api::google::bigtable::v2::bigtable_server::Bigtable;
use almanac_auth::Action;
use almanac_engine::read::ReadRequest;
use almanac_engine::rowset::RowRange;
use almanac_engine::{Engine, RowMutations};
use bytes::Bytes;
use tonic::codegen::BoxStream;
use tonic::{Request, Response, Status};

use crate::chunks::Framing;
use crate::committer::Committer;
use crate::convert;
use crate::status::{IntoStatus, invalid, to_rpc_status};
use crate::{names, views};

/// The Data API over one engine.
#[derive(Clone)]
pub struct DataService {
    engine: Engine,
    committer: Committer,
    /// SQL for PrepareQuery / ExecuteQuery.
    sql: std::sync::Arc<almanac_sql::SqlEngine>,
    /// Where SQL runs: a multi-threaded runtime, so a query's partitions run in
    /// parallel rather than on the calling connection's shard thread.
    sql_runtime: tokio::runtime::Handle,
}

impl DataService {
    /// Serves `engine`, running SQL on `sql_runtime`; starts the write committer thread.
    pub fn new(
        engine: Engine,
        sql: std::sync::Arc<almanac_sql::SqlEngine>,
        sql_runtime: tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let committer = Committer::start(engine.clone())?;
        Ok(Self {
            engine,
            committer,
            sql,
            sql_runtime,
        })
    }

    /// Runs a SQL call on the SQL runtime.
    async fn on_sql_runtime<T: Send + 'static>(
        &self,
        call: impl Future<Output = Result<T, Status>> + Send + 'static,
    ) -> Result<T, Status> {
        self.sql_runtime
            .spawn(call)
            .await
            .map_err(|e| Status::internal(format!("SQL task failed: {e}")))?
    }
}

/// Runs a blocking engine call off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("engine task failed: {e}")))?
}

fn cells_to_family(row: almanac_engine::Row) -> pb::Row {
    let mut families: Vec<pb::Family> = Vec::new();
    for c in row.cells {
        if families.last().is_none_or(|f| f.name != *c.family) {
            families.push(pb::Family {
                name: c.family.to_string(),
                columns: vec![],
            });
        }
        let Some(f) = families.last_mut() else {
            continue;
        };
        if f.columns
            .last()
            .is_none_or(|col| col.qualifier[..] != c.qualifier[..])
        {
            f.columns.push(pb::Column {
                qualifier: Bytes::copy_from_slice(&c.qualifier),
                cells: vec![],
            });
        }
        if let Some(col) = f.columns.last_mut() {
            col.cells.push(pb::Cell {
                timestamp_micros: c.timestamp_us,
                value: Bytes::from(c.value),
                labels: c.labels,
            });
        }
    }
    pb::Row {
        key: Bytes::from(row.key),
        families,
    }
}

#[tonic::async_trait]
impl Bigtable for DataService {
    async fn read_rows(
        &self,
        request: Request<pb::ReadRowsRequest>,
    ) -> Result<Response<BoxStream<pb::ReadRowsResponse>>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.readRows",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let user_agent = request.metadata().get("user-agent");
        let framing = Framing::for_user_agent(user_agent.and_then(|v| v.to_str().ok()));
        let req = request.into_inner();
        if !req.materialized_view_name.is_empty() {
            return Err(Status::unimplemented(
                "ReadRows on materialized views is not supported by Almanac",
            ));
        }
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        if req.rows_limit < 0 {
            return Err(invalid(format!(
                "rows_limit must not be negative, got {}",
                req.rows_limit
            )));
        }
        let filter = req.filter.as_ref().map(convert::filter).transpose()?;
        let full_stats = req.request_stats_view
            == pb::read_rows_request::RequestStatsView::RequestStatsFull as i32;
        let mut rows = convert::row_set(req.rows.as_ref());
        let filter = match &target.view {
            Some(view) => {
                rows = view.narrow(rows);
                Some(view.restrict(filter))
            }
            None => filter,
        };
        let read = ReadRequest {
            rows,
            filter,
            limit: (req.rows_limit > 0).then_some(req.rows_limit as u64),
            reversed: req.reversed,
        };
        let stream = crate::read_rows::read_rows(&self.engine, &name, read, full_stats, framing)?;
        Ok(Response::new(stream))
    }

    async fn sample_row_keys(
        &self,
        request: Request<pb::SampleRowKeysRequest>,
    ) -> Result<Response<BoxStream<pb::SampleRowKeysResponse>>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.sampleRowKeys",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let req = request.into_inner();
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        let range = match &req.row_range {
            None => RowRange::all(),
            Some(r) => {
                let set = convert::row_set(Some(&pb::RowSet {
                    row_keys: vec![],
                    row_ranges: vec![r.clone()],
                }));
                set.validate().status()?;
                set.ranges.into_iter().next().unwrap_or_else(RowRange::all)
            }
        };
        let engine = self.engine.clone();
        let samples = blocking(move || {
            engine
                .sample_row_keys(&name.instance, &name.table, &range)
                .status()
        })
        .await?;
        let items: Vec<Result<pb::SampleRowKeysResponse, Status>> = samples
            .into_iter()
            .filter(|(k, _)| target.view.as_ref().is_none_or(|v| v.shows_key(k)))
            .map(|(k, off)| {
                Ok(pb::SampleRowKeysResponse {
                    row_key: Bytes::from(k),
                    offset_bytes: off as i64,
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(items))))
    }

    async fn mutate_row(
        &self,
        request: Request<pb::MutateRowRequest>,
    ) -> Result<Response<pb::MutateRowResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.mutateRows",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let req = request.into_inner();
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        let muts = convert::mutations(&req.mutations)?;
        if let Some(view) = &target.view {
            view.check_mutations(&req.row_key, &muts)?;
        }
        self.committer
            .write(move |engine| {
                engine
                    .mutate_row_unsynced(&name.instance, &name.table, &req.row_key, &muts)
                    .status()
            })
            .await?;
        Ok(Response::new(pb::MutateRowResponse {}))
    }

    async fn mutate_rows(
        &self,
        request: Request<pb::MutateRowsRequest>,
    ) -> Result<Response<BoxStream<pb::MutateRowsResponse>>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.mutateRows",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let req = request.into_inner();
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        // A malformed entry, or one outside the view, fails alone, like any other
        // per-entry error.
        let mut good: Vec<RowMutations> = Vec::with_capacity(req.entries.len());
        let mut malformed: Vec<Option<almanac_api::google::rpc::Status>> =
            Vec::with_capacity(req.entries.len());
        for e in req.entries {
            let converted = convert::mutations(&e.mutations).and_then(|m| {
                if let Some(view) = &target.view {
                    view.check_mutations(&e.row_key, &m)?;
                }
                Ok(m)
            });
            match converted {
                Ok(mutations) => {
                    good.push(RowMutations {
                        key: e.row_key.to_vec(),
                        mutations,
                    });
                    malformed.push(None);
                }
                Err(s) => malformed.push(Some(almanac_api::google::rpc::Status {
                    code: s.code() as i32,
                    message: s.message().to_owned(),
                    details: vec![],
                })),
            }
        }
        let results = self
            .committer
            .write(move |engine| {
                engine
                    .mutate_rows_unsynced(&name.instance, &name.table, &good)
                    .status()
            })
            .await?;
        let mut results = results.into_iter();
        let entries = malformed
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let status = match m {
                    Some(s) => s,
                    None => match results.next() {
                        Some(Ok(())) => almanac_api::google::rpc::Status::default(),
                        Some(Err(e)) => to_rpc_status(&e),
                        None => almanac_api::google::rpc::Status {
                            code: tonic::Code::Internal as i32,
                            message: "entry lost".into(),
                            details: vec![],
                        },
                    },
                };
                pb::mutate_rows_response::Entry {
                    index: i as i64,
                    status: Some(status),
                }
            })
            .collect();
        let resp = pb::MutateRowsResponse {
            entries,
            rate_limit_info: None,
        };
        Ok(Response::new(Box::pin(tokio_stream::iter(vec![Ok(resp)]))))
    }

    async fn check_and_mutate_row(
        &self,
        request: Request<pb::CheckAndMutateRowRequest>,
    ) -> Result<Response<pb::CheckAndMutateRowResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.mutateRows",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let req = request.into_inner();
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        let mut predicate = req
            .predicate_filter
            .as_ref()
            .map(convert::filter)
            .transpose()?;
        let on_match = convert::mutations(&req.true_mutations)?;
        let on_miss = convert::mutations(&req.false_mutations)?;
        if let Some(view) = &target.view {
            view.check_mutations(&req.row_key, &on_match)?;
            view.check_mutations(&req.row_key, &on_miss)?;
            predicate = Some(view.restrict(predicate));
        }
        let matched = self
            .committer
            .write(move |engine| {
                engine
                    .check_and_mutate_unsynced(
                        &name.instance,
                        &name.table,
                        &req.row_key,
                        predicate.as_ref(),
                        &on_match,
                        &on_miss,
                    )
                    .status()
            })
            .await?;
        Ok(Response::new(pb::CheckAndMutateRowResponse {
            predicate_matched: matched,
        }))
    }

    async fn ping_and_warm(
        &self,
        request: Request<pb::PingAndWarmRequest>,
    ) -> Result<Response<pb::PingAndWarmResponse>, Status> {
        names::instance(&request.get_ref().name)?;
        Ok(Response::new(pb::PingAndWarmResponse {}))
    }

    async fn read_modify_write_row(
        &self,
        request: Request<pb::ReadModifyWriteRowRequest>,
    ) -> Result<Response<pb::ReadModifyWriteRowResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Write,
            "bigtable.tables.mutateRows",
            names::requested_table(
                &request.get_ref().table_name,
                &request.get_ref().authorized_view_name,
            ),
        )?;
        let req = request.into_inner();
        let target = views::resolve(&self.engine, &req.table_name, &req.authorized_view_name)?;
        let name = target.table;
        let rules = req
            .rules
            .iter()
            .map(convert::rmw_rule)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(view) = &target.view {
            view.check_rules(&req.row_key, &rules)?;
        }
        let row = self
            .committer
            .write(move |engine| {
                engine
                    .read_modify_write_unsynced(&name.instance, &name.table, &req.row_key, &rules)
                    .status()
            })
            .await?;
        Ok(Response::new(pb::ReadModifyWriteRowResponse {
            row: Some(cells_to_family(row)),
        }))
    }

    async fn prepare_query(
        &self,
        request: Request<pb::PrepareQueryRequest>,
    ) -> Result<Response<pb::PrepareQueryResponse>, Status> {
        let now = std::time::SystemTime::now();
        let caller = crate::auth::Caller::of(&request)?;
        let sql = self.sql.clone();
        let prepared = self
            .on_sql_runtime(async move {
                crate::execute_query::prepare_query(&sql, request.into_inner(), caller, now).await
            })
            .await?;
        Ok(Response::new(prepared))
    }

    async fn execute_query(
        &self,
        request: Request<pb::ExecuteQueryRequest>,
    ) -> Result<Response<BoxStream<pb::ExecuteQueryResponse>>, Status> {
        let caller = crate::auth::Caller::of(&request)?;
        let sql = self.sql.clone();
        let stream = self
            .on_sql_runtime(async move {
                crate::execute_query::execute_query(&sql, request.into_inner(), caller).await
            })
            .await?;
        Ok(Response::new(stream))
    }

    async fn generate_initial_change_stream_partitions(
        &self,
        request: Request<pb::GenerateInitialChangeStreamPartitionsRequest>,
    ) -> Result<Response<BoxStream<pb::GenerateInitialChangeStreamPartitionsResponse>>, Status>
    {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.readChangeStream",
            &request.get_ref().table_name,
        )?;
        let stream = crate::change_stream::partitions(&self.engine, request.into_inner()).await?;
        Ok(Response::new(stream))
    }

    async fn read_change_stream(
        &self,
        request: Request<pb::ReadChangeStreamRequest>,
    ) -> Result<Response<BoxStream<pb::ReadChangeStreamResponse>>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.tables.readChangeStream",
            &request.get_ref().table_name,
        )?;
        let stream = crate::change_stream::read(&self.engine, request.into_inner()).await?;
        Ok(Response::new(stream))
    }
}
