//! Pruning finished rows: the statements read only the rows they delete
//! (not the whole table) on every backend, and a worker given a retention
//! prunes on its own. (What a prune deletes and keeps is in the conformance
//! suite.)

use std::time::Duration;

use jobq_runtime::{CheckStatus, DoctorReport, Enqueue, JobError, JobStatus, Worker, job};
use jobq_tests::{TestDb, unique_queue, wait_for_status, wait_until};

#[job(name = "prune_ok")]
async fn finishes(n: u64) {
    let _ = n;
}

#[job(name = "prune_fails")]
async fn fails() -> Result<(), JobError> {
    Err(JobError::permanent("kept for inspection"))
}

/// What `Jobq::doctor` found in the plan of check `name` (it EXPLAINs
/// jobq's statements as they run, and the test reads its findings: one
/// plan-reading logic for both), asserted to have passed.
fn plan<'r>(report: &'r DoctorReport, name: &str) -> &'r str {
    let check = report
        .check(name)
        .unwrap_or_else(|| panic!("no {name} in {report:#?}"));
    assert_eq!(check.status, CheckStatus::Ok, "{check:#?}");
    &check.found
}

/// PostgreSQL and SQLite prune through `jobq_jobs_finished`; MySQL/MariaDB
/// has no such index (it would cost every settle) and prunes ranges of the
/// claim index, queue by queue and priority by priority, found with a loose
/// scan and index descents.
async fn prune_reads_only_the_rows_it_deletes(db: TestDb) {
    let report = db.jobq().await.doctor().await.unwrap();
    if matches!(db.backend(), jobq_runtime::Backend::MySql) {
        // queue VARBINARY(128) (130) + status (1) + priority (2) + run_at (8).
        let prune = plan(&report, "plan_prune");
        assert!(
            prune.contains("type=range key=jobq_jobs_claim key_len=141"),
            "a range over queue, status, priority and run_at: {prune}"
        );
        let queues = plan(&report, "plan_prune_queues");
        assert!(queues.contains("Using index for group-by"), "{queues}");
        let next = plan(&report, "plan_prune_next_priority");
        assert!(
            next.contains("optimized away") || next.contains("No matching min/max row"),
            "{next}"
        );
    } else {
        let prune = plan(&report, "plan_prune");
        assert!(
            prune.contains("jobq_jobs_finished"),
            "the prune is served by jobq_jobs_finished: {prune}"
        );
    }
}

jobq_tests::on_every_backend!(prune_reads_only_the_rows_it_deletes);

/// A worker given a retention deletes finished rows once they are past it
/// and leaves failed ones (SQLite only: a file of its own, so this worker's
/// table-wide pruning cannot touch other tests' rows).
#[tokio::test]
async fn a_worker_with_a_retention_prunes_finished_rows_and_keeps_failed_ones() {
    let db = TestDb::sqlite().unwrap();
    let jobq = db.jobq().await;
    let queue = unique_queue("pruner");
    let on = || Enqueue::new().queue(&queue);
    let done = jobq.enqueue_with(Finishes::new(1), on()).await.unwrap().id;
    let failed = jobq.enqueue_with(Fails::new(), on()).await.unwrap().id;
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .poll_interval(Duration::from_millis(50))
        .prune_finished_after(Duration::from_millis(300))
        .build()
        .unwrap()
        .start();
    wait_for_status(&jobq, failed, JobStatus::Failed, Duration::from_secs(10)).await;
    wait_until(
        "the done job is pruned",
        Duration::from_secs(10),
        || async { jobq.job(done).await.unwrap().is_none() },
    )
    .await;
    handle.shutdown(Duration::from_secs(5)).await.unwrap();
    let info = jobq
        .job(failed)
        .await
        .unwrap()
        .expect("the failed job is kept");
    assert_eq!(info.status, JobStatus::Failed);
}
