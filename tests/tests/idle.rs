//! While a worker's watcher covers its queues (see tests/idle_statements.rs:
//! its claim loops and reaper then poll only as safety nets), what comes
//! due without a wake-up still runs on time: a retry the worker scheduled
//! itself, and a lease that runs out while it idles.

use std::time::Duration;

use jobq_runtime::{Enqueue, JobContext, JobError, JobStatus, Worker, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, unique_queue, wait_for_status};

/// Until the first polls have backed off and the watcher covers the queues.
const SETTLE: Duration = Duration::from_secs(5);

#[job(name = "idle_noop")]
async fn noop(n: u64) {
    let _ = n;
}

/// Fails its first attempt after 1.5 s (its loop has gone idle by then),
/// to be retried 100 ms later.
#[job(name = "idle_retry_once")]
async fn retry_once(ctx: JobContext, n: u64) -> Result<(), JobError> {
    let _ = n;
    if ctx.attempt() == 1 {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        return Err(JobError::retry_in(Duration::from_millis(100), "once"));
    }
    Ok(())
}

/// A retry this worker schedules starts at its time, at the default poll
/// with the watcher covering the queue: the loop claims it when due, not
/// at the watcher's next look (up to 1.25 s later; without the loop's
/// due time, 0.30–1.1 s measured).
async fn a_retry_starts_at_its_time_while_the_watcher_covers_the_queue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idle_retry");
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .build()
        .unwrap()
        .start();
    tokio::time::sleep(SETTLE).await;
    let id = jobq
        .enqueue_with(RetryOnce::new(3), Enqueue::new().queue(&queue))
        .await
        .unwrap()
        .id;
    let done = wait_for_status(&jobq, id, JobStatus::Done, Duration::from_secs(20)).await;
    let failed = done.history.first().expect("the failed attempt");
    let ended = failed.ended_at.expect("its end");
    let late = done.claimed_at.expect("claimed") - ended;
    println!("the retry started {late} after the failed attempt ended");
    assert!(
        late < chrono::TimeDelta::milliseconds(300),
        "the retry started {late} after the failed attempt ended (retry in 100 ms)"
    );
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// A lease that runs out while the worker is idle is reaped about when it
/// does, reported by the watcher, not at the reaper's interval (20 s
/// here); the job then runs.
async fn a_lease_that_runs_out_while_idle_is_reaped_at_once(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idle_lease");
    let id = jobq
        .enqueue_with(Noop::new(2), Enqueue::new().queue(&queue))
        .await
        .unwrap()
        .id;
    // As if a worker that died had claimed it, its lease running out in a second.
    let sql = Db::of(&jobq);
    let held = sql.pick(
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = UTC_TIMESTAMP(6) + INTERVAL 1 SECOND WHERE id = ?",
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = now() + interval '1 second' WHERE id = $1",
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) + 1000000 WHERE id = ?",
    );
    assert_eq!(sql.execute(held, &[Arg::Int(id)]).await.unwrap(), 1);
    let expires = jobq.job(id).await.unwrap().expect("the job").run_at;
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .reap_interval(Duration::from_secs(20))
        .build()
        .unwrap()
        .start();
    let done = wait_for_status(&jobq, id, JobStatus::Done, Duration::from_secs(40)).await;
    let late = done.claimed_at.expect("claimed") - expires;
    println!("the job whose lease ran out started again {late} after");
    assert!(
        late < chrono::TimeDelta::milliseconds(3_000),
        "the job whose lease ran out started again {late} after (the reap interval is 20 s)"
    );
    assert_eq!(done.attempts, 2);
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

jobq_tests::on_every_backend!(
    a_retry_starts_at_its_time_while_the_watcher_covers_the_queue,
    a_lease_that_runs_out_while_idle_is_reaped_at_once
);
