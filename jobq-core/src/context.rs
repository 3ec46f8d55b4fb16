//! What a running attempt knows about itself.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The future returned by [`LeaseExtender::extend`].
pub type ExtendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), LeaseError>> + Send + 'a>>;

/// Extends the lease of one running job; implemented by the runtime's stores.
pub trait LeaseExtender: Send + Sync {
    /// Moves the lease deadline to `by` from now (database clock).
    fn extend(&self, by: Duration) -> ExtendFuture<'_>;
}

/// Why a lease could not be extended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The job is no longer held by this attempt (its lease expired and it was
    /// reclaimed, or it was cancelled); stop working on it.
    #[error("the lease was lost: the job is no longer held by this attempt")]
    Lost,
    /// The database could not be reached, or refused the renewal; the
    /// source is the runtime's error.
    #[error("the lease could not be extended")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The context was built outside a worker.
    #[error("this job context has no lease (it was not created by a worker)")]
    Detached,
}

/// Facts about one attempt of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobMeta {
    /// The row id.
    pub id: i64,
    /// The registered job name.
    pub name: String,
    /// The queue the job was claimed from.
    pub queue: String,
    /// This attempt's number, starting at 1.
    pub attempt: u32,
    /// The job's attempt limit.
    pub max_attempts: u32,
    /// The idempotency key the job was enqueued with, if any.
    pub idempotency_key: Option<String>,
}

impl JobMeta {
    /// Meta for a job: `id`, `name`, `queue`, attempt 1 of 1, no key.
    pub fn new(id: i64, name: impl Into<String>, queue: impl Into<String>) -> Self {
        Self {
            id,
            name: name.into(),
            queue: queue.into(),
            attempt: 1,
            max_attempts: 1,
            idempotency_key: None,
        }
    }
}

/// Handed to a `#[job]` fn that takes a `JobContext` (or `&JobContext`) parameter.
///
/// ```
/// use jobq_core::{JobContext, JobMeta};
///
/// let ctx = JobContext::detached(JobMeta::new(7, "send_welcome", "mail"));
/// assert_eq!(ctx.id(), 7);
/// assert_eq!(ctx.idempotency_key(), "jobq:send_welcome:7");
/// assert!(!ctx.is_cancelled());
/// ```
#[derive(Clone)]
pub struct JobContext {
    meta: Arc<JobMeta>,
    cancel: CancellationToken,
    lease: Option<Arc<dyn LeaseExtender>>,
}

impl JobContext {
    /// A context for a claimed job (used by the worker).
    pub fn new(
        meta: JobMeta,
        cancel: CancellationToken,
        lease: Option<Arc<dyn LeaseExtender>>,
    ) -> Self {
        Self {
            meta: Arc::new(meta),
            cancel,
            lease,
        }
    }

    /// A context with no worker behind it: for calling a `#[job]` fn directly in tests.
    pub fn detached(meta: JobMeta) -> Self {
        Self::new(meta, CancellationToken::new(), None)
    }

    /// The job's row id.
    pub fn id(&self) -> i64 {
        self.meta.id
    }

    /// The registered job name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The queue the job runs on.
    pub fn queue(&self) -> &str {
        &self.meta.queue
    }

    /// This attempt's number, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.meta.attempt
    }

    /// The job's attempt limit.
    pub fn max_attempts(&self) -> u32 {
        self.meta.max_attempts
    }

    /// A key that is the same on every attempt of this job: the key it was
    /// enqueued with, or `jobq:{name}:{id}`. Pass it to external systems
    /// (payment APIs, mailers) so a re-run after a crash does not repeat a side effect.
    pub fn idempotency_key(&self) -> String {
        match &self.meta.idempotency_key {
            Some(key) => key.clone(),
            None => format!("jobq:{}:{}", self.meta.name, self.meta.id),
        }
    }

    /// All facts about this attempt.
    pub fn meta(&self) -> &JobMeta {
        &self.meta
    }

    /// Cancelled when the worker stops this attempt: its shutdown deadline
    /// passed, `Jobq::cancel` cancelled the job, or a heartbeat found the
    /// lease lost (the job was reaped and may run elsewhere).
    ///
    /// The worker drops the handler's future as the token fires, so a
    /// handler stops at its next `.await` whether it watches the token or
    /// not (its `Drop`s run). What the token is for is work the future does
    /// not own: a task it spawned, a `spawn_blocking` closure, a loop that
    /// runs long between awaits: check [`is_cancelled`](Self::is_cancelled)
    /// there, or hand them a clone of the token.
    ///
    /// The job's `timeout` does not fire it: a timed-out attempt's future is
    /// dropped as well, and the attempt fails with "attempt timed out after …".
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether this attempt has been asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when this attempt is asked to stop (see
    /// [`cancellation_token`](Self::cancellation_token)). The worker drops the
    /// handler's own future at that moment, so code after this await in the
    /// handler does not run; await it in a task the handler spawned with a
    /// clone of the context.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it loses nothing.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Extends this job's lease to `by` from now, beyond what the worker's
    /// heartbeat does. `Err(LeaseError::Lost)` means another attempt owns the job now.
    pub async fn extend_lease(&self, by: Duration) -> Result<(), LeaseError> {
        match &self.lease {
            Some(lease) => lease.extend(by).await,
            None => Err(LeaseError::Detached),
        }
    }
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("meta", &self.meta)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}
