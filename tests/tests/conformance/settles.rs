//! Settling an attempt that cannot succeed: a permanent error, a panic, a timeout, a payload that does not decode.

use super::*;

#[job(name = "conf_panics", max_attempts = 1)]
async fn panics(ctx: JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    panic!("kaboom in job {}", ctx.id());
}

#[job(name = "conf_slow", timeout = "100ms", max_attempts = 1)]
async fn slow(ctx: JobContext, recorder: State<Recorder>) {
    recorder.record(ctx.id(), ctx.attempt());
    tokio::time::sleep(Duration::from_secs(30)).await;
}

/// Stored under `conf_record`'s name with a payload that does not fit it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WrongShape {
    n: String,
}

impl Job for WrongShape {
    const NAME: &'static str = "conf_record";
}

async fn a_permanent_error_fails_after_one_attempt(db: TestDb) {
    let (info, recorder) = run_alone(&db, "permanent", Permanent::new(), JobStatus::Failed).await;
    let id = info.id;
    assert_eq!(info.attempts, 1);
    assert_eq!(info.last_error.as_deref(), Some("no such user"));
    assert_eq!(recorder.runs(id).len(), 1);
}

async fn a_panic_is_a_failed_attempt_with_the_panic_message(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "panic").await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = enqueue(&jobq, Panics::new(), on(&queue)).await;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    // The worker survives: it runs the next job.
    let next = enqueue(&jobq, Record::new(1), on(&queue)).await;
    wait_for_status(&jobq, next, JobStatus::Done, LONG).await;
    stop(handle).await;
    let error = info.last_error.unwrap();
    // With where it panicked: this file, the panic's line.
    assert!(
        error.contains("handler panicked at tests/tests/conformance/")
            && error.contains(&format!(": kaboom in job {id} (attempt 1 of 1")),
        "{error}"
    );
}

async fn a_timeout_is_a_failed_attempt(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "timeout").await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let started = Instant::now();
    let id = enqueue(&jobq, Slow::new(), on(&queue)).await;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(handle).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let error = info.last_error.unwrap();
    assert!(error.contains("timed out after 100ms"), "{error}");
}

async fn a_payload_that_does_not_decode_fails_with_a_clear_message(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "badpayload").await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let bad = enqueue(&jobq, WrongShape { n: "x".into() }, on(&queue)).await;
    let good = enqueue(&jobq, Record::new(5), on(&queue)).await;
    let info = wait_for_status(&jobq, bad, JobStatus::Failed, LONG).await;
    wait_for_status(&jobq, good, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(info.attempts, 1, "not retried: retrying cannot fix it");
    let error = info.last_error.unwrap();
    assert_contains(
        &error,
        &[
            "payload of job `conf_record` does not deserialize",
            "invalid type",
        ],
    );
    assert!(recorder.runs(bad).is_empty());
}

conformance!(
    a_permanent_error_fails_after_one_attempt,
    a_panic_is_a_failed_attempt_with_the_panic_message,
    a_timeout_is_a_failed_attempt,
    a_payload_that_does_not_decode_fails_with_a_clear_message,
);
