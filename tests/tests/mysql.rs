//! MySQL/MariaDB promises that depend on the dialect: the claim is served by
//! the claim index without a filesort (so concurrent claimers skip each
//! other's rows instead of waiting or seeing an empty queue: the contract
//! suite's `a_claim_skips_rows_another_open_claim_holds_without_waiting`,
//! on every backend); a claim going on from the last one reads past the
//! index entries claims left behind; jobq's sessions run at READ COMMITTED
//! whatever the server default, the application's pool at the server's.

use std::time::Duration;

use jobq_runtime::{CheckStatus, Enqueue, JobContext, job};
use jobq_tests::{TestDb, enqueue_ids, unique_queue};
use sqlx::mysql::{MySql, MySqlArguments};
use sqlx::{Connection, Executor, MySqlConnection, Row};

type Query<'q> = sqlx::query::Query<'q, MySql, MySqlArguments>;

#[job(name = "mysql_noop")]
async fn noop(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

async fn seed(db: &TestDb, queue: &str, n: u64) -> Vec<i64> {
    let jobq = db.jobq().await;
    let rows = (0..n).map(|i| (Noop::new(i), Enqueue::new().queue(queue)));
    enqueue_ids(&jobq, rows).await
}

async fn session(db: &TestDb) -> MySqlConnection {
    let mut conn = MySqlConnection::connect(db.url()).await.unwrap();
    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = 3")
        .await
        .unwrap();
    conn
}

/// The plans as `Jobq::doctor` reads them (one plan-reading logic for the
/// doctor and the tests), on a table with rows of other queues and fresh
/// statistics.
#[tokio::test]
async fn the_claim_is_served_by_the_claim_index_without_a_filesort() {
    let Some(db) = TestDb::mysql() else { return };
    let queue = unique_queue("explain");
    seed(&db, &queue, 300).await;
    seed(&db, &unique_queue("explain-other"), 300).await;
    let mut conn = session(&db).await;
    conn.execute("ANALYZE TABLE jobq_jobs").await.unwrap();
    let report = db.jobq().await.doctor().await.unwrap();
    for name in ["plan_claim", "plan_claim_after", "plan_reap"] {
        let check = report.check(name).expect("the doctor reads this plan");
        assert_eq!(check.status, CheckStatus::Ok, "{check:#?}");
        assert!(
            check.found.contains("key=jobq_jobs_claim") && !check.found.contains("filesort"),
            "served by the claim index without a filesort: {}",
            check.found
        );
    }
}

/// Buffer-pool page reads of one claim, from MariaDB's `ANALYZE FORMAT=JSON`.
async fn pages_read(
    conn: &mut MySqlConnection,
    sql: &str,
    binds: impl FnOnce(Query<'_>) -> Query<'_>,
) -> u64 {
    let analyze = format!("ANALYZE FORMAT=JSON {sql}");
    let row = binds(sqlx::query(&analyze))
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&row.get::<String, _>(0)).unwrap();
    let mut pages = 0;
    let mut stack = vec![&plan];
    while let Some(value) = stack.pop() {
        match value {
            serde_json::Value::Object(map) => {
                pages += map
                    .get("pages_accessed")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                stack.extend(map.values());
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    pages
}

/// Claimed rows leave delete-marked entries in the claim index until purge
/// removes them; a claim from the beginning reads every one of them (and
/// its clustered row), one going on from where the previous claim ended
/// reads none.
#[tokio::test]
async fn a_claim_going_on_from_the_last_one_reads_past_no_entries_claims_left_behind() {
    let Some(db) = TestDb::mysql() else { return };
    let mut conn = session(&db).await;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    if !version.to_ascii_lowercase().contains("mariadb") {
        return; // the page counts come from MariaDB's ANALYZE
    }
    let queue = unique_queue("resume");
    seed(&db, &queue, 600).await;
    // An open snapshot holds purge back, so the claimed rows' entries stay.
    let mut snapshot = MySqlConnection::connect(db.url()).await.unwrap();
    snapshot
        .execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION WITH CONSISTENT SNAPSHOT")
        .await
        .unwrap();
    sqlx::query("SELECT COUNT(*) FROM jobq_jobs WHERE queue = ?")
        .bind(&queue)
        .fetch_one(&mut snapshot)
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    let claimed = sqlx::query(jobq_runtime::__private::sql::mysql::CLAIM_SELECT)
        .bind(&queue)
        .bind(500u32)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    let last = claimed.last().unwrap();
    let (priority, run_at, id): (i16, chrono::NaiveDateTime, i64) =
        (last.get("priority"), last.get("run_at"), last.get("id"));
    sqlx::query("UPDATE jobq_jobs SET status = 'processing' WHERE queue = ? AND id <= ?")
        .bind(&queue)
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let from_start = pages_read(
        &mut conn,
        jobq_runtime::__private::sql::mysql::CLAIM_SELECT,
        |q| q.bind(queue.clone()).bind(10u32),
    )
    .await;
    let going_on = pages_read(
        &mut conn,
        jobq_runtime::__private::sql::mysql::CLAIM_SELECT_AFTER,
        |q| {
            q.bind(queue.clone())
                .bind(priority)
                .bind(priority)
                .bind(run_at)
                .bind(priority)
                .bind(run_at)
                .bind(id)
                .bind(10u32)
        },
    )
    .await;
    snapshot.execute("ROLLBACK").await.unwrap();
    assert!(
        from_start > 500,
        "a claim from the beginning reads the 500 left-behind entries: {from_start} pages"
    );
    // Ten rows, each an index entry and a clustered row a few levels deep
    // (24 pages on a small table, 69 on one of 90,000 rows).
    assert!(
        going_on < 200 && going_on * 5 < from_start,
        "a claim going on from the last row reads only what it returns: {going_on} pages (from the start: {from_start})"
    );
}

/// A session variable of `conn`'s session and the server's global value,
/// as text; `None` if the server has no such variable.
async fn session_and_global(conn: &mut MySqlConnection, name: &str) -> Option<(String, String)> {
    sqlx::query_as(&format!(
        "SELECT CAST(@@SESSION.{name} AS CHAR), CAST(@@GLOBAL.{name} AS CHAR)"
    ))
    .fetch_one(conn)
    .await
    .ok()
}

/// The pool `Jobq::mysql_pool` hands out is the application's, not the one
/// jobq's statements run on: a transaction of the application there (an
/// outbox: its row and `enqueue_in`) may wait between its statements longer
/// than jobq lets its own wait (MariaDB's `idle_transaction_timeout = 10` on
/// jobq's sessions) and still commits, and runs at the server's isolation
/// and lock wait, not jobq's READ COMMITTED and 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_on_the_pool_jobq_hands_out_keeps_the_servers_session_settings() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let queue = unique_queue("app-pool");
    let pool = jobq.mysql_pool().expect("a MySQL handle");
    let mut tx = pool.begin().await.expect("begin");
    let mut compared = Vec::new();
    for name in [
        "tx_isolation",
        "transaction_isolation",
        "innodb_lock_wait_timeout",
        "idle_transaction_timeout",
    ] {
        if let Some((session, global)) = session_and_global(&mut tx, name).await {
            assert_eq!(
                session, global,
                "the application's session has jobq's {name}"
            );
            compared.push(name);
        }
    }
    assert!(
        compared.contains(&"innodb_lock_wait_timeout") && compared.len() >= 2,
        "the isolation and the lock wait were compared: {compared:?}"
    );
    let job = jobq
        .enqueue_in_with(&mut *tx, Noop::new(1), Enqueue::new().queue(&queue))
        .await
        .expect("enqueue in the application's transaction");
    // Idle inside the transaction past jobq's own idle-transaction limit.
    tokio::time::sleep(Duration::from_secs(11)).await;
    tx.commit()
        .await
        .expect("the application's transaction commits after waiting 11 s");
    assert!(jobq.job(job.id).await.expect("read").is_some());
}

/// jobq's own pool ([`Jobq::jobq_mysql_pool`], for tests) is the one set up
/// for jobq's statements.
#[tokio::test]
async fn jobq_sessions_run_at_read_committed() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let level: String = sqlx::query_scalar("SELECT CAST(@@SESSION.tx_isolation AS CHAR)")
        .fetch_one(jobq.jobq_mysql_pool().unwrap())
        .await
        .or_else(|_| -> Result<String, sqlx::Error> { Ok(String::new()) })
        .unwrap();
    let level = if level.is_empty() {
        sqlx::query_scalar("SELECT CAST(@@SESSION.transaction_isolation AS CHAR)")
            .fetch_one(jobq.jobq_mysql_pool().unwrap())
            .await
            .unwrap()
    } else {
        level
    };
    assert_eq!(level, "READ-COMMITTED");
}

#[tokio::test]
async fn many_processes_can_migrate_at_once() {
    let Some(db) = TestDb::mysql() else { return };
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let url = db.url().to_owned();
        tasks.push(tokio::spawn(async move {
            let jobq = jobq_runtime::Jobq::connect_with(&url, 1).await.unwrap();
            jobq.migrate().await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

/// A session status counter of the connection.
async fn session_status(conn: &mut MySqlConnection, name: &str) -> u64 {
    let sql = format!("SHOW SESSION STATUS LIKE '{name}'");
    let row = conn.fetch_one(sql.as_str()).await.unwrap();
    row.get::<String, _>(1).parse().unwrap()
}

/// The due masks of one run of the waiter's statement.
async fn wait_masks(conn: &mut MySqlConnection, queues: &[String], longest: f64) -> Vec<u64> {
    use jobq_runtime::__private::sql::mysql::{wake_wait_columns, wake_wait_sql};
    let sql = wake_wait_sql(queues.len());
    let mut query: Query<'_> = sqlx::query(&sql).bind(longest).bind(longest);
    for queue in queues.iter().chain(queues) {
        query = query.bind(queue);
    }
    let row = query.fetch_one(conn).await.unwrap();
    (1..=wake_wait_columns(queues.len()))
        .map(|c| row.get::<u64, _>(c))
        .collect()
}

/// The waiter's statement (run after every idle claim and a kill) reports
/// each queue with a job due by its place in the list, over more than one
/// 64-bit mask, and keeps no temporary table on disk: it used
/// `GROUP_CONCAT`, whose values MariaDB keeps in an Aria table, a file
/// created and deleted by every wait, and a kill landing while it was
/// deleted failed the statement with error 6 instead of 1317 (a wake-up
/// that cost a reconnect; seen in the slow-kill test's log). Failed
/// before: 2 disk tables per statement.
#[tokio::test]
async fn the_waiters_statement_reports_due_queues_and_writes_no_file() {
    let Some(db) = TestDb::mysql() else { return };
    let base = unique_queue("waitmask");
    let queues: Vec<String> = (0..70).map(|i| format!("{base}-{i}")).collect();
    let jobq = db.jobq().await;
    for (i, when) in [
        (2, Duration::ZERO),
        (69, Duration::ZERO),
        (10, Duration::from_secs(3600)),
    ] {
        let options = Enqueue::new().queue(&queues[i]).delay(when);
        enqueue_ids(&jobq, [(Noop::new(i as u64), options)]).await;
    }
    let mut padded = queues.clone();
    padded.resize(128, queues[0].clone());
    let mut conn = session(&db).await;
    let disk_before = session_status(&mut conn, "Created_tmp_disk_tables").await;
    let started = std::time::Instant::now();
    let masks = wait_masks(&mut conn, &padded, 30.0).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a due job: no sleep"
    );
    assert_eq!(masks, [1 << 2, 1 << 5], "queues 2 and 69 (64 + 5) are due");
    let disk_after = session_status(&mut conn, "Created_tmp_disk_tables").await;
    assert_eq!(disk_after, disk_before, "no on-disk temporary table");
    sqlx::query(
        "DELETE FROM jobq_jobs WHERE queue LIKE CONCAT(?, '-%') AND run_at <= UTC_TIMESTAMP(6)",
    )
    .bind(&base)
    .execute(&mut conn)
    .await
    .unwrap();
    let masks = wait_masks(&mut conn, &padded, 0.05).await;
    assert_eq!(masks, [0, 0], "nothing due: it slept");
}
