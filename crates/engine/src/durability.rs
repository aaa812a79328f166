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
//! The leader flushes fjall's journal buffer under fjall's journal lock, then
//! `fdatasync`s the active journal file through its own handle *outside* that lock
//! ([`ActiveJournal`]), so writers keep committing into the journal while the disk
//! works. (fjall's own `persist(SyncData)` holds the lock through the fsync, which
//! stalls every writer for the length of each sync.)
//!
//! A failed fsync is remembered: every later wait fails with it, so no write is
//! acknowledged that might not be on disk.
//!
//! What this relies on in fjall's files: docs/format.md#journal-and-durability

use std::fs::File;
use std::path::{Path, PathBuf};
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

/// The journal file a sync covers: fjall's journals are `<dir>/<id>.jnl` with ids
/// counting up, the highest one active. fjall rotates by syncing the active file and
/// only then creating `<id + 1>.jnl`, so once a flush has put the data in the OS,
/// syncing the newest file there is makes it durable: either it is the file the
/// flush wrote, or that file was synced when the newer one was made.
#[derive(Debug)]
struct ActiveJournal {
    dir: PathBuf,
    id: u64,
    file: Option<File>,
}

impl ActiveJournal {
    fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            id: 0,
            file: None,
        }
    }

    fn path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.jnl"))
    }

    /// fdatasyncs the newest journal file, after a flush of fjall's buffer.
    fn sync(&mut self) -> std::io::Result<()> {
        if self.file.is_none() {
            self.id = newest_journal(&self.dir)?;
        }
        let mut id = self.id;
        while self.path(id + 1).exists() {
            id += 1;
        }
        let file = match self.file.take() {
            Some(f) if id == self.id => f,
            _ => File::open(self.path(id))?,
        };
        self.id = id;
        let file = self.file.insert(file);
        file.sync_data()
    }
}

/// The highest journal id in `dir`.
fn newest_journal(dir: &Path) -> std::io::Result<u64> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let id = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jnl"))
            .and_then(|n| n.parse::<u64>().ok());
        newest = newest.max(id);
    }
    newest.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no journal file (<id>.jnl) in {}", dir.display()),
        )
    })
}

/// Group-commit coordinator for one database.
pub struct GroupCommit {
    policy: Durability,
    written: AtomicU64,
    state: Mutex<SyncState>,
    done: Condvar,
    /// Used by the leader only (the `in_flight` flag), so never contended.
    journal: Mutex<ActiveJournal>,
    /// Told the duration of each group's flush and fsync.
    on_sync: Option<SyncSink>,
}

/// Told how long each group commit's journal flush (and fsync, under `sync`) took.
pub type SyncSink = std::sync::Arc<dyn Fn(std::time::Duration) + Send + Sync>;

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// A coordinator applying `policy` to the database in `dir`.
    pub fn new(policy: Durability, dir: &Path, on_sync: Option<SyncSink>) -> Self {
        Self {
            policy,
            written: AtomicU64::new(0),
            state: Mutex::default(),
            done: Condvar::new(),
            journal: Mutex::new(ActiveJournal::new(dir)),
            on_sync,
        }
    }

    /// Flushes the journal buffer (under fjall's lock) and, under sync, fsyncs the
    /// journal file outside it.
    fn persist(&self, db: &Database) -> Result<()> {
        db.persist(PersistMode::Buffer)?;
        if self.policy == Durability::Sync {
            self.journal
                .lock()
                .map_err(|_| Error::Storage("journal lock poisoned".into()))?
                .sync()?;
        }
        Ok(())
    }

    /// The policy in force.
    pub fn policy(&self) -> Durability {
        self.policy
    }

    /// Call after a batch was committed to the journal; returns once the policy says
    /// the batch is safe to acknowledge.
    pub fn wait_durable(&self, db: &Database) -> Result<()> {
        if self.policy == Durability::None {
            return Ok(());
        }
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
        let started = std::time::Instant::now();
        let outcome = self.persist(db);
        if let Some(sink) = &self.on_sync {
            sink(started.elapsed());
        }
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

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("almanac-durability-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_sync_follows_the_newest_journal() {
        let dir = temp("follow");
        let mut j = ActiveJournal::new(&dir);
        let e = j.sync().unwrap_err();
        assert!(e.to_string().contains("no journal file"), "{e}");
        for id in [3, 4] {
            std::fs::write(dir.join(format!("{id}.jnl")), b"x").unwrap();
        }
        std::fs::write(dir.join("10.other"), b"x").unwrap();
        j.sync().unwrap();
        assert_eq!(j.id, 4);
        // Rotations since the last sync: the newest file is found without a listing.
        std::fs::write(dir.join("5.jnl"), b"x").unwrap();
        std::fs::write(dir.join("6.jnl"), b"x").unwrap();
        std::fs::remove_file(dir.join("3.jnl")).unwrap();
        j.sync().unwrap();
        assert_eq!(j.id, 6);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The layout `ActiveJournal` relies on, checked against the fjall in use: journals
    /// are `<id>.jnl` in the database directory and a rotation (at a flush, once the
    /// journal passes 64 MB) makes `<id + 1>.jnl`.
    #[test]
    fn fjall_keeps_its_journals_where_the_sync_looks() {
        let dir = temp("fjall");
        let db = Database::builder(&dir)
            .manual_journal_persist(true)
            .open()
            .unwrap();
        let ks = db
            .keyspace("k", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        let first = newest_journal(&dir).unwrap();
        // Incompressible values (the journal compresses).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut mib = vec![0u8; 1 << 20];
        for i in 0..70u32 {
            for b in &mut mib {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            ks.insert(i.to_be_bytes(), &mib).unwrap();
        }
        db.persist(PersistMode::Buffer).unwrap();
        ks.rotate_memtable_and_wait().unwrap();
        ks.insert("b", "2").unwrap();
        assert_eq!(newest_journal(&dir).unwrap(), first + 1);
        let commit = GroupCommit::new(Durability::Sync, &dir, None);
        commit.wait_durable(&db).unwrap();
        assert_eq!(commit.journal.lock().unwrap().id, first + 1);
        drop(ks);
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
