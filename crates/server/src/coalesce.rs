//! Fewer `writev(2)` calls per HTTP/2 connection: write coalescing.
//!
//! h2 sends a DATA frame of more than 256 bytes straight from the message buffer
//! (a vectored write) and cannot encode another frame until that one is flushed. So
//! a ReadRows answer with a 1 KB cell took two `writev` calls, one for HEADERS and
//! DATA and one for the trailers, and every call on loopback also runs the
//! receiver's TCP stack: about a quarter of the server's CPU on point reads.
//!
//! [`Coalesce`] sits between h2 and the socket:
//! 1. Writes are copied into a buffer (up to [`MAX_BUFFERED`]; past that the buffer
//!    is written out first and a large write goes straight to the socket).
//! 2. The first flush that finds bytes waiting is deferred: it answers ready and
//!    wakes the connection task, so the frames h2 encodes next (the trailers, other
//!    streams' answers) join the same buffer.
//! 3. The next flush writes everything in one call. h2 flushes at the end of every
//!    poll of the connection and the deferral woke the task, so nothing waits longer
//!    than one more poll; shutdown writes what is left before closing.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Most bytes held back; a write that would pass it drains the buffer first.
pub const MAX_BUFFERED: usize = 64 * 1024;

/// An I/O stream whose writes are coalesced; see the module docs.
#[derive(Debug)]
pub struct Coalesce<T> {
    io: T,
    buf: Vec<u8>,
    /// Bytes at the front of `buf` already written.
    written: usize,
    /// A flush was deferred: the next one writes.
    deferred: bool,
}

impl<T> Coalesce<T> {
    /// Wraps `io`.
    pub fn new(io: T) -> Self {
        Self {
            io,
            buf: Vec::new(),
            written: 0,
            deferred: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Writes the buffer out.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buf.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Makes room for `len` more bytes; false when they should bypass the buffer.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.buf.len() + len <= MAX_BUFFERED {
            return Poll::Ready(Ok(true));
        }
        ready!(self.poll_drain(cx))?;
        Poll::Ready(Ok(len < MAX_BUFFERED))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if !ready!(me.poll_room(cx, data.len()))? {
            return Pin::new(&mut me.io).poll_write(cx, data);
        }
        me.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let len = bufs.iter().map(|b| b.len()).sum();
        if !ready!(me.poll_room(cx, len))? {
            return Pin::new(&mut me.io).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            me.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.buf.is_empty() {
            me.deferred = false;
            return Pin::new(&mut me.io).poll_flush(cx);
        }
        if !me.deferred {
            me.deferred = true;
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(me.poll_drain(cx))?;
        me.deferred = false;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}

impl Connected for Coalesce<crate::shards::Secured> {
    type ConnectInfo = <crate::shards::ShardSocket as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.socket().connect_info()
    }
}
