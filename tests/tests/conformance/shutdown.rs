//! Shutdown: unfinished and claimed-ahead jobs go back to `pending`, uncounted, by the deadline.

use super::*;

async fn shutdown_releases_unfinished_jobs_to_pending_by_the_deadline(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "shutdown").await;
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    let short = enqueue(&jobq, Record::new(0), on(&queue)).await;
    let mut long = Vec::new();
    for _ in 0..3 {
        long.push(enqueue(&jobq, Long::new(60_000), on(&queue)).await);
    }
    wait_until("all four started", LONG, || async {
        recorder.totals().0 == 4
    })
    .await;
    let started = Instant::now();
    let deadline = Duration::from_millis(300);
    handle.shutdown(deadline).await.unwrap();
    let took = started.elapsed();
    // Running jobs get the deadline less the final writes' share; the
    // shutdown returns by the deadline (plus a loaded machine's second).
    let jobs_time = deadline - jobq_runtime::SHUTDOWN_FINAL_WRITES.min(deadline / 2);
    assert_took(
        took,
        jobs_time - Duration::from_millis(10)..deadline + Duration::from_secs(1),
        "the shutdown, which lets jobs run until its deadline less the final writes' share, then returns by its deadline",
    );
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.processing, 0, "{counts:?}");
    assert_eq!(
        jobq.job(short).await.unwrap().unwrap().status,
        JobStatus::Done
    );
    for id in long {
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Pending);
        assert_eq!(info.attempts, 0, "the interrupted attempt is not counted");
    }
}

/// Short jobs are claimed ahead of free slots; a shutdown in the middle of a
/// drain hands those back to `pending` without counting an attempt, and
/// nothing runs twice or stays `processing`.
async fn shutdown_mid_drain_hands_back_jobs_claimed_ahead_uncounted(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "ahead").await;
    let total = 3000;
    let ids = enqueue_ids(&jobq, (0..total).map(|n| (Record::new(n), on(&queue)))).await;
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_until("some jobs ran", LONG, || async {
        recorder.totals().0 >= 300
    })
    .await;
    stop(handle).await;

    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.processing, 0, "{counts:?}");
    assert_eq!(counts.done + counts.pending, total, "{counts:?}");
    assert!(
        recorder.repeated().is_empty(),
        "ran twice: {:?}",
        recorder.repeated()
    );
    assert_eq!(recorder.totals().0 as u64, counts.done, "{counts:?}");
    for id in ids {
        let job = jobq.job(id).await.unwrap().unwrap();
        let expected = if job.status == JobStatus::Done { 1 } else { 0 };
        assert_eq!(job.attempts, expected, "{job:?}");
    }
}

conformance!(
    shutdown_releases_unfinished_jobs_to_pending_by_the_deadline,
    shutdown_mid_drain_hands_back_jobs_claimed_ahead_uncounted,
);
