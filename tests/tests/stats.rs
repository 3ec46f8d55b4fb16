//! `Jobq::stats()`: each figure of a queue in a scenario of known counts,
//! paused queues among them, and the plan of every statement it runs on a
//! table of 100,000 pending and 1,000,000 finished rows (each served by an
//! index, the whole call in bounded time).

use std::time::{Duration, Instant};

use chrono::Utc;
use jobq_runtime::__store::{self, Claim};
use jobq_runtime::{Backend, Enqueue, Jobq, STATS_FINISHED_CAP, STATS_MINUTES, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, on, unique_queue, wait_until};

#[job(name = "stats_noop")]
async fn noop(n: u64) {
    let _ = n;
}

const HOUR: Duration = Duration::from_secs(3600);
const LONG: Duration = Duration::from_secs(20);

/// Enqueues `n` jobs with `options`; their ids.
async fn enqueue(jobq: &Jobq, n: u64, options: Enqueue) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            jobq.enqueue_with(Noop::new(i), options.clone())
                .await
                .unwrap()
                .id,
        );
    }
    ids
}

/// Claims exactly `n` jobs of `queue` with `lease`.
async fn claim(jobq: &Jobq, queue: &str, n: u32, lease: Duration) -> Vec<Claim> {
    let claims = __store::claim(jobq, queue, n, lease, "stats-test")
        .await
        .unwrap();
    assert_eq!(claims.len(), n as usize, "{claims:?}");
    claims
}

/// A queue with known counts in every status: each figure of `stats()`.
///
/// Claims take the lowest priority first, so each step enqueues the rows it
/// claims at a priority below everything enqueued before it is claimed.
async fn stats_reports_every_figure_of_a_queue(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stats");
    // 2 done, 1 failed, 1 cancelled.
    enqueue(&jobq, 2, on(&queue).priority(-50)).await;
    let done: Vec<(i64, i64)> = claim(&jobq, &queue, 2, HOUR)
        .await
        .iter()
        .map(|c| (c.id, c.token))
        .collect();
    assert_eq!(__store::complete(&jobq, &done).await.unwrap(), 2);
    enqueue(&jobq, 1, on(&queue).priority(-40)).await;
    let failed = claim(&jobq, &queue, 1, HOUR).await[0];
    let error = Some("for good".to_owned());
    let moved = __store::transition(&jobq, (failed.id, failed.token), true, HOUR, false, error);
    assert!(moved.await.unwrap());
    let cancelled = enqueue(&jobq, 1, on(&queue).delay(HOUR)).await[0];
    assert!(jobq.cancel(cancelled).await.unwrap());
    // 3 processing, 1 of them with an expired lease.
    enqueue(&jobq, 1, on(&queue).priority(-30)).await;
    claim(&jobq, &queue, 1, Duration::from_millis(1)).await;
    enqueue(&jobq, 2, on(&queue).priority(-20)).await;
    claim(&jobq, &queue, 2, HOUR).await;
    // 4 available, the oldest due for 2 minutes; 2 scheduled.
    let due_since = Utc::now() - chrono::TimeDelta::seconds(120);
    enqueue(&jobq, 1, on(&queue).run_at(due_since)).await;
    enqueue(&jobq, 3, on(&queue)).await;
    enqueue(&jobq, 2, on(&queue).delay(HOUR)).await;
    wait_until("the 1 ms lease has expired", LONG, || async {
        let stats = jobq.stats().await.unwrap();
        stats.queue(&queue).unwrap().expired_leases == 1
    })
    .await;

    let stats = jobq.stats().await.unwrap();
    let q = stats.queue(&queue).expect("the queue is listed").clone();
    assert!(!q.paused);
    assert_eq!((q.available, q.scheduled, q.pending()), (4, 2, 6), "{q:?}");
    assert_eq!((q.processing, q.expired_leases), (3, 1), "{q:?}");
    assert_eq!((q.done, q.failed, q.cancelled), (2, 1, 1), "{q:?}");
    let lag = q.oldest_available_age.expect("jobs are due");
    assert!(
        lag >= Duration::from_secs(119) && lag < Duration::from_secs(180),
        "{lag:?}"
    );
    assert_eq!(q.succeeded_per_minute.len(), STATS_MINUTES);
    assert_eq!(q.failed_per_minute.len(), STATS_MINUTES);
    assert_eq!((q.succeeded_last_hour(), q.failed_last_hour()), (2, 1));
    // The minute now running, or the one before if a minute turned meanwhile.
    let recent = |buckets: &[u64]| buckets[STATS_MINUTES - 2..].iter().sum::<u64>();
    assert_eq!(recent(&q.succeeded_per_minute), 2, "{q:?}");
    assert_eq!(recent(&q.failed_per_minute), 1, "{q:?}");
    let age = Utc::now() - stats.taken_at;
    assert!(age < chrono::TimeDelta::seconds(10), "taken {age} ago");
    assert!(
        stats.queues.windows(2).all(|w| w[0].queue < w[1].queue),
        "queues by name"
    );

    assert!(jobq.pause(&queue).await.unwrap());
    let stats = jobq.stats().await.unwrap();
    assert!(stats.queue(&queue).unwrap().paused);
    assert!(jobq.resume(&queue).await.unwrap());
}

/// A queue with no rows shows in `stats()` while it is paused, with
/// zeros, and not once resumed.
async fn a_paused_queue_without_jobs_shows_in_stats(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stats-paused");
    assert!(jobq.stats().await.unwrap().queue(&queue).is_none());
    assert!(jobq.pause(&queue).await.unwrap());
    let stats = jobq.stats().await.unwrap();
    let q = stats.queue(&queue).expect("a paused queue is listed");
    assert!(q.paused);
    assert_eq!((q.pending(), q.processing, q.done), (0, 0, 0));
    assert_eq!(q.oldest_available_age, None);
    assert!(jobq.paused_queues().await.unwrap().contains(&queue));
    assert!(jobq.resume(&queue).await.unwrap());
    assert!(jobq.stats().await.unwrap().queue(&queue).is_none());
    assert!(!jobq.paused_queues().await.unwrap().contains(&queue));
}

/// Finished rows are counted up to the cap, and the count says so.
async fn finished_rows_are_counted_up_to_the_cap(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stats-cap");
    let pool = Db::of(&jobq);
    let now = jobq.stats().await.unwrap().taken_at;
    let n = STATS_FINISHED_CAP as i64 + 5;
    // Rows written directly, as jobq writes a finished row (run_at = finished_at).
    let sql = pool.pick(
        "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
         SELECT ?, 'stats_noop', '{}', 'done', 0, UTC_TIMESTAMP(6) - INTERVAL 2 HOUR, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 2 HOUR FROM seq_1_to_10005",
        "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
         SELECT ?, 'stats_noop', '{}', 'done', 0, now() - interval '2 hours', 1, now(), now() - interval '2 hours' FROM generate_series(1, 10005)",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10005) \
         INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
         SELECT ?, 'stats_noop', '{}', 'done', 0, ?, 1, ?, ? FROM n",
    );
    let two_hours_ago = (now - chrono::TimeDelta::hours(2)).timestamp_micros();
    let args: Vec<Arg> = match db.backend() {
        Backend::Sqlite => vec![
            queue.clone().into(),
            two_hours_ago.into(),
            two_hours_ago.into(),
            two_hours_ago.into(),
        ],
        _ => vec![queue.clone().into()],
    };
    assert_eq!(pool.execute(sql, &args).await.unwrap(), n as u64);
    let q = jobq.stats().await.unwrap();
    let q = q.queue(&queue).unwrap();
    assert_eq!(q.done, STATS_FINISHED_CAP);
    assert_eq!(q.succeeded_last_hour(), 0, "finished two hours ago");
    let deleted = pool
        .execute("DELETE FROM jobq_jobs WHERE queue = ?", &[queue.into()])
        .await
        .unwrap();
    assert_eq!(deleted, n as u64);
}

/// An expired lease shows until a reaper returns the row to `pending`.
async fn an_expired_lease_shows_until_it_is_reaped(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("stats-reap");
    enqueue(&jobq, 1, on(&queue)).await;
    claim(&jobq, &queue, 1, Duration::from_millis(1)).await;
    wait_until("the lease has expired", LONG, || async {
        let stats = jobq.stats().await.unwrap();
        stats.queue(&queue).unwrap().expired_leases == 1
    })
    .await;
    assert_eq!(__store::reap(&jobq, &queue, 10).await.unwrap(), 1);
    let stats = jobq.stats().await.unwrap();
    let q = stats.queue(&queue).unwrap();
    assert_eq!((q.processing, q.expired_leases, q.available), (0, 0, 1));
}

jobq_tests::on_every_backend!(
    stats_reports_every_figure_of_a_queue,
    a_paused_queue_without_jobs_shows_in_stats,
    finished_rows_are_counted_up_to_the_cap,
    an_expired_lease_shows_until_it_is_reaped,
    stats_reads_only_indexes_on_a_big_table,
);

// ---------------------------------------------------------------------------
// Plans, on a table of 100,000 pending and 1,000,000 finished rows.

/// The database of the plan tests on a server (its own, created here):
/// `url` with its database name replaced.
fn own_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let cut = base.rfind('/').expect("a database in the URL");
    let mut out = format!("{}/{name}", &base[..cut]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// This test's own database (see `jobq_tests::scratch::scoped`).
fn plan_db_name(db: &TestDb) -> String {
    jobq_tests::scratch::scoped(db.url(), "plan_stats")
}
const PENDING: i64 = 100_000;
const FINISHED: i64 = 1_000_000;
/// The queues of the big table: pending and finished rows are spread over them.
const PLAN_QUEUES: i64 = 5;

/// A migrated handle on a database holding `PENDING` pending rows (due and
/// not, 3 priorities) and `FINISHED` finished rows spread over 30 days, a
/// thousand or so in the last hour, in `PLAN_QUEUES` queues; filled once.
/// Returns it and the database's temp dir, if any.
async fn big_table(db: &TestDb) -> (Jobq, Option<tempfile::TempDir>) {
    let (url, dir) = match db.backend() {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("plan.db").display());
            (url, Some(dir))
        }
        _ => {
            let plan_db = plan_db_name(db);
            let test = Db::of(&db.jobq().await);
            let exists: Vec<(i64,)> = test
                .fetch_all(
                    test.pick(
                        "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?",
                        "SELECT COUNT(*) FROM pg_database WHERE datname = ?",
                        "",
                    ),
                    &[plan_db.as_str().into()],
                )
                .await
                .unwrap();
            if exists[0].0 == 0 {
                let create = format!("CREATE DATABASE {plan_db}");
                test.execute(&create, &[]).await.unwrap();
            }
            (own_database(db.url(), &plan_db), None)
        }
    };
    let jobq = Jobq::connect(&url).await.unwrap();
    jobq.migrate().await.unwrap();
    let pool = Db::of(&jobq);
    let rows: Vec<(i64,)> = pool
        .fetch_all("SELECT COUNT(*) FROM jobq_jobs", &[])
        .await
        .unwrap();
    if rows[0].0 == PENDING + FINISHED {
        return (jobq, dir);
    }
    pool.execute("DELETE FROM jobq_jobs", &[]).await.unwrap();
    let started = Instant::now();
    let now = Utc::now().timestamp_micros();
    let (pending, finished) = match db.backend() {
        Backend::MySql => (
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at) \
             SELECT CONCAT('plan-', seq % 5), 'stats_noop', '{}', 'pending', seq % 3, \
                    UTC_TIMESTAMP(6) + INTERVAL (3600 - CAST(seq % 7200 AS SIGNED)) SECOND, 1, UTC_TIMESTAMP(6) \
             FROM seq_1_to_100000",
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
             SELECT CONCAT('plan-', seq % 5), 'stats_noop', '{}', ELT(1 + seq % 3, 'done', 'failed', 'cancelled'), seq % 3, \
                    UTC_TIMESTAMP(6) - INTERVAL (seq * 2592000) MICROSECOND, 1, UTC_TIMESTAMP(6) - INTERVAL 31 DAY, \
                    UTC_TIMESTAMP(6) - INTERVAL (seq * 2592000) MICROSECOND \
             FROM seq_1_to_1000000",
        ),
        Backend::Postgres => (
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at) \
             SELECT 'plan-' || (g % 5), 'stats_noop', '{}', 'pending', g % 3, \
                    now() + (3600 - g % 7200) * interval '1 second', 1, now() \
             FROM generate_series(1, 100000) AS g",
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
             SELECT 'plan-' || (g % 5), 'stats_noop', '{}', (ARRAY['done', 'failed', 'cancelled'])[1 + g % 3], g % 3, \
                    now() - g * interval '2592 milliseconds', 1, now() - interval '31 days', \
                    now() - g * interval '2592 milliseconds' \
             FROM generate_series(1, 1000000) AS g",
        ),
        Backend::Sqlite => (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
             INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at) \
             SELECT 'plan-' || (i % 5), 'stats_noop', '{}', 'pending', i % 3, ? + (3600 - i % 7200) * 1000000, 1, ? FROM n",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) \
             INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, max_attempts, created_at, finished_at) \
             SELECT 'plan-' || (i % 5), 'stats_noop', '{}', CASE i % 3 WHEN 0 THEN 'done' WHEN 1 THEN 'failed' ELSE 'cancelled' END, \
                    i % 3, ? - i * 2592000, 1, ? - 2678400000000, ? - i * 2592000 FROM n",
        ),
        _ => unreachable!(),
    };
    let (pending_args, finished_args): (Vec<Arg>, Vec<Arg>) = match db.backend() {
        Backend::Sqlite => (vec![now.into(), now.into()], vec![now.into(); 3]),
        _ => (Vec::new(), Vec::new()),
    };
    assert_eq!(
        pool.execute(pending, &pending_args).await.unwrap(),
        PENDING as u64
    );
    assert_eq!(
        pool.execute(finished, &finished_args).await.unwrap(),
        FINISHED as u64
    );
    let analyze = pool.pick("ANALYZE TABLE jobq_jobs", "ANALYZE jobq_jobs", "ANALYZE");
    match &pool {
        // ANALYZE TABLE returns a result set.
        Db::MySql(mysql) => {
            sqlx::query(analyze).fetch_all(mysql).await.unwrap();
        }
        _ => {
            pool.execute(analyze, &[]).await.unwrap();
        }
    }
    if let Db::Postgres(pg) = &pool {
        // Index-only scans need the visibility map.
        sqlx::query("VACUUM jobq_jobs").execute(pg).await.unwrap();
    }
    eprintln!(
        "{}: filled {PENDING} pending and {FINISHED} finished rows in {:?}",
        pool.name(),
        started.elapsed()
    );
    (jobq, dir)
}

/// Drops the big table's rows (and on a server, its database).
async fn drop_big_table(db: &TestDb, jobq: Jobq) {
    let pool = Db::of(&jobq);
    pool.execute("DELETE FROM jobq_jobs", &[]).await.unwrap();
    drop(pool);
    if let Some(pool) = jobq.pg_pool() {
        pool.close().await;
    } else if let Some(pool) = jobq.jobq_mysql_pool() {
        pool.close().await;
    }
    drop(jobq);
    if !matches!(db.backend(), Backend::Sqlite) {
        let test = db.jobq().await;
        let test = Db::of(&test);
        // PostgreSQL: the handle's listener may still be connected.
        let force = test.pick("", " WITH (FORCE)", "");
        let drop_sql = format!("DROP DATABASE IF EXISTS {}{force}", plan_db_name(db));
        test.execute(&drop_sql, &[]).await.unwrap();
    }
}

/// MySQL/MariaDB: `EXPLAIN` of `sql` with `args`, one line per table read:
/// `table type key key_len extra`.
async fn mysql_plan(pool: &sqlx::MySqlPool, sql: &str, args: &[Arg]) -> Vec<String> {
    use sqlx::Row;
    let explain = format!("EXPLAIN {sql}");
    let mut query = sqlx::query(&explain);
    for arg in args {
        query = match arg {
            Arg::Int(v) => query.bind(*v),
            Arg::Text(v) => query.bind(v.as_str()),
            Arg::Null => query.bind(None::<i64>),
        };
    }
    let rows = query.fetch_all(pool).await.unwrap();
    let get = |row: &sqlx::mysql::MySqlRow, column: &str| -> String {
        row.try_get::<Option<String>, _>(column)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    rows.iter()
        .map(|row| {
            format!(
                "table={} type={} key={} key_len={} extra={}",
                get(row, "table"),
                get(row, "type"),
                get(row, "key"),
                get(row, "key_len"),
                get(row, "Extra"),
            )
        })
        .collect()
}

/// MySQL/MariaDB: every statement of `stats()` reads `jobq_jobs` through
/// the claim index only, in ranges of it (no line of type ALL on the table).
async fn mysql_plans(pool: &sqlx::MySqlPool) {
    use jobq_runtime::__private::sql::mysql as sql;
    let queue = || Arg::from("plan-1");
    let at = || Arg::from("2026-12-01 10:00:00");
    let cap = || Arg::Int(STATS_FINISHED_CAP as i64);
    let per_minute = sql::stats_per_minute(4);
    let statements: Vec<(&str, String, Vec<Arg>, &str)> = vec![
        (
            "QUEUES",
            sql::QUEUES.into(),
            vec![],
            "Using index for group-by",
        ),
        (
            "STATS_LIVE",
            sql::STATS_LIVE.into(),
            vec![at(), at(), queue()],
            "key_len=131",
        ),
        (
            "STATS_FINISHED",
            sql::STATS_FINISHED.into(),
            vec![queue(), cap(), queue(), cap(), queue(), cap()],
            "key_len=131",
        ),
        (
            "NEXT_PRIORITY",
            sql::NEXT_PRIORITY.into(),
            vec![queue(), "done".into(), Arg::Int(-1)],
            "",
        ),
        (
            "stats_per_minute",
            per_minute,
            vec![
                at(),
                queue(),
                Arg::Int(0),
                Arg::Int(1),
                Arg::Int(2),
                Arg::Int(2),
                at(),
            ],
            // queue VARBINARY(128) (130) + status (1) + priority (2) + run_at (8).
            "key_len=141",
        ),
    ];
    for (name, statement, args, expected) in statements {
        let plan = mysql_plan(pool, &statement, &args).await;
        let text = plan.join("\n");
        eprintln!("mysql {name}:\n{text}");
        for line in plan.iter().filter(|l| l.starts_with("table=jobq_jobs ")) {
            assert!(
                !line.contains("type=ALL"),
                "{name} scans the table:\n{text}"
            );
            assert!(
                line.contains("key=jobq_jobs_claim"),
                "{name} reads through the claim index:\n{text}"
            );
        }
        assert!(
            text.contains(expected),
            "{name}: expected {expected}:\n{text}"
        );
        if name == "NEXT_PRIORITY" {
            assert!(
                text.contains("optimized away") || text.contains("No matching min/max row"),
                "{name} is one index descent:\n{text}"
            );
        }
    }
}

/// PostgreSQL: `EXPLAIN` of each statement names the index it expects and
/// no sequential scan.
async fn postgres_plans(pool: &sqlx::PgPool) {
    use jobq_runtime::__private::sql::postgres as sql;
    let now = Utc::now();
    let explain = |sql: &str| format!("EXPLAIN {sql}");
    let plans = [
        (
            "QUEUES",
            sqlx::query_scalar::<_, String>(&explain(sql::QUEUES))
                .fetch_all(pool)
                .await
                .unwrap(),
            &[
                "jobq_jobs_claim",
                "jobq_jobs_lease",
                "jobq_jobs_finished_by_queue",
            ][..],
        ),
        (
            "STATS_LIVE",
            sqlx::query_scalar(&explain(sql::STATS_LIVE))
                .bind("plan-1")
                .bind(now)
                .fetch_all(pool)
                .await
                .unwrap(),
            &["jobq_jobs_claim", "jobq_jobs_lease"][..],
        ),
        (
            "STATS_FINISHED",
            sqlx::query_scalar(&explain(sql::STATS_FINISHED))
                .bind("plan-1")
                .bind(STATS_FINISHED_CAP as i64)
                .fetch_all(pool)
                .await
                .unwrap(),
            &["jobq_jobs_finished_by_queue"][..],
        ),
        (
            "STATS_PER_MINUTE",
            sqlx::query_scalar(&explain(sql::STATS_PER_MINUTE))
                .bind("plan-1")
                .bind(now - chrono::TimeDelta::hours(1))
                .fetch_all(pool)
                .await
                .unwrap(),
            &["jobq_jobs_finished_by_queue"][..],
        ),
        (
            "PRUNE_QUEUES",
            sqlx::query_scalar(&explain(sql::PRUNE_QUEUES))
                .fetch_all(pool)
                .await
                .unwrap(),
            &["jobq_jobs_finished_by_queue"][..],
        ),
    ];
    for (name, lines, indexes) in plans {
        let text = lines.join("\n");
        eprintln!("postgres {name}:\n{text}");
        assert!(
            !text.contains("Seq Scan"),
            "{name} scans the table:\n{text}"
        );
        for index in indexes {
            assert!(text.contains(index), "{name} reads {index}:\n{text}");
        }
    }
}

/// SQLite: `EXPLAIN QUERY PLAN` of each statement searches the claim index
/// (never `SCAN jobq_jobs`).
async fn sqlite_plans(pool: &sqlx::SqlitePool) {
    use jobq_runtime::__private::sql::sqlite as sql;
    let now = Utc::now().timestamp_micros();
    let plan = |statement: &'static str, args: Vec<Arg>| async move {
        let explain = format!("EXPLAIN QUERY PLAN {statement}");
        let mut query = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
        for arg in &args {
            query = match arg {
                Arg::Int(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.clone()),
                Arg::Null => query.bind(None::<i64>),
            };
        }
        let rows = query.fetch_all(pool).await.unwrap();
        rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
    };
    let plans = [
        ("QUEUES", plan(sql::QUEUES, vec![]).await),
        (
            "STATS_LIVE",
            plan(sql::STATS_LIVE, vec!["plan-1".into(), now.into()]).await,
        ),
        (
            "STATS_FINISHED",
            plan(sql::STATS_FINISHED, vec!["plan-1".into(), 10_000i64.into()]).await,
        ),
        (
            "PRIORITIES",
            plan(sql::PRIORITIES, vec!["plan-1".into(), "done".into()]).await,
        ),
        (
            "STATS_PER_MINUTE",
            plan(
                sql::STATS_PER_MINUTE,
                vec![now.into(), "plan-1".into(), "[0,1,2]".into()],
            )
            .await,
        ),
    ];
    for (name, text) in plans {
        eprintln!("sqlite {name}:\n{text}");
        assert!(
            !text.contains("SCAN jobq_jobs"),
            "{name} scans the table:\n{text}"
        );
        assert!(
            text.contains("USING COVERING INDEX jobq_jobs_claim"),
            "{name} reads the claim index alone:\n{text}"
        );
    }
    let per_minute = plan(
        sql::STATS_PER_MINUTE,
        vec![now.into(), "plan-1".into(), "[0,1,2]".into()],
    )
    .await;
    assert!(
        per_minute.contains("queue=? AND status=? AND priority=? AND run_at>?"),
        "ranges of (queue, status, priority, run_at):\n{per_minute}"
    );
}

/// Every statement of `stats()` is served by an index at 100,000 pending
/// and 1,000,000 finished rows, and the whole call takes bounded time.
async fn stats_reads_only_indexes_on_a_big_table(db: TestDb) {
    let (jobq, _dir) = big_table(&db).await;
    match Db::of(&jobq) {
        Db::MySql(pool) => mysql_plans(&pool).await,
        Db::Postgres(pool) => postgres_plans(&pool).await,
        Db::Sqlite(pool) => sqlite_plans(&pool).await,
    }
    // Warm, then measured.
    jobq.stats().await.unwrap();
    let started = Instant::now();
    let stats = jobq.stats().await.unwrap();
    let took = started.elapsed();
    eprintln!(
        "{}: stats() of {} queues, {PENDING} pending and {FINISHED} finished rows: {took:?}",
        Db::of(&jobq).name(),
        stats.queues.len()
    );
    assert_eq!(stats.queues.len(), PLAN_QUEUES as usize, "{stats:?}");
    let pending: u64 = stats.queues.iter().map(|q| q.pending()).sum();
    assert_eq!(pending, PENDING as u64);
    for q in &stats.queues {
        assert_eq!(q.done, STATS_FINISHED_CAP, "{q:?}");
        assert!(q.available > 0 && q.scheduled > 0, "{q:?}");
        let lag = q.oldest_available_age.expect("due jobs");
        assert!(lag > Duration::from_secs(3000), "{lag:?}");
        // One row every 2.592 s, over 5 queues and 3 statuses: about 93
        // successes and 93 failures per queue in the last hour.
        let hour = q.succeeded_last_hour();
        assert!((60..=120).contains(&hour), "{hour} in the last hour: {q:?}");
    }
    assert!(took < Duration::from_secs(2), "stats() took {took:?}");
    drop_big_table(&db, jobq).await;
}
