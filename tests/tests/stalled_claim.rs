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
//!
//! PostgreSQL's plain claim is one statement, but its limited claim (and
//! keyed, rate and flow writes) are transactions: one cut off after locking
//! its queue's slots keeps every other worker from claiming in that queue.
//! jobq begins its own transactions there with `SET LOCAL
//! idle_in_transaction_session_timeout` (`BEGIN_BOUNDED`).

use std::time::{Duration, Instant};

use jobq_runtime::__private::sql::mysql::{BEGIN_RC, CLAIM_SELECT, IDLE_TRANSACTION_SECONDS};
use jobq_runtime::{Enqueue, Jobq, Worker, job};
use jobq_tests::{TestDb, unique_queue, wait_until};

#[job(name = "stalled_claim_work")]
async fn work(n: u64) {
    let _ = n;
}

/// With a stalled transaction (since `stalled_at`) holding what `queue`'s
/// three jobs need: a worker claims none of them for a second, then all
/// three run, no sooner than `idle` (the server's idle timeout) after the
/// stall and within 10 s more. How long after the stall they ran.
async fn held_until_the_server_ends_it(
    jobq: &Jobq,
    queue: &str,
    stalled_at: Instant,
    idle: Duration,
) -> Duration {
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(queue, 4)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        jobq.counts(queue).await.expect("counts").done,
        0,
        "claimed what the stalled transaction holds"
    );
    wait_until(
        "the queue's jobs run once the server ends the stalled transaction",
        idle + Duration::from_secs(10),
        || async { jobq.counts(queue).await.expect("counts").done == 3 },
    )
    .await;
    let took = stalled_at.elapsed();
    assert!(
        took >= idle - Duration::from_millis(500),
        "done after {took:?}, before the idle timeout: nothing was held"
    );
    worker
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
    took
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

    let took = held_until_the_server_ends_it(
        &jobq,
        &queue,
        stalled_at,
        Duration::from_secs(IDLE_TRANSACTION_SECONDS),
    )
    .await;
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
}

/// A limited claim on PostgreSQL stalled after locking its queue's slots,
/// begun as jobq begins its own transactions: while it holds them no
/// worker claims in the queue; within the idle timeout the server ends it
/// and the jobs run. (Before jobq bounded its transactions, the queue
/// stayed stuck for as long as the connection lived.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_claim_stalled_mid_transaction_gives_its_slots_back_within_the_idle_timeout() {
    use jobq_runtime::__private::sql::postgres::{
        BEGIN_BOUNDED, IDLE_TRANSACTION_SECONDS, SLOTS_LOCK,
    };
    let Some(db) = TestDb::postgres() else { return };
    let jobq = db.jobq().await;
    let queue = unique_queue("stalled-limited");
    jobq.set_queue_limit(&queue, Some(2)).await.expect("limit");
    jobq.enqueue_many_with((0..3).map(|n| (Work { n }, Enqueue::new().queue(&queue))))
        .await
        .expect("enqueue");

    let pool = jobq.jobq_pg_pool().expect("a PostgreSQL handle").clone();
    let mut stalled = pool.acquire().await.expect("a connection");
    sqlx::raw_sql(BEGIN_BOUNDED)
        .execute(&mut *stalled)
        .await
        .expect("begin");
    let slots = sqlx::query(SLOTS_LOCK)
        .bind(&queue)
        .fetch_all(&mut *stalled)
        .await
        .expect("the claim's slot lock");
    assert_eq!(slots.len(), 2, "the queue's two slots");
    let stalled_at = Instant::now();

    let took = held_until_the_server_ends_it(
        &jobq,
        &queue,
        stalled_at,
        Duration::from_secs(IDLE_TRANSACTION_SECONDS),
    )
    .await;
    println!("the stalled limited claim's queue ran {took:?} after it stalled");
    assert!(
        sqlx::query("SELECT 1")
            .execute(&mut *stalled)
            .await
            .is_err(),
        "the stalled connection is still open"
    );
    stalled.detach();
}
