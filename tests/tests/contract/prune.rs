//! Prune: deletes the finished rows of a kind — `done` and `cancelled`,
//! or `failed` — that finished more than the retention ago, and nothing
//! else; a pruned row's key is free again.
//!
//! Prune works on every queue of the (shared) table, so the rows are
//! checked one by one and the counts it returns as "at least".

use super::*;

async fn exists(jobq: &Jobq, id: i64) -> bool {
    jobq.job(id).await.unwrap().is_some()
}

async fn prune_deletes_finished_rows_past_the_retention_by_kind(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("prune");
    let half_hour = Duration::from_secs(1800);
    let key = format!("key-{queue}");
    let keyed = row_with(0, Enqueue::new().queue(&queue).idempotency_key(&key));
    let old_done = enqueue_row(&jobq, &keyed).await;
    let old_failed = enqueue(&jobq, &queue, 1).await;
    let new_done = enqueue(&jobq, &queue, 2).await;
    let new_failed = enqueue(&jobq, &queue, 3).await;
    let processing = enqueue(&jobq, &queue, 4).await;
    let claimed = claim(&jobq, &queue, 5, "w").await;
    assert_eq!(claimed.len(), 5);
    let by_id = |id| fence(claimed.iter().find(|c| c.id == id).unwrap());
    let done = __store::complete(&jobq, &[by_id(old_done), by_id(new_done)]).await;
    assert_eq!(done.unwrap(), 2);
    for id in [old_failed, new_failed] {
        let fail = __store::transition(&jobq, by_id(id), true, Duration::ZERO, false, None);
        assert!(fail.await.unwrap());
    }
    let old_cancelled = enqueue(&jobq, &queue, 5).await;
    assert_eq!(
        __store::cancel(&jobq, old_cancelled).await.unwrap(),
        (true, vec![])
    );
    let pending = enqueue(&jobq, &queue, 6).await;
    for id in [old_done, old_failed, old_cancelled] {
        finished_an_hour_ago(&jobq, id).await;
    }

    let pruned = jobq.prune_finished(half_hour).await.unwrap();
    assert!(pruned >= 2, "at least this test's two rows: {pruned}");
    for (id, kept, what) in [
        (old_done, false, "done an hour ago"),
        (old_cancelled, false, "cancelled an hour ago"),
        (new_done, true, "done just now"),
        (
            old_failed,
            true,
            "failed an hour ago, not pruned with the finished",
        ),
        (new_failed, true, "failed just now"),
        (processing, true, "processing"),
        (pending, true, "pending"),
    ] {
        assert_eq!(exists(&jobq, id).await, kept, "{what}");
    }

    assert!(jobq.prune_failed(half_hour).await.unwrap() >= 1);
    for (id, kept) in [(old_failed, false), (new_failed, true), (new_done, true)] {
        assert_eq!(exists(&jobq, id).await, kept, "row {id}");
    }
    let still_held = claimed.iter().find(|c| c.id == processing).unwrap();
    assert_held(&jobq, still_held, "w", LEASE).await;
    assert_eq!(info(&jobq, pending).await.status, JobStatus::Pending);

    // The pruned row's key is free again.
    let again = __store::enqueue(&jobq, &keyed).await.unwrap();
    assert!(!again.duplicate && again.id != old_done, "{again:?}");
}

contract!(prune_deletes_finished_rows_past_the_retention_by_kind);
