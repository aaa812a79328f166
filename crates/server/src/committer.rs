//! Durable writes without a parked thread per write: the committer.
//!
//! A write RPC (MutateRow, MutateRows, CheckAndMutateRow, ReadModifyWriteRow), step
//! by step:
//! 1. The handler converts the request on the async worker and queues a job: a
//!    closure calling one of the engine's `*_unsynced` writes.
//! 2. The committer thread takes every queued job (up to [`MAX_GROUP_JOBS`]) and runs
//!    them in order. Each commits its own journal batch, so each stays atomic and is
//!    visible at once, but none is durable yet. A group smaller than the one before
//!    sleeps [`GATHER_WAIT`] once and takes the jobs that came meanwhile: writers
//!    answered together come back a few hundred microseconds apart, and without the
//!    wait they split into two groups that alternate, each paying a full fsync (the
//!    fsync, not the wait, is what costs: its kernel work was a fifth of a write's CPU).
//!    A lone writer never waits: its group is never smaller than the one before.
//! 3. One [`Engine::sync`] covers the whole group: under `--fsync sync` one
//!    `fdatasync` for every job that wrote (group commit).
//! 4. Only then does each job's answer go back to its handler, through a oneshot
//!    that wakes the handler's task: nothing is acknowledged before it is durable.
//!
//! While the committer syncs, new jobs queue up and form the next group. No async
//! worker ever waits on the journal lock or an fsync, and no thread is handed one
//! write and parked until its sync: the costs that used to dominate a small write.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::time::Duration;

use almanac_engine::{Engine, Unsynced};
use tokio::sync::oneshot;
use tonic::Status;

use crate::status::to_status;

/// Most jobs in one group: bounds how long the first job of a group waits.
pub const MAX_GROUP_JOBS: usize = 256;
/// How long a group smaller than the one before waits once for more jobs.
pub const GATHER_WAIT: Duration = Duration::from_micros(200);

/// Answers a job once its group is durable; gets the group's sync error, if any.
type Reply = Box<dyn FnOnce(&Engine, Option<&Status>) + Send>;
/// Runs one write on the committer thread: whether it wrote, and how to answer.
type Job = Box<dyn FnOnce(&Engine) -> (bool, Reply) + Send>;

/// A handle to the committer thread; cheap to clone. The thread stops when every
/// handle is gone.
#[derive(Clone)]
pub struct Committer {
    jobs: mpsc::Sender<Job>,
}

impl Committer {
    /// Starts the committer thread over `engine`.
    pub fn start(engine: Engine) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("almanac-commit".into())
            .spawn(move || run(&engine, &queue))?;
        Ok(Self { jobs })
    }

    /// Runs `write` on the committer thread and answers once it is durable.
    pub async fn write<T: Send + 'static>(
        &self,
        write: impl FnOnce(&Engine) -> Result<Unsynced<T>, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |engine| match write(engine) {
            Ok(done) => {
                let wrote = done.wrote();
                let reply: Reply = Box::new(move |engine, sync_error| {
                    let answer = match sync_error {
                        Some(e) if wrote => Err(e.clone()),
                        _ => Ok(done.synced_by_caller(engine)),
                    };
                    let _ = tx.send(answer);
                });
                (wrote, reply)
            }
            Err(e) => (false, Box::new(move |_, _| drop(tx.send(Err(e))))),
        });
        self.jobs
            .send(job)
            .map_err(|_| Status::unavailable("the write committer has stopped"))?;
        rx.await
            .map_err(|_| Status::internal("a write job ended without an answer"))?
    }
}

/// The committer thread: groups of jobs, one sync per group.
fn run(engine: &Engine, queue: &mpsc::Receiver<Job>) {
    let mut replies: Vec<Reply> = Vec::new();
    let mut last_group = 0;
    while let Ok(first) = queue.recv() {
        let wrote = run_group(engine, queue, first, last_group, &mut replies);
        last_group = replies.len();
        let sync_error = if wrote {
            engine.sync().err().map(|e| to_status(&e))
        } else {
            None
        };
        for reply in replies.drain(..) {
            reply(engine, sync_error.as_ref());
        }
    }
}

/// Runs `first` and the jobs queued behind it, gathering once if the group is smaller
/// than `last_group`; collects their answers and tells whether any wrote.
fn run_group(
    engine: &Engine,
    queue: &mpsc::Receiver<Job>,
    first: Job,
    last_group: usize,
    replies: &mut Vec<Reply>,
) -> bool {
    let mut wrote = false;
    let mut next = Some(first);
    let mut waited = false;
    loop {
        while let Some(job) = next.take() {
            // A job that panics answers INTERNAL alone; the group goes on.
            if let Ok((w, reply)) = std::panic::catch_unwind(AssertUnwindSafe(|| job(engine))) {
                wrote |= w;
                replies.push(reply);
            }
            if replies.len() < MAX_GROUP_JOBS {
                next = queue.try_recv().ok();
            }
        }
        if waited || replies.len() >= last_group.min(MAX_GROUP_JOBS) {
            return wrote;
        }
        waited = true;
        std::thread::sleep(GATHER_WAIT);
        next = queue.try_recv().ok();
        if next.is_none() {
            return wrote;
        }
    }
}
