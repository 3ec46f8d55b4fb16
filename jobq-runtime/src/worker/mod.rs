//! The worker: claim → run outside the transaction → settle, fenced.
//!
//! One [`Worker`] runs, under one [`TaskTracker`]:
//! - a claim loop per served queue, with its own semaphore of `concurrency`
//!   slots; it claims the free slots plus, for short jobs, about as many as
//!   the slots finish during one claim round trip (buffered, started in claim
//!   order as slots free), claims again at once while batches come back
//!   full, else sleeps until an in-process enqueue wakes it or the next poll
//!   (1/32 of the poll interval after a claim that found jobs, doubling after
//!   each empty one up to the poll interval);
//! - a task per claimed job, under a tracing span, with the job's timeout,
//!   catching panics;
//! - one completer that settles successes in batches (one UPDATE per batch);
//! - one heartbeat that renews the leases of everything held in one statement
//!   and stops jobs whose lease was lost;
//! - one reaper that returns other workers' expired jobs to `pending`;
//! - one reader of the paused queues, once per poll interval, which the
//!   claim loops obey (nothing is claimed from a paused queue);
//! - one writer of the worker's row in `jobq_workers` (its presence: who
//!   and where it is, its queues, its jobs, its running count), once per
//!   presence interval, which also deletes the rows of workers gone;
//! - a task per cron schedule that enqueues its job at each tick;
//! - if asked, a pruner that deletes finished rows past their retention;
//! - if asked, a task that refreshes the stats gauges (see [`crate::metrics`]).
//!
//! One file per task, the arrows running one way: [`builder`] →
//! [`supervisor`] (the worker, its start and supervision) → the tasks ([`claim`] → [`run`],
//! [`complete`], [`heartbeat`], [`reap`], [`pause`], [`presence`], [`prune`], [`cron`], [`stats`]) and
//! [`handle`] (shutdown and the drop guard) → [`shared`] (the state, settings
//! and helpers they all use). No file imports from one to its left; this
//! module only declares and re-exports.

mod builder;
mod claim;
mod complete;
mod cron;
mod handle;
mod heartbeat;
pub(crate) mod inject;
mod pause;
mod presence;
mod prune;
mod reap;
mod run;
mod shared;
mod stats;
mod supervisor;

pub use builder::WorkerBuilder;
pub use handle::{SHUTDOWN_FINAL_WRITES, WorkerHandle};
#[cfg(feature = "testing")]
pub(crate) use shared::Ended;
pub use shared::{DEFAULT_CLAIM_AHEAD_BYTES, DEFAULT_PRESENCE_INTERVAL};
pub use supervisor::Worker;
