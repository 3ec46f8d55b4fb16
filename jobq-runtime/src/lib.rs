//! # jobq
//!
//! Background jobs on the database a service already has — MySQL 8 /
//! MariaDB 10.6+, SQLite 3.35+ or PostgreSQL 13+ — with no broker and no
//! extra process.
//!
//! ```ignore
//! use jobq_runtime::{job, JobContext, Jobq, State, Worker};
//!
//! /// Sends the welcome mail.
//! #[job(queue = "mail", max_attempts = 8, timeout = "30s", key = "welcome:{user_id}")]
//! async fn send_welcome(ctx: JobContext, mailer: State<Mailer>, user_id: u64, locale: String)
//!     -> Result<(), MailError>
//! {
//!     mailer.send(user_id, &locale, ctx.idempotency_key()).await
//! }
//!
//! let jobq = Jobq::connect("mysql://app@db/app").await?;
//! jobq.migrate().await?;
//! jobq.enqueue(SendWelcome::new(42, "en".into())).await?;
//! Worker::builder(jobq).queue("mail", 16).state(mailer).build()?.run_until(shutdown).await?;
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
//!    PostgreSQL). Each claimed row becomes `processing`, gets a new random
//!    fencing token, and a lease: its `run_at` becomes the lease deadline.
//! 3. Each handler runs in its own task, **outside any transaction**, under a
//!    `jobq.job` tracing span (`job.id`, `job.name`, `job.queue`,
//!    `job.attempt`, `job.outcome`), with its timeout; a panic is caught.
//! 4. The outcome is settled *fenced*: the `UPDATE` applies only if the row is
//!    still `processing` under that token. Successes are batched (one
//!    statement per batch); a failure returns the row to `pending` with
//!    `run_at` from the [`RetryPolicy`], or marks it `failed`.
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
//! ## Transactional enqueue
//!
//! [`Jobq::enqueue_in`] writes the row through the caller's own sqlx
//! connection or transaction (`&mut *tx`): rolled back, no job; committed, one.

mod error;
mod handle;
mod store;
mod types;
mod wakeup;
mod worker;

pub use error::{Error, Result};
pub use handle::{
    AnyConnection, DEFAULT_MAX_PAYLOAD_BYTES, EnqueueConnection, Jobq, MAX_DELAY, MAX_KEY_LEN,
    MAX_QUEUE_LEN,
};
pub use jobq_core::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Definition, DispatchError, IntoJobResult, Job, JobContext,
    JobError, JobErrorKind, JobMeta, JobRegistration, LeaseError, Registry, RegistryError,
    RetryPolicy, State, StateRequirement, States, retry,
};
pub use jobq_macros::job;
pub use store::internal_retries;
pub use types::{Backend, Enqueue, Enqueued, JobInfo, JobStatus, QueueCounts};
pub use worker::{DEFAULT_CLAIM_AHEAD_BYTES, Worker, WorkerBuilder, WorkerHandle};

/// The SQL of the claim, for tests that EXPLAIN it; not public API.
#[doc(hidden)]
pub mod __sql {
    pub use crate::store::mysql::CLAIM_SELECT as MYSQL_CLAIM;
    pub use crate::store::mysql::CLAIM_SELECT_AFTER as MYSQL_CLAIM_AFTER;
    pub use crate::store::mysql::PRUNE as MYSQL_PRUNE;
    pub use crate::store::mysql::PRUNE_NEXT_PRIORITY as MYSQL_PRUNE_NEXT_PRIORITY;
    pub use crate::store::mysql::PRUNE_QUEUES as MYSQL_PRUNE_QUEUES;
    pub use crate::store::postgres::PRUNE as POSTGRES_PRUNE;
    pub use crate::store::sqlite::PRUNE as SQLITE_PRUNE;
}

/// Fault injection at the worker's await points, for tests; not public API.
#[doc(hidden)]
pub mod __inject {
    pub use crate::worker::inject::{Action, Point, arm};
}

/// What code generated by `#[job]` refers to; not public API.
#[doc(hidden)]
pub use jobq_core::__private;
