//! One attempt: decode, run outside any transaction, settle.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use jobq_core::{
    DispatchError, ExtendFuture, JobContext, JobError, JobErrorKind, JobMeta, LeaseError,
    LeaseExtender, RetryPolicy, error_chain,
};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tracing::{Instrument, field};

use super::inject::{self, Point};
use super::shared::{
    Ended, Held, Observed, Shared, backoff, panic_message, panicked, quietly, unless,
};
use crate::metrics::{self, JobMetrics, QueueMetrics};
use crate::options::MAX_DELAY;
use crate::store::{ClaimedJob, Fence, Store, Target, Transition};

/// How an attempt ended.
enum Outcome {
    Succeeded,
    Failed(JobError, RetryPolicy),
    /// Cancelled by the shutdown deadline or a lost lease.
    Interrupted,
}

/// A claimed job, registered as held (its lease renewed by the heartbeat)
/// and not started yet.
pub(super) struct Registered {
    job: ClaimedJob,
    settlement: Settlement,
}

/// How long a queue's attempts run: a moving average over the last few
/// dozen, in nanoseconds (0 before the first).
#[derive(Debug, Default)]
pub(super) struct Pace(AtomicU64);

impl Pace {
    pub(super) fn record(&self, took: Duration) {
        let sample = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        let old = self.0.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 16 + sample / 16
        };
        self.0.store(new.max(1), Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }
}

/// What a held job is owed if whatever holds it ends without settling it.
#[derive(Debug)]
enum Owed {
    /// Back to `pending`, the attempt not counted (it never started).
    Release,
    /// A failed attempt: its task died (a panic outside the handler's poll,
    /// or its future was dropped) before it settled.
    Failure,
    /// This transition, which was being written.
    Transition(Transition),
    /// Nothing: settled, handed to the completer, or given up on.
    Nothing,
}

/// Owned by whatever holds a claimed job (the claim loop's buffer, then the
/// job's task). Dropped while something is still owed — the task panicked
/// where nothing catches it, in a log line, an instrumented span, or its
/// future was dropped — it hands the settle to the worker's rescuer task,
/// which does not depend on the dead task. The normal path pays nothing but
/// the flag updates.
#[derive(Debug)]
pub(super) struct Settlement {
    rescues: mpsc::UnboundedSender<Transition>,
    fence: Fence,
    attempt: u32,
    max_attempts: u32,
    /// The handles the heartbeat shares.
    held: Arc<Held>,
    owed: Owed,
}

impl Drop for Settlement {
    fn drop(&mut self) {
        if self.held.lease_lost() {
            // The heartbeat forgot it: the attempt must not settle.
            return;
        }
        let transition = match std::mem::replace(&mut self.owed, Owed::Nothing) {
            Owed::Nothing => return,
            Owed::Release => release(self.fence),
            Owed::Transition(transition) => transition,
            Owed::Failure => plan_failure(
                self.attempt,
                self.max_attempts,
                self.fence,
                &JobError::retry(
                    "the attempt's task ended before settling it: a panic outside the handler (in a log line or tracing subscriber, a span, a Drop) or its future was dropped; the panic hook's report on stderr says where",
                ),
                &RetryPolicy::DEFAULT,
            ),
        };
        // An unbounded send never blocks nor panics; it fails only once the
        // worker is gone, and then the reaper returns the job.
        let _ = self.rescues.send(transition);
    }
}

/// A fenced move back to `pending`, the attempt not counted.
fn release(fence: Fence) -> Transition {
    Transition {
        fence,
        target: Target::Pending,
        delay: Duration::ZERO,
        refund_attempt: true,
        error: None,
    }
}

/// Writes what dead tasks owed, one at a time, until the worker stops; then
/// what is left, for at most one lease.
pub(super) async fn rescuer(shared: Arc<Shared>, mut rescues: mpsc::UnboundedReceiver<Transition>) {
    loop {
        tokio::select! {
            biased;
            received = rescues.recv() => match received {
                Some(transition) => rescue(&shared, &transition).await,
                None => return,
            },
            () = shared.stop_rescuer.cancelled() => break,
        }
    }
    let drain = async {
        while let Ok(transition) = rescues.try_recv() {
            rescue(&shared, &transition).await;
        }
    };
    let drain = tokio::time::timeout(shared.settings.lease, drain);
    let _ = unless(&shared.deadline_passed, drain).await;
}

async fn rescue(shared: &Shared, transition: &Transition) {
    let _ = AssertUnwindSafe(apply(shared, transition))
        .catch_unwind()
        .await;
    shared.release_held(&[transition.fence]);
}

impl Registered {
    /// Whether the heartbeat found its lease lost while it waited: it must
    /// not start (the heartbeat already forgot it).
    pub(super) fn lost(&self) -> bool {
        self.settlement.held.lease_lost()
    }

    /// The size of its payload, in bytes.
    pub(super) fn payload_len(&self) -> usize {
        self.job.payload.len()
    }

    /// Counts it as ended with `outcome` without having started (its lease
    /// lost while it waited, or handed back at shutdown).
    pub(super) fn ended_unstarted(&self, queue: &QueueMetrics, outcome: metrics::Outcome) {
        queue.job(&self.job.job_name).ended(outcome);
    }
}

/// Registers `job` as held, so heartbeats renew its lease from now on;
/// `claimed` is when its claim was sent.
pub(super) fn register(
    shared: &Shared,
    job: ClaimedJob,
    claimed: tokio::time::Instant,
) -> Registered {
    let settlement = Settlement {
        rescues: shared.rescues.clone(),
        fence: job.fence(),
        attempt: job.attempt,
        max_attempts: job.max_attempts,
        held: shared.hold(job.fence(), claimed),
        owed: Owed::Release,
    };
    Registered { job, settlement }
}

/// Runs a registered job in its own task; `permit` (the queue slot) is
/// released when the attempt is settled, and the attempt's run time goes
/// into `pace` and, with its outcome, into `queue_metrics`.
pub(super) fn start(
    shared: &Arc<Shared>,
    queue: &str,
    registered: Registered,
    permit: OwnedSemaphorePermit,
    pace: &Arc<Pace>,
    queue_metrics: &QueueMetrics,
) {
    let Registered {
        job,
        mut settlement,
    } = registered;
    let job_metrics = Arc::clone(queue_metrics.job(&job.job_name));
    // A subscriber that panics making the span costs the job its span, not its settle.
    let span = std::panic::catch_unwind(|| {
        tracing::info_span!(
            "jobq.job",
            job.id = job.id,
            job.name = %job.job_name,
            queue.name = %queue,
            job.attempt = job.attempt,
            job.outcome = field::Empty,
        )
    })
    .unwrap_or_else(|_| tracing::Span::none());
    let shared_for_task = Arc::clone(shared);
    let pace = Arc::clone(pace);
    let queue = queue.to_owned();
    settlement.owed = Owed::Failure;
    // The span is entered only while the attempt runs (decode, handler,
    // dropping the handler's future); the settle's log lines name it as
    // their parent, and its writes run outside it: a subscriber that panics
    // on the job's events (a closed stderr) must not panic in the driver's
    // statement log after a write went through, lose the write's result and
    // make the settle write again, with backoff, while the worker holds a
    // job whose row is already final.
    shared.jobs.spawn(async move {
        // Owned by the task: dropped unsettled, it hands the job to the rescuer.
        let mut settlement = settlement;
        let shared = shared_for_task;
        inject::point!(BeforeExecute, &queue);
        let started = std::time::Instant::now();
        // Decoding the payload, polling the handler and dropping its
        // future (after a timeout or cancellation) all run in here.
        let held = Arc::clone(&settlement.held);
        let attempt = execute(&shared, &queue, &job, held).instrument(span.clone());
        let outcome = match AssertUnwindSafe(attempt).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(panic) => Outcome::Failed(
                JobError::retry(format!(
                    "the attempt panicked outside its handler's poll (decoding its payload, or dropping the handler's future): {}",
                    panic_message(panic.as_ref())
                )),
                shared
                    .registry
                    .get(&job.job_name)
                    .map_or(RetryPolicy::DEFAULT, |r| (r.retry_policy)()),
            ),
        };
        let took = started.elapsed();
        pace.record(took);
        job_metrics.ran(took);
        settlement.held.end();
        inject::point!(BeforeSettle, &queue);
        settle(&shared, &queue, &job, &span, outcome, &mut settlement, &job_metrics).await;
        drop(permit);
    });
}

/// Hands registered jobs that never started back to `pending`, their attempt
/// not counted (a shutdown with jobs claimed ahead of free slots). Gives up
/// after one lease if the database is unreachable: the reaper returns them.
pub(super) async fn release_unstarted(
    shared: &Shared,
    queue: &str,
    jobs: Vec<Registered>,
    queue_metrics: &QueueMetrics,
) {
    inject::point!(ShutdownRelease, queue);
    let fences: Vec<Fence> = jobs.iter().map(|r| r.job.fence()).collect();
    let mut jobs = jobs;
    for registered in &mut jobs {
        // Given up on below, or released: the rescuer owes them nothing.
        registered.settlement.owed = Owed::Nothing;
        let outcome = if registered.lost() {
            metrics::Outcome::LeaseLost
        } else {
            metrics::Outcome::Released
        };
        registered.ended_unstarted(queue_metrics, outcome);
    }
    let releases = futures_util::stream::iter(jobs).for_each_concurrent(
        RELEASE_CONCURRENCY,
        |registered| async move {
            if registered.lost() {
                return;
            }
            apply(shared, &release(registered.job.fence())).await;
        },
    );
    let released = tokio::time::timeout(shared.settings.lease, releases);
    if unless(&shared.deadline_passed, released)
        .await
        .is_none_or(|released| released.is_err())
    {
        quietly(|| {
            tracing::error!(
                jobs = fences.len(),
                "giving up handing back jobs claimed ahead of free slots; the reaper will return them when their leases expire"
            );
        });
    }
    shared.release_held(&fences);
}

/// Releases of unstarted jobs in flight at once.
const RELEASE_CONCURRENCY: usize = 8;

async fn execute(shared: &Shared, queue: &str, job: &ClaimedJob, held: Arc<Held>) -> Outcome {
    let cancel = held.cancel_token().clone();
    if let Some(reason) = &job.unreadable {
        return Outcome::Failed(
            JobError::permanent(format!(
                "{reason}; failed without retrying, as another attempt cannot fix it: correct the row and call Jobq::retry"
            )),
            RetryPolicy::DEFAULT,
        );
    }
    let Some(registration) = shared.registry.get(&job.job_name) else {
        return Outcome::Failed(
            JobError::retry(format!(
                "unknown job `{}`: worker {} has no handler registered under this name (enqueued by a newer deploy, or a #[job] renamed without pinning `name`?); it is retried with backoff until a worker with the handler runs it or its attempts run out: deploy that worker, or pin the old name with #[job(name = \"…\")]",
                job.job_name, shared.worker_id
            )),
            RetryPolicy::DEFAULT,
        );
    };
    let policy = (registration.retry_policy)();
    let mut meta = JobMeta::new(job.id, registration.name, queue);
    meta.attempt = job.attempt;
    meta.max_attempts = job.max_attempts;
    meta.idempotency_key.clone_from(&job.idempotency_key);
    let lease: Arc<dyn LeaseExtender> = Arc::new(JobLease {
        store: shared.store.clone(),
        fence: job.fence(),
        held: Some(held),
    });
    let ctx = JobContext::new(meta, cancel.clone(), Some(lease));
    if inject::fire(Point::Decode, queue).is_some() {
        panic!("jobq fault injection: the decode's future dropped (a panic here)");
    }
    let attempt = match (registration.run)(ctx, &job.payload, &shared.states) {
        Ok(attempt) => attempt,
        Err(error @ DispatchError::Payload { .. }) => {
            return Outcome::Failed(
                JobError::permanent(format!(
                    "{}; failed without retrying, as another attempt cannot fix it: correct the row's payload (or make the payload type accept it) and call Jobq::retry",
                    error_chain(&error)
                )),
                policy,
            );
        }
        Err(error) => return Outcome::Failed(JobError::retry(error_chain(&error)), policy),
    };
    let attempt = AssertUnwindSafe(attempt).catch_unwind();
    let timed = async {
        match registration.timeout {
            Some(limit) => tokio::time::timeout(limit, attempt)
                .await
                .map_err(|_| limit),
            None => Ok(attempt.await),
        }
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => Outcome::Interrupted,
        result = timed => match result {
            Ok(Ok(Ok(()))) => Outcome::Succeeded,
            Ok(Ok(Err(error))) => Outcome::Failed(error, policy),
            Ok(Err(panic)) => Outcome::Failed(
                JobError::retry(format!("handler panicked: {}", panic_message(panic.as_ref()))),
                policy,
            ),
            Err(limit) => Outcome::Failed(
                JobError::retry(format!("attempt timed out after {limit:?}")),
                policy,
            ),
        },
    }
}

async fn settle(
    shared: &Shared,
    queue: &str,
    job: &ClaimedJob,
    span: &tracing::Span,
    outcome: Outcome,
    settlement: &mut Settlement,
    job_metrics: &JobMetrics,
) {
    // Every log line and span record below is `quietly`: a subscriber that
    // panics (a closed stderr) must not stop the settle. The attempt's span
    // is not entered here (see `start`): log lines name it as their parent.
    let fence = job.fence();
    observe(shared, job, &outcome);
    let transition = match outcome {
        Outcome::Succeeded => {
            job_metrics.ended(metrics::Outcome::Succeeded);
            quietly(|| {
                span.record("job.outcome", "done");
            });
            inject::point!(CompleterSend, queue);
            // A completer stuck on a database that does not answer fills
            // the channel; past the shutdown's deadline nothing waits.
            let sent = unless(&shared.deadline_passed, shared.completions.send(fence)).await;
            if !matches!(sent, Some(Ok(()))) {
                shared.release_held(&[fence]);
            }
            settlement.owed = Owed::Nothing;
            quietly(|| tracing::debug!(parent: span, "job done"));
            return;
        }
        Outcome::Interrupted if settlement.held.lease_lost() => {
            job_metrics.ended(metrics::Outcome::LeaseLost);
            settlement.owed = Owed::Nothing;
            quietly(|| {
                span.record("job.outcome", "lease_lost");
            });
            return;
        }
        Outcome::Interrupted => {
            job_metrics.ended(metrics::Outcome::Released);
            quietly(|| {
                span.record("job.outcome", "released");
            });
            release(fence)
        }
        Outcome::Failed(error, policy) => {
            let transition = plan_failure(job.attempt, job.max_attempts, fence, &error, &policy);
            let (outcome, counted) = match (transition.target, error.kind()) {
                (_, JobErrorKind::Snooze(_)) => ("snoozed", metrics::Outcome::Snoozed),
                (Target::Failed, _) => ("failed", metrics::Outcome::Failed),
                (Target::Pending, _) => ("retry", metrics::Outcome::Retried),
            };
            job_metrics.ended(counted);
            quietly(|| {
                span.record("job.outcome", outcome);
                if transition.target == Target::Failed {
                    tracing::warn!(parent: span, error = %error, outcome, "job failed");
                } else {
                    tracing::info!(parent: span, error = %error, retry_in = ?transition.delay, outcome, "attempt failed; the job will run again");
                }
            });
            transition
        }
    };
    settlement.owed = Owed::Transition(transition.clone());
    apply(shared, &transition).await;
    settlement.owed = Owed::Nothing;
    shared.release_held(&[fence]);
}

/// Tells the worker's observer, if it has one, how the attempt ended.
fn observe(shared: &Shared, job: &ClaimedJob, outcome: &Outcome) {
    let Some(observer) = &shared.observer else {
        return;
    };
    let ended = match outcome {
        Outcome::Succeeded => Ended::Succeeded,
        Outcome::Interrupted => Ended::Interrupted,
        Outcome::Failed(error, policy) => {
            let plan = plan_failure(job.attempt, job.max_attempts, job.fence(), error, policy);
            match (plan.target, error.kind()) {
                (_, JobErrorKind::Snooze(_)) => Ended::Snoozed(plan.delay),
                (Target::Failed, _) => Ended::Failed(error.clone()),
                (Target::Pending, _) => Ended::Retried(error.clone(), plan.delay),
            }
        }
    };
    let _ = observer.send(Observed {
        id: job.id,
        job_name: job.job_name.clone(),
        attempt: job.attempt,
        ended,
    });
}

/// What a failed attempt turns into.
fn plan_failure(
    attempt: u32,
    max_attempts: u32,
    fence: Fence,
    error: &JobError,
    policy: &RetryPolicy,
) -> Transition {
    let exhausted = attempt >= max_attempts;
    let (target, delay, refund_attempt) = match error.kind() {
        JobErrorKind::Snooze(delay) => (Target::Pending, delay, true),
        JobErrorKind::Permanent => (Target::Failed, Duration::ZERO, false),
        _ if exhausted => (Target::Failed, Duration::ZERO, false),
        JobErrorKind::RetryIn(delay) => (Target::Pending, delay, false),
        _ => (Target::Pending, policy.delay(attempt), false),
    };
    // Past what every backend's time arithmetic holds (MySQL's DATETIME ends
    // in 9999, PostgreSQL's interval at about 178 million years): clamped to
    // the limit enqueue has, and said so.
    const CLAMPED: &str = "clamped to 100 years (jobq_runtime::MAX_DELAY)";
    let error = match error.kind() {
        JobErrorKind::Snooze(_) if delay > MAX_DELAY => {
            Some(format!("{}, {CLAMPED}", error.message()))
        }
        _ if delay > MAX_DELAY => Some(format!(
            "{}; to be retried in {delay:?}, {CLAMPED}",
            error.message()
        )),
        _ => plan_error(attempt, max_attempts, error, target, exhausted),
    };
    let delay = delay.min(MAX_DELAY);
    Transition {
        fence,
        target,
        delay,
        refund_attempt,
        error,
    }
}

/// The `last_error` a failed attempt writes (`None` keeps the old one).
fn plan_error(
    attempt: u32,
    max_attempts: u32,
    error: &JobError,
    target: Target,
    exhausted: bool,
) -> Option<String> {
    match error.kind() {
        JobErrorKind::Snooze(_) => None,
        _ if exhausted
            && target == Target::Failed
            && !matches!(error.kind(), JobErrorKind::Permanent) =>
        {
            Some(format!(
                "{} (attempt {} of {}: attempts exhausted)",
                error.message(),
                attempt,
                max_attempts
            ))
        }
        _ => Some(error.message().to_owned()),
    }
}

/// Writes a transition, retrying while the database is unreachable, for at
/// most about one lease: after that the reaper owns the job anyway — and not
/// past a shutdown's deadline. A panic in the write (a subscriber panicking
/// on a log line inside the driver) counts as a failed try.
pub(super) async fn apply(shared: &Shared, transition: &Transition) {
    let give_up = tokio::time::Instant::now() + shared.settings.lease;
    let mut failures = 0;
    loop {
        let started = tokio::time::Instant::now();
        let write = AssertUnwindSafe(shared.store.transition(transition)).catch_unwind();
        let Some(result) = unless(&shared.deadline_passed, write).await else {
            quietly(|| {
                tracing::error!(
                    job.id = transition.fence.id,
                    "the shutdown's deadline passed before the attempt was settled; the reaper returns the job when its lease expires"
                );
            });
            return;
        };
        let result = result.unwrap_or_else(|panic| Err(panicked("settle", panic.as_ref())));
        if result.is_ok() {
            shared
                .metrics
                .settled(metrics::Settle::Transition, started.elapsed());
        }
        match result {
            Ok(true) => return,
            Ok(false) => {
                shared.metrics.fenced_out(metrics::Settle::Transition, 1);
                quietly(|| {
                    if failures == 0 {
                        tracing::warn!(
                            job.id = transition.fence.id,
                            "settle fenced out: the job is no longer held by this attempt (lease expired and re-claimed, or cancelled); nothing changed"
                        );
                    } else {
                        // A failed try may have committed with only its
                        // reply lost: the row then no longer matches the
                        // fence because this very settle moved it.
                        tracing::warn!(
                            job.id = transition.fence.id,
                            failed_tries = failures,
                            "settle retried after an error found the job no longer held by this attempt: an earlier try committed and only its reply was lost, or the lease expired and the job was re-claimed or cancelled; this try changed nothing"
                        );
                    }
                });
                return;
            }
            Err(error) if tokio::time::Instant::now() < give_up => {
                failures += 1;
                let pause = backoff(failures);
                quietly(|| {
                    tracing::warn!(job.id = transition.fence.id, error = &error as &dyn std::error::Error, retry_in = ?pause, "settling the attempt failed; retrying");
                });
                // The next try, if any, sees the deadline passed.
                let _ = unless(&shared.deadline_passed, tokio::time::sleep(pause)).await;
            }
            Err(error) => {
                quietly(|| {
                    tracing::error!(
                        job.id = transition.fence.id,
                        error = &error as &dyn std::error::Error,
                        "giving up settling the attempt; the reaper will return the job when its lease expires"
                    );
                });
                return;
            }
        }
    }
}

/// `JobContext::extend_lease` for a job held by a worker.
struct JobLease {
    store: Store,
    fence: Fence,
    /// Its lease by this host's clock, moved by an extension that went through.
    held: Option<Arc<Held>>,
}

impl LeaseExtender for JobLease {
    fn extend(&self, by: Duration) -> ExtendFuture<'_> {
        Box::pin(async move {
            let sent = tokio::time::Instant::now();
            match self.store.heartbeat(&[self.fence], by).await {
                Ok(lost) if lost.is_empty() => {
                    if let Some(held) = &self.held {
                        held.renewed(sent, by.min(MAX_DELAY));
                    }
                    Ok(())
                }
                Ok(_) => Err(LeaseError::Lost),
                Err(error) => Err(LeaseError::Backend(Box::new(error))),
            }
        })
    }
}
