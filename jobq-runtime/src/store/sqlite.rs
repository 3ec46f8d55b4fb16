//! SQLite 3.35+: one writer at a time, so every write is a single autocommit
//! statement and no claim needs SKIP LOCKED.
//!
//! Facts behind this SQL (sqlx 0.8.6, bundled SQLite 3.46):
//! - a write statement in autocommit takes the write lock when it starts, and
//!   waits for it under the busy timeout. A *deferred* transaction that reads
//!   and then writes fails at once with `SQLITE_BUSY`/`SQLITE_BUSY_SNAPSHOT`
//!   when another connection wrote in between, whatever the busy timeout. So the
//!   claim is one `UPDATE … WHERE id IN (SELECT … LIMIT ?) RETURNING …`, the
//!   reaper one `UPDATE`, and the only multi-statement transactions jobq opens
//!   (batch enqueue, migrations) begin `IMMEDIATE`;
//! - the order of `RETURNING` rows is unspecified, so nothing relies on it: a
//!   claimed batch is sorted in Rust, and a batch enqueue is one single-row
//!   INSERT per job inside one `BEGIN IMMEDIATE` transaction (no network round
//!   trip, so this costs microseconds per row);
//! - times are INTEGER unix microseconds from the application's clock, passed
//!   as parameters (an embedded queue has one clock); `run_at` of a
//!   `processing` row is its lease deadline;
//! - the claim's `ORDER BY priority, run_at, id` is served by the
//!   `(queue, status, priority, run_at, id)` index, without a temporary B-tree.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteError, SqliteJournalMode, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection, Executor, Row, Sqlite, SqliteConnection, SqlitePool};

use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::stash::Stash;
use super::{
    ClaimedJob, Fence, NewJob, Prunable, Target, Transition, micros, migrate, new_token_base,
    retry_transient, row_token,
};
use crate::types::{Enqueued, JobInfo, RunAt};
use crate::{Error, Result};

/// How long a statement waits for another connection's write lock before
/// failing with `SQLITE_BUSY` (which jobq then retries for its own statements).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// `UPDATE … RETURNING` and `INSERT … ON CONFLICT … RETURNING` arrived in 3.35.
const MIN_VERSION: (u32, u32) = (3, 35);

const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";

/// `?1` queue … `?8` created_at. A duplicate key bumps `dedupe_hits` and
/// returns the existing row, so `dedupe_hits > 0` means "duplicate".
const INSERT: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (idempotency_key) DO UPDATE SET dedupe_hits = dedupe_hits + 1 \
     RETURNING id, dedupe_hits";

/// [`INSERT`] for a job without a key, with the same parameters (`?7`, the
/// key, unused).
const INSERT_KEYLESS: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8)";

/// `?1` queue, `?2` now, `?3` limit: the claim's rows, in claim order.
const PICK: &str = "SELECT id FROM jobq_jobs \
     WHERE queue = ?1 AND status = 'pending' AND run_at <= ?2 \
     ORDER BY priority, run_at, id LIMIT ?3";

/// `?1` the claim's token base (each row's token is base + id, see
/// [`super::new_token_base`]), `?2` now, `?3` lease deadline, `?4` worker,
/// `?5` the picked ids as a JSON array (one statement text for any batch
/// size). The text columns come back as bytes: SQLite holds whatever another
/// program wrote (a BLOB, text that is not UTF-8), and one such row must fail
/// on its own, not fail every claim of its queue (see [`ClaimedJob::from_bytes`]).
const CLAIM: &str = "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, \
     lease_token = ?1 + id, run_at = ?3, claimed_by = ?4, claimed_at = ?2 \
     WHERE id IN (SELECT value FROM json_each(?5)) \
     RETURNING id, CAST(job_name AS BLOB), CAST(payload AS BLOB), attempts, max_attempts, \
     CAST(idempotency_key AS BLOB)";

/// `?1` status, `?2` new run_at, `?3` refunded attempts, `?4` error, `?5` now,
/// `?6` id, `?7` token. SQLite's SET sees the old row, hence `?1` in `finished_at`.
const TRANSITION: &str = "UPDATE jobq_jobs SET status = ?1, run_at = ?2, attempts = attempts - ?3, \
     last_error = COALESCE(?4, last_error), \
     finished_at = CASE WHEN ?1 = 'failed' THEN ?5 ELSE NULL END, \
     lease_token = NULL \
     WHERE id = ?6 AND lease_token = ?7 AND status = 'processing'";

/// `?1` now, `?2` queue, `?3` limit. A single statement: with one writer at a
/// time there is no lock order to get wrong (unlike InnoDB).
/// An orphan keeps its place in line: `run_at` goes back to when it was enqueued.
const REAP: &str = "UPDATE jobq_jobs SET \
     last_error = 'lease expired during attempt ' || attempts || ': worker ' || COALESCE(claimed_by, '?') \
         || ' stopped renewing it (crashed, killed or stalled)', \
     finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END, \
     status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END, \
     run_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE created_at END, lease_token = NULL \
     WHERE id IN (SELECT id FROM jobq_jobs \
                  WHERE queue = ?2 AND status = 'processing' AND run_at < ?1 \
                  ORDER BY priority, run_at, id LIMIT ?3)";

/// Text columns as bytes, decoded lossily: any row can be inspected.
const JOB: &str = "SELECT id, CAST(queue AS BLOB) AS queue, CAST(job_name AS BLOB) AS job_name, \
     CAST(payload AS BLOB) AS payload, status, priority, attempts, max_attempts, run_at, \
     CAST(idempotency_key AS BLOB) AS idempotency_key, CAST(last_error AS BLOB) AS last_error, \
     CAST(claimed_by AS BLOB) AS claimed_by, claimed_at, created_at, finished_at \
     FROM jobq_jobs WHERE id = ?1";

/// Finished rows of two statuses, oldest first, through `jobq_jobs_finished`.
pub const PRUNE: &str = "DELETE FROM jobq_jobs WHERE id IN ( \
     SELECT id FROM jobq_jobs WHERE finished_at < ?1 AND status IN (?2, ?3) \
     ORDER BY finished_at LIMIT ?4) \
     AND status IN (?2, ?3)";

const CANCEL: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = ?1, run_at = ?1, lease_token = NULL \
     WHERE id = ?2 AND status IN ('pending', 'processing')";

const RETRY: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = ?1, finished_at = NULL, \
     max_attempts = MAX(max_attempts, attempts + 1) \
     WHERE id = ?2 AND status IN ('failed', 'cancelled')";

/// Rows per statement of a batch enqueue (SQLite's limit on bound parameters
/// is 32,766: 1,000 rows of 7). A longer batch runs its chunks in one
/// transaction, so it holds the write lock for all of them.
const INSERT_CHUNK: usize = 1000;
/// Ids per settle or heartbeat statement: bounds how long one holds the
/// write lock.
const IN_CHUNK: usize = 1024;

/// WAL pages a commit may leave before SQLite makes the committing
/// connection copy the log into the database (`wal_autocheckpoint`, 1,000 by
/// default) on the pools jobq opens. The checkpointer task normally keeps the
/// log far below this; the limit is a backstop for when it cannot run.
const WAL_AUTOCHECKPOINT_BACKSTOP: u32 = 10_000;
/// Pause between checkpoints while writes arrive.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);
/// Longest pause between checkpoints when nothing is written.
const CHECKPOINT_IDLE: Duration = Duration::from_secs(2);

const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

/// `SQLITE_BUSY` and `SQLITE_LOCKED` with all their extended codes
/// (`SQLITE_BUSY_SNAPSHOT` 517, `SQLITE_BUSY_RECOVERY` 261,
/// `SQLITE_LOCKED_SHAREDCACHE` 262, …): another connection holds a lock.
fn is_transient(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<SqliteError>())
        .and_then(sqlx::error::DatabaseError::code)
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED))
}

/// A single-row enqueue waiting for a shared write, and where its answer goes.
#[derive(Debug)]
struct Queued {
    seq: u64,
    job: NewJob,
    reply: oneshot::Sender<Result<Enqueued>>,
}

/// The answer of an enqueue whose shared write's task ended without sending
/// one (it panicked, or the runtime shut down under it): the row may or may
/// not be stored.
fn lost_shared_write() -> Error {
    Error::Database(sqlx::Error::WorkerCrashed)
}

/// Most rows one shared write takes (the rest wait for the next turn).
const SHARED_WRITE_MAX: usize = 256;

/// The SQLite store.
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    pool: SqlitePool,
    /// Taken around each of jobq's own writes: they queue here, in order,
    /// instead of colliding on the database's write lock, where the loser
    /// sleeps in SQLite's busy handler (1 ms, then 2, 5, 10, …) even when the
    /// winner is done in microseconds. Writes from other processes or
    /// handles still meet the busy timeout.
    writes: Arc<tokio::sync::Mutex<()>>,
    /// The connection for those writes: taking turns, they reuse the same
    /// one, whose page cache stays warm.
    conns: Stash<Sqlite>,
    /// Single-row enqueues waiting to be written by whichever of them gets
    /// the next turn at `writes`.
    queued: Arc<std::sync::Mutex<Vec<Queued>>>,
    /// Numbers the queued enqueues, so each recognizes its own row.
    queued_seq: Arc<AtomicU64>,
    /// Stops the checkpointer task (pools jobq opened on a file) when the
    /// last clone of the store is dropped.
    _checkpointer: Option<Arc<DropGuard>>,
}

impl SqliteStore {
    /// Opens `url` (creating the file if missing) in WAL mode with
    /// `synchronous = NORMAL` and a 10 s busy timeout.
    ///
    /// An in-memory database (`sqlite::memory:`, `mode=memory`) gets a pool of
    /// exactly one connection that is never closed, whatever
    /// `max_connections` says: the database lives only as long as a connection
    /// to it, and one connection is also what a database with a single writer
    /// needs (sqlx opens it in shared-cache mode, where several connections
    /// would lock tables against each other instead of waiting on the busy
    /// timeout). Use a file for anything that has to survive the pool.
    pub(crate) async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = if is_memory(url) {
            SqlitePoolOptions::new()
                .test_before_acquire(false)
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?
        } else {
            // No ping before every checkout (sqlx's default): a round trip
            // to the connection's worker thread per statement.
            let options = options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .pragma(
                    "wal_autocheckpoint",
                    WAL_AUTOCHECKPOINT_BACKSTOP.to_string(),
                );
            // Processes opening a new file at once race to switch it to WAL;
            // the loser is told the database is busy without SQLite waiting
            // out the busy timeout, so the connect is tried again.
            let pool = retry_transient(is_transient, || {
                SqlitePoolOptions::new()
                    .test_before_acquire(false)
                    .max_connections(max_connections)
                    .connect_with(options.clone())
            })
            .await?;
            let mut store = Self::from_pool(pool).await?;
            let stop = CancellationToken::new();
            tokio::spawn(checkpoint_loop(store.pool.clone(), stop.clone()));
            store._checkpointer = Some(Arc::new(stop.drop_guard()));
            return Ok(store);
        };
        Self::from_pool(pool).await
    }

    /// Uses the caller's pool; checks that its SQLite has `RETURNING`.
    pub(crate) async fn from_pool(pool: SqlitePool) -> Result<Self> {
        let version: String = sqlx::query_scalar("SELECT sqlite_version()")
            .fetch_one(&pool)
            .await?;
        if !version_at_least(&version, MIN_VERSION) {
            return Err(Error::UnsupportedServerVersion {
                backend: crate::Backend::Sqlite,
                version,
                needs: format!("{}.{}", MIN_VERSION.0, MIN_VERSION.1),
                because: "UPDATE … RETURNING",
            });
        }
        Ok(Self {
            conns: Stash::new(pool.clone()),
            pool,
            writes: Arc::default(),
            queued: Arc::default(),
            queued_seq: Arc::default(),
            _checkpointer: None,
        })
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Inside one `BEGIN IMMEDIATE` transaction: processes migrating a new
    /// file at once take turns, and the later ones find everything applied.
    pub(crate) async fn migrate(&self) -> Result<()> {
        let mut tx = self.pool.begin_with(BEGIN_IMMEDIATE).await?;
        tx.execute(
            "CREATE TABLE IF NOT EXISTS jobq_migrations (version INTEGER NOT NULL PRIMARY KEY, \
             description TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .await?;
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM jobq_migrations")
            .fetch_all(&mut *tx)
            .await?;
        for migration in migrate::pending(migrate::SQLITE, &applied) {
            tx.execute(migration.sql).await?;
            sqlx::query(
                "INSERT INTO jobq_migrations (version, description, applied_at) VALUES (?, ?, ?)",
            )
            .bind(migration.version)
            .bind(migration.description)
            .bind(now_micros())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Concurrent enqueues share a write: each queues its row, and the one
    /// whose turn at the write lock comes first writes every row queued by
    /// then in one transaction and answers the others, which find their
    /// answer when their own turn comes. With SQLite's single writer the
    /// statements would run one after another anyway; together they pay one
    /// commit and one turn. An enqueue dropped before its row was taken is
    /// not written.
    pub(crate) async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let (reply, mut answer) = oneshot::channel();
        let seq = self.queued_seq.fetch_add(1, AtomicOrdering::Relaxed);
        self.queued().push(Queued {
            seq,
            job: job.clone(),
            reply,
        });
        loop {
            let turn = Arc::clone(&self.writes).lock_owned().await;
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Closed) => return Err(lost_shared_write()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let mut batch = {
                let mut queued = self.queued();
                let take = queued.len().min(SHARED_WRITE_MAX);
                queued.drain(..take).collect::<Vec<_>>()
            };
            batch.retain(|q| !q.reply.is_closed());
            if batch.is_empty() {
                // Every row taken was given up by its caller; this one's
                // is further back in the queue.
                continue;
            }
            let mine = batch.iter().any(|q| q.seq == seq);
            if mine && batch.len() == 1 {
                // Only this enqueue's own row: written here, with nobody
                // else's answer riding on this future.
                let result = retry_transient(is_transient, || async {
                    let mut conn = self.conns.get().await?;
                    let result = insert_row(&mut conn, job, now_micros()).await;
                    conn.done(result)
                })
                .await;
                drop(turn);
                return result;
            }
            // Others wait on this write: it runs in a task of its own, so
            // that dropping this enqueue cannot abandon their rows.
            let store = self.clone();
            tokio::spawn(async move {
                store.write_shared(batch).await;
                drop(turn);
            });
            if mine {
                return answer.await.unwrap_or_else(|_| Err(lost_shared_write()));
            }
        }
    }

    fn queued(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `batch` in one statement (rows without keys) or one
    /// transaction, and answers each enqueue; if that fails, writes each row
    /// on its own, so that a bad row fails only its own enqueue. Called
    /// holding the write turn.
    async fn write_shared(&self, batch: Vec<Queued>) {
        let jobs: Vec<NewJob> = batch.iter().map(|q| q.job.clone()).collect();
        let keyless = jobs.iter().all(|job| job.idempotency_key.is_none());
        let together = retry_transient(is_transient, || async {
            let mut conn = self.conns.get().await?;
            let result = if keyless {
                insert_keyless(&mut conn, &jobs).await
            } else {
                insert_all(&mut conn, &jobs).await
            };
            conn.done(result)
        })
        .await;
        match together {
            Ok(results) => {
                for (queued, result) in batch.into_iter().zip(results) {
                    let _ = queued.reply.send(Ok(result));
                }
            }
            Err(_) => {
                for queued in batch {
                    let result = retry_transient(is_transient, || async {
                        let mut conn = self.conns.get().await?;
                        let result = insert_row(&mut conn, &queued.job, now_micros()).await;
                        conn.done(result)
                    })
                    .await;
                    let _ = queued.reply.send(result);
                }
            }
        }
    }

    /// All or nothing: a batch of one chunk is one statement or one
    /// transaction; a longer one runs its chunks in one `BEGIN IMMEDIATE`
    /// transaction (holding the write lock for all of them), so a row the
    /// database refuses leaves nothing of the batch behind.
    pub(crate) async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        if jobs.len() <= INSERT_CHUNK {
            return retry_transient(is_transient, || self.insert_each(jobs)).await;
        }
        retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let result = insert_chunks(&mut conn, jobs).await;
            conn.done(result)
        })
        .await
    }

    /// One INSERT per row in one `BEGIN IMMEDIATE` transaction: results in
    /// input order without relying on the order of a multi-row `RETURNING`.
    async fn insert_each(&self, chunk: &[NewJob]) -> Result<Vec<Enqueued>, sqlx::Error> {
        if chunk.iter().all(|job| job.idempotency_key.is_none()) {
            return self.insert_keyless(chunk).await;
        }
        let _turn = self.writes.lock().await;
        let mut conn = self.conns.get().await?;
        let result = insert_all(&mut conn, chunk).await;
        conn.done(result)
    }

    /// A batch without idempotency keys as one multi-row INSERT (see [`insert_keyless`]).
    async fn insert_keyless(&self, chunk: &[NewJob]) -> Result<Vec<Enqueued>, sqlx::Error> {
        let _turn = self.writes.lock().await;
        let mut conn = self.conns.get().await?;
        let result = insert_keyless(&mut conn, chunk).await;
        conn.done(result)
    }

    pub(crate) async fn claim(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        let base = new_token_base();
        let jobs = retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let result = claim_on(&mut conn, queue, limit, lease, worker, base).await;
            conn.done(result)
        })
        .await?;
        Ok(jobs
            .into_iter()
            .map(
                |(id, job_name, payload, attempts, max_attempts, idempotency_key)| {
                    ClaimedJob::from_bytes(
                        id,
                        job_name,
                        payload,
                        attempts,
                        max_attempts,
                        idempotency_key,
                        row_token(base, id),
                    )
                },
            )
            .collect())
    }

    pub(crate) async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        let mut total = 0;
        for chunk in fences.chunks(IN_CHUNK) {
            let update = Fenced::new(COMPLETE, chunk);
            total += retry_transient(is_transient, || async {
                let _turn = self.writes.lock().await;
                let mut conn = self.conns.get().await?;
                let result = update.query(now_micros()).execute(&mut *conn).await;
                Ok(conn.done(result)?.rows_affected())
            })
            .await?;
        }
        Ok(total)
    }

    pub(crate) async fn transition(&self, t: &Transition) -> Result<bool> {
        let status = match t.target {
            Target::Pending => "pending",
            Target::Failed => "failed",
        };
        let affected = retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let now = now_micros();
            let result = sqlx::query(TRANSITION)
                .bind(status)
                .bind(now.saturating_add(micros(t.delay)))
                .bind(i32::from(t.refund_attempt))
                .bind(&t.error)
                .bind(now)
                .bind(t.fence.id)
                .bind(t.fence.token)
                .execute(&mut *conn)
                .await;
            Ok(conn.done(result)?.rows_affected())
        })
        .await?;
        Ok(affected == 1)
    }

    /// No row locks here (one writer at a time): the plain heartbeat.
    pub(crate) async fn heartbeat_unlocked(
        &self,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let lost: HashSet<Fence> = self.heartbeat(fences, lease).await?.into_iter().collect();
        Ok(fences
            .iter()
            .filter(|f| !lost.contains(f))
            .copied()
            .collect())
    }

    /// One UPDATE per chunk; `RETURNING id, lease_token` tells exactly which
    /// fences still hold their row, so no second query is needed.
    pub(crate) async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let mut lost = Vec::new();
        for chunk in fences.chunks(IN_CHUNK) {
            let update = Fenced::new(HEARTBEAT, chunk);
            let held: HashSet<Fence> = retry_transient(is_transient, || async {
                let _turn = self.writes.lock().await;
                let mut conn = self.conns.get().await?;
                let result = update
                    .query(now_micros().saturating_add(micros(lease)))
                    .fetch_all(&mut *conn)
                    .await;
                let rows = conn.done(result)?;
                rows.iter()
                    .map(|row| {
                        Ok(Fence {
                            id: row.try_get(0)?,
                            token: row.try_get(1)?,
                        })
                    })
                    .collect()
            })
            .await?;
            lost.extend(chunk.iter().filter(|f| !held.contains(f)).copied());
        }
        Ok(lost)
    }

    pub(crate) async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let result = sqlx::query(REAP)
                .bind(now_micros())
                .bind(queue)
                .bind(limit)
                .execute(&mut *conn)
                .await;
            Ok(conn.done(result)?.rows_affected())
        })
        .await
    }

    pub(crate) async fn listen(
        &self,
        _queues: &[String],
        _stop: &tokio_util::sync::CancellationToken,
    ) {
    }

    pub(crate) async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
        let row = sqlx::query(JOB).bind(id).fetch_optional(&self.pool).await?;
        row.map(|row| job_info(&row)).transpose()
    }

    pub(crate) async fn prune(
        &self,
        which: Prunable,
        older_than: Duration,
        limit: u32,
    ) -> Result<u64> {
        // `IN (?2, ?3)`: one status is given twice.
        let statuses = which.statuses();
        let (a, b) = (statuses[0], statuses[statuses.len() - 1]);
        let deleted = retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let result = sqlx::query(PRUNE)
                .bind(now_micros() - micros(older_than))
                .bind(a)
                .bind(b)
                .bind(limit)
                .execute(&mut *conn)
                .await;
            Ok(conn.done(result)?.rows_affected())
        })
        .await?;
        Ok(deleted)
    }

    pub(crate) async fn cancel(&self, id: i64) -> Result<bool> {
        self.update_one(CANCEL, id).await
    }

    pub(crate) async fn retry(&self, id: i64) -> Result<bool> {
        self.update_one(RETRY, id).await
    }

    /// Runs `sql` with `?1` = now and `?2` = `id`; `true` if it changed the row.
    async fn update_one(&self, sql: &str, id: i64) -> Result<bool> {
        let affected = retry_transient(is_transient, || async {
            let _turn = self.writes.lock().await;
            let mut conn = self.conns.get().await?;
            let result = sqlx::query(sql)
                .bind(now_micros())
                .bind(id)
                .execute(&mut *conn)
                .await;
            Ok(conn.done(result)?.rows_affected())
        })
        .await?;
        Ok(affected == 1)
    }
}

/// One INSERT per row in one `BEGIN IMMEDIATE` transaction on `conn`.
async fn insert_all(
    conn: &mut SqliteConnection,
    chunk: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let now = now_micros();
    let mut out = Vec::with_capacity(chunk.len());
    for job in chunk {
        out.push(insert_row(&mut tx, job, now).await?);
    }
    tx.commit().await?;
    Ok(out)
}

/// Every chunk of `jobs` in one `BEGIN IMMEDIATE` transaction on `conn`:
/// keyless chunks as one multi-row INSERT each, the others row by row.
async fn insert_chunks(
    conn: &mut SqliteConnection,
    jobs: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let now = now_micros();
    let mut out = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(INSERT_CHUNK) {
        if chunk.iter().all(|job| job.idempotency_key.is_none()) {
            out.extend(insert_keyless(&mut tx, chunk).await?);
        } else {
            for job in chunk {
                out.push(insert_row(&mut tx, job, now).await?);
            }
        }
    }
    tx.commit().await?;
    Ok(out)
}

/// A batch without idempotency keys as one multi-row INSERT: nothing can
/// conflict, and the statement holds the write lock from its first row to
/// its last, so AUTOINCREMENT hands its rows consecutive ids in VALUES
/// order, ending at `last_insert_rowid()`. (A statement per row costs a
/// hop to the connection's worker thread each.)
async fn insert_keyless(
    conn: &mut SqliteConnection,
    chunk: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let now = now_micros();
    let mut insert = sqlx::QueryBuilder::<Sqlite>::new(
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) ",
    );
    insert.push_values(chunk, |mut row, job| {
        row.push_bind(&job.queue)
            .push_bind(&job.job_name)
            .push_bind(&job.payload)
            .push_bind(job.priority)
            .push_bind(run_at_micros(job.run_at, now))
            .push_bind(job.max_attempts)
            .push_bind(now);
    });
    let done = insert.build().execute(&mut *conn).await?;
    let n = chunk.len() as i64;
    if done.rows_affected() != chunk.len() as u64 {
        return Err(sqlx::Error::Protocol(format!(
            "a batch INSERT of {n} rows inserted {}",
            done.rows_affected()
        )));
    }
    let last = done.last_insert_rowid();
    Ok((last - n + 1..=last)
        .map(|id| Enqueued {
            id,
            duplicate: false,
        })
        .collect())
}

/// One idempotent INSERT on the caller's connection (their transaction, never retried).
///
/// A caller's transaction should begin `IMMEDIATE` if it reads before this
/// write: a deferred one fails with `SQLITE_BUSY_SNAPSHOT` when another
/// connection wrote since its read.
pub(crate) async fn insert(conn: &mut SqliteConnection, job: &NewJob) -> Result<Enqueued> {
    Ok(insert_row(conn, job, now_micros()).await?)
}

async fn insert_row(
    conn: &mut SqliteConnection,
    job: &NewJob,
    now: i64,
) -> Result<Enqueued, sqlx::Error> {
    let keyless = job.idempotency_key.is_none();
    // Nothing can conflict without a key: a plain INSERT, its id from the
    // connection (no conflict check, no row to send back from the worker thread).
    let query = sqlx::query(if keyless { INSERT_KEYLESS } else { INSERT })
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(run_at_micros(job.run_at, now))
        .bind(job.max_attempts)
        .bind(&job.idempotency_key)
        .bind(now);
    if keyless {
        let done = query.execute(&mut *conn).await?;
        return Ok(Enqueued {
            id: done.last_insert_rowid(),
            duplicate: false,
        });
    }
    let row = query.fetch_one(&mut *conn).await?;
    Ok(Enqueued {
        id: row.try_get(0)?,
        duplicate: row.try_get::<i64, _>(1)? > 0,
    })
}

/// When a job enqueued at `now` may first run, in unix µs.
fn run_at_micros(run_at: RunAt, now: i64) -> i64 {
    match run_at {
        RunAt::Now => now,
        RunAt::After(delay) => now.saturating_add(micros(delay)),
        RunAt::At(at) => at.timestamp_micros(),
    }
}

/// `id, job_name, payload, attempts, max_attempts, idempotency_key`, text as bytes.
type ClaimRow = (i64, Vec<u8>, Vec<u8>, i64, i64, Option<Vec<u8>>);

/// Picks the due rows in claim order and marks them held, in one
/// `BEGIN IMMEDIATE` transaction (no other writer in between). Two
/// statements, because an `UPDATE … RETURNING` hands rows back in no
/// particular order and has already overwritten the `run_at` they were
/// picked by; the result is in pick order.
async fn claim_on(
    conn: &mut SqliteConnection,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
    base: i64,
) -> Result<Vec<ClaimRow>, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let now = now_micros();
    let picked: Vec<i64> = sqlx::query_scalar(PICK)
        .bind(queue)
        .bind(now)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
    if picked.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let ids = json_list(&picked);
    let mut rows: Vec<ClaimRow> = sqlx::query_as(CLAIM)
        .bind(base)
        .bind(now)
        .bind(now.saturating_add(micros(lease)))
        .bind(worker)
        .bind(ids)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    let rank: std::collections::HashMap<i64, usize> =
        picked.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    rows.sort_unstable_by_key(|row| rank.get(&row.0).copied());
    Ok(rows)
}

/// `<set> WHERE status = 'processing' AND id IN <ids> AND lease_token IN <tokens><tail>`,
/// where `set` binds one value as `?1` and both lists arrive as JSON arrays
/// (`?2`, `?3`): one statement text for any batch size.
///
/// Not literal IN-lists: a connection plans with the statistics it loaded
/// when it opened, and with those of a small table (`ANALYZE` of 1,000 rows)
/// SQLite scanned the whole table for a list of 256 ids, which stayed the
/// plan after the table grew to a million finished rows: 200 ms per settle.
/// A `json_each` subquery is planned as a handful of rows, so each id is
/// looked up by primary key whatever the statistics say (tested).
///
/// Matching the two lists separately fences as exactly as matching pairs
/// because every row of a claim has a token of its own, `base + id`
/// ([`super::new_token_base`]): a fence's token names its row as well as its
/// claim, so a row matches another fence's token only if two random 62-bit
/// bases differ by exactly the difference of two ids. (With one token per
/// claim batch, a stale fence of a row batched with a fresh fence of another
/// row from the claim that re-took it matched that row.)
struct Fenced {
    sql: &'static str,
    ids: String,
    tokens: String,
}

/// `?1` finished_at.
const COMPLETE: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = ?1, run_at = ?1, lease_token = NULL \
     WHERE status = 'processing' AND id IN (SELECT value FROM json_each(?2)) \
     AND lease_token IN (SELECT value FROM json_each(?3))";

/// `?1` the new lease deadline.
const HEARTBEAT: &str = "UPDATE jobq_jobs SET run_at = ?1 \
     WHERE status = 'processing' AND id IN (SELECT value FROM json_each(?2)) \
     AND lease_token IN (SELECT value FROM json_each(?3)) \
     RETURNING id, lease_token";

impl Fenced {
    fn new(sql: &'static str, fences: &[Fence]) -> Self {
        let ids: Vec<i64> = fences.iter().map(|f| f.id).collect();
        let tokens: Vec<i64> = fences.iter().map(|f| f.token).collect();
        Self {
            sql,
            ids: json_list(&ids),
            tokens: json_list(&tokens),
        }
    }

    fn query(&self, value: i64) -> sqlx::query::Query<'_, Sqlite, SqliteArguments<'_>> {
        sqlx::query(self.sql)
            .bind(value)
            .bind(self.ids.as_str())
            .bind(self.tokens.as_str())
    }
}

/// `[1,2,3]`.
fn json_list(values: &[i64]) -> String {
    let mut out = String::with_capacity(values.len() * 20 + 2);
    out.push('[');
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&value.to_string());
    }
    out.push(']');
    out
}

/// Now, in unix microseconds.
fn now_micros() -> i64 {
    Utc::now().timestamp_micros()
}

/// Unix microseconds as a time, clamped to what `DateTime` holds (a lease of
/// `Duration::MAX` is stored as `i64::MAX`).
fn utc(micros: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap_or(if micros > 0 {
        DateTime::<Utc>::MAX_UTC
    } else {
        DateTime::<Utc>::MIN_UTC
    })
}

/// Whether `version` (`"3.46.0"`) is at least `major.minor`.
fn version_at_least(version: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// Whether a `sqlite:` URL names an in-memory database.
/// Copies the write-ahead log into the database file from a connection of
/// its own, so that no commit does it.
///
/// In WAL mode a commit appends to the log and, with `synchronous = NORMAL`,
/// does not wait for the disk; but the commit that takes the log past
/// `wal_autocheckpoint` pages then copies it into the database and syncs the
/// file, which stalls that writer, and every writer queued behind it, for
/// milliseconds (the tail of jobq's enqueue-to-start latency). A `PASSIVE`
/// checkpoint waits for no one and blocks no one; the next writer after a
/// complete one starts the log over. The pause between checkpoints grows
/// while nothing is written and resets when the log grows.
async fn checkpoint_loop(pool: SqlitePool, stop: CancellationToken) {
    let mut pause = CHECKPOINT_EVERY;
    let mut last = (-1, -1);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        let result: Result<(i64, i64, i64), sqlx::Error> =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&pool)
                .await;
        match result {
            Ok((_busy, log, copied)) => {
                pause = if (log, copied) == last {
                    (pause * 2).min(CHECKPOINT_IDLE)
                } else {
                    CHECKPOINT_EVERY
                };
                last = (log, copied);
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(error) => {
                tracing::debug!(%error, "SQLite WAL checkpoint failed; trying again later");
                pause = CHECKPOINT_IDLE;
            }
        }
    }
}

fn is_memory(url: &str) -> bool {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (database, params) = rest.split_once('?').unwrap_or((rest, ""));
    database == ":memory:" || params.split('&').any(|p| p == "mode=memory")
}

/// A text column read as bytes, decoded lossily.
fn text(row: &SqliteRow, column: &str) -> Result<Option<String>> {
    Ok(row
        .try_get::<Option<Vec<u8>>, _>(column)?
        .map(|bytes| super::lossy_utf8(bytes).0))
}

fn job_info(row: &SqliteRow) -> Result<JobInfo> {
    let status: String = row.try_get("status")?;
    Ok(JobInfo {
        id: row.try_get("id")?,
        queue: text(row, "queue")?.unwrap_or_default(),
        job_name: text(row, "job_name")?.unwrap_or_default(),
        payload: text(row, "payload")?.unwrap_or_default(),
        status: status.parse().map_err(Error::UnknownStatus)?,
        priority: row.try_get("priority")?,
        attempts: u32::try_from(row.try_get::<i64, _>("attempts")?).unwrap_or(0),
        max_attempts: u32::try_from(row.try_get::<i64, _>("max_attempts")?).unwrap_or(0),
        run_at: utc(row.try_get("run_at")?),
        idempotency_key: text(row, "idempotency_key")?,
        last_error: text(row, "last_error")?,
        claimed_by: text(row, "claimed_by")?,
        claimed_at: row.try_get::<Option<i64>, _>("claimed_at")?.map(utc),
        created_at: utc(row.try_get("created_at")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(utc),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migrated store on a fresh file; keep the directory alive.
    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
        let store = SqliteStore::connect(&url, 4).await.unwrap();
        store.migrate().await.unwrap();
        (dir, store)
    }

    fn job(queue: &str) -> NewJob {
        NewJob {
            queue: queue.to_owned(),
            job_name: "probe".to_owned(),
            payload: "{}".to_owned(),
            priority: 0,
            max_attempts: 3,
            run_at: RunAt::Now,
            idempotency_key: None,
        }
    }

    async fn claim_one(
        store: &SqliteStore,
        queue: &str,
        lease: Duration,
        worker: &str,
    ) -> ClaimedJob {
        let mut claimed = store.claim(queue, 1, lease, worker).await.unwrap();
        assert_eq!(claimed.len(), 1, "expected one claimable job in `{queue}`");
        claimed.pop().unwrap()
    }

    /// Reaps `queue` until it returns `expected` jobs (a lease of zero expires
    /// one microsecond after the claim), for at most 5 s.
    async fn reap_until(store: &SqliteStore, queue: &str, expected: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let reaped = store.reap(queue, 500).await.unwrap();
            if reaped == expected {
                return;
            }
            assert_eq!(reaped, 0, "reaped an unexpected number of jobs");
            assert!(
                tokio::time::Instant::now() < deadline,
                "nothing to reap in `{queue}`"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn info(store: &SqliteStore, id: i64) -> JobInfo {
        store.job(id).await.unwrap().expect("the job exists")
    }

    #[tokio::test]
    async fn a_stale_fence_cannot_settle_a_reclaimed_job() {
        let (_dir, store) = store().await;
        let id = store.enqueue(&job("q")).await.unwrap().id;

        let stale = claim_one(&store, "q", Duration::ZERO, "w1").await;
        reap_until(&store, "q", 1).await;
        let fresh = claim_one(&store, "q", Duration::from_secs(30), "w2").await;
        assert_eq!((stale.id, fresh.id), (id, id));
        assert_eq!((stale.attempt, fresh.attempt), (1, 2));
        assert_ne!(stale.token, fresh.token);

        assert_eq!(store.complete(&[stale.fence()]).await.unwrap(), 0);
        let stale_failure = Transition {
            fence: stale.fence(),
            target: Target::Failed,
            delay: Duration::ZERO,
            refund_attempt: false,
            error: Some("stale".into()),
        };
        assert!(!store.transition(&stale_failure).await.unwrap());
        let lost = store
            .heartbeat(&[stale.fence(), fresh.fence()], Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(lost, vec![stale.fence()]);
        assert_eq!(info(&store, id).await.status, crate::JobStatus::Processing);

        assert_eq!(store.complete(&[fresh.fence()]).await.unwrap(), 1);
        let done = info(&store, id).await;
        assert_eq!(done.status, crate::JobStatus::Done);
        assert_eq!(done.attempts, 2);
        assert_eq!(done.claimed_by.as_deref(), Some("w2"));
        assert!(done.finished_at.is_some());
        let error = done.last_error.unwrap();
        assert!(
            error.starts_with("lease expired during attempt 1: worker w1 stopped renewing it"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn claims_take_priority_then_run_at_then_id() {
        let (_dir, store) = store().await;
        let now = Utc::now();
        let at = |secs_ago: i64, priority: i16| NewJob {
            priority,
            run_at: RunAt::At(now - chrono::Duration::seconds(secs_ago)),
            ..job("q")
        };
        let late_low = store.enqueue(&at(1, 5)).await.unwrap().id;
        let late = store.enqueue(&at(1, 0)).await.unwrap().id;
        let early_a = store.enqueue(&at(2, 0)).await.unwrap().id;
        let early_b = store.enqueue(&at(2, 0)).await.unwrap().id;
        let urgent_but_delayed = NewJob {
            priority: -10,
            run_at: RunAt::After(Duration::from_secs(3600)),
            ..job("q")
        };
        store.enqueue(&urgent_but_delayed).await.unwrap();

        let mut order = Vec::new();
        while let Some(claimed) = store
            .claim("q", 1, Duration::from_secs(30), "w")
            .await
            .unwrap()
            .pop()
        {
            order.push(claimed.id);
        }
        assert_eq!(order, vec![early_a, early_b, late, late_low]);
    }

    #[tokio::test]
    async fn a_batch_claim_takes_the_first_jobs_in_claim_order() {
        let (_dir, store) = store().await;
        let now = Utc::now();
        let mut ids = Vec::new();
        for (secs_ago, priority) in [(1, 5), (1, 0), (2, 0), (3, 1)] {
            let row = NewJob {
                priority,
                run_at: RunAt::At(now - chrono::Duration::seconds(secs_ago)),
                ..job("q")
            };
            ids.push(store.enqueue(&row).await.unwrap().id);
        }
        let claimed = store
            .claim("q", 3, Duration::from_secs(30), "w")
            .await
            .unwrap();
        let claimed: Vec<i64> = claimed.iter().map(|c| c.id).collect();
        // (priority, run_at, id): the two priority-0 jobs, the earlier
        // run_at first, then the priority-1 one.
        assert_eq!(claimed, vec![ids[2], ids[1], ids[3]]);
    }

    #[tokio::test]
    async fn a_job_is_not_claimed_before_its_run_at() {
        let (_dir, store) = store().await;
        let delayed = NewJob {
            run_at: RunAt::After(Duration::from_secs(3600)),
            ..job("q")
        };
        let scheduled = NewJob {
            run_at: RunAt::At(Utc::now() + chrono::Duration::hours(1)),
            ..job("q")
        };
        let delayed_id = store.enqueue(&delayed).await.unwrap().id;
        store.enqueue(&scheduled).await.unwrap();
        assert!(
            store
                .claim("q", 10, Duration::from_secs(30), "w")
                .await
                .unwrap()
                .is_empty()
        );

        let run_at = info(&store, delayed_id).await.run_at;
        let expected = Utc::now() + chrono::Duration::hours(1);
        assert!((run_at - expected).num_seconds().abs() < 60, "{run_at}");

        let past = NewJob {
            run_at: RunAt::At(Utc::now() - chrono::Duration::minutes(1)),
            ..job("q")
        };
        let past_id = store.enqueue(&past).await.unwrap().id;
        let claimed = store
            .claim("q", 10, Duration::from_secs(30), "w")
            .await
            .unwrap();
        assert_eq!(
            claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
            vec![past_id]
        );
    }

    #[tokio::test]
    async fn the_claim_and_the_reaper_use_the_index_without_sorting() {
        let (_dir, store) = store().await;
        for sql in [PICK, REAP] {
            let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(store.pool())
                .await
                .unwrap()
                .iter()
                .map(|row| row.get::<String, _>("detail"))
                .collect();
            let plan = plan.join("\n");
            assert!(
                plan.contains("INDEX jobq_jobs_claim (queue=? AND status=?)"),
                "{plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }

    /// With the statistics of a 1,000-row table, SQLite plans a literal
    /// IN-list of 256 ids as a full scan, and a connection keeps that plan
    /// while the table grows (a million finished rows: 200 ms per settle).
    /// The claim, settle and heartbeat read their ids from `json_each` and
    /// look every row up by primary key under the same statistics.
    #[tokio::test]
    async fn settles_and_heartbeats_look_rows_up_by_primary_key_under_small_table_statistics() {
        let (_dir, store) = store().await;
        store.enqueue_many(&vec![job("q"); 1000]).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        conn.execute("ANALYZE").await.unwrap();
        async fn plan(conn: &mut SqliteConnection, sql: &str) -> String {
            let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(conn)
                .await
                .unwrap();
            rows.iter()
                .map(|row| row.get::<String, _>("detail"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        let literal = format!(
            "UPDATE jobq_jobs SET finished_at = 1 WHERE status = 'processing' AND id IN ({})",
            vec!["?"; 256].join(", ")
        );
        let scan = plan(&mut conn, &literal).await;
        assert!(
            scan.contains("SCAN jobq_jobs"),
            "statistics not small: {scan}"
        );
        for sql in [COMPLETE, HEARTBEAT, CLAIM] {
            let plan = plan(&mut conn, sql).await;
            assert!(
                plan.contains("SEARCH jobq_jobs USING INTEGER PRIMARY KEY (rowid=?)")
                    && !plan.contains("SCAN jobq_jobs"),
                "{sql}\n{plan}"
            );
        }
    }

    #[tokio::test]
    async fn a_transition_can_refund_the_attempt_and_keep_the_last_error() {
        let (_dir, store) = store().await;
        let id = store.enqueue(&job("q")).await.unwrap().id;
        let first = claim_one(&store, "q", Duration::from_secs(30), "w").await;
        let retry = Transition {
            fence: first.fence(),
            target: Target::Pending,
            delay: Duration::ZERO,
            refund_attempt: false,
            error: Some("first failure".into()),
        };
        assert!(store.transition(&retry).await.unwrap());
        let after_retry = info(&store, id).await;
        assert_eq!(after_retry.status, crate::JobStatus::Pending);
        assert_eq!(after_retry.attempts, 1);
        assert_eq!(after_retry.last_error.as_deref(), Some("first failure"));
        assert_eq!(after_retry.finished_at, None);

        let second = claim_one(&store, "q", Duration::from_secs(30), "w").await;
        assert_eq!(second.attempt, 2);
        let snooze = Transition {
            fence: second.fence(),
            target: Target::Pending,
            delay: Duration::from_secs(3600),
            refund_attempt: true,
            error: None,
        };
        assert!(store.transition(&snooze).await.unwrap());
        let snoozed = info(&store, id).await;
        assert_eq!(snoozed.status, crate::JobStatus::Pending);
        assert_eq!(snoozed.attempts, 1);
        assert_eq!(snoozed.last_error.as_deref(), Some("first failure"));
        assert!(snoozed.run_at > Utc::now() + chrono::Duration::minutes(59));
        assert!(
            store
                .claim("q", 1, Duration::from_secs(30), "w")
                .await
                .unwrap()
                .is_empty()
        );
        // A settle of an already-settled claim changes nothing.
        assert!(!store.transition(&snooze).await.unwrap());
    }

    #[tokio::test]
    async fn a_failing_transition_sets_finished_at() {
        let (_dir, store) = store().await;
        let id = store.enqueue(&job("q")).await.unwrap().id;
        let claimed = claim_one(&store, "q", Duration::from_secs(30), "w").await;
        let fail = Transition {
            fence: claimed.fence(),
            target: Target::Failed,
            delay: Duration::ZERO,
            refund_attempt: false,
            error: Some("no such user".into()),
        };
        assert!(store.transition(&fail).await.unwrap());
        let failed = info(&store, id).await;
        assert_eq!(failed.status, crate::JobStatus::Failed);
        assert_eq!(failed.last_error.as_deref(), Some("no such user"));
        assert!(failed.finished_at.is_some());
    }

    #[tokio::test]
    async fn the_reaper_fails_a_job_whose_last_attempt_expired() {
        let (_dir, store) = store().await;
        let last_try = NewJob {
            max_attempts: 1,
            ..job("q")
        };
        let id = store.enqueue(&last_try).await.unwrap().id;
        claim_one(&store, "q", Duration::ZERO, "w1").await;
        reap_until(&store, "q", 1).await;
        let failed = info(&store, id).await;
        assert_eq!(failed.status, crate::JobStatus::Failed);
        assert!(failed.finished_at.is_some());
        assert!(
            failed
                .last_error
                .unwrap()
                .contains("lease expired during attempt 1")
        );
    }

    #[tokio::test]
    async fn a_heartbeat_extends_the_lease_of_held_jobs() {
        let (_dir, store) = store().await;
        let id = store.enqueue(&job("q")).await.unwrap().id;
        let claimed = claim_one(&store, "q", Duration::ZERO, "w").await;
        let lost = store
            .heartbeat(&[claimed.fence()], Duration::from_secs(3600))
            .await
            .unwrap();
        assert!(lost.is_empty());
        assert_eq!(store.reap("q", 500).await.unwrap(), 0);
        assert!(info(&store, id).await.run_at > Utc::now() + chrono::Duration::minutes(59));
    }

    #[tokio::test]
    async fn a_cancelled_job_loses_its_lease_and_can_be_retried() {
        let (_dir, store) = store().await;
        let id = store.enqueue(&job("q")).await.unwrap().id;
        let claimed = claim_one(&store, "q", Duration::from_secs(30), "w").await;
        assert!(store.cancel(id).await.unwrap());
        assert!(!store.cancel(id).await.unwrap());
        let cancelled = info(&store, id).await;
        assert_eq!(cancelled.status, crate::JobStatus::Cancelled);
        assert!(cancelled.finished_at.is_some());
        let lost = store
            .heartbeat(&[claimed.fence()], Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(lost, vec![claimed.fence()]);
        assert_eq!(store.complete(&[claimed.fence()]).await.unwrap(), 0);

        assert!(store.retry(id).await.unwrap());
        assert!(!store.retry(id).await.unwrap());
        let retried = info(&store, id).await;
        assert_eq!(retried.status, crate::JobStatus::Pending);
        assert_eq!(retried.finished_at, None);
        assert!(retried.max_attempts > retried.attempts);
        assert_eq!(
            claim_one(&store, "q", Duration::from_secs(30), "w")
                .await
                .attempt,
            2
        );
    }

    #[tokio::test]
    async fn an_in_memory_database_is_one_database_for_the_whole_pool() {
        let store = SqliteStore::connect("sqlite::memory:", 8).await.unwrap();
        store.migrate().await.unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let store = store.clone();
            tasks.spawn(async move { store.enqueue(&job("q")).await.unwrap().id });
        }
        let ids = tasks.join_all().await;
        for id in ids {
            assert!(store.job(id).await.unwrap().is_some());
        }
        let claimed = store
            .claim("q", 100, Duration::from_secs(30), "w")
            .await
            .unwrap();
        assert_eq!(claimed.len(), 8);
    }

    #[tokio::test]
    async fn concurrent_connects_and_migrations_of_a_new_file_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("new.db").display());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let url = url.clone();
            tasks.spawn(async move {
                let store = SqliteStore::connect(&url, 2).await?;
                store.migrate().await?;
                store.enqueue(&job("q")).await
            });
        }
        for result in tasks.join_all().await {
            result.unwrap();
        }
        let store = SqliteStore::connect(&url, 1).await.unwrap();
        let migrations: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_migrations")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(
            migrations,
            i64::try_from(migrate::SQLITE.len()).unwrap(),
            "each migration applied once"
        );
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn in_memory_urls_are_recognised() {
        assert!(is_memory("sqlite::memory:"));
        assert!(is_memory("sqlite://:memory:"));
        assert!(is_memory("sqlite://shared?mode=memory"));
        assert!(!is_memory("sqlite://jobs.db"));
        assert!(!is_memory("sqlite:///tmp/memory.db?mode=rwc"));
    }

    #[test]
    fn versions_compare_by_major_then_minor() {
        assert!(version_at_least("3.46.0", (3, 35)));
        assert!(version_at_least("3.35.5", (3, 35)));
        assert!(!version_at_least("3.34.1", (3, 35)));
        assert!(version_at_least("4.0.0", (3, 35)));
    }
}
