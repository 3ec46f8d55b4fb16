//! PostgreSQL 13+: one autocommit statement per operation, `FOR UPDATE SKIP
//! LOCKED` inside a CTE, and LISTEN/NOTIFY wake-ups.
//!
//! Facts behind this SQL (verified on PostgreSQL 15):
//! - the claim is one statement: a CTE picks due rows in claim order with
//!   `FOR UPDATE SKIP LOCKED` (the CTE is an optimization fence: the planner
//!   cannot fold it into the UPDATE and run the LIMIT more than once) and the
//!   UPDATE takes them by primary key, `id = ANY (ARRAY(SELECT id FROM picked))`.
//!   Joining the CTE instead (`FROM picked WHERE j.id = picked.id`) is what
//!   Oban and River do, but once the plan cache switches to a generic plan
//!   (`LIMIT $2` unknown, guessed at 10 % of the table) the join becomes a
//!   hash join over a sequential scan of the whole table, on every claim;
//! - the partial index `jobq_jobs_claim (queue, priority, run_at, id) WHERE
//!   status = 'pending'` serves the claim's ORDER BY, so it locks only the
//!   rows it returns, and `jobq_jobs_lease (queue, run_at) WHERE status =
//!   'processing'` serves the reaper. `status` is always a literal so a generic
//!   plan still proves those predicates (the tests EXPLAIN both plans);
//! - times are the server's: `now()` in jobq's own statements (each is its own
//!   transaction, so it is the statement's time), `statement_timestamp()` in
//!   the INSERT, which may run inside a caller's long transaction. The
//!   application passes durations only, in microseconds;
//! - an enqueue inside the caller's transaction sends `pg_notify('jobq',
//!   queue)` in the same statement, so the wake-up goes out when the row
//!   commits and never for a rolled-back row; enqueues on jobq's own pool
//!   commit first and are announced right after by one [`Notifier`] (the
//!   commits of notifying transactions are serialized by PostgreSQL);
//!   [`PgStore::listen`] turns those into in-process wake-ups.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgListener, PgPoolOptions, PgRow};
use sqlx::{Connection, Executor, PgConnection, PgPool, Row};
use tokio_util::sync::CancellationToken;

use super::stash::Stash;
use super::{
    ClaimedJob, Fence, NewJob, Prunable, Target, Transition, micros, migrate, new_token_base,
    retry_transient, row_token,
};
use crate::types::{Enqueued, JobInfo, RunAt};
use crate::{Error, Result, wakeup};

/// The NOTIFY channel; the payload is the queue name.
const CHANNEL: &str = "jobq";

/// One row; `ON CONFLICT` returns the existing row for a known key, and
/// `dedupe_hits > 0` tells a duplicate from a new row (the count wraps from
/// 2³¹ − 1 to 1, never to 0 and never out of its `integer`'s range). Enqueues on jobq's
/// pool announce the queue through the [`Notifier`] after the commit.
const INSERT_QUIET: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp())
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, dedupe_hits";

/// [`INSERT_QUIET`] for a job without an idempotency key: nothing can
/// conflict, and a plain INSERT skips the speculative insertion that
/// `ON CONFLICT` costs on every row.
const INSERT_QUIET_KEYLESS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, statement_timestamp())
    RETURNING id, 0";

/// [`INSERT_QUIET`] plus its NOTIFY, for an enqueue inside the caller's
/// transaction: the wake-up goes out when that transaction commits, never
/// for a rolled-back row.
const INSERT: &str = "WITH ins AS (
    INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp())
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, dedupe_hits, queue
)
SELECT id, dedupe_hits, pg_notify('jobq', queue)::text FROM ins";

/// [`INSERT_MANY`] for a batch without idempotency keys (the common case):
/// nothing can conflict, so a plain `INSERT … SELECT` in ordinal order. The
/// identity default is drawn row by row as the sorted rows are inserted, so
/// the ids ascend in input order (a sequence only ever hands one session
/// increasing values): the caller sorts the returned ids and pairs them with
/// the input, whatever order RETURNING sends them in. The rows have
/// [`INSERT_MANY`]'s shape, `(0, id, 0)`.
const INSERT_MANY_KEYLESS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    SELECT queue, job_name, payload, priority,
           COALESCE(at, statement_timestamp() + delay_us * interval '1 microsecond'),
           max_attempts, statement_timestamp()
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::bigint[], $7::int[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, at, delay_us, max_attempts, ord)
     ORDER BY ord
    RETURNING 0::bigint, id, 0";

/// [`INSERT_MANY_KEYLESS`] for rows that are all due now: two arrays fewer
/// to send and unpack.
const INSERT_MANY_NOW: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    SELECT queue, job_name, payload, priority, statement_timestamp(), max_attempts, statement_timestamp()
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::int[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, max_attempts, ord)
     ORDER BY ord
    RETURNING 0::bigint, id, 0";

/// Many rows from parallel arrays: one statement text for every batch size.
///
/// RETURNING can only name the table's columns, so each input row gets its
/// id from the identity sequence up front (`input`); a new row comes back
/// with that id, a duplicate with its key, and the final SELECT maps both
/// back to the input's ordinal. Keys are distinct within a batch (the caller
/// folds repeats), as `ON CONFLICT DO UPDATE` cannot touch a row twice.
const INSERT_MANY: &str = "WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('jobq_jobs', 'id')) AS id, t.*
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::bigint[], $7::int[], $8::text[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, at, delay_us, max_attempts, idempotency_key, ord)
), ins AS (
    INSERT INTO jobq_jobs (id, queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, queue, job_name, payload, priority,
           COALESCE(at, statement_timestamp() + delay_us * interval '1 microsecond'),
           max_attempts, idempotency_key, statement_timestamp()
      FROM input ORDER BY ord
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, idempotency_key, dedupe_hits
)
SELECT input.ord, COALESCE(by_key.id, by_id.id), COALESCE(by_key.dedupe_hits, by_id.dedupe_hits)
  FROM input
  LEFT JOIN ins AS by_key ON by_key.idempotency_key = input.idempotency_key
  LEFT JOIN ins AS by_id ON by_id.id = input.id
 ORDER BY input.ord";

const CLAIM: &str = include_str!("postgres/claim.sql");

/// A claimed row, with the priority and `run_at` it was picked by.
type ClaimRow = (
    i64,
    String,
    String,
    i32,
    i32,
    Option<String>,
    i16,
    DateTime<Utc>,
);

const REAP: &str = include_str!("postgres/reap.sql");

// Settles and heartbeats find their rows by primary key from the fence
// list, matching the token alone: a token is non-null only while its claim
// holds the row (every way out of `processing` clears it), so it fences as
// `status = 'processing'` would. Leaving the status test out leaves the
// planner no partial index to scan instead of the primary key: with stale
// statistics it took `jobq_jobs_lease` (every processing row) and looped
// over the fence list for each, 1.5 s per 1,000 settles during a fast drain.
const COMPLETE: &str = include_str!("postgres/complete.sql");

/// Returns the fences it still held, so the lost ones are known exactly.
const HEARTBEAT: &str = include_str!("postgres/heartbeat.sql");

/// The heartbeat of rows a stuck settle is writing: skips the locked ones.
const HEARTBEAT_UNLOCKED: &str = include_str!("postgres/heartbeat_unlocked.sql");

/// PostgreSQL evaluates every SET expression on the old row, so
/// `finished_at` looks at the new status through `$1`.
const TRANSITION: &str = "UPDATE jobq_jobs SET status = $1,
       run_at = now() + $2 * interval '1 microsecond',
       attempts = attempts - $3,
       last_error = COALESCE($4, last_error),
       finished_at = CASE WHEN $1 = 'failed' THEN now() END,
       lease_token = NULL
 WHERE id = $5 AND lease_token = $6 AND status = 'processing'";

/// Finished rows of the statuses `$2`, oldest first, through
/// `jobq_jobs_finished`; the outer `status` test holds against a concurrent
/// `retry` (PostgreSQL re-checks it on the row's newest version).
pub const PRUNE: &str = "DELETE FROM jobq_jobs WHERE id IN (
    SELECT id FROM jobq_jobs
     WHERE finished_at < now() - $1 * interval '1 microsecond' AND status = ANY($2)
     ORDER BY finished_at LIMIT $3)
   AND status = ANY($2)";

const CANCEL: &str = "UPDATE jobq_jobs
   SET status = 'cancelled', finished_at = now(), run_at = now(), lease_token = NULL
 WHERE id = $1 AND status IN ('pending', 'processing')";

const RETRY: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = now(), finished_at = NULL,
       max_attempts = GREATEST(max_attempts, attempts + 1)
 WHERE id = $1 AND status IN ('failed', 'cancelled')";

const JOB: &str = "SELECT id, queue, job_name, payload, status, priority, attempts, max_attempts,
       run_at, idempotency_key, last_error, claimed_by, claimed_at, created_at, finished_at
  FROM jobq_jobs WHERE id = $1";

/// Rows per INSERT of `enqueue_many`.
const INSERT_CHUNK: usize = 1000;
/// Fences per settle or heartbeat statement.
const FENCE_CHUNK: usize = 5000;

/// deadlock_detected, serialization_failure, lock_not_available.
fn is_transient(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| matches!(&*code, "40P01" | "40001" | "55P03"))
}

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    /// jobq's own statements take their connections here.
    conns: Stash<sqlx::Postgres>,
    notifier: Arc<Notifier>,
}

/// Least time between two NOTIFYs of one store: an enqueue after a quiet
/// spell is announced at once, then at most one NOTIFY per pause. The pause
/// doubles while at least [`STREAM_ENQUEUES`] enqueues arrive during one, up
/// to [`MAX_NOTIFY_PAUSE`], and starts over otherwise: a trickle (200
/// jobs/s) is announced job by job, a stream of thousands per second about
/// every 32 ms. Each NOTIFY is a transaction of its own on the server (it
/// takes a transaction id and the notification queue's lock): with one per
/// 8 ms a single task's stream of single-row enqueues ran about 10 % slower
/// than with none. Workers busy with such a stream do not wait for them: a
/// claim that found jobs is followed by another at once.
const NOTIFY_PAUSE: Duration = Duration::from_millis(2);
/// The longest pause between two NOTIFYs of a stream of enqueues.
const MAX_NOTIFY_PAUSE: Duration = Duration::from_millis(32);
/// Enqueues during one pause that make the next pause longer.
const STREAM_ENQUEUES: u32 = 4;

/// Sends the NOTIFYs of enqueues made on jobq's pool, after their INSERTs
/// committed: one statement at a time, at most one per [`NOTIFY_PAUSE`],
/// for every queue enqueued to since the previous one.
///
/// A `pg_notify` inside the enqueue's own statement would be simpler, but
/// PostgreSQL serializes the commits of notifying transactions (a
/// database-wide lock held until the commit record is flushed), so
/// concurrent enqueues could no longer share a WAL flush: 8 concurrent
/// enqueuers did 513 jobs/s that way, against 2,175 for plain INSERTs. Here
/// the INSERTs commit freely and only the notifier takes that lock. A
/// NOTIFY that fails is logged; workers find the jobs at their next poll.
/// (`enqueue_in` still notifies inside the caller's transaction.)
///
/// It sends on a connection of its own with `synchronous_commit = off`: a
/// NOTIFY is not durable anyway, so its commit need not wait for a WAL flush
/// (and holds that lock for microseconds, not a disk write).
#[derive(Debug, Default)]
struct Notifier {
    state: Mutex<NotifierState>,
    /// One connection, opened on first use with the store pool's options.
    pool: OnceLock<PgPool>,
}

#[derive(Debug, Default)]
struct NotifierState {
    /// Queues enqueued to and not yet announced.
    queues: BTreeSet<String>,
    /// Enqueues since the last NOTIFY went out.
    enqueues: u32,
    /// Whether a task is sending.
    sending: bool,
}

impl Notifier {
    fn state(&self) -> std::sync::MutexGuard<'_, NotifierState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Announces `queues`: now, or right after the NOTIFY in flight.
    fn announce<'q>(self: &Arc<Self>, pool: &PgPool, queues: impl IntoIterator<Item = &'q str>) {
        let mut state = self.state();
        state.enqueues = state.enqueues.saturating_add(1);
        for queue in queues {
            if !state.queues.contains(queue) {
                state.queues.insert(queue.to_owned());
            }
        }
        if state.sending || state.queues.is_empty() {
            return;
        }
        state.sending = true;
        drop(state);
        let notifier = Arc::clone(self);
        let pool = self
            .pool
            .get_or_init(|| {
                PgPoolOptions::new()
                    .max_connections(1)
                    .test_before_acquire(false)
                    .before_acquire(super::ping_if_idle::<sqlx::Postgres>)
                    .after_connect(|conn, _meta| {
                        Box::pin(async move {
                            conn.execute("SET synchronous_commit = off").await?;
                            Ok(())
                        })
                    })
                    .connect_lazy_with((*pool.connect_options()).clone())
            })
            .clone();
        tokio::spawn(async move { notifier.send(&pool).await });
    }

    async fn send(&self, pool: &PgPool) {
        let mut pause = NOTIFY_PAUSE;
        loop {
            let queues: Vec<String> = {
                let mut state = self.state();
                if state.queues.is_empty() {
                    state.sending = false;
                    return;
                }
                state.enqueues = 0;
                std::mem::take(&mut state.queues).into_iter().collect()
            };
            if let Err(error) =
                sqlx::query("SELECT pg_notify('jobq', q) FROM UNNEST($1::text[]) AS q")
                    .bind(&queues)
                    .execute(pool)
                    .await
            {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    ?queues,
                    "announcing enqueued jobs with NOTIFY failed; workers of other processes find them at their next poll"
                );
            }
            // Announcements arriving meanwhile go out together after the pause.
            tokio::time::sleep(pause).await;
            pause = if self.state().enqueues >= STREAM_ENQUEUES {
                (pause * 2).min(MAX_NOTIFY_PAUSE)
            } else {
                NOTIFY_PAUSE
            };
        }
    }
}

impl PgStore {
    pub(crate) async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .test_before_acquire(false)
            .before_acquire(super::ping_if_idle::<sqlx::Postgres>)
            .connect(url)
            .await?;
        Self::from_pool(pool).await
    }

    pub(crate) async fn from_pool(pool: PgPool) -> Result<Self> {
        Ok(Self {
            conns: Stash::new(pool.clone()),
            pool,
            notifier: Arc::default(),
        })
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// In one transaction under an advisory lock: DDL is transactional here,
    /// so a failed migration leaves nothing half-applied, and concurrent
    /// migrators take turns.
    pub(crate) async fn migrate(&self) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        // 0x6a6f6271 = "jobq"
        sqlx::query("SELECT pg_advisory_xact_lock(1785684593)")
            .execute(&mut *tx)
            .await?;
        tx.execute(
            "CREATE TABLE IF NOT EXISTS jobq_migrations (version bigint PRIMARY KEY, \
             description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM jobq_migrations")
            .fetch_all(&mut *tx)
            .await?;
        for migration in migrate::pending(migrate::POSTGRES, &applied) {
            tx.execute(migration.sql).await?;
            sqlx::query("INSERT INTO jobq_migrations (version, description) VALUES ($1, $2)")
                .bind(migration.version)
                .bind(migration.description)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let enqueued = retry_transient(is_transient, || async {
            let mut conn = self.conns.get().await?;
            let sql = if job.idempotency_key.is_some() {
                INSERT_QUIET
            } else {
                INSERT_QUIET_KEYLESS
            };
            let result = insert_with(&mut conn, job, sql).await;
            conn.done(result)
        })
        .await?;
        self.notifier.announce(&self.pool, [job.queue.as_str()]);
        Ok(enqueued)
    }

    /// All or nothing: a batch of one chunk is one statement; a longer one
    /// runs its statements in one transaction, so a row the server refuses
    /// leaves nothing of the batch.
    pub(crate) async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let out = retry_transient(is_transient, || async {
            let mut conn = self.conns.get().await?;
            let result = if jobs.len() <= INSERT_CHUNK {
                insert_chunk(&mut conn, jobs).await
            } else {
                insert_chunks(&mut conn, jobs).await
            };
            conn.done(result)
        })
        .await?;
        self.notifier
            .announce(&self.pool, jobs.iter().map(|job| job.queue.as_str()));
        Ok(out)
    }
    pub(crate) async fn claim(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        let base = new_token_base();
        let mut rows: Vec<ClaimRow> = retry_transient(is_transient, || async {
            let mut conn = self.conns.get().await?;
            let result = sqlx::query_as(CLAIM)
                .bind(queue)
                .bind(i64::from(limit))
                .bind(base)
                .bind(micros(lease))
                .bind(worker)
                .fetch_all(&mut *conn)
                .await;
            conn.done(result)
        })
        .await?;
        // Handed out in the order they were picked.
        rows.sort_unstable_by_key(|row| (row.6, row.7, row.0));
        Ok(rows
            .into_iter()
            .map(
                |(id, job_name, payload, attempts, max_attempts, idempotency_key, _, _)| {
                    ClaimedJob::new(
                        id,
                        job_name,
                        payload,
                        attempts.into(),
                        max_attempts.into(),
                        idempotency_key,
                        row_token(base, id),
                    )
                },
            )
            .collect())
    }

    pub(crate) async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        let mut total = 0;
        for chunk in fences.chunks(FENCE_CHUNK) {
            let (ids, tokens) = fence_arrays(chunk);
            total += retry_transient(is_transient, || async {
                let mut conn = self.conns.get().await?;
                let result = sqlx::query(COMPLETE)
                    .bind(&ids)
                    .bind(&tokens)
                    .execute(&mut *conn)
                    .await
                    .map(|r| r.rows_affected());
                conn.done(result)
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
            let mut conn = self.conns.get().await?;
            let result = sqlx::query(TRANSITION)
                .bind(status)
                .bind(micros(t.delay))
                .bind(i32::from(t.refund_attempt))
                .bind(&t.error)
                .bind(t.fence.id)
                .bind(t.fence.token)
                .execute(&mut *conn)
                .await
                .map(|r| r.rows_affected());
            conn.done(result)
        })
        .await?;
        Ok(affected == 1)
    }

    pub(crate) async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let mut lost = Vec::new();
        for chunk in fences.chunks(FENCE_CHUNK) {
            let held = self.renew(HEARTBEAT, chunk, lease).await?;
            if held.len() < chunk.len() {
                let held: std::collections::HashSet<Fence> = held.into_iter().collect();
                lost.extend(chunk.iter().filter(|f| !held.contains(f)).copied());
            }
        }
        Ok(lost)
    }

    /// Runs `sql` (a lease renewal returning `id, lease_token` of the rows
    /// it renewed) for one chunk of fences; the fences it renewed.
    async fn renew(
        &self,
        sql: &'static str,
        chunk: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let (ids, tokens) = fence_arrays(chunk);
        let rows: Vec<(i64, i64)> = retry_transient(is_transient, || async {
            let mut conn = self.conns.get().await?;
            let result = sqlx::query_as(sql)
                .bind(&ids)
                .bind(&tokens)
                .bind(micros(lease))
                .fetch_all(&mut *conn)
                .await;
            conn.done(result)
        })
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, token)| Fence { id, token })
            .collect())
    }

    /// One statement per chunk; returns the fences it renewed.
    pub(crate) async fn heartbeat_unlocked(
        &self,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let mut renewed = Vec::new();
        for chunk in fences.chunks(FENCE_CHUNK) {
            renewed.extend(self.renew(HEARTBEAT_UNLOCKED, chunk, lease).await?);
        }
        Ok(renewed)
    }

    pub(crate) async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        retry_transient(is_transient, || async {
            sqlx::query(REAP)
                .bind(queue)
                .bind(i64::from(limit))
                .execute(&self.pool)
                .await
                .map(|r| r.rows_affected())
        })
        .await
    }

    /// Forwards NOTIFYs on `jobq` whose payload is one of `queues` to the
    /// in-process wake-ups until `stop`; reconnects with backoff when the
    /// connection is lost. After every (re)connect it wakes all `queues` once,
    /// since notifications sent while it was not listening are gone.
    ///
    /// The listener holds its connection for as long as it runs, so it gets a
    /// one-connection pool of its own (same connect options): parked on the
    /// store's pool it would shrink the pool the claims and settles use, and
    /// starve them in a pool of one.
    pub(crate) async fn listen(&self, queues: &[String], stop: &CancellationToken) {
        if queues.is_empty() {
            return;
        }
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with((*self.pool.connect_options()).clone());
        let mut failures = 0u32;
        loop {
            let error = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                result = forward_notifications(&pool, queues, &mut failures) => match result {
                    Err(error) => error,
                },
            };
            if matches!(error, sqlx::Error::PoolClosed) {
                break;
            }
            failures += 1;
            let pause = listen_backoff(failures);
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                retry_in = ?pause,
                "listening for PostgreSQL notifications failed; reconnecting (queues are still polled)"
            );
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        pool.close().await;
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
        retry_transient(is_transient, || async {
            sqlx::query(PRUNE)
                .bind(micros(older_than))
                .bind(which.statuses())
                .bind(i64::from(limit))
                .execute(&self.pool)
                .await
                .map(|r| r.rows_affected())
        })
        .await
    }

    pub(crate) async fn cancel(&self, id: i64) -> Result<bool> {
        self.update_one(CANCEL, id).await
    }

    pub(crate) async fn retry(&self, id: i64) -> Result<bool> {
        self.update_one(RETRY, id).await
    }

    /// Runs `sql` with `$1 = id`; whether it changed the row.
    async fn update_one(&self, sql: &'static str, id: i64) -> Result<bool> {
        let affected = retry_transient(is_transient, || async {
            sqlx::query(sql)
                .bind(id)
                .execute(&self.pool)
                .await
                .map(|r| r.rows_affected())
        })
        .await?;
        Ok(affected == 1)
    }
}

/// One idempotent INSERT (plus its NOTIFY) on any PostgreSQL connection: the
/// pool's, or the caller's transaction, where the NOTIFY goes out on commit
/// and not at all on rollback.
/// Every chunk of `jobs` in one transaction on `conn`.
async fn insert_chunks(
    conn: &mut PgConnection,
    jobs: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = conn.begin().await?;
    let mut out = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(INSERT_CHUNK) {
        out.extend(insert_chunk(&mut tx, chunk).await?);
    }
    tx.commit().await?;
    Ok(out)
}

/// One `INSERT_MANY`; results in input order.
async fn insert_chunk(
    conn: &mut PgConnection,
    chunk: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    // A key repeated within the batch: only its first row is sent, the
    // later ones are duplicates of it (as one INSERT per row would make them).
    let mut sent: Vec<&NewJob> = Vec::with_capacity(chunk.len());
    let mut first_of_key = std::collections::HashMap::new();
    let slots: Vec<(usize, bool)> = chunk
        .iter()
        .map(|job| match &job.idempotency_key {
            Some(key) => match first_of_key.get(key.as_str()) {
                Some(&slot) => (slot, true),
                None => {
                    first_of_key.insert(key.as_str(), sent.len());
                    sent.push(job);
                    (sent.len() - 1, false)
                }
            },
            None => {
                sent.push(job);
                (sent.len() - 1, false)
            }
        })
        .collect();

    let mut queues = Vec::with_capacity(sent.len());
    let mut names = Vec::with_capacity(sent.len());
    let mut payloads = Vec::with_capacity(sent.len());
    let mut priorities = Vec::with_capacity(sent.len());
    let mut ats = Vec::with_capacity(sent.len());
    let mut delays = Vec::with_capacity(sent.len());
    let mut max_attempts = Vec::with_capacity(sent.len());
    let mut keys = Vec::with_capacity(sent.len());
    for job in &sent {
        let (at, delay) = run_at_binds(job.run_at);
        queues.push(job.queue.as_str());
        names.push(job.job_name.as_str());
        payloads.push(job.payload.as_str());
        priorities.push(job.priority);
        ats.push(at);
        delays.push(delay);
        max_attempts.push(attempts_bind(job.max_attempts));
        keys.push(job.idempotency_key.as_deref());
    }
    let keyless = keys.iter().all(Option::is_none);
    let query = if keyless && sent.iter().all(|job| matches!(job.run_at, RunAt::Now)) {
        sqlx::query_as(INSERT_MANY_NOW)
            .bind(queues)
            .bind(names)
            .bind(payloads)
            .bind(priorities)
            .bind(max_attempts)
    } else {
        let query = sqlx::query_as(if keyless {
            INSERT_MANY_KEYLESS
        } else {
            INSERT_MANY
        })
        .bind(queues)
        .bind(names)
        .bind(payloads)
        .bind(priorities)
        .bind(ats)
        .bind(delays)
        .bind(max_attempts);
        if keyless { query } else { query.bind(keys) }
    };
    let rows: Vec<(i64, i64, i32)> = query.fetch_all(&mut *conn).await?;
    if keyless {
        if rows.len() != chunk.len() {
            return Err(sqlx::Error::Protocol(format!(
                "enqueue_many inserted {} rows and got {} ids back",
                chunk.len(),
                rows.len()
            )));
        }
        let mut ids: Vec<i64> = rows.into_iter().map(|(_, id, _)| id).collect();
        ids.sort_unstable();
        return Ok(ids
            .into_iter()
            .map(|id| Enqueued {
                id,
                duplicate: false,
            })
            .collect());
    }
    // One row per sent job, ordered by its ordinal: check, then fan out to the input.
    let in_order = rows.len() == sent.len()
        && rows
            .iter()
            .zip(1..)
            .all(|(&(ord, _, _), expected)| ord == expected);
    if !in_order {
        return Err(sqlx::Error::Protocol(format!(
            "enqueue_many sent {} rows and got {} results back, not one per row in order",
            sent.len(),
            rows.len()
        )));
    }
    Ok(slots
        .into_iter()
        .map(|(slot, repeat)| {
            let (_, id, hits) = rows[slot];
            Enqueued {
                id,
                duplicate: hits > 0 || repeat,
            }
        })
        .collect())
}

pub(crate) async fn insert(conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued, sqlx::Error> {
    insert_with(conn, job, INSERT).await
}

/// One idempotent INSERT of `job` with `sql` ([`INSERT`], [`INSERT_QUIET`]
/// or [`INSERT_QUIET_KEYLESS`], which takes no key).
async fn insert_with(
    conn: &mut PgConnection,
    job: &NewJob,
    sql: &'static str,
) -> Result<Enqueued, sqlx::Error> {
    let (at, delay) = run_at_binds(job.run_at);
    let query = sqlx::query_as(sql)
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(at)
        .bind(delay)
        .bind(attempts_bind(job.max_attempts));
    let query = if sql == INSERT_QUIET_KEYLESS {
        query
    } else {
        query.bind(&job.idempotency_key)
    };
    let (id, hits): (i64, i32) = query.fetch_one(&mut *conn).await?;
    Ok(Enqueued {
        id,
        duplicate: hits > 0,
    })
}

/// Listens until the connection fails; returns only with the error.
async fn forward_notifications(
    pool: &PgPool,
    queues: &[String],
    failures: &mut u32,
) -> Result<Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    tracing::debug!(channel = CHANNEL, "listening for PostgreSQL notifications");
    *failures = 0;
    wake_all(queues);
    loop {
        // `Ok(None)`: the connection dropped and sqlx has reconnected (and
        // re-issued LISTEN); whatever was sent in between is lost.
        match listener.try_recv().await? {
            Some(notification) => {
                let queue = notification.payload();
                if queues.iter().any(|q| q == queue) {
                    wakeup::notify(queue);
                }
            }
            None => {
                tracing::warn!(
                    "the PostgreSQL notification connection was lost and has been re-established"
                );
                wake_all(queues);
            }
        }
    }
}

fn wake_all(queues: &[String]) {
    for queue in queues {
        wakeup::notify(queue);
    }
}

/// 500 ms doubling to 30 s: polling covers the queues meanwhile, so a
/// listener that cannot connect need not hammer the server.
fn listen_backoff(failures: u32) -> Duration {
    let ms = 500u64.saturating_mul(1 << failures.min(6)).min(30_000);
    Duration::from_millis(rand::random_range(ms / 2..=ms))
}

/// `(absolute time, delay µs)` for the `COALESCE($at, statement_timestamp() + $delay µs)` pair.
fn run_at_binds(run_at: RunAt) -> (Option<DateTime<Utc>>, i64) {
    match run_at {
        RunAt::Now => (None, 0),
        RunAt::After(delay) => (None, micros(delay)),
        RunAt::At(at) => (Some(at), 0),
    }
}

/// `max_attempts` as the `integer` column holds it (validated at enqueue to fit).
fn attempts_bind(max_attempts: u32) -> i32 {
    i32::try_from(max_attempts).unwrap_or(i32::MAX)
}

/// The fences as the two parallel arrays `UNNEST($1, $2)` pairs up again.
fn fence_arrays(fences: &[Fence]) -> (Vec<i64>, Vec<i64>) {
    fences.iter().map(|f| (f.id, f.token)).unzip()
}

fn job_info(row: &PgRow) -> Result<JobInfo> {
    let status: String = row.try_get("status")?;
    Ok(JobInfo {
        id: row.try_get("id")?,
        queue: row.try_get("queue")?,
        job_name: row.try_get("job_name")?,
        payload: row.try_get("payload")?,
        status: status.parse().map_err(Error::UnknownStatus)?,
        priority: row.try_get("priority")?,
        attempts: u32::try_from(row.try_get::<i32, _>("attempts")?).unwrap_or(0),
        max_attempts: u32::try_from(row.try_get::<i32, _>("max_attempts")?).unwrap_or(0),
        run_at: row.try_get("run_at")?,
        idempotency_key: row.try_get("idempotency_key")?,
        last_error: row.try_get("last_error")?,
        claimed_by: row.try_get("claimed_by")?,
        claimed_at: row.try_get("claimed_at")?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}
