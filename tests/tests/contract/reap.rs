//! Reap: `processing` rows whose lease ran out go back to `pending`
//! (keeping their place in line), or to `failed` when their attempts are
//! used up, with the error saying whose lease expired; at most the limit,
//! of one queue, and no row whose lease still runs.

use super::*;

/// The error a reap writes for attempt `attempt` of `worker`.
fn expired_error(attempt: u32, worker: &str) -> String {
    format!(
        "lease expired during attempt {attempt}: worker {worker} stopped renewing it (crashed, killed or stalled)"
    )
}

/// An expired row goes back to `pending`, its attempt counted, due since
/// it was enqueued (an orphan keeps its place in line); the next claim
/// starts its next attempt. A row whose lease runs is left alone.
async fn an_expired_lease_goes_back_to_pending_in_its_place_in_line(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("reap-pending");
    let expired = enqueue(&jobq, &queue, 1).await;
    let live = enqueue(&jobq, &queue, 2).await;
    let claimed = claim(&jobq, &queue, 2, "gone:1").await;
    assert_eq!(ids(&claimed), [expired, live]);
    expire(&jobq, expired).await;

    assert_eq!(__store::reap(&jobq, &queue, 10).await.unwrap(), 1);
    let (row, token) = stored(&jobq, expired).await;
    assert_eq!(
        (row.status, row.attempts, token),
        (JobStatus::Pending, 1, None)
    );
    assert_eq!(row.run_at, row.created_at, "due since it was enqueued");
    assert_eq!(row.last_error, Some(expired_error(1, "gone:1")));
    assert_eq!(row.finished_at, None);
    assert_held(&jobq, &claimed[1], "gone:1", LEASE).await;
    let lost = __store::heartbeat(&jobq, &[fence(&claimed[0])], LEASE)
        .await
        .unwrap();
    assert_eq!(
        lost,
        [fence(&claimed[0])],
        "the expired claim holds nothing"
    );

    let again = claim_only(&jobq, &queue, expired, "w2").await;
    assert_eq!(again.attempt, 2);
    assert_eq!(__store::reap(&jobq, &queue, 10).await.unwrap(), 0);
}

/// An expired row whose attempts are used up is failed for good, finished
/// when it was reaped.
async fn an_expired_last_attempt_fails_the_row(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("reap-failed");
    let id = enqueue_row(
        &jobq,
        &row_with(1, Enqueue::new().queue(&queue).max_attempts(1)),
    )
    .await;
    claim_only(&jobq, &queue, id, "w1").await;
    expire(&jobq, id).await;
    assert_eq!(__store::reap(&jobq, &queue, 10).await.unwrap(), 1);
    let row = assert_finished(&jobq, id, JobStatus::Failed).await;
    assert_eq!(
        (row.attempts, row.last_error),
        (1, Some(expired_error(1, "w1")))
    );
    assert!(claim(&jobq, &queue, 10, "w").await.is_empty());
}

/// A reap returns at most its limit, of its own queue only.
async fn a_reap_takes_at_most_its_limit_of_its_own_queue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("reap-limit");
    let other = unique_queue("reap-limit-other");
    for n in 0..3 {
        enqueue(&jobq, &queue, n).await;
    }
    let elsewhere = enqueue(&jobq, &other, 3).await;
    let claimed = [
        claim(&jobq, &queue, 3, "w").await,
        claim(&jobq, &other, 1, "w").await,
    ]
    .concat();
    for c in &claimed {
        expire(&jobq, c.id).await;
    }
    assert_eq!(__store::reap(&jobq, &queue, 2).await.unwrap(), 2);
    assert_eq!(__store::reap(&jobq, &queue, 2).await.unwrap(), 1);
    assert_eq!(__store::reap(&jobq, &queue, 2).await.unwrap(), 0);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.processing), (3, 0));
    let (row, token) = stored(&jobq, elsewhere).await;
    assert_eq!(
        (row.status, token),
        (JobStatus::Processing, Some(claimed[3].token))
    );
}

contract!(
    an_expired_lease_goes_back_to_pending_in_its_place_in_line,
    an_expired_last_attempt_fails_the_row,
    a_reap_takes_at_most_its_limit_of_its_own_queue,
);
