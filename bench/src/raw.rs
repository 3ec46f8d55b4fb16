//! The raw SQL baseline: the same claim and settle jobq runs, written by hand,
//! on connections the caller holds; plus the table set-up every workload needs
//! (reset, backlog fill, finished-row history).

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Executor, MySql, MySqlPool, PgPool, Postgres, QueryBuilder, Sqlite, SqlitePool};

use crate::job::{BenchNoop, MAX_ATTEMPTS, NAME, Probe, QUEUE};

type Res<T> = Result<T, sqlx::Error>;

/// The lease the raw claim writes (jobq's default).
const LEASE_US: i64 = 30_000_000;
/// The `claimed_by` the raw claim writes.
const WORKER: &str = "raw-bench";
/// Rows per multi-row INSERT when filling a backlog.
const FILL_CHUNK: usize = 1000;

/// A pool on the bench database, of one backend.
#[derive(Debug, Clone)]
pub(crate) enum Db {
    MySql(MySqlPool),
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// One connection held by one raw task for the whole workload.
#[derive(Debug)]
pub(crate) enum Conn {
    MySql(PoolConnection<MySql>),
    Postgres(PoolConnection<Postgres>),
    Sqlite(PoolConnection<Sqlite>),
}

/// A claimed row: what a raw worker needs to run and settle it.
type Claimed = (i64, String, String, i32, i32, Option<String>);
/// [`Claimed`] as MySQL returns it (text columns with a binary collation come back as bytes).
type MySqlClaimed = (i64, Vec<u8>, Vec<u8>, i32, i32, Option<Vec<u8>>);

impl Db {
    /// Opens a pool of `max` connections with the session settings jobq uses:
    /// READ COMMITTED and a 5 s lock wait on MySQL; WAL, `synchronous =
    /// NORMAL` and a 10 s busy timeout on SQLite.
    pub(crate) async fn connect(url: &str, max: u32) -> Res<Self> {
        Ok(
            if url.starts_with("mysql:") || url.starts_with("mariadb:") {
                let url = url.replacen("mariadb:", "mysql:", 1);
                let pool = MySqlPoolOptions::new()
                .max_connections(max)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = 5").await?;
                        Ok(())
                    })
                })
                .connect_with(MySqlConnectOptions::from_str(&url)?)
                .await?;
                Self::MySql(pool)
            } else if url.starts_with("postgres") {
                Self::Postgres(
                    PgPoolOptions::new()
                        .max_connections(max)
                        .connect(url)
                        .await?,
                )
            } else {
                let options = SqliteConnectOptions::from_str(url)?
                    .create_if_missing(true)
                    .busy_timeout(Duration::from_secs(10))
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal);
                Self::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(max)
                        .connect_with(options)
                        .await?,
                )
            },
        )
    }

    pub(crate) async fn close(&self) {
        match self {
            Self::MySql(p) => p.close().await,
            Self::Postgres(p) => p.close().await,
            Self::Sqlite(p) => p.close().await,
        }
    }

    /// `n` connections, opened now (outside any timing).
    pub(crate) async fn conns(&self, n: usize) -> Res<Vec<Conn>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(match self {
                Self::MySql(p) => Conn::MySql(p.acquire().await?),
                Self::Postgres(p) => Conn::Postgres(p.acquire().await?),
                Self::Sqlite(p) => Conn::Sqlite(p.acquire().await?),
            });
        }
        Ok(out)
    }

    /// Empties the tables a measurement writes: the jobs and what hangs
    /// off them (tags, workflows, batches, and the concurrency keys' places
    /// and members, which a run cut short would otherwise leave holding
    /// the next run's keys until the reaper's key sweep).
    pub(crate) async fn reset(&self) -> Res<()> {
        match self {
            // The tags' index references the jobs: MySQL truncates them
            // only with the checks off (in the session that does it).
            Self::MySql(p) => {
                sqlx::raw_sql(
                    "SET FOREIGN_KEY_CHECKS = 0; TRUNCATE TABLE jobq_job_tags; \
                     TRUNCATE TABLE jobq_jobs; SET FOREIGN_KEY_CHECKS = 1; \
                     TRUNCATE TABLE jobq_flow_jobs; TRUNCATE TABLE jobq_deps; \
                     TRUNCATE TABLE jobq_batches; TRUNCATE TABLE jobq_batch_jobs; \
                     TRUNCATE TABLE jobq_keys; TRUNCATE TABLE jobq_key_jobs",
                )
                .execute(p)
                .await?;
            }
            Self::Postgres(p) => {
                p.execute(
                    "TRUNCATE jobq_jobs, jobq_job_tags, jobq_flow_jobs, jobq_deps, jobq_batches, \
                     jobq_batch_jobs, jobq_keys, jobq_key_jobs",
                )
                .await?;
            }
            // With the foreign key checks on, SQLite deletes a parent
            // table's rows one by one (writing every page of the table and
            // its indexes to the log, copied back by the checkpointer during
            // the next measurement); with them off (in the connection that
            // does it), `DELETE` without `WHERE` drops the pages at once.
            Self::Sqlite(p) => {
                p.execute(
                    "PRAGMA foreign_keys = OFF; DELETE FROM jobq_job_tags; \
                     DELETE FROM jobq_jobs; PRAGMA foreign_keys = ON; \
                     DELETE FROM jobq_flow_jobs; DELETE FROM jobq_deps; \
                     DELETE FROM jobq_batches; DELETE FROM jobq_batch_jobs; \
                     DELETE FROM jobq_keys; DELETE FROM jobq_key_jobs",
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Deletes every row that is not `done` (what a failed measurement left).
    pub(crate) async fn delete_unfinished(&self) -> Res<()> {
        self.execute("DELETE FROM jobq_jobs WHERE status <> 'done'")
            .await
    }

    /// Refreshes the planner's statistics (as autovacuum/autoanalyze would).
    pub(crate) async fn analyze(&self) -> Res<()> {
        match self {
            Self::MySql(p) => {
                p.execute("ANALYZE TABLE jobq_jobs").await?;
            }
            Self::Postgres(p) => {
                p.execute("ANALYZE jobq_jobs").await?;
            }
            Self::Sqlite(p) => {
                p.execute("ANALYZE").await?;
            }
        }
        Ok(())
    }

    /// Inserts `n` pending jobs fast (multi-row INSERTs in one transaction per
    /// chunk), then analyzes; on MySQL also waits for InnoDB's purge of the
    /// previous drain's old row versions.
    pub(crate) async fn fill(&self, n: u64) -> Res<()> {
        let mut conn = self.conns(1).await?.pop().expect("one connection");
        let mut i = 0;
        while i < n {
            let rows = usize::try_from((n - i).min(FILL_CHUNK as u64)).unwrap_or(FILL_CHUNK);
            let payloads: Vec<String> = (i..i + rows as u64)
                .map(|k| BenchNoop::nth(k, 0).json())
                .collect();
            conn.insert_rows(&payloads).await?;
            i += rows as u64;
        }
        drop(conn);
        self.analyze().await?;
        if let Self::MySql(_) = self {
            // The previous drain's purge, not this one's, would be measured.
            self.settle().await?;
        }
        Ok(())
    }

    /// Adds `n` finished (`done`) rows to the queue, as a long-running
    /// service's history: 1,000 by INSERT, then doubling with INSERT … SELECT.
    pub(crate) async fn add_history(&self, n: u64) -> Res<()> {
        let payload = BenchNoop::nth(0, 0).json();
        let seed = n.min(1000);
        let (now, lit) = match self {
            Self::MySql(_) => ("UTC_TIMESTAMP(6)", "'"),
            Self::Postgres(_) => ("now()", "'"),
            Self::Sqlite(_) => ("CAST(unixepoch('subsec') * 1000000 AS INTEGER)", "'"),
        };
        let row = format!(
            "({lit}{QUEUE}{lit}, {lit}{NAME}{lit}, {lit}{payload}{lit}, 'done', 0, {now}, 1, {MAX_ATTEMPTS}, {now}, {now})"
        );
        let columns = "INSERT INTO jobq_jobs (queue, job_name, payload, status, priority, run_at, attempts, max_attempts, created_at, finished_at)";
        let values = vec![row; usize::try_from(seed).unwrap_or(1000)].join(", ");
        self.execute(&format!("{columns} VALUES {values}")).await?;
        let mut have = seed;
        while have < n {
            let take = (n - have).min(have);
            let copy = format!(
                "{columns} SELECT queue, job_name, payload, status, priority, run_at, attempts, max_attempts, created_at, finished_at \
                 FROM (SELECT * FROM jobq_jobs WHERE status = 'done' LIMIT {take}) AS history"
            );
            self.execute(&copy).await?;
            have += take;
        }
        self.analyze().await?;
        self.settle().await
    }

    /// Lets the server finish the background work a bulk load leaves behind,
    /// as a table that grew over days would have: PostgreSQL's vacuum of the
    /// new rows (autovacuum would start it in the middle of the measurement)
    /// and its checkpoint, InnoDB's purge of their undo log and the flush of
    /// the table's pages, SQLite's checkpoint of the WAL.
    /// Waits until the server is done with what earlier measurements left
    /// behind (InnoDB's purge and page flushing, PostgreSQL's dirty buffers,
    /// SQLite's WAL), so that it is not charged to whichever side runs next.
    pub(crate) async fn quiesce(&self) -> Res<()> {
        match self {
            Self::MySql(_) => self.settle().await,
            Self::Postgres(p) => {
                p.execute("CHECKPOINT").await?;
                Ok(())
            }
            Self::Sqlite(p) => {
                p.execute("PRAGMA wal_checkpoint(TRUNCATE)").await?;
                Ok(())
            }
        }
    }

    async fn settle(&self) -> Res<()> {
        match self {
            Self::MySql(p) => {
                let deadline = std::time::Instant::now() + Duration::from_secs(120);
                loop {
                    let history: i64 = sqlx::query_scalar(
                        "SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'",
                    )
                    .fetch_optional(p)
                    .await?
                    .unwrap_or(0);
                    if history < 1000 || std::time::Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                // Writes the table's dirty pages out now: left to the page
                // cleaner (innodb_io_capacity 200 pages/s by default), the bulk
                // load's pages would be flushing throughout the measurement.
                let mut conn = p.acquire().await?;
                conn.execute("FLUSH TABLES jobq_jobs FOR EXPORT").await?;
                conn.execute("UNLOCK TABLES").await?;
            }
            Self::Postgres(p) => {
                p.execute("VACUUM ANALYZE jobq_jobs").await?;
                // The same for PostgreSQL's checkpoint after the bulk load,
                // and the full-page images every page's first change after it
                // would write to the WAL.
                p.execute("CHECKPOINT").await?;
            }
            Self::Sqlite(p) => {
                p.execute("PRAGMA wal_checkpoint(TRUNCATE)").await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn execute(&self, sql: &str) -> Res<()> {
        match self {
            Self::MySql(p) => {
                p.execute(sql).await?;
            }
            Self::Postgres(p) => {
                p.execute(sql).await?;
            }
            Self::Sqlite(p) => {
                p.execute(sql).await?;
            }
        }
        Ok(())
    }

    /// The server's version string.
    pub(crate) async fn version(&self) -> Res<String> {
        match self {
            Self::MySql(p) => sqlx::query_scalar("SELECT VERSION()").fetch_one(p).await,
            Self::Postgres(p) => sqlx::query_scalar("SHOW server_version").fetch_one(p).await,
            Self::Sqlite(p) => {
                let v: String = sqlx::query_scalar("SELECT sqlite_version()")
                    .fetch_one(p)
                    .await?;
                Ok(format!("SQLite {v}"))
            }
        }
    }

    /// Rows of the queue in `status`.
    pub(crate) async fn count(&self, status: &str) -> Res<i64> {
        let sql = "SELECT COUNT(*) FROM jobq_jobs WHERE queue = 'bench' AND status = ";
        match self {
            Self::MySql(p) => {
                sqlx::query_scalar(&format!("{sql}?"))
                    .bind(status)
                    .fetch_one(p)
                    .await
            }
            Self::Postgres(p) => {
                sqlx::query_scalar(&format!("{sql}$1"))
                    .bind(status)
                    .fetch_one(p)
                    .await
            }
            Self::Sqlite(p) => {
                sqlx::query_scalar(&format!("{sql}?"))
                    .bind(status)
                    .fetch_one(p)
                    .await
            }
        }
    }
}

/// Whether the error is one a raw loop should just retry (deadlock, lock wait, busy).
fn transient(error: &sqlx::Error) -> bool {
    error.as_database_error().is_some_and(|e| {
        matches!(
            e.code().as_deref(),
            Some("40001" | "40P01" | "55P03" | "5" | "517" | "261" | "6")
        ) || e
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|m| matches!(m.number(), 1213 | 1205 | 1020))
    })
}

impl Conn {
    /// One single-row INSERT (the payload is serialized here, as an app would).
    pub(crate) async fn enqueue_one(&mut self, job: &BenchNoop) -> Res<()> {
        let payload = job.json();
        match self {
            Self::MySql(c) => {
                sqlx::query("INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
                             VALUES (?, ?, ?, 0, UTC_TIMESTAMP(6), ?, UTC_TIMESTAMP(6))")
                    .bind(QUEUE).bind(NAME).bind(payload).bind(MAX_ATTEMPTS)
                    .execute(&mut **c).await?;
            }
            Self::Postgres(c) => {
                sqlx::query("INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
                             VALUES ($1, $2, $3, 0, now(), $4, now())")
                    .bind(QUEUE).bind(NAME).bind(payload).bind(MAX_ATTEMPTS)
                    .execute(&mut **c).await?;
            }
            Self::Sqlite(c) => {
                let now = now_micros();
                sqlx::query("INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
                             VALUES (?, ?, ?, 0, ?, ?, ?)")
                    .bind(QUEUE).bind(NAME).bind(payload).bind(now).bind(MAX_ATTEMPTS).bind(now)
                    .execute(&mut **c).await?;
            }
        }
        Ok(())
    }

    /// One multi-row INSERT of these jobs.
    pub(crate) async fn enqueue_many(&mut self, jobs: &[BenchNoop]) -> Res<()> {
        let payloads: Vec<String> = jobs.iter().map(BenchNoop::json).collect();
        self.insert_rows(&payloads).await
    }

    async fn insert_rows(&mut self, payloads: &[String]) -> Res<()> {
        const COLUMNS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) ";
        // One multi-row INSERT on `$conn`; `$now` pushes the time into the
        // row `$b` (an SQL function, or a bound value).
        macro_rules! insert {
            ($db:ty, $conn:expr, |$b:ident| $now:expr) => {{
                let mut q = QueryBuilder::<$db>::new(COLUMNS);
                q.push_values(payloads, |mut $b, p| {
                    $b.push_bind(QUEUE).push_bind(NAME).push_bind(p).push("0");
                    $now;
                    $b.push_bind(MAX_ATTEMPTS);
                    $now;
                });
                q.build().execute(&mut **$conn).await?;
            }};
        }
        match self {
            Self::MySql(c) => insert!(MySql, c, |b| b.push("UTC_TIMESTAMP(6)")),
            Self::Postgres(c) => insert!(Postgres, c, |b| b.push("now()")),
            Self::Sqlite(c) => {
                let now = now_micros();
                insert!(Sqlite, c, |b| b.push_bind(now));
            }
        }
        Ok(())
    }

    /// Claims up to `batch` due jobs, exactly as jobq does on this backend
    /// (MySQL: locking SELECT + UPDATE by id in one READ COMMITTED
    /// transaction; PostgreSQL: the one-statement CTE; SQLite: UPDATE …
    /// WHERE id IN (SELECT … LIMIT) RETURNING), retrying transient errors.
    async fn claim(&mut self, batch: u32, token: i64) -> Res<Vec<Claimed>> {
        loop {
            match self.claim_once(batch, token).await {
                Err(e) if transient(&e) => continue,
                other => return other,
            }
        }
    }

    async fn claim_once(&mut self, batch: u32, token: i64) -> Res<Vec<Claimed>> {
        match self {
            Self::MySql(c) => {
                let mut tx = sqlx::Connection::begin(&mut **c).await?;
                let rows: Vec<MySqlClaimed> = sqlx::query_as(
                    "SELECT id, job_name, payload, attempts, max_attempts, idempotency_key FROM jobq_jobs \
                     WHERE queue = ? AND status = 'pending' AND run_at <= UTC_TIMESTAMP(6) \
                     ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
                )
                .bind(QUEUE)
                .bind(batch)
                .fetch_all(&mut *tx)
                .await?;
                if rows.is_empty() {
                    tx.commit().await?;
                    return Ok(Vec::new());
                }
                let mut q = QueryBuilder::<MySql>::new(
                    "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, lease_token = ",
                );
                q.push_bind(token)
                    .push(", run_at = UTC_TIMESTAMP(6) + INTERVAL ")
                    .push_bind(LEASE_US)
                    .push(" MICROSECOND, claimed_by = ")
                    .push_bind(WORKER)
                    .push(", claimed_at = UTC_TIMESTAMP(6) WHERE id IN (");
                let mut ids = q.separated(", ");
                for row in &rows {
                    ids.push_bind(row.0);
                }
                q.push(")");
                q.build().execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, name, payload, a, m, key)| {
                        (
                            id,
                            utf8(name),
                            utf8(payload),
                            a + 1,
                            m,
                            key.map(utf8),
                        )
                    })
                    .collect())
            }
            Self::Postgres(c) => {
                sqlx::query_as(
                    "WITH picked AS (
                        SELECT id FROM jobq_jobs
                         WHERE queue = $1 AND status = 'pending' AND run_at <= now()
                         ORDER BY priority, run_at, id
                         LIMIT $2
                           FOR UPDATE SKIP LOCKED
                    )
                    UPDATE jobq_jobs AS j
                       SET status = 'processing', attempts = j.attempts + 1, lease_token = $3,
                           run_at = now() + $4 * interval '1 microsecond', claimed_by = $5, claimed_at = now()
                     WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
                    RETURNING j.id, j.job_name, j.payload, j.attempts, j.max_attempts, j.idempotency_key",
                )
                .bind(QUEUE)
                .bind(i64::from(batch))
                .bind(token)
                .bind(LEASE_US)
                .bind(WORKER)
                .fetch_all(&mut **c)
                .await
            }
            Self::Sqlite(c) => {
                let now = now_micros();
                let rows: Vec<(i64, String, String, i64, i64, Option<String>)> = sqlx::query_as(
                    "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, \
                     lease_token = ?1, run_at = ?3, claimed_by = ?4, claimed_at = ?2 \
                     WHERE id IN (SELECT id FROM jobq_jobs \
                                  WHERE queue = ?5 AND status = 'pending' AND run_at <= ?2 \
                                  ORDER BY priority, run_at, id LIMIT ?6) \
                     RETURNING id, job_name, payload, attempts, max_attempts, idempotency_key",
                )
                .bind(token)
                .bind(now)
                .bind(now + LEASE_US)
                .bind(WORKER)
                .bind(QUEUE)
                .bind(batch)
                .fetch_all(&mut **c)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, n, p, a, m, k)| {
                        (
                            id,
                            n,
                            p,
                            i32::try_from(a).unwrap_or(0),
                            i32::try_from(m).unwrap_or(0),
                            k,
                        )
                    })
                    .collect())
            }
        }
    }

    /// One fenced settle UPDATE for the whole batch; returns rows changed.
    async fn settle(&mut self, ids: &[i64], token: i64) -> Res<u64> {
        loop {
            match self.settle_once(ids, token).await {
                Err(e) if transient(&e) => continue,
                other => return other,
            }
        }
    }

    async fn settle_once(&mut self, ids: &[i64], token: i64) -> Res<u64> {
        Ok(match self {
            Self::MySql(c) => {
                let mut q = QueryBuilder::<MySql>::new(
                    "UPDATE jobq_jobs SET status = 'done', finished_at = UTC_TIMESTAMP(6), lease_token = NULL \
                     WHERE status = 'processing' AND lease_token = ",
                );
                q.push_bind(token).push(" AND id IN (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
                q.build().execute(&mut **c).await?.rows_affected()
            }
            Self::Postgres(c) => sqlx::query(
                "UPDATE jobq_jobs SET status = 'done', finished_at = now(), lease_token = NULL \
                 WHERE status = 'processing' AND lease_token = $1 AND id = ANY($2)",
            )
            .bind(token)
            .bind(ids)
            .execute(&mut **c)
            .await?
            .rows_affected(),
            Self::Sqlite(c) => {
                let mut q = QueryBuilder::<Sqlite>::new(
                    "UPDATE jobq_jobs SET status = 'done', lease_token = NULL, finished_at = ",
                );
                q.push_bind(now_micros())
                    .push(" WHERE status = 'processing' AND lease_token = ")
                    .push_bind(token)
                    .push(" AND id IN (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
                q.build().execute(&mut **c).await?.rows_affected()
            }
        })
    }

    /// Claims batches of `batch` until the queue looks empty: deserialize each
    /// payload, run the no-op, settle the batch in one UPDATE. Returns jobs done.
    pub(crate) async fn drain(&mut self, batch: u32, probe: &Probe) -> Res<u64> {
        let mut done = 0;
        loop {
            let token = rand::random::<i64>() & i64::MAX;
            let claimed = self.claim(batch, token).await?;
            if claimed.is_empty() {
                return Ok(done);
            }
            let mut ids = Vec::with_capacity(claimed.len());
            for (id, _name, payload, _attempt, _max, _key) in &claimed {
                let job: BenchNoop =
                    serde_json::from_str(payload).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
                probe.ran(job.sent_at_us);
                ids.push(*id);
            }
            let settled = self.settle(&ids, token).await?;
            assert_eq!(settled, ids.len() as u64, "a raw settle was fenced out");
            done += settled;
        }
    }
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8 column")
}

fn now_micros() -> i64 {
    i64::try_from(crate::job::now_us()).unwrap_or(i64::MAX)
}
