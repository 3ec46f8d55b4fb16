//! Claim: due `pending` rows of one queue only, in priority, `run_at`, id
//! order, at most the limit, each under a token of its own; never before a
//! row's time; and never waiting for rows another transaction holds.

use super::*;

/// A claim takes the queue's due `pending` rows and nothing else: not a
/// row of another queue, not one due later, not one already claimed. Each
/// claimed row is `processing` under its own token, its attempt counted,
/// its lease from the claim; the claim returns the row's columns.
async fn a_claim_takes_only_due_pending_rows_of_its_queue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claim-due");
    let key = format!("key-{queue}");
    let keyed = enqueue_row(
        &jobq,
        &row_with(
            1,
            Enqueue::new()
                .queue(&queue)
                .max_attempts(4)
                .idempotency_key(&key),
        ),
    )
    .await;
    let plain = enqueue(&jobq, &queue, 2).await;
    let later = Enqueue::new()
        .queue(&queue)
        .delay(Duration::from_secs(3600));
    let delayed = enqueue_row(&jobq, &row_with(3, later)).await;
    let other = enqueue(&jobq, &unique_queue("claim-due-other"), 4).await;

    let first = claim(&jobq, &queue, 1, "w1").await;
    assert_eq!(ids(&first), [keyed]);
    let rest = __store::claim_rows(&jobq, &queue, 10, Duration::from_secs(7), "w2")
        .await
        .unwrap();
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        (rest[0].job_name.as_str(), rest[0].payload.as_str()),
        (JOB, r#"{"n":2}"#)
    );
    assert_eq!(rest[0].idempotency_key, None);
    let second = rest[0].claim;
    assert_eq!(
        (second.id, second.attempt, second.max_attempts),
        (plain, 1, 3)
    );
    assert_eq!((first[0].attempt, first[0].max_attempts), (1, 4));
    assert_ne!(first[0].token, second.token);
    assert!(claim(&jobq, &queue, 10, "w3").await.is_empty());

    assert_held(&jobq, &first[0], "w1", LEASE).await;
    assert_held(&jobq, &second, "w2", Duration::from_secs(7)).await;
    let (waiting, token) = stored(&jobq, delayed).await;
    assert_eq!(
        (waiting.status, waiting.attempts, token),
        (JobStatus::Pending, 0, None)
    );
    assert_eq!(info(&jobq, other).await.status, JobStatus::Pending);
}

/// Claimed one at a time, rows come by priority (smaller first), then
/// `run_at`, then id; a row due later comes never, whatever its priority.
async fn claims_take_priority_then_run_at_then_id(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claim-order");
    let now = chrono::Utc::now();
    // (n, seconds ago, priority), enqueued in this order.
    let plan = [
        (1, 1, 5),
        (2, 3, 5),
        (3, 1, 0),
        (4, 2, 0),
        (5, 5, -1),
        (6, 2, 0),
    ];
    let mut id_of = std::collections::HashMap::new();
    for (n, secs_ago, priority) in plan {
        let at = now - chrono::TimeDelta::seconds(secs_ago);
        let options = Enqueue::new().queue(&queue).run_at(at).priority(priority);
        id_of.insert(enqueue_row(&jobq, &row_with(n, options)).await, n);
    }
    let urgent_but_later = Enqueue::new()
        .queue(&queue)
        .priority(-10)
        .delay(Duration::from_secs(3600));
    enqueue_row(&jobq, &row_with(7, urgent_but_later)).await;

    let mut order = Vec::new();
    while let Some(claimed) = claim(&jobq, &queue, 1, "w").await.pop() {
        order.push(id_of[&claimed.id]);
    }
    assert_eq!(order, [5, 4, 6, 3, 2, 1]);
}

/// A claim takes at most its limit, the first rows in claim order, and
/// returns them in that order.
async fn a_batch_claim_takes_the_first_rows_in_claim_order_up_to_its_limit(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claim-batch");
    let now = chrono::Utc::now();
    let mut rows = Vec::new();
    for (n, (secs_ago, priority)) in [(1, 5), (1, 0), (2, 0), (3, 1), (4, 1)]
        .into_iter()
        .enumerate()
    {
        let at = now - chrono::TimeDelta::seconds(secs_ago);
        let options = Enqueue::new().queue(&queue).run_at(at).priority(priority);
        rows.push(enqueue_row(&jobq, &row_with(n as i64, options)).await);
    }
    // (priority, run_at, id): the two priority-0 rows, the earlier first,
    // then the priority-1 ones, the earlier first; the priority-5 one last.
    let first = claim(&jobq, &queue, 3, "w").await;
    assert_eq!(ids(&first), [rows[2], rows[1], rows[4]]);
    let second = claim(&jobq, &queue, 3, "w").await;
    assert_eq!(ids(&second), [rows[3], rows[0]]);
    assert!(claim(&jobq, &queue, 3, "w").await.is_empty());
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.processing), (0, 5));
}

/// A row due later is not claimed before its time, and is claimed once it
/// has come: by the database's clock, at or after its `run_at`.
async fn a_delayed_job_is_not_claimed_before_its_time(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claim-delay");
    let in_queue = || Enqueue::new().queue(&queue);
    let soon = enqueue_row(
        &jobq,
        &row_with(1, in_queue().delay(Duration::from_millis(200))),
    )
    .await;
    let later = enqueue_row(
        &jobq,
        &row_with(2, in_queue().delay(Duration::from_secs(3600))),
    )
    .await;
    let at = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let scheduled = enqueue_row(&jobq, &row_with(3, in_queue().run_at(at))).await;
    let waiting = info(&jobq, soon).await;
    let due_at = waiting.run_at;
    assert_eq!(
        due_at - waiting.created_at,
        chrono::TimeDelta::milliseconds(200)
    );
    assert!(claim(&jobq, &queue, 10, "w").await.is_empty());

    let claimed = std::sync::Mutex::new(Vec::new());
    jobq_tests::wait_until(
        "the delayed row is claimed",
        Duration::from_secs(5),
        || async {
            let more = claim(&jobq, &queue, 10, "w").await;
            let mut claimed = claimed.lock().unwrap();
            claimed.extend(more);
            !claimed.is_empty()
        },
    )
    .await;
    let claimed = claimed.into_inner().unwrap();
    assert_eq!(ids(&claimed), [soon]);
    let row = info(&jobq, soon).await;
    assert!(
        row.claimed_at.unwrap() >= due_at,
        "claimed at {:?}, due at {due_at}",
        row.claimed_at
    );
    for id in [later, scheduled] {
        let (row, token) = stored(&jobq, id).await;
        assert_eq!(
            (row.status, row.attempts, token),
            (JobStatus::Pending, 0, None)
        );
    }
}

/// A claim never waits for rows another transaction holds: while a claim
/// of 4 rows is open, the next claim takes the next rows at once (a
/// locking read that sorted instead of reading the claim index would lock
/// every row it scanned: the next claim would get nothing); the held rows
/// stay `pending`, and are claimed once released.
async fn a_claim_skips_rows_another_open_claim_holds_without_waiting(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("claim-skip");
    let rows = (0..10).map(|n| row(&queue, n)).collect();
    let ids_in_order: Vec<i64> = __store::enqueue_many(&jobq, rows)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    // The backend's own claim, its transaction left open (on SQLite, which
    // has no row locks, a read of the same rows: see `Tx::claim`).
    let mut holder = Db::of(&jobq).begin().await.unwrap();
    let held = holder.claim(&queue, 4).await.unwrap();
    assert_eq!(held, ids_in_order[..4]);

    let next = without_waiting("the claim", claim(&jobq, &queue, 4, "second")).await;
    match db.backend() {
        // No row locks: the reader holds nothing a claim waits for.
        Backend::Sqlite => assert_eq!(ids(&next), ids_in_order[..4]),
        _ => assert_eq!(ids(&next), ids_in_order[4..8], "the next rows, at once"),
    }
    assert!(next.iter().all(|c| c.attempt == 1), "{next:?}");
    let rest = claim(&jobq, &queue, 10, "second").await;
    holder.rollback().await.unwrap();

    let counts = jobq.counts(&queue).await.unwrap();
    if db.backend() == Backend::Sqlite {
        assert_eq!(ids(&rest), ids_in_order[4..]);
        assert_eq!((counts.pending, counts.processing), (0, 10));
        return;
    }
    assert_eq!(ids(&rest), ids_in_order[8..]);
    assert_eq!(
        (counts.pending, counts.processing),
        (4, 6),
        "the held rows stay pending"
    );
    let released = claim(&jobq, &queue, 10, "third").await;
    assert_eq!(
        ids(&released),
        held,
        "the released rows are claimed, in order"
    );
    assert!(released.iter().all(|c| c.attempt == 1), "{released:?}");
}

contract!(
    a_claim_takes_only_due_pending_rows_of_its_queue,
    claims_take_priority_then_run_at_then_id,
    a_batch_claim_takes_the_first_rows_in_claim_order_up_to_its_limit,
    a_delayed_job_is_not_claimed_before_its_time,
    a_claim_skips_rows_another_open_claim_holds_without_waiting,
);
