//! Google credentials for Cloud Bigtable: an OAuth access token from `gcp_auth` (a
//! service-account JSON named by `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
//! application-default credentials, the metadata server of a Google Cloud VM, or the
//! gcloud CLI, in that order), refreshed before it expires and put on every call as
//! `authorization: Bearer …` by an interceptor.

use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use almanac_engine::Error;
use gcp_auth::{Token, TokenProvider};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The scopes asked for: the Data API and the Table Admin API's table calls.
pub const SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/bigtable.data",
    "https://www.googleapis.com/auth/bigtable.admin.table",
];
/// A token is replaced this long before it expires.
const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);
/// After a failed refresh, the next try comes this much later.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// The shortest wait between two refreshes (a token that expires very soon).
const MIN_REFRESH_WAIT: Duration = Duration::from_secs(1);

/// Puts the current token on every call; does nothing without credentials (a
/// plain-text endpoint).
#[derive(Clone, Default)]
pub struct Auth {
    header: Option<Arc<RwLock<MetadataValue<Ascii>>>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("google", &self.header.is_some())
            .finish()
    }
}

impl Interceptor for Auth {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(header) = &self.header {
            let value = header
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            req.metadata_mut().insert("authorization", value);
        }
        Ok(req)
    }
}

fn bearer(token: &Token) -> Result<MetadataValue<Ascii>, Error> {
    format!("Bearer {}", token.as_str())
        .parse()
        .map_err(|_| Error::Storage("the Google access token is not a valid header".into()))
}

/// How long until `token` should be replaced.
fn refresh_wait(token: &Token) -> Duration {
    let left = token.expires_at() - chrono::Utc::now();
    left.to_std()
        .unwrap_or_default()
        .saturating_sub(REFRESH_BEFORE)
        .max(MIN_REFRESH_WAIT)
}

impl Auth {
    /// The current `authorization` header's value, if there are credentials.
    pub(crate) fn header(&self) -> Option<tonic::codegen::http::HeaderValue> {
        let value = self
            .header
            .as_ref()?
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        tonic::codegen::http::HeaderValue::from_bytes(value.as_encoded_bytes()).ok()
    }

    /// Finds Google credentials and fetches a first token (an error names what was
    /// tried), then keeps the token fresh on the current runtime for as long as the
    /// returned interceptor (or a clone) lives.
    pub(crate) async fn google() -> Result<Self, Error> {
        let provider = gcp_auth::provider().await.map_err(|e| {
            Error::Storage(format!(
                "no Google credentials for Cloud Bigtable ({e}): set \
                 GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run \
                 `gcloud auth application-default login`, or run on Google Cloud"
            ))
        })?;
        let token = provider.token(SCOPES).await.map_err(|e| {
            Error::Storage(format!(
                "cannot get a Google access token for Bigtable: {e}"
            ))
        })?;
        let header = Arc::new(RwLock::new(bearer(&token)?));
        tokio::spawn(refresh(
            provider,
            Arc::downgrade(&header),
            refresh_wait(&token),
        ));
        Ok(Self {
            header: Some(header),
        })
    }
}

/// Replaces the token before it expires until the store is gone.
async fn refresh(
    provider: Arc<dyn TokenProvider>,
    header: Weak<RwLock<MetadataValue<Ascii>>>,
    mut wait: Duration,
) {
    loop {
        tokio::time::sleep(wait).await;
        let Some(header) = header.upgrade() else {
            return;
        };
        match provider.token(SCOPES).await.map(|t| (bearer(&t), t)) {
            Ok((Ok(value), token)) => {
                *header.write().unwrap_or_else(PoisonError::into_inner) = value;
                wait = refresh_wait(&token);
            }
            Ok((Err(e), _)) => {
                eprintln!("almanac: refreshing the Google access token: {e}");
                wait = RETRY_AFTER;
            }
            Err(e) => {
                eprintln!(
                    "almanac: refreshing the Google access token failed ({e}); trying again \
                     in {} s",
                    RETRY_AFTER.as_secs()
                );
                wait = RETRY_AFTER;
            }
        }
    }
}
