//! What a worker's tasks share: settings, the held jobs, the stop signals.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jobq_core::{Registry, States};

use crate::options::DEFAULT_LEASE;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, Span};

use crate::error::Error;
use crate::metrics::{QueueMetrics, WorkerMetrics};
use crate::store::{Fence, Store, Transition};

/// Runs `log` (a tracing macro), swallowing a panic of the subscriber (one
/// that writes to a closed pipe panics): a log line must never stop a
/// settle or a worker loop.
pub(super) fn quietly(log: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(log));
}

/// The error for a panic caught in `task`.
pub(super) fn panicked(task: &'static str, panic: &(dyn Any + Send)) -> Error {
    Error::Panicked {
        task,
        message: panic_message(panic),
    }
}

/// What a caught panic says.
pub(super) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "its payload is not a string (std::panic::panic_any), so the panic hook's report on stderr is the place to look".to_owned()
    }
}

/// A served queue, as configured.
#[derive(Debug, Clone)]
pub(super) struct QueueSpec {
    pub(super) name: String,
    pub(super) concurrency: usize,
    pub(super) checked: bool,
}

/// A worker's durations and limits, as configured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) lease: Duration,
    pub(super) heartbeat: Option<Duration>,
    pub(super) heartbeats_enabled: bool,
    pub(super) poll: Duration,
    pub(super) reap: Option<Duration>,
    pub(super) shutdown_timeout: Duration,
    /// Retention of `done` and `cancelled` rows, if this worker prunes them.
    pub(super) prune_finished: Option<Duration>,
    /// Retention of `failed` rows, if this worker prunes them.
    pub(super) prune_failed: Option<Duration>,
    /// Most payload bytes a queue's claim loop holds claimed ahead of free slots.
    pub(super) claim_ahead_bytes: usize,
    /// How often the stats gauges are refreshed, if at all.
    pub(super) stats_gauges: Option<Duration>,
    /// How often the worker refreshes its row in `jobq_workers`.
    pub(super) presence: Duration,
}

/// Default of [`WorkerBuilder::presence_interval`](super::WorkerBuilder::presence_interval).
pub const DEFAULT_PRESENCE_INTERVAL: Duration = Duration::from_secs(10);

/// Default of [`WorkerBuilder::claim_ahead_bytes`](super::WorkerBuilder::claim_ahead_bytes): 64 MiB per queue.
pub const DEFAULT_CLAIM_AHEAD_BYTES: usize = 64 << 20;

impl Default for Settings {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            heartbeat: None,
            heartbeats_enabled: true,
            poll: Duration::from_millis(500),
            reap: None,
            shutdown_timeout: Duration::from_secs(30),
            prune_finished: None,
            prune_failed: None,
            claim_ahead_bytes: DEFAULT_CLAIM_AHEAD_BYTES,
            stats_gauges: None,
            presence: DEFAULT_PRESENCE_INTERVAL,
        }
    }
}

impl Settings {
    pub(super) fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    /// How long before its lease can end a worker stops an attempt it could
    /// not renew: a tenth of the lease (the reaper of another worker may
    /// take the job the moment the lease has ended, and this worker's clock,
    /// timers and scheduling are a little late), but no more than half the
    /// time a heartbeat leaves to spare, so that a heartbeat interval close
    /// to the lease does not stop attempts whose renewal is on its way.
    pub(super) fn lease_margin(&self) -> Duration {
        let spare = self.lease.saturating_sub(self.heartbeat_interval());
        (self.lease / 10).min(spare / 2)
    }

    pub(super) fn reap_interval(&self) -> Duration {
        self.reap.unwrap_or(self.lease / 6)
    }

    /// How often the pruner runs: every minute, or every quarter of the
    /// shortest retention if that is shorter (at least every 100 ms).
    pub(super) fn prune_interval(&self) -> Option<Duration> {
        let shortest = match (self.prune_finished, self.prune_failed) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some((shortest / 4).clamp(Duration::from_millis(100), Duration::from_secs(60)))
    }
}

/// A job this worker holds, claimed and not yet settled: the handles its
/// claim loop, its task, its settlement and the heartbeat share (one
/// allocation per job).
#[derive(Debug)]
pub(super) struct Held {
    /// Cancels the running attempt.
    cancel: CancellationToken,
    /// Its lease by this host's clock (see [`Lease`]).
    lease: Mutex<Lease>,
    /// Set before `cancel` when the lease was lost: the attempt must not settle.
    lease_lost: AtomicBool,
    /// Set when the attempt has ended and its outcome is being settled: a
    /// heartbeat that then finds the row gone from `processing` is seeing
    /// that settle (a fenced-out one is reported by the settle), not a lost lease.
    ended: AtomicBool,
}

/// The latest a job's lease can end, by this host's clock: the moment the
/// last renewal that went through (or the claim) was *sent*, plus the lease
/// it asked for. The database sets the lease from its own clock when the
/// statement runs, which is later, so the lease there ends no earlier than
/// this (two clocks ticking at one rate). A renewal whose answer never came
/// — an error, or no answer within the statement deadline — moves nothing:
/// the worker cannot know whether it went through.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// When the statement that set it was sent.
    sent: Instant,
    /// `sent` plus the lease it asked for.
    ends: Instant,
}

impl Held {
    fn new(cancel: CancellationToken, claimed: Instant, lease: Duration) -> Self {
        Self {
            cancel,
            lease: Mutex::new(Lease {
                sent: claimed,
                ends: claimed + lease,
            }),
            lease_lost: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        }
    }

    /// A renewal sent at `sent`, asking for `lease` from then, went
    /// through. An older one answering after a newer one changes nothing
    /// (the database keeps the newer one's, as it ran later).
    pub(super) fn renewed(&self, sent: Instant, lease: Duration) {
        let mut held = lock(&self.lease);
        if sent >= held.sent {
            *held = Lease {
                sent,
                ends: sent + lease,
            };
        }
    }

    /// When its lease can end, by this host's clock.
    fn lease_ends(&self) -> Instant {
        lock(&self.lease).ends
    }

    /// The token that cancels the running attempt.
    pub(super) fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the heartbeat found the lease lost: the attempt must not settle.
    pub(super) fn lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::SeqCst)
    }

    /// The lease was lost: marks it so and stops the attempt.
    pub(super) fn lose_lease(&self) {
        self.lease_lost.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether the attempt has ended and its outcome is being settled.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// The attempt has ended; its outcome is settled next.
    pub(super) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
    }
}

/// State shared by a worker's tasks.
#[derive(Debug)]
pub(super) struct Shared {
    /// The database.
    pub(super) store: Store,
    /// The handle the worker was built on (the stats gauges read through it).
    pub(super) jobq: crate::Jobq,
    /// The handlers, by job name.
    pub(super) registry: Registry,
    /// What handlers taking `State<T>` are given.
    pub(super) states: States,
    /// The configured durations and limits.
    pub(super) settings: Settings,
    /// Written to `claimed_by`.
    pub(super) worker_id: String,
    /// What the worker publishes of itself in `jobq_workers`.
    pub(super) presence: Presence,
    /// The jobs claimed and not settled yet (see [`Shared::hold`]).
    pub(super) held: Mutex<HashMap<Fence, Arc<Held>>>,
    /// Stops the claim loops.
    pub(super) stop_claiming: CancellationToken,
    /// Cancels running jobs (shutdown deadline passed); they are released to `pending`.
    pub(super) stop_jobs: CancellationToken,
    /// Makes the completer drain and stop.
    pub(super) stop_completer: CancellationToken,
    /// Stops heartbeat and reaper, last.
    pub(super) stop_background: CancellationToken,
    /// Fired when a shutdown's deadline has passed: every write still going
    /// (a settle, a release, a claim being taken back) is given up on.
    pub(super) deadline_passed: CancellationToken,
    /// The served queues' names.
    pub(super) queue_names: Vec<String>,
    /// Which served queues are paused, as last read by the pause loop
    /// (`pause::pause_loop`); `None` until its first read.
    pub(super) pauses: tokio::sync::watch::Sender<Option<Vec<String>>>,
    /// Each served queue's metric handles, in the order of `queue_names`.
    pub(super) queue_metrics: Vec<Arc<QueueMetrics>>,
    /// The worker's other metric handles.
    pub(super) metrics: WorkerMetrics,
    pub(super) completions: mpsc::Sender<Fence>,
    /// Settles owed by job tasks that died (see `run::Settlement`).
    pub(super) rescues: mpsc::UnboundedSender<Transition>,
    /// Makes the rescuer drain and stop.
    pub(super) stop_rescuer: CancellationToken,
    /// Fired when a worker task panicked: the worker stops.
    pub(super) failed: CancellationToken,
    /// The first such panic, returned by `shutdown`.
    pub(super) failure: Mutex<Option<Error>>,
    pub(super) jobs: TaskTracker,
    /// Taken around a settle batch and a heartbeat, which both update many
    /// of this worker's rows in one statement: run side by side they can
    /// lock the same rows in opposite orders, and PostgreSQL reports that
    /// deadlock only after `deadlock_timeout` (1 s), a second in which
    /// settles stall. (Locking the rows in id order first instead cost a
    /// worker of concurrency 1 a third of its jobs/s: a row lock is a WAL
    /// record of its own.)
    ///
    /// A heartbeat waits for the turn only briefly (`heartbeat::TURN_WAIT`): a settle
    /// that holds it longer is waiting on a row lock someone else holds (a
    /// caller's transaction with a duplicate `enqueue_in` of that job's
    /// key), and the heartbeat then renews every lease but those of the
    /// batch being settled ([`Shared::settling`]) without the turn. Disjoint
    /// rows cannot deadlock, and a lock on one row delays no other lease.
    pub(super) bulk_writes: tokio::sync::Mutex<()>,
    /// Payload bytes claimed ahead of free slots, all queues (see `claim_ahead_bytes`).
    pub(super) buffered_bytes: AtomicUsize,
    /// The batch of successes being written under the turn.
    pub(super) settling: Mutex<Vec<Fence>>,
    /// Successes of batches whose write outlasted `complete::STUCK_AFTER` (waiting on
    /// a row lock): their writes finish beside, without the turn, and
    /// heartbeats leave these rows out of the plain renewal (their own write
    /// holds some of them) and renew them with one that skips locked rows
    /// (`renew_stuck`).
    pub(super) stuck: Mutex<Vec<Fence>>,
    /// Those writes, waited for by `shutdown` (at most one lease).
    pub(super) beside_writes: TaskTracker,
    /// Held by a heartbeat that renews beside a stuck settle; a new settle
    /// batch takes it once before writing, so it never runs beside such a
    /// heartbeat that did not exclude its rows.
    pub(super) beside: tokio::sync::Mutex<()>,
    /// Told how each attempt ended, before its settle is written
    /// (`jobq_runtime::testing`'s drain listens; `None` otherwise).
    pub(super) observer: Option<Observer>,
}

/// Where a worker reports each attempt's end (see [`Shared::observer`]).
pub(crate) type Observer = tokio::sync::mpsc::UnboundedSender<Observed>;

/// How one attempt ended, as the worker settles it.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) struct Observed {
    pub(crate) id: i64,
    pub(crate) job_name: String,
    pub(crate) attempt: u32,
    pub(crate) ended: Ended,
}

/// See [`Observed`].
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) enum Ended {
    Succeeded,
    /// Back to `pending`, to run again after the delay.
    Retried(jobq_core::JobError, Duration),
    Snoozed(Duration),
    Failed(jobq_core::JobError),
    /// Cancelled by the shutdown deadline or a lost lease.
    Interrupted,
}

impl Shared {
    /// The jobs this worker holds.
    pub(super) fn held(&self) -> MutexGuard<'_, HashMap<Fence, Arc<Held>>> {
        lock(&self.held)
    }

    /// Registers a claimed job as held (heartbeats renew its lease from now
    /// on), its attempt cancelled by `stop_jobs`.
    ///
    /// `claimed` is when the claim was sent: its lease runs from then by
    /// this host's clock (see [`Held::renewed`]).
    pub(super) fn hold(&self, fence: Fence, claimed: Instant) -> Arc<Held> {
        let held = Arc::new(Held::new(
            self.stop_jobs.child_token(),
            claimed,
            self.settings.lease,
        ));
        self.held().insert(fence, Arc::clone(&held));
        held
    }

    /// See [`Settings::lease_margin`].
    pub(super) fn lease_margin(&self) -> Duration {
        self.settings.lease_margin()
    }

    /// The soonest moment a running attempt must stop because its lease
    /// was not renewed (see [`stop_unrenewed`](Self::stop_unrenewed)); `None`
    /// while nothing that runs is held.
    pub(super) fn next_lease_stop(&self) -> Option<Instant> {
        let margin = self.lease_margin();
        self.held()
            .values()
            .filter(|job| !job.ended())
            .map(|job| {
                job.lease_ends()
                    .checked_sub(margin)
                    .unwrap_or_else(Instant::now)
            })
            .min()
    }

    /// Stops, as a lost lease does, every attempt whose lease may end within
    /// [`lease_margin`](Self::lease_margin) because no renewal went through
    /// (the database did not answer): its cancellation token fires and it
    /// is not settled, so that it does not run beside the attempt another
    /// worker starts once the reaper returns the job. Attempts that have
    /// ended are left to their settle. How many it stopped.
    pub(super) fn stop_unrenewed(&self) -> usize {
        let stop_from = Instant::now() + self.lease_margin();
        let mut held = self.held();
        let unrenewed: Vec<Fence> = held
            .iter()
            .filter(|(_, job)| !job.ended() && job.lease_ends() <= stop_from)
            .map(|(fence, _)| *fence)
            .collect();
        for fence in &unrenewed {
            if let Some(job) = held.remove(fence) {
                job.lose_lease();
            }
        }
        drop(held);
        for fence in &unrenewed {
            quietly(|| {
                tracing::warn!(
                    job.id = fence.id,
                    "lease lost: not renewed in time (the database did not answer) and it may end now; stopping the attempt without settling it, the reaper returns the job"
                );
            });
        }
        unrenewed.len()
    }

    /// Stops the worker because `task` failed; `shutdown` returns the first failure.
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

    /// Stops the attempt of `fence` whose row is no longer held (its lease
    /// was lost, or it was cancelled): forgets it and cancels it, so it
    /// neither renews nor settles; whether it was held and running. An
    /// attempt that has ended already is left to its settle, which the
    /// fence turns away.
    pub(super) fn stop_lost(&self, fence: Fence) -> bool {
        let mut held = self.held();
        if held.get(&fence).is_none_or(|job| job.ended()) {
            return false;
        }
        match held.remove(&fence) {
            Some(job) => {
                job.lose_lease();
                true
            }
            None => false,
        }
    }

    /// The metric handles of the served queue `queue`.
    pub(super) fn queue_metrics(&self, queue: &str) -> Option<&Arc<QueueMetrics>> {
        let at = self.queue_names.iter().position(|q| q == queue)?;
        self.queue_metrics.get(at)
    }

    /// Forgets settled (or given up) jobs.
    pub(super) fn release_held(&self, fences: &[Fence]) {
        let mut held = self.held();
        for fence in fences {
            held.remove(fence);
        }
    }
}

/// 100 ms doubling to 5 s: how long to wait after `failures` failed database calls.
pub(super) fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(6)).min(5_000);
    Duration::from_millis(rand::random_range(ms / 2..=ms))
}

/// Sleeps `interval` ± 20 % (so workers started together spread out);
/// `false` if `stop` fired first.
pub(super) async fn jittered_pause(stop: &CancellationToken, interval: Duration) -> bool {
    let pause = interval.mul_f64(rand::random_range(0.8..1.2));
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

/// `work`, unless `stop` fires first: then `None`, and `work` is dropped
/// (a statement of it cut short, its connection closed).
pub(super) async fn unless<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        output = work => Some(output),
    }
}

/// Locks `mutex`, poisoned or not (what it guards stays consistent across a panic).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `task` in `span`, a task's span with an explicit parent (the worker's).
///
/// The span is closed under its own subscriber at the end: closing a span
/// closes its parent through the thread's default subscriber, and a task
/// may end on a thread whose default is another one (a test that gives each
/// runtime thread its own), which does not know the parent.
pub(super) async fn in_span<F: Future>(span: Span, task: F) -> F::Output {
    let output = task.instrument(span.clone()).await;
    close(span);
    output
}

/// Drops `span` with its own subscriber as the default (see [`in_span`]).
pub(super) fn close(span: Span) {
    match span.with_subscriber(|(_, dispatch)| dispatch.clone()) {
        Some(dispatch) => tracing::dispatcher::with_default(&dispatch, move || drop(span)),
        None => drop(span),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Settings;

    fn margin(lease: u64, heartbeat: Option<u64>) -> Duration {
        Settings {
            lease: Duration::from_secs(lease),
            heartbeat: heartbeat.map(Duration::from_secs),
            ..Settings::default()
        }
        .lease_margin()
    }

    /// A tenth of the lease with the default heartbeat (a third of it);
    /// half of what is left to spare with a heartbeat close to the lease.
    #[test]
    fn an_unrenewed_attempt_stops_a_tenth_of_the_lease_early_or_half_the_spare_time() {
        assert_eq!(margin(30, None), Duration::from_secs(3));
        assert_eq!(margin(30, Some(20)), Duration::from_secs(3));
        assert_eq!(margin(30, Some(29)), Duration::from_millis(500));
    }
}

impl crate::cancels::Holder for Shared {
    fn stop_lost(&self, fence: Fence) -> bool {
        Shared::stop_lost(self, fence)
    }
}

/// What a worker publishes of itself, computed once when it is built.
#[derive(Debug)]
pub(super) struct Presence {
    /// The row's key: random, new at each start.
    pub(super) id: i64,
    pub(super) host: String,
    pub(super) pid: i64,
    /// The served queues and their concurrency, as JSON.
    pub(super) queues: String,
    /// The job kinds of the registry, as JSON.
    pub(super) jobs: String,
}

impl Presence {
    pub(super) fn new(queues: String, jobs: String) -> Self {
        Self {
            id: crate::store::new_token_base(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: i64::from(std::process::id()),
            queues,
            jobs,
        }
    }
}
