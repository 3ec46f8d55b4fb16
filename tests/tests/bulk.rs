//! Bulk actions: `retry_where` and `cancel_where` change exactly the jobs
//! their filter matches in the statuses they apply to, in batches, and
//! leave every other job alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{
    Backend, Enqueue, JobContext, JobError, JobFilter, JobStatus, Jobq, QueueCounts, State, Worker,
    job,
};
use jobq_tests::{Recorder, TestDb, enqueue_ids, on, unique_queue, wait_until};

#[job(name = "bulk_a")]
async fn bulk_a(n: u64) {
    let _ = n;
}

#[job(name = "bulk_b")]
async fn bulk_b(n: u64) {
    let _ = n;
}

/// Fails for good at every attempt, at once.
#[job(name = "bulk_fails")]
async fn bulk_fails(ctx: &JobContext, recorder: State<Recorder>, n: u64) -> Result<(), JobError> {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
    Err(JobError::permanent("fails again"))
}

/// Pending, processing, done, failed, cancelled.
fn by_status(c: &QueueCounts) -> [u64; 5] {
    [c.pending, c.processing, c.done, c.failed, c.cancelled]
}

/// A queue holding 3 `failed`, 2 `cancelled`, 1 `done`, 1 `processing` and
/// 2 `pending` jobs.
async fn every_status(db: &TestDb) -> (Jobq, String) {
    let jobq = db.jobq().await;
    let queue = unique_queue("bulk");
    let ids = enqueue_ids(&jobq, (0..9).map(|n| (BulkA::new(n), on(&queue)))).await;
    let claims = __store::claim(&jobq, &queue, 5, Duration::from_secs(60), "bulk-test")
        .await
        .unwrap();
    assert_eq!(claims.len(), 5);
    for claim in &claims[..3] {
        let fence = (claim.id, claim.token);
        let failed = __store::transition(&jobq, fence, true, Duration::ZERO, false, None);
        assert!(failed.await.unwrap());
    }
    __store::complete(&jobq, &[(claims[3].id, claims[3].token)])
        .await
        .unwrap();
    // claims[4] stays processing.
    for &id in &ids[5..7] {
        assert!(jobq.cancel(id).await.unwrap());
    }
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(by_status(&counts), [2, 1, 1, 3, 2]);
    (jobq, queue)
}

async fn retry_where_retries_failed_and_cancelled_jobs_only(db: TestDb) {
    let (jobq, queue) = every_status(&db).await;
    let filter = JobFilter::new().queue(&queue);
    for status in [JobStatus::Pending, JobStatus::Processing, JobStatus::Done] {
        let none = jobq.retry_where(&filter.clone().status(status)).await;
        assert_eq!(none.unwrap(), 0, "a filter on {status} retries nothing");
    }
    assert_eq!(jobq.retry_where(&filter).await.unwrap(), 5);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.processing, counts.done), (7, 1, 1));
    assert_eq!((counts.failed, counts.cancelled), (0, 0));
    assert_eq!(jobq.retry_where(&filter).await.unwrap(), 0, "nothing left");
}

async fn retry_where_applies_the_status_of_its_filter(db: TestDb) {
    let (jobq, queue) = every_status(&db).await;
    let filter = JobFilter::new().queue(&queue).status(JobStatus::Cancelled);
    assert_eq!(jobq.retry_where(&filter).await.unwrap(), 2);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.failed, counts.cancelled), (4, 3, 0));
}

async fn cancel_where_cancels_pending_and_processing_jobs_only(db: TestDb) {
    let (jobq, queue) = every_status(&db).await;
    let filter = JobFilter::new().queue(&queue);
    for status in [JobStatus::Done, JobStatus::Failed, JobStatus::Cancelled] {
        let none = jobq.cancel_where(&filter.clone().status(status)).await;
        assert_eq!(none.unwrap(), 0, "a filter on {status} cancels nothing");
    }
    assert_eq!(jobq.cancel_where(&filter).await.unwrap(), 3);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(by_status(&counts), [0, 0, 1, 3, 5]);
}

/// 1,234 jobs: more than two batches of 500; a job name filter takes half.
async fn bulk_actions_run_past_one_batch(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("bulk-many");
    let a = (0..617).map(|n| (BulkA::new(n), on(&queue)));
    let b = (0..617).map(|n| (BulkB::new(n), on(&queue)));
    enqueue_ids(&jobq, a).await;
    enqueue_ids(&jobq, b).await;
    let filter = JobFilter::new().queue(&queue);
    let only_a = filter.clone().job_name("bulk_a");
    assert_eq!(jobq.cancel_where(&only_a).await.unwrap(), 617);
    assert_eq!(jobq.cancel_where(&filter).await.unwrap(), 617);
    assert_eq!(jobq.counts(&queue).await.unwrap().cancelled, 1234);
    assert_eq!(jobq.retry_where(&filter).await.unwrap(), 1234);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.cancelled), (1234, 0));
    let pending = filter.clone().status(JobStatus::Pending);
    assert_eq!(jobq.count_where(&pending).await.unwrap(), 1234);
}

/// Jobs a bulk action sees fail again.
const AGAIN: u64 = 2_000;

/// `AGAIN` jobs of a queue of their own, failed once each by a worker that
/// keeps running (64 slots, polling every 10 ms): whatever `retry_where`
/// sends back to `pending` fails again at once.
async fn failing_jobs(db: &TestDb) -> (Jobq, String, Recorder, jobq_runtime::WorkerHandle) {
    let jobq = db.jobq().await;
    let queue = unique_queue("bulk-again");
    let recorder = Recorder::default();
    let jobs = (0..AGAIN).map(|n| (BulkFails::new(n), on(&queue).max_attempts(1)));
    enqueue_ids(&jobq, jobs).await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 64)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(10))
        .build()
        .expect("build")
        .start();
    wait_until(
        "every job failed once",
        Duration::from_secs(120),
        || async { jobq.counts(&queue).await.unwrap().failed == AGAIN },
    )
    .await;
    (jobq, queue, recorder, worker)
}

/// The case: one `retry_where` over jobs a running worker fails
/// again at once. A call acts on each job it matches at most once: it
/// retries each of the `AGAIN` jobs once (none is left out: nothing else
/// holds a lock on a failed row), so each job runs exactly twice in all.
/// Before the fix, on MySQL and SQLite, the batches went on picking the
/// rows the worker had failed again (one call retried 63,301 times).
async fn retry_where_retries_each_job_at_most_once_while_a_worker_fails_them_again(db: TestDb) {
    let (jobq, queue, recorder, worker) = failing_jobs(&db).await;
    let filter = JobFilter::new().queue(&queue);
    let retried = jobq.retry_where(&filter).await.unwrap();
    assert_eq!(retried, AGAIN, "each failed job retried once");
    wait_until(
        "every job failed again",
        Duration::from_secs(120),
        || async { jobq.counts(&queue).await.unwrap().failed == AGAIN },
    )
    .await;
    worker.shutdown(Duration::from_secs(10)).await.unwrap();
    let (jobs, runs) = recorder.totals();
    assert_eq!(jobs as u64, AGAIN);
    assert_eq!(
        runs as u64,
        2 * AGAIN,
        "each job ran once, then once after the retry"
    );
}

/// `cancel_where` while another task keeps sending what it cancels back to
/// `pending` (`retry`, one job after another, up to ten times each): each
/// job is cancelled at most once by the call. Before the fix, on MySQL and
/// SQLite, its batches picked the rows sent back again and again, for as
/// long as the retries went on.
async fn cancel_where_cancels_each_job_at_most_once_while_they_are_retried(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("bulk-cancel-again");
    let jobs = (0..AGAIN).map(|n| (BulkFails::new(n), on(&queue)));
    let ids = enqueue_ids(&jobq, jobs).await;
    let stop = Arc::new(AtomicBool::new(false));
    let retrier = tokio::spawn({
        let (jobq, stop) = (jobq.clone(), Arc::clone(&stop));
        async move {
            let mut retried = 0u64;
            while !stop.load(Ordering::Relaxed) && retried < 10 * AGAIN {
                for &id in &ids {
                    if jobq.retry(id).await.unwrap() {
                        retried += 1;
                    }
                }
                tokio::task::yield_now().await;
            }
            retried
        }
    });
    let filter = JobFilter::new().queue(&queue);
    let cancelled = jobq.cancel_where(&filter).await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let retried = retrier.await.unwrap();
    assert!(
        cancelled > AGAIN / 2,
        "cancelled only {cancelled} of {AGAIN}"
    );
    assert!(
        cancelled <= AGAIN,
        "one call cancelled {cancelled} times, more than the {AGAIN} jobs \
         ({retried} retries ran meanwhile)"
    );
}

/// Runs `$action` (a future of a bulk action's count) while a caller's
/// transaction holds the row of the job whose key is `$key` (a duplicate
/// `enqueue_in` of it locks that row) for a second, then commits; the
/// action's count. MySQL and PostgreSQL only (SQLite has no row locks).
macro_rules! holding_row {
    ($db:expr, $jobq:expr, $key:expr, $action:expr) => {
        match $db.backend() {
            Backend::MySql => holding_row!(@on $jobq.mysql_pool().expect("pool"), $jobq, $key, $action),
            Backend::Postgres => holding_row!(@on $jobq.pg_pool().expect("pool"), $jobq, $key, $action),
            other => unreachable!("{other:?} has no row locks"),
        }
    };
    (@on $pool:expr, $jobq:expr, $key:expr, $action:expr) => {{
        let mut tx = $pool.begin().await.expect("begin");
        let options = Enqueue::new().queue("bulk-held-other").idempotency_key($key);
        let enqueued = $jobq
            .enqueue_in_with(&mut *tx, BulkA::new(99), options)
            .await
            .expect("enqueue_in");
        assert!(enqueued.duplicate, "a duplicate of the held job's key");
        let mut action = tokio::spawn($action);
        let early = tokio::time::timeout(Duration::from_secs(1), &mut action).await;
        assert!(
            early.is_err(),
            "the action returned while a row it applies to was held: {early:?}"
        );
        tx.commit().await.expect("commit");
        action.await.expect("the action's task").expect("the action")
    }};
}

/// A row another transaction holds is not left out: each batch's first
/// pass skips it, a second pass waits for it. Before the fix `cancel_where`
/// returned without it (on MySQL/MariaDB and PostgreSQL), and a CI run saw
/// `cancel_where` miss running jobs whose rows a worker held for a moment.
async fn bulk_actions_wait_for_a_row_another_transaction_holds(db: TestDb) {
    if db.backend() == Backend::Sqlite {
        return; // one writer at a time: no row is held while a batch runs
    }
    let jobq = db.jobq().await;
    let queue = unique_queue("bulk-held");
    let key = format!("{queue}:held");
    let held = jobq
        .enqueue_with(BulkA::new(0), on(&queue).idempotency_key(&key))
        .await
        .unwrap()
        .id;
    enqueue_ids(&jobq, (1..4).map(|n| (BulkA::new(n), on(&queue)))).await;
    let filter = JobFilter::new().queue(&queue);
    let cancelled = holding_row!(db, jobq, &key, {
        let (jobq, filter) = (jobq.clone(), filter.clone());
        async move { jobq.cancel_where(&filter).await }
    });
    assert_eq!(cancelled, 4, "every pending job, the held one too");
    let info = jobq.job(held).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Cancelled);
    let retried = holding_row!(db, jobq, &key, {
        let (jobq, filter) = (jobq.clone(), filter.clone());
        async move { jobq.retry_where(&filter).await }
    });
    assert_eq!(retried, 4, "every cancelled job, the held one too");
    let info = jobq.job(held).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Pending);
}

jobq_tests::on_every_backend!(
    bulk_actions_wait_for_a_row_another_transaction_holds,
    retry_where_retries_each_job_at_most_once_while_a_worker_fails_them_again,
    cancel_where_cancels_each_job_at_most_once_while_they_are_retried,
    retry_where_retries_failed_and_cancelled_jobs_only,
    retry_where_applies_the_status_of_its_filter,
    cancel_where_cancels_pending_and_processing_jobs_only,
    bulk_actions_run_past_one_batch,
);
