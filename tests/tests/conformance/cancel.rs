//! Cancelling and retrying by hand, also of a running job.

use super::*;

async fn cancel_stops_a_job_and_retry_revives_it(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "cancel").await;
    let id = enqueue(
        &jobq,
        Record::new(1),
        on(&queue).delay(Duration::from_secs(3600)),
    )
    .await;
    assert!(jobq.cancel(id).await.unwrap());
    assert!(!jobq.cancel(id).await.unwrap(), "already cancelled");
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Cancelled);
    assert!(jobq.retry(id).await.unwrap());
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert!(!jobq.retry(id).await.unwrap(), "a done job is not retried");
}

async fn cancelling_a_running_job_stops_it_without_settling(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "cancelrun").await;
    let handle = worker(&jobq, &queue, 1, &recorder)
        .heartbeat_interval(Duration::from_millis(100))
        .build()
        .unwrap()
        .start();
    let id = enqueue(&jobq, Long::new(60_000), on(&queue)).await;
    wait_until("the job started", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    assert!(jobq.cancel(id).await.unwrap());
    wait_until("the heartbeat stopped the attempt", LONG, || async {
        handle.held_jobs() == 0
    })
    .await;
    let next = enqueue(&jobq, Record::new(1), on(&queue)).await;
    wait_for_status(&jobq, next, JobStatus::Done, LONG).await;
    stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        info.status,
        JobStatus::Cancelled,
        "not overwritten by a settle"
    );
    assert_eq!(recorder.runs(id).len(), 1);
}

conformance!(
    cancel_stops_a_job_and_retry_revives_it,
    cancelling_a_running_job_stops_it_without_settling,
);
