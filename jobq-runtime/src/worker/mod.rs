//! The worker: claim → run outside the transaction → settle, fenced.
//!
//! One [`Worker`] runs, under one [`TaskTracker`]:
//! - a claim loop per served queue, with its own semaphore of `concurrency`
//!   slots; it claims `LIMIT <free slots>` and claims again at once while
//!   batches come back full, else sleeps until an in-process enqueue wakes it
//!   or the next poll (1/32 of the poll interval after a claim that found
//!   jobs, doubling after each empty one up to the poll interval);
//! - a task per claimed job, under a tracing span, with the job's timeout,
//!   catching panics;
//! - one completer that settles successes in batches (one UPDATE per batch);
//! - one heartbeat that renews the leases of everything held in one statement
//!   and stops jobs whose lease was lost;
//! - one reaper that returns other workers' expired jobs to `pending`.

mod builder;
mod run;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_core::{Registry, States};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use builder::WorkerBuilder;

use crate::store::{Fence, Store};
use crate::{Jobq, Result, wakeup};

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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            heartbeat: None,
            heartbeats_enabled: true,
            poll: Duration::from_millis(500),
            reap: None,
            shutdown_timeout: Duration::from_secs(30),
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
}

/// A job this worker holds: claimed and not yet settled.
#[derive(Debug)]
struct Held {
    /// Cancels the running attempt.
    cancel: CancellationToken,
    /// Set before `cancel` when the lease was lost: the attempt must not settle.
    lease_lost: Arc<std::sync::atomic::AtomicBool>,
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
    jobs: TaskTracker,
}

impl Shared {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Fence, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
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
    ) -> Self {
        let (completions, receiver) = mpsc::channel(COMPLETE_BACKLOG);
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
                jobs: TaskTracker::new(),
            }),
            queues,
            completions: receiver,
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
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<()> {
        let timeout = self.shared.settings.shutdown_timeout;
        let handle = self.start();
        signal.await;
        handle.shutdown(timeout).await
    }

    /// Starts the worker's tasks on the current tokio runtime.
    pub fn start(self) -> WorkerHandle {
        let shared = self.shared;
        let tasks = TaskTracker::new();
        for queue in self.queues {
            let span = tracing::info_span!("jobq.claim", queue = %queue.name);
            tasks.spawn(claim_loop(Arc::clone(&shared), queue).instrument(span));
        }
        let completer = tokio::spawn(completer(Arc::clone(&shared), self.completions));
        if shared.settings.heartbeats_enabled {
            tasks.spawn(heartbeat_loop(Arc::clone(&shared)));
        }
        tasks.spawn(reaper_loop(Arc::clone(&shared)));
        let listener = Arc::clone(&shared);
        tasks.spawn(async move {
            listener
                .store
                .listen(&listener.queue_names, &listener.stop_background)
                .await;
        });
        tasks.close();
        WorkerHandle {
            shared,
            tasks,
            completer,
        }
    }
}

/// A running worker; see [`Worker::start`].
#[derive(Debug)]
#[must_use = "dropping the handle leaves the worker running; call shutdown"]
pub struct WorkerHandle {
    shared: Arc<Shared>,
    tasks: TaskTracker,
    completer: JoinHandle<()>,
}

impl WorkerHandle {
    /// This worker's id.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// How many jobs this worker holds right now (running or awaiting settlement).
    pub fn held_jobs(&self) -> usize {
        self.shared.held().len()
    }

    /// Stops claiming, waits up to `deadline` for running jobs, then cancels
    /// the rest and releases them to `pending` without counting the attempt,
    /// settles every completed job, and stops.
    pub async fn shutdown(self, deadline: Duration) -> Result<()> {
        let Self {
            shared,
            tasks,
            completer,
        } = self;
        shared.stop_claiming.cancel();
        shared.jobs.close();
        if tokio::time::timeout(deadline, shared.jobs.wait())
            .await
            .is_err()
        {
            tracing::info!(
                running = shared.jobs.len(),
                "shutdown deadline passed; cancelling running jobs and releasing them to pending"
            );
            shared.stop_jobs.cancel();
            shared.jobs.wait().await;
        }
        // Every job task has handed its success to the completer by now.
        shared.stop_completer.cancel();
        let _ = completer.await;
        // Heartbeat and reaper last: held jobs keep their leases until settled.
        shared.stop_background.cancel();
        tasks.wait().await;
        Ok(())
    }
}

async fn claim_loop(shared: Arc<Shared>, queue: QueueSpec) {
    let slots = Arc::new(Semaphore::new(queue.concurrency));
    let wake = wakeup::subscribe(&queue.name);
    let mut failures = 0u32;
    // Whether the last claim came back full: more jobs are probably waiting.
    let mut backlog = false;
    // Claims in a row that found nothing; an idle worker starts idle.
    let mut empty_claims = u32::MAX;
    loop {
        let first = tokio::select! {
            biased;
            () = shared.stop_claiming.cancelled() => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let mut permits = vec![first];
        gather_free_slots(&slots, &mut permits, queue.concurrency, backlog).await;
        // Armed before the claim, so an enqueue during the claim is not missed.
        let woken = wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();

        let wanted = permits.len();
        let limit = u32::try_from(wanted).unwrap_or(u32::MAX);
        let pause = match shared
            .store
            .claim(&queue.name, limit, shared.settings.lease, &shared.worker_id)
            .await
        {
            Ok(jobs) => {
                failures = 0;
                let full = jobs.len() == wanted;
                backlog = full;
                empty_claims = if jobs.is_empty() {
                    empty_claims.saturating_add(1)
                } else {
                    0
                };
                for job in jobs {
                    let permit = permits.pop();
                    run::spawn_job(&shared, &queue.name, job, permit);
                }
                drop(permits);
                if full {
                    continue;
                }
                poll_after(shared.settings.poll, empty_claims)
            }
            Err(error) => {
                drop(permits);
                failures += 1;
                let pause = backoff(failures);
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    retry_in = ?pause,
                    "claim failed; retrying"
                );
                pause
            }
        };
        tokio::select! {
            biased;
            () = shared.stop_claiming.cancelled() => break,
            () = &mut woken, if failures == 0 => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// Takes every free slot into `permits`. While a backlog is waiting, it also
/// yields to the runtime a few times to let jobs that are finishing right now
/// hand their slots back: jobs end in bursts (a batch started together), and
/// one claim for the whole burst is far cheaper than one per job. It never
/// waits on a job that is still running (no timer), so a slow job never holds
/// a claim back.
async fn gather_free_slots(
    slots: &Arc<Semaphore>,
    permits: &mut Vec<OwnedSemaphorePermit>,
    concurrency: usize,
    backlog: bool,
) {
    const MAX_YIELDS: usize = 4;
    let mut yields = 0;
    loop {
        while let Ok(permit) = Arc::clone(slots).try_acquire_owned() {
            permits.push(permit);
        }
        if !backlog || permits.len() >= concurrency || yields == MAX_YIELDS {
            return;
        }
        tokio::task::yield_now().await;
        yields += 1;
        if slots.available_permits() == 0 {
            return;
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
            settle_completions(&shared, &batch, stopping).await;
            shared.release_held(&batch);
            batch.clear();
        }
        if stopping {
            break;
        }
    }
}

/// Writes one batch of successes, retrying while the database is unreachable.
/// Giving up loses nothing: the jobs stay `processing` and run again when
/// their leases expire (at-least-once).
async fn settle_completions(shared: &Shared, batch: &[Fence], stopping: bool) {
    let give_up_after = if stopping { 3 } else { 20 };
    let mut failures = 0;
    loop {
        match shared.store.complete(batch).await {
            Ok(settled) => {
                if settled < batch.len() as u64 {
                    tracing::warn!(
                        fenced_out = batch.len() as u64 - settled,
                        "completed jobs were no longer held (lease expired and re-claimed, or cancelled); their completion was not applied"
                    );
                }
                return;
            }
            Err(error) => {
                failures += 1;
                if failures >= give_up_after {
                    tracing::error!(
                        error = &error as &dyn std::error::Error,
                        jobs = batch.len(),
                        "giving up settling completed jobs; they will run again when their leases expire"
                    );
                    return;
                }
                let pause = backoff(failures);
                tracing::warn!(error = &error as &dyn std::error::Error, retry_in = ?pause, "settling completed jobs failed; retrying");
                tokio::time::sleep(pause).await;
            }
        }
    }
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
        match shared.store.heartbeat(&fences, shared.settings.lease).await {
            Ok(lost) => {
                let mut held = shared.held();
                for fence in lost {
                    if let Some(job) = held.remove(&fence) {
                        tracing::warn!(
                            job.id = fence.id,
                            "lease lost (expired and re-claimed, or cancelled); stopping the attempt without settling it"
                        );
                        job.lease_lost
                            .store(true, std::sync::atomic::Ordering::SeqCst);
                        job.cancel.cancel();
                    }
                }
            }
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                jobs = fences.len(),
                "renewing leases failed; retrying at the next heartbeat"
            ),
        }
    }
}

async fn reaper_loop(shared: Arc<Shared>) {
    let interval = shared.settings.reap_interval();
    loop {
        let pause = interval.mul_f64(rand::random_range(0.8..1.2));
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
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
