//! The worker: claim → run outside the transaction → settle, fenced.
//!
//! One [`Worker`] runs, under one [`TaskTracker`](tokio_util::task::TaskTracker):
//! - a claim loop per served queue, with its own semaphore of `concurrency`
//!   slots; it claims the free slots plus, for short jobs, about as many as
//!   the slots finish during one claim round trip (buffered, started in claim
//!   order as slots free), claims again at once while batches come back
//!   full, else sleeps until an enqueue (of this process or another) wakes it
//!   or the next poll (1 ms after a claim that found jobs, doubling after
//!   each empty one up to the poll interval);
//! - a task per claimed job, under a tracing span, with the job's timeout,
//!   catching panics, its handler called through the job layers if any;
//! - one completer that settles successes in batches (one UPDATE per batch);
//! - one heartbeat that renews the leases of everything held in one statement
//!   and stops jobs whose lease was lost;
//! - one rescuer that settles what job tasks that died owed;
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
//! # By owner
//!
//! Each task owns its state; only what every task needs is shared.
//!
//! - [`shared`]: the shared state — the store, the settings, the worker's
//!   id and queues, the held jobs ([`held`]), the settle writes' metrics,
//!   the stop signals and the first failure.
//! - [`pipeline`]: the claim pipeline — the claim loops ([`pipeline::claim`]),
//!   each attempt ([`pipeline::attempt`], where the job layers of
//!   [`crate::seam`] wrap the handler call) and its settle
//!   ([`pipeline::settle`], with the rescuer); its state (registry, states,
//!   layers, the completer's and the rescuer's senders, the job tasks, the
//!   bytes claimed ahead, the paused queues it watches, the observer) is
//!   [`pipeline::Pipeline`].
//! - [`turn`]: the settle turn — the whole protocol by which the completer
//!   ([`complete`], which owns the receiving end of the successes) and the
//!   heartbeat ([`heartbeat`]) take turns on the rows they update.
//! - [`upkeep`]: the reaper, the paused-queue reader, the presence row, the
//!   pruner, the stats gauges, the listener and the cron schedules, each
//!   with its own state.
//! - [`builder`] → [`supervisor`] (the worker: its parts built, started,
//!   supervised) and [`handle`] (shutdown, which owns the tasks' handles
//!   and the completer's and rescuer's stop signals, and the drop guard).
//! - [`settings`], [`util`] and [`inject`] below them all.
//!
//! The arrows run one way: builder → supervisor → handle → the tasks
//! (pipeline, complete, heartbeat, upkeep) → turn → shared → held →
//! settings, util, inject. This module only declares and re-exports.

mod builder;
mod complete;
mod handle;
mod heartbeat;
mod held;
pub(crate) mod inject;
mod pipeline;
mod settings;
mod shared;
mod supervisor;
mod turn;
mod upkeep;
mod util;

pub use builder::WorkerBuilder;
pub use handle::{SHUTDOWN_FINAL_WRITES, WorkerHandle};
#[cfg(feature = "testing")]
pub(crate) use pipeline::Ended;
pub use settings::{DEFAULT_CLAIM_AHEAD_BYTES, DEFAULT_PRESENCE_INTERVAL};
pub use supervisor::Worker;
