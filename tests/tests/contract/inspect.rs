//! Inspect: a row as stored, and a queue's counts by status.

use super::*;

/// `job` reads a row with every column as stored, in each status it goes
/// through; `None` for an id with no row.
async fn job_reads_a_row_as_stored_through_its_life(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("inspect-job");
    let id = enqueue(&jobq, &queue, 7).await;
    let pending = info(&jobq, id).await;
    assert_eq!(
        (
            pending.queue.as_str(),
            pending.job_name.as_str(),
            pending.payload.as_str()
        ),
        (queue.as_str(), JOB, r#"{"n":7}"#)
    );
    assert_eq!(
        (pending.attempts, pending.max_attempts, pending.priority),
        (0, 3, 0)
    );

    let held = claim_only(&jobq, &queue, id, "inspector").await;
    let processing = assert_held(&jobq, &held, "inspector", LEASE).await;
    let done = __store::complete(&jobq, &[fence(&held)]).await.unwrap();
    assert_eq!(done, 1);
    let finished = assert_finished(&jobq, id, JobStatus::Done).await;
    // Only what each step writes changed.
    for row in [&processing, &finished] {
        assert_eq!(
            (
                &row.queue,
                &row.job_name,
                &row.payload,
                row.priority,
                row.max_attempts
            ),
            (&pending.queue, &pending.job_name, &pending.payload, 0, 3)
        );
        assert_eq!(
            (row.created_at, &row.idempotency_key, &row.last_error),
            (pending.created_at, &None, &None)
        );
    }
    assert_eq!(
        (finished.claimed_by, finished.claimed_at),
        (processing.claimed_by, processing.claimed_at)
    );
    assert!(finished.finished_at.unwrap() >= processing.claimed_at.unwrap());
    assert_eq!(jobq.job(i64::MAX).await.unwrap(), None);
}

/// `counts` counts one queue's rows by status, and no other queue's.
async fn counts_count_one_queues_rows_by_status(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("inspect-counts");
    let other = unique_queue("inspect-counts-other");
    let later = Enqueue::new()
        .queue(&queue)
        .delay(Duration::from_secs(3600));
    for n in 0..5 {
        enqueue(&jobq, &queue, n).await;
    }
    enqueue_row(&jobq, &row_with(5, later)).await;
    enqueue(&jobq, &other, 6).await;
    let claimed = claim(&jobq, &queue, 4, "w").await;
    assert_eq!(
        __store::complete(&jobq, &[fence(&claimed[0])])
            .await
            .unwrap(),
        1
    );
    let fail = __store::transition(&jobq, fence(&claimed[1]), true, Duration::ZERO, false, None);
    assert!(fail.await.unwrap());
    assert!(__store::cancel(&jobq, claimed[2].id).await.unwrap().0);
    let counts = jobq.counts(&queue).await.unwrap();
    let by_status =
        |c: jobq_runtime::QueueCounts| (c.pending, c.processing, c.done, c.failed, c.cancelled);
    assert_eq!(by_status(counts), (2, 1, 1, 1, 1), "{counts:?}");
    let elsewhere = jobq.counts(&other).await.unwrap();
    assert_eq!((elsewhere.pending, elsewhere.total()), (1, 1));
    let none = jobq
        .counts(&unique_queue("inspect-counts-none"))
        .await
        .unwrap();
    assert_eq!(none.total(), 0);
}

contract!(
    job_reads_a_row_as_stored_through_its_life,
    counts_count_one_queues_rows_by_status,
);
