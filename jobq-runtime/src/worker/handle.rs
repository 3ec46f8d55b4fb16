//! `WorkerHandle`: a started worker, and its shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::shared::{Shared, lock, quietly};
use crate::Result;

/// A running worker; see [`Worker::start`](super::Worker::start).
#[derive(Debug)]
#[must_use = "dropping the handle leaves the worker running; call shutdown"]
pub struct WorkerHandle {
    shared: Arc<Shared>,
    /// The claim loops.
    claimers: TaskTracker,
    /// Heartbeat, reaper and listener.
    tasks: TaskTracker,
    completer: JoinHandle<()>,
    rescuer: JoinHandle<()>,
}

impl WorkerHandle {
    pub(super) fn new(
        shared: Arc<Shared>,
        claimers: TaskTracker,
        tasks: TaskTracker,
        completer: JoinHandle<()>,
        rescuer: JoinHandle<()>,
    ) -> Self {
        Self {
            shared,
            claimers,
            tasks,
            completer,
            rescuer,
        }
    }

    /// This worker's id.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// Payload bytes this worker holds claimed ahead of free slots right now
    /// (for tests of `claim_ahead_bytes`).
    #[doc(hidden)]
    pub fn buffered_payload_bytes(&self) -> usize {
        self.shared.buffered_bytes.load(Ordering::Relaxed)
    }

    /// How many jobs this worker holds right now (running or awaiting settlement).
    pub fn held_jobs(&self) -> usize {
        self.shared.held().len()
    }

    /// Stops claiming, waits up to `deadline` for running jobs, then cancels
    /// the rest and releases them to `pending` without counting the attempt,
    /// settles every completed job, and stops.
    ///
    /// Returns [`Error::Panicked`](crate::Error::Panicked) if a task of the worker panicked (the
    /// worker then stopped claiming at once; see [`WorkerHandle::failed`]).
    pub async fn shutdown(self, deadline: Duration) -> Result<()> {
        let Self {
            shared,
            claimers,
            tasks,
            completer,
            rescuer,
        } = self;
        shared.stop_claiming.cancel();
        // The claim loops hand back the jobs they claimed and did not start.
        claimers.wait().await;
        shared.jobs.close();
        if tokio::time::timeout(deadline, shared.jobs.wait())
            .await
            .is_err()
        {
            quietly(|| {
                tracing::info!(
                    running = shared.jobs.len(),
                    "shutdown deadline passed; cancelling running jobs and releasing them to pending"
                );
            });
            shared.stop_jobs.cancel();
            shared.jobs.wait().await;
        }
        // Every job task has handed its success to the completer by now.
        shared.stop_completer.cancel();
        let _ = completer.await;
        // Writes stuck on a row lock get one lease more.
        shared.beside_writes.close();
        let _ = tokio::time::timeout(shared.settings.lease, shared.beside_writes.wait()).await;
        // What dead job tasks owed, now that no job task is left.
        shared.stop_rescuer.cancel();
        let _ = rescuer.await;
        // Heartbeat and reaper last: held jobs keep their leases until settled.
        shared.stop_background.cancel();
        tasks.wait().await;
        match lock(&shared.failure).take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Completes when a task of the worker panicked and the worker stopped
    /// claiming; [`shutdown`](Self::shutdown) then returns the error.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub async fn failed(&self) {
        self.shared.failed.cancelled().await;
    }
}
