//! Pausing a queue: honoured by every worker (in other processes too)
//! within one poll interval, running jobs finish, nothing is claimed while
//! paused (wake-ups included), claiming starts again once lifted, and a
//! pause outlives a worker's restart.

use std::time::{Duration, Instant};

use jobq_runtime::{Enqueue, JobContext, JobStatus, Jobq, State, Worker, job};
use jobq_tests::{Gates, TestDb, WorkerProcess, on, unique_queue, wait_for_status, wait_until};
use tokio::process::Command;

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-pause-worker");
/// The poll interval of every worker here.
const POLL: Duration = Duration::from_millis(100);
const LONG: Duration = Duration::from_secs(20);

/// The job the worker processes run (`jobq-pause-worker`'s `echo`).
#[job(name = "jobq_pause_echo")]
async fn echo(n: u64) {
    let _ = n;
}

/// Waits on the test's gate for its own id, for in-process workers.
#[job(name = "pause_gated")]
async fn gated(ctx: JobContext, gates: State<Gates<i64>>, n: u64) {
    let _ = n;
    gates.wait(ctx.id()).await;
}

/// A `jobq-pause-worker` process and what it printed.
struct Process(WorkerProcess);

impl Process {
    /// Starts one on `queue` and waits until its worker runs.
    async fn start(db: &TestDb, queue: &str) -> Self {
        let mut command = Command::new(WORKER);
        command
            .env("JOBQ_PAUSE_URL", db.url())
            .env("JOBQ_PAUSE_QUEUE", queue)
            .env("JOBQ_PAUSE_POLL_MS", POLL.as_millis().to_string());
        Self(WorkerProcess::start(command, LONG).await)
    }

    fn printed(&self) -> Vec<String> {
        self.0.printed()
    }

    /// The ids of the jobs it ran, among `ids`.
    fn ran(&self, ids: &[i64]) -> Vec<i64> {
        self.printed()
            .iter()
            .filter_map(|l| l.strip_prefix("ran ")?.parse().ok())
            .filter(|id| ids.contains(id))
            .collect()
    }

    /// Closes its stdin (it shuts down gracefully) and waits for it to exit.
    async fn stop(self) {
        self.0.stop(LONG).await;
    }
}

/// Enqueues `n` echo jobs on `queue`; their ids.
async fn enqueue(jobq: &Jobq, queue: &str, n: u64) -> Vec<i64> {
    let jobs = (0..n).map(|i| (Echo::new(i), on(queue)));
    let enqueued = jobq.enqueue_many_with(jobs).await.unwrap();
    enqueued.into_iter().map(|e| e.id).collect()
}

/// Asserts that every job of `ids` is still `pending`.
async fn assert_pending(jobq: &Jobq, ids: &[i64], when: &str) {
    for &id in ids {
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Pending, "{when}: {info:?}");
    }
}

/// Waits until every job of `ids` is `done`.
async fn wait_done(jobq: &Jobq, ids: &[i64]) {
    for &id in ids {
        wait_for_status(jobq, id, JobStatus::Done, LONG).await;
    }
}

/// Long enough for a worker to have claimed a job it was free to claim:
/// more than two poll intervals.
async fn more_than_two_polls() {
    tokio::time::sleep(POLL * 3 + Duration::from_millis(100)).await;
}

/// Two workers in two processes: both claim; paused, neither claims what
/// is enqueued, for more than two poll intervals; lifted, both claim again.
async fn a_pause_is_honoured_by_two_worker_processes_and_lifted(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("pause-two");
    let (a, b) = (
        Process::start(&db, &queue).await,
        Process::start(&db, &queue).await,
    );
    let before = enqueue(&jobq, &queue, 6).await;
    wait_done(&jobq, &before).await;
    assert!(
        !a.ran(&before).is_empty() && !b.ran(&before).is_empty(),
        "both workers claim: {:?} {:?}",
        a.ran(&before),
        b.ran(&before)
    );

    assert!(jobq.pause(&queue).await.unwrap());
    // Honoured within one poll interval.
    tokio::time::sleep(POLL + Duration::from_millis(50)).await;
    let during = enqueue(&jobq, &queue, 4).await;
    more_than_two_polls().await;
    assert_pending(&jobq, &during, "paused").await;
    assert!(a.ran(&during).is_empty() && b.ran(&during).is_empty());

    let lifted = Instant::now();
    assert!(jobq.resume(&queue).await.unwrap());
    wait_until("both workers ran a job after the resume", LONG, || async {
        !a.ran(&during).is_empty() && !b.ran(&during).is_empty()
    })
    .await;
    eprintln!(
        "{}: both workers claimed again {:?} after the resume (poll interval {POLL:?})",
        db.url().split(':').next().unwrap_or_default(),
        lifted.elapsed()
    );
    wait_done(&jobq, &during).await;
    a.stop().await;
    b.stop().await;
}

/// A worker started while its queue is paused claims nothing from it,
/// whether it is the first or a replacement; lifted, it claims.
async fn a_pause_outlives_a_worker_restart(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("pause-restart");
    assert!(jobq.pause(&queue).await.unwrap());
    let first = Process::start(&db, &queue).await;
    let ids = enqueue(&jobq, &queue, 2).await;
    more_than_two_polls().await;
    assert_pending(&jobq, &ids, "paused, first worker").await;
    first.stop().await;

    let second = Process::start(&db, &queue).await;
    more_than_two_polls().await;
    assert_pending(&jobq, &ids, "paused, after the restart").await;
    assert!(jobq.resume(&queue).await.unwrap());
    wait_done(&jobq, &ids).await;
    assert_eq!(second.ran(&ids).len(), 2);
    second.stop().await;
}

/// In one process: a job running when the pause comes finishes; an enqueue
/// in this process (which wakes the claim loop at once) claims nothing
/// while paused; lifted, the job runs.
async fn a_running_job_finishes_and_a_wakeup_claims_nothing_while_paused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("pause-local");
    let gates = Gates::<i64>::default();
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .state(gates.clone())
        .poll_interval(POLL)
        .build()
        .unwrap()
        .start();
    let running = jobq
        .enqueue_with(Gated::new(1), Enqueue::new().queue(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, running, JobStatus::Processing, LONG).await;
    assert!(jobq.pause(&queue).await.unwrap());
    tokio::time::sleep(POLL + Duration::from_millis(50)).await;
    let woken = jobq
        .enqueue_with(Gated::new(2), Enqueue::new().queue(&queue))
        .await
        .unwrap()
        .id;
    gates.open(running);
    wait_for_status(&jobq, running, JobStatus::Done, LONG).await;
    more_than_two_polls().await;
    assert_pending(&jobq, &[woken], "paused, woken by an enqueue").await;
    gates.open(woken);
    assert!(jobq.resume(&queue).await.unwrap());
    wait_for_status(&jobq, woken, JobStatus::Done, LONG).await;
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

jobq_tests::on_every_backend!(
    a_pause_is_honoured_by_two_worker_processes_and_lifted,
    a_pause_outlives_a_worker_restart,
    a_running_job_finishes_and_a_wakeup_claims_nothing_while_paused,
);
