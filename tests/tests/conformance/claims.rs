//! Claiming: every job runs once, in priority then `run_at` order, not before its time.

use super::*;

async fn a_worker_drains_enqueued_jobs_to_done(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "drain").await;
    let mut ids = Vec::new();
    for n in 0..50 {
        ids.push(enqueue(&jobq, Record::new(n), on(&queue)).await);
    }
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_for_done(&jobq, &queue, 50, LONG).await;
    stop(handle).await;
    for id in ids {
        assert_eq!(recorder.runs(id).len(), 1, "job {id} ran once");
        let info = jobq.job(id).await.unwrap().unwrap();
        assert_eq!(info.status, JobStatus::Done);
        assert_eq!(info.attempts, 1);
        assert!(info.finished_at.is_some());
        assert_eq!(info.last_error, None);
        assert!(info.claimed_by.is_some(), "the row names who ran it");
    }
}

async fn eight_workers_drain_every_job_exactly_once(db: TestDb) {
    let total: u64 = match db.backend() {
        jobq_runtime::Backend::Sqlite => 2_000,
        _ => 10_000,
    };
    let (jobq, queue, recorder) = fixture(&db, "eight").await;
    let mut ids = Vec::new();
    for chunk in (0..total).collect::<Vec<_>>().chunks(1000) {
        let batch = chunk.iter().map(|n| (Record::new(*n), on(&queue)));
        ids.extend(
            jobq.enqueue_many_with(batch)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.id),
        );
    }
    let mut handles = Vec::new();
    for _ in 0..8 {
        let own = Jobq::connect_with(db.url(), 4).await.unwrap();
        handles.push(worker(&own, &queue, 8, &recorder).build().unwrap().start());
    }
    wait_for_done(&jobq, &queue, total, Duration::from_secs(120)).await;
    for handle in handles {
        stop(handle).await;
    }
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.done, total);
    assert_eq!(counts.processing + counts.pending + counts.failed, 0);
    let repeated: Vec<i64> = recorder
        .repeated()
        .into_iter()
        .filter(|id| ids.contains(id))
        .collect();
    assert!(repeated.is_empty(), "jobs run more than once: {repeated:?}");
    for id in &ids {
        assert_eq!(recorder.runs(*id).len(), 1, "job {id} ran exactly once");
    }
}

async fn claims_follow_priority_then_run_at(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "order").await;
    let low = enqueue(&jobq, Record::new(0), on(&queue).priority(5)).await;
    let early = enqueue(
        &jobq,
        Record::new(1),
        on(&queue).run_at(chrono::Utc::now() - chrono::Duration::seconds(60)),
    )
    .await;
    let normal = enqueue(&jobq, Record::new(2), on(&queue)).await;
    let urgent = enqueue(&jobq, Record::new(3), on(&queue).priority(-5)).await;
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    wait_until("all four ran", LONG, || async { recorder.totals().0 == 4 }).await;
    stop(handle).await;
    let mut order: Vec<(Instant, i64)> = [low, early, normal, urgent]
        .iter()
        .map(|id| (recorder.runs(*id)[0].at, *id))
        .collect();
    order.sort();
    let order: Vec<i64> = order.into_iter().map(|(_, id)| id).collect();
    assert_eq!(order, vec![urgent, early, normal, low]);
}

/// Claims during a long drain may go on from where the previous claim
/// ended (MySQL/MariaDB does, to skip the index entries claims leave behind
/// until purge); a job that sorts before that point must still run soon,
/// not after the backlog.
async fn a_job_ahead_of_a_draining_backlog_runs_before_the_backlog_is_done(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "ahead").await;
    // 2,000 jobs of 3 ms on 4 slots: at least 1.5 s of draining.
    let backlog = enqueue_ids(
        &jobq,
        (0..2_000).map(|_| (Long::new(3), on(&queue).priority(5))),
    )
    .await;
    let handle = worker(&jobq, &queue, 4, &recorder).build().unwrap().start();
    wait_until("200 backlog jobs ran", LONG, || async {
        recorder.totals().0 >= 200
    })
    .await;
    let urgent = enqueue(&jobq, Record::new(0), on(&queue).priority(0)).await;
    let past = enqueue(
        &jobq,
        Record::new(1),
        on(&queue)
            .priority(5)
            .run_at(chrono::Utc::now() - chrono::Duration::hours(1)),
    )
    .await;
    wait_until("every job ran", LONG, || async {
        recorder.totals().0 == backlog.len() + 2
    })
    .await;
    stop(handle).await;
    let last_of_backlog = backlog
        .iter()
        .map(|id| recorder.runs(*id)[0].at)
        .max()
        .unwrap();
    for (what, id) in [("priority 0", urgent), ("an hour-old run_at", past)] {
        let ran = recorder.runs(id)[0].at;
        let after = backlog
            .iter()
            .filter(|id| recorder.runs(**id)[0].at > ran)
            .count();
        assert!(
            ran < last_of_backlog && after > 100,
            "the job with {what} ran before only {after} of the backlog's jobs"
        );
    }
}

async fn a_delayed_job_waits_for_its_run_at(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "delay").await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let start = Instant::now();
    let id = enqueue(
        &jobq,
        Record::new(0),
        on(&queue).delay(Duration::from_millis(700)),
    )
    .await;
    wait_until("the delayed job ran", LONG, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    let ran_after = recorder.runs(id)[0].at - start;
    stop(handle).await;
    let window = Duration::from_millis(650)..Duration::from_millis(2500);
    assert_took(ran_after, window, "the delayed job's wait");
}

conformance!(
    a_worker_drains_enqueued_jobs_to_done,
    eight_workers_drain_every_job_exactly_once,
    claims_follow_priority_then_run_at,
    a_job_ahead_of_a_draining_backlog_runs_before_the_backlog_is_done,
    a_delayed_job_waits_for_its_run_at,
);
