//! Control: cancel a `pending` or `processing` row (naming the claim it
//! ended), retry a `failed` or `cancelled` one, pause and resume a queue.

use super::*;

/// A cancel finishes a `pending` or `processing` row as `cancelled` and
/// names the claim it ended, whose settles and renewals then change
/// nothing; any other row it leaves alone.
async fn a_cancel_ends_a_pending_or_processing_row_and_names_the_claim_it_ended(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("cancel");
    let running = enqueue(&jobq, &queue, 1).await;
    let held = claim_only(&jobq, &queue, running, "w").await;
    let done = enqueue(&jobq, &queue, 3).await;
    let finished = claim_only(&jobq, &queue, done, "w").await;
    let waiting = enqueue(&jobq, &queue, 2).await;
    assert_eq!(
        __store::complete(&jobq, &[fence(&finished)]).await.unwrap(),
        1
    );

    let cancelled = __store::cancel(&jobq, running).await.unwrap();
    assert_eq!(cancelled, (true, vec![fence(&held)]));
    let row = assert_finished(&jobq, running, JobStatus::Cancelled).await;
    assert_eq!(row.attempts, 1);
    assert_eq!(
        __store::cancel(&jobq, waiting).await.unwrap(),
        (true, vec![])
    );
    let row = assert_finished(&jobq, waiting, JobStatus::Cancelled).await;
    assert_eq!(row.attempts, 0);

    assert_eq!(
        __store::cancel(&jobq, running).await.unwrap(),
        (false, vec![]),
        "cancelled"
    );
    assert_eq!(
        __store::cancel(&jobq, done).await.unwrap(),
        (false, vec![]),
        "done"
    );
    assert_eq!(
        __store::cancel(&jobq, i64::MAX).await.unwrap(),
        (false, vec![]),
        "no row"
    );
    assert_finished(&jobq, done, JobStatus::Done).await;

    let lost = __store::heartbeat(&jobq, &[fence(&held)], LEASE)
        .await
        .unwrap();
    assert_eq!(lost, [fence(&held)]);
    assert_eq!(__store::complete(&jobq, &[fence(&held)]).await.unwrap(), 0);
    let fail = __store::transition(&jobq, fence(&held), true, Duration::ZERO, false, None);
    assert!(!fail.await.unwrap());
    assert_finished(&jobq, running, JobStatus::Cancelled).await;
}

/// A retry sends a `failed` or `cancelled` row back to `pending`, due
/// now, with at least one more attempt and its last error kept; any other
/// row it leaves alone.
async fn a_retry_revives_a_failed_or_cancelled_row_with_one_more_attempt(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("retry");
    let one_try = Enqueue::new().queue(&queue).max_attempts(1);
    let failed = enqueue_row(&jobq, &row_with(1, one_try)).await;
    let held = claim_only(&jobq, &queue, failed, "w").await;
    let fail = __store::transition(
        &jobq,
        fence(&held),
        true,
        Duration::ZERO,
        false,
        Some("boom".into()),
    );
    assert!(fail.await.unwrap());
    let later = Enqueue::new()
        .queue(&queue)
        .max_attempts(3)
        .delay(Duration::from_secs(3600));
    let cancelled = enqueue_row(&jobq, &row_with(2, later)).await;
    assert!(__store::cancel(&jobq, cancelled).await.unwrap().0);
    let finished_at = info(&jobq, failed).await.finished_at.unwrap();

    assert!(jobq.retry(failed).await.unwrap());
    let (row, token) = stored(&jobq, failed).await;
    assert_eq!(
        (row.status, row.attempts, row.max_attempts, token),
        (JobStatus::Pending, 1, 2, None)
    );
    assert_eq!(
        (row.finished_at, row.last_error.as_deref()),
        (None, Some("boom"))
    );
    assert!(row.run_at >= finished_at, "due now: {row:?}");
    assert!(!jobq.retry(failed).await.unwrap(), "pending");

    assert!(jobq.retry(cancelled).await.unwrap());
    let (row, token) = stored(&jobq, cancelled).await;
    assert_eq!(
        (row.status, row.attempts, row.max_attempts, token),
        (JobStatus::Pending, 0, 3, None)
    );
    assert_eq!(row.finished_at, None);

    let mut order: Vec<(i64, u32)> = claim(&jobq, &queue, 10, "w")
        .await
        .iter()
        .map(|c| (c.id, c.attempt))
        .collect();
    order.sort_unstable();
    assert_eq!(order, [(failed, 2), (cancelled, 1)], "both due now");
    assert!(!jobq.retry(failed).await.unwrap(), "processing");
    assert!(!jobq.retry(i64::MAX).await.unwrap(), "no row");
}

/// Pause and resume say whether they changed anything; the paused queues
/// are listed by name; the queue name is checked as enqueue checks it.
async fn pause_and_resume_say_whether_they_changed_anything(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("pause");
    let paused = || async { jobq.paused_queues().await.unwrap().contains(&queue) };
    assert!(!jobq.resume(&queue).await.unwrap(), "never paused");
    assert!(jobq.pause(&queue).await.unwrap());
    assert!(paused().await);
    assert!(!jobq.pause(&queue).await.unwrap(), "paused already");
    assert!(jobq.resume(&queue).await.unwrap());
    assert!(!paused().await);
    assert!(!jobq.resume(&queue).await.unwrap(), "resumed already");
    assert!(jobq.pause(&queue).await.unwrap(), "paused again");
    assert!(paused().await);
    assert!(jobq.resume(&queue).await.unwrap());
    assert!(!paused().await);
    jobq_tests::assert_contains(&jobq_tests::invalid(jobq.pause("").await), &["queue"]);
    jobq_tests::assert_contains(&jobq_tests::invalid(jobq.pause("a\0b").await), &["queue"]);
    let long = "q".repeat(jobq_runtime::MAX_QUEUE_LEN + 1);
    jobq_tests::assert_contains(&jobq_tests::invalid(jobq.resume(&long).await), &["queue"]);
}

contract!(
    a_cancel_ends_a_pending_or_processing_row_and_names_the_claim_it_ended,
    a_retry_revives_a_failed_or_cancelled_row_with_one_more_attempt,
    pause_and_resume_say_whether_they_changed_anything,
);
