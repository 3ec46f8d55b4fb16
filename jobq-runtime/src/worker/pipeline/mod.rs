//! The claim pipeline: a claim loop per served queue ([`claim`]) feeds
//! each claimed job to a task of its own that runs the attempt through the
//! job layers to its handler ([`attempt`]) and settles its outcome
//! ([`settle`]): a success through the completer, anything else with one
//! fenced transition; what a dead task owed through the rescuer.
//!
//! [`Pipeline`] is its state, one per worker, shared by the claim loops and
//! the job tasks (one `Arc` clone per job, as before the split).

pub(in crate::worker) mod attempt;
pub(in crate::worker) mod claim;
pub(in crate::worker) mod settle;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use jobq_core::{Registry, States};
use tokio::sync::{mpsc, watch};
use tokio_util::task::TaskTracker;

use crate::seam::JobLayers;
use crate::store::{Fence, Transition};
use crate::worker::shared::Shared;

/// The claim pipeline's state.
#[derive(Debug)]
pub(in crate::worker) struct Pipeline {
    /// What every task of the worker shares.
    pub(in crate::worker) shared: Arc<Shared>,
    /// The handlers, by job name.
    pub(in crate::worker) registry: Registry,
    /// What handlers taking `State<T>` are given.
    pub(in crate::worker) states: States,
    /// The layers around each handler call (none: one branch per attempt).
    pub(in crate::worker) layers: JobLayers,
    /// Where successes go, to be settled in batches by the completer.
    pub(in crate::worker) completions: mpsc::Sender<Fence>,
    /// Settles owed by job tasks that died (see `settle::Settlement`).
    pub(in crate::worker) rescues: mpsc::UnboundedSender<Transition>,
    /// The job tasks: the shutdown waits for them, the presence row counts them.
    pub(in crate::worker) jobs: TaskTracker,
    /// Payload bytes claimed ahead of free slots, all queues (see `claim_ahead_bytes`).
    pub(in crate::worker) buffered_bytes: AtomicUsize,
    /// Which served queues are paused or limited, as the pause loop last
    /// read them; `None` until its first read. Each claim loop watches a clone.
    pub(in crate::worker) pauses: watch::Receiver<crate::worker::upkeep::pause::Paused>,
    /// Told how each attempt ended, before its settle is written
    /// (`jobq_runtime::testing`'s drain listens; `None` otherwise).
    pub(in crate::worker) observer: Option<Observer>,
}

/// Where a worker reports each attempt's end (see [`Pipeline::observer`]).
pub(crate) type Observer = mpsc::UnboundedSender<Observed>;

/// How one attempt ended, as the worker settles it.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) struct Observed {
    pub(crate) id: i64,
    pub(crate) job_name: String,
    pub(crate) attempt: u32,
    pub(crate) ended: Ended,
}

/// See [`Observed`].
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) enum Ended {
    Succeeded,
    /// Back to `pending`, to run again after the delay.
    Retried(jobq_core::JobError, Duration),
    Snoozed(Duration),
    Failed(jobq_core::JobError),
    /// Cancelled by the shutdown deadline or a lost lease.
    Interrupted,
}
