//! jobq on a MySQL/MariaDB pool the application built, whose sessions run in
//! SQL modes of its own choosing: every statement jobq runs means the same
//! whatever the session's `sql_mode`.

use std::time::Duration;

use jobq_runtime::{Enqueue, JobContext, JobError, JobStatus, Jobq, Worker, job};
use jobq_tests::{TestDb, unique_queue, wait_for_status};
use sqlx::Executor;
use sqlx::mysql::MySqlPoolOptions;

#[job(name = "modes_ok")]
async fn succeeds(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

#[job(name = "modes_fail")]
async fn fails_for_good(ctx: &JobContext) -> Result<(), JobError> {
    let _ = ctx;
    Err(JobError::permanent(
        "no \"quotes\" \\ or 'escapes' || survive",
    ))
}

/// Outlives its lease (the worker has no heartbeats), so the reaper takes it.
#[job(name = "modes_stall")]
async fn stalls(ctx: &JobContext) {
    let _ = ctx;
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// A handle on a pool whose every session runs with `modes` added to the
/// server's `sql_mode`.
async fn pool_in_modes(db: &TestDb, modes: &'static str) -> Jobq {
    let pool = MySqlPoolOptions::new()
        .max_connections(8)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(
                    format!("SET SESSION sql_mode = CONCAT(@@sql_mode, '{modes}')").as_str(),
                )
                .await?;
                Ok(())
            })
        })
        .connect(db.url())
        .await
        .unwrap();
    let jobq = Jobq::from_mysql_pool(pool).await.unwrap();
    jobq.migrate().await.unwrap();
    jobq
}

#[tokio::test]
async fn jobq_works_the_same_in_any_sql_mode_the_application_sets() {
    let Some(db) = TestDb::mysql() else { return };
    // Applied once under the server's own modes, as an application would.
    db.jobq().await;
    let probe = db.jobq().await;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(probe.mysql_pool().unwrap())
        .await
        .unwrap();
    // SIMULTANEOUS_ASSIGNMENT exists on MariaDB only.
    let modes = if version.to_ascii_lowercase().contains("mariadb") {
        ",SIMULTANEOUS_ASSIGNMENT,ANSI_QUOTES,NO_BACKSLASH_ESCAPES,PIPES_AS_CONCAT,ONLY_FULL_GROUP_BY"
    } else {
        ",ANSI_QUOTES,NO_BACKSLASH_ESCAPES,PIPES_AS_CONCAT,ONLY_FULL_GROUP_BY"
    };
    let jobq = pool_in_modes(&db, modes).await;
    let queue = unique_queue("modes");
    let on = || Enqueue::new().queue(&queue);

    let ok = jobq.enqueue_with(Succeeds::new(1), on()).await.unwrap();
    let key = format!("{queue}:key");
    let keyed = jobq
        .enqueue_with(Succeeds::new(2), on().idempotency_key(&key))
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Succeeds::new(2), on().idempotency_key(&key))
        .await
        .unwrap();
    assert!(again.duplicate && again.id == keyed.id);
    let batch = jobq
        .enqueue_many_with([
            (Succeeds::new(3), on()),
            (Succeeds::new(4), on().idempotency_key(&key)),
        ])
        .await
        .unwrap();
    assert!(!batch[0].duplicate);
    assert!(batch[1].duplicate && batch[1].id == keyed.id);
    let failing = jobq
        .enqueue_with(FailsForGood::new(), on().max_attempts(3))
        .await
        .unwrap();
    let stalling = jobq
        .enqueue_with(Stalls::new(), on().max_attempts(1))
        .await
        .unwrap();
    let cancelled = jobq
        .enqueue_with(Succeeds::new(5), on().delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert!(jobq.cancel(cancelled.id).await.unwrap());

    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 8)
        .lease(Duration::from_millis(600))
        .disable_heartbeats()
        .reap_interval(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap()
        .start();
    let deadline = Duration::from_secs(20);
    for id in [ok.id, keyed.id, batch[0].id] {
        let done = wait_for_status(&jobq, id, JobStatus::Done, deadline).await;
        assert!(done.finished_at.is_some(), "done row {id} has finished_at");
    }
    let failed = wait_for_status(&jobq, failing.id, JobStatus::Failed, deadline).await;
    assert!(
        failed.finished_at.is_some(),
        "a failed row has finished_at: {failed:?}"
    );
    assert_eq!(failed.attempts, 1);
    assert_eq!(
        failed.last_error.as_deref(),
        Some("no \"quotes\" \\ or 'escapes' || survive")
    );
    let reaped = wait_for_status(&jobq, stalling.id, JobStatus::Failed, deadline).await;
    assert!(
        reaped.finished_at.is_some(),
        "a row reaped to failed has finished_at: {reaped:?}"
    );
    assert!(
        reaped
            .last_error
            .as_deref()
            .is_some_and(|e| e.starts_with("lease expired during attempt 1: worker ")),
        "{reaped:?}"
    );
    let cancelled_row = jobq.job(cancelled.id).await.unwrap().unwrap();
    assert_eq!(cancelled_row.status, JobStatus::Cancelled);
    assert!(cancelled_row.finished_at.is_some(), "{cancelled_row:?}");

    // Retry revives the cancelled row, which then runs.
    assert!(jobq.retry(cancelled.id).await.unwrap());
    let revived = jobq.job(cancelled.id).await.unwrap().unwrap();
    // Pending again, or (the worker is running) already run again since.
    assert!(
        revived.finished_at.is_none() || revived.finished_at > cancelled_row.finished_at,
        "{revived:?}"
    );
    wait_for_status(&jobq, cancelled.id, JobStatus::Done, deadline).await;
    handle.shutdown(Duration::from_secs(5)).await.unwrap();

    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.done, counts.failed), (4, 2), "{counts:?}");
    // Prune walks every queue under these modes too (nothing is old enough).
    jobq.prune_finished(Duration::from_secs(3600))
        .await
        .unwrap();
    jobq.prune_failed(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 6);
}
