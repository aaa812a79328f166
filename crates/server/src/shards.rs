//! Connection-pinned serving: every gRPC connection lives on one shard thread.
//!
//! On tokio's work-stealing runtime every HTTP/2 stream hyper spawns wakes an idle
//! worker to steal it, and the answer wakes the connection's worker again; a shard
//! keeps a connection on one thread instead. Why: ARCHITECTURE.md, Decisions
//! (connections pinned to shards); measurements: docs/benchmarks.md, Measurements
//! behind the defaults.
//!
//! A connection, step by step:
//! 1. The acceptor ([`Shards::accept`], on the caller's runtime) accepts it, turns
//!    Nagle's algorithm off and hands the socket to the shard with the fewest open
//!    connections.
//! 2. A shard is a tokio runtime with one worker thread and its own tonic server,
//!    fed by a channel of sockets. The connection's HTTP/2 framing, message
//!    decoding, handlers and point reads all run on that worker. Only work that must
//!    leave it does: scans and admin calls go to the shard's blocking pool, writes to
//!    the committer thread, SQL to the caller's runtime. (A one-worker multi-thread
//!    runtime, not a current-thread one, which is woken once per answer of a group of
//!    writes and sends each in its own `send`; why: ARCHITECTURE.md, Decisions.)
//! 3. There are as many shards as cores ([`shard_count`]): connections, not calls,
//!    are spread over them, the way a client's pool of connections spreads its calls.
//! 4. On shutdown the acceptor stops, each shard's server stops accepting and
//!    finishes the calls in flight, each connection closes lingering
//!    ([`ShardSocket`]), and [`Shards::join`] returns once every shard has.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use almanac_console::tls::MaybeTls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_rustls::TlsAcceptor;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::coalesce::Coalesce;

/// Pause after a failed `accept` (out of file descriptors, say) before trying again,
/// so a persistent failure does not spin a core.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// A connection as a shard's server sees it: coalesced writes over a shard socket,
/// or over TLS on it.
pub type ShardConn = Coalesce<Secured>;
/// The sockets handed to one shard.
pub type Incoming = Box<dyn tokio_stream::Stream<Item = io::Result<ShardConn>> + Send + Unpin>;
/// Resolves when the shard's server should stop accepting and drain.
pub type Stop = Pin<Box<dyn Future<Output = ()> + Send>>;
/// How a shard's server ended.
type Outcome = Result<(), tonic::transport::Error>;

/// Shards to start: one per core the process may use.
pub fn shard_count() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Why serving on the shards failed.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// A shard thread or its runtime could not start.
    #[error("cannot start a gRPC shard thread: {0}")]
    Start(io::Error),
    /// A shard's server failed.
    #[error("gRPC transport on shard {shard}: {source}")]
    Transport {
        /// The shard.
        shard: usize,
        /// What failed.
        source: tonic::transport::Error,
    },
    /// A shard thread ended without reporting (it panicked).
    #[error("gRPC shard {0} stopped unexpectedly")]
    Lost(usize),
}

struct Shard {
    sockets: mpsc::UnboundedSender<(std::net::TcpStream, Open)>,
    open: Arc<AtomicUsize>,
    done: oneshot::Receiver<Outcome>,
}

/// The running shard threads; see the module docs.
pub struct Shards {
    shards: Vec<Shard>,
    stop: watch::Sender<bool>,
    /// Counts open connections in `almanac_open_connections{listener="grpc"}`.
    metrics: Option<Arc<almanac_console::Metrics>>,
}

impl Shards {
    /// Starts `count` shard threads, each serving the sockets it is handed with the
    /// server `serve` builds (it gets the shard's sockets and its stop signal).
    pub fn start<F, Fut>(
        count: usize,
        tls: Option<TlsAcceptor>,
        serve: F,
    ) -> Result<Self, ShardError>
    where
        F: Fn(Incoming, Stop) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Outcome>,
    {
        let (stop, _) = watch::channel(false);
        let mut shards = Vec::with_capacity(count);
        for i in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .thread_name(format!("almanac-grpc-{i}"))
                .build()
                .map_err(ShardError::Start)?;
            let (sockets, rx) = mpsc::unbounded_channel();
            let (done_tx, done) = oneshot::channel();
            let mut stopped = stop.subscribe();
            let serve = serve.clone();
            let tls = tls.clone();
            std::thread::Builder::new()
                .name(format!("grpc-{i}-accept"))
                .spawn(move || {
                    let stop: Stop = Box::pin(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    });
                    // The server's accept loop runs here; its connections run on the worker.
                    let outcome = runtime.block_on(async move {
                        let incoming: Incoming = match tls {
                            None => Box::new(UnboundedReceiverStream::new(rx).map(|s| {
                                adopt(s).map(|socket| Coalesce::new(Secured::Plain(socket)))
                            })),
                            Some(tls) => {
                                let (ready, incoming) = mpsc::unbounded_channel();
                                tokio::spawn(handshakes(rx, tls, ready));
                                Box::new(UnboundedReceiverStream::new(incoming).map(Ok))
                            }
                        };
                        serve(incoming, stop).await
                    });
                    let _ = done_tx.send(outcome);
                })
                .map_err(ShardError::Start)?;
            shards.push(Shard {
                sockets,
                open: Arc::new(AtomicUsize::new(0)),
                done,
            });
        }
        Ok(Self {
            shards,
            stop,
            metrics: None,
        })
    }

    /// Counts the open connections in `metrics` too.
    pub fn with_metrics(mut self, metrics: Arc<almanac_console::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Accepts connections on `listener` and hands each to a shard until `shutdown`
    /// completes or a shard's server has ended on its own (then [`Shards::join`] says
    /// why); then tells every shard to stop.
    pub async fn accept(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                a = listener.accept() => a,
            };
            match accepted {
                Ok((socket, _)) => {
                    if let Some(ended) = self.shards.iter().position(|s| s.sockets.is_closed()) {
                        eprintln!("almanac: gRPC shard {ended} has stopped; shutting down");
                        break;
                    }
                    self.dispatch(socket);
                }
                Err(e) => {
                    eprintln!("almanac: accepting a gRPC connection failed: {e}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            }
        }
        self.stop.send_replace(true);
    }

    /// Hands `socket` to the shard with the fewest open connections.
    fn dispatch(&self, socket: TcpStream) {
        // Small gRPC frames must not wait for Nagle's algorithm and delayed ACKs (a
        // ~40 ms stall per streaming call on loopback); the frames a connection has
        // ready leave in one write instead ([`crate::coalesce`]).
        let socket = match socket.set_nodelay(true).and_then(|()| socket.into_std()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("almanac: setting up a gRPC connection failed: {e}");
                return;
            }
        };
        let Some(shard) = self
            .shards
            .iter()
            .min_by_key(|s| s.open.load(Ordering::Relaxed))
        else {
            return;
        };
        let open = Open::new(
            &shard.open,
            self.metrics
                .as_ref()
                .map(|m| m.connection(almanac_console::Listener::Grpc)),
        );
        // A shard whose server has ended drops the socket, which closes it.
        let _ = shard.sockets.send((socket, open));
    }

    /// Waits until every shard's server has finished its calls in flight; the first
    /// failure, if any.
    pub async fn join(self) -> Result<(), ShardError> {
        let mut first = Ok(());
        for (shard, s) in self.shards.into_iter().enumerate() {
            drop(s.sockets);
            let outcome = match s.done.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(source)) => Err(ShardError::Transport { shard, source }),
                Err(_) => Err(ShardError::Lost(shard)),
            };
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }
}

/// Registers a handed-over socket with the shard's runtime.
fn adopt((socket, open): (std::net::TcpStream, Open)) -> io::Result<ShardSocket> {
    socket.set_nonblocking(true)?;
    let io = TcpStream::from_std(socket)?;
    Ok(ShardSocket {
        io,
        linger: None,
        _open: open,
    })
}

/// Runs the TLS handshake of each socket handed to the shard in a task of its own
/// (at most [`almanac_console::tls::HANDSHAKE_TIMEOUT`]), and hands the finished connections to the server.
async fn handshakes(
    mut sockets: mpsc::UnboundedReceiver<(std::net::TcpStream, Open)>,
    tls: TlsAcceptor,
    ready: mpsc::UnboundedSender<ShardConn>,
) {
    while let Some(handed) = sockets.recv().await {
        let Ok(socket) = adopt(handed) else {
            continue;
        };
        let tls = tls.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            if let Some(secured) = almanac_console::tls::handshake(&tls, socket).await {
                let _ = ready.send(Coalesce::new(secured));
            }
        });
    }
}

/// A shard's connection below the coalescing: plain, or TLS (so that a coalesced
/// flush leaves as one record).
pub type Secured = MaybeTls<ShardSocket>;

/// One open connection counted against its shard (and in the metrics) until dropped.
struct Open {
    count: Arc<AtomicUsize>,
    _metric: Option<almanac_console::ConnectionGuard>,
}

impl Open {
    fn new(count: &Arc<AtomicUsize>, metric: Option<almanac_console::ConnectionGuard>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self {
            count: Arc::clone(count),
            _metric: metric,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A shard's socket: counted as one open connection of its shard while it lives,
/// and closed lingering.
///
/// Closing a socket whose peer has sent bytes not yet read (a client's last
/// WINDOW_UPDATE or PING after the final response) makes the kernel answer with a
/// reset and throw away what it had not transmitted yet: the tail of a large
/// response the client was still reading when the server stopped. So a graceful
/// close ([`AsyncWrite::poll_shutdown`]) sends FIN, then reads and discards until
/// the client closes its side, for at most [`LINGER_ON_CLOSE`].
pub struct ShardSocket {
    io: TcpStream,
    /// Set once FIN is sent: the end of the lingering.
    linger: Option<Pin<Box<tokio::time::Sleep>>>,
    _open: Open,
}

/// Longest a closing connection waits for the client to close its side.
pub const LINGER_ON_CLOSE: Duration = Duration::from_secs(2);

impl ShardSocket {
    /// Discards what the client sends until it closes, an error, or the deadline.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self
            .linger
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER_ON_CLOSE)));
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mut scratch = [0u8; 1024];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {}
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl std::fmt::Debug for ShardSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.io.fmt(f)
    }
}

impl AsyncRead for ShardSocket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for ShardSocket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.linger.is_none() {
            std::task::ready!(Pin::new(&mut me.io).poll_shutdown(cx))?;
        }
        me.poll_linger(cx).map(Ok)
    }
}

impl Connected for ShardSocket {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
#[expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests stop at the first surprise"
)]
mod tests {
    use std::sync::atomic::AtomicU8;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A stand-in server: greets each connection with its shard's number, keeps it
    /// until the client hangs up, and ends when told to stop.
    fn greeter(
        next_id: Arc<AtomicU8>,
    ) -> impl Fn(Incoming, Stop) -> Pin<Box<dyn Future<Output = Outcome>>> + Clone + Send + 'static
    {
        move |mut incoming, mut stop| {
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                loop {
                    let conn = tokio::select! {
                        () = &mut stop => return Ok(()),
                        c = incoming.next() => c,
                    };
                    let Some(Ok(mut conn)) = conn else {
                        return Ok(());
                    };
                    tokio::spawn(async move {
                        conn.write_all(&[id]).await?;
                        // Coalesce holds the first flush back for company; the second writes.
                        conn.flush().await?;
                        conn.flush().await?;
                        let mut rest = Vec::new();
                        conn.read_to_end(&mut rest).await
                    });
                }
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shard_that_ends_on_its_own_stops_the_acceptor() {
        let greet = greeter(Arc::new(AtomicU8::new(0)));
        let calls = Arc::new(AtomicU8::new(0));
        let shards = Shards::start(2, None, move |incoming, stop| {
            // One of the two servers ends at once, as a failed one would.
            let ends = calls.fetch_add(1, Ordering::Relaxed) == 1;
            let server = greet(incoming, stop);
            async move { if ends { Ok(()) } else { server.await } }
        })
        .unwrap();
        for _ in 0..100 {
            if shards.shards.iter().any(|s| s.sockets.is_closed()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        // No shutdown signal: the acceptor returns because a shard has ended.
        tokio::time::timeout(
            Duration::from_secs(10),
            shards.accept(listener, std::future::pending()),
        )
        .await
        .expect("the acceptor kept going with a shard gone");
        drop(client);
        shards.join().await.unwrap();
    }

    async fn shard_of(addr: std::net::SocketAddr) -> (tokio::net::TcpStream, u8) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut id = [0u8];
        s.read_exact(&mut id).await.unwrap();
        (s, id[0])
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_go_to_the_least_loaded_shard_and_shutdown_drains() {
        let shards = Arc::new(Shards::start(2, None, greeter(Arc::new(AtomicU8::new(0)))).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let acceptor = {
            let shards = Arc::clone(&shards);
            tokio::spawn(async move {
                shards
                    .accept(listener, async {
                        let _ = stop_rx.await;
                    })
                    .await;
            })
        };

        // Four connections held open spread two and two.
        let mut open = Vec::new();
        for _ in 0..4 {
            open.push(shard_of(addr).await);
        }
        let on =
            |open: &[(tokio::net::TcpStream, u8)], id| open.iter().filter(|c| c.1 == id).count();
        assert_eq!(
            (on(&open, 0), on(&open, 1)),
            (2, 2),
            "{:?}",
            open.iter().map(|c| c.1).collect::<Vec<_>>()
        );

        // Close one shard's two; the shard counts them gone, so the next two go there.
        let emptied = open[0].1;
        open.retain(|c| c.1 != emptied);
        for _ in 0..100 {
            // (Greeting numbers follow the order the shards started in, not their index.)
            if shards
                .shards
                .iter()
                .any(|s| s.open.load(Ordering::Relaxed) == 0)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for _ in 0..2 {
            let (s, id) = shard_of(addr).await;
            assert_eq!(id, emptied, "a new connection went to the busier shard");
            open.push((s, id));
        }

        stop_tx.send(()).unwrap();
        acceptor.await.unwrap();
        let shards = Arc::into_inner(shards).expect("the acceptor let go of the shards");
        shards.join().await.unwrap();
        // The listener is gone with the acceptor: nothing accepts any more.
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
