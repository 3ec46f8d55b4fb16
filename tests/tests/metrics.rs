//! jobq's metrics, read from a recorder installed globally in this test
//! binary (its own binary: a process has one global recorder, and worker
//! tasks record from other threads). Each test labels its series with a
//! queue of its own; the few unlabelled or settle-labelled series are
//! shared by the tests running side by side, so those are checked as
//! "went up by at least".

use std::time::Duration;

use jobq_runtime::metrics::{
    ATTEMPTS, CLAIM_SECONDS, JOBS_CANCELLED, JOBS_CLAIMED, JOBS_ENQUEUED, JOBS_REAPED,
    QUEUE_WAIT_SECONDS, RUN_SECONDS, SETTLE_SECONDS, SETTLES_FENCED_OUT,
};
use jobq_runtime::{__store, Enqueue, JobContext, JobError, JobStatus, State, Worker, job};
use jobq_tests::metrics::{counter, histogram, install};
use jobq_tests::{Recorder, TestDb, fixture, on, stop, wait_for_status, wait_until};

const WAIT: Duration = Duration::from_secs(20);

/// Jobs whose attempt may finish, by id.
type Gates = jobq_tests::Gates<i64>;

/// Ends its attempt as `mode` says: `ok`; `retry_once` (fails its first
/// run, then succeeds); `snooze_once` (snoozes its first run, then
/// succeeds); `fail` (fails for good).
#[job(name = "metrics_outcomes", max_attempts = 3, retry = ["1ms"])]
async fn outcomes(
    ctx: &JobContext,
    recorder: State<Recorder>,
    mode: String,
) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    let first = recorder.runs(ctx.id()).len() == 1;
    match mode.as_str() {
        "retry_once" if first => Err(JobError::retry("first run fails")),
        "snooze_once" if first => Err(JobError::snooze(Duration::from_millis(1))),
        "fail" => Err(JobError::permanent("fails for good")),
        _ => Ok(()),
    }
}

/// Waits for its gate (or its cancellation), then succeeds.
#[job(name = "metrics_gated")]
async fn gated(ctx: &JobContext, recorder: State<Recorder>, gates: State<Gates>) {
    recorder.record(ctx.id(), ctx.attempt());
    tokio::select! {
        () = gates.wait(ctx.id()) => {}
        () = ctx.cancelled() => {}
    }
}

fn queue_label(queue: &str) -> [(&str, &str); 1] {
    [("queue", queue)]
}

/// An attempt's labels.
fn attempt<'a>(queue: &'a str, job: &'a str, outcome: &'a str) -> [(&'a str, &'a str); 3] {
    [("queue", queue), ("job", job), ("outcome", outcome)]
}

async fn each_outcome_of_an_attempt_is_counted_under_its_queue_job_and_outcome(db: TestDb) {
    install();
    let (jobq, queue, recorder) = fixture(&db, "metrics_outcomes").await;
    let job = "metrics_outcomes";
    let mut ids = Vec::new();
    for mode in ["ok", "retry_once", "snooze_once", "fail"] {
        let enqueued = jobq
            .enqueue_with(Outcomes::new(mode.into()), on(&queue))
            .await
            .unwrap();
        ids.push(enqueued.id);
    }
    // A duplicate of a key inserts nothing, and is not counted.
    let keyed = Enqueue::new()
        .queue(&queue)
        .idempotency_key(format!("once-{queue}"));
    let first = jobq
        .enqueue_with(Outcomes::new("ok".into()), keyed.clone())
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Outcomes::new("ok".into()), keyed)
        .await
        .unwrap();
    assert!(again.duplicate);
    ids.push(first.id);
    let enqueued = [("queue", queue.as_str()), ("job", job)];
    assert_eq!(counter(JOBS_ENQUEUED, &enqueued), 5);

    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 4)
        .state(recorder.clone())
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    for (id, status) in ids.iter().zip([
        JobStatus::Done,
        JobStatus::Done,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Done,
    ]) {
        wait_for_status(&jobq, *id, status, WAIT).await;
    }
    stop(worker).await;

    let outcome = |outcome| counter(ATTEMPTS, &attempt(&queue, job, outcome));
    assert_eq!(outcome("succeeded"), 4);
    assert_eq!(outcome("retried"), 1);
    assert_eq!(outcome("snoozed"), 1);
    assert_eq!(outcome("failed"), 1);
    assert_eq!(outcome("released"), 0);
    assert_eq!(outcome("lease_lost"), 0);
    let runs = recorder.totals().1;
    assert_eq!(runs, 7);
    assert_eq!(counter(JOBS_CLAIMED, &queue_label(&queue)), 7);
    let run_times = histogram(RUN_SECONDS, &enqueued);
    assert_eq!(run_times.len(), 7, "{run_times:?}");
    assert!(
        run_times.iter().all(|&t| (0.0..5.0).contains(&t)),
        "{run_times:?}"
    );
    let waits = histogram(QUEUE_WAIT_SECONDS, &queue_label(&queue));
    assert_eq!(waits.len(), 7, "one wait per claimed job: {waits:?}");
    assert!(
        waits
            .iter()
            .all(|&w| (0.0..WAIT.as_secs_f64()).contains(&w)),
        "{waits:?}"
    );
    let claims = histogram(CLAIM_SECONDS, &queue_label(&queue));
    assert!(!claims.is_empty());
    assert!(!histogram(SETTLE_SECONDS, &[("settle", "complete")]).is_empty());
    assert!(!histogram(SETTLE_SECONDS, &[("settle", "transition")]).is_empty());
}

async fn a_job_delayed_by_a_known_time_is_claimed_after_waiting_at_least_that(db: TestDb) {
    install();
    let (jobq, queue, recorder) = fixture(&db, "metrics_wait").await;
    // Due in the past: it has waited at least 30 s when claimed.
    let due = chrono::Utc::now() - chrono::Duration::seconds(30);
    let id = jobq
        .enqueue_with(Outcomes::new("ok".into()), on(&queue).run_at(due))
        .await
        .unwrap()
        .id;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .state(recorder)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    wait_for_status(&jobq, id, JobStatus::Done, WAIT).await;
    stop(worker).await;
    let waits = histogram(QUEUE_WAIT_SECONDS, &queue_label(&queue));
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert!((29.0..60.0).contains(&waits[0]), "{waits:?}");
}

async fn a_cancelled_running_job_ends_as_lease_lost_and_counts_as_cancelled(db: TestDb) {
    install();
    let (jobq, queue, recorder) = fixture(&db, "metrics_cancel").await;
    let gates = Gates::default();
    let cancelled_before = counter(JOBS_CANCELLED, &[]);
    let (id, worker) = gated_job_running(&jobq, &queue, &recorder, &gates, |b| {
        b.lease(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_millis(50))
    })
    .await;
    assert!(jobq.cancel(id).await.unwrap());
    assert!(counter(JOBS_CANCELLED, &[]) > cancelled_before);
    let lease_lost = attempt(&queue, "metrics_gated", "lease_lost");
    wait_until("the attempt ends as lease lost", WAIT, || async {
        counter(ATTEMPTS, &lease_lost) == 1
    })
    .await;
    stop(worker).await;
    assert_eq!(
        counter(ATTEMPTS, &attempt(&queue, "metrics_gated", "succeeded")),
        0
    );
    assert_eq!(
        jobq.job(id).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
}

async fn a_late_success_of_a_reclaimed_job_counts_as_fenced_out(db: TestDb) {
    install();
    let (jobq, queue, recorder) = fixture(&db, "metrics_fenced").await;
    let gates = Gates::default();
    let fenced_before = counter(SETTLES_FENCED_OUT, &[("settle", "complete")]);
    // No heartbeat and no reaper of its own: its lease runs out while the
    // handler waits, and the test hands the job to another claimer.
    let (id, worker) = gated_job_running(&jobq, &queue, &recorder, &gates, |b| {
        b.lease(Duration::from_millis(100))
            .disable_heartbeats()
            .reap_interval(Duration::from_secs(3600))
    })
    .await;
    wait_until("its lease expired and the job was reaped", WAIT, || async {
        __store::reap(&jobq, &queue, 10).await.unwrap() == 1
    })
    .await;
    let other = __store::claim(&jobq, &queue, 1, Duration::from_secs(60), "other")
        .await
        .unwrap();
    assert_eq!(other.len(), 1);
    gates.open(id);
    wait_until("the late success is fenced out", WAIT, || async {
        counter(SETTLES_FENCED_OUT, &[("settle", "complete")]) > fenced_before
    })
    .await;
    stop(worker).await;
    // The worker decided a success; the database kept the other claim's.
    assert_eq!(
        counter(ATTEMPTS, &attempt(&queue, "metrics_gated", "succeeded")),
        1
    );
    assert_eq!(
        jobq.job(id).await.unwrap().unwrap().status,
        JobStatus::Processing
    );
}

async fn an_orphan_returned_by_the_reaper_is_counted_under_its_queue(db: TestDb) {
    install();
    let (jobq, queue, recorder) = fixture(&db, "metrics_reaped").await;
    let id = jobq
        .enqueue_with(Outcomes::new("ok".into()), on(&queue))
        .await
        .unwrap()
        .id;
    // A claimer that dies: its lease of 1 ms expires at once.
    let orphan = __store::claim(&jobq, &queue, 1, Duration::from_millis(1), "dead")
        .await
        .unwrap();
    assert_eq!(orphan.len(), 1);
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .state(recorder)
        .poll_interval(Duration::from_millis(20))
        .reap_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    wait_for_status(&jobq, id, JobStatus::Done, WAIT).await;
    stop(worker).await;
    assert_eq!(counter(JOBS_REAPED, &queue_label(&queue)), 1);
    assert_eq!(
        counter(ATTEMPTS, &attempt(&queue, "metrics_outcomes", "succeeded")),
        1
    );
}

/// A batch is counted per queue, run by run of rows into one queue, its
/// duplicates left out: rows into `a`, `a`, `b`, `a` (the last a duplicate
/// of the first's key) and `b` count 2 under `a` and 2 under `b`.
async fn a_batch_counts_its_inserted_rows_under_each_queue(db: TestDb) {
    install();
    let (jobq, queue, _recorder) = fixture(&db, "metrics_batch").await;
    let (a, b) = (format!("{queue}_a"), format!("{queue}_b"));
    let key = format!("batch-{queue}");
    let rows = [
        (&a, Some(&key)),
        (&a, None),
        (&b, None),
        (&a, Some(&key)),
        (&b, None),
    ]
    .map(|(queue, key)| {
        let options = Enqueue::new().queue(queue.as_str());
        let options = match key {
            Some(key) => options.idempotency_key(key.as_str()),
            None => options,
        };
        (Outcomes::new("ok".into()), options)
    });
    let enqueued = jobq.enqueue_many_with(rows).await.unwrap();
    let duplicates: Vec<bool> = enqueued.iter().map(|e| e.duplicate).collect();
    assert_eq!(duplicates, [false, false, false, true, false]);
    let job = "metrics_outcomes";
    assert_eq!(
        counter(JOBS_ENQUEUED, &[("queue", a.as_str()), ("job", job)]),
        2
    );
    assert_eq!(
        counter(JOBS_ENQUEUED, &[("queue", b.as_str()), ("job", job)]),
        2
    );
}

jobq_tests::on_every_backend!(
    each_outcome_of_an_attempt_is_counted_under_its_queue_job_and_outcome,
    a_batch_counts_its_inserted_rows_under_each_queue,
    a_job_delayed_by_a_known_time_is_claimed_after_waiting_at_least_that,
    a_cancelled_running_job_ends_as_lease_lost_and_counts_as_cancelled,
    a_late_success_of_a_reclaimed_job_counts_as_fenced_out,
    an_orphan_returned_by_the_reaper_is_counted_under_its_queue,
);

/// Enqueues one gated job on `queue` and starts a worker of concurrency 1
/// for it (its builder set up further by `setup`); returns once the job runs.
async fn gated_job_running(
    jobq: &jobq_runtime::Jobq,
    queue: &str,
    recorder: &Recorder,
    gates: &Gates,
    setup: impl FnOnce(jobq_runtime::WorkerBuilder) -> jobq_runtime::WorkerBuilder,
) -> (i64, jobq_runtime::WorkerHandle) {
    let id = jobq.enqueue_with(Gated::new(), on(queue)).await.unwrap().id;
    let builder = Worker::builder(jobq.clone())
        .queue_unchecked(queue, 1)
        .state(recorder.clone())
        .state(gates.clone())
        .poll_interval(Duration::from_millis(20));
    let worker = setup(builder).build().unwrap().start();
    wait_until("the job runs", WAIT, || async {
        !recorder.runs(id).is_empty()
    })
    .await;
    (id, worker)
}
