//! Dropping a running worker — its `WorkerHandle`, or the `run_until`
//! future — does not leave it running detached: the drop starts the
//! shutdown, which releases the jobs it holds and stops claiming.

use std::time::Duration;

use jobq_runtime::{Enqueue, Jobq, QueueCounts, Worker, WorkerBuilder, job};
use jobq_tests::{TestDb, on_every_backend, unique_queue, wait_until};

/// Runs far longer than the tests: only a cancellation ends it.
#[job(name = "worker_drop_slow")]
async fn slow(n: u64) {
    let _ = n;
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

#[job(name = "worker_drop_fast")]
async fn fast(n: u64) {
    let _ = n;
}

const HEARTBEAT: Duration = Duration::from_millis(50);
const DEADLINE: Duration = Duration::from_secs(20);
const RUNNING: u64 = 4;

fn worker(jobq: &Jobq, queue: &str) -> WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, RUNNING as usize)
        .lease(Duration::from_secs(5))
        .heartbeat_interval(HEARTBEAT)
        .poll_interval(Duration::from_millis(20))
        .shutdown_timeout(Duration::from_millis(100))
}

async fn counts(jobq: &Jobq, queue: &str) -> QueueCounts {
    jobq.counts(queue).await.expect("counts")
}

/// Enqueues `RUNNING` slow jobs on `queue`.
async fn enqueue_slow(jobq: &Jobq, queue: &str) {
    jobq.enqueue_many_with((0..RUNNING).map(|n| (Slow::new(n), Enqueue::new().queue(queue))))
        .await
        .expect("enqueue");
}

async fn all_running(jobq: &Jobq, queue: &str) {
    wait_until("every slow job is running", DEADLINE, || async {
        counts(jobq, queue).await.processing == RUNNING
    })
    .await;
}

/// After the drop: the held jobs go back to `pending` with their attempt
/// not counted, and a job enqueued afterwards is not claimed by anything.
async fn assert_stopped(jobq: &Jobq, queue: &str) {
    wait_until(
        "the dropped worker's jobs are released to pending",
        DEADLINE,
        || async {
            let counts = counts(jobq, queue).await;
            counts.pending == RUNNING && counts.processing == 0
        },
    )
    .await;
    let late = jobq
        .enqueue_with(Fast::new(0), Enqueue::new().queue(queue))
        .await
        .expect("enqueue after the drop");
    // Twenty heartbeat intervals (fifty poll intervals): no claim loop is
    // left to take it.
    let watch_until = tokio::time::Instant::now() + HEARTBEAT * 20;
    while tokio::time::Instant::now() < watch_until {
        let info = jobq.job(late.id).await.expect("job").expect("row");
        assert_eq!(
            info.status,
            jobq_runtime::JobStatus::Pending,
            "a job enqueued after the drop was claimed: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    jobq.cancel(late.id).await.expect("cancel");
}

async fn a_dropped_worker_handle_releases_its_jobs_and_stops_claiming(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("worker-drop-handle");
    enqueue_slow(&jobq, &queue).await;
    let handle = worker(&jobq, &queue).build().expect("build").start();
    all_running(&jobq, &queue).await;
    // The rows turn `processing` when the claim commits; the worker holds
    // them once its answer is back.
    wait_until("the worker holds every running job", DEADLINE, || async {
        handle.held_jobs() == RUNNING as usize
    })
    .await;
    drop(handle);
    assert_stopped(&jobq, &queue).await;
}

async fn a_dropped_run_until_future_releases_its_jobs_and_stops_claiming(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("worker-drop-run");
    enqueue_slow(&jobq, &queue).await;
    let run = worker(&jobq, &queue)
        .build()
        .expect("build")
        .run_until(std::future::pending());
    tokio::select! {
        result = run => panic!("run_until ended without its signal: {result:?}"),
        () = all_running(&jobq, &queue) => {}
    }
    // `run` is dropped here, with the select.
    assert_stopped(&jobq, &queue).await;
}

on_every_backend!(
    a_dropped_worker_handle_releases_its_jobs_and_stops_claiming,
    a_dropped_run_until_future_releases_its_jobs_and_stops_claiming,
);
