//! Settling an attempt's outcome: a success handed to the completer, a
//! failure or an interruption written as one fenced transition, and what a
//! task that died owed written by the rescuer.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use jobq_core::{JobError, JobErrorKind, RetryPolicy};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Ended, Observed, Pipeline};
use crate::metrics::{self, JobMetrics};
use crate::options::MAX_DELAY;
use crate::store::{ClaimedJob, Fence, Settled, Target, Transition, history_message};
use crate::worker::held::Held;
use crate::worker::inject;
use crate::worker::shared::Shared;
use crate::worker::util::{backoff, panicked, quietly, unless};

/// How an attempt ended.
pub(super) enum Outcome {
    /// With the output the handler returned, as JSON.
    Succeeded(Option<String>),
    /// The handler completed its job in a transaction of its own
    /// ([`CompleteIn`](crate::CompleteIn)), then returned `Ok` (`None`) or
    /// this error.
    CompletedIn(Option<(JobError, RetryPolicy)>),
    Failed(JobError, RetryPolicy),
    /// Cancelled by the shutdown deadline or a lost lease.
    Interrupted,
}

impl Outcome {
    /// A success with the output its handler left on `ctx`.
    pub(super) fn with_output(self, ctx: &jobq_core::JobContext) -> Self {
        match self {
            Self::Succeeded(_) if ctx.completed_in() => Self::CompletedIn(None),
            Self::Failed(error, policy) if ctx.completed_in() => {
                Self::CompletedIn(Some((error, policy)))
            }
            Self::Succeeded(_) => Self::Succeeded(ctx.take_output()),
            other => other,
        }
    }
}

/// What a held job is owed if whatever holds it ends without settling it.
#[derive(Debug)]
pub(super) enum Owed {
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
    pub(super) rescues: mpsc::UnboundedSender<Transition>,
    pub(super) fence: Fence,
    pub(super) attempt: u32,
    pub(super) max_attempts: u32,
    /// The handles the heartbeat shares.
    pub(super) held: Arc<Held>,
    pub(super) owed: Owed,
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
pub(super) fn release(fence: Fence) -> Transition {
    Transition {
        fence,
        target: Target::Pending,
        delay: Duration::ZERO,
        refund_attempt: true,
        error: None,
        record: None,
    }
}

/// The rescuer: writes what job tasks that died owed (see [`Settlement`]).
#[derive(Debug)]
pub(in crate::worker) struct Rescuer {
    shared: Arc<Shared>,
    rescues: mpsc::UnboundedReceiver<Transition>,
    /// Makes it drain what is left and stop.
    stop: CancellationToken,
}

impl Rescuer {
    /// A rescuer and the sender job tasks hand it what they owe.
    pub(in crate::worker) fn new(shared: Arc<Shared>) -> (Self, mpsc::UnboundedSender<Transition>) {
        let (sender, rescues) = mpsc::unbounded_channel();
        let rescuer = Self {
            shared,
            rescues,
            stop: CancellationToken::new(),
        };
        (rescuer, sender)
    }

    /// The signal that makes it drain what is left and stop.
    pub(in crate::worker) fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Writes what dead tasks owed, one at a time, until stopped; then
    /// what is left, for at most one lease.
    pub(in crate::worker) async fn run(self) {
        let Self {
            shared,
            mut rescues,
            stop,
        } = self;
        loop {
            tokio::select! {
                biased;
                received = rescues.recv() => match received {
                    Some(transition) => rescue(&shared, &transition).await,
                    None => return,
                },
                () = stop.cancelled() => break,
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
}

async fn rescue(shared: &Shared, transition: &Transition) {
    let _ = AssertUnwindSafe(apply(shared, transition))
        .catch_unwind()
        .await;
    shared.held.release(&[transition.fence]);
}

/// The attempt a settle is for: the job, its queue and span, its
/// metric handles, and the pipeline that ran it.
#[derive(Clone, Copy)]
pub(super) struct Attempted<'a> {
    pub(super) pipeline: &'a Pipeline,
    pub(super) queue: &'a str,
    pub(super) job: &'a ClaimedJob,
    pub(super) span: &'a tracing::Span,
    pub(super) job_metrics: &'a JobMetrics,
}

/// Settles the attempt's `outcome` and forgets the job (a success once the
/// completer has it).
pub(super) async fn settle(attempt: Attempted<'_>, outcome: Outcome, settlement: &mut Settlement) {
    let Attempted {
        pipeline,
        queue,
        job,
        span,
        job_metrics,
    } = attempt;
    // Every log line and span record below is `quietly`: a subscriber that
    // panics (a closed stderr) must not stop the settle. The attempt's span
    // is not entered here (see `attempt::start`): log lines name it as their parent.
    let shared = &*pipeline.shared;
    let fence = job.fence();
    observe(pipeline, job, &outcome);
    match outcome {
        Outcome::Succeeded(output) => {
            job_metrics.ended(metrics::Outcome::Succeeded);
            if let Some(output) = output {
                shared.keep_output(fence.id, output);
            }
            quietly(|| {
                span.record("job.outcome", "done");
            });
            inject::point!(CompleterSend, queue);
            if let Some(releases) = job.releases() {
                shared
                    .completed_flows
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(fence.id, releases);
            }
            if let Some(key) = &job.concurrency_key {
                shared
                    .completed_keys
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(fence.id, key.clone());
            }
            // A completer stuck on a database that does not answer fills
            // the channel; past the shutdown's deadline nothing waits.
            let sent = unless(&shared.deadline_passed, pipeline.completions.send(fence)).await;
            if !matches!(sent, Some(Ok(()))) {
                shared.held.release(&[fence]);
            }
            settlement.owed = Owed::Nothing;
            quietly(|| tracing::debug!(parent: span, "job done"));
        }
        // Boxed: the writes below (for every backend) make a future of
        // kilobytes, which the common case, a success handed to the
        // completer, should not carry, allocate and copy at every job.
        outcome => {
            Box::pin(settle_otherwise(attempt, outcome, settlement)).await;
        }
    }
}

/// [`settle`] of an attempt that did not succeed, or completed its job
/// in a transaction of its own: one fenced transition written here.
async fn settle_otherwise(attempt: Attempted<'_>, outcome: Outcome, settlement: &mut Settlement) {
    let (pipeline, queue, job) = (attempt.pipeline, attempt.queue, attempt.job);
    let (span, job_metrics) = (attempt.span, attempt.job_metrics);
    let shared = &*pipeline.shared;
    let fence = job.fence();
    let transition = match outcome {
        // Settled by `settle`.
        Outcome::Succeeded(_) => return,
        Outcome::CompletedIn(returned) => {
            // Done if the handler's transaction committed; if it rolled
            // back (or is still open) the job is still held, and the
            // attempt is settled as its outcome says: the handler's error,
            // or, for `Ok`, a failure that says the completion did not
            // commit — retried on its schedule. One fenced transition does
            // either: it matches nothing once the completion committed
            // (waiting on the row's lock while the transaction is open).
            job_metrics.ended(metrics::Outcome::Succeeded);
            quietly(|| {
                span.record("job.outcome", "done");
            });
            let (failure, policy) = returned.unwrap_or_else(|| {
                let policy = pipeline
                    .registry
                    .get(&job.job_name)
                    .map_or(RetryPolicy::DEFAULT, |r| (r.retry_policy)());
                (
                    JobError::retry(
                        "the attempt completed its job in a transaction that did not commit (it rolled back, or was still open when the handler returned)",
                    ),
                    policy,
                )
            });
            let transition = plan_failure(job.attempt, job.max_attempts, fence, &failure, &policy);
            settlement.owed = Owed::Nothing;
            apply_expecting(shared, &transition, Expect::Done).await;
            shared.held.release(&[fence]);
            if let Some(key) = &job.concurrency_key {
                shared.release_keys(std::slice::from_ref(key)).await;
            }
            if let Some(releases) = job.releases() {
                shared
                    .release_dependents(&Settled::of(fence.id, releases))
                    .await;
            }
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
    if transition.target == Target::Pending {
        // The queue's loop claims it when due, not at the watcher's next look.
        crate::wakeup::waiting(queue).due_at(tokio::time::Instant::now() + transition.delay);
    }
    shared.held.release(&[fence]);
    if transition.target == Target::Failed {
        if let Some(key) = &job.concurrency_key {
            shared.release_keys(std::slice::from_ref(key)).await;
        }
        if let Some(releases) = job.releases() {
            shared
                .release_dependents(&Settled::of(fence.id, releases))
                .await;
        }
    }
}

/// Tells the worker's observer, if it has one, how the attempt ended.
fn observe(pipeline: &Pipeline, job: &ClaimedJob, outcome: &Outcome) {
    let Some(observer) = &pipeline.observer else {
        return;
    };
    let ended = match outcome {
        Outcome::Succeeded(_) | Outcome::CompletedIn(_) => Ended::Succeeded,
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
pub(super) fn plan_failure(
    attempt: u32,
    max_attempts: u32,
    fence: Fence,
    failure: &JobError,
    policy: &RetryPolicy,
) -> Transition {
    let exhausted = attempt >= max_attempts;
    let (target, delay, refund_attempt) = match failure.kind() {
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
    let error = match failure.kind() {
        JobErrorKind::Snooze(_) if delay > MAX_DELAY => {
            Some(format!("{}, {CLAMPED}", failure.message()))
        }
        _ if delay > MAX_DELAY => Some(format!(
            "{}; to be retried in {delay:?}, {CLAMPED}",
            failure.message()
        )),
        _ => plan_error(attempt, max_attempts, failure, target, exhausted),
    };
    let delay = delay.min(MAX_DELAY);
    let note = history_message(error.as_deref().unwrap_or(failure.message()));
    Transition {
        fence,
        target,
        delay,
        refund_attempt,
        error,
        record: Some((failure.ended().as_str(), note)),
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
    apply_expecting(shared, transition, Expect::Held).await;
}

/// What a transition expects of its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// Still held by the attempt: a fenced-out write is worth a warning.
    Held,
    /// Probably done already (completed in the handler's transaction): a
    /// fenced-out write is the normal case.
    Done,
}

/// [`apply`], told what to expect of the row.
pub(super) async fn apply_expecting(shared: &Shared, transition: &Transition, expect: Expect) {
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
            Ok(true) => {
                shared.settled.notify_waiters();
                return;
            }
            Ok(false) if expect == Expect::Done => return,
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
