//! SQLite 3.35+: one writer at a time, so every write is a single autocommit
//! statement and no claim needs SKIP LOCKED.
//!
//! Facts behind this SQL (sqlx 0.8.6, bundled SQLite 3.46):
//! - a write statement in autocommit takes the write lock when it starts, and
//!   waits for it under the busy timeout. A *deferred* transaction that reads
//!   and then writes fails at once with `SQLITE_BUSY`/`SQLITE_BUSY_SNAPSHOT`
//!   when another connection wrote in between, whatever the busy timeout. So the
//!   plain claim is a pick (a read) and then one guarded `UPDATE … WHERE id IN
//!   (…) AND status = 'pending' AND run_at <= ? RETURNING …`, each its own
//!   transaction (a row another process claimed in between is left out, not
//!   claimed twice), the reaper one `UPDATE`, and the multi-statement
//!   transactions jobq opens (a limited claim, batch enqueue, bulk actions,
//!   limits, migrations) begin `IMMEDIATE`;
//! - the order of `RETURNING` rows is unspecified, so nothing relies on it: a
//!   claimed batch is sorted in Rust, and a batch enqueue is one single-row
//!   INSERT per job inside one `BEGIN IMMEDIATE` transaction (no network round
//!   trip, so this costs microseconds per row);
//! - times are INTEGER unix microseconds from the application's clock, passed
//!   as parameters (an embedded queue has one clock); `run_at` of a
//!   `processing` row is its lease deadline;
//! - the claim's `ORDER BY priority, run_at, id` is served by the
//!   `(queue, status, priority, run_at, id)` index, without a temporary B-tree.

use std::borrow::Borrow;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteError, SqliteJournalMode, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Arguments, Connection, Executor, Row, Sqlite, SqliteConnection, SqlitePool};

use tokio_util::sync::{CancellationToken, DropGuard};

use self::sql::*;
use super::filter::{Bind, Filtered, Statement};
use super::migrate;
use super::ring::Ringer;
use super::shared::{self, Columns, worker_record};
use super::stash::Stash;
use crate::error::{Error, Result};
use crate::metrics::statement;
use crate::ops::LiveFigures;
use crate::options::{ConnectOptions, Rate};
use crate::roster::WorkerRecord;
use crate::store::contract::{
    BackendStore, Cancelled, ClaimRequest, ClaimedJob, Fence, Flow, KeyPlan, KeyStarts,
    LimitedClaim, NewJob, Prunable, QueueControl, RowLocks, Slot, Transition, UniquePage,
    WorkerRefresh, WorkerRow,
};
use crate::store::policy::{
    Allowed, SlotPlan, UniqueRow, key_admits, key_front, key_front_len, key_fronts, key_limit,
    key_plan, key_rates, key_starts, micros, migrating, new_token_base, not_renewed,
    retry_transient, row_token, slots_limit, slots_total, within,
};
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, RunAt, Schedule, ScheduleInfo};
use crate::wakeup::Watch;

mod checkpoint;
mod doctor;
mod glue;
mod shared_write;
pub mod sql;
#[cfg(test)]
mod tests;
mod wake;

/// How long a statement waits for another connection's write lock before
/// failing with `SQLITE_BUSY` (which jobq then retries for its own statements).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// `UPDATE … RETURNING` and `INSERT … ON CONFLICT … RETURNING` arrived in 3.35.
const MIN_VERSION: (u32, u32) = (3, 35);

/// Rows per statement of a batch enqueue (SQLite's limit on bound parameters
/// is 32,766: 1,000 rows of 7). A longer batch runs its chunks in one
/// transaction, so it holds the write lock for all of them.
const INSERT_CHUNK: usize = 1000;

const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

/// A single-row enqueue waiting for a shared write, and where its answer goes.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) seq: u64,
    pub(super) job: NewJob,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<Enqueued>>,
}

/// A shared write inserts the queued rows as they are (no copy of each job).
impl Borrow<NewJob> for Queued {
    fn borrow(&self) -> &NewJob {
        &self.job
    }
}

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
    /// Wakes other processes' workers after an enqueue (see `wake.rs`).
    ringer: Arc<Ringer<wake::SqliteBell>>,
    /// How long one statement or short transaction may take (see
    /// [`super::policy::within`]).
    pub(super) deadline: Duration,
}

impl BackendStore for SqliteStore {
    type Pool = SqlitePool;
    type Connection = SqliteConnection;
    /// The statuses: [`PRUNE`] deletes from every queue at once, oldest
    /// first through `jobq_jobs_finished`.
    type PruneScope = Prunable;

    /// Bounds how long one settle or heartbeat holds the write lock.
    const FENCE_CHUNK: usize = 1024;

    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }

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
    async fn connect(url: &str, connect: &ConnectOptions) -> Result<Self> {
        let max_connections = connect.max_connections;
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
                    checkpoint::WAL_AUTOCHECKPOINT_BACKSTOP.to_string(),
                );
            // Processes opening a new file at once race to switch it to WAL;
            // the loser is told the database is busy without SQLite waiting
            // out the busy timeout, so the connect is tried again.
            let pool = retry_transient(
                connect.statement_timeout,
                statement::CONNECT,
                Self::is_transient,
                || {
                    SqlitePoolOptions::new()
                        .test_before_acquire(false)
                        .max_connections(max_connections)
                        .connect_with(options.clone())
                },
            )
            .await?;
            let mut store = Self::from_pool(pool).await?;
            let stop = CancellationToken::new();
            tokio::spawn(checkpoint::checkpoint_loop(
                store.pool.clone(),
                stop.clone(),
            ));
            store._checkpointer = Some(Arc::new(stop.drop_guard()));
            store.deadline = connect.statement_timeout;
            return Ok(store);
        };
        let mut store = Self::from_pool(pool).await?;
        store.deadline = connect.statement_timeout;
        Ok(store)
    }

    /// Uses the caller's pool; checks that its SQLite has `RETURNING`.
    async fn from_pool(pool: SqlitePool) -> Result<Self> {
        let version: String = within(
            crate::DEFAULT_STATEMENT_TIMEOUT,
            statement::READ,
            sqlx::query_scalar(VERSION).fetch_one(&pool),
        )
        .await?;
        if !version_at_least(&version, MIN_VERSION) {
            return Err(Error::UnsupportedServerVersion {
                backend: crate::Backend::Sqlite,
                version,
                needs: format!("{}.{}", MIN_VERSION.0, MIN_VERSION.1),
                because: sql::NEEDS,
            });
        }
        Ok(Self {
            conns: Stash::new(pool.clone(), false),
            ringer: Arc::new(Ringer::new(wake::SqliteBell::new(pool.clone()))),
            pool,
            writes: Arc::default(),
            queued: Arc::default(),
            queued_seq: Arc::default(),
            _checkpointer: None,
            deadline: crate::DEFAULT_STATEMENT_TIMEOUT,
        })
    }

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn migrations(&self) -> &'static [migrate::Migration] {
        MIGRATIONS
    }

    /// Inside one `BEGIN IMMEDIATE` transaction: processes migrating a new
    /// file at once take turns, and the later ones find everything applied.
    ///
    /// Within [`MIGRATE_DEADLINE`](super::policy::MIGRATE_DEADLINE) once it has its
    /// connection.
    async fn migrate(&self) -> Result<()> {
        migrating(&self.conns, self.deadline, migrate_on).await
    }

    /// Concurrent enqueues share a write (see [`shared_write`]).
    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let enqueued = self.enqueue_shared(job).await?;
        self.ringer.announce(self.deadline, [job.queue.as_str()]);
        Ok(enqueued)
    }

    /// All or nothing: a batch of one chunk is one statement or one
    /// transaction; a longer one runs its chunks in one `BEGIN IMMEDIATE`
    /// transaction (holding the write lock for all of them), so a row the
    /// database refuses leaves nothing of the batch behind.
    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let keyless = jobs.iter().all(NewJob::plain);
        let enqueued = self
            .write(async |conn| {
                if keyless && jobs.len() <= INSERT_CHUNK {
                    insert_keyless(conn, jobs).await
                } else {
                    insert_chunks(conn, jobs).await
                }
            })
            .await?;
        self.ringer
            .announce(self.deadline, jobs.iter().map(|job| job.queue.as_str()));
        Ok(enqueued)
    }

    /// On the caller's connection (their transaction, never retried).
    ///
    /// A caller's transaction should begin `IMMEDIATE` if it reads before this
    /// write: a deferred one fails with `SQLITE_BUSY_SNAPSHOT` when another
    /// connection wrote since its read.
    async fn enqueue_in(conn: &mut SqliteConnection, job: &NewJob) -> Result<Enqueued> {
        Ok(insert_row(conn, job, now_micros()).await?)
    }

    async fn complete_in(
        conn: &mut SqliteConnection,
        fence: Fence,
        output: Option<&str>,
    ) -> Result<bool> {
        let done = sqlx::query(COMPLETE_OUTPUT)
            .bind(now_micros())
            .bind(output)
            .bind(fence.id)
            .bind(fence.token)
            .execute(conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn prune_unique(&self, after: &str, limit: u32) -> Result<UniquePage> {
        self.write(async |conn| {
            let rows: Vec<(String, i64, bool)> = sqlx::query_as(UNIQUE_SCAN)
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(&mut *conn)
                .await?;
            let mut deleted = 0;
            for (key, job_id, _) in rows.iter().filter(|(_, id, gone)| *gone && *id != 0) {
                let forget = sqlx::query(UNIQUE_FORGET).bind(key).bind(job_id);
                deleted += forget.execute(&mut *conn).await?.rows_affected();
            }
            Ok(UniquePage::of(&rows, limit, deleted))
        })
        .await
    }

    async fn release_keys(&self, keys: &[String]) -> Result<KeyPlan> {
        self.write(async |conn| release_keys_on(conn, keys).await)
            .await
    }

    async fn keys_of(&self, ids: &[i64], rejoin: bool) -> Result<Vec<String>> {
        let ids = json_list(ids);
        self.write(async |conn| {
            if rejoin {
                // One transaction: a release that finds the key without
                // jobs and deletes its row either comes before the row is
                // made again or sees the job listed.
                let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
                for sql in [KEYS_REMAKE, KEYS_REJOIN] {
                    sqlx::query(sql).bind(&ids).execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
            let keys: Vec<(String,)> = sqlx::query_as(KEYS_OF)
                .bind(&ids)
                .fetch_all(&mut *conn)
                .await?;
            Ok(keys.into_iter().map(|(key,)| key).collect())
        })
        .await
    }

    async fn key_page(&self, after: &str, limit: u32) -> Result<Vec<String>> {
        let keys: Vec<(String,)> = self
            .write(async |conn| {
                sqlx::query_as(KEY_PAGE)
                    .bind(after)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await
            })
            .await?;
        Ok(keys.into_iter().map(|(key,)| key).collect())
    }

    async fn set_key_rate(&self, key: &str, rate: Option<Rate>) -> Result<()> {
        let statement = rate_row([KEY_RATE_SET, KEY_RATE_REMOVE], key, rate);
        self.write(async |conn| statement.execute(conn).await.map(|_| ()))
            .await
    }

    async fn key_rates(&self) -> Result<Vec<(String, Rate)>> {
        let rows: Vec<(String, i64, i64, i64)> = self
            .write(async |conn| sqlx::query_as(KEY_RATES).fetch_all(&mut *conn).await)
            .await?;
        Ok(key_rates(rows))
    }

    async fn take_key_starts(&self, key: &str, ids: &[i64]) -> Result<Option<KeyStarts>> {
        let wanted = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        self.write(async |conn| {
            let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
            let now = now_micros();
            let row = sqlx::query_as(KEY_RATE_READ)
                .bind(key)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let Some((starts, tat)) = key_starts(row, wanted) else {
                tx.commit().await?;
                return Ok(None);
            };
            if let Some(tat) = tat {
                sqlx::query(KEY_RATE_ADVANCE)
                    .bind(tat)
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
            }
            let started = &ids[..starts.taken as usize];
            if !started.is_empty() {
                sqlx::query(KEY_STARTED)
                    .bind(now)
                    .bind(json_list(started))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(Some(starts))
        })
        .await
    }

    async fn claim(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>> {
        let base = new_token_base();
        // Two statements, each its own transaction: no BEGIN and COMMIT
        // round trips to the connection's thread. This process's writes
        // take turns already; another process may claim a picked row in
        // between, and [`CLAIM`]'s guard (still `pending` and due) leaves
        // such a row out rather than claiming it twice.
        let rows = self
            .write(async |conn| claim_rows(conn, claim, base).await)
            .await?;
        Ok(claimed_jobs(rows, base))
    }

    async fn claim_limited(&self, claim: ClaimRequest<'_>, flow: Flow) -> Result<LimitedClaim> {
        let base = new_token_base();
        let (rows, allowed, due) = self
            .write(async |conn| claim_limited_on(conn, claim, flow, base).await)
            .await?;
        Ok(allowed.claimed(claimed_jobs(rows, base), due))
    }

    async fn set_rate(&self, queue: &str, rate: Option<Rate>) -> Result<()> {
        let statement = rate_row([RATE_SET, RATE_REMOVE], queue, rate);
        self.write(async |conn| statement.execute(conn).await.map(|_| ()))
            .await
    }

    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        self.write(async |conn| {
            let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
            match limit {
                Some(limit) => {
                    sqlx::query(LIMIT_SET)
                        .bind(queue)
                        .bind(i64::from(limit))
                        .bind(now_micros())
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(SLOTS_FILL)
                        .bind(queue)
                        .bind(i64::from(limit))
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query(LIMIT_REMOVE)
                        .bind(queue)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            sqlx::query(if limit.is_some() {
                SLOTS_TRIM_IDLE
            } else {
                SLOTS_TRIM
            })
            .bind(queue)
            .bind(limit.map_or(0, i64::from))
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })
        .await
    }

    async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        let update = Fenced::new(COMPLETE, fences);
        self.write(async |conn| {
            let done = update.query(now_micros()).execute(conn).await?;
            Ok(done.rows_affected())
        })
        .await
    }

    async fn save_checkpoint(&self, fence: Fence, json: &str) -> Result<bool> {
        self.fenced_set(CHECKPOINT_SAVE, fence, json).await
    }

    async fn save_progress(&self, fence: Fence, json: &str) -> Result<bool> {
        self.fenced_set(PROGRESS_SAVE, fence, json).await
    }

    async fn complete_with_output(&self, fence: Fence, output: &str) -> Result<bool> {
        let affected = self
            .write(async |conn| {
                let done = sqlx::query(COMPLETE_OUTPUT)
                    .bind(now_micros())
                    .bind(output)
                    .bind(fence.id)
                    .bind(fence.token)
                    .execute(conn)
                    .await?;
                Ok(done.rows_affected())
            })
            .await?;
        Ok(affected == 1)
    }

    async fn transition(&self, t: &Transition) -> Result<bool> {
        let status = t.target.status();
        let affected = self
            .write(async |conn| {
                let now = now_micros();
                let done = sqlx::query(TRANSITION)
                    .bind(status)
                    .bind(now.saturating_add(micros(t.delay)))
                    .bind(i32::from(t.refund_attempt))
                    .bind(&t.error)
                    .bind(now)
                    .bind(t.fence.id)
                    .bind(t.fence.token)
                    .bind(t.record.as_ref().map(|r| r.0))
                    .bind(t.record.as_ref().map(|r| r.1.as_str()))
                    .execute(conn)
                    .await?;
                Ok(done.rows_affected())
            })
            .await?;
        Ok(affected == 1)
    }

    /// One UPDATE; `RETURNING id, lease_token` tells exactly which fences
    /// still hold their row, so no second query is needed.
    async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let renewed = self.renew(fences, lease).await?;
        Ok(not_renewed(fences, renewed))
    }

    /// No row locks here (one writer at a time): the plain heartbeat's
    /// statement.
    async fn heartbeat_unlocked(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        self.renew(fences, lease).await
    }

    async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        self.write(async |conn| {
            let done = sqlx::query(REAP)
                .bind(now_micros())
                .bind(queue)
                .bind(limit)
                .execute(conn)
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    /// One scope: [`PRUNE`] takes every queue at once.
    async fn prune_scopes(&self, which: Prunable) -> Result<Vec<Prunable>> {
        Ok(vec![which])
    }

    /// [`PRUNE`].
    async fn prune(&self, which: &Prunable, older_than: Duration, limit: u32) -> Result<u64> {
        // `IN (?2, ?3)`: one status is given twice.
        let statuses = which.statuses();
        let (a, b) = (statuses[0], statuses[statuses.len() - 1]);
        self.write(async |conn| {
            let done = sqlx::query(PRUNE)
                .bind(now_micros() - micros(older_than))
                .bind(a)
                .bind(b)
                .bind(limit)
                .execute(conn)
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    /// No wake-ups from the database: polling and in-process wake-ups only.
    async fn listen(
        &self,
        queues: &[String],
        watch: &Watch,
        stop: &CancellationToken,
        _give_up: &CancellationToken,
    ) {
        let dir = wake::wake_dir(&self.pool.connect_options());
        wake::wait((dir, &self.pool), queues, watch, stop, self.deadline).await;
    }

    fn announce_control(&self) {
        self.ringer.announce_control(self.deadline);
    }

    fn enqueued_in(&self, job: &Enqueued, queue: &str) {
        self.ringer.enqueued_in(self.deadline, job, queue);
    }

    async fn flush_wakeups(&self, within: Duration) {
        self.ringer.flush(within).await;
    }

    async fn cancel(&self, id: i64) -> Result<Cancelled> {
        let pick = Statement::fixed(CANCEL_PICK, vec![Bind::Int(id)]);
        self.write(async |conn| cancel_picked(conn, &pick).await)
            .await
    }

    async fn retry(&self, id: i64) -> Result<bool> {
        let affected = self
            .write(async |conn| {
                let done = sqlx::query(RETRY)
                    .bind(now_micros())
                    .bind(id)
                    .execute(conn)
                    .await?;
                Ok(done.rows_affected())
            })
            .await?;
        Ok(affected == 1)
    }

    /// The application's clock, as every time SQLite stores.
    async fn clock(&self) -> Result<DateTime<Utc>> {
        Ok(utc(now_micros()))
    }

    /// [`STATS_LIVE`].
    async fn stats_live(&self, queue: &str, now: DateTime<Utc>) -> Result<Vec<LiveFigures>> {
        type LiveRow = (String, i64, Option<i64>, Option<i64>, Option<i64>);
        let live: Vec<LiveRow> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(STATS_LIVE)
                    .bind(queue)
                    .bind(now.timestamp_micros())
                    .fetch_all(conn)
                    .await
            })
            .await?;
        Ok(live
            .into_iter()
            .map(|(status, rows, due, expired, earliest)| {
                LiveFigures::new(status, rows, due, expired, earliest.map(utc))
            })
            .collect())
    }

    /// The priorities of the queue's `done` and `failed` rows
    /// ([`PRIORITIES`]), then [`STATS_PER_MINUTE`] for them.
    async fn stats_per_minute(
        &self,
        queue: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64, i64)>> {
        let mut priorities: Vec<i64> = Vec::new();
        for status in ["done", "failed"] {
            let found: Vec<i64> = self
                .run(statement::READ, async |conn| {
                    sqlx::query_scalar(PRIORITIES)
                        .bind(queue)
                        .bind(status)
                        .fetch_all(conn)
                        .await
                })
                .await?;
            priorities.extend(found);
        }
        priorities.sort_unstable();
        priorities.dedup();
        if priorities.is_empty() {
            return Ok(Vec::new());
        }
        self.run(statement::READ, async |conn| {
            sqlx::query_as(STATS_PER_MINUTE)
                .bind(since.timestamp_micros())
                .bind(queue)
                .bind(json_list(&priorities))
                .fetch_all(conn)
                .await
        })
        .await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool> {
        let affected = self
            .write(async |conn| set_paused(conn, queue, paused).await)
            .await?;
        Ok(affected == 1)
    }

    #[cfg(feature = "testing")]
    async fn make_due(&self, queue: &str) -> Result<u64> {
        self.write(async |conn| {
            let done = sqlx::query(MAKE_DUE)
                .bind(now_micros())
                .bind(queue)
                .execute(conn)
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()> {
        self.write(async |conn| {
            let now = now_micros();
            row.bind_identity(sqlx::query(WORKER_REGISTER))
                .bind(now)
                .bind(now.saturating_add(micros(row.ttl)))
                .execute(conn)
                .await
        })
        .await?;
        Ok(())
    }

    async fn refresh_worker(&self, refresh: WorkerRefresh) -> Result<bool> {
        let matched = self
            .write(async |conn| {
                let now = now_micros();
                let done = sqlx::query(WORKER_REFRESH)
                    .bind(refresh.running)
                    .bind(now)
                    .bind(now.saturating_add(micros(refresh.ttl)))
                    .bind(refresh.id)
                    .execute(conn)
                    .await?;
                Ok(done.rows_affected())
            })
            .await?;
        Ok(matched == 1)
    }

    async fn unregister_worker(&self, id: i64) -> Result<()> {
        self.write(async |conn| sqlx::query(WORKER_UNREGISTER).bind(id).execute(conn).await)
            .await?;
        Ok(())
    }

    async fn record_tick(&self, name: &str, tick: DateTime<Utc>) -> Result<()> {
        self.write(async |conn| {
            sqlx::query(TICK_RECORD)
                .bind(name)
                .bind(tick.timestamp_micros())
                .bind(now_micros())
                .execute(conn)
                .await
        })
        .await?;
        Ok(())
    }

    async fn put_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.write(async |conn| {
            sqlx::query(SCHEDULE_PUT)
                .bind(&schedule.name)
                .bind(&schedule.job_name)
                .bind(&schedule.payload)
                .bind(&schedule.cron)
                .bind(&schedule.time_zone)
                .bind(&schedule.queue)
                .bind(schedule.priority)
                .bind(now_micros())
                .execute(conn)
                .await
        })
        .await?;
        Ok(())
    }

    async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<bool> {
        let done = self
            .write(async |conn| {
                sqlx::query(SCHEDULE_PAUSE)
                    .bind(name)
                    .bind(paused)
                    .bind(now_micros())
                    .execute(conn)
                    .await
            })
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn remove_schedule(&self, name: &str) -> Result<bool> {
        let done = self
            .write(async |conn| sqlx::query(SCHEDULE_REMOVE).bind(name).execute(conn).await)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn prune_workers(&self) -> Result<u64> {
        self.write(async |conn| {
            let done = sqlx::query(WORKERS_PRUNE)
                .bind(now_micros())
                .execute(conn)
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    async fn live_workers(&self) -> Result<Vec<WorkerRecord>> {
        let rows = self
            .run(statement::READ, async |conn| {
                sqlx::query(WORKERS_LIVE)
                    .bind(now_micros())
                    .fetch_all(conn)
                    .await
            })
            .await?;
        Ok(rows.iter().map(worker_record).collect::<Result<_, _>>()?)
    }

    fn filtered(&self) -> &'static Filtered {
        &FILTERED
    }

    shared::reads!(shared::as_is);

    shared::numbered_reads!();
    shared::every_backend_reads!();
    crate::store::flow::flow_methods!(begin_flow);
    crate::store::batch::batch_methods!(begin_flow);

    /// One statement ([`bulk_retry`]): the batch's rows that still meet
    /// `guard`, retried (one writer at a time: no row is held by another).
    async fn retry_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        _locks: RowLocks,
    ) -> Result<Vec<i64>> {
        let sql = bulk_retry(guard);
        let ids = json_list(ids);
        self.write(async |conn| {
            sqlx::query_scalar(&sql)
                .bind(now_micros())
                .bind(ids.as_str())
                .fetch_all(conn)
                .await
        })
        .await
    }

    /// One `BEGIN IMMEDIATE` transaction ([`bulk_cancel_pick`]): the
    /// batch's rows that still meet `guard`, with their tokens, then
    /// cancelled.
    async fn cancel_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        _locks: RowLocks,
    ) -> Result<Cancelled> {
        let pick = Statement::fixed(&bulk_cancel_pick(guard), vec![Bind::Text(json_list(ids))]);
        self.write(async |conn| cancel_picked(conn, &pick).await)
            .await
    }

    /// No clock to compare: SQLite's times are this host's.
    async fn doctor(
        &self,
        _options: super::doctor::DoctorOptions,
    ) -> Result<Vec<crate::ops::Check>> {
        self.run_doctor().await
    }
}

/// Pauses or resumes `queue` on `conn` (holding the write turn); the rows
/// the update matched.
async fn set_paused(
    conn: &mut SqliteConnection,
    queue: &str,
    paused: bool,
) -> Result<u64, sqlx::Error> {
    if paused {
        sqlx::query(QUEUE_ROW)
            .bind(queue)
            .execute(&mut *conn)
            .await?;
        let done = sqlx::query(PAUSE)
            .bind(now_micros())
            .bind(queue)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    } else {
        let done = sqlx::query(RESUME).bind(queue).execute(&mut *conn).await?;
        Ok(done.rows_affected())
    }
}

impl SqliteStore {
    /// A read that sees every write committed before it: as it is.
    fn causal<'a>(&self, sql: &'a str) -> std::borrow::Cow<'a, str> {
        sql.into()
    }

    /// A write of a workflow's (one statement or one short transaction),
    /// within the deadline.
    async fn flow_write<T>(
        &self,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        self.write(work).await
    }

    /// Runs `work` on one of jobq's connections [`within`] the statement
    /// deadline: one statement.
    async fn run<T>(
        &self,
        statement: &'static str,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        within(self.deadline, statement, self.conns.run(work)).await
    }

    /// One of jobq's writes, `work` (one statement or one short
    /// transaction) on the write connection, in turn with this store's
    /// other writes ([`writes`](Self::writes)).
    async fn write<T>(
        &self,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        let _turn = self.writes.lock().await;
        Ok(self.conns.run(work).await?)
    }

    /// Extends the leases of `fences` that are still held ([`HEARTBEAT`]);
    /// the fences it renewed.
    async fn renew(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let update = Fenced::new(HEARTBEAT, fences);
        self.write(async |conn| {
            let rows = update
                .query(now_micros().saturating_add(micros(lease)))
                .fetch_all(conn)
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(Fence {
                        id: row.try_get(0)?,
                        token: row.try_get(1)?,
                    })
                })
                .collect()
        })
        .await
    }
}

/// The migrations not applied yet, in one `BEGIN IMMEDIATE` transaction on
/// `conn`: processes migrating a new file at once take turns.
async fn migrate_on(conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    tx.execute(MIGRATIONS_TABLE).await?;
    let applied: Vec<i64> = sqlx::query_scalar(MIGRATIONS_APPLIED)
        .fetch_all(&mut *tx)
        .await?;
    for migration in migrate::pending(MIGRATIONS, &applied) {
        tx.execute(migration.sql).await?;
        sqlx::query(MIGRATION_RECORD)
            .bind(migration.version)
            .bind(migration.description)
            .bind(now_micros())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

/// Every chunk of `jobs` in one `BEGIN IMMEDIATE` transaction on `conn`:
/// keyless chunks as one multi-row INSERT each, the others row by row.
async fn insert_chunks<J: Borrow<NewJob>>(
    conn: &mut SqliteConnection,
    jobs: &[J],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let now = now_micros();
    let mut out = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(INSERT_CHUNK) {
        if chunk.iter().all(|job| job.borrow().plain()) {
            out.extend(insert_keyless(&mut tx, chunk).await?);
        } else {
            for job in chunk {
                out.push(insert_row(&mut tx, job.borrow(), now).await?);
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
async fn insert_keyless<J: Borrow<NewJob>>(
    conn: &mut SqliteConnection,
    chunk: &[J],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let now = now_micros();
    let mut insert = sqlx::QueryBuilder::<Sqlite>::new(INSERT_MANY_KEYLESS);
    insert.push_values(chunk, |mut row, job| {
        let job: &NewJob = job.borrow();
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

/// [`insert_job_row`], and for a job with metadata or tags, them too, in a
/// transaction of its own (a savepoint of the caller's).
async fn insert_row(
    conn: &mut SqliteConnection,
    job: &NewJob,
    now: i64,
) -> Result<Enqueued, sqlx::Error> {
    if !job.attached() {
        return insert_job_row(conn, job, now).await;
    }
    shared::insert_attached!(conn, job, tx => insert_job_row(&mut tx, job, now))
}

/// One INSERT of `job` enqueued at `now`.
async fn insert_job_row(
    conn: &mut SqliteConnection,
    job: &NewJob,
    now: i64,
) -> Result<Enqueued, sqlx::Error> {
    if let Some((key, unique)) = job.unique_key() {
        return insert_unique(conn, job, key, unique, now).await;
    }
    if let Some((key, limit)) = &job.concurrency {
        return insert_keyed(conn, job, key, *limit, now).await;
    }
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

/// A unique job (see [`UNIQUE_TAKE`]) enqueued at `now`, in a transaction
/// of its own on `conn` or a savepoint of the caller's: takes its key's
/// row, and returns the job holding the key or inserts this one and
/// writes it in.
async fn insert_unique(
    conn: &mut SqliteConnection,
    job: &NewJob,
    key: &str,
    unique: jobq_core::Unique,
    now: i64,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = conn.begin().await?;
    sqlx::query(UNIQUE_TAKE).bind(key).execute(&mut *tx).await?;
    let (job_id, states, within_period, status_bit): (i64, i64, bool, i64) =
        sqlx::query_as(UNIQUE_HOLDER)
            .bind(key)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
    let row = UniqueRow {
        job_id,
        states,
        within_period,
        status_bit,
    };
    if let Some(id) = row.holder() {
        tx.commit().await?;
        return Ok(Enqueued {
            id,
            duplicate: true,
        });
    }
    let inserted = sqlx::query(INSERT_UNIQUE)
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(run_at_micros(job.run_at, now))
        .bind(job.max_attempts)
        .bind(key)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let id = inserted.last_insert_rowid();
    sqlx::query(UNIQUE_HOLD)
        .bind(key)
        .bind(id)
        .bind(i64::from(unique.state_bits()))
        .bind(unique.period().map(|p| now.saturating_add(micros(p))))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Enqueued {
        id,
        duplicate: false,
    })
}

/// The statement that sets (`statements[0]`, with `rate`, now) or removes
/// (`statements[1]`, `rate` `None`) the rate row of `name`: a queue's or a
/// concurrency key's.
fn rate_row<'q>(
    [set, remove]: [&'q str; 2],
    name: &'q str,
    rate: Option<Rate>,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    match rate {
        Some(rate) => sqlx::query(set)
            .bind(name)
            .bind(i64::from(rate.starts()))
            .bind(rate.period_us())
            .bind(i64::from(rate.burst()))
            .bind(now_micros()),
        None => sqlx::query(remove).bind(name),
    }
}

/// A job with a concurrency key enqueued at `now`, in a transaction of its
/// own on `conn` or a savepoint of the caller's (the write lock keeps
/// other writers out): sets its key's row ([`KEY_TAKE`]), reads the front
/// of the key's jobs, inserts the job `pending` if the key has room
/// ([`key_admits`]) or `blocked`, and lists it in its key.
async fn insert_keyed(
    conn: &mut SqliteConnection,
    job: &NewJob,
    key: &str,
    limit: u32,
    now: i64,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = conn.begin().await?;
    sqlx::query(KEY_TAKE)
        .bind(key)
        .bind(i64::from(limit))
        .execute(&mut *tx)
        .await?;
    let rows: Vec<(i64, Option<String>)> = sqlx::query_as(KEY_FRONT)
        .bind(key)
        .bind(i64::from(key_front_len(limit)))
        .fetch_all(&mut *tx)
        .await?;
    let status = if key_admits(&key_front(key, limit, &rows)) {
        "pending"
    } else {
        "blocked"
    };
    let (id, hits): (i64, i64) = sqlx::query_as(INSERT_KEYED)
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(run_at_micros(job.run_at, now))
        .bind(job.max_attempts)
        .bind(&job.idempotency_key)
        .bind(now)
        .bind(status)
        .bind(key)
        .bind(i64::from(limit))
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(KEY_JOIN)
        .bind(key)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Enqueued {
        id,
        duplicate: hits > 0,
    })
}

/// One release of `keys` (see [`BackendStore::release_keys`]) in one
/// `BEGIN IMMEDIATE` transaction on `conn`.
async fn release_keys_on(
    conn: &mut SqliteConnection,
    keys: &[String],
) -> Result<KeyPlan, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let limits: Vec<(String, u32)> = sqlx::query_as::<_, (String, i64)>(KEYS_READ)
        .bind(json_text(&keys))
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(key, limit)| (key, key_limit(limit)))
        .collect();
    let names: Vec<&str> = limits.iter().map(|(key, _)| key.as_str()).collect();
    let longest = limits.iter().map(|&(_, limit)| key_front_len(limit)).max();
    let rows: Vec<(String, i64, Option<String>)> = sqlx::query_as(KEY_FRONTS)
        .bind(json_text(&names))
        .bind(i64::from(longest.unwrap_or(0)))
        .fetch_all(&mut *tx)
        .await?;
    let plan = key_plan(&key_fronts(&limits, &rows));
    if !plan.forget.is_empty() {
        sqlx::query(KEY_FORGET)
            .bind(json_text(&plan.forget))
            .execute(&mut *tx)
            .await?;
    }
    if !plan.unblock.is_empty() {
        sqlx::query(KEY_UNBLOCK)
            .bind(json_list(&plan.unblock))
            .execute(&mut *tx)
            .await?;
    }
    if !plan.empty.is_empty() {
        sqlx::query(KEYS_DROP)
            .bind(json_text(&plan.empty))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(plan)
}

/// `values` as a JSON array, for `json_each`.
fn json_text<T: serde::Serialize>(values: &T) -> String {
    serde_json::to_string(values).unwrap_or_else(|_| "[]".to_owned())
}

/// When a job enqueued at `now` may first run, in unix µs.
fn run_at_micros(run_at: RunAt, now: i64) -> i64 {
    match run_at {
        RunAt::Now => now,
        RunAt::After(delay) => now.saturating_add(micros(delay)),
        RunAt::At(at) => at.timestamp_micros(),
    }
}

/// `id, job_name, payload, attempts, max_attempts, idempotency_key,
/// concurrency_key`, text as bytes.
type ClaimRow = (
    i64,
    Vec<u8>,
    Vec<u8>,
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
);

/// Picks the due rows in claim order and marks those still due and
/// `pending` held ([`CLAIM`]'s guard), on `tx`: a connection (the plain
/// claim, two statements each its own transaction) or a transaction (a
/// limited claim's). Two statements, because an `UPDATE … RETURNING`
/// hands rows back in no particular order and has already overwritten the
/// `run_at` they were picked by; the result is in pick order, each row
/// with the `run_at` it was picked at.
async fn claim_rows(
    tx: &mut SqliteConnection,
    claim: ClaimRequest<'_>,
    base: i64,
) -> Result<Vec<(ClaimRow, Option<i64>)>, sqlx::Error> {
    let (queue, limit, lease, worker) = (claim.queue, claim.limit, claim.lease, claim.worker);
    let now = now_micros();
    let picked: Vec<(i64, i64)> = sqlx::query_as(PICK)
        .bind(queue)
        .bind(now)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = picked.iter().map(|&(id, _)| id).collect();
    let ids = json_list(&ids);
    let rows: Vec<ClaimRow> = sqlx::query_as(CLAIM)
        .bind(base)
        .bind(now)
        .bind(now.saturating_add(micros(lease)))
        .bind(worker)
        .bind(ids)
        .fetch_all(&mut *tx)
        .await?;
    let rank: std::collections::HashMap<i64, (usize, i64)> = picked
        .iter()
        .enumerate()
        .map(|(i, &(id, run_at))| (id, (i, run_at)))
        .collect();
    let mut rows: Vec<(ClaimRow, Option<i64>)> = rows
        .into_iter()
        .map(|row| {
            let due = rank.get(&row.0).map(|&(_, run_at)| run_at);
            (row, due)
        })
        .collect();
    rows.sort_unstable_by_key(|(row, _)| rank.get(&row.0).map(|&(i, _)| i));
    Ok(rows)
}

/// The jobs of a claim's rows ([`claim_rows`]), under tokens of `base`.
fn claimed_jobs(rows: Vec<(ClaimRow, Option<i64>)>, base: i64) -> Vec<ClaimedJob> {
    rows.into_iter()
        .map(
            |(
                (
                    id,
                    job_name,
                    payload,
                    attempts,
                    max_attempts,
                    idempotency_key,
                    key,
                    metadata,
                    tags,
                ),
                due,
            )| {
                let job = ClaimedJob::from_bytes(
                    id,
                    job_name,
                    payload,
                    attempts,
                    max_attempts,
                    idempotency_key,
                    row_token(base, id),
                )
                .keyed(key.map(|key| lossy_utf8(key).0))
                .attached(
                    metadata.map(|m| lossy_utf8(m).0),
                    tags.map(|t| lossy_utf8(t).0),
                );
                match due {
                    Some(run_at) => job.due_since(utc(run_at)),
                    None => job,
                }
            },
        )
        .collect()
}

/// A limited claim's transaction on `conn` (holding the write turn; see
/// [`BackendStore::claim_limited`]): the free slots of the queue (under a
/// limit), the starts its rate allows (under a rate), then [`claim_rows`]
/// for at most that many, each written into a slot, the rate moved on by
/// them. Returns the rows, what it was allowed, and (when it was allowed
/// none) whether a job was due.
async fn claim_limited_on(
    conn: &mut SqliteConnection,
    claim: ClaimRequest<'_>,
    flow: Flow,
    base: i64,
) -> Result<(Vec<(ClaimRow, Option<i64>)>, Allowed, bool), sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let now = now_micros();
    let plan = if flow.slots {
        let locked: Vec<Slot> = sqlx::query_as(SLOTS_READ)
            .bind(claim.queue)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(Slot::of_row)
            .collect();
        let holders: Vec<i64> = crate::store::policy::slot_holders(&locked)
            .iter()
            .map(|f| f.id)
            .collect();
        let live: Vec<Fence> = if holders.is_empty() {
            Vec::new()
        } else {
            sqlx::query_as::<_, (i64, i64)>(SLOT_HOLDERS)
                .bind(json_list(&holders))
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|(id, token)| Fence { id, token })
                .collect()
        };
        let (limit, total): (Option<i64>, i64) = sqlx::query_as(SLOTS_SIZE)
            .bind(claim.queue)
            .fetch_one(&mut *tx)
            .await?;
        let plan = SlotPlan::of(&locked, &live, slots_limit(limit), slots_total(total));
        for slot in &plan.retired {
            sqlx::query(SLOT_RETIRE)
                .bind(claim.queue)
                .bind(slot)
                .execute(&mut *tx)
                .await?;
        }
        Some(plan)
    } else {
        None
    };
    let mut allowed = Allowed::new(claim.limit, plan.as_ref().map(|plan| plan.room));
    if allowed.reads_rate(flow) {
        let row = sqlx::query_as(RATE_READ)
            .bind(claim.queue)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        allowed.rate_row(row);
    }
    let take = allowed.take();
    if take == 0 {
        let due: bool = sqlx::query_scalar(DUE_EXISTS)
            .bind(claim.queue)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        if let Some(tat) = allowed.tat_after(0) {
            sqlx::query(RATE_ADVANCE)
                .bind(tat)
                .bind(claim.queue)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        return Ok((Vec::new(), allowed, due));
    }
    let rows = claim_rows(
        &mut tx,
        ClaimRequest {
            limit: take,
            ..claim
        },
        base,
    )
    .await?;
    let assigned: Vec<String> = plan
        .iter()
        .flat_map(|plan| &plan.free)
        .zip(&rows)
        .map(|(slot, (row, _))| format!("[{slot},{},{}]", row.0, row_token(base, row.0)))
        .collect();
    if !assigned.is_empty() {
        sqlx::query(SLOTS_ASSIGN)
            .bind(claim.queue)
            .bind(format!("[{}]", assigned.join(",")))
            .execute(&mut *tx)
            .await?;
    }
    if let Some(tat) = allowed.tat_after(rows.len()) {
        sqlx::query(RATE_ADVANCE)
            .bind(tat)
            .bind(claim.queue)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok((rows, allowed, false))
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
/// ([`new_token_base`]): a fence's token names its row as well as its
/// claim, so a row matches another fence's token only if two random 62-bit
/// bases differ by exactly the difference of two ids. (With one token per
/// claim batch, a stale fence of a row batched with a fresh fence of another
/// row from the claim that re-took it matched that row.)
struct Fenced {
    sql: &'static str,
    ids: String,
    tokens: String,
}

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

/// Cancels the rows `pick` selects in one `BEGIN IMMEDIATE` transaction on `conn`.
async fn cancel_picked(
    conn: &mut SqliteConnection,
    pick: &Statement,
) -> Result<Cancelled, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
    let rows: Vec<(i64, Option<i64>)> = sqlx::query_as_with(&pick.sql, arguments(&pick.binds)?)
        .fetch_all(&mut *tx)
        .await?;
    if !rows.is_empty() {
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        sqlx::query(CANCEL_IDS)
            .bind(now_micros())
            .bind(json_list(&ids))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(Cancelled::of_rows(&rows))
}

/// The values of a filtered statement; times as unix microseconds.
fn arguments(binds: &[Bind]) -> Result<SqliteArguments<'static>, sqlx::Error> {
    let mut args = SqliteArguments::default();
    for bind in binds {
        let added = match bind {
            Bind::Text(text) => args.add(text.clone()),
            Bind::Int(n) => args.add(*n),
            Bind::Time(t) => args.add(t.timestamp_micros()),
        };
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
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

/// A time column's value (unix microseconds) as a time.
fn utc_time(micros: i64) -> DateTime<Utc> {
    utc(micros)
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
fn is_memory(url: &str) -> bool {
    let rest = url.strip_prefix("sqlite:").unwrap_or(url);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (database, params) = rest.split_once('?').unwrap_or((rest, ""));
    database == ":memory:" || params.split('&').any(|p| p == "mode=memory")
}

impl ClaimedJob {
    /// [`new`](Self::new) for a row whose text columns were read as bytes
    /// (SQLite stores whatever another program wrote: a BLOB, or text that
    /// is not UTF-8). Each is decoded as UTF-8; one that is not is decoded
    /// lossily (U+FFFD) and the job marked [`unreadable`](Self::unreadable),
    /// so that it fails on its own instead of failing the whole claim.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn from_bytes(
        id: i64,
        job_name: Vec<u8>,
        payload: Vec<u8>,
        attempt: i64,
        max_attempts: i64,
        idempotency_key: Option<Vec<u8>>,
        token: i64,
    ) -> Self {
        let mut bad = Vec::new();
        let mut decode = |column: &'static str, bytes: Vec<u8>| {
            let (text, valid) = lossy_utf8(bytes);
            if !valid {
                bad.push(column);
            }
            text
        };
        let job_name = decode("job_name", job_name);
        let payload = decode("payload", payload);
        let idempotency_key = idempotency_key.map(|key| decode("idempotency_key", key));
        let mut job = Self::new(
            id,
            job_name,
            payload,
            attempt,
            max_attempts,
            idempotency_key,
            token,
        );
        if !bad.is_empty() {
            job.unreadable = Some(format!(
                "the row's {} {} not valid UTF-8 (written by another program, or corrupted; Jobq::job shows {} with U+FFFD for the bad bytes)",
                bad.join(" and "),
                if bad.len() == 1 { "is" } else { "are" },
                if bad.len() == 1 { "it" } else { "them" },
            ));
        }
        job
    }
}

/// `bytes` as text, and whether they were valid UTF-8 (if not, each bad
/// sequence is replaced by U+FFFD).
fn lossy_utf8(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, true),
        Err(error) => (
            String::from_utf8_lossy(error.as_bytes()).into_owned(),
            false,
        ),
    }
}

/// Text read as bytes and decoded lossily (SQLite stores whatever another
/// program wrote), a NULL one as empty where jobq never writes NULL; times
/// as unix microseconds.
impl Columns for SqliteRow {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }

    fn small(&self, column: &str) -> Result<i16, sqlx::Error> {
        self.try_get(column)
    }

    fn count(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }

    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        Ok(self.opt_text(column)?.unwrap_or_default())
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        Ok(self
            .try_get::<Option<Vec<u8>>, _>(column)?
            .map(|bytes| lossy_utf8(bytes).0))
    }

    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        Ok(utc(self.try_get(column)?))
    }

    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        Ok(self.try_get::<Option<i64>, _>(column)?.map(utc))
    }
}

impl SqliteStore {
    /// One fenced statement setting one value on held row `fence` (its
    /// SQL binds the value, the id, the token); whether it still held it.
    async fn fenced_set(&self, sql: &'static str, fence: Fence, value: &str) -> Result<bool> {
        let affected = self
            .write(async |conn| {
                let done = sqlx::query(sql)
                    .bind(value)
                    .bind(fence.id)
                    .bind(fence.token)
                    .execute(conn)
                    .await?;
                Ok(done.rows_affected())
            })
            .await?;
        Ok(affected == 1)
    }
}

crate::store::flow::flow_insert!(SqliteConnection, flow_insert_row);
crate::store::batch::batch_insert!(SqliteConnection, flow_insert_row);

/// Begins the transaction of a workflow's insert.
async fn begin_flow(
    conn: &mut SqliteConnection,
) -> Result<sqlx::Transaction<'_, sqlx::Sqlite>, sqlx::Error> {
    conn.begin_with(BEGIN_IMMEDIATE).await
}

/// One job of a workflow, stored now.
async fn flow_insert_row(
    conn: &mut SqliteConnection,
    job: &NewJob,
) -> Result<Enqueued, sqlx::Error> {
    insert_row(conn, job, now_micros()).await
}

/// A workflow statement's leading values: the time now (µs), as SQLite's statements take it.
fn flow_now<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    query.bind(now_micros())
}

/// A workflow statement's text: as it is (its ids arrive as one JSON array).
fn flow_sql(sql: &'static str, _n: usize) -> &'static str {
    sql
}

/// Binds a workflow statement's ids, as a JSON array.
fn flow_bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ids: &[i64],
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    query.bind(crate::store::flow::id_list(ids))
}
