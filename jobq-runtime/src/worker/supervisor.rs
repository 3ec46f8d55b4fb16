//! The worker itself: built from its settings, started, supervised — each
//! task restarted if it fails, until shutdown (see the [module docs](super)).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use jobq_core::{Registry, States};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::handle::{Running, WorkerHandle};

use super::shared::{
    QueueSpec, Settings, Shared, backoff, in_span, jittered_pause, panic_message, panicked, quietly,
};
use crate::error::{Error, Result};
use crate::handle::Jobq;
use crate::metrics::{QueueMetrics, WorkerMetrics};
use crate::store::{Fence, Transition};

/// Successes waiting to be settled before job tasks wait (backpressure).
const COMPLETE_BACKLOG: usize = 10_000;

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
    queues: Vec<QueueSpec>,
    completions: mpsc::Receiver<Fence>,
    rescues: mpsc::UnboundedReceiver<Transition>,
    /// The handle cron schedules enqueue through.
    jobq: Jobq,
    cron: Vec<super::cron::CronEntry>,
}

impl Worker {
    // Called once, by `WorkerBuilder::build`, with its fields.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        jobq: Jobq,
        queues: Vec<QueueSpec>,
        registry: Registry,
        states: States,
        settings: Settings,
        worker_id: String,
        cron: Vec<super::cron::CronEntry>,
        observer: Option<super::shared::Observer>,
    ) -> Self {
        let (completions, receiver) = mpsc::channel(COMPLETE_BACKLOG);
        let (rescues, rescue_receiver) = mpsc::unbounded_channel();
        // Every registered job, on every served queue: `Enqueue::queue` may
        // put any job on any queue.
        let queue_metrics = queues
            .iter()
            .map(|q| Arc::new(QueueMetrics::new(&q.name, registry.iter().map(|r| r.name))))
            .collect();
        let served: Vec<crate::ServedQueue> = queues
            .iter()
            .map(|q| crate::ServedQueue {
                name: q.name.clone(),
                concurrency: q.concurrency as u64,
            })
            .collect();
        let presence = super::shared::Presence::new(
            crate::roster::queues_json(&served),
            crate::roster::jobs_json(&registry),
        );
        let shared = Arc::new(Shared {
            presence,
            store: jobq.store().clone(),
            jobq: jobq.clone(),
            registry,
            states,
            settings,
            worker_id,
            held: Mutex::default(),
            stop_claiming: CancellationToken::new(),
            stop_jobs: CancellationToken::new(),
            stop_completer: CancellationToken::new(),
            stop_background: CancellationToken::new(),
            deadline_passed: CancellationToken::new(),
            queue_names: queues.iter().map(|q| q.name.clone()).collect(),
            pauses: tokio::sync::watch::Sender::new(None),
            queue_metrics,
            metrics: WorkerMetrics::new(),
            completions,
            rescues,
            stop_rescuer: CancellationToken::new(),
            failed: CancellationToken::new(),
            failure: Mutex::new(None),
            jobs: TaskTracker::new(),
            bulk_writes: tokio::sync::Mutex::new(()),
            settling: Mutex::default(),
            stuck: Mutex::default(),
            beside_writes: TaskTracker::new(),
            buffered_bytes: AtomicUsize::new(0),
            beside: tokio::sync::Mutex::new(()),
            observer,
        });
        let holder: Arc<dyn crate::cancels::Holder> = shared.clone();
        crate::cancels::register(Arc::downgrade(&holder));
        Self {
            shared,
            queues,
            completions: receiver,
            rescues: rescue_receiver,
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
        let shared = self.shared;
        let worker = tracing::info_span!("jobq.worker", worker.id = %shared.worker_id);
        let claimers = TaskTracker::new();
        for queue in self.queues {
            let span = tracing::info_span!(parent: &worker, "jobq.claim", queue.name = %queue.name);
            let stop = shared.stop_claiming.clone();
            let claim = super::claim::claim_loop(Arc::clone(&shared), queue);
            claimers.spawn(in_span(
                span,
                supervise(Arc::clone(&shared), "claim", stop, claim),
            ));
        }
        claimers.close();
        let completer = super::complete::completer(Arc::clone(&shared), self.completions);
        let completer = supervise(
            Arc::clone(&shared),
            "completer",
            shared.stop_completer.clone(),
            completer,
        );
        let completer = tokio::spawn(in_span(
            tracing::info_span!(parent: &worker, "jobq.completer"),
            completer,
        ));
        let rescuer = super::run::rescuer(Arc::clone(&shared), self.rescues);
        let rescuer = tokio::spawn(in_span(
            tracing::info_span!(parent: &worker, "jobq.rescuer"),
            rescuer,
        ));
        let tasks = TaskTracker::new();
        let background = |span, name, may_end, make| {
            let task = restarted(Arc::clone(&shared), name, may_end, make);
            tasks.spawn(in_span(span, task));
        };
        if shared.settings.heartbeats_enabled {
            let span = tracing::info_span!(parent: &worker, "jobq.heartbeat");
            background(
                span,
                "heartbeat",
                false,
                boxed(super::heartbeat::heartbeat_loop),
            );
        }
        let span = tracing::info_span!(parent: &worker, "jobq.reaper");
        background(span, "reaper", false, boxed(super::reap::reaper_loop));
        let span = tracing::info_span!(parent: &worker, "jobq.pauses");
        background(span, "pauses", false, boxed(super::pause::pause_loop));
        let span = tracing::info_span!(parent: &worker, "jobq.presence");
        background(
            span,
            "presence",
            false,
            boxed(super::presence::presence_loop),
        );
        if shared.settings.prune_interval().is_some() {
            let span = tracing::info_span!(parent: &worker, "jobq.pruner");
            background(span, "pruner", false, boxed(super::prune::prune_loop));
        }
        if shared.settings.stats_gauges.is_some() {
            let span = tracing::info_span!(parent: &worker, "jobq.stats");
            background(span, "stats", false, boxed(super::stats::stats_loop));
        }
        let span = tracing::info_span!(parent: &worker, "jobq.listener");
        background(span, "listener", true, boxed(listen));
        for entry in self.cron {
            let span = tracing::info_span!(parent: &worker, "jobq.cron", job.name = entry.name());
            // Stopped with the claim loops: a worker shutting down enqueues no more.
            let stop = shared.stop_claiming.clone();
            let cron = super::cron::cron_loop(self.jobq.clone(), entry, stop.clone());
            tasks.spawn(in_span(
                span,
                supervise(Arc::clone(&shared), "cron", stop, cron),
            ));
        }
        tasks.close();
        let running = Running {
            claimers,
            tasks,
            completer,
            rescuer,
        };
        WorkerHandle::new(shared, running, worker)
    }
}

/// Listens for other processes' enqueues (on backends that can) until the
/// worker's background stops.
async fn listen(shared: Arc<Shared>) {
    shared
        .store
        .listen(&shared.queue_names, &shared.stop_background)
        .await;
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
type Background = Box<dyn Fn(Arc<Shared>) -> BoxFuture<'static, ()> + Send>;

/// The background loop `run` as a [`Background`].
fn boxed<F>(run: fn(Arc<Shared>) -> F) -> Background
where
    F: Future<Output = ()> + Send + 'static,
{
    Box::new(move |shared| Box::pin(run(shared)))
}

/// Runs the background loop `make` builds until the worker's background
/// stops; a loop that panics (or, unless it `may_end`, ends early) is logged
/// and started again after a pause. These loops own nothing a restart could lose.
async fn restarted(shared: Arc<Shared>, name: &'static str, may_end: bool, make: Background) {
    let mut failures = 0;
    loop {
        let result = AssertUnwindSafe(make(Arc::clone(&shared)))
            .catch_unwind()
            .await;
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
