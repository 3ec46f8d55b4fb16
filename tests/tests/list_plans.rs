//! The plans of listing and bulk statements against a table that really
//! holds 100,000 pending and 1,000,000 finished rows (in a database of this
//! test's own: `{database}_plan_list` on MariaDB and PostgreSQL, a temporary file
//! on SQLite): every filter an index serves is read through it (no full
//! scan), and each list and count answers in bounded time.
//!
//! The rows and the database are dropped at the end; `JOBQ_PLAN_KEEP=1`
//! keeps them for the next run (which then skips the fill).

use std::time::{Duration, Instant};

use jobq_runtime::__store::{Bind, Kind, bulk_page, filtered_statement};
use jobq_runtime::{Backend, JobFilter, JobStatus, Jobq, Order, Page};
use jobq_tests::TestDb;
use jobq_tests::sql::Db;
use sqlx::Row;

const PENDING: i64 = 100_000;
const FINISHED: i64 = 1_000_000;
const QUEUE: &str = "plan_q";
/// This test's own database (see `jobq_tests::scratch::scoped`).
fn db_name(db: &TestDb) -> String {
    jobq_tests::scratch::scoped(db.url(), "plan_list")
}

/// Generous: most pages and counts take milliseconds through an index (the
/// worst, a page of 800,000 `done` rows sorted by id, about 2.6 s on SQLite);
/// the bound catches a plan gone wrong, not a slow machine.
const BOUND: Duration = Duration::from_secs(10);

/// A handle on this test's own database, migrated and filled.
async fn plan_db(db: &TestDb) -> Jobq {
    let url = match db.backend() {
        Backend::Sqlite => db.url().to_owned(),
        _ => {
            let name = db_name(db);
            let admin = db.jobq().await;
            match Db::of(&admin) {
                Db::MySql(pool) => {
                    sqlx::query(&format!("CREATE DATABASE IF NOT EXISTS {name}"))
                        .execute(&pool)
                        .await
                        .unwrap();
                }
                Db::Postgres(pool) => {
                    let exists: Option<i32> =
                        sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
                            .bind(&name)
                            .fetch_optional(&pool)
                            .await
                            .unwrap();
                    if exists.is_none() {
                        // Two runs at once: the loser's "already exists" is fine.
                        let _ = sqlx::query(&format!("CREATE DATABASE {name}"))
                            .execute(&pool)
                            .await;
                    }
                }
                Db::Sqlite(_) => unreachable!(),
            }
            let (base, _) = db.url().rsplit_once('/').expect("a database in the URL");
            format!("{base}/{name}")
        }
    };
    let jobq = Jobq::connect_with(&url, 2).await.expect("connect");
    jobq.migrate().await.expect("migrate");
    fill(&jobq).await;
    jobq
}

/// 100,000 pending rows (keys `p/<n>`, due over the next days) and 1,000,000
/// finished ones (80 % done, 10 % failed, 10 % cancelled), all of one queue,
/// two job names; skipped when the table holds them already.
async fn fill(jobq: &Jobq) {
    let db = Db::of(jobq);
    let rows: Vec<(i64,)> = db
        .fetch_all("SELECT COUNT(*) FROM jobq_jobs", &[])
        .await
        .unwrap();
    if rows[0].0 == PENDING + FINISHED {
        return;
    }
    let start = Instant::now();
    empty(&db).await;
    let (pending, finished, analyze) = match db {
        Db::MySql(_) => (
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, idempotency_key, created_at) \
             SELECT 'plan_q', IF(seq % 2 = 0, 'plan_a', 'plan_b'), '{}', 'pending', 0, UTC_TIMESTAMP(6) + INTERVAL seq SECOND, 0, 3, CONCAT('p/', seq), UTC_TIMESTAMP(6) - INTERVAL (100001 - seq) SECOND \
             FROM seq_1_to_100000",
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, created_at, finished_at) \
             SELECT 'plan_q', IF(seq % 2 = 0, 'plan_a', 'plan_b'), '{}', ELT(1 + IF(seq % 10 < 8, 0, seq % 10 - 7), 'done', 'failed', 'cancelled'), 0, \
                    UTC_TIMESTAMP(6) - INTERVAL seq SECOND, 1, 3, UTC_TIMESTAMP(6) - INTERVAL (1100001 - seq) SECOND, UTC_TIMESTAMP(6) - INTERVAL seq SECOND \
             FROM seq_1_to_1000000",
            "ANALYZE TABLE jobq_jobs",
        ),
        Db::Postgres(_) => (
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, idempotency_key, created_at) \
             SELECT 'plan_q', CASE WHEN i % 2 = 0 THEN 'plan_a' ELSE 'plan_b' END, '{}', 'pending', 0, now() + i * interval '1 second', 0, 3, 'p/' || i, now() - (100001 - i) * interval '1 second' \
             FROM generate_series(1, 100000) AS i",
            "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, created_at, finished_at) \
             SELECT 'plan_q', CASE WHEN i % 2 = 0 THEN 'plan_a' ELSE 'plan_b' END, '{}', \
                    CASE WHEN i % 10 < 8 THEN 'done' WHEN i % 10 = 8 THEN 'failed' ELSE 'cancelled' END, 0, \
                    now() - i * interval '1 second', 1, 3, now() - (1100001 - i) * interval '1 second', now() - i * interval '1 second' \
             FROM generate_series(1, 1000000) AS i",
            "ANALYZE jobq_jobs",
        ),
        Db::Sqlite(_) => (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) \
             INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, idempotency_key, created_at) \
             SELECT 'plan_q', CASE WHEN i % 2 = 0 THEN 'plan_a' ELSE 'plan_b' END, '{}', 'pending', 0, 1800000000000000 + i * 1000000, 0, 3, 'p/' || i, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) - (100001 - i) * 1000000 FROM n",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) \
             INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, created_at, finished_at) \
             SELECT 'plan_q', CASE WHEN i % 2 = 0 THEN 'plan_a' ELSE 'plan_b' END, '{}', \
                    CASE WHEN i % 10 < 8 THEN 'done' WHEN i % 10 = 8 THEN 'failed' ELSE 'cancelled' END, 0, \
                    1700000000000000 - i * 1000000, 1, 3, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) - (1100001 - i) * 1000000, 1700000000000000 - i * 1000000 FROM n",
            "ANALYZE",
        ),
    };
    // Finished rows first: as in a live table, the pending ones are the newest.
    db.execute(finished, &[]).await.unwrap();
    db.execute(pending, &[]).await.unwrap();
    db.execute(TAG_ROWS, &[]).await.unwrap();
    let _ = db.fetch_all::<(String,)>(analyze, &[]).await;
    println!(
        "{}: filled {} rows in {:?}",
        db.name(),
        PENDING + FINISHED,
        start.elapsed()
    );
}

/// Empties the table and the tags' index (SQLite's unfiltered DELETE
/// truncates too, and cascades; MySQL truncates a table another's foreign
/// key references only with the checks off, in the session that does it).
async fn empty(db: &Db) {
    match db {
        Db::MySql(pool) => {
            sqlx::raw_sql(
                "SET FOREIGN_KEY_CHECKS = 0; TRUNCATE TABLE jobq_job_tags; \
                 TRUNCATE TABLE jobq_jobs; SET FOREIGN_KEY_CHECKS = 1",
            )
            .execute(pool)
            .await
            .unwrap();
        }
        Db::Postgres(_) => {
            db.execute("TRUNCATE TABLE jobq_jobs, jobq_job_tags", &[])
                .await
                .unwrap();
        }
        Db::Sqlite(_) => {
            db.execute("DELETE FROM jobq_jobs", &[]).await.unwrap();
        }
    }
}

/// Tags a row in every 1,000 `plan_rare` and every other row `plan_common`.
const TAG_ROWS: &str = "INSERT INTO jobq_job_tags (job_id, tag) \
     SELECT id, 'plan_rare' FROM jobq_jobs WHERE id % 1000 = 0 \
     UNION ALL SELECT id, 'plan_common' FROM jobq_jobs WHERE id % 2 = 0";

/// What a statement's plan must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// No scan of the table: read through an index, which may be a walk of
    /// the primary key in the page's order (a page stops once it is full).
    Index,
    /// A range of an index that the filter bounds: neither a scan of the
    /// table nor a walk of a whole index (what a count, or a page whose
    /// matches are rare, would read to the end).
    Range,
    /// No index serves this filter on this backend (said in the docs): the
    /// plan is printed, not checked; the time bound still holds.
    Printed,
}

/// One statement to check: a name, what to build, for which filter, past
/// which id, and what its plan must show.
type Case = (&'static str, Kind, JobFilter, Option<(Order, i64)>, Expect);

/// `sql` with `binds`, as the store binds them, run through `run`.
macro_rules! bound {
    ($query:expr, $binds:expr, $time:expr) => {{
        let mut query = $query;
        for bind in $binds {
            query = match bind {
                Bind::Text(t) => query.bind(t.clone()),
                Bind::Int(n) => query.bind(*n),
                Bind::Time(t) => query.bind($time(t)),
            };
        }
        query
    }};
}

/// The limit `kind`'s statement runs with: a page of a list, or of a bulk
/// action's ids.
fn limit(jobq: &Jobq, kind: Kind) -> i64 {
    match kind {
        Kind::Retry | Kind::Cancel => bulk_page(jobq),
        _ => 51,
    }
}

/// The plan of `kind` for `filter`, as lines of text.
async fn plan(jobq: &Jobq, kind: Kind, filter: &JobFilter, after: Option<(Order, i64)>) -> String {
    let (sql, binds) = filtered_statement(jobq, kind, filter, after, limit(jobq, kind))
        .await
        .expect("applies");
    match Db::of(jobq) {
        Db::MySql(pool) => {
            let explain = format!("EXPLAIN {sql}");
            let naive = |t: &chrono::DateTime<chrono::Utc>| t.naive_utc();
            let rows = bound!(sqlx::query(&explain), &binds, naive)
                .fetch_all(&pool)
                .await
                .unwrap();
            rows.iter()
                .map(|row| {
                    let get = |c: &str| {
                        row.try_get::<Option<String>, _>(c)
                            .ok()
                            .flatten()
                            .unwrap_or_default()
                    };
                    format!(
                        "type={} key={} rows={} extra={}",
                        get("type"),
                        get("key"),
                        row.try_get::<Option<u64>, _>("rows")
                            .ok()
                            .flatten()
                            .map(|r| r.to_string())
                            .unwrap_or_else(|| get("rows")),
                        get("Extra")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        Db::Postgres(pool) => {
            let explain = format!("EXPLAIN {sql}");
            let same = |t: &chrono::DateTime<chrono::Utc>| *t;
            bound!(sqlx::query_scalar::<_, String>(&explain), &binds, same)
                .fetch_all(&pool)
                .await
                .unwrap()
                .join("\n")
        }
        Db::Sqlite(pool) => {
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let micros = |t: &chrono::DateTime<chrono::Utc>| t.timestamp_micros();
            let query = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain);
            let rows = bound!(query, &binds, micros)
                .fetch_all(&pool)
                .await
                .unwrap();
            rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
        }
    }
}

/// Runs one page of a bulk action's ids (a plain read); how long it took.
async fn time_ids(
    jobq: &Jobq,
    kind: Kind,
    filter: &JobFilter,
    after: Option<(Order, i64)>,
) -> Duration {
    let (sql, binds) = filtered_statement(jobq, kind, filter, after, limit(jobq, kind))
        .await
        .expect("applies");
    let start = Instant::now();
    match Db::of(jobq) {
        Db::MySql(pool) => {
            let naive = |t: &chrono::DateTime<chrono::Utc>| t.naive_utc();
            bound!(sqlx::query_scalar::<_, i64>(&sql), &binds, naive)
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        Db::Postgres(pool) => {
            let same = |t: &chrono::DateTime<chrono::Utc>| *t;
            bound!(sqlx::query_scalar::<_, i64>(&sql), &binds, same)
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        Db::Sqlite(pool) => {
            let micros = |t: &chrono::DateTime<chrono::Utc>| t.timestamp_micros();
            bound!(sqlx::query_scalar::<_, i64>(&sql), &binds, micros)
                .fetch_all(&pool)
                .await
                .unwrap();
        }
    }
    start.elapsed()
}

/// Whether `plan` reads the whole table.
fn full_scan(backend: Backend, plan: &str) -> bool {
    match backend {
        Backend::MySql => plan.lines().any(|l| l.starts_with("type=ALL")),
        Backend::Postgres => plan.contains("Seq Scan"),
        _ => plan
            .lines()
            .any(|l| l.trim() == "SCAN jobq_jobs" || l.trim() == "SCAN jobq_job_tags"),
    }
}

/// Whether `plan` reads a whole index, or the table: no index range bounded
/// by the filter.
fn unbounded(backend: Backend, plan: &str) -> bool {
    full_scan(backend, plan)
        || match backend {
            Backend::MySql => plan.lines().any(|l| l.starts_with("type=index ")),
            // Every index node has a condition on its index, or it walks it all.
            Backend::Postgres => !plan.contains("Index Cond"),
            _ => plan.lines().any(|l| l.trim().starts_with("SCAN jobq_jobs")),
        }
}

async fn list_and_bulk_statements_read_through_an_index(db: TestDb) {
    let jobq = plan_db(&db).await;
    let backend = db.backend();
    let pg = backend == Backend::Postgres;
    let sqlite = backend == Backend::Sqlite;
    let q = || JobFilter::new().queue(QUEUE);
    let rare = || JobFilter::new().tag("plan_rare");
    let common = || JobFilter::new().tag("plan_common");
    let key = || JobFilter::new().key_prefix("p/12");
    let name = || JobFilter::new().job_name("plan_a");
    let since = chrono::Utc::now() - chrono::Duration::hours(1);
    let last_hour = || JobFilter::new().created(Some(since), None);
    let long_ago = chrono::Utc::now() - chrono::Duration::days(10);
    let day =
        || JobFilter::new().created(Some(long_ago - chrono::Duration::days(1)), Some(long_ago));
    // PostgreSQL has no index by job name: one would be written at every
    // claim, heartbeat and settle (none of its updates of jobq_jobs is
    // HOT), so these walk the primary key (a page stops once full) or scan
    // (a count). An enqueue-time bound is a range of ids on every backend
    // (`filter::Window`): a range of the primary key, or of the job name
    // index with a name.
    let unindexed_on_pg = |expect| if pg { Printed } else { expect };
    use Expect::{Index, Printed, Range};
    use Kind::{Cancel, Count, List, Retry};
    use Order::{NewestFirst as Newest, OldestFirst as Oldest};
    let cases: Vec<Case> = vec![
        // The walk of the primary key that stops once the page is full
        // (SQLite reports it as a table SCAN in rowid order).
        (
            "every job, newest first",
            List(Newest),
            JobFilter::new(),
            None,
            if sqlite { Printed } else { Index },
        ),
        (
            "every job, past a cursor",
            List(Newest),
            JobFilter::new(),
            Some((Newest, 500_000)),
            Index,
        ),
        (
            "every job, oldest first",
            List(Oldest),
            JobFilter::new(),
            Some((Oldest, 500_000)),
            Index,
        ),
        ("a queue", List(Newest), q(), None, Index),
        (
            "a queue's pending",
            List(Newest),
            q().status(JobStatus::Pending),
            None,
            Index,
        ),
        (
            "a queue's pending, oldest first, past a cursor",
            List(Oldest),
            q().status(JobStatus::Pending),
            Some((Oldest, 1_050_000)),
            Index,
        ),
        (
            "a queue's done, oldest first",
            List(Oldest),
            q().status(JobStatus::Done),
            None,
            Index,
        ),
        (
            "a queue's processing",
            List(Newest),
            q().status(JobStatus::Processing),
            None,
            Index,
        ),
        (
            "a queue's failed",
            List(Newest),
            q().status(JobStatus::Failed),
            None,
            Index,
        ),
        (
            "pending anywhere",
            List(Newest),
            JobFilter::new().status(JobStatus::Pending),
            None,
            Index,
        ),
        ("a key prefix", List(Oldest), key(), None, Index),
        (
            "a job name",
            List(Newest),
            name(),
            None,
            unindexed_on_pg(Range),
        ),
        (
            "a job name, oldest first, past a cursor",
            List(Oldest),
            name(),
            Some((Oldest, 500_000)),
            unindexed_on_pg(Range),
        ),
        (
            "a queue's jobs of a job name",
            List(Newest),
            q().job_name("plan_b"),
            None,
            unindexed_on_pg(Range),
        ),
        (
            "created in the last hour",
            List(Newest),
            last_hour(),
            None,
            Range,
        ),
        (
            "created on one day long ago, oldest first",
            List(Oldest),
            day(),
            None,
            Range,
        ),
        (
            "count of a queue's pending",
            Count,
            q().status(JobStatus::Pending),
            None,
            Range,
        ),
        (
            "count of a queue's processing",
            Count,
            q().status(JobStatus::Processing),
            None,
            Range,
        ),
        (
            "count of a key prefix",
            Count,
            key(),
            None,
            if pg { Printed } else { Range },
        ),
        (
            "count of a queue",
            Count,
            q(),
            None,
            if pg { Printed } else { Range },
        ),
        (
            "count of a job name",
            Count,
            name(),
            None,
            unindexed_on_pg(Range),
        ),
        (
            "count of a queue's failed of a job name",
            Count,
            q().status(JobStatus::Failed).job_name("plan_a"),
            None,
            unindexed_on_pg(Range),
        ),
        (
            "count of a job name created in the last hour",
            Count,
            name().created(Some(since), None),
            None,
            unindexed_on_pg(Range),
        ),
        (
            "count created in the last hour",
            Count,
            last_hour(),
            None,
            Range,
        ),
        ("retry ids of a queue", Retry, q(), None, Index),
        (
            "retry ids of a queue's failed",
            Retry,
            q().status(JobStatus::Failed),
            None,
            Index,
        ),
        (
            "retry ids of a job name",
            Retry,
            name(),
            None,
            unindexed_on_pg(Range),
        ),
        ("cancel ids of a queue", Cancel, q(), None, Index),
        (
            "cancel ids of a queue's pending",
            Cancel,
            q().status(JobStatus::Pending),
            None,
            Index,
        ),
        ("cancel ids of a key prefix", Cancel, key(), None, Index),
        // A tag: the tags' index, each job by its primary key (or, for a
        // tag on most rows, the primary key walked in the page's order).
        ("a rare tag", List(Newest), rare(), None, Index),
        (
            "a rare tag, oldest first",
            List(Oldest),
            rare(),
            None,
            Index,
        ),
        ("a common tag", List(Newest), common(), None, Index),
        (
            "a queue's failed with a rare tag",
            List(Newest),
            q().status(JobStatus::Failed).tag("plan_rare"),
            None,
            Index,
        ),
        ("count of a rare tag", Count, rare(), None, Range),
        ("cancel ids of a rare tag", Cancel, rare(), None, Index),
        (
            "cancel ids created in the last hour",
            Cancel,
            last_hour(),
            None,
            Range,
        ),
    ];
    let mut failures = Vec::new();
    for (name, kind, filter, after, expect) in cases {
        let plan = plan(&jobq, kind, &filter, after).await;
        let took = match kind {
            List(order) => {
                let page = Page::first(50)
                    .order(order)
                    .after(after.map(|(_, id)| id.to_string().parse().unwrap()));
                let start = Instant::now();
                jobq.list(&filter, page).await.unwrap();
                start.elapsed()
            }
            Count => {
                let start = Instant::now();
                jobq.count_where(&filter).await.unwrap();
                start.elapsed()
            }
            Retry | Cancel => time_ids(&jobq, kind, &filter, after).await,
        };
        println!("{backend:?} {name} ({expect:?}, ran in {took:?}):\n{plan}\n");
        // SQLite's planner, from ANALYZE's statistics, may take a page of a
        // queue that holds most rows by walking the rowid in the page's
        // order (no sort), which stops as soon as the page is full.
        let page_walk = backend == Backend::Sqlite
            && matches!(kind, List(_))
            && plan.trim() == "SCAN jobq_jobs";
        match expect {
            Index if full_scan(backend, &plan) && !page_walk => {
                failures.push(format!("{name}: a full scan:\n{plan}"));
            }
            Range if unbounded(backend, &plan) => {
                failures.push(format!("{name}: no index range bounds it:\n{plan}"));
            }
            _ => {}
        }
        if took > BOUND {
            failures.push(format!("{name}: took {took:?}, over {BOUND:?}"));
        }
    }
    if std::env::var("JOBQ_PLAN_KEEP").is_err() {
        let rows = Db::of(&jobq);
        empty(&rows).await;
        drop(rows);
        drop(jobq);
        if backend != Backend::Sqlite {
            jobq_tests::scratch::drop_database(backend, db.url(), &db_name(&db)).await;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

jobq_tests::on_every_backend!(list_and_bulk_statements_read_through_an_index);
