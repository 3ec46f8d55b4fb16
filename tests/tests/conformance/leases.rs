//! Leases: a job whose worker is gone runs again, and a stale worker cannot settle it.

use super::*;

#[job(name = "conf_gated", max_attempts = 5, retry = ["10ms"])]
async fn gated(
    ctx: JobContext,
    recorder: State<Recorder>,
    gates: State<Gates>,
) -> Result<(), String> {
    recorder.record(ctx.id(), ctx.attempt());
    gates.wait(ctx.attempt()).await;
    if ctx.attempt() == 1 {
        return Err("the first attempt fails, late".into());
    }
    Ok(())
}

/// A one-slot worker named `id` whose gated jobs wait on `gates`.
fn gated_worker(
    jobq: &Jobq,
    queue: &str,
    recorder: &Recorder,
    gates: &Gates,
    id: &str,
) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, 1)
        .state(recorder.clone())
        .state(gates.clone())
        .state(KeyLog::default())
        .reap_interval(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(50))
        .worker_id(id)
}

async fn a_stale_worker_cannot_settle_a_reclaimed_job(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "stale").await;
    let gates = Gates::default();
    // A: short lease, no heartbeats, so its claim expires while attempt 1 runs.
    let a = gated_worker(&jobq, &queue, &recorder, &gates, "worker-a")
        .lease(Duration::from_millis(500))
        .disable_heartbeats()
        .build()
        .unwrap()
        .start();
    let id = enqueue(&jobq, Gated::new(), on(&queue)).await;
    wait_until("A started attempt 1", LONG, || async {
        recorder.runs(id).len() == 1
    })
    .await;
    let b = gated_worker(&jobq, &queue, &recorder, &gates, "worker-b")
        .build()
        .unwrap()
        .start();
    wait_until("B re-claimed the job as attempt 2", LONG, || async {
        recorder.runs(id).len() == 2
    })
    .await;
    // A's attempt now fails: its retry settle must be fenced out.
    gates.open(1);
    wait_until("A let go of the job", LONG, || async { a.held_jobs() == 0 }).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Processing, "still B's: {info:?}");
    assert_eq!(info.attempts, 2);
    assert_eq!(info.claimed_by.as_deref(), Some("worker-b"));
    assert!(
        info.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("lease expired"),
        "{info:?}"
    );
    gates.open(2);
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    assert_eq!(info.attempts, 2);
    stop(a).await;
    stop(b).await;
}

async fn a_worker_dropped_mid_job_has_it_run_again_within_about_a_lease(db: TestDb) {
    let lease = Duration::from_secs(1);
    let (jobq, queue, recorder) = fixture(&db, "dropped").await;
    let id = enqueue(&jobq, Long::new(60_000), on(&queue)).await;
    // Worker A lives in its own runtime, which is dropped mid-job: no shutdown, no settle.
    let (url, q, r) = (db.url().to_owned(), queue.clone(), recorder.clone());
    let a = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let jobq = Jobq::connect(&url).await.unwrap();
            let handle = worker(&jobq, &q, 1, &r)
                .lease(lease)
                .build()
                .unwrap()
                .start();
            wait_until("A started the job", LONG, || async {
                !r.runs(id).is_empty()
            })
            .await;
            std::mem::forget(handle);
        });
        runtime.shutdown_background();
    });
    a.join().unwrap();
    let dropped_at = Instant::now();
    let handle = worker(&jobq, &queue, 1, &recorder).build().unwrap().start();
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    let rerun = recorder.runs(id)[1].at - dropped_at;
    stop(handle).await;
    assert_eq!(info.attempts, 2);
    assert!(
        rerun <= lease + Duration::from_millis(700),
        "ran again after {rerun:?}"
    );
}

conformance!(
    a_stale_worker_cannot_settle_a_reclaimed_job,
    a_worker_dropped_mid_job_has_it_run_again_within_about_a_lease,
);
