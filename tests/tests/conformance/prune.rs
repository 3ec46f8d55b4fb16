//! Pruning finished and failed rows past the retention.

use super::*;

/// Moves a finished row's times an hour back, as if it finished long ago
/// (`finished_at`, and `run_at`, which is the same time on a finished row).
async fn finished_an_hour_ago(jobq: &Jobq, id: i64) {
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        Some(info.run_at),
        info.finished_at,
        "a finished row's run_at is when it finished"
    );
    let db = jobq_tests::sql::Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_jobs SET finished_at = finished_at - INTERVAL 1 HOUR, run_at = run_at - INTERVAL 1 HOUR WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - interval '1 hour', run_at = run_at - interval '1 hour' WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - 3600000000, run_at = run_at - 3600000000 WHERE id = ?",
    );
    assert_eq!(db.execute(sql, &[id.into()]).await.unwrap(), 1);
}

/// Pruning deletes finished rows past the retention, by kind, and nothing
/// else: not a row finished within it, not a pending one, not a failed one
/// unless failed rows are pruned. (The table is shared with other tests, so
/// rows are checked one by one, not counted.)
async fn prune_deletes_finished_rows_past_the_retention_and_nothing_else(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "prune").await;
    let old_done = enqueue(&jobq, Record::new(0), on(&queue)).await;
    let new_done = enqueue(&jobq, Record::new(1), on(&queue)).await;
    let old_failed = enqueue(&jobq, Permanent::new(), on(&queue)).await;
    let later = on(&queue).delay(Duration::from_secs(3600));
    let old_cancelled = enqueue(&jobq, Record::new(2), later.clone()).await;
    let pending = enqueue(&jobq, Record::new(3), later).await;
    assert!(jobq.cancel(old_cancelled).await.unwrap());
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    wait_for_status(&jobq, old_done, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, new_done, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, old_failed, JobStatus::Failed, LONG).await;
    stop(handle).await;
    for id in [old_done, old_failed, old_cancelled] {
        finished_an_hour_ago(&jobq, id).await;
    }
    let exists = |id: i64| {
        let jobq = jobq.clone();
        async move { jobq.job(id).await.unwrap().is_some() }
    };

    let deleted = jobq
        .prune_finished(Duration::from_secs(1800))
        .await
        .unwrap();
    assert!(deleted >= 2, "at least this test's two rows: {deleted}");
    assert!(!exists(old_done).await, "done an hour ago: pruned");
    assert!(
        !exists(old_cancelled).await,
        "cancelled an hour ago: pruned"
    );
    assert!(exists(new_done).await, "done just now: kept");
    assert!(
        exists(old_failed).await,
        "failed rows are not pruned with the finished ones"
    );
    assert!(exists(pending).await, "pending: kept");

    assert!(jobq.prune_failed(Duration::from_secs(1800)).await.unwrap() >= 1);
    assert!(!exists(old_failed).await, "failed an hour ago: pruned");
    assert!(exists(new_done).await && exists(pending).await);

    // A pruned job's key is free again.
    let key = format!("prune-key-{queue}");
    let first = jobq
        .enqueue_with(Record::new(4), on(&queue).idempotency_key(key.clone()))
        .await
        .unwrap();
    assert!(jobq.cancel(first.id).await.unwrap());
    finished_an_hour_ago(&jobq, first.id).await;
    jobq.prune_finished(Duration::from_secs(1800))
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Record::new(4), on(&queue).idempotency_key(key))
        .await
        .unwrap();
    assert!(!again.duplicate && again.id != first.id, "{again:?}");
}

conformance!(prune_deletes_finished_rows_past_the_retention_and_nothing_else,);
