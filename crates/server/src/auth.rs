//! Authentication and authorization of the server's calls ([`almanac_auth`]).
//!
//! A gRPC call, step by step:
//! 1. [`Authenticated`] (around each gRPC service) reads `authorization: Bearer TOKEN`
//!    and puts the [`Caller`] in the request's extensions; with principals defined, a
//!    call without a known token is answered UNAUTHENTICATED before any handler runs.
//! 2. The handler names the permission and resource it acts on
//!    ([`Caller::check`]); a principal whose role or scope does not reach it gets
//!    PERMISSION_DENIED naming both, before anything is read or changed.
//!
//! The Timestream endpoint authenticates by SigV4 ([`Gate::signed`]) and checks each
//! operation the same way; the console by bearer token ([`Gate::bearer`]). With no
//! principal defined every caller is [`Caller::Anyone`] and may do everything.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use almanac_auth::sigv4::{self, Authorization, ReplayGuard, SigError};
use almanac_auth::{Action, Denied, Directory, Principal, Resource};
use almanac_engine::Engine;
use almanac_sql::catalog::{TableAccess, TableRef};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Caller {
    /// Authentication is off (no principal defined): everything is allowed.
    Anyone,
    /// An authenticated principal, and the IAM policies that may grant it more than
    /// its role ([`crate::grants`]).
    Principal(Arc<Principal>, crate::grants::Grants),
}

impl Caller {
    /// The caller of a gRPC request (set by [`Authenticated`]; a request that did not
    /// pass through it is refused).
    pub fn of<T>(request: &tonic::Request<T>) -> Result<Self, Status> {
        request
            .extensions()
            .get::<Self>()
            .cloned()
            .ok_or_else(|| Status::internal("the call was not authenticated"))
    }

    /// Whether the caller may take `action`, named `permission`, on `resource`.
    pub fn allows(
        &self,
        action: Action,
        permission: &str,
        resource: &Resource<'_>,
    ) -> Result<(), Denied> {
        match self {
            Self::Anyone => Ok(()),
            Self::Principal(p, grants) => almanac_auth::check(p, action, permission, resource)
                .or_else(|denied| {
                    if grants.allow(&p.name, action, permission, resource) {
                        Ok(())
                    } else {
                        Err(denied)
                    }
                }),
        }
    }

    /// [`Caller::allows`] as a gRPC status: PERMISSION_DENIED as Bigtable words it.
    pub fn check(
        &self,
        action: Action,
        permission: &str,
        resource: &Resource<'_>,
    ) -> Result<(), Status> {
        self.allows(action, permission, resource)
            .map_err(|d| crate::status::denied(&d))
    }
}

impl Caller {
    /// The principal's name (empty while authentication is off).
    pub fn name(&self) -> &str {
        match self {
            Self::Anyone => "",
            Self::Principal(p, _) => &p.name,
        }
    }

    /// GoogleSQL over `instance`'s tables, reading only what the caller may.
    pub fn sql_scope(&self, instance: String) -> almanac_sql::Scope {
        almanac_sql::Scope {
            access: self.table_access(),
            ..almanac_sql::Scope::googlesql(instance)
        }
    }

    /// What SQL may read for this caller (`None`: everything).
    pub fn table_access(&self) -> Option<Arc<dyn TableAccess>> {
        match self {
            Self::Anyone => None,
            Self::Principal(..) => Some(Arc::new(self.clone())),
        }
    }
}

impl TableAccess for Caller {
    fn check(&self, table: TableRef<'_>) -> Result<(), String> {
        let denied = match table {
            TableRef::Bigtable { instance, table } => self.allows(
                Action::Read,
                "bigtable.tables.readRows",
                &Resource::Table { instance, table },
            ),
            TableRef::TimeSeries { database, table } => self.allows(
                Action::Read,
                "timestream:Select",
                &Resource::TsTable { database, table },
            ),
            TableRef::Database { database } => self.allows(
                Action::Read,
                "timestream:ListTables",
                &Resource::Database(database),
            ),
        };
        denied.map_err(|d| crate::status::denied(&d).message().to_owned())
    }
}

/// The server's principals and the replay guard of signed requests.
#[derive(Debug)]
pub struct Gate {
    principals: Directory,
    replays: ReplayGuard,
    /// Set once any principal has existed: authentication then stays on while the
    /// server runs, even if the file is emptied or removed (nobody passes until a
    /// principal is made again).
    on: std::sync::atomic::AtomicBool,
    /// The engine whose IAM policies may grant principals more than their roles.
    policies: std::sync::OnceLock<Engine>,
}

/// Why a request is not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    /// A bearer token is missing or unknown.
    #[error("{0}")]
    Token(String),
    /// A SigV4 signature is missing, malformed, stale, wrong or replayed.
    #[error(transparent)]
    Signature(#[from] SigError),
}

impl Gate {
    /// The principals of data directory `dir`.
    pub fn open(dir: &Path) -> Result<Arc<Self>, almanac_auth::Error> {
        Ok(Arc::new(Self {
            principals: Directory::open(dir)?,
            replays: ReplayGuard::default(),
            on: std::sync::atomic::AtomicBool::new(false),
            policies: std::sync::OnceLock::new(),
        }))
    }

    /// From now on, IAM policies in `engine` may grant principals more than their
    /// roles (set once the engine is open).
    pub fn consult_policies(&self, engine: Engine) {
        let _ = self.policies.set(engine);
    }

    fn grants(&self) -> crate::grants::Grants {
        self.policies
            .get()
            .cloned()
            .map(crate::grants::Grants::from)
            .unwrap_or_default()
    }

    /// The principals, or `None` while authentication is off (no principal has
    /// existed since the server started).
    fn principals(&self) -> Option<Arc<almanac_auth::Principals>> {
        use std::sync::atomic::Ordering::Relaxed;
        let principals = self.principals.current();
        if !principals.is_empty() {
            self.on.store(true, Relaxed);
        }
        self.on.load(Relaxed).then_some(principals)
    }

    /// The caller presenting `authorization` (a header value, `Bearer TOKEN`).
    pub fn bearer(&self, authorization: Option<&str>) -> Result<Caller, Unauthenticated> {
        let Some(principals) = self.principals() else {
            return Ok(Caller::Anyone);
        };
        let Some(value) = authorization else {
            return Err(Unauthenticated::Token(
                "Request is missing required authentication credential: expected an `authorization: Bearer TOKEN` header (a token from `almanac auth create-principal`).".into(),
            ));
        };
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .unwrap_or("");
        principals
            .by_token(token.trim())
            .map(|p| Caller::Principal(Arc::clone(p), self.grants()))
            .ok_or_else(|| {
                Unauthenticated::Token(
                    "Request had invalid authentication credentials: the bearer token is not a principal's.".into(),
                )
            })
    }

    /// The caller who signed `request` (SigV4), the server's clock at `now_secs`.
    pub fn signed(
        &self,
        request: &sigv4::Request<'_>,
        now_secs: i64,
    ) -> Result<Caller, Unauthenticated> {
        let principals = self.principals.current();
        if principals.is_empty() {
            return Ok(Caller::Anyone);
        }
        let header = request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| *v)
            .ok_or(SigError::Missing)?;
        let auth = Authorization::parse(header)?;
        let principal = principals
            .by_access_key(&auth.access_key_id)
            .ok_or(SigError::UnknownKey)?;
        let at = sigv4::verify(request, &auth, &principal.secret_access_key, now_secs)?;
        self.replays.admit(&auth.signature, at, now_secs)?;
        Ok(Caller::Principal(Arc::clone(principal), self.grants()))
    }
}

/// Wraps a gRPC service: every call is authenticated before it reaches it.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    gate: Arc<Gate>,
}

impl<S> Authenticated<S> {
    /// Wraps `inner`, authenticating through `gate`.
    pub fn new(inner: S, gate: &Arc<Gate>) -> Self {
        Self {
            inner,
            gate: Arc::clone(gate),
        }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Authenticated<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let header = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match self.gate.bearer(header) {
            Ok(caller) => {
                req.extensions_mut().insert(caller);
                let call = self.inner.call(req);
                Box::pin(call)
            }
            Err(e) => {
                let response = Status::unauthenticated(e.to_string()).into_http();
                Box::pin(async move { Ok(response) })
            }
        }
    }
}

/// What a resource name (`projects/P`, `projects/P/instances/I[/…]`,
/// `projects/P/instances/I/tables/T[/…]`) names for authorization.
fn resource_of(name: &str) -> (Option<String>, Option<&str>) {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        ["projects", p, "instances", i, "tables", t, ..] if !t.is_empty() => {
            (Some(format!("projects/{p}/instances/{i}")), Some(t))
        }
        ["projects", p, "instances", i, ..] if !i.is_empty() => {
            (Some(format!("projects/{p}/instances/{i}")), None)
        }
        _ => (None, None),
    }
}

/// Whether `caller` may take `action` (`permission`) on the resource `name` names;
/// a name of no instance (a project, or nothing parseable) is the server as a whole.
pub fn allowed_named(caller: &Caller, action: Action, permission: &str, name: &str) -> bool {
    named_check(caller, action, permission, name).is_ok()
}

fn named_check(
    caller: &Caller,
    action: Action,
    permission: &str,
    name: &str,
) -> Result<(), Denied> {
    if let Caller::Anyone = caller {
        return Ok(());
    }
    match resource_of(name) {
        (Some(instance), Some(table)) => caller.allows(
            action,
            permission,
            &Resource::Table {
                instance: &instance,
                table,
            },
        ),
        (Some(instance), None) => caller.allows(action, permission, &Resource::Instance(&instance)),
        _ => caller.allows(action, permission, &Resource::Server),
    }
}

/// [`allowed_named`] for a gRPC request: PERMISSION_DENIED (or the refusal of an
/// unauthenticated call) when not.
pub fn check_named<T>(
    request: &tonic::Request<T>,
    action: Action,
    permission: &str,
    name: &str,
) -> Result<(), Status> {
    let caller = Caller::of(request)?;
    named_check(&caller, action, permission, name).map_err(|d| crate::status::denied(&d))
}

/// The action a Bigtable permission needs (as the predefined roles grant them).
pub fn action_of(permission: &str) -> Action {
    let verb = permission.rsplit('.').next().unwrap_or("");
    match verb {
        "readRows" | "sampleRowKeys" | "get" | "list" | "readChangeStream" | "executeQuery" => {
            Action::Read
        }
        "mutateRows" | "generateConsistencyToken" | "checkConsistency" => Action::Write,
        _ => Action::Administer,
    }
}

impl almanac_console::Gatekeeper for Gate {
    fn admit(&self, authorization: Option<&str>) -> Result<almanac_console::Visitor, String> {
        let caller = self.bearer(authorization).map_err(|e| e.to_string())?;
        let (whole_server, admin) = match &caller {
            Caller::Anyone => (true, true),
            Caller::Principal(p, _) => {
                let all = p.scope == almanac_auth::Scope::All;
                (all, all && p.role == almanac_auth::Role::Admin)
            }
        };
        Ok(almanac_console::Visitor {
            whole_server,
            admin,
            tables: caller.table_access(),
        })
    }
}
