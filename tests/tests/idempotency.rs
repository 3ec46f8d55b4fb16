//! Idempotency keys and queue names compare the same way on every backend:
//! byte for byte, trailing spaces included, and a key stays usable however
//! often it is enqueued again.

use std::time::Duration;

use jobq_runtime::{Enqueue, JobContext, JobStatus, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, start_worker, unique_queue, wait_for_status};

#[job(name = "idem_noop")]
async fn noop(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

async fn a_key_with_a_trailing_space_is_another_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idem-space");
    let key = format!("{queue}:user");
    let on = |key: String| Enqueue::new().queue(&queue).idempotency_key(key);
    let bare = jobq
        .enqueue_with(Noop::new(1), on(key.clone()))
        .await
        .unwrap();
    let spaced = jobq
        .enqueue_with(Noop::new(2), on(format!("{key} ")))
        .await
        .unwrap();
    let two = jobq
        .enqueue_with(Noop::new(3), on(format!("{key}  ")))
        .await
        .unwrap();
    assert!(!spaced.duplicate && !two.duplicate, "{spaced:?} {two:?}");
    assert!(bare.id != spaced.id && spaced.id != two.id && bare.id != two.id);
    let row = jobq.job(spaced.id).await.unwrap().unwrap();
    assert_eq!(row.idempotency_key, Some(format!("{key} ")));
    // Each is still its own key's row.
    let again = jobq
        .enqueue_with(Noop::new(4), on(format!("{key} ")))
        .await
        .unwrap();
    assert!(again.duplicate && again.id == spaced.id, "{again:?}");
    let batch = jobq
        .enqueue_many_with([
            (Noop::new(5), on(key.clone())),
            (Noop::new(6), on(format!("{key}  "))),
        ])
        .await
        .unwrap();
    assert_eq!((batch[0].id, batch[1].id), (bare.id, two.id));
}

async fn a_queue_name_with_a_trailing_space_is_another_queue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idem-q");
    let spaced = format!("{queue} ");
    let other = jobq
        .enqueue_with(Noop::new(1), Enqueue::new().queue(&spaced))
        .await
        .unwrap();
    let own = jobq
        .enqueue_with(Noop::new(2), Enqueue::new().queue(&queue))
        .await
        .unwrap();
    let handle = start_worker(&jobq, &queue, 4);
    wait_for_status(&jobq, own.id, JobStatus::Done, Duration::from_secs(10)).await;
    handle.shutdown(Duration::from_secs(5)).await.unwrap();
    let row = jobq.job(other.id).await.unwrap().unwrap();
    assert_eq!(
        row.status,
        JobStatus::Pending,
        "a job of queue `{spaced}` is not run by a worker of `{queue}`"
    );
    assert_eq!(row.queue, spaced);
    assert_eq!(jobq.counts(&spaced).await.unwrap().pending, 1);
    assert_eq!(jobq.counts(&queue).await.unwrap().done, 1);
}

async fn a_key_enqueued_more_than_two_billion_times_is_still_a_duplicate(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idem-hot");
    let key = format!("{queue}:hot");
    let on = || Enqueue::new().queue(&queue).idempotency_key(&key);
    let first = jobq.enqueue_with(Noop::new(1), on()).await.unwrap();
    // As after 2³¹ − 1 duplicates.
    Db::of(&jobq)
        .execute(
            "UPDATE jobq_jobs SET dedupe_hits = 2147483647 WHERE id = ?",
            &[Arg::Int(first.id)],
        )
        .await
        .unwrap();
    for _ in 0..3 {
        let again = jobq.enqueue_with(Noop::new(2), on()).await.unwrap();
        assert!(again.duplicate && again.id == first.id, "{again:?}");
    }
    let batch = jobq
        .enqueue_many_with([(Noop::new(3), on()), (Noop::new(4), on())])
        .await
        .unwrap();
    assert!(
        batch.iter().all(|e| e.duplicate && e.id == first.id),
        "{batch:?}"
    );
}

jobq_tests::on_every_backend!(
    a_key_with_a_trailing_space_is_another_key,
    a_queue_name_with_a_trailing_space_is_another_queue,
    a_key_enqueued_more_than_two_billion_times_is_still_a_duplicate,
);
