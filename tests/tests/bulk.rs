//! Bulk actions: `retry_where` and `cancel_where` change exactly the jobs
//! their filter matches in the statuses they apply to, in batches, and
//! leave every other job alone.

use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{JobFilter, JobStatus, Jobq, QueueCounts, job};
use jobq_tests::{TestDb, enqueue_ids, on, unique_queue};

#[job(name = "bulk_a")]
async fn bulk_a(n: u64) {
    let _ = n;
}

#[job(name = "bulk_b")]
async fn bulk_b(n: u64) {
    let _ = n;
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

jobq_tests::on_every_backend!(
    retry_where_retries_failed_and_cancelled_jobs_only,
    retry_where_applies_the_status_of_its_filter,
    cancel_where_cancels_pending_and_processing_jobs_only,
    bulk_actions_run_past_one_batch,
);
