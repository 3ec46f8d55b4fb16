//! Retrying: the policy's schedule, exhausted attempts, snoozes, jobs no worker knows.

use super::*;

#[job(name = "conf_flaky", max_attempts = 5, retry = ["300ms", "600ms"])]
async fn flaky(ctx: JobContext, recorder: State<Recorder>, fail_until: u32) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() <= fail_until {
        return Err(format!("flaky failure on attempt {}", ctx.attempt()));
    }
    Ok(())
}

#[job(name = "conf_always_fails", max_attempts = 3, retry = ["10ms"])]
async fn always_fails(ctx: JobContext, recorder: State<Recorder>) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    Err(format!("attempt {} failed", ctx.attempt()))
}

#[job(name = "conf_snooze", max_attempts = 2)]
async fn snoozer(ctx: JobContext, recorder: State<Recorder>, times: usize) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    if recorder.runs(ctx.id()).len() <= times {
        return Err(JobError::snooze(Duration::from_millis(20)));
    }
    Ok(())
}

/// A job type with no handler anywhere: what a newer deploy might enqueue.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct FromTheFuture {
    n: u64,
}

impl Job for FromTheFuture {
    const NAME: &'static str = "conf_from_the_future";
    const MAX_ATTEMPTS: u32 = 3;
}

async fn failed_attempts_retry_on_the_policy_schedule(db: TestDb) {
    let (info, recorder) = run_alone(&db, "retry", Flaky::new(2), JobStatus::Done).await;
    let id = info.id;
    let runs = recorder.runs(id);
    assert_eq!(
        runs.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(info.attempts, 3);
    assert_eq!(
        info.last_error.as_deref(),
        Some("flaky failure on attempt 2")
    );
    // retry = ["300ms", "600ms"]: the gaps follow the list (poll 50 ms, tolerance 250 ms).
    for (gap, want) in [
        (runs[1].at - runs[0].at, 300),
        (runs[2].at - runs[1].at, 600),
    ] {
        let want = Duration::from_millis(want);
        assert!(
            gap >= want - Duration::from_millis(20),
            "gap {gap:?} shorter than {want:?}"
        );
        assert!(
            gap <= want + Duration::from_millis(250),
            "gap {gap:?} much longer than {want:?}"
        );
    }
}

async fn exhausted_attempts_mark_the_job_failed_with_the_last_error(db: TestDb) {
    let (info, recorder) = run_alone(&db, "exhaust", AlwaysFails::new(), JobStatus::Failed).await;
    let id = info.id;
    assert_eq!(info.attempts, 3);
    assert_eq!(recorder.runs(id).len(), 3);
    let error = info.last_error.unwrap();
    assert!(error.starts_with("attempt 3 failed"), "{error}");
    assert!(error.contains("attempts exhausted"), "{error}");
    assert!(info.finished_at.is_some());
}

async fn snooze_does_not_use_up_an_attempt(db: TestDb) {
    // max_attempts = 2, snoozed 3 times: only possible if snoozes do not count.
    let (info, recorder) = run_alone(&db, "snooze", Snoozer::new(3), JobStatus::Done).await;
    let id = info.id;
    let attempts: Vec<u32> = recorder.runs(id).iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 1, 1, 1]);
    assert_eq!(info.attempts, 1);
}

async fn an_unknown_job_name_is_retried_with_a_clear_error(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "unknown").await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = enqueue(&jobq, FromTheFuture { n: 1 }, on(&queue)).await;
    let good = enqueue(&jobq, Record::new(5), on(&queue)).await;
    wait_for_status(&jobq, good, JobStatus::Done, LONG).await;
    wait_until("the unknown job was attempted", LONG, || async {
        jobq.job(id).await.unwrap().unwrap().last_error.is_some()
    })
    .await;
    stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        info.status,
        JobStatus::Pending,
        "kept for a worker that knows it"
    );
    assert!(
        info.run_at > chrono::Utc::now() - chrono::Duration::milliseconds(100),
        "scheduled with backoff"
    );
    let error = info.last_error.unwrap();
    assert!(
        error.contains("unknown job `conf_from_the_future`"),
        "{error}"
    );
}

conformance!(
    failed_attempts_retry_on_the_policy_schedule,
    exhausted_attempts_mark_the_job_failed_with_the_last_error,
    snooze_does_not_use_up_an_attempt,
    an_unknown_job_name_is_retried_with_a_clear_error,
);
