//! Pruning finished rows: the statements read only the rows they delete
//! (not the whole table) on every backend, and a worker given a retention
//! prunes on its own. (What a prune deletes and keeps is in the conformance
//! suite.)

use std::time::Duration;

use jobq_runtime::{Enqueue, JobError, JobStatus, Worker, job};
use jobq_tests::sql::Db;
use jobq_tests::{TestDb, unique_queue, wait_for_status, wait_until};

#[job(name = "prune_ok")]
async fn finishes(n: u64) {
    let _ = n;
}

#[job(name = "prune_fails")]
async fn fails() -> Result<(), JobError> {
    Err(JobError::permanent("kept for inspection"))
}

/// The plan of each backend's prune statement, as text.
async fn plan(db: &TestDb) -> String {
    let jobq = db.jobq().await;
    let pool = Db::of(&jobq);
    match &pool {
        Db::MySql(pool) => {
            use sqlx::Row;
            let explain = |sql: &str| format!("EXPLAIN {sql}");
            let prune = explain(jobq_runtime::__private::sql::mysql::PRUNE);
            let queues = explain(jobq_runtime::__private::sql::mysql::PRUNE_QUEUES);
            let next = explain(jobq_runtime::__private::sql::mysql::PRUNE_NEXT_PRIORITY);
            let rows = [
                sqlx::query(&prune)
                    .bind("q")
                    .bind("done")
                    .bind(0i16)
                    .bind(1_000_000i64)
                    .bind(1000u64)
                    .fetch_one(pool)
                    .await
                    .unwrap(),
                sqlx::query(&queues).fetch_one(pool).await.unwrap(),
                sqlx::query(&next)
                    .bind("q")
                    .bind("done")
                    .bind(-1i32)
                    .fetch_one(pool)
                    .await
                    .unwrap(),
            ];
            rows.iter()
                .map(|row| {
                    format!(
                        "type={} key={} key_len={} extra={}",
                        row.try_get::<Option<String>, _>("type")
                            .unwrap()
                            .unwrap_or_default(),
                        row.try_get::<Option<String>, _>("key")
                            .unwrap()
                            .unwrap_or_default(),
                        row.try_get::<Option<String>, _>("key_len")
                            .unwrap()
                            .unwrap_or_default(),
                        row.try_get::<Option<String>, _>("Extra")
                            .unwrap()
                            .unwrap_or_default(),
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Db::Postgres(pool) => {
            let mut conn = pool.acquire().await.unwrap();
            // The table is small here; what matters is that the index can serve it.
            sqlx::query("SET enable_seqscan = off")
                .execute(&mut *conn)
                .await
                .unwrap();
            let mut lines: Vec<String> = sqlx::query_scalar(&format!(
                "EXPLAIN {}",
                jobq_runtime::__private::sql::postgres::PRUNE
            ))
            .bind("q")
            .bind("done")
            .bind(1_000_000i64)
            .bind(1000i64)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            let queues: Vec<String> = sqlx::query_scalar(&format!(
                "EXPLAIN {}",
                jobq_runtime::__private::sql::postgres::PRUNE_QUEUES
            ))
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            lines.extend(queues);
            sqlx::query("RESET enable_seqscan")
                .execute(&mut *conn)
                .await
                .unwrap();
            lines.join("\n")
        }
        Db::Sqlite(pool) => {
            let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(&format!(
                "EXPLAIN QUERY PLAN {}",
                jobq_runtime::__private::sql::sqlite::PRUNE
            ))
            .bind(0i64)
            .bind("done")
            .bind("cancelled")
            .bind(1000i64)
            .fetch_all(pool)
            .await
            .unwrap();
            rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
        }
    }
}

/// SQLite prunes through `jobq_jobs_finished`; PostgreSQL through
/// `jobq_jobs_finished_by_queue`, queue by queue (found by a skip scan of
/// that index) and status by status; MySQL/MariaDB has no such index (it
/// would cost every settle) and prunes ranges of the claim index, queue by
/// queue and priority by priority, found with a loose scan and index descents.
async fn prune_reads_only_the_rows_it_deletes(db: TestDb) {
    let plan = plan(&db).await;
    if matches!(db.backend(), jobq_runtime::Backend::MySql) {
        let lines: Vec<&str> = plan.lines().collect();
        // queue VARBINARY(128) (130) + status (1) + priority (2) + run_at (8).
        assert!(
            lines[0].starts_with("type=range key=jobq_jobs_claim key_len=141"),
            "a range over queue, status, priority and run_at:\n{plan}"
        );
        assert!(lines[1].contains("Using index for group-by"), "{plan}");
        assert!(
            lines[2].contains("optimized away") || lines[2].contains("No matching min/max row"),
            "{plan}"
        );
    } else if matches!(db.backend(), jobq_runtime::Backend::Postgres) {
        assert!(
            plan.contains("jobq_jobs_finished_by_queue") && !plan.contains("Seq Scan"),
            "the prune and its queues are served by jobq_jobs_finished_by_queue:\n{plan}"
        );
    } else {
        assert!(
            plan.contains("jobq_jobs_finished"),
            "the prune is served by jobq_jobs_finished:\n{plan}"
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
