//! # jobq
//!
//! Background jobs on the database a service already has — MySQL 8 /
//! MariaDB 10.6+, SQLite 3.35+ or PostgreSQL 13+ — with no broker and no
//! extra process.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//! use jobq_runtime::{job, JobContext, JobStatus, Jobq, State, Worker};
//!
//! /// Sends mail (here: counts what it would send).
//! #[derive(Debug, Default)]
//! struct Mailer {
//!     sent: AtomicU32,
//! }
//!
//! impl Mailer {
//!     async fn send(&self, user_id: u64, locale: &str, key: String) -> std::io::Result<()> {
//!         let _ = (user_id, locale, key);
//!         self.sent.fetch_add(1, Ordering::Relaxed);
//!         Ok(())
//!     }
//! }
//!
//! /// Sends the welcome mail.
//! #[job(queue = "mail", max_attempts = 8, timeout = "30s", key = "welcome:{user_id}")]
//! async fn send_welcome(ctx: JobContext, mailer: State<Mailer>, user_id: u64, locale: String)
//!     -> std::io::Result<()>
//! {
//!     mailer.send(user_id, &locale, ctx.idempotency_key()).await
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // sqlite://jobs.db, mysql://app:secret@127.0.0.1/app, postgres://… alike
//! let jobq = Jobq::connect("sqlite::memory:").await?;
//! jobq.migrate().await?;
//! let job = jobq.enqueue(SendWelcome::new(42, "en".into())).await?;
//!
//! // A service runs the worker until its shutdown signal; here, until the job is done.
//! let done = {
//!     let jobq = jobq.clone();
//!     async move {
//!         while jobq.job(job.id).await.ok().flatten().is_some_and(|j| j.status != JobStatus::Done) {
//!             tokio::time::sleep(Duration::from_millis(5)).await;
//!         }
//!     }
//! };
//! Worker::builder(jobq.clone())
//!     .queue("mail", 16)
//!     .state(Mailer::default())
//!     .build()?
//!     .run_until(done)
//!     .await?;
//! assert_eq!(jobq.job(job.id).await?.unwrap().attempts, 1);
//! # Ok(()) }
//! ```
//!
//! ## Defining jobs
//!
//! [`#[job]`](job) on an `async fn` generates a payload struct named after
//! the fn in PascalCase (its fields are the fn's parameters other than
//! [`JobContext`] and [`State<T>`]), a `new` constructor, an impl of [`Job`],
//! and a registration that workers find by the job's *name*. The name is the
//! fn's name unless `name = "…"` pins it: it is stored in every row, so pin it
//! before renaming a fn that has jobs queued.
//!
//! ## The life of a job
//!
//! 1. [`Jobq::enqueue`] inserts a `pending` row (`run_at` = now, or later with
//!    [`Enqueue::delay`]). With an idempotency key, an existing row is
//!    returned instead ([`Enqueued::duplicate`]).
//! 2. A worker's claim loop takes up to *free slots* due rows of a queue, in
//!    `priority, run_at, id` order, in one short transaction (`SELECT … FOR
//!    UPDATE SKIP LOCKED` + `UPDATE`; one `UPDATE … RETURNING` on SQLite and
//!    PostgreSQL). Each claimed row becomes `processing`, gets a fencing token
//!    of its own (the claim's random base plus the row's id, new at every
//!    claim), and a lease: its `run_at` becomes the lease deadline.
//! 3. Each handler runs in its own task, **outside any transaction**, under a
//!    `jobq.job` tracing span (`job.id`, `job.name`, `queue.name`,
//!    `job.attempt`, `job.outcome`), with its timeout; a panic is caught.
//! 4. The outcome is settled *fenced*: the `UPDATE` applies only if the row is
//!    still `processing` under that token (the exact row and token pair).
//!    Successes are batched (one statement per batch); a failure returns the
//!    row to `pending` with `run_at` from the [`RetryPolicy`], or marks it
//!    `failed`.
//! 5. Meanwhile heartbeats renew the leases of everything the worker holds
//!    (one statement), and every worker's reaper returns rows whose lease
//!    expired — their worker died — to `pending`.
//!
//! ## Guarantees
//!
//! - **At-least-once execution**: a crash between running and settling runs
//!   the job again after about one lease (default 30 s) plus the reap
//!   interval. Pass [`JobContext::idempotency_key`] to external systems.
//! - **Exactly-once settlement**: a stale worker cannot overwrite a newer
//!   attempt; its settle matches no row and is only logged.
//! - **Idempotent enqueue**: concurrent enqueuers of one key create one row.
//! - **Clean shutdown** ([`Worker::run_until`], [`WorkerHandle::shutdown`]):
//!   running jobs get until the deadline, the rest go back to `pending`
//!   without counting the attempt, finished jobs are settled; nothing is left
//!   `processing`.
//!
//! ## Backends
//!
//! [`Jobq::connect`] picks the store from the URL; [`Jobq::from_mysql_pool`],
//! [`Jobq::from_sqlite_pool`] and [`Jobq::from_pg_pool`] reuse a pool.
//! MySQL/MariaDB sessions jobq opens run at READ COMMITTED (REPEATABLE READ's
//! gap locks make claims block enqueues and deadlock each other); jobq retries
//! its own transactions on deadlocks and lock-wait timeouts
//! ([`internal_retries`] counts them) but never a caller's. On PostgreSQL,
//! enqueues send `NOTIFY` and workers `LISTEN`; everywhere, an enqueue wakes
//! the same process's workers at once, and polling (default 500 ms) is the
//! fallback. [`Jobq::migrate`] creates `jobq_jobs` and records its version in
//! `jobq_migrations` (not sqlx's `_sqlx_migrations`, which stays the
//! application's own).
//!
//! ## Metrics
//!
//! jobq records counters, histograms and per-queue gauges through the
//! [`metrics`](https://docs.rs/metrics) facade into whatever recorder the
//! application installs (none: nothing is recorded); the [`metrics`](mod@metrics)
//! module lists every one, with its labels. The gauges come from
//! [`Jobq::stats`], read by the worker every
//! [`WorkerBuilder::stats_gauges_every`] (off by default).
//!
//! ## Transactional enqueue
//!
//! [`Jobq::enqueue_in`] writes the row through the caller's own sqlx
//! connection or transaction (`&mut *tx`): rolled back, no job; committed, one.

/// The error of a build with no backend: its message names every
/// backend's feature.
macro_rules! needs_a_backend {
    (() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
        #[cfg(not(any($(feature = $feature),*)))]
        compile_error!(concat!(
            "jobq-runtime needs at least one backend: enable one of its features:",
            $(" `", $feature, "`"),*
        ));
    };
}

backends::list!(needs_a_backend);

mod backends;
mod batch;
mod cancels;
mod complete_in;
mod connection;
mod error;
mod handle;
pub mod metrics;
mod ops;
mod options;
#[cfg(feature = "otel")]
mod otel;
mod pools;
mod roster;
mod seam;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod types;
mod wakeup;
mod worker;
mod workflow;

pub use batch::{
    Batch, BatchCallback, BatchCallbackJob, BatchEnqueued, BatchInfo, MAX_BATCH_JOBS,
    MAX_BATCH_NAME,
};
pub use complete_in::CompleteIn;
pub use connection::{AnyConnection, EnqueueConnection};
pub use error::{ConfigError, Error, InvalidArgument, Result};
pub use handle::Jobq;
pub use jobq_core::{
    AttemptEnd, CheckpointError, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Definition, DispatchError,
    FieldSpec, IntoJobResult, Job, JobContext, JobError, JobErrorKind, JobMeta, JobOutput,
    JobRegistration, LeaseError, MAX_CHECKPOINT_BYTES, MAX_KEY_CONCURRENCY, MAX_METADATA_BYTES,
    MAX_OUTPUT_BYTES, MAX_TAG_LEN, MAX_TAGS, OutputError, PROGRESS_EVERY, Registry, RegistryError,
    RetryPolicy, State, StateRequirement, States, Unique, error_chain, retry,
};
pub use jobq_macros::job;
pub use ops::{
    Check, CheckStatus, Cursor, DoctorReport, JobFilter, JobPage, MAX_PAGE_LEN, Order, Page,
    QueueState, QueueStats, RunningProgress, STATS_FINISHED_CAP, STATS_MINUTES, STATS_PROGRESS_CAP,
    Stats,
};
pub use options::{
    ConnectOptions, DEFAULT_CONNECT_TIMEOUT, DEFAULT_LEASE, DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_STATEMENT_TIMEOUT, MAX_DELAY, MAX_JOB_NAME_LEN, MAX_KEY_LEN, MAX_QUEUE_LEN,
    MAX_QUEUE_LIMIT, MAX_RATE_PERIOD, MAX_RATE_STARTS, MIN_RATE_PERIOD, Rate,
};
pub use roster::{JobKind, KindField, PublishedJob, ServedQueue, WorkerInfo};
/// The sqlx jobq is built on (0.8), with the drivers of the enabled backends.
///
/// Connections passed to [`Jobq::enqueue_in`] and pools passed to
/// [`Jobq::from_mysql_pool`] and its siblings must be of this version: the
/// types of another sqlx version are other types, even with the same names.
/// Depend on `sqlx = "0.8"` (Cargo then shares one copy, with the features
/// of both), or name the types through this re-export:
///
/// ```
/// use jobq_runtime::sqlx::SqlitePool;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = SqlitePool::connect("sqlite::memory:").await?;
/// let jobq = jobq_runtime::Jobq::from_sqlite_pool(pool).await?;
/// jobq.migrate().await?;
/// # Ok(()) }
/// ```
pub use sqlx;
pub use store::policy::internal_retries;
pub use types::{
    AttemptRecord, Backend, Enqueue, Enqueued, HISTORY_CAP, JobInfo, JobProgress, JobStatus,
    QueueCounts, Schedule, ScheduleInfo,
};
pub use worker::{
    DEFAULT_CLAIM_AHEAD_BYTES, DEFAULT_PRESENCE_INTERVAL, SHUTDOWN_FINAL_WRITES, Worker,
    WorkerBuilder, WorkerHandle,
};
pub use workflow::{
    MAX_WORKFLOW_DEPENDENCIES, MAX_WORKFLOW_JOBS, MAX_WORKFLOW_NAME, OnFailure, Task, Workflow,
    WorkflowEnqueued, WorkflowInfo, WorkflowJob,
};

/// The store's operations one call each, for jobq's own tests (`hooks.rs`).
#[doc(hidden)]
#[path = "hooks.rs"]
pub mod __store;

/// Middleware: layers around each attempt's handler call ([`JobLayer`](middleware::JobLayer),
/// installed with [`WorkerBuilder::job_layer`]) and on each row an enqueue
/// stores ([`EnqueueLayer`](middleware::EnqueueLayer), installed with
/// [`Jobq::with_enqueue_layer`]), and the built-in [`Logging`](middleware::Logging).
/// With none installed they cost nothing but a branch.
pub mod middleware {
    pub use crate::seam::{
        Attempt, BoxError, EnqueueLayer, Handler, JobLayer, LayerFuture, Logging, NewRow, Next,
    };
}

/// The middleware under its earlier, unstable name; use [`middleware`].
#[doc(hidden)]
pub mod __seam {
    pub use crate::middleware::*;
}

/// Fault injection at the worker's await points, for tests; not public API.
#[doc(hidden)]
pub mod __inject {
    pub use crate::worker::inject::{Action, Point, arm};
}

/// What code generated by `#[job]` refers to, and each backend's SQL for
/// jobq's own tests; not public API.
#[doc(hidden)]
pub mod __private {
    pub use jobq_core::__private::*;

    /// Every statement each compiled-in backend runs, as its store runs it,
    /// for tests that EXPLAIN them (`jobq_runtime::__private::sql::mysql::CLAIM_SELECT`).
    pub mod sql {
        /// Re-exports each compiled-in backend's `sql` module under the
        /// backend's module name.
        macro_rules! sql_modules {
            (() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*) => {
                $(
                    #[cfg(feature = $feature)]
                    pub use crate::store::$module::sql as $module;
                )*
            };
        }

        crate::backends::list!(sql_modules);
    }
}
