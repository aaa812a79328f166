//! [`RemoteStore`]: the [`WideColumnStore`] trait over a remote Bigtable's gRPC APIs.
//!
//! The trait is synchronous (the time-series layer runs on blocking threads); the store
//! owns a small tokio runtime of its own, spawns each call there and waits for its
//! answer on a plain channel, so a caller on any thread, inside another runtime or not,
//! can use it.

use std::collections::HashMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::admin::v2::bigtable_table_admin_client::BigtableTableAdminClient;
use almanac_api::google::bigtable::v2 as data;
use almanac_api::google::bigtable::v2::bigtable_client::BigtableClient;
use almanac_engine::clock::{Clock, SystemClock};
use almanac_engine::filter::RowFilter;
use almanac_engine::limits::MAX_MESSAGE_BYTES;
use almanac_engine::mutation::{Mutation, ReadModifyWriteRule};
use almanac_engine::schema::{FamilySpec, GcRule, Granularity, TableInfo, TableSpec};
use almanac_engine::{Error, ReadRequest, Row, RowMutations};
use almanac_timeseries::{Conditional, RowIter, StoreResult, WideColumnStore};
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::forward::Forwarder;
use crate::google::Auth;
use crate::retry::{self, ATTEMPT_TIMEOUT, Backoff, Call};
use crate::{mutate, read, wire};

/// How long to wait for the TCP connection to the remote Bigtable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Write requests a front-end runs at once over a remote store: each spends most of its
/// time waiting for the remote's answers, so many overlap on a few cores.
pub const WRITE_CONCURRENCY: usize = 32;
/// Calls of one batch in flight at once (CheckAndMutateRows of a write, ReadRows of a
/// query that reads each series' newest row).
const CONCURRENT_CALLS: usize = 64;
/// Worker threads of the store's runtime: calls wait on the network, and merging
/// chunks into rows is light beside what the callers' own threads do with the rows.
const RUNTIME_THREADS: usize = 2;

/// A Data API client, with the credentials' interceptor.
pub(crate) type DataClient = BigtableClient<InterceptedService<Channel, Auth>>;
/// A Table Admin API client, with the credentials' interceptor.
pub(crate) type AdminClient = BigtableTableAdminClient<InterceptedService<Channel, Auth>>;

/// Cloud Bigtable's Data API endpoint.
pub const CLOUD_DATA_ENDPOINT: &str = "https://bigtable.googleapis.com";
/// Cloud Bigtable's Table Admin API endpoint.
pub const CLOUD_ADMIN_ENDPOINT: &str = "https://bigtableadmin.googleapis.com";

/// Where a [`RemoteStore`] finds its Bigtable, and how it speaks to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `host:port` in plain-text HTTP/2 without credentials, for both APIs (an
    /// emulator, another Almanac's `--addr`).
    Plain(String),
    /// TLS with Google credentials ([`crate::google`]): the Data and Table Admin API
    /// endpoints (`https://host[:port]`), trusting the system's root certificates, or
    /// only the PEM certificates of `ca_pem`.
    Google {
        /// The Data API's endpoint.
        data: String,
        /// The Table Admin API's endpoint.
        admin: String,
        /// Root certificates to trust instead of the system's.
        ca_pem: Option<Vec<u8>>,
    },
}

impl Target {
    /// Cloud Bigtable's own endpoints, trusting the system's roots or `ca_pem`.
    pub fn cloud(ca_pem: Option<Vec<u8>>) -> Self {
        Self::Google {
            data: CLOUD_DATA_ENDPOINT.to_string(),
            admin: CLOUD_ADMIN_ENDPOINT.to_string(),
            ca_pem,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Plain(endpoint) => write!(f, "{endpoint} (plain text)"),
            Self::Google { data, admin, .. } if data == admin => {
                write!(f, "{data} (TLS, Google credentials)")
            }
            Self::Google { data, admin, .. } => {
                write!(f, "{data} and {admin} (TLS, Google credentials)")
            }
        }
    }
}

/// Opens an HTTP/2 channel to `uri`, over TLS when `tls` is given.
async fn open_channel(uri: &str, tls: Option<ClientTlsConfig>) -> StoreResult<Channel> {
    let mut target = Endpoint::from_shared(uri.to_string())
        .map_err(|e| Error::Invalid(format!("bad Bigtable endpoint {uri:?}: {e}")))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true);
    if let Some(tls) = tls {
        target = target
            .tls_config(tls)
            .map_err(|e| Error::Invalid(format!("TLS for the Bigtable endpoint {uri}: {e}")))?;
    }
    target
        .connect()
        .await
        .map_err(|e| Error::Storage(format!("cannot reach the Bigtable endpoint {uri}: {e}")))
}

/// The gRPC clients of one remote instance.
#[derive(Debug, Clone)]
pub(crate) struct Clients {
    pub(crate) data: DataClient,
    pub(crate) admin: AdminClient,
}

/// A remote Bigtable instance as the time-series layer's store.
pub struct RemoteStore {
    instance: String,
    endpoint: String,
    clients: Clients,
    forwarder: Forwarder,
    runtime: Runtime,
    clock: Arc<dyn Clock>,
}

/// The store's own runtime, stopped without waiting when the store is dropped (which
/// may happen inside another runtime, where a blocking shutdown would panic).
#[derive(Debug)]
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The error of a call made once the store's runtime is gone.
fn stopped() -> Error {
    Error::Storage("the remote store's runtime has stopped".to_string())
}

impl Runtime {
    fn handle(&self) -> StoreResult<&tokio::runtime::Handle> {
        self.0
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
            .ok_or_else(stopped)
    }
}

impl std::fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteStore")
            .field("instance", &self.instance)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl RemoteStore {
    /// Connects to `endpoint` (`host:port`, plain-text HTTP/2 as clients reach an
    /// emulator through `BIGTABLE_EMULATOR_HOST`) for the tables of `instance`
    /// (`projects/P/instances/I`). Fails if the endpoint does not accept a connection.
    pub fn connect(instance: &str, endpoint: &str) -> StoreResult<Self> {
        Self::connect_to(instance, Target::Plain(endpoint.to_string()))
    }

    /// Connects to `target` for the tables of `instance` (`projects/P/instances/I`).
    /// Fails if an endpoint does not accept a connection or, over TLS, if no Google
    /// credentials give a token.
    pub fn connect_to(instance: &str, target: Target) -> StoreResult<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("almanac-remote")
            .enable_all()
            .build()
            .map_err(|e| Error::Storage(format!("cannot start the remote store's runtime: {e}")))?;
        let runtime = Runtime(Some(runtime));
        let described = target.to_string();
        let (data, admin, auth) = spawn_wait(&runtime, async move {
            match target {
                Target::Plain(endpoint) => {
                    let uri = if endpoint.contains("://") {
                        endpoint
                    } else {
                        format!("http://{endpoint}")
                    };
                    let channel = open_channel(&uri, None).await?;
                    Ok::<_, Error>((channel.clone(), channel, Auth::default()))
                }
                Target::Google {
                    data,
                    admin,
                    ca_pem,
                } => {
                    let tls = match ca_pem {
                        Some(pem) => {
                            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem))
                        }
                        None => ClientTlsConfig::new().with_native_roots(),
                    };
                    // Credentials first: without them nothing else is worth trying.
                    let auth = Auth::google().await?;
                    let data_channel = open_channel(&data, Some(tls.clone())).await?;
                    let admin_channel = if admin == data {
                        data_channel.clone()
                    } else {
                        open_channel(&admin, Some(tls)).await?
                    };
                    Ok((data_channel, admin_channel, auth))
                }
            }
        })??;
        let forwarder = Forwarder {
            data: data.clone(),
            admin: admin.clone(),
            auth: auth.clone(),
        };
        let clients = Clients {
            data: BigtableClient::with_interceptor(data, auth.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            admin: BigtableTableAdminClient::with_interceptor(admin, auth)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        };
        Ok(Self {
            instance: instance.to_string(),
            endpoint: described,
            clients,
            forwarder,
            runtime,
            clock: Arc::new(SystemClock),
        })
    }

    /// The connections and credentials to pass a front-end's own Bigtable calls on
    /// with ([`crate::forward`]).
    pub fn forwarder(&self) -> Forwarder {
        self.forwarder.clone()
    }

    /// The store judging cell ages by `clock` instead of the system's (tests move it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The endpoint the store talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `projects/P/instances/I/tables/T`.
    fn table_name(&self, table: &str) -> String {
        format!("{}/tables/{table}", self.instance)
    }

    /// Runs `fut` on the store's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> StoreResult<T> {
        spawn_wait(&self.runtime, fut)
    }

    /// A unary admin call with retries when `idempotent`, mapped to the engine's errors.
    fn admin_call<T, F, Fut>(&self, call: Call, idempotent: bool, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnMut(AdminClient) -> Fut + Send + 'static,
        Fut: Future<Output = Result<tonic::Response<T>, Status>> + Send + 'static,
    {
        let client = self.clients.admin.clone();
        let result = self.run(unary(client, idempotent, f))?;
        result.map_err(|s| retry::store_error(&s, &call))
    }

    /// CreateTable with every family's value type (an aggregate or bytes) and the
    /// granularity of `spec`.
    pub fn create_table_spec(&self, table: &str, spec: &TableSpec) -> StoreResult<()> {
        let column_families: HashMap<String, admin::ColumnFamily> = spec
            .families
            .iter()
            .map(|(name, f)| {
                let family = admin::ColumnFamily {
                    gc_rule: wire::gc_rule(&f.gc_rule),
                    value_type: wire::value_type(f.value_type),
                };
                (name.clone(), family)
            })
            .collect();
        let granularity = match spec.granularity {
            Granularity::Millis => admin::table::TimestampGranularity::Millis,
            Granularity::Micros => admin::table::TimestampGranularity::Micros,
        };
        let request = admin::CreateTableRequest {
            parent: self.instance.clone(),
            table_id: table.to_string(),
            table: Some(admin::Table {
                column_families,
                granularity: granularity as i32,
                deletion_protection: spec.deletion_protection,
                ..Default::default()
            }),
            ..Default::default()
        };
        let call = Call {
            rpc: "CreateTable",
            table: self.table_name(table),
        };
        // Not retried: a second try of a create that went through answers ALREADY_EXISTS.
        self.admin_call(call, false, move |mut c| {
            let r = request.clone();
            async move { c.create_table(r).await }
        })
        .map(drop)
    }

    /// GetTable in `view`; `None` if the table does not exist.
    fn table(&self, table: &str, view: admin::table::View) -> StoreResult<Option<admin::Table>> {
        let name = self.table_name(table);
        let call = Call {
            rpc: "GetTable",
            table: name.clone(),
        };
        match self.admin_call(call, true, move |mut c| {
            let r = admin::GetTableRequest {
                name: name.clone(),
                view: view as i32,
            };
            async move { c.get_table(r).await }
        }) {
            Ok(t) => Ok(Some(t)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A CheckAndMutateRow request.
fn check_request(
    table_name: &str,
    key: &[u8],
    predicate: Option<&RowFilter>,
    on_match: &[Mutation],
    on_miss: &[Mutation],
) -> data::CheckAndMutateRowRequest {
    data::CheckAndMutateRowRequest {
        table_name: table_name.to_string(),
        row_key: key.to_vec().into(),
        predicate_filter: predicate.map(wire::filter),
        true_mutations: on_match.iter().map(wire::mutation).collect(),
        false_mutations: on_miss.iter().map(wire::mutation).collect(),
        ..Default::default()
    }
}

/// One SampleRowKeys stream, read whole within [`ATTEMPT_TIMEOUT`].
async fn sample_once(
    mut client: DataClient,
    table_name: &str,
) -> Result<Vec<(Vec<u8>, u64)>, Status> {
    let request = routed(
        data::SampleRowKeysRequest {
            table_name: table_name.to_string(),
            ..Default::default()
        },
        table_name,
    );
    let read = async {
        let mut stream = client.sample_row_keys(request).await?.into_inner();
        let mut samples = Vec::new();
        while let Some(s) = stream.message().await? {
            let offset = u64::try_from(s.offset_bytes).unwrap_or(0);
            samples.push((s.row_key.to_vec(), offset));
        }
        Ok(samples)
    };
    tokio::time::timeout(ATTEMPT_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err(retry::timed_out()))
}

/// One CheckAndMutateRow: whether the predicate matched.
async fn check_and_mutate_row(
    client: DataClient,
    table_name: String,
    request: data::CheckAndMutateRowRequest,
) -> StoreResult<bool> {
    let call = Call {
        rpc: "CheckAndMutateRow",
        table: table_name.clone(),
    };
    // Not retried: a try that went through would be judged again on its own result.
    let answer = unary(client, false, move |mut c| {
        let r = routed(request.clone(), &table_name);
        async move { c.check_and_mutate_row(r).await }
    })
    .await;
    answer
        .map(|a| a.predicate_matched)
        .map_err(|s| retry::store_error(&s, &call))
}

/// Spawns `fut` on `runtime` and waits for its output on a channel: no `block_on`, so
/// the caller may be inside any runtime.
fn spawn_wait<T: Send + 'static>(
    runtime: &Runtime,
    fut: impl Future<Output = T> + Send + 'static,
) -> StoreResult<T> {
    let handle = runtime.handle()?;
    let (tx, rx) = mpsc::sync_channel(1);
    handle.spawn(async move {
        // The caller is gone only if its thread died: nothing to tell.
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| stopped())
}

/// One unary call, tried again after a retryable status while tries remain.
pub(crate) async fn unary<C, T, F, Fut>(client: C, idempotent: bool, mut f: F) -> Result<T, Status>
where
    C: Clone,
    F: FnMut(C) -> Fut,
    Fut: Future<Output = Result<tonic::Response<T>, Status>>,
{
    let mut backoff = Backoff::new();
    loop {
        let status = match tokio::time::timeout(ATTEMPT_TIMEOUT, f(client.clone())).await {
            Ok(Ok(r)) => return Ok(r.into_inner()),
            Ok(Err(s)) => s,
            Err(_) => retry::timed_out(),
        };
        if !(idempotent && retry::retryable(&status)) {
            return Err(status);
        }
        match backoff.next_wait() {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return Err(status),
        }
    }
}

/// A request with the routing header Cloud Bigtable expects for a table.
pub(crate) fn routed<T>(message: T, table_name: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Ok(v) = format!("table_name={table_name}").parse() {
        req.metadata_mut().insert("x-goog-request-params", v);
    }
    req
}

impl WideColumnStore for RemoteStore {
    fn instance(&self) -> &str {
        &self.instance
    }

    fn create_table(&self, table: &str, families: &[(&str, GcRule)]) -> StoreResult<()> {
        let spec = TableSpec {
            families: families
                .iter()
                .map(|(name, rule)| {
                    let spec = FamilySpec {
                        gc_rule: rule.clone(),
                        ..FamilySpec::default()
                    };
                    (name.to_string(), spec)
                })
                .collect(),
            ..TableSpec::default()
        };
        self.create_table_spec(table, &spec)
    }

    fn delete_table(&self, table: &str) -> StoreResult<()> {
        let name = self.table_name(table);
        let call = Call {
            rpc: "DeleteTable",
            table: name.clone(),
        };
        self.admin_call(call, false, move |mut c| {
            let r = admin::DeleteTableRequest { name: name.clone() };
            async move { c.delete_table(r).await }
        })
    }

    fn table_exists(&self, table: &str) -> StoreResult<bool> {
        Ok(self.table(table, admin::table::View::NameOnly)?.is_some())
    }

    fn get_table(&self, table: &str) -> StoreResult<Option<TableInfo>> {
        Ok(self
            .table(table, admin::table::View::SchemaView)?
            .map(|t| wire::table_info(&self.instance, table, &t)))
    }

    fn list_tables(&self) -> StoreResult<Vec<String>> {
        let prefix = format!("{}/tables/", self.instance);
        let mut names = Vec::new();
        let mut page_token = String::new();
        loop {
            let request = admin::ListTablesRequest {
                parent: self.instance.clone(),
                view: admin::table::View::NameOnly as i32,
                page_token: page_token.clone(),
                ..Default::default()
            };
            let call = Call {
                rpc: "ListTables",
                table: self.instance.clone(),
            };
            let page = self.admin_call(call, true, move |mut c| {
                let r = request.clone();
                async move { c.list_tables(r).await }
            })?;
            names.extend(
                page.tables
                    .iter()
                    .filter_map(|t| t.name.strip_prefix(&prefix).map(str::to_string)),
            );
            if page.next_page_token.is_empty() {
                break;
            }
            page_token = page.next_page_token;
        }
        names.sort();
        Ok(names)
    }

    fn set_gc_rule(&self, table: &str, family: &str, rule: GcRule) -> StoreResult<()> {
        use admin::modify_column_families_request::{Modification, modification::Mod};
        let name = self.table_name(table);
        let request = admin::ModifyColumnFamiliesRequest {
            name: name.clone(),
            modifications: vec![Modification {
                id: family.to_string(),
                r#mod: Some(Mod::Update(admin::ColumnFamily {
                    gc_rule: wire::gc_rule(&rule),
                    ..Default::default()
                })),
                update_mask: Some(prost_types::FieldMask {
                    paths: vec!["gc_rule".to_string()],
                }),
            }],
            ..Default::default()
        };
        let call = Call {
            rpc: "ModifyColumnFamilies",
            table: name,
        };
        self.admin_call(call, true, move |mut c| {
            let r = request.clone();
            async move { c.modify_column_families(r).await }
        })
        .map(drop)
    }

    fn now_us(&self) -> i64 {
        self.clock.now_us()
    }

    fn write_concurrency(&self) -> usize {
        WRITE_CONCURRENCY
    }

    fn other_writers(&self) -> bool {
        true
    }

    fn check_and_mutate(
        &self,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
    ) -> StoreResult<bool> {
        let table_name = self.table_name(table);
        let request = check_request(&table_name, key, predicate, on_match, on_miss);
        let client = self.clients.data.clone();
        self.run(check_and_mutate_row(client, table_name, request))?
    }

    fn check_and_mutate_rows(
        &self,
        table: &str,
        rows: &[Conditional],
    ) -> StoreResult<Vec<StoreResult<bool>>> {
        let table_name = self.table_name(table);
        let requests: Vec<data::CheckAndMutateRowRequest> = rows
            .iter()
            .map(|r| {
                check_request(
                    &table_name,
                    &r.key,
                    r.predicate.as_ref(),
                    &r.on_match,
                    &r.on_miss,
                )
            })
            .collect();
        let client = self.clients.data.clone();
        self.run(async move {
            let mut out: Vec<Option<StoreResult<bool>>> = std::iter::repeat_with(|| None)
                .take(requests.len())
                .collect();
            let mut running = tokio::task::JoinSet::new();
            for (i, request) in requests.into_iter().enumerate() {
                if running.len() >= CONCURRENT_CALLS
                    && let Some(Ok((j, r))) = running.join_next().await
                {
                    out[j] = Some(r);
                }
                let call = check_and_mutate_row(client.clone(), table_name.clone(), request);
                running.spawn(async move { (i, call.await) });
            }
            while let Some(done) = running.join_next().await {
                if let Ok((j, r)) = done {
                    out[j] = Some(r);
                }
            }
            out.into_iter()
                .map(|r| r.unwrap_or_else(|| Err(stopped())))
                .collect()
        })
    }

    fn mutate_rows(&self, table: &str, rows: &[RowMutations]) -> StoreResult<Vec<StoreResult<()>>> {
        let name = self.table_name(table);
        let client = self.clients.data.clone();
        let rows = rows.to_vec();
        self.run(mutate::mutate_rows(client, name, rows))?
    }

    fn read_rows(
        &self,
        table: &str,
        req: ReadRequest,
        visit: &mut dyn FnMut(Row) -> ControlFlow<()>,
    ) -> StoreResult<()> {
        read::read_rows(
            self.runtime.handle()?,
            self.clients.data.clone(),
            self.table_name(table),
            req,
            visit,
        )
    }

    fn read_many(&self, table: &str, reqs: &[ReadRequest]) -> StoreResult<Vec<Vec<Row>>> {
        let handle = self.runtime.handle()?;
        let name = self.table_name(table);
        let mut out = Vec::with_capacity(reqs.len());
        for group in reqs.chunks(CONCURRENT_CALLS) {
            // Every stream of the group starts before the first is drained.
            let streams: Vec<read::Rows> = group
                .iter()
                .map(|req| {
                    read::stream(handle, self.clients.data.clone(), name.clone(), req.clone())
                })
                .collect();
            for rows in streams {
                out.push(rows.collect::<StoreResult<Vec<Row>>>()?);
            }
        }
        Ok(out)
    }

    fn read_modify_write(
        &self,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
    ) -> StoreResult<Row> {
        let table_name = self.table_name(table);
        let request = data::ReadModifyWriteRowRequest {
            table_name: table_name.clone(),
            row_key: key.to_vec().into(),
            rules: rules.iter().map(wire::read_modify_write_rule).collect(),
            ..Default::default()
        };
        let call = Call {
            rpc: "ReadModifyWriteRow",
            table: table_name.clone(),
        };
        let client = self.clients.data.clone();
        // Not retried: a try that went through would append or add twice.
        let answer = self.run(unary(client, false, move |mut c| {
            let r = routed(request.clone(), &table_name);
            async move { c.read_modify_write_row(r).await }
        }))?;
        let row = answer.map_err(|s| retry::store_error(&s, &call))?.row;
        Ok(row.map(wire::row_of).unwrap_or_else(|| Row {
            key: key.to_vec(),
            cells: Vec::new(),
        }))
    }

    fn sample_row_keys(&self, table: &str) -> StoreResult<Vec<(Vec<u8>, u64)>> {
        let table_name = self.table_name(table);
        let call = Call {
            rpc: "SampleRowKeys",
            table: table_name.clone(),
        };
        let client = self.clients.data.clone();
        let answer = self.run(async move {
            let mut backoff = Backoff::new();
            loop {
                let status = match sample_once(client.clone(), &table_name).await {
                    Ok(samples) => return Ok(samples),
                    Err(status) => status,
                };
                // Idempotent: a failed stream is asked again whole.
                if !retry::retryable(&status) {
                    return Err(status);
                }
                match backoff.next_wait() {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(status),
                }
            }
        })?;
        answer.map_err(|s| retry::store_error(&s, &call))
    }

    fn read_stream(&self, table: &str, req: ReadRequest) -> StoreResult<RowIter> {
        Ok(Box::new(read::stream(
            self.runtime.handle()?,
            self.clients.data.clone(),
            self.table_name(table),
            req,
        )))
    }
}
