//! One attempt: decode, run outside any transaction, settle.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use jobq_core::{
    DispatchError, ExtendFuture, JobContext, JobError, JobErrorKind, JobMeta, LeaseError,
    LeaseExtender, RetryPolicy, error_chain,
};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, field};

use super::{Held, Pace, Shared, backoff};
use crate::MAX_DELAY;
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
    cancel: CancellationToken,
    lease_lost: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
}

impl Registered {
    /// Whether the heartbeat found its lease lost while it waited: it must
    /// not start (the heartbeat already forgot it).
    pub(super) fn lost(&self) -> bool {
        self.lease_lost.load(Ordering::SeqCst)
    }
}

/// Registers `job` as held, so heartbeats renew its lease from now on.
pub(super) fn register(shared: &Shared, job: ClaimedJob) -> Registered {
    let cancel = shared.stop_jobs.child_token();
    let lease_lost = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    shared.held().insert(
        job.fence(),
        Held {
            cancel: cancel.clone(),
            lease_lost: Arc::clone(&lease_lost),
            ended: Arc::clone(&ended),
        },
    );
    Registered {
        job,
        cancel,
        lease_lost,
        ended,
    }
}

/// Runs a registered job in its own task; `permit` (the queue slot) is
/// released when the attempt is settled, and the attempt's run time goes
/// into `pace`.
pub(super) fn start(
    shared: &Arc<Shared>,
    queue: &str,
    registered: Registered,
    permit: OwnedSemaphorePermit,
    pace: &Arc<Pace>,
) {
    let Registered {
        job,
        cancel,
        lease_lost,
        ended,
    } = registered;
    let span = tracing::info_span!(
        "jobq.job",
        job.id = job.id,
        job.name = %job.job_name,
        job.queue = %queue,
        job.attempt = job.attempt,
        job.outcome = field::Empty,
    );
    let shared_for_task = Arc::clone(shared);
    let pace = Arc::clone(pace);
    let queue = queue.to_owned();
    shared.jobs.spawn(
        async move {
            let shared = shared_for_task;
            let fence = job.fence();
            let started = std::time::Instant::now();
            let outcome = execute(&shared, &queue, &job, cancel).await;
            pace.record(started.elapsed());
            ended.store(true, Ordering::SeqCst);
            settle(&shared, &job, fence, outcome, &lease_lost).await;
            drop(permit);
        }
        .instrument(span),
    );
}

/// Hands registered jobs that never started back to `pending`, their attempt
/// not counted (a shutdown with jobs claimed ahead of free slots). Gives up
/// after one lease if the database is unreachable: the reaper returns them.
pub(super) async fn release_unstarted(shared: &Shared, jobs: Vec<Registered>) {
    let fences: Vec<Fence> = jobs.iter().map(|r| r.job.fence()).collect();
    let releases = futures_util::stream::iter(jobs).for_each_concurrent(
        RELEASE_CONCURRENCY,
        |registered| async move {
            if registered.lost() {
                return;
            }
            let transition = Transition {
                fence: registered.job.fence(),
                target: Target::Pending,
                delay: Duration::ZERO,
                refund_attempt: true,
                error: None,
            };
            apply(shared, &transition).await;
        },
    );
    if tokio::time::timeout(shared.settings.lease, releases)
        .await
        .is_err()
    {
        tracing::error!(
            jobs = fences.len(),
            "giving up handing back jobs claimed ahead of free slots; the reaper will return them when their leases expire"
        );
    }
    shared.release_held(&fences);
}

/// Releases of unstarted jobs in flight at once.
const RELEASE_CONCURRENCY: usize = 8;

async fn execute(
    shared: &Shared,
    queue: &str,
    job: &ClaimedJob,
    cancel: CancellationToken,
) -> Outcome {
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
    });
    let ctx = JobContext::new(meta, cancel.clone(), Some(lease));
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
    job: &ClaimedJob,
    fence: Fence,
    outcome: Outcome,
    lease_lost: &AtomicBool,
) {
    let span = tracing::Span::current();
    let transition = match outcome {
        Outcome::Succeeded => {
            span.record("job.outcome", "done");
            tracing::debug!("job done");
            if shared.completions.send(fence).await.is_err() {
                shared.release_held(&[fence]);
            }
            return;
        }
        Outcome::Interrupted if lease_lost.load(Ordering::SeqCst) => {
            span.record("job.outcome", "lease_lost");
            return;
        }
        Outcome::Interrupted => {
            span.record("job.outcome", "released");
            Transition {
                fence,
                target: Target::Pending,
                delay: Duration::ZERO,
                refund_attempt: true,
                error: None,
            }
        }
        Outcome::Failed(error, policy) => {
            let transition = plan_failure(job, fence, &error, &policy);
            let outcome = match (transition.target, error.kind()) {
                (_, JobErrorKind::Snooze(_)) => "snoozed",
                (Target::Failed, _) => "failed",
                (Target::Pending, _) => "retry",
            };
            span.record("job.outcome", outcome);
            if transition.target == Target::Failed {
                tracing::warn!(error = %error, outcome, "job failed");
            } else {
                tracing::info!(error = %error, retry_in = ?transition.delay, outcome, "attempt failed; the job will run again");
            }
            transition
        }
    };
    apply(shared, &transition).await;
    shared.release_held(&[fence]);
}

/// What a failed attempt turns into.
fn plan_failure(
    job: &ClaimedJob,
    fence: Fence,
    error: &JobError,
    policy: &RetryPolicy,
) -> Transition {
    let exhausted = job.attempt >= job.max_attempts;
    let (target, delay, refund_attempt) = match error.kind() {
        JobErrorKind::Snooze(delay) => (Target::Pending, delay, true),
        JobErrorKind::Permanent => (Target::Failed, Duration::ZERO, false),
        _ if exhausted => (Target::Failed, Duration::ZERO, false),
        JobErrorKind::RetryIn(delay) => (Target::Pending, delay, false),
        _ => (Target::Pending, policy.delay(job.attempt), false),
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
        _ => plan_error(job, error, target, exhausted),
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
    job: &ClaimedJob,
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
                job.attempt,
                job.max_attempts
            ))
        }
        _ => Some(error.message().to_owned()),
    }
}

/// Writes a transition, retrying while the database is unreachable, for at
/// most about one lease: after that the reaper owns the job anyway.
async fn apply(shared: &Shared, transition: &Transition) {
    let give_up = tokio::time::Instant::now() + shared.settings.lease;
    let mut failures = 0;
    loop {
        match shared.store.transition(transition).await {
            Ok(true) => return,
            Ok(false) => {
                tracing::warn!(
                    "settle fenced out: the job is no longer held by this attempt (lease expired and re-claimed, or cancelled); nothing changed"
                );
                return;
            }
            Err(error) if tokio::time::Instant::now() < give_up => {
                failures += 1;
                let pause = backoff(failures);
                tracing::warn!(error = &error as &dyn std::error::Error, retry_in = ?pause, "settling the attempt failed; retrying");
                tokio::time::sleep(pause).await;
            }
            Err(error) => {
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "giving up settling the attempt; the reaper will return the job when its lease expires"
                );
                return;
            }
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "its payload is not a string (std::panic::panic_any), so the panic hook's report on stderr is the place to look".to_owned()
    }
}

/// `JobContext::extend_lease` for a job held by a worker.
struct JobLease {
    store: Store,
    fence: Fence,
}

impl LeaseExtender for JobLease {
    fn extend(&self, by: Duration) -> ExtendFuture<'_> {
        Box::pin(async move {
            match self.store.heartbeat(&[self.fence], by).await {
                Ok(lost) if lost.is_empty() => Ok(()),
                Ok(_) => Err(LeaseError::Lost),
                Err(error) => Err(LeaseError::Backend(error_chain(&error))),
            }
        })
    }
}
