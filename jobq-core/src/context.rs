//! What a running attempt knows about itself.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The future returned by [`LeaseExtender::extend`].
pub type ExtendFuture<'a> = Pin<Box<dyn Future<Output = Result<(), LeaseError>> + Send + 'a>>;

/// The future returned by [`LeaseExtender::load_checkpoint`]: the JSON saved last.
pub type LoadFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<String>, LeaseError>> + Send + 'a>>;

/// The future returned by [`LeaseExtender::dependency_outputs`]: each
/// dependency's task name and output (JSON), if it recorded one.
pub type OutputsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<(String, Option<String>)>, LeaseError>> + Send + 'a>>;

/// Writes fenced by one running attempt's lease: extends it, saves and
/// reads its job's checkpoint, records its progress. Implemented by the
/// runtime's stores; each write matches the job's row only while this
/// attempt holds it.
pub trait LeaseExtender: Send + Sync {
    /// Moves the lease deadline to `by` from now (database clock).
    fn extend(&self, by: Duration) -> ExtendFuture<'_>;

    /// Saves `json` as the job's checkpoint.
    fn save_checkpoint(&self, json: String) -> ExtendFuture<'_> {
        let _ = json;
        Box::pin(async { Err(LeaseError::Detached) })
    }

    /// The checkpoint an attempt of the job saved last.
    fn load_checkpoint(&self) -> LoadFuture<'_> {
        Box::pin(async { Err(LeaseError::Detached) })
    }

    /// Records `json` as the job's progress.
    fn save_progress(&self, json: String) -> ExtendFuture<'_> {
        let _ = json;
        Box::pin(async { Err(LeaseError::Detached) })
    }

    /// The task names and outputs of the jobs this job depends on in its
    /// workflow.
    fn dependency_outputs(&self) -> OutputsFuture<'_> {
        Box::pin(async { Err(LeaseError::Detached) })
    }

    /// The token of the claim this attempt holds the job by, which a write
    /// fenced by the attempt matches.
    fn token(&self) -> Option<i64> {
        None
    }

    /// The attempt completed its job in a transaction of its own: finding
    /// the row gone from `processing` is no lost lease.
    fn completing(&self) {}
}

/// Why a dependency's output could not be read
/// ([`JobContext::dependency_output`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The output is not JSON of the type asked for.
    #[error("the output of dependency `{task}` does not deserialize into `{type_name}`")]
    Decode {
        /// The dependency's task name.
        task: String,
        /// The type asked for.
        type_name: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// The database failed, or the context has no worker behind it.
    #[error("the outputs of the job's dependencies could not be read")]
    Lease(#[source] LeaseError),
}

/// Why a checkpoint could not be saved or read
/// ([`JobContext::checkpoint`], [`JobContext::last_checkpoint`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The job is no longer held by this attempt (its lease expired and it
    /// was claimed again, or it was cancelled): nothing was saved; stop
    /// working on it.
    #[error("the checkpoint was not saved: the job is no longer held by this attempt")]
    Lost,
    /// The value does not serialize to JSON.
    #[error("the checkpoint does not serialize to JSON")]
    Serialize(#[source] serde_json::Error),
    /// The value's JSON is over [`MAX_CHECKPOINT_BYTES`].
    #[error(
        "the checkpoint is {bytes} bytes of JSON, over the cap of {MAX_CHECKPOINT_BYTES} bytes \
         (MAX_CHECKPOINT_BYTES): keep less, or store it elsewhere and checkpoint a reference"
    )]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The saved checkpoint is not JSON of the type asked for (its type
    /// changed since it was saved, or the row was written by hand).
    #[error(
        "the saved checkpoint does not deserialize into `{type_name}` (did its type change since it was saved?)"
    )]
    Decode {
        /// The type asked for.
        type_name: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// The database could not be reached, or refused the write.
    #[error("the checkpoint could not be written or read")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The most bytes of JSON a checkpoint may take.
pub const MAX_CHECKPOINT_BYTES: usize = 1 << 20;

/// How often, at most, an attempt's progress is written to its row: a
/// report within this long of the last write is kept and written when the
/// interval has passed (the latest one wins).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl From<LeaseError> for CheckpointError {
    fn from(error: LeaseError) -> Self {
        match error {
            LeaseError::Lost => Self::Lost,
            LeaseError::Backend(source) => Self::Backend(source),
            LeaseError::Detached => Self::Backend("no worker behind this context".into()),
        }
    }
}

impl From<CheckpointError> for crate::JobError {
    /// A failed attempt, retried on the job's schedule, with the error
    /// and its cause as the message.
    fn from(error: CheckpointError) -> Self {
        crate::JobError::retry(crate::error_chain(&error))
    }
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
    /// The metadata the job was enqueued with (a JSON object), if any.
    pub metadata: Option<serde_json::Value>,
    /// The tags the job was enqueued with.
    pub tags: Vec<String>,
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
            metadata: None,
            tags: Vec::new(),
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
    inner: Arc<Inner>,
    cancel: CancellationToken,
    lease: Option<Arc<dyn LeaseExtender>>,
}

/// What an attempt's contexts share: its facts, and the output its handler
/// returned (one allocation per attempt, as the facts alone were).
struct Inner {
    meta: JobMeta,
    /// The handler's output as JSON, set when it returns one (see
    /// [`JobContext::take_output`]).
    output: std::sync::Mutex<Option<String>>,
    /// A detached context's checkpoint (no database behind it).
    checkpoint: std::sync::Mutex<Option<String>>,
    /// Progress reports: when one was last written, the latest not yet
    /// written, and whether a write of it is scheduled.
    progress: std::sync::Mutex<Progress>,
    /// Whether the handler completed its job in a transaction of its own.
    completed_in: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Progress {
    written_at: Option<std::time::Instant>,
    pending: Option<String>,
    scheduled: bool,
    /// What a detached context was told last.
    latest: Option<String>,
}

impl JobContext {
    /// A context for a claimed job (used by the worker).
    pub fn new(
        meta: JobMeta,
        cancel: CancellationToken,
        lease: Option<Arc<dyn LeaseExtender>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                meta,
                output: std::sync::Mutex::new(None),
                checkpoint: std::sync::Mutex::new(None),
                progress: std::sync::Mutex::new(Progress::default()),
                completed_in: std::sync::atomic::AtomicBool::new(false),
            }),
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
        self.inner.meta.id
    }

    /// The registered job name.
    pub fn name(&self) -> &str {
        &self.inner.meta.name
    }

    /// The queue the job runs on.
    pub fn queue(&self) -> &str {
        &self.inner.meta.queue
    }

    /// This attempt's number, starting at 1.
    pub fn attempt(&self) -> u32 {
        self.inner.meta.attempt
    }

    /// The job's attempt limit.
    pub fn max_attempts(&self) -> u32 {
        self.inner.meta.max_attempts
    }

    /// A key that is the same on every attempt of this job: the key it was
    /// enqueued with, or `jobq:{name}:{id}`. Pass it to external systems
    /// (payment APIs, mailers) so a re-run after a crash does not repeat a side effect.
    pub fn idempotency_key(&self) -> String {
        match &self.inner.meta.idempotency_key {
            Some(key) => key.clone(),
            None => format!("jobq:{}:{}", self.inner.meta.name, self.inner.meta.id),
        }
    }

    /// The metadata the job was enqueued with (a JSON object), if any:
    /// what `Enqueue::metadata` and enqueue middleware stored, such as the
    /// enqueuer's trace context.
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.inner.meta.metadata.as_ref()
    }

    /// The tags the job was enqueued with.
    pub fn tags(&self) -> &[String] {
        &self.inner.meta.tags
    }

    /// All facts about this attempt.
    pub fn meta(&self) -> &JobMeta {
        &self.inner.meta
    }

    /// Keeps `json` (the handler's output, serialized) for the worker to
    /// store with the job when the attempt succeeds (`#[job]` calls it
    /// with what the fn returned).
    #[doc(hidden)]
    pub fn put_output(&self, json: String) {
        *self
            .inner
            .output
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(json);
    }

    /// The token of the claim this attempt holds its job by (`None`
    /// without a worker).
    #[doc(hidden)]
    pub fn lease_token(&self) -> Option<i64> {
        self.lease.as_ref().and_then(|lease| lease.token())
    }

    /// Notes that the handler completed its job in a transaction of its
    /// own: the worker does not complete it again.
    #[doc(hidden)]
    pub fn mark_completed_in(&self) {
        self.inner
            .completed_in
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(lease) = &self.lease {
            lease.completing();
        }
    }

    /// Whether [`mark_completed_in`](Self::mark_completed_in) was called.
    #[doc(hidden)]
    pub fn completed_in(&self) -> bool {
        self.inner
            .completed_in
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The output the handler returned, as JSON, if any (taken: the worker
    /// stores it once).
    #[doc(hidden)]
    pub fn take_output(&self) -> Option<String> {
        self.inner
            .output
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
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

    /// Saves `state` as this job's checkpoint: one short statement,
    /// fenced by this attempt's lease, so cheap enough every few seconds.
    /// The next attempt of the job — after a crash, a kill, a timeout, a
    /// failure, a shutdown — reads it with
    /// [`last_checkpoint`](Self::last_checkpoint) and resumes from there.
    ///
    /// # Errors
    /// [`CheckpointError::Lost`] when this attempt no longer holds the job
    /// (nothing was saved: stop working on it); the value does not
    /// serialize or is over [`MAX_CHECKPOINT_BYTES`]; the database failed.
    /// With `?` in a handler returning `Result<_, JobError>` (or any
    /// error that displays) each fails the attempt with its message.
    ///
    /// ```
    /// use jobq_core::{JobContext, JobMeta};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// // A detached context (tests) keeps its checkpoint in memory.
    /// let ctx = JobContext::detached(JobMeta::new(7, "import", "default"));
    /// assert_eq!(ctx.last_checkpoint::<u64>().await.unwrap(), None);
    /// ctx.checkpoint(&500u64).await.unwrap();
    /// assert_eq!(ctx.last_checkpoint::<u64>().await.unwrap(), Some(500));
    /// # }
    /// ```
    pub async fn checkpoint<T: serde::Serialize + ?Sized>(
        &self,
        state: &T,
    ) -> Result<(), CheckpointError> {
        let json = serde_json::to_string(state).map_err(CheckpointError::Serialize)?;
        if json.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge { bytes: json.len() });
        }
        match &self.lease {
            Some(lease) => Ok(lease.save_checkpoint(json).await?),
            None => {
                *lock(&self.inner.checkpoint) = Some(json);
                Ok(())
            }
        }
    }

    /// The output of the job this one depends on as task `task` of its
    /// workflow (see `Jobq::enqueue_workflow`), decoded as `T` (the
    /// `Output` of that task's job); `None` if it recorded none (it
    /// returned `()`, or ended without succeeding: with
    /// `OnFailure::Run`), or this job has no dependency named so. One
    /// short statement.
    ///
    /// # Errors
    /// [`OutputError::Decode`] when the output is not JSON of `T`;
    /// [`OutputError::Lease`] when the database failed, or the context is
    /// detached (a test calling the fn directly).
    pub async fn dependency_output<T: serde::de::DeserializeOwned>(
        &self,
        task: &str,
    ) -> Result<Option<T>, OutputError> {
        let Some(lease) = &self.lease else {
            return Err(OutputError::Lease(LeaseError::Detached));
        };
        let outputs = lease
            .dependency_outputs()
            .await
            .map_err(OutputError::Lease)?;
        let Some(json) = outputs
            .into_iter()
            .find(|(name, _)| name == task)
            .and_then(|(_, output)| output)
        else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|source| OutputError::Decode {
                task: task.to_owned(),
                type_name: std::any::type_name::<T>(),
                source,
            })
    }

    /// The checkpoint an attempt of this job saved last
    /// ([`checkpoint`](Self::checkpoint)), `None` if none did: read from
    /// the job's row (one short statement; call it once, at the start).
    ///
    /// # Errors
    /// [`CheckpointError::Decode`] when the saved value is not JSON of `T`
    /// (its type changed between deploys: the handler decides — start
    /// over, or fail the attempt with `?`, which records the message as
    /// the job's `last_error`); the database failed.
    pub async fn last_checkpoint<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Result<Option<T>, CheckpointError> {
        let json = match &self.lease {
            Some(lease) => lease.load_checkpoint().await?,
            None => lock(&self.inner.checkpoint).clone(),
        };
        json.map(|json| {
            serde_json::from_str(&json).map_err(|source| CheckpointError::Decode {
                type_name: std::any::type_name::<T>(),
                source,
            })
        })
        .transpose()
    }

    /// Reports how far the attempt is: `done` of `total` (`total` 0: a
    /// count with no end known) and a short note, shown by `jobq show`,
    /// `list`, the dashboard and `Jobq::job` while the job runs. Never
    /// waits: written to the job's row at most once per
    /// [`PROGRESS_EVERY`] (a report within a second of the last write is
    /// written a second after it, the latest winning), by a task of its
    /// own, fenced by the lease; a failed write is dropped (progress is
    /// advice, never an error). The note is cut at 200 bytes.
    pub fn progress(&self, done: u64, total: u64, note: &str) {
        let mut note = note;
        if note.len() > 200 {
            let mut end = 200;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note = &note[..end];
        }
        let json = serde_json::json!({ "done": done, "total": total, "note": note }).to_string();
        let Some(lease) = &self.lease else {
            lock(&self.inner.progress).latest = Some(json);
            return;
        };
        let mut progress = lock(&self.inner.progress);
        let now = std::time::Instant::now();
        let due = progress.written_at.map_or(now, |at| at + PROGRESS_EVERY);
        progress.pending = Some(json);
        if progress.scheduled {
            return;
        }
        progress.scheduled = true;
        drop(progress);
        let (inner, lease) = (Arc::clone(&self.inner), Arc::clone(lease));
        let cancel = self.cancel.clone();
        // Off the handler's path; ends with the attempt (its cancellation)
        // or once written.
        let _ = tokio::runtime::Handle::try_current().map(|runtime| {
            runtime.spawn(async move {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep_until(due.into()) => {}
                }
                let json = {
                    let mut progress = lock(&inner.progress);
                    progress.scheduled = false;
                    progress.written_at = Some(std::time::Instant::now());
                    progress.pending.take()
                };
                if let Some(json) = json {
                    let _ = lease.save_progress(json).await;
                }
            })
        });
    }

    /// The last progress a detached context was given (tests), as the JSON
    /// the worker would write: `{"done":…,"total":…,"note":…}`.
    pub fn last_progress(&self) -> Option<String> {
        lock(&self.inner.progress)
            .latest
            .clone()
            .or_else(|| lock(&self.inner.progress).pending.clone())
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
            .field("meta", &self.inner.meta)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// `mutex`, poisoned or not (what it guards stays consistent).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
