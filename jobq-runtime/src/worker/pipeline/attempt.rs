//! One attempt: a claimed job registered as held, run in a task of its
//! own — decoded, through the job layers to its handler, outside any
//! transaction — and its outcome handed to the settle.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use jobq_core::{
    DispatchError, ExtendFuture, JobContext, JobError, JobFuture, JobMeta, LeaseError,
    LeaseExtender, LoadFuture, RetryPolicy, error_chain,
};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, field};

use super::Pipeline;
use super::settle::{Attempted, Outcome, Owed, Settlement, apply, release, settle};
use crate::metrics::{self, QueueMetrics};
use crate::options::MAX_DELAY;
use crate::seam::{self, JobLayers};
use crate::store::{ClaimedJob, Fence};
use crate::worker::held::Held;
use crate::worker::inject::{self, Point};
use crate::worker::shared::Shared;
use crate::worker::util::{panic_report, quietly, unless};

/// A claimed job, registered as held (its lease renewed by the heartbeat)
/// and not started yet.
pub(in crate::worker) struct Registered {
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
/// `claimed` is when its claim was sent, `answered` when its answer came
/// (see [`HeldJobs::hold`](crate::worker::held::HeldJobs::hold)).
pub(super) fn register(
    pipeline: &Pipeline,
    job: ClaimedJob,
    claimed: tokio::time::Instant,
    answered: tokio::time::Instant,
) -> Registered {
    let settlement = Settlement {
        rescues: pipeline.rescues.clone(),
        fence: job.fence(),
        attempt: job.attempt,
        max_attempts: job.max_attempts,
        held: pipeline.shared.held.hold(job.fence(), claimed, answered),
        owed: Owed::Release,
    };
    Registered { job, settlement }
}

/// Runs a registered job in its own task; `permit` (the queue slot) is
/// released when the attempt is settled, and the attempt's run time goes
/// into `pace` and, with its outcome, into `queue_metrics`.
pub(super) fn start(
    pipeline: &Arc<Pipeline>,
    queue: &Arc<str>,
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
    #[cfg(feature = "otel")]
    crate::otel::continue_trace(&span, job.metadata.as_deref());
    let pipeline_for_task = Arc::clone(pipeline);
    let pace = Arc::clone(pace);
    let queue = Arc::clone(queue);
    settlement.owed = Owed::Failure;
    // The span is entered only while the attempt runs (decode, handler,
    // dropping the handler's future); the settle's log lines name it as
    // their parent, and its writes run outside it: a subscriber that panics
    // on the job's events (a closed stderr) must not panic in the driver's
    // statement log after a write went through, lose the write's result and
    // make the settle write again, with backoff, while the worker holds a
    // job whose row is already final.
    pipeline.jobs.spawn(async move {
        // Owned by the task: dropped unsettled, it hands the job to the rescuer.
        let mut settlement = settlement;
        let pipeline = pipeline_for_task;
        inject::point!(BeforeExecute, &queue);
        let started = std::time::Instant::now();
        // Decoding the payload, polling the handler and dropping its
        // future (after a timeout or cancellation) all run in here.
        let held = Arc::clone(&settlement.held);
        // The attempt boxed: inline, it and the settle made this task
        // 5.8 KB, copied by the spawn and again when it finishes (measured
        // in bench/issue30/README.md). The settle's own future is small: it
        // boxes its writes, which only a job that did not succeed makes.
        let attempt = Box::pin(execute(&pipeline, &queue, &job, held).instrument(span.clone()));
        let outcome = match AssertUnwindSafe(attempt).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(panic) => Outcome::Failed(
                JobError::panicked(format!(
                    "{} (outside its handler's poll: decoding its payload, or dropping the handler's future)",
                    panic_report("the attempt", panic.as_ref())
                )),
                pipeline
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
        let attempted = Attempted {
            pipeline: &pipeline,
            queue: &queue,
            job: &job,
            span: &span,
            job_metrics: &job_metrics,
        };
        settle(attempted, outcome, &mut settlement).await;
        drop(permit);
    });
}

/// Hands registered jobs that never started back to `pending`, their attempt
/// not counted (a shutdown with jobs claimed ahead of free slots). Gives up
/// after one lease if the database is unreachable: the reaper returns them.
pub(super) async fn release_unstarted(
    pipeline: &Pipeline,
    queue: &str,
    jobs: Vec<Registered>,
    queue_metrics: &QueueMetrics,
) {
    let shared = &*pipeline.shared;
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
    shared.held.release(&fences);
}

/// Releases of unstarted jobs in flight at once.
const RELEASE_CONCURRENCY: usize = 8;

async fn execute(pipeline: &Pipeline, queue: &str, job: &ClaimedJob, held: Arc<Held>) -> Outcome {
    let shared = &*pipeline.shared;
    let cancel = held.cancel_token().clone();
    if let Some(reason) = &job.unreadable {
        return Outcome::Failed(
            JobError::permanent(format!(
                "{reason}; failed without retrying, as another attempt cannot fix it: correct the row and call Jobq::retry"
            )),
            RetryPolicy::DEFAULT,
        );
    }
    let Some(registration) = pipeline.registry.get(&job.job_name) else {
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
    if job.metadata.is_some() || job.tags.is_some() {
        meta.metadata = crate::types::parse_metadata(job.metadata.clone());
        meta.tags = crate::types::parse_tags(job.tags.as_deref());
    }
    let lease: Arc<dyn LeaseExtender> = Arc::new(JobLease {
        shared: Arc::clone(&pipeline.shared),
        fence: job.fence(),
        held: Some(held),
    });
    let ctx = JobContext::new(meta, cancel.clone(), Some(lease));
    // Where the handler leaves its output (`#[job]` puts it on the context).
    let kept = ctx.clone();
    // What the job layers see of the attempt: made only when there are any.
    let layered = (!pipeline.layers.is_empty()).then(|| ctx.clone());
    if inject::fire(Point::Decode, queue).is_some() {
        panic!("jobq fault injection: the decode's future dropped (a panic here)");
    }
    let dispatched = match (registration.run)(ctx, &job.payload, &pipeline.states) {
        Ok(attempt) => Ok(attempt),
        Err(error @ DispatchError::Payload { .. }) => Err(JobError::permanent(format!(
            "{}; failed without retrying, as another attempt cannot fix it: correct the row's payload (or make the payload type accept it) and call Jobq::retry",
            error_chain(&error)
        ))),
        Err(error) => Err(JobError::retry(error_chain(&error))),
    };
    let timeout = registration.timeout;
    let Some(context) = layered else {
        // No layer: the handler, directly.
        let attempt = match dispatched {
            Ok(attempt) => attempt,
            Err(error) => return Outcome::Failed(error, policy),
        };
        return unless_cancelled(&cancel, timed(attempt, timeout), policy)
            .await
            .with_output(&kept);
    };
    // Boxed: an attempt without layers carries none of their state.
    let layered = through_layers(
        &pipeline.layers,
        &context,
        &job.payload,
        dispatched,
        timeout,
    );
    unless_cancelled(&cancel, Box::pin(layered), policy)
        .await
        .with_output(&kept)
}

/// The attempt through the job layers, which see a payload that does not
/// decode as the handler's error; a layer's panic fails the attempt as a
/// handler's does.
async fn through_layers(
    layers: &JobLayers,
    context: &JobContext,
    payload: &str,
    dispatched: Result<JobFuture, JobError>,
    timeout: Option<Duration>,
) -> Result<(), JobError> {
    let handler = async move {
        match dispatched {
            Ok(attempt) => timed(attempt, timeout).await,
            Err(error) => Err(error),
        }
    };
    tokio::pin!(handler);
    let attempt = seam::Attempt::new(context, payload);
    AssertUnwindSafe(layers.run(&attempt, handler))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            Err(JobError::panicked(panic_report(
                "a job layer",
                panic.as_ref(),
            )))
        })
}

/// The handler's future to its end, within `timeout`: a panic or the
/// timeout is the attempt's error.
async fn timed(
    attempt: impl Future<Output = Result<(), JobError>>,
    timeout: Option<Duration>,
) -> Result<(), JobError> {
    let attempt = AssertUnwindSafe(attempt).catch_unwind();
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, attempt)
            .await
            .map_err(|_| limit),
        None => Ok(attempt.await),
    };
    match result {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(JobError::panicked(panic_report("handler", panic.as_ref()))),
        Err(limit) => Err(JobError::timed_out(limit)),
    }
}

/// The outcome of `attempt`, unless `cancel` fires first (the shutdown's
/// deadline, a lost lease): then it is dropped, interrupted.
async fn unless_cancelled(
    cancel: &CancellationToken,
    attempt: impl Future<Output = Result<(), JobError>>,
    policy: RetryPolicy,
) -> Outcome {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Outcome::Interrupted,
        result = attempt => match result {
            Ok(()) => Outcome::Succeeded(None),
            Err(error) => Outcome::Failed(error, policy),
        },
    }
}

/// `JobContext::extend_lease` for a job held by a worker.
struct JobLease {
    /// The worker's (its store): one reference count, where a clone of the
    /// store would be one per pool and stash.
    shared: Arc<Shared>,
    fence: Fence,
    /// Its lease by this host's clock, moved by an extension that went through.
    held: Option<Arc<Held>>,
}

impl LeaseExtender for JobLease {
    fn extend(&self, by: Duration) -> ExtendFuture<'_> {
        Box::pin(async move {
            let sent = tokio::time::Instant::now();
            match self.shared.store.heartbeat(&[self.fence], by).await {
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

    fn token(&self) -> Option<i64> {
        Some(self.fence.token)
    }

    fn completing(&self) {
        if let Some(held) = &self.held {
            held.complete_in();
        }
    }

    fn save_checkpoint(&self, json: String) -> ExtendFuture<'_> {
        Box::pin(async move {
            match self.shared.store.save_checkpoint(self.fence, &json).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(LeaseError::Lost),
                Err(error) => Err(LeaseError::Backend(Box::new(error))),
            }
        })
    }

    fn load_checkpoint(&self) -> LoadFuture<'_> {
        Box::pin(async move {
            self.shared
                .store
                .load_checkpoint(self.fence.id)
                .await
                .map_err(|error| LeaseError::Backend(Box::new(error)))
        })
    }

    fn dependency_outputs(&self) -> jobq_core::OutputsFuture<'_> {
        Box::pin(async move {
            self.shared
                .store
                .flow_outputs(self.fence.id)
                .await
                .map_err(|error| LeaseError::Backend(Box::new(error)))
        })
    }

    fn save_progress(&self, json: String) -> ExtendFuture<'_> {
        Box::pin(async move {
            match self.shared.store.save_progress(self.fence, &json).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(LeaseError::Lost),
                Err(error) => Err(LeaseError::Backend(Box::new(error))),
            }
        })
    }
}
