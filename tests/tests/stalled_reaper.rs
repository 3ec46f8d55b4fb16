//! A reaper stalled in the middle of its work — its host cut off from the
//! database just after its `SELECT` (found by the many-hosts partition
//! test, `many_hosts.rs`, long form) — must delay no live job's settle.
//!
//! On MariaDB the reaper's `SELECT … WHERE queue = ? AND status =
//! 'processing' AND run_at < now … FOR UPDATE SKIP LOCKED` scans the
//! queue's `processing` entries of the claim index and keeps an exclusive
//! lock on every entry it scanned, matching or not, until it commits. So
//! while a reaper's transaction is held open (a partition, a frozen
//! process), every other worker's settle of a live job of that queue waits
//! on it — `innodb_lock_wait_timeout` (5 s, jobq's session setting), then a
//! retry — and their heartbeats leave the rows of the stuck batch alone, so
//! the leases of healthy workers run out and their jobs run twice.
//!
//! PostgreSQL locks only the rows a `FOR UPDATE` returns, and its reaper
//! locks only rows its plain read found expired: the same stalled
//! transaction holds nothing there.
//!
//! The fix (MariaDB): the reaper reads its candidates with a plain
//! (consistent, non-locking) read and only then, in a short transaction,
//! locks those still expired by primary key (`SKIP LOCKED`, so a row whose
//! settle waits on a caller's lock is left alone) and updates them. A
//! reaper that stalls holds expired rows only, and one that finds nothing
//! expired takes no lock at all. Before the fix the MariaDB instance
//! failed: the live jobs' settles waited the whole 3 s of the test.

use std::time::Duration;

use jobq_runtime::{Backend, Enqueue, JobContext, State, Worker, job};
use jobq_tests::{Gates, TestDb, unique_queue, wait_until};
use sqlx::Connection;

/// Holds until its gate opens.
#[job(name = "stalled_reaper_work")]
async fn work(ctx: &JobContext, gates: State<Gates<i64>>, n: u64) {
    let _ = n;
    gates.wait(ctx.id()).await;
}

async fn a_reaper_stalled_mid_transaction_delays_no_live_jobs_settle(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stalled-reaper");
    let gates = Gates::default();
    // A long lease: the only thing that can delay the settles is a lock.
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 4)
        .state(gates.clone())
        .lease(Duration::from_secs(30))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    let ids: Vec<i64> = jobq
        .enqueue_many_with((0..4).map(|n| (Work { n }, Enqueue::new().queue(&queue))))
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect();
    wait_until("the 4 jobs run", Duration::from_secs(10), || async {
        jobq.counts(&queue).await.expect("counts").processing == 4
    })
    .await;

    // Another host's reaper: its transaction is open, its SELECT has run
    // (nothing has expired), and then its host is cut off.
    let stalled = match db.backend() {
        Backend::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(db.url())
                .await
                .expect("connect");
            sqlx::raw_sql(jobq_runtime::__private::sql::mysql::BEGIN_RC)
                .execute(&mut conn)
                .await
                .expect("begin, read committed");
            // The reaper's first statement: candidates read without locks
            // (none here, so it locks nothing after it either).
            let expired: Vec<i64> =
                sqlx::query_scalar(jobq_runtime::__private::sql::mysql::REAP_SELECT)
                    .bind(&queue)
                    .bind(100_i64)
                    .fetch_all(&mut conn)
                    .await
                    .expect("the reaper's select");
            assert!(expired.is_empty(), "nothing has expired: {expired:?}");
            Stalled::MySql(conn)
        }
        Backend::Postgres => {
            // jobq's reaper there is a plain read, then one statement that
            // takes those rows still at the version read; in a transaction
            // held open it would hold what it locked: the rows it returned.
            let mut conn = sqlx::PgConnection::connect(db.url())
                .await
                .expect("connect");
            sqlx::raw_sql("BEGIN")
                .execute(&mut conn)
                .await
                .expect("begin");
            let seen: Vec<(i64, String)> =
                sqlx::query_as(jobq_runtime::__private::sql::postgres::REAP_SEEN)
                    .bind(&queue)
                    .bind(100_i64)
                    .fetch_all(&mut conn)
                    .await
                    .expect("the reaper's read");
            assert!(seen.is_empty(), "nothing has expired: {seen:?}");
            let (ids, versions): (Vec<i64>, Vec<String>) = seen.into_iter().unzip();
            let reaped = sqlx::query(jobq_runtime::__private::sql::postgres::REAP)
                .bind(ids)
                .bind(versions)
                .execute(&mut conn)
                .await
                .expect("the reaper's statement");
            assert_eq!(reaped.rows_affected(), 0, "nothing has expired");
            Stalled::Postgres(conn)
        }
        _ => return,
    };

    for id in &ids {
        gates.open(*id);
    }
    let started = std::time::Instant::now();
    wait_until(
        "the live jobs are settled while another host's reaper is stalled",
        Duration::from_secs(3),
        || async { jobq.counts(&queue).await.expect("counts").done == 4 },
    )
    .await;
    println!("settled {:?} after the handlers ended", started.elapsed());
    drop(stalled);
    worker
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

/// The connection of the stalled reaper, its transaction open (rolled
/// back by the server when the connection closes, on drop).
#[allow(dead_code)]
enum Stalled {
    MySql(sqlx::MySqlConnection),
    Postgres(sqlx::PgConnection),
}

mod mysql {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reaper_stalled_mid_transaction_delays_no_live_jobs_settle() {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::a_reaper_stalled_mid_transaction_delays_no_live_jobs_settle(db).await;
        }
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reaper_stalled_mid_transaction_delays_no_live_jobs_settle() {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::a_reaper_stalled_mid_transaction_delays_no_live_jobs_settle(db).await;
        }
    }
}
