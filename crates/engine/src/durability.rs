//! When an acknowledged write is on disk: the fsync policy and group commit.
//!
//! Every write batch goes to fjall's journal buffer. What happens next is the policy
//! (under sync and buffer fjall does not flush that buffer by itself: the group
//! commit below writes it out once per group):
//! - [`Durability::Sync`] (default): before a write is acknowledged the journal is
//!   `fdatasync`ed. Concurrent writers share one fsync (group commit): the first
//!   writer to find no sync in flight becomes the leader, syncs everything written
//!   so far, and wakes the others whose batches that sync covered.
//! - [`Durability::Buffer`]: the journal is flushed to the OS before the ack. A
//!   process crash (`kill -9`) loses nothing; a power loss may lose recent writes.
//! - [`Durability::None`]: nothing is forced; for bulk loads that can be redone.
//!
//! A failed fsync poisons fjall (it refuses further writes), and the error reaches
//! every waiting writer: no write is acknowledged that might not be on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use fjall::{Database, PersistMode};

use crate::error::{Error, Result};

/// The fsync policy; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fdatasync before acknowledging (group commit).
    #[default]
    Sync,
    /// Flush to the OS before acknowledging; survives process crashes.
    Buffer,
    /// No flush; survives nothing but a clean shutdown.
    None,
}

impl std::str::FromStr for Durability {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sync" => Ok(Self::Sync),
            "buffer" => Ok(Self::Buffer),
            "none" => Ok(Self::None),
            _ => Err(Error::Invalid(format!(
                "fsync policy {s:?} is not one of sync, buffer, none"
            ))),
        }
    }
}

#[derive(Debug, Default)]
struct SyncState {
    /// Every batch counted in `written` up to this number is durable.
    synced: u64,
    /// A leader is syncing now.
    in_flight: bool,
    /// The last sync failed: refuse to acknowledge anything after it.
    failed: Option<String>,
}

/// Group-commit coordinator for one database.
#[derive(Debug)]
pub struct GroupCommit {
    policy: Durability,
    written: AtomicU64,
    state: Mutex<SyncState>,
    done: Condvar,
}

impl GroupCommit {
    /// A coordinator applying `policy`.
    pub fn new(policy: Durability) -> Self {
        Self {
            policy,
            written: AtomicU64::new(0),
            state: Mutex::default(),
            done: Condvar::new(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Durability {
        self.policy
    }

    /// Call after a batch was committed to the journal; returns once the policy says
    /// the batch is safe to acknowledge.
    pub fn wait_durable(&self, db: &Database) -> Result<()> {
        let mode = match self.policy {
            Durability::None => return Ok(()),
            Durability::Buffer => PersistMode::Buffer,
            Durability::Sync => PersistMode::SyncData,
        };
        let mine = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        let mut st = self
            .state
            .lock()
            .map_err(|_| Error::Storage("sync lock poisoned".into()))?;
        loop {
            if let Some(e) = &st.failed {
                return Err(Error::Storage(format!("an earlier fsync failed: {e}")));
            }
            if st.synced >= mine {
                return Ok(());
            }
            if !st.in_flight {
                break;
            }
            st = self
                .done
                .wait(st)
                .map_err(|_| Error::Storage("sync lock poisoned".into()))?;
        }
        st.in_flight = true;
        let target = self.written.load(Ordering::SeqCst);
        drop(st);
        let outcome = db.persist(mode);
        let mut st = self
            .state
            .lock()
            .map_err(|_| Error::Storage("sync lock poisoned".into()))?;
        st.in_flight = false;
        match outcome {
            Ok(()) => st.synced = st.synced.max(target),
            Err(e) => st.failed = Some(e.to_string()),
        }
        self.done.notify_all();
        match &st.failed {
            Some(e) => Err(Error::Storage(format!("fsync failed: {e}"))),
            None => Ok(()),
        }
    }
}
