//! The worker: claim → run outside the transaction → settle, fenced.
//!
//! One [`Worker`] runs, under one [`TaskTracker`]:
//! - a claim loop per served queue, with its own semaphore of `concurrency`
//!   slots; it claims the free slots plus, for short jobs, about as many as
//!   the slots finish during one claim round trip (buffered, started in claim
//!   order as slots free), claims again at once while batches come back
//!   full, else sleeps until an in-process enqueue wakes it or the next poll
//!   (1/32 of the poll interval after a claim that found jobs, doubling after
//!   each empty one up to the poll interval);
//! - a task per claimed job, under a tracing span, with the job's timeout,
//!   catching panics;
//! - one completer that settles successes in batches (one UPDATE per batch);
//! - one heartbeat that renews the leases of everything held in one statement
//!   and stops jobs whose lease was lost;
//! - one reaper that returns other workers' expired jobs to `pending`;
//! - a task per cron schedule that enqueues its job at each tick;
//! - if asked, a pruner that deletes finished rows past their retention.

mod builder;
mod cron;
pub(crate) mod inject;
mod run;

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_core::{Registry, States};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use builder::WorkerBuilder;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::store::{Fence, Prunable, Store, Transition};
use crate::{Error, Jobq, Result, wakeup};

/// Runs `log` (a tracing macro), swallowing a panic of the subscriber (one
/// that writes to a closed pipe panics): a log line must never stop a
/// settle or a worker loop.
pub(super) fn quietly(log: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(log));
}

/// The error for a panic caught in `task`.
pub(super) fn panicked(task: &'static str, panic: &(dyn std::any::Any + Send)) -> Error {
    Error::Panicked {
        task,
        message: run::panic_message(panic),
    }
}

/// Most expired jobs the reaper returns per statement.
const REAP_BATCH: u32 = 500;
/// Most successes the completer settles per statement.
const COMPLETE_BATCH: usize = 1000;
/// Successes waiting to be settled before job tasks wait (backpressure).
const COMPLETE_BACKLOG: usize = 10_000;

#[derive(Debug, Clone)]
struct QueueSpec {
    name: String,
    concurrency: usize,
    checked: bool,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    lease: Duration,
    heartbeat: Option<Duration>,
    heartbeats_enabled: bool,
    poll: Duration,
    reap: Option<Duration>,
    shutdown_timeout: Duration,
    /// Retention of `done` and `cancelled` rows, if this worker prunes them.
    prune_finished: Option<Duration>,
    /// Retention of `failed` rows, if this worker prunes them.
    prune_failed: Option<Duration>,
    /// Most payload bytes a queue's claim loop holds claimed ahead of free slots.
    claim_ahead_bytes: usize,
}

/// Default of [`WorkerBuilder::claim_ahead_bytes`]: 64 MiB per queue.
pub const DEFAULT_CLAIM_AHEAD_BYTES: usize = 64 << 20;

impl Default for Settings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            heartbeat: None,
            heartbeats_enabled: true,
            poll: Duration::from_millis(500),
            reap: None,
            shutdown_timeout: Duration::from_secs(30),
            prune_finished: None,
            prune_failed: None,
            claim_ahead_bytes: DEFAULT_CLAIM_AHEAD_BYTES,
        }
    }
}

impl Settings {
    fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    fn reap_interval(&self) -> Duration {
        self.reap.unwrap_or(self.lease / 6)
    }

    /// How often the pruner runs: every minute, or every quarter of the
    /// shortest retention if that is shorter (at least every 100 ms).
    fn prune_interval(&self) -> Option<Duration> {
        let shortest = match (self.prune_finished, self.prune_failed) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some((shortest / 4).clamp(Duration::from_millis(100), Duration::from_secs(60)))
    }
}

/// A job this worker holds: claimed and not yet settled.
#[derive(Debug)]
struct Held {
    /// Cancels the running attempt.
    cancel: CancellationToken,
    /// Set before `cancel` when the lease was lost: the attempt must not settle.
    lease_lost: Arc<std::sync::atomic::AtomicBool>,
    /// Set when the attempt has ended and its outcome is being settled: a
    /// heartbeat that then finds the row gone from `processing` is seeing
    /// that settle (a fenced-out one is reported by the settle), not a lost lease.
    ended: Arc<std::sync::atomic::AtomicBool>,
}

/// State shared by a worker's tasks.
#[derive(Debug)]
struct Shared {
    store: Store,
    registry: Registry,
    states: States,
    settings: Settings,
    worker_id: String,
    held: Mutex<HashMap<Fence, Held>>,
    /// Stops the claim loops.
    stop_claiming: CancellationToken,
    /// Cancels running jobs (shutdown deadline passed); they are released to `pending`.
    stop_jobs: CancellationToken,
    /// Makes the completer drain and stop.
    stop_completer: CancellationToken,
    /// Stops heartbeat and reaper, last.
    stop_background: CancellationToken,
    /// The served queues' names.
    queue_names: Vec<String>,
    completions: mpsc::Sender<Fence>,
    /// Settles owed by job tasks that died (see `run::Settlement`).
    rescues: mpsc::UnboundedSender<Transition>,
    /// Makes the rescuer drain and stop.
    stop_rescuer: CancellationToken,
    /// Fired when a worker task panicked: the worker stops.
    failed: CancellationToken,
    /// The first such panic, returned by `shutdown`.
    failure: Mutex<Option<Error>>,
    jobs: TaskTracker,
    /// Taken around a settle batch and a heartbeat, which both update many
    /// of this worker's rows in one statement: run side by side they can
    /// lock the same rows in opposite orders, and PostgreSQL reports that
    /// deadlock only after `deadlock_timeout` (1 s), a second in which
    /// settles stall. (Locking the rows in id order first instead cost a
    /// worker of concurrency 1 a third of its jobs/s: a row lock is a WAL
    /// record of its own.)
    ///
    /// A heartbeat waits for the turn only briefly ([`TURN_WAIT`]): a settle
    /// that holds it longer is waiting on a row lock someone else holds (a
    /// caller's transaction with a duplicate `enqueue_in` of that job's
    /// key), and the heartbeat then renews every lease but those of the
    /// batch being settled ([`Shared::settling`]) without the turn. Disjoint
    /// rows cannot deadlock, and a lock on one row delays no other lease.
    bulk_writes: tokio::sync::Mutex<()>,
    /// Payload bytes claimed ahead of free slots, all queues (see `claim_ahead_bytes`).
    buffered_bytes: AtomicUsize,
    /// The batch of successes being written under the turn.
    settling: Mutex<Vec<Fence>>,
    /// Successes of batches whose write outlasted [`STUCK_AFTER`] (waiting on
    /// a row lock): their writes finish beside, without the turn, and
    /// heartbeats leave these rows out of the plain renewal (their own write
    /// holds some of them) and renew them with one that skips locked rows
    /// (`renew_stuck`).
    stuck: Mutex<Vec<Fence>>,
    /// Those writes, waited for by `shutdown` (at most one lease).
    beside_writes: TaskTracker,
    /// Held by a heartbeat that renews beside a stuck settle; a new settle
    /// batch takes it once before writing, so it never runs beside such a
    /// heartbeat that did not exclude its rows.
    beside: tokio::sync::Mutex<()>,
}

/// Longest a heartbeat waits for a settle batch to finish before renewing
/// the other leases beside it (at most a quarter of the heartbeat interval).
const TURN_WAIT: Duration = Duration::from_millis(200);

/// How long a batch of successes may hold the turn before it is deemed
/// stuck on a row lock and finishes beside (at most half a heartbeat interval).
const STUCK_AFTER: Duration = Duration::from_secs(1);

impl Shared {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Fence, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the worker because `task` failed; `shutdown` returns the first failure.
    fn fail(&self, error: Error) {
        quietly(|| {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "a worker task failed; the worker stops"
            );
        });
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(error);
        self.stop_claiming.cancel();
        self.failed.cancel();
    }

    fn release_held(&self, fences: &[Fence]) {
        let mut held = self.held();
        for fence in fences {
            held.remove(fence);
        }
    }
}

/// Runs jobs from the queues it serves until shut down.
///
/// ```no_run
/// # use jobq_runtime::{Jobq, Worker};
/// # async fn demo(jobq: Jobq) -> jobq_runtime::Result<()> {
/// let worker = Worker::builder(jobq).queue("mail", 16).build()?;
/// worker.run_until(async { tokio::signal::ctrl_c().await.ok(); }).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Worker {
    shared: Arc<Shared>,
    queues: Vec<QueueSpec>,
    completions: mpsc::Receiver<Fence>,
    rescues: mpsc::UnboundedReceiver<Transition>,
    /// The handle cron schedules enqueue through.
    jobq: Jobq,
    cron: Vec<cron::CronEntry>,
}

impl Worker {
    /// Starts configuring a worker on `jobq`'s database.
    pub fn builder(jobq: Jobq) -> WorkerBuilder {
        WorkerBuilder::new(jobq)
    }

    fn new(
        jobq: Jobq,
        queues: Vec<QueueSpec>,
        registry: Registry,
        states: States,
        settings: Settings,
        worker_id: String,
        cron: Vec<cron::CronEntry>,
    ) -> Self {
        let (completions, receiver) = mpsc::channel(COMPLETE_BACKLOG);
        let (rescues, rescue_receiver) = mpsc::unbounded_channel();
        Self {
            shared: Arc::new(Shared {
                store: jobq.store().clone(),
                registry,
                states,
                settings,
                worker_id,
                held: Mutex::default(),
                stop_claiming: CancellationToken::new(),
                stop_jobs: CancellationToken::new(),
                stop_completer: CancellationToken::new(),
                stop_background: CancellationToken::new(),
                queue_names: queues.iter().map(|q| q.name.clone()).collect(),
                completions,
                rescues,
                stop_rescuer: CancellationToken::new(),
                failed: CancellationToken::new(),
                failure: Mutex::new(None),
                jobs: TaskTracker::new(),
                bulk_writes: tokio::sync::Mutex::new(()),
                settling: Mutex::default(),
                stuck: Mutex::default(),
                beside_writes: TaskTracker::new(),
                buffered_bytes: AtomicUsize::new(0),
                beside: tokio::sync::Mutex::new(()),
            }),
            queues,
            completions: receiver,
            rescues: rescue_receiver,
            jobq,
            cron,
        }
    }

    /// This worker's id, as written to `claimed_by`.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// Runs until `signal` completes, then shuts down gracefully: stops
    /// claiming, lets running jobs finish for up to the shutdown timeout,
    /// releases the rest to `pending` (not counting the attempt), settles
    /// everything pending, and returns. No row is left `processing`.
    ///
    /// If a task of the worker panics (a claim loop, the completer, a cron
    /// schedule) the worker shuts down the same way at once and this returns
    /// [`Error::Panicked`]. (The heartbeat, reaper, pruner and listener are
    /// restarted instead.)
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<()> {
        let timeout = self.shared.settings.shutdown_timeout;
        let handle = self.start();
        let failed = handle.shared.failed.clone();
        tokio::select! {
            () = signal => {}
            () = failed.cancelled() => {}
        }
        handle.shutdown(timeout).await
    }

    /// Starts the worker's tasks on the current tokio runtime.
    pub fn start(self) -> WorkerHandle {
        let shared = self.shared;
        let claimers = TaskTracker::new();
        for queue in self.queues {
            let span = tracing::info_span!("jobq.claim", queue = %queue.name);
            let stop = shared.stop_claiming.clone();
            claimers.spawn(
                supervise(
                    Arc::clone(&shared),
                    "claim",
                    stop,
                    claim_loop(Arc::clone(&shared), queue),
                )
                .instrument(span),
            );
        }
        claimers.close();
        let tasks = TaskTracker::new();
        let completer = tokio::spawn(supervise(
            Arc::clone(&shared),
            "completer",
            shared.stop_completer.clone(),
            completer(Arc::clone(&shared), self.completions),
        ));
        let rescuer = tokio::spawn(run::rescuer(Arc::clone(&shared), self.rescues));
        if shared.settings.heartbeats_enabled {
            let s = Arc::clone(&shared);
            tasks.spawn(restarted(
                Arc::clone(&shared),
                "heartbeat",
                false,
                move || heartbeat_loop(Arc::clone(&s)),
            ));
        }
        let s = Arc::clone(&shared);
        tasks.spawn(restarted(Arc::clone(&shared), "reaper", false, move || {
            reaper_loop(Arc::clone(&s))
        }));
        if let Some(interval) = shared.settings.prune_interval() {
            let s = Arc::clone(&shared);
            tasks.spawn(restarted(Arc::clone(&shared), "pruner", false, move || {
                prune_loop(Arc::clone(&s), interval)
            }));
        }
        for entry in self.cron {
            // Stopped with the claim loops: a worker shutting down enqueues no more.
            tasks.spawn(supervise(
                Arc::clone(&shared),
                "cron",
                shared.stop_claiming.clone(),
                cron::cron_loop(self.jobq.clone(), entry, shared.stop_claiming.clone()),
            ));
        }
        let s = Arc::clone(&shared);
        tasks.spawn(restarted(
            Arc::clone(&shared),
            "listener",
            true,
            move || {
                let listener = Arc::clone(&s);
                async move {
                    listener
                        .store
                        .listen(&listener.queue_names, &listener.stop_background)
                        .await;
                }
            },
        ));
        tasks.close();
        WorkerHandle {
            shared,
            claimers,
            tasks,
            completer,
            rescuer,
        }
    }
}

/// Runs `task`; if it panics, or ends before `stop` fired, the worker fails
/// (stops, and `shutdown` returns the error).
async fn supervise(
    shared: Arc<Shared>,
    name: &'static str,
    stop: CancellationToken,
    task: impl Future<Output = ()>,
) {
    match AssertUnwindSafe(task).catch_unwind().await {
        Ok(()) if stop.is_cancelled() => {}
        Ok(()) => shared.fail(Error::Panicked {
            task: name,
            message: "it ended before the worker stopped".into(),
        }),
        Err(panic) => shared.fail(panicked(name, panic.as_ref())),
    }
}

/// Runs the background loop `make()` builds until the worker's background
/// stops; a loop that panics (or, unless it `may_end`, ends early) is logged
/// and started again after a pause. These loops own nothing a restart could lose.
async fn restarted<F, Fut>(shared: Arc<Shared>, name: &'static str, may_end: bool, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut failures = 0;
    loop {
        let result = AssertUnwindSafe(make()).catch_unwind().await;
        if shared.stop_background.is_cancelled() || (may_end && result.is_ok()) {
            return;
        }
        failures += 1;
        let message = match result {
            Ok(()) => "it ended before the worker stopped".to_owned(),
            Err(panic) => run::panic_message(panic.as_ref()),
        };
        let pause = backoff(failures);
        quietly(|| {
            tracing::error!(task = name, %message, restart_in = ?pause, "a worker task panicked; restarting it");
        });
        if !jittered_pause(&shared.stop_background, pause).await {
            return;
        }
    }
}

/// A running worker; see [`Worker::start`].
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
    /// Returns [`Error::Panicked`] if a task of the worker panicked (the
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
        match shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
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

/// A queue's claim loop: keeps the queue's slots fed from a small buffer of
/// claimed jobs, refilled by one claim at a time.
///
/// Without a buffer, every slot that frees waits a whole claim round trip
/// for its next job, and a worker of short jobs spends its time waiting on
/// the database. So the loop claims, besides the free slots, as many extra
/// jobs as the slots are expected to finish during one claim: concurrency ×
/// claim round trip ÷ the jobs' run time (both moving averages), at most
/// [`MAX_PREFETCH_FACTOR`] × concurrency. Jobs that take longer than a claim
/// are never claimed ahead of a free slot, so a worker of slow jobs holds
/// nothing another worker could be running. Claimed jobs are held (their
/// leases renewed) from the claim on, start in claim order, and on shutdown
/// those not started go back to `pending` without counting an attempt.
async fn claim_loop(shared: Arc<Shared>, queue: QueueSpec) {
    let slots = Arc::new(Semaphore::new(queue.concurrency));
    let pace = Arc::new(Pace::default());
    let wake = wakeup::subscribe(&queue.name);
    let mut buffer: VecDeque<run::Registered> = VecDeque::new();
    // Payload bytes in `buffer`, and a moving average of a claimed payload's size.
    let mut buffered_bytes = 0usize;
    let mut payload_size = 0usize;
    let mut claiming: Option<BoxFuture<'static, (Result<Vec<run::Registered>>, Duration)>> = None;
    // Moving average of a claim's round trip.
    let mut round_trip = Duration::ZERO;
    let mut failures = 0u32;
    // Whether the last claim came back full: more jobs are probably waiting.
    let mut backlog = false;
    // Claims in a row that found nothing; an idle worker starts idle.
    let mut empty_claims = u32::MAX;
    // When to claim without a wake-up or backlog.
    let mut next_poll = tokio::time::Instant::now();
    let woken = wake.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let mut was_woken = false;
    // The limit of the claim in flight.
    let mut asked = 0;
    loop {
        if !buffer.is_empty() {
            inject::point!(Buffered, &queue.name);
        }
        // Start what the free slots can take, in claim order.
        let mut started = false;
        while !buffer.is_empty() {
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                break;
            };
            let size = start_next(&shared, &queue.name, &mut buffer, permit, &pace);
            buffered_bytes -= size;
            shared.buffered_bytes.fetch_sub(size, Ordering::Relaxed);
            started = true;
        }
        if started {
            // tokio keeps the task spawned last in a slot that only this
            // worker runs, and wakes no other worker for it: a handler that
            // blocks its thread from there can leave the runtime's I/O driver
            // unpolled, stalling every database call in the process. Spawning
            // an empty task after the jobs moves them where idle workers can
            // take them, and wakes one.
            tokio::spawn(async {});
        }
        let ahead = prefetch(queue.concurrency, round_trip, pace.get()).min(
            // Within the byte budget, at the payload size seen so far.
            shared
                .settings
                .claim_ahead_bytes
                .saturating_sub(buffered_bytes)
                / payload_size.max(1),
        );
        let wanted_now = || (slots.available_permits() + ahead).saturating_sub(buffer.len());
        let wanted = wanted_now();
        let due = backlog || was_woken || tokio::time::Instant::now() >= next_poll;
        if claiming.is_none() && wanted > 0 && due {
            if backlog && buffer.is_empty() && ahead == 0 {
                // Jobs end in bursts (a batch started together): let the ones
                // finishing right now hand back their slots, so one claim
                // serves the whole burst. Never waits on a running job.
                for _ in 0..4 {
                    let free = slots.available_permits();
                    tokio::task::yield_now().await;
                    if slots.available_permits() == free {
                        break;
                    }
                }
            }
            let wanted = wanted_now();
            // Re-armed before the claim, so an enqueue during the claim is not missed.
            was_woken = false;
            woken.set(wake.notified());
            woken.as_mut().enable();
            asked = wanted;
            claiming = Some(claim(&shared, &queue.name, wanted));
        }
        let idle_claimer = claiming.is_none() && wanted > 0;
        tokio::select! {
            biased;
            () = shared.stop_claiming.cancelled() => break,
            (result, took) = async { claiming.as_mut().expect("a claim in flight").await }, if claiming.is_some() => {
                claiming = None;
                match result {
                    Ok(jobs) => {
                        quietly(|| tracing::trace!(asked, got = jobs.len(), ?took, buffered = buffer.len(), free = slots.available_permits(), "claimed"));
                        failures = 0;
                        round_trip = if round_trip.is_zero() { took } else { (round_trip * 7 + took) / 8 };
                        backlog = jobs.len() == asked;
                        empty_claims = if jobs.is_empty() { empty_claims.saturating_add(1) } else { 0 };
                        next_poll = tokio::time::Instant::now() + poll_after(shared.settings.poll, empty_claims);
                        let mut added = 0;
                        for job in &jobs {
                            let size = job.payload_len();
                            added += size;
                            payload_size = if payload_size == 0 { size } else { payload_size - payload_size / 8 + size / 8 };
                        }
                        buffered_bytes += added;
                        shared.buffered_bytes.fetch_add(added, Ordering::Relaxed);
                        buffer.extend(jobs);
                    }
                    Err(error) => {
                        failures += 1;
                        backlog = false;
                        was_woken = false;
                        let pause = backoff(failures);
                        next_poll = tokio::time::Instant::now() + pause;
                        quietly(|| {
                            tracing::warn!(
                                error = &error as &dyn std::error::Error,
                                retry_in = ?pause,
                                "claim failed; retrying"
                            );
                        });
                    }
                }
            }
            // A slot came free: handed back at once, for the top of the loop
            // to start a buffered job on or to claim for.
            permit = Arc::clone(&slots).acquire_owned(), if !buffer.is_empty() || wanted == 0 => {
                if permit.is_err() {
                    break;
                }
            }
            () = &mut woken, if idle_claimer && !was_woken && failures == 0 => was_woken = true,
            () = tokio::time::sleep_until(next_poll), if idle_claimer && !backlog && !was_woken => {}
        }
    }
    // Stopping: a claim in flight may already hold rows; take them, then
    // hand back everything that did not start.
    if let Some(in_flight) = claiming
        && let (Ok(jobs), _) = in_flight.await
    {
        buffer.extend(jobs);
    }
    shared
        .buffered_bytes
        .fetch_sub(buffered_bytes, Ordering::Relaxed);
    run::release_unstarted(&shared, &queue.name, buffer.into()).await;
}

/// Claims up to `limit` jobs of `queue` and registers them as held (in the
/// same poll as the claim returns: no await point between); also reports how
/// long the claim took. A panic in the claim (a subscriber's, inside the
/// driver) is a failed claim.
fn claim(
    shared: &Arc<Shared>,
    queue: &str,
    limit: usize,
) -> BoxFuture<'static, (Result<Vec<run::Registered>>, Duration)> {
    let shared = Arc::clone(shared);
    let queue = queue.to_owned();
    Box::pin(async move {
        let started = tokio::time::Instant::now();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let result = AssertUnwindSafe(shared.store.claim(
            &queue,
            limit,
            shared.settings.lease,
            &shared.worker_id,
        ))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked("claim", panic.as_ref())));
        let registered = result.map(|jobs| {
            jobs.into_iter()
                .map(|job| run::register(&shared, job))
                .collect::<Vec<_>>()
        });
        if registered.is_ok() && inject::fire(inject::Point::Claimed, &queue).is_some() {
            panic!("jobq fault injection: the claim loop dropped after a claim");
        }
        (registered, started.elapsed())
    })
}

/// Starts the oldest buffered job on `permit`, unless its lease was lost
/// while it waited (then the permit goes back); returns the size of the
/// payload it took from the buffer.
fn start_next(
    shared: &Arc<Shared>,
    queue: &str,
    buffer: &mut VecDeque<run::Registered>,
    permit: OwnedSemaphorePermit,
    pace: &Arc<Pace>,
) -> usize {
    let Some(next) = buffer.pop_front() else {
        return 0;
    };
    let size = next.payload_len();
    if !next.lost() {
        run::start(shared, queue, next, permit, pace);
    }
    size
}

/// Most jobs claimed ahead of free slots, as a multiple of the concurrency.
const MAX_PREFETCH_FACTOR: usize = 8;

/// How many jobs to claim beyond the free slots: about as many as the busy
/// slots finish during one claim round trip, so none of them waits on the
/// database. None until both the claim and the jobs have been timed.
fn prefetch(concurrency: usize, round_trip: Duration, job: Option<Duration>) -> usize {
    let Some(job) = job else { return 0 };
    if round_trip.is_zero() {
        return 0;
    }
    let cap = concurrency.saturating_mul(MAX_PREFETCH_FACTOR);
    let ahead = concurrency as f64 * round_trip.as_secs_f64() / job.as_secs_f64().max(1e-9);
    if ahead >= cap as f64 {
        cap
    } else {
        ahead as usize
    }
}

/// How long a queue's attempts run: a moving average over the last few
/// dozen, in nanoseconds (0 before the first).
#[derive(Debug, Default)]
struct Pace(AtomicU64);

impl Pace {
    fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        let old = self.0.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 16 + sample / 16
        };
        self.0.store(new.max(1), Ordering::Relaxed);
    }

    fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }
}

/// Adaptive polling: how long to wait for jobs from other processes (which
/// send no in-process wake-up) after `empty_claims` claims in a row found
/// nothing. Jobs that just arrived are likely followed by more, so the next
/// poll comes after 1/32 of the poll interval, then twice as long after each
/// empty claim, back to the full interval after five. A queue fed at a steady
/// rate is polled every few milliseconds; an idle one at the poll interval.
fn poll_after(poll: Duration, empty_claims: u32) -> Duration {
    let fast = (poll / 32).max(Duration::from_millis(1)).min(poll);
    fast.saturating_mul(1 << empty_claims.min(6)).min(poll)
}

/// 100 ms doubling to 5 s: how long to wait after `failures` failed database calls.
fn backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1 << failures.min(6)).min(5_000);
    Duration::from_millis(rand::random_range(ms / 2..=ms))
}

/// Settles successes in batches: whatever accumulated while the previous
/// batch was being written goes in the next one. On shutdown it drains what
/// is left and stops.
async fn completer(shared: Arc<Shared>, mut completions: mpsc::Receiver<Fence>) {
    let mut batch = Vec::with_capacity(COMPLETE_BATCH);
    loop {
        let stopping = tokio::select! {
            biased;
            received = completions.recv_many(&mut batch, COMPLETE_BATCH) => received == 0,
            () = shared.stop_completer.cancelled() => true,
        };
        if stopping {
            while let Ok(fence) = completions.try_recv() {
                batch.push(fence);
            }
        }
        if !batch.is_empty() {
            // settle_completions catches what panics in its writes; this is
            // for the rest (the completer must outlive any one batch).
            let handed_off = AssertUnwindSafe(settle_completions(&shared, &batch, stopping))
                .catch_unwind()
                .await
                .unwrap_or(false);
            if !handed_off {
                shared.release_held(&batch);
            }
            batch.clear();
        }
        if stopping {
            break;
        }
    }
}

/// Writes one batch of successes, retrying while the database is unreachable.
/// Giving up loses nothing: the jobs stay `processing` and run again when
/// their leases expire (at-least-once). Returns `true` if the write was
/// stuck on a row lock and handed off to finish beside (which then releases
/// the batch from the held set).
async fn settle_completions(shared: &Arc<Shared>, batch: &[Fence], stopping: bool) -> bool {
    let give_up_after = if stopping { 3 } else { 20 };
    let mut failures = 0;
    loop {
        let result = {
            let turn = shared.bulk_writes.lock().await;
            set_settling(shared, batch);
            // Waits out a heartbeat renewing beside the previous batch (uncontended otherwise).
            drop(shared.beside.lock().await);
            let mut write = Box::pin(complete_batch(Arc::clone(shared), batch.to_vec()));
            let stuck_after = STUCK_AFTER.min(shared.settings.heartbeat_interval() / 2);
            let result = match tokio::time::timeout(stuck_after, &mut write).await {
                Ok(result) => result,
                Err(_) => {
                    // Waiting on a row lock someone else holds: only these
                    // rows wait for it; the turn goes back to the heartbeats
                    // and to the batches after this one.
                    lock(&shared.stuck).extend_from_slice(batch);
                    set_settling(shared, &[]);
                    drop(turn);
                    let shared = Arc::clone(shared);
                    let batch = batch.to_vec();
                    shared.clone().beside_writes.spawn(async move {
                        let result = write.await;
                        if let Err(error) = &result {
                            quietly(|| {
                                tracing::warn!(
                                    error = error as &dyn std::error::Error,
                                    jobs = batch.len(),
                                    "settling completed jobs that waited on a row lock failed; they will run again when their leases expire"
                                );
                            });
                        }
                        lock(&shared.stuck).retain(|fence| !batch.contains(fence));
                        shared.release_held(&batch);
                    });
                    return true;
                }
            };
            set_settling(shared, &[]);
            drop(turn);
            result
        };
        match result {
            Ok(settled) => {
                if settled < batch.len() as u64 {
                    quietly(|| {
                        tracing::warn!(
                            fenced_out = batch.len() as u64 - settled,
                            "completed jobs were no longer held (lease expired and re-claimed, or cancelled); their completion was not applied"
                        );
                    });
                }
                return false;
            }
            Err(error) => {
                failures += 1;
                if failures >= give_up_after {
                    quietly(|| {
                        tracing::error!(
                            error = &error as &dyn std::error::Error,
                            jobs = batch.len(),
                            "giving up settling completed jobs; they will run again when their leases expire"
                        );
                    });
                    return false;
                }
                let pause = backoff(failures);
                quietly(|| {
                    tracing::warn!(error = &error as &dyn std::error::Error, retry_in = ?pause, "settling completed jobs failed; retrying");
                });
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// One write of a batch of successes; a panic in it is a failed write.
async fn complete_batch(shared: Arc<Shared>, batch: Vec<Fence>) -> Result<u64> {
    AssertUnwindSafe(async {
        if inject::fire(inject::Point::CompleterWrite, &shared.queue_names[0]).is_some() {
            panic!("jobq fault injection: the batch write dropped (a panic here)");
        }
        shared.store.complete(&batch).await
    })
    .catch_unwind()
    .await
    .unwrap_or_else(|panic| Err(panicked("completer", panic.as_ref())))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records the batch of successes written under the turn (none: `&[]`).
fn set_settling(shared: &Shared, batch: &[Fence]) {
    let mut settling = shared
        .settling
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    settling.clear();
    settling.extend_from_slice(batch);
}

async fn heartbeat_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.settings.heartbeat_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => break,
            _ = tick.tick() => {}
        }
        let fences: Vec<Fence> = shared.held().keys().copied().collect();
        if fences.is_empty() {
            continue;
        }
        inject::point!(Heartbeat, &shared.queue_names[0]);
        let wait = TURN_WAIT.min(shared.settings.heartbeat_interval() / 4);
        let result = match tokio::time::timeout(wait, shared.bulk_writes.lock()).await {
            Ok(_turn) => {
                // Not the rows of a stuck write (it holds some of their
                // locks), read once the turn is ours: a write that became
                // stuck while this heartbeat waited for the turn gave it up.
                let others = not_writing(&fences, &lock(&shared.stuck), &[]);
                shared.store.heartbeat(&others, shared.settings.lease).await
            }
            Err(_) => {
                // The settle holding the turn waits on a row lock: renew the
                // rest beside it.
                let _beside = shared.beside.lock().await;
                let others = not_writing(&fences, &lock(&shared.stuck), &lock(&shared.settling));
                shared.store.heartbeat(&others, shared.settings.lease).await
            }
        };
        renew_stuck(&shared).await;
        match result {
            Ok(lost) => {
                let mut held = shared.held();
                for fence in lost {
                    let ended = held
                        .get(&fence)
                        .is_some_and(|job| job.ended.load(std::sync::atomic::Ordering::SeqCst));
                    if ended {
                        continue;
                    }
                    if let Some(job) = held.remove(&fence) {
                        quietly(|| {
                            tracing::warn!(
                                job.id = fence.id,
                                "lease lost (expired and re-claimed, or cancelled); stopping the attempt without settling it"
                            );
                        });
                        job.lease_lost
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        job.cancel.cancel();
                    }
                }
            }
            Err(error) => quietly(|| {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    jobs = fences.len(),
                    "renewing leases failed; retrying at the next heartbeat"
                );
            }),
        }
    }
}

/// Renews the leases of the rows of stuck writes that nobody has locked:
/// those the write has not reached yet while it waits on a row lock. The
/// others are locked by the write (it settles them) or by the transaction it
/// waits on (the reaper skips them too), so they are not lost. No cost while
/// nothing is stuck.
async fn renew_stuck(shared: &Shared) {
    let stuck = lock(&shared.stuck).clone();
    if stuck.is_empty() {
        return;
    }
    if let Err(error) = shared
        .store
        .heartbeat_unlocked(&stuck, shared.settings.lease)
        .await
    {
        quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                jobs = stuck.len(),
                "renewing the leases of completed jobs waiting on a row lock failed; retrying at the next heartbeat"
            );
        });
    }
}

/// The fences among `fences` that neither a stuck write nor the settle in
/// progress is updating.
fn not_writing(fences: &[Fence], stuck: &[Fence], settling: &[Fence]) -> Vec<Fence> {
    if stuck.is_empty() && settling.is_empty() {
        return fences.to_vec();
    }
    let writing: std::collections::HashSet<&Fence> = stuck.iter().chain(settling).collect();
    fences
        .iter()
        .filter(|fence| !writing.contains(fence))
        .copied()
        .collect()
}

/// Deletes finished rows past their retention, at jittered intervals.
async fn prune_loop(shared: Arc<Shared>, interval: Duration) {
    let kinds = [
        (Prunable::Finished, shared.settings.prune_finished),
        (Prunable::Failed, shared.settings.prune_failed),
    ];
    while jittered_pause(&shared.stop_background, interval).await {
        for (which, retention) in kinds {
            let Some(retention) = retention else { continue };
            match shared.store.prune_all(which, retention).await {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(?which, deleted, "pruned finished jobs"),
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    ?which,
                    "pruning finished jobs failed; trying again at the next interval"
                ),
            }
        }
    }
}

/// Sleeps `interval` ± 20 % (so workers started together spread out);
/// `false` if `stop` fired first.
async fn jittered_pause(stop: &CancellationToken, interval: Duration) -> bool {
    let pause = interval.mul_f64(rand::random_range(0.8..1.2));
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

async fn reaper_loop(shared: Arc<Shared>) {
    let interval = shared.settings.reap_interval();
    while jittered_pause(&shared.stop_background, interval).await {
        for queue in &shared.queue_names {
            loop {
                match shared.store.reap(queue, REAP_BATCH).await {
                    Ok(0) => break,
                    Ok(returned) => {
                        tracing::info!(queue = %queue, returned, "returned jobs with expired leases");
                        wakeup::notify(queue);
                        if returned < u64::from(REAP_BATCH) {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = &error as &dyn std::error::Error, queue = %queue, "reaping expired leases failed");
                        break;
                    }
                }
            }
        }
    }
}
