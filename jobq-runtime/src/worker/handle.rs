//! `WorkerHandle`: a started worker, its shutdown, and the drop guard that
//! starts that shutdown when the handle is dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::pipeline::Pipeline;
use super::shared::Shared;
use super::turn::SettleTurn;
use super::upkeep::presence;
use super::util::{in_span, panic_message, quietly, unless};
use crate::error::{Error, Result};

/// A running worker; see [`Worker::start`](super::Worker::start).
///
/// Dropping it without [`shutdown`](Self::shutdown) does not leave the
/// worker running detached: the drop stops the claim loops at once and
/// shuts the worker down in the background as `shutdown` would, with the
/// worker's shutdown timeout ([`WorkerBuilder::shutdown_timeout`](super::WorkerBuilder::shutdown_timeout))
/// as the deadline: running jobs get that long (less
/// [`SHUTDOWN_FINAL_WRITES`]), the rest are released to
/// `pending` without counting the attempt, and completed jobs are settled.
/// Nothing reports the outcome; call `shutdown` to wait for it.
///
/// ```
/// use std::time::Duration;
/// use jobq_runtime::{job, JobStatus, Jobq, Worker};
///
/// /// Makes a thumbnail.
/// #[job(queue = "thumbnails")]
/// async fn thumbnail(image_id: u64) {
///     let _ = image_id;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let handle = Worker::builder(jobq.clone()).queue("thumbnails", 4).build()?.start();
/// let job = jobq.enqueue(Thumbnail::new(7)).await?;
/// while jobq.job(job.id).await?.map(|j| j.status) != Some(JobStatus::Done) {
///     tokio::time::sleep(Duration::from_millis(5)).await;
/// }
/// assert_eq!(handle.held_jobs(), 0);
/// // Stops claiming, gives running jobs up to 30 s, settles everything.
/// handle.shutdown(Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the handle shuts the worker down in the background; call shutdown to wait for it"]
pub struct WorkerHandle {
    shared: Arc<Shared>,
    /// The claim pipeline (what it holds claimed ahead).
    pipeline: Arc<Pipeline>,
    /// The worker's tasks; taken by `shutdown` or by the drop guard.
    running: Option<Running>,
    /// The runtime the worker runs on, for the drop guard's shutdown.
    runtime: tokio::runtime::Handle,
    /// The worker's span, the parent of its shutdown's.
    span: tracing::Span,
}

/// The tasks of a started worker and their stop signals, stopped in order
/// by [`Running::stop`].
#[derive(Debug)]
pub(super) struct Running {
    /// The claim loops.
    pub(super) claimers: TaskTracker,
    /// The job tasks.
    pub(super) jobs: TaskTracker,
    pub(super) completer: JoinHandle<()>,
    /// Makes the completer drain and stop.
    pub(super) stop_completer: CancellationToken,
    /// The settle turn, whose writes finishing beside it the shutdown waits for.
    pub(super) turn: Arc<SettleTurn>,
    pub(super) rescuer: JoinHandle<()>,
    /// Makes the rescuer drain and stop.
    pub(super) stop_rescuer: CancellationToken,
    /// Heartbeat and the upkeep tasks (reaper, pauses, presence, pruner,
    /// stats, listener, cron).
    pub(super) tasks: TaskTracker,
    /// The worker's row in `jobq_workers`, deleted at the end.
    pub(super) presence_id: i64,
}

impl WorkerHandle {
    pub(super) fn new(
        shared: Arc<Shared>,
        pipeline: Arc<Pipeline>,
        running: Running,
        span: tracing::Span,
    ) -> Self {
        Self {
            shared,
            pipeline,
            running: Some(running),
            runtime: tokio::runtime::Handle::current(),
            span,
        }
    }

    /// This worker's id.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// Payload bytes this worker holds claimed ahead of free slots right now
    /// (for tests of `claim_ahead_bytes`).
    #[doc(hidden)]
    pub fn buffered_payload_bytes(&self) -> usize {
        self.pipeline.buffered_bytes.load(Ordering::Relaxed)
    }

    /// How many jobs this worker holds right now (running or awaiting settlement).
    pub fn held_jobs(&self) -> usize {
        self.shared.held.len()
    }

    /// Stops claiming, waits for running jobs, then cancels the rest and
    /// releases them to `pending` without counting the attempt, settles
    /// every completed job, and stops — returning by `deadline`, whatever
    /// the database does.
    ///
    /// Running jobs get `deadline` less [`SHUTDOWN_FINAL_WRITES`] (or less half the
    /// deadline, if that is shorter), which is kept for handing back what
    /// still runs and writing the last settles. A write that has not gone
    /// through when `deadline` passes — the database is frozen, cut off or
    /// down — is given up on: those jobs stay `processing` until their
    /// leases expire, then any worker's reaper returns them and they run
    /// again (at-least-once; an attempt that had finished runs a second
    /// time). Nothing is lost.
    ///
    /// Returns [`Error::Panicked`] if a task of the worker panicked, and
    /// [`Error::NotMigrated`] or [`Error::MigrationsPending`] if it found the
    /// database not migrated (the worker then stopped claiming at once; see
    /// [`WorkerHandle::failed`]).
    ///
    /// # Cancel safety
    /// The shutdown runs in a task of its own: dropping this future (a
    /// `select!` branch that lost, a timeout around it) does not interrupt
    /// it, it goes on in the background to the same end; only its result is
    /// lost. No worker task keeps claiming after the first poll.
    pub async fn shutdown(mut self, deadline: Duration) -> Result<()> {
        let stopping = self.stop(deadline);
        match stopping.await {
            Ok(result) => result,
            Err(error) => Err(Error::Panicked {
                task: "shutdown",
                message: match error.try_into_panic() {
                    Ok(panic) => panic_message(panic.as_ref()),
                    Err(error) => error.to_string(),
                },
            }),
        }
    }

    /// Completes when a task of the worker panicked, or the worker found
    /// the database not migrated (or migrated by an older jobq), and the
    /// worker stopped claiming; [`shutdown`](Self::shutdown) then returns
    /// the error.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it changes nothing.
    pub async fn failed(&self) {
        self.shared.failed.cancelled().await;
    }

    /// Stops claiming now and spawns the rest of the shutdown.
    fn stop(&mut self, deadline: Duration) -> JoinHandle<Result<()>> {
        let running = self
            .running
            .take()
            .expect("a worker handle is stopped once: by shutdown or by its drop");
        self.shared.stop_claiming.cancel();
        let span = in_dispatch(
            &self.span,
            || tracing::info_span!(parent: &self.span, "jobq.shutdown"),
        )
        .unwrap_or_else(tracing::Span::none);
        let stop = running.stop(Arc::clone(&self.shared), deadline);
        self.runtime.spawn(in_span(span, stop))
    }
}

impl Drop for WorkerHandle {
    /// The drop guard: a handle dropped before `shutdown` shuts the worker
    /// down in the background (see [`WorkerHandle`]).
    fn drop(&mut self) {
        if self.running.is_some() {
            quietly(|| {
                in_dispatch(&self.span, || {
                    tracing::info!(
                        parent: &self.span,
                        "the worker handle was dropped before shutdown; shutting the worker down in the background"
                    );
                });
            });
            let deadline = self.shared.settings.shutdown_timeout;
            drop(self.stop(deadline));
        }
    }
}

impl Running {
    /// The shutdown, in order: claim loops (they hand back what they claimed
    /// and did not start), running jobs (up to `deadline`, then cancelled and
    /// released), the completer, writes stuck on a row lock, the rescuer,
    /// and last the heartbeat and the other background tasks.
    ///
    /// It returns by `deadline`: running jobs get it less the time kept for
    /// the final writes ([`SHUTDOWN_FINAL_WRITES`], at most half of it), and when it
    /// passes `deadline_passed` fires, which every write still going (a
    /// claim being taken back, a release, a settle, a write stuck on a row
    /// lock) gives up on; what is left then ends without the database.
    async fn stop(self, shared: Arc<Shared>, deadline: Duration) -> Result<()> {
        let Self {
            claimers,
            jobs,
            completer,
            stop_completer,
            turn,
            rescuer,
            stop_rescuer,
            tasks,
            presence_id,
        } = self;
        let started = tokio::time::Instant::now();
        let ends = started + deadline;
        let jobs_end = ends - SHUTDOWN_FINAL_WRITES.min(deadline / 2);
        let passed = shared.deadline_passed.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep_until(ends).await;
            passed.cancel();
        });
        shared.stop_claiming.cancel();
        // The claim loops hand back the jobs they claimed and did not
        // start; then the running jobs finish, or are stopped at `jobs_end`.
        let finished = async {
            claimers.wait().await;
            jobs.close();
            jobs.wait().await;
        };
        tokio::pin!(finished);
        if tokio::time::timeout_at(jobs_end, &mut finished)
            .await
            .is_err()
        {
            quietly(|| {
                tracing::info!(
                    running = jobs.len(),
                    "shutdown deadline near; cancelling running jobs and releasing them to pending"
                );
            });
            shared.held.stop_all();
            finished.await;
        }
        // Every job task has handed its success to the completer by now.
        stop_completer.cancel();
        let _ = completer.await;
        // Writes stuck on a row lock get one lease more, within the deadline.
        turn.wait_beside(shared.settings.lease).await;
        // What dead job tasks owed, now that no job task is left.
        stop_rescuer.cancel();
        let _ = rescuer.await;
        // Heartbeat and reaper last: held jobs keep their leases until settled.
        shared.stop_background.cancel();
        tasks.wait().await;
        // Gone from the live workers; the presence loop has stopped. Not
        // past the deadline: a row left behind expires on its own.
        let unregister = presence::unregister(&shared, presence_id);
        let _ = unless(&shared.deadline_passed, unregister).await;
        timer.abort();
        match shared.take_failure() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// The end of a shutdown's deadline kept for its final writes (handing back
/// what still runs, the last settles), or half the deadline if that is
/// shorter: running jobs get the rest.
pub const SHUTDOWN_FINAL_WRITES: Duration = Duration::from_secs(1);

/// Runs `f` with `span`'s subscriber as the default: a span or event made
/// there with `span` as its parent goes to the subscriber that knows it,
/// whichever thread (with whichever default subscriber) runs the shutdown.
/// `None` if `span` is disabled.
fn in_dispatch<T>(span: &tracing::Span, f: impl FnOnce() -> T) -> Option<T> {
    span.with_subscriber(|(_, dispatch)| tracing::dispatcher::with_default(dispatch, f))
}
