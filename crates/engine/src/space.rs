//! The disk reserve: data writes are refused while the data directory's filesystem
//! has less free space than [`Options::min_free_bytes`](crate::Options), so the
//! journal never meets a full disk in the middle of a record. Reads, deletes of whole
//! tables and the background sweep go on; writes resume by themselves once space is
//! freed (the free space is read again at most every [`RECHECK`]).
//!
//! A refusal is [`Error::DiskFull`] naming the free space, the reserve and the flag
//! that sets it: gRPC RESOURCE_EXHAUSTED, a Timestream ThrottlingException.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How long a reading of the free space is trusted.
const RECHECK: Duration = Duration::from_millis(100);

/// Free space of one filesystem against a reserve.
pub(crate) struct SpaceGuard {
    path: PathBuf,
    reserve: u64,
    started: Instant,
    /// Milliseconds after `started` of the last reading, plus one (0: never read).
    read_at_ms: AtomicU64,
    free: AtomicU64,
}

impl SpaceGuard {
    pub(crate) fn new(path: PathBuf, reserve: u64) -> Self {
        Self {
            path,
            reserve,
            started: Instant::now(),
            read_at_ms: AtomicU64::new(0),
            free: AtomicU64::new(u64::MAX),
        }
    }

    /// Bytes free to unprivileged writers on the data directory's filesystem.
    fn read_free(&self) -> Result<u64> {
        let s = rustix::fs::statvfs(&self.path).map_err(|e| {
            Error::Storage(format!(
                "reading free space of {}: {e}",
                self.path.display()
            ))
        })?;
        Ok(s.f_bavail.saturating_mul(s.f_frsize))
    }

    /// Fails when the free space is below the reserve.
    pub(crate) fn check(&self) -> Result<()> {
        if self.reserve == 0 {
            return Ok(());
        }
        let now_ms = self.started.elapsed().as_millis() as u64 + 1;
        let read_at = self.read_at_ms.load(Ordering::Relaxed);
        let free = if read_at == 0 || now_ms.saturating_sub(read_at) >= RECHECK.as_millis() as u64 {
            let free = self.read_free()?;
            self.free.store(free, Ordering::Relaxed);
            self.read_at_ms.store(now_ms, Ordering::Relaxed);
            free
        } else {
            self.free.load(Ordering::Relaxed)
        };
        if free < self.reserve {
            return Err(Error::DiskFull(format!(
                "disk full: the data directory's filesystem has {} MiB free, under the reserve of {} MiB \
                 (serve --min-free-disk-mib); writes resume once space is freed",
                free >> 20,
                self.reserve >> 20
            )));
        }
        Ok(())
    }
}
