//! The worker itself: its parts built from the builder's configuration,
//! each task's state given to the task, then started and supervised — each
//! task restarted if it fails, until shutdown (see the [module docs](super)).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use jobq_core::{Registry, States};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::complete::Completer;
use super::handle::{Running, WorkerHandle};
use super::heartbeat::{self, Heartbeat};
use super::pipeline::settle::Rescuer;
use super::pipeline::{Observer, Pipeline, claim};
use super::settings::{QueueSpec, Settings};
use super::shared::Shared;
use super::turn::SettleTurn;
use super::upkeep::cron::{self, Schedules};
use super::upkeep::pause::{self, Pauses};
use super::upkeep::presence::{self, Presence};
use super::upkeep::reap::{self, Reaper};
use super::upkeep::stats::{self, StatsGauges};
use super::upkeep::{listen, prune};
use super::util::{backoff, in_span, jittered_pause, panic_message, panicked, quietly};
use crate::error::{Error, Result};
use crate::handle::Jobq;
use crate::metrics::QueueMetrics;
use crate::seam::JobLayers;

/// Runs jobs from the queues it serves until shut down.
///
/// ```
/// use jobq_runtime::{job, Jobq, Worker};
///
/// /// Rebuilds one shard of the search index.
/// #[job(queue = "search")]
/// async fn reindex(shard: u32) {
///     let _ = shard;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// // `build` checks the queue has jobs, their states were given, …
/// let worker = Worker::builder(jobq.clone()).queue("search", 4).build()?;
/// // A service passes its shutdown signal (`tokio::signal::ctrl_c()`, SIGTERM);
/// // here, a channel.
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(worker.run_until(async {
///     let _ = stopped.await;
/// }));
/// jobq.enqueue(Reindex::new(3)).await?;
/// stop.send(()).unwrap();
/// running.await.unwrap()?; // drained: nothing is left `processing`
/// assert_eq!(jobq.counts("search").await?.processing, 0);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Worker {
    shared: Arc<Shared>,
    pipeline: Arc<Pipeline>,
    /// The served queues, each with its metric handles (one claim loop each).
    queues: Vec<(QueueSpec, Arc<QueueMetrics>)>,
    turn: Arc<SettleTurn>,
    completer: Completer,
    rescuer: Rescuer,
    pauses: Pauses,
    presence: Presence,
    reaper: Reaper,
    /// The handle cron schedules enqueue through and the stats gauges read.
    jobq: Jobq,
    cron: Schedules,
}

/// What a [`Worker`] is built from: the builder's checked configuration.
#[derive(Debug)]
pub(super) struct Parts {
    pub(super) jobq: Jobq,
    pub(super) queues: Vec<QueueSpec>,
    pub(super) registry: Registry,
    pub(super) states: States,
    pub(super) settings: Settings,
    pub(super) worker_id: String,
    pub(super) cron: Schedules,
    pub(super) observer: Option<Observer>,
    pub(super) layers: JobLayers,
}

impl Worker {
    /// Builds the worker's parts, each task's state with the task: the
    /// shared state, the claim pipeline, the settle turn with the completer
    /// and the heartbeat, the rescuer, the upkeep tasks.
    pub(super) fn new(parts: Parts) -> Self {
        let Parts {
            jobq,
            queues,
            registry,
            states,
            settings,
            worker_id,
            cron,
            observer,
            layers,
        } = parts;
        let queue_names = queues.iter().map(|q| q.name.clone()).collect();
        let shared = Arc::new(Shared::new(
            jobq.store().clone(),
            settings,
            worker_id,
            queue_names,
        ));
        let holder: Arc<dyn crate::cancels::Holder> = shared.clone();
        crate::cancels::register(Arc::downgrade(&holder));
        let turn = Arc::new(SettleTurn::new(settings.heartbeat_interval()));
        let (completer, completions) = Completer::new(Arc::clone(&shared), Arc::clone(&turn));
        let (rescuer, rescues) = Rescuer::new(Arc::clone(&shared));
        let (pauses, paused) = Pauses::new(Arc::clone(&shared));
        // Every registered job, on every served queue: `Enqueue::queue` may
        // put any job on any queue.
        let queues: Vec<(QueueSpec, Arc<QueueMetrics>)> = queues
            .into_iter()
            .map(|q| {
                let metrics = QueueMetrics::new(&q.name, registry.iter().map(|r| r.name));
                (q, Arc::new(metrics))
            })
            .collect();
        let served: Vec<crate::ServedQueue> = queues
            .iter()
            .map(|(q, _)| crate::ServedQueue {
                name: q.name.clone(),
                concurrency: q.concurrency as u64,
            })
            .collect();
        let jobs = TaskTracker::new();
        let presence = Presence::new(
            Arc::clone(&shared),
            crate::roster::queues_json(&served),
            crate::roster::jobs_json(&registry),
            jobs.clone(),
        );
        let reaper = Reaper {
            shared: Arc::clone(&shared),
            queues: queues
                .iter()
                .map(|(q, metrics)| (q.name.clone(), Arc::clone(metrics)))
                .collect(),
        };
        let pipeline = Arc::new(Pipeline {
            shared: Arc::clone(&shared),
            registry,
            states,
            layers,
            completions,
            rescues,
            jobs,
            buffered_bytes: AtomicUsize::new(0),
            pauses: paused,
            observer,
        });
        Self {
            shared,
            pipeline,
            queues,
            turn,
            completer,
            rescuer,
            pauses,
            presence,
            reaper,
            jobq,
            cron,
        }
    }

    /// This worker's id, as written to `claimed_by`.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// Runs until `signal` completes, then shuts down gracefully: stops
    /// claiming, lets running jobs finish for up to the shutdown timeout
    /// (less [`SHUTDOWN_FINAL_WRITES`](crate::SHUTDOWN_FINAL_WRITES)), releases the rest to `pending` (not
    /// counting the attempt), settles everything pending, and returns by
    /// the shutdown timeout. No row is left `processing` while the database
    /// answers (see [`WorkerHandle::shutdown`] for when it does not).
    ///
    /// If a task of the worker panics (a claim loop, the completer, a cron
    /// schedule) the worker shuts down the same way at once and this returns
    /// [`Error::Panicked`]. (The heartbeat, reaper, pruner and listener are
    /// restarted instead.)
    ///
    /// # Cancel safety
    /// Dropping this future before it completes (a `select!` branch that
    /// lost) does not leave the worker running detached: the drop starts the
    /// same shutdown in the background, with the shutdown timeout as its
    /// deadline (see [`WorkerHandle`]'s drop guard); only its result is lost.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<()> {
        let timeout = self.shared.settings.shutdown_timeout;
        let failed = self.shared.failed.clone();
        let handle = self.start();
        tokio::select! {
            () = signal => {}
            () = failed.cancelled() => {}
        }
        handle.shutdown(timeout).await
    }

    /// Starts the worker's tasks on the current tokio runtime.
    ///
    /// Each task runs in a span, children of one `jobq.worker` span with
    /// field `worker.id`: `jobq.claim` (field `queue.name`, one per served
    /// queue; each attempt's `jobq.job` span is its child), `jobq.completer`,
    /// `jobq.rescuer`, `jobq.heartbeat`, `jobq.reaper`, `jobq.pauses`, `jobq.presence`, `jobq.pruner`,
    /// `jobq.cron` (field `job.name`, one per schedule), `jobq.stats`, `jobq.listener`, and
    /// at the end `jobq.shutdown`.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(self) -> WorkerHandle {
        super::util::record_panic_locations();
        let Self {
            shared,
            pipeline,
            queues,
            turn,
            completer,
            rescuer,
            pauses,
            presence,
            reaper,
            jobq,
            cron,
        } = self;
        let worker = tracing::info_span!("jobq.worker", worker.id = %shared.worker_id);
        let claimers = TaskTracker::new();
        for (queue, metrics) in queues {
            let span = tracing::info_span!(parent: &worker, "jobq.claim", queue.name = %queue.name);
            let stop = shared.stop_claiming.clone();
            let claim = claim::claim_loop(Arc::clone(&pipeline), queue, metrics);
            claimers.spawn(in_span(
                span,
                supervise(Arc::clone(&shared), "claim", stop, claim),
            ));
        }
        claimers.close();
        let stop_completer = completer.stop_token();
        let completer = supervise(
            Arc::clone(&shared),
            "completer",
            stop_completer.clone(),
            completer.run(),
        );
        let completer = tokio::spawn(in_span(
            tracing::info_span!(parent: &worker, "jobq.completer"),
            completer,
        ));
        let stop_rescuer = rescuer.stop_token();
        let rescuer = tokio::spawn(in_span(
            tracing::info_span!(parent: &worker, "jobq.rescuer"),
            rescuer.run(),
        ));
        let tasks = TaskTracker::new();
        let background = |span, name, may_end, make| {
            let task = restarted(Arc::clone(&shared), name, may_end, make);
            tasks.spawn(in_span(span, task));
        };
        if shared.settings.heartbeats_enabled {
            let span = tracing::info_span!(parent: &worker, "jobq.heartbeat");
            let heartbeat = Heartbeat {
                shared: Arc::clone(&shared),
                turn: Arc::clone(&turn),
                locked: std::sync::Mutex::default(),
            };
            let heartbeat = looping(heartbeat, heartbeat::heartbeat_loop);
            background(span, "heartbeat", false, heartbeat);
        }
        let span = tracing::info_span!(parent: &worker, "jobq.reaper");
        background(span, "reaper", false, looping(reaper, reap::reaper_loop));
        let span = tracing::info_span!(parent: &worker, "jobq.pauses");
        background(span, "pauses", false, looping(pauses, pause::pause_loop));
        let span = tracing::info_span!(parent: &worker, "jobq.presence");
        let presence_id = presence.id;
        let presence = looping(presence, presence::presence_loop);
        background(span, "presence", false, presence);
        if shared.settings.prune_interval().is_some() {
            let span = tracing::info_span!(parent: &worker, "jobq.pruner");
            let pruner = looping_shared(&shared, prune::prune_loop);
            background(span, "pruner", false, pruner);
        }
        if shared.settings.stats_gauges.is_some() {
            let span = tracing::info_span!(parent: &worker, "jobq.stats");
            let gauges = StatsGauges {
                shared: Arc::clone(&shared),
                jobq: jobq.clone(),
            };
            background(span, "stats", false, looping(gauges, stats::stats_loop));
        }
        let span = tracing::info_span!(parent: &worker, "jobq.listener");
        let listener = looping_shared(&shared, listen::listen);
        background(span, "listener", true, listener);
        for entry in cron.entries {
            let span = tracing::info_span!(parent: &worker, "jobq.cron", job.name = entry.name());
            // Stopped with the claim loops: a worker shutting down enqueues no more.
            let stop = shared.stop_claiming.clone();
            let cron = cron::cron_loop(jobq.clone(), entry, stop.clone(), true);
            tasks.spawn(in_span(
                span,
                supervise(Arc::clone(&shared), "cron", stop, cron),
            ));
        }
        {
            let span = tracing::info_span!(parent: &worker, "jobq.cron_stored");
            let stop = shared.stop_claiming.clone();
            let stored = cron::stored_loop(jobq.clone(), stop.clone(), cron.stored);
            tasks.spawn(in_span(
                span,
                supervise(Arc::clone(&shared), "stored cron", stop, stored),
            ));
        }
        tasks.close();
        let running = Running {
            claimers,
            jobs: pipeline.jobs.clone(),
            completer,
            stop_completer,
            turn,
            rescuer,
            stop_rescuer,
            tasks,
            presence_id,
        };
        WorkerHandle::new(shared, pipeline, running, worker)
    }
}

/// Runs `task`; if it panics, or ends before `stop` fired, the worker fails
/// (stops, and `shutdown` returns the error).
async fn supervise(
    shared: Arc<Shared>,
    name: &'static str,
    stop: CancellationToken,
    task: impl Future<Output = ()>,
) {
    match AssertUnwindSafe(task).catch_unwind().await {
        Ok(()) if stop.is_cancelled() => {}
        Ok(()) => shared.fail(Error::Panicked {
            task: name,
            message: "it ended before the worker stopped".into(),
        }),
        Err(panic) => shared.fail(panicked(name, panic.as_ref())),
    }
}

/// A background loop, built anew by [`restarted`] after each panic.
type Background = Box<dyn Fn() -> BoxFuture<'static, ()> + Send>;

/// The background loop `run` over its own state, as a [`Background`]
/// (each start of it gets the same state).
fn looping<T, F>(state: T, run: fn(Arc<T>) -> F) -> Background
where
    T: Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let state = Arc::new(state);
    Box::new(move || Box::pin(run(Arc::clone(&state))))
}

/// [`looping`] for a loop whose only state is the worker's shared state.
fn looping_shared<F>(shared: &Arc<Shared>, run: fn(Arc<Shared>) -> F) -> Background
where
    F: Future<Output = ()> + Send + 'static,
{
    let shared = Arc::clone(shared);
    Box::new(move || Box::pin(run(Arc::clone(&shared))))
}

/// Runs the background loop `make` builds until the worker's background
/// stops; a loop that panics (or, unless it `may_end`, ends early) is logged
/// and started again after a pause. These loops own nothing a restart could lose.
async fn restarted(shared: Arc<Shared>, name: &'static str, may_end: bool, make: Background) {
    let mut failures = 0;
    loop {
        let result = AssertUnwindSafe(make()).catch_unwind().await;
        if shared.stop_background.is_cancelled() || (may_end && result.is_ok()) {
            return;
        }
        failures += 1;
        let message = match result {
            Ok(()) => "it ended before the worker stopped".to_owned(),
            Err(panic) => panic_message(panic.as_ref()),
        };
        let pause = backoff(failures);
        quietly(|| {
            tracing::error!(worker.task = name, %message, restart_in = ?pause, "a worker task panicked; restarting it");
        });
        if !jittered_pause(&shared.stop_background, pause).await {
            return;
        }
    }
}
