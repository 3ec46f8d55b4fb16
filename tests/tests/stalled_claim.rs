//! A claim stalled in the middle of its transaction — its host cut off from
//! the database after its locking `SELECT … FOR UPDATE SKIP LOCKED` and
//! before its `UPDATE` — holds the rows it picked: still `pending`, and
//! skipped by every other worker's claim. MariaDB would keep them so until
//! it noticed the dead client (TCP keepalive: hours). jobq's sessions set
//! `idle_transaction_timeout`, so the server closes such a connection and
//! rolls the claim back, and the jobs run elsewhere within that timeout.
//!
//! MySQL 8 has no such setting (jobq's session setup skips it there); its
//! `wait_timeout` closes any idle connection, in a transaction or not.

use std::time::{Duration, Instant};

use jobq_runtime::__private::sql::mysql::{BEGIN_RC, CLAIM_SELECT, IDLE_TRANSACTION_SECONDS};
use jobq_runtime::{Enqueue, Worker, job};
use jobq_tests::{TestDb, unique_queue, wait_until};

#[job(name = "stalled_claim_work")]
async fn work(n: u64) {
    let _ = n;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_stalled_mid_transaction_gives_its_jobs_back_within_the_idle_timeout() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let queue = unique_queue("stalled-claim");
    jobq.enqueue_many_with((0..3).map(|n| (Work { n }, Enqueue::new().queue(&queue))))
        .await
        .expect("enqueue");

    // Another process's claim, on a connection jobq opened (its session
    // settings): the SELECT has locked the 3 rows, then nothing more comes.
    let pool = jobq.jobq_mysql_pool().expect("a MySQL handle").clone();
    let mut stalled = pool.acquire().await.expect("a connection");
    sqlx::raw_sql(BEGIN_RC)
        .execute(&mut *stalled)
        .await
        .expect("begin");
    let picked = sqlx::query(CLAIM_SELECT)
        .bind(&queue)
        .bind(10_i64)
        .fetch_all(&mut *stalled)
        .await
        .expect("the claim's select");
    assert_eq!(picked.len(), 3);
    let stalled_at = Instant::now();

    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 4)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    // While the stalled transaction holds them, they are skipped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        jobq.counts(&queue).await.expect("counts").done,
        0,
        "rows locked by the stalled claim were claimed"
    );
    let idle = Duration::from_secs(IDLE_TRANSACTION_SECONDS);
    wait_until(
        "the stalled claim's jobs run elsewhere",
        idle + Duration::from_secs(10),
        || async { jobq.counts(&queue).await.expect("counts").done == 3 },
    )
    .await;
    let took = stalled_at.elapsed();
    assert!(
        took >= idle - Duration::from_millis(500),
        "done after {took:?}, before the idle timeout: the rows were not held"
    );
    println!("the stalled claim's jobs ran {took:?} after it stalled");
    // The server closed the stalled connection.
    assert!(
        sqlx::query("SELECT 1")
            .execute(&mut *stalled)
            .await
            .is_err(),
        "the stalled connection is still open"
    );
    stalled.detach();
    worker
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}
