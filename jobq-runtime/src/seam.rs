//! Middleware (`jobq_runtime::middleware`): layers around each attempt's
//! handler call ([`JobLayer`], installed with
//! [`WorkerBuilder::job_layer`](crate::WorkerBuilder::job_layer)) and on
//! each row before an enqueue stores it ([`EnqueueLayer`], installed with
//! [`Jobq::with_enqueue_layer`](crate::Jobq::with_enqueue_layer)), and the
//! built-in [`Logging`] layer.
//!
//! With no layer installed they cost one `is_empty` branch per attempt and
//! per row: no allocation, no lock, nothing boxed. An installed layer costs
//! what it does plus one boxed future per attempt it wraps.
//!
//! ```
//! use jobq_runtime::middleware::{Attempt, JobLayer, LayerFuture, Logging, Next};
//! use jobq_runtime::{JobError, Jobq, Worker};
//!
//! /// Fails every attempt of a job whose payload mentions a blocked account,
//! /// without running its handler.
//! struct Blocklist;
//!
//! impl JobLayer for Blocklist {
//!     fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
//!         Box::pin(async move {
//!             if attempt.payload().contains(r#""account":13"#) {
//!                 return Err(JobError::permanent("account 13 is blocked"));
//!             }
//!             next.run().await
//!         })
//!     }
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let jobq = Jobq::connect("sqlite::memory:").await?;
//! # jobq.migrate().await?;
//! // Logging outermost: it sees what the blocklist decided.
//! let builder = Worker::builder(jobq.clone())
//!     .queue_unchecked("default", 4)
//!     .job_layer(Logging)
//!     .job_layer(Blocklist);
//! # drop(builder);
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jobq_core::{JobContext, JobError};

use crate::error::{Error, Result};
use crate::store::NewJob;

/// The future a [`JobLayer`] returns: the attempt's outcome as the layer
/// hands it outward.
pub type LayerFuture<'a> = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'a>>;

/// The handler's future as the layers see it, its outcome a `Result`: a
/// panic, a timeout and a payload that does not decode are already errors
/// (as the attempt records them).
pub type Handler<'a> = Pin<&'a mut (dyn Future<Output = Result<(), JobError>> + Send + 'a)>;

/// A layer around the handler call of every attempt a worker runs.
///
/// It sees the attempt (its context: id, name, queue, attempt number; and
/// its payload) before the handler runs and its outcome after; it may run
/// code on either side, change the outcome, or not call the handler at all
/// (return an error without awaiting `next`). Layers run in the order they
/// were installed, the first outermost.
///
/// Jobs that never reach a handler (no handler registered under the row's
/// name, a row that cannot be read) fail without calling the layers. An
/// attempt stopped by a lost lease or a shutdown's deadline is dropped
/// with the layers' futures in it: they see no outcome (a drop guard does).
/// A layer's panic fails the attempt, to be retried, as a handler's does.
pub trait JobLayer: Send + Sync + 'static {
    /// Runs around one attempt: `next.run().await` runs the layers inside
    /// this one and then the handler, and returns its outcome.
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a>;
}

/// What a [`JobLayer`] sees of an attempt before it runs.
#[derive(Debug)]
pub struct Attempt<'a> {
    context: &'a JobContext,
    payload: &'a str,
}

impl<'a> Attempt<'a> {
    pub(crate) fn new(context: &'a JobContext, payload: &'a str) -> Self {
        Self { context, payload }
    }

    /// The attempt's context, as its handler gets it (id, name, queue,
    /// attempt number, idempotency key, cancellation).
    pub fn context(&self) -> &'a JobContext {
        self.context
    }

    /// The job's payload, as stored (JSON).
    pub fn payload(&self) -> &'a str {
        self.payload
    }
}

/// The rest of the chain around an attempt: the layers inside the current
/// one, then the handler.
pub struct Next<'a> {
    layers: &'a [Arc<dyn JobLayer>],
    attempt: &'a Attempt<'a>,
    handler: Handler<'a>,
}

impl fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

impl Next<'_> {
    /// Runs the rest of the chain: its outcome.
    pub async fn run(self) -> Result<(), JobError> {
        match self.layers.split_first() {
            Some((layer, layers)) => {
                let next = Next {
                    layers,
                    attempt: self.attempt,
                    handler: self.handler,
                };
                layer.call(self.attempt, next).await
            }
            None => self.handler.await,
        }
    }
}

/// The job layers a worker runs its attempts through, in order.
#[derive(Clone, Default)]
pub(crate) struct JobLayers(Vec<Arc<dyn JobLayer>>);

impl fmt::Debug for JobLayers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobLayers({})", self.0.len())
    }
}

impl JobLayers {
    /// Adds `layer` inside those added before.
    pub(crate) fn push(&mut self, layer: Arc<dyn JobLayer>) {
        self.0.push(layer);
    }

    /// Whether none is installed: the attempt then awaits its handler directly.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Runs `handler` for `attempt` through every layer.
    pub(crate) async fn run(
        &self,
        attempt: &Attempt<'_>,
        handler: Handler<'_>,
    ) -> Result<(), JobError> {
        Next {
            layers: &self.0,
            attempt,
            handler,
        }
        .run()
        .await
    }
}

/// A [`JobLayer`] that logs every attempt with `tracing`: its start
/// (`DEBUG`), and its end with how long it took — `INFO` when it succeeded,
/// `WARN` with the error when it did not. Fields: `job.name`, `job.id`,
/// `job.queue`, `job.attempt`, `took_ms`, `error`. Installed outermost, it
/// sees the outcome the other layers made.
#[derive(Debug, Clone, Copy, Default)]
pub struct Logging;

impl JobLayer for Logging {
    fn call<'a>(&'a self, attempt: &'a Attempt<'a>, next: Next<'a>) -> LayerFuture<'a> {
        Box::pin(async move {
            let ctx = attempt.context();
            let started = std::time::Instant::now();
            tracing::debug!(
                job.name = ctx.name(),
                job.id = ctx.id(),
                job.queue = ctx.queue(),
                job.attempt = ctx.attempt(),
                "attempt started"
            );
            let outcome = next.run().await;
            let took_ms = started.elapsed().as_secs_f64() * 1000.0;
            match &outcome {
                Ok(()) => tracing::info!(
                    job.name = ctx.name(),
                    job.id = ctx.id(),
                    job.queue = ctx.queue(),
                    job.attempt = ctx.attempt(),
                    took_ms,
                    "attempt succeeded"
                ),
                Err(error) => tracing::warn!(
                    job.name = ctx.name(),
                    job.id = ctx.id(),
                    job.queue = ctx.queue(),
                    job.attempt = ctx.attempt(),
                    took_ms,
                    error = error.message(),
                    "attempt failed"
                ),
            }
            outcome
        })
    }
}

/// An error a layer returns to refuse what it is given.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A layer on every row a [`Jobq`](crate::Jobq) handle stores: `enqueue`,
/// `enqueue_many`, `enqueue_in`, `enqueue_json` and cron ticks alike.
///
/// It sees each row before it is checked and stored, may change it (the
/// checks then apply to what it wrote), or refuse it: the enqueue then
/// fails with [`Error::Refused`] and stores nothing (for `enqueue_many`,
/// none of the batch). Layers run in the order they were installed.
pub trait EnqueueLayer: Send + Sync + 'static {
    /// Called with each row about to be stored.
    fn enqueue(&self, row: &mut NewRow<'_>) -> Result<(), BoxError>;
}

/// A row an enqueue is about to store, as an [`EnqueueLayer`] sees it.
#[derive(Debug)]
pub struct NewRow<'a> {
    row: &'a mut NewJob,
}

impl NewRow<'_> {
    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.row.job_name
    }

    /// The queue it goes to.
    pub fn queue(&self) -> &str {
        &self.row.queue
    }

    /// Sends it to another queue.
    pub fn set_queue(&mut self, queue: impl Into<String>) {
        self.row.queue = queue.into();
    }

    /// Its payload (JSON).
    pub fn payload(&self) -> &str {
        &self.row.payload
    }

    /// Replaces its payload (JSON the job's handler decodes).
    pub fn set_payload(&mut self, payload: impl Into<String>) {
        self.row.payload = payload.into();
    }

    /// Its priority (lower runs first).
    pub fn priority(&self) -> i16 {
        self.row.priority
    }

    /// Sets its priority.
    pub fn set_priority(&mut self, priority: i16) {
        self.row.priority = priority;
    }

    /// Its attempts at most.
    pub fn max_attempts(&self) -> u32 {
        self.row.max_attempts
    }

    /// Sets its attempts at most.
    pub fn set_max_attempts(&mut self, max_attempts: u32) {
        self.row.max_attempts = max_attempts;
    }

    /// Its idempotency key, if any.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.row.idempotency_key.as_deref()
    }

    /// Sets or clears its idempotency key.
    pub fn set_idempotency_key(&mut self, key: Option<String>) {
        self.row.idempotency_key = key;
    }

    /// Its metadata (a JSON object), if any.
    pub fn metadata(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.row.metadata.as_ref()
    }

    /// Sets `key` of its metadata to `value` (creating the metadata).
    pub fn insert_metadata(&mut self, key: impl Into<String>, value: serde_json::Value) {
        self.row
            .metadata
            .get_or_insert_with(serde_json::Map::new)
            .insert(key.into(), value);
    }

    /// Its tags.
    pub fn tags(&self) -> &[String] {
        &self.row.tags
    }

    /// Adds a tag (checked with the others after every layer has run).
    pub fn add_tag(&mut self, tag: impl Into<String>) {
        self.row.tags.push(tag.into());
    }
}

/// The enqueue layers of a `Jobq` handle, in order.
#[derive(Clone, Default)]
pub(crate) struct EnqueueLayers(Vec<Arc<dyn EnqueueLayer>>);

impl fmt::Debug for EnqueueLayers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EnqueueLayers({})", self.0.len())
    }
}

impl EnqueueLayers {
    /// Adds `layer` after those added before.
    pub(crate) fn push(&mut self, layer: Arc<dyn EnqueueLayer>) {
        self.0.push(layer);
    }

    /// Whether none is installed: rows are then stored as built.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Runs `row` through every layer; the first refusal is the error.
    pub(crate) fn apply(&self, row: &mut NewJob) -> Result<()> {
        for layer in &self.0 {
            let refused = layer.enqueue(&mut NewRow { row: &mut *row });
            if let Err(source) = refused {
                return Err(Error::Refused {
                    job: row.job_name.clone(),
                    source,
                });
            }
        }
        Ok(())
    }
}
