//! The upkeep tasks: what a worker does besides running jobs, each a loop
//! that owns its state, restarted if it panics (cron schedules stop the
//! worker instead), stopped last.
//!
//! - [`reap`]: returns other workers' expired jobs to `pending`;
//! - [`pause`]: reads the paused queues (after checking the migrations)
//!   for the claim loops;
//! - [`presence`]: the worker's row in `jobq_workers`;
//! - [`prune`]: deletes finished rows past their retention, if asked;
//! - [`stats`]: refreshes the stats gauges, if asked;
//! - [`listen`]: the database's wake-ups, where it has them;
//! - [`cron`]: enqueues scheduled jobs at their ticks.

pub(in crate::worker) mod cron;
pub(in crate::worker) mod listen;
pub(in crate::worker) mod pause;
pub(in crate::worker) mod presence;
pub(in crate::worker) mod prune;
pub(in crate::worker) mod reap;
pub(in crate::worker) mod stats;
