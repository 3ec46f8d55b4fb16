//! What every task of a worker shares, and nothing else: the database, the
//! configuration, the held jobs, the settle writes' metrics and the
//! signals that stop the tasks. Each task's own state lives with the task
//! (the claim pipeline's in [`Pipeline`](super::pipeline::Pipeline), the
//! settle turn's in [`SettleTurn`](super::turn::SettleTurn), the upkeep
//! tasks' in theirs).

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::held::HeldJobs;
use super::settings::Settings;
use super::util::{lock, quietly};
use crate::error::Error;
use crate::metrics::WorkerMetrics;
use crate::store::{Fence, Releases, Settled, Store};

/// State shared by all of a worker's tasks.
#[derive(Debug)]
pub(super) struct Shared {
    /// The database.
    pub(super) store: Store,
    /// The configured durations and limits.
    pub(super) settings: Settings,
    /// Written to `claimed_by`.
    pub(super) worker_id: String,
    /// The served queues' names, in the order they were configured.
    pub(super) queue_names: Vec<String>,
    /// The jobs claimed and not settled yet: the claim pipeline adds them,
    /// settles forget them, the heartbeat renews and stops them.
    pub(super) held: HeldJobs,
    /// The settle writes' metric handles (the completer's batches, the
    /// attempts' and the rescuer's transitions).
    pub(super) metrics: WorkerMetrics,
    /// Stops the claim loops and the cron schedules.
    pub(super) stop_claiming: CancellationToken,
    /// Stops the heartbeat and the upkeep tasks, last.
    pub(super) stop_background: CancellationToken,
    /// Fired when a shutdown's deadline has passed: every write still going
    /// (a settle, a release, a claim being taken back) is given up on.
    pub(super) deadline_passed: CancellationToken,
    /// Fired when a worker task panicked: the worker stops.
    pub(super) failed: CancellationToken,
    /// The first such panic, returned by `shutdown`.
    failure: Mutex<Option<Error>>,
    /// Told each time a settle of this worker's went through: the slots
    /// of a limited queue free with its jobs' settles, so its claim loop,
    /// held back by the limit, claims again at once.
    pub(super) settled: tokio::sync::Notify,
    /// The outputs of succeeded jobs waiting for the completer, by id:
    /// written with their completion, forgotten once their batch is done.
    pub(super) outputs: Mutex<std::collections::HashMap<i64, String>>,
    /// The concurrency keys of the successes handed to the completer,
    /// by job id: released once their completion has committed.
    pub(super) completed_keys: Mutex<std::collections::HashMap<i64, String>>,
    /// The successes handed to the completer whose jobs have dependents
    /// in a workflow: released once their completion has committed.
    pub(super) completed_flows: Mutex<std::collections::HashMap<i64, Releases>>,
    /// The concurrency keys that have a rate (`jobq_key_rates`), as the
    /// pause loop read them last: a claim takes starts for their jobs.
    pub(super) rated_keys: std::sync::RwLock<std::collections::HashSet<String>>,
    /// What the database watcher covers (the listener's, see
    /// [`Store::listen`]): idle claim loops and the pause loop poll only
    /// as a safety net while it does.
    pub(super) watch: crate::wakeup::Watch,
}

impl Shared {
    pub(super) fn new(
        store: Store,
        settings: Settings,
        worker_id: String,
        queue_names: Vec<String>,
    ) -> Self {
        Self {
            store,
            held: HeldJobs::new(settings.lease, settings.lease_margin()),
            settings,
            worker_id,
            queue_names,
            metrics: WorkerMetrics::new(),
            stop_claiming: CancellationToken::new(),
            stop_background: CancellationToken::new(),
            deadline_passed: CancellationToken::new(),
            failed: CancellationToken::new(),
            failure: Mutex::new(None),
            settled: tokio::sync::Notify::new(),
            completed_keys: Mutex::new(std::collections::HashMap::new()),
            completed_flows: Mutex::new(std::collections::HashMap::new()),
            outputs: Mutex::new(std::collections::HashMap::new()),
            rated_keys: std::sync::RwLock::new(std::collections::HashSet::new()),
            watch: crate::wakeup::Watch::default(),
        }
    }

    /// Releases the concurrency keys of `jobs` whose attempts left them,
    /// once that has committed: the next blocked jobs of those keys become
    /// `pending` (see `Store::release_keys`). A failed release is only
    /// logged: the sweep of every key makes it up.
    pub(super) async fn release_keys(&self, keys: &[String]) {
        if keys.is_empty() {
            return;
        }
        match self.store.release_keys(keys).await {
            Ok(unblocked) if unblocked > 0 => {
                for queue in &self.queue_names {
                    crate::wakeup::notify(queue);
                }
            }
            Ok(_) => {}
            Err(error) => quietly(|| {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    keys = keys.len(),
                    "releasing concurrency keys failed; the key sweep releases them"
                );
            }),
        }
    }

    /// Releases what the jobs `settled` (of a workflow or a batch, settled
    /// for good) hold back, once that has committed: the ready dependents
    /// and callbacks become `pending`, those that cannot run any more are
    /// cancelled (see `Store::release_dependents`). A failed release is
    /// only logged: the sweep makes it up.
    pub(super) async fn release_dependents(&self, settled: &Settled) {
        if settled.is_empty() {
            return;
        }
        crate::worker::inject::point!(BeforeRelease, &self.queue_names[0]);
        if let Err(error) = self.store.release_dependents(settled).await {
            quietly(|| {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    jobs = settled.len(),
                    "releasing the jobs that depend on settled ones failed; the sweep releases them"
                );
            });
        }
    }

    /// Takes the jobs of workflows and batches among the completed
    /// `fences` out of [`completed_flows`](Self::completed_flows).
    pub(super) fn take_completed_flows(&self, fences: &[crate::store::Fence]) -> Settled {
        let mut flows = self
            .completed_flows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut settled = Settled::default();
        if flows.is_empty() {
            return settled;
        }
        for fence in fences {
            if let Some(releases) = flows.remove(&fence.id) {
                settled.push(fence.id, releases);
            }
        }
        settled
    }

    /// Takes the concurrency keys of the completed `fences` out of
    /// [`completed_keys`](Self::completed_keys).
    pub(super) fn take_completed_keys(&self, fences: &[crate::store::Fence]) -> Vec<String> {
        let mut keys = self
            .completed_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if keys.is_empty() {
            return Vec::new();
        }
        fences.iter().filter_map(|f| keys.remove(&f.id)).collect()
    }

    /// Keeps the output of succeeded job `id` for the completer.
    pub(super) fn keep_output(&self, id: i64, output: String) {
        lock(&self.outputs).insert(id, output);
    }

    /// The outputs kept for `fences` (the others have none).
    pub(super) fn outputs_of(
        &self,
        fences: &[crate::store::Fence],
    ) -> Vec<(crate::store::Fence, String)> {
        let outputs = lock(&self.outputs);
        if outputs.is_empty() {
            return Vec::new();
        }
        fences
            .iter()
            .filter_map(|f| outputs.get(&f.id).map(|o| (*f, o.clone())))
            .collect()
    }

    /// Forgets the outputs of `fences` (their batch is done or given up).
    pub(super) fn forget_outputs(&self, fences: &[crate::store::Fence]) {
        let mut outputs = lock(&self.outputs);
        if !outputs.is_empty() {
            for f in fences {
                outputs.remove(&f.id);
            }
        }
    }

    /// Stops the worker because a task failed; `shutdown` returns the first failure.
    pub(super) fn fail(&self, error: Error) {
        quietly(|| {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "a worker task failed; the worker stops"
            );
        });
        lock(&self.failure).get_or_insert(error);
        self.stop_claiming.cancel();
        self.failed.cancel();
    }

    /// The first failure, if a task failed (taken once, by the shutdown).
    pub(super) fn take_failure(&self) -> Option<Error> {
        lock(&self.failure).take()
    }
}

impl crate::cancels::Holder for Shared {
    fn stop_lost(&self, fence: Fence) -> bool {
        self.held.stop_lost(fence)
    }
}
