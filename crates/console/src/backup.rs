//! `GET /api/backup`: the whole server as one dump stream (`almanac_engine::dump`),
//! taken at one instant while the server keeps serving, with the principals file.
//! `almanac backup DIR` saves it; `almanac restore DIR` loads it into a new data
//! directory. Only an administrator of the whole server may take it.

use std::io::Write;
use std::sync::Arc;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use crate::{Console, Error, Visitor};

/// Bytes per chunk handed to the connection.
const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks in flight between the dump and the connection: a slow client holds back
/// the dump rather than the server's memory.
const CHUNKS_IN_FLIGHT: usize = 8;

/// Hands the dump's bytes to the response body in chunks; fails once the client has
/// gone, which stops the dump.
struct ToBody {
    chunk: Vec<u8>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl ToBody {
    fn send(&mut self) -> std::io::Result<()> {
        let chunk = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_BYTES));
        self.tx
            .blocking_send(Ok(Bytes::from(chunk)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client gone"))
    }
}

impl Write for ToBody {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.chunk.extend_from_slice(buf);
        if self.chunk.len() >= CHUNK_BYTES {
            self.send()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.chunk.is_empty() {
            self.send()?;
        }
        Ok(())
    }
}

/// `GET /api/backup`.
pub async fn backup(State(c): State<Arc<Console>>, Extension(v): Extension<Visitor>) -> Response {
    if !v.admin {
        return Error::Forbidden(
            "a backup holds every table and principal: it needs an admin principal whose scope is everything".into(),
        )
        .into_response();
    }
    let mut files = Vec::new();
    for path in &c.backup_files {
        match std::fs::read(path) {
            Ok(bytes) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                files.push((name, bytes));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Error::Engine(e.into()).into_response(),
        }
    }
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let engine = c.engine.clone();
    tokio::task::spawn_blocking(move || {
        let mut out = ToBody {
            chunk: Vec::with_capacity(CHUNK_BYTES),
            tx: tx.clone(),
        };
        if let Err(e) = engine.dump(&mut out, &files) {
            // The status is sent already: the stream ends short of its trailer, which
            // `almanac backup` and `almanac restore` refuse.
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        })),
    )
        .into_response()
}
