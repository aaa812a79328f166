//! TLS for every listener, through rustls with the ring provider: the HTTP/1.1 ones
//! (the Timestream endpoint and the console) here, the gRPC one in the server's shards
//! (with [`TlsIdentity::grpc_acceptor`], below the write coalescing, so that the
//! frames of a flush leave as one TLS record).
//!
//! A connection on a TLS listener, step by step:
//! 1. a background task accepts the TCP connection (the listener's
//!    [`accept`](axum::serve::Listener::accept) only takes finished handshakes, so a
//!    slow client never holds up the next);
//! 2. the handshake runs in its own task, for at most [`HANDSHAKE_TIMEOUT`], one of at
//!    most [`MAX_CONCURRENT_HANDSHAKES`] over every listener;
//! 3. the finished stream is handed to axum through a channel of [`READY_QUEUE`].
//!
//! Dropping the listener (a graceful shutdown) stops the background task, which closes
//! the socket.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// Longest a client may take over its handshake before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS handshakes in progress at once, over every listener; a connection that
/// arrives while this many are under way is closed at once (a flood of half-open
/// handshakes cannot hold the server's memory).
pub const MAX_CONCURRENT_HANDSHAKES: usize = 1_024;
/// Handshakes in progress (see [`MAX_CONCURRENT_HANDSHAKES`]).
static HANDSHAKES: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(MAX_CONCURRENT_HANDSHAKES);
/// Finished handshakes waiting for the server to take them.
pub const READY_QUEUE: usize = 64;
/// Pause after a failed `accept` (out of file descriptors) before trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// What went wrong loading a certificate or key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The PEM holds no usable certificate or key, or they do not match.
    #[error("{0}")]
    Invalid(String),
}

/// A server's certificate chain and private key, checked, as the rustls
/// configurations of its listeners.
#[derive(Clone)]
pub struct TlsIdentity {
    /// HTTP/1.1 listeners (ALPN `http/1.1`).
    http: Arc<ServerConfig>,
    /// The gRPC listener (ALPN `h2`).
    grpc: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Reads and checks `cert` and `key` (PEM files).
    pub fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| TlsError::Read {
                path: p.display().to_string(),
                source,
            })
        };
        Self::from_pem(&read(cert)?, &read(key)?)
    }

    /// Checks a certificate chain and key given as PEM.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Invalid(format!("certificate PEM: {e}")))?;
        if chain.is_empty() {
            return Err(TlsError::Invalid(
                "the certificate file holds no CERTIFICATE block".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsError::Invalid(format!("private key PEM: {e}")))?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Invalid(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Invalid(format!("certificate and key: {e}")))?;
        let with_alpn = |protocol: &[u8]| {
            let mut c = config.clone();
            c.alpn_protocols = vec![protocol.to_vec()];
            Arc::new(c)
        };
        Ok(Self {
            http: with_alpn(b"http/1.1"),
            grpc: with_alpn(b"h2"),
        })
    }

    /// The acceptor of the HTTP/1.1 listeners.
    pub fn http_acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(&self.http))
    }

    /// The acceptor of the gRPC listener (HTTP/2).
    pub fn grpc_acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(&self.grpc))
    }
}

/// A connection of an HTTP listener: plain TCP, or TLS over it.
pub type Conn = MaybeTls<TcpStream>;

/// A stream as accepted: plain, or TLS over it (the gRPC shards' sockets too).
pub enum MaybeTls<S> {
    /// Plain text.
    Plain(S),
    /// TLS.
    Tls(Box<TlsStream<S>>),
}

impl<S> MaybeTls<S> {
    /// The stream beneath any TLS.
    pub fn socket(&self) -> &S {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref().0,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Where a listener's connections come from.
pub enum Accepting {
    /// Straight from the socket.
    Plain(TcpListener),
    /// Finished handshakes from the background task, which stops when this drops.
    Tls {
        /// Finished handshakes.
        ready: mpsc::Receiver<(Conn, std::net::SocketAddr)>,
        /// The background task.
        task: tokio::task::JoinHandle<()>,
        /// The bound address.
        local: std::net::SocketAddr,
    },
}

impl Drop for Accepting {
    fn drop(&mut self) {
        if let Self::Tls { task, .. } = self {
            task.abort();
        }
    }
}

impl Accepting {
    /// Connections of `listener`, through TLS when `tls` is given.
    pub fn new(listener: TcpListener, tls: Option<TlsAcceptor>) -> io::Result<Self> {
        let Some(tls) = tls else {
            return Ok(Self::Plain(listener));
        };
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let task = tokio::spawn(handshakes(listener, tls, tx));
        Ok(Self::Tls { ready, task, local })
    }

    /// The next connection (retrying failed accepts, as axum's own listener does).
    pub async fn accept(&mut self) -> (Conn, std::net::SocketAddr) {
        match self {
            Self::Plain(l) => loop {
                match l.accept().await {
                    Ok((s, addr)) => return (Conn::Plain(s), addr),
                    Err(_) => tokio::time::sleep(ACCEPT_RETRY).await,
                }
            },
            Self::Tls { ready, .. } => match ready.recv().await {
                Some(conn) => conn,
                // The task ended (it only does when aborted): wait for the shutdown.
                None => std::future::pending().await,
            },
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Self::Plain(l) => l.local_addr(),
            Self::Tls { local, .. } => Ok(*local),
        }
    }
}

/// The TLS stream over `socket` once its handshake is done, or `None` when the
/// handshake fails, takes longer than [`HANDSHAKE_TIMEOUT`], or finds
/// [`MAX_CONCURRENT_HANDSHAKES`] already under way (the caller drops the connection). Every TLS listener's connections go through it.
pub async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    tls: &TlsAcceptor,
    socket: S,
) -> Option<MaybeTls<S>> {
    let _slot = HANDSHAKES.try_acquire().ok()?;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(socket)).await {
        Ok(Ok(stream)) => Some(MaybeTls::Tls(Box::new(stream))),
        _ => None,
    }
}

/// Accepts connections and runs each handshake in its own task.
async fn handshakes(
    listener: TcpListener,
    tls: TlsAcceptor,
    ready: mpsc::Sender<(Conn, std::net::SocketAddr)>,
) {
    loop {
        let (socket, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let tls = tls.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            if let Some(conn) = handshake(&tls, socket).await {
                let _ = ready.send((conn, addr)).await;
            }
        });
    }
}
