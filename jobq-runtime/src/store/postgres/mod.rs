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
//!   commit first and are announced right after by one [`PgBell`] (the
//!   commits of notifying transactions are serialized by PostgreSQL);
//!   [`listen`](listen::listen) turns those into in-process wake-ups.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Arguments, Connection, Executor, PgConnection, PgPool, Row};
use tokio_util::sync::CancellationToken;

use self::notify::PgBell;
use self::sql::*;
use super::filter::{Bind, Filtered, Statement};
use super::migrate;
use super::ring::Ringer;
use super::shared::{self, Columns, worker_record};
use super::stash::Stash;
use crate::error::Result;
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
    key_plan, key_rates, key_starts, micros, migrating, new_token_base, not_renewed, row_token,
    within,
};
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, RunAt, Schedule, ScheduleInfo};
use crate::wakeup::Watch;

mod doctor;
pub(crate) mod glue;
mod listen;
mod notify;
pub mod sql;
#[cfg(test)]
mod tests;

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
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Rows per INSERT of `enqueue_many`.
const INSERT_CHUNK: usize = 1000;

/// How long the reaper waits between its two looks at the expired rows
/// ([`REAP_SEEN`], [`REAP`]). A caller's transaction that writes a running
/// job's row (a duplicate `enqueue_in` bumps `dedupe_hits`) and holds it
/// past the lease leaves, when it commits, a new version of the row that
/// nobody has locked: the worker's renewal, waiting on the old version, locks
/// the new one only once the commit has woken it, and a reaper whose
/// `SKIP LOCKED` came first would take a running attempt's row. A row is
/// reaped only if it kept its version between the looks — the woken renewal
/// has written it long before. (MySQL/MariaDB hands a released lock to the
/// transaction waiting for it, so its reaper needs no second look; SQLite
/// has no row locks.)
const REAP_CONFIRM: Duration = Duration::from_millis(200);

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    /// jobq's own statements take their connections here.
    conns: Stash<sqlx::Postgres>,
    ringer: Arc<Ringer<PgBell>>,
    /// How long one statement may take (see [`super::policy::within`]).
    pub(super) deadline: Duration,
}

impl BackendStore for PgStore {
    type Pool = PgPool;
    type Connection = PgConnection;
    /// A queue and a status: [`PRUNE`] deletes from that range of
    /// `jobq_jobs_finished_by_queue`.
    type PruneScope = (String, &'static str);

    const FENCE_CHUNK: usize = 5000;

    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }

    /// deadlock_detected, serialization_failure, lock_not_available.
    fn is_transient(error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| matches!(&*code, "40P01" | "40001" | "55P03"))
    }

    async fn connect(url: &str, connect: &ConnectOptions) -> Result<Self> {
        let options = PgConnectOptions::from_str(url)?;
        crate::store::policy::probe(url, &options, connect.connect_timeout).await?;
        let pool = PgPoolOptions::new()
            .max_connections(connect.max_connections)
            .test_before_acquire(false)
            // As on MySQL: a wait for a connection ends at the connect
            // timeout, not after sqlx's connect backoff (up to 10 s past an
            // outage's end).
            .acquire_timeout(connect.connect_timeout)
            .before_acquire(crate::store::policy::ping_if_idle::<sqlx::Postgres>)
            .connect_with(options)
            .await?;
        let mut store = Self::from_pool(pool).await?;
        store.deadline = connect.statement_timeout;
        Ok(store)
    }

    async fn from_pool(pool: PgPool) -> Result<Self> {
        Ok(Self {
            conns: Stash::new(pool.clone(), true),
            ringer: Arc::new(Ringer::new(PgBell::new(pool.clone()))),
            pool,
            deadline: crate::DEFAULT_STATEMENT_TIMEOUT,
        })
    }

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn migrations(&self) -> &'static [migrate::Migration] {
        MIGRATIONS
    }

    /// In one transaction under an advisory lock: DDL is transactional here,
    /// so a failed migration leaves nothing half-applied, and concurrent
    /// migrators take turns.
    ///
    /// Within [`MIGRATE_DEADLINE`](super::policy::MIGRATE_DEADLINE) once it has its
    /// connection.
    async fn migrate(&self) -> Result<()> {
        migrating(&self.conns, self.deadline, migrate_on).await
    }

    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let sql = if job.idempotency_key.is_some() {
            INSERT_QUIET
        } else {
            INSERT_QUIET_KEYLESS
        };
        let enqueued = self
            .conns
            .run(async |conn| insert_with(conn, job, sql).await)
            .await?;
        self.ringer.announce(self.deadline, [job.queue.as_str()]);
        Ok(enqueued)
    }

    /// All or nothing: a batch of one chunk is one statement; a longer one
    /// runs its statements in one transaction, so a row the server refuses
    /// leaves nothing of the batch.
    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let out =
            self.conns
                .run(async |conn| {
                    if jobs.iter().any(|job| {
                        job.unique.is_some() || job.concurrency.is_some() || job.attached()
                    }) {
                        insert_each(conn, jobs).await
                    } else if jobs.len() <= INSERT_CHUNK {
                        insert_chunk(conn, jobs).await
                    } else {
                        insert_chunks(conn, jobs).await
                    }
                })
                .await?;
        self.ringer
            .announce(self.deadline, jobs.iter().map(|job| job.queue.as_str()));
        Ok(out)
    }

    async fn enqueue_in(conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued> {
        Ok(insert_with(conn, job, INSERT).await?)
    }

    async fn prune_unique(&self, after: &str, limit: u32) -> Result<UniquePage> {
        Ok(self
            .conns
            .run(async |conn| {
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
                Ok::<_, sqlx::Error>(UniquePage::of(&rows, limit, deleted))
            })
            .await?)
    }

    async fn release_keys(&self, keys: &[String]) -> Result<KeyPlan> {
        Ok(self
            .conns
            .run(async |conn| release_keys_on(conn, keys).await)
            .await?)
    }

    async fn keys_of(&self, ids: &[i64], rejoin: bool) -> Result<Vec<String>> {
        Ok(self
            .conns
            .run(async |conn| {
                if rejoin {
                    // One transaction: a release that finds the key without
                    // jobs and deletes its row either comes before the row
                    // is made again or sees the job listed.
                    let mut tx = begin(conn).await?;
                    for sql in [KEYS_REMAKE, KEYS_REJOIN] {
                        sqlx::query(sql).bind(ids).execute(&mut *tx).await?;
                    }
                    tx.commit().await?;
                }
                let keys: Vec<(String,)> = sqlx::query_as(KEYS_OF)
                    .bind(ids)
                    .fetch_all(&mut *conn)
                    .await?;
                Ok::<_, sqlx::Error>(keys.into_iter().map(|(key,)| key).collect())
            })
            .await?)
    }

    async fn key_page(&self, after: &str, limit: u32) -> Result<Vec<String>> {
        Ok(self
            .conns
            .run(async |conn| {
                let keys: Vec<(String,)> = sqlx::query_as(KEY_PAGE)
                    .bind(after)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await?;
                Ok::<_, sqlx::Error>(keys.into_iter().map(|(key,)| key).collect())
            })
            .await?)
    }

    async fn set_key_rate(&self, key: &str, rate: Option<Rate>) -> Result<()> {
        self.conns
            .execute(rate_row([KEY_RATE_SET, KEY_RATE_REMOVE], key, rate))
            .await?;
        Ok(())
    }

    async fn key_rates(&self) -> Result<Vec<(String, Rate)>> {
        let rows: Vec<(String, i64, i64, i64)> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(KEY_RATES).fetch_all(&mut *conn).await
            })
            .await?;
        Ok(key_rates(rows))
    }

    async fn take_key_starts(&self, key: &str, ids: &[i64]) -> Result<Option<KeyStarts>> {
        let wanted = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        Ok(self
            .conns
            .run(async |conn| {
                let mut tx = begin(conn).await?;
                let row: Option<(i64, i64, i64, i64, i64)> = sqlx::query_as(KEY_RATE_LOCK)
                    .bind(key)
                    .fetch_optional(&mut *tx)
                    .await?;
                let now = row.map(|r| r.4);
                let Some((starts, tat)) = key_starts(row, wanted) else {
                    tx.commit().await?;
                    return Ok::<_, sqlx::Error>(None);
                };
                if let Some(tat) = tat {
                    sqlx::query(KEY_RATE_ADVANCE)
                        .bind(tat)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
                let started = &ids[..starts.taken as usize];
                if let (Some(now), false) = (now, started.is_empty()) {
                    sqlx::query(KEY_STARTED)
                        .bind(now)
                        .bind(started)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(Some(starts))
            })
            .await?)
    }

    async fn claim(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>> {
        Ok(self
            .conns
            .run(async |conn| claim_rows(conn, claim).await)
            .await?)
    }

    async fn claim_limited(&self, claim: ClaimRequest<'_>, flow: Flow) -> Result<LimitedClaim> {
        Ok(self
            .conns
            .run(async |conn| claim_limited_on(conn, claim, flow).await)
            .await?)
    }

    async fn set_rate(&self, queue: &str, rate: Option<Rate>) -> Result<()> {
        self.conns
            .execute(rate_row([RATE_SET, RATE_REMOVE], queue, rate))
            .await?;
        Ok(())
    }

    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        Ok(self
            .conns
            .run(async |conn| {
                let mut tx = begin(conn).await?;
                match limit {
                    Some(limit) => {
                        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
                        sqlx::query(LIMIT_SET)
                            .bind(queue)
                            .bind(limit)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(SLOTS_FILL)
                            .bind(queue)
                            .bind(limit)
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
                let keep = limit.map_or(0, |n| i32::try_from(n).unwrap_or(i32::MAX));
                sqlx::query(if limit.is_some() {
                    SLOTS_TRIM_IDLE
                } else {
                    SLOTS_TRIM
                })
                .bind(queue)
                .bind(keep)
                .execute(&mut *tx)
                .await?;
                tx.commit().await
            })
            .await?)
    }

    async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        let (ids, tokens) = fence_arrays(fences);
        Ok(self
            .conns
            .execute(sqlx::query(COMPLETE).bind(ids).bind(tokens))
            .await?)
    }

    async fn transition(&self, t: &Transition) -> Result<bool> {
        let affected = self
            .conns
            .execute(
                sqlx::query(TRANSITION)
                    .bind(t.target.status())
                    .bind(micros(t.delay))
                    .bind(i32::from(t.refund_attempt))
                    .bind(&t.error)
                    .bind(t.fence.id)
                    .bind(t.fence.token)
                    .bind(t.record.as_ref().map(|r| r.0))
                    .bind(t.record.as_ref().map(|r| r.1.as_str())),
            )
            .await?;
        Ok(affected == 1)
    }

    /// One statement ([`HEARTBEAT`]); its rows are the fences it renewed.
    async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let renewed = self.renew(HEARTBEAT, fences, lease).await?;
        Ok(not_renewed(fences, renewed))
    }

    /// One statement ([`HEARTBEAT_UNLOCKED`]); returns the fences it renewed.
    async fn heartbeat_unlocked(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        self.renew(HEARTBEAT_UNLOCKED, fences, lease).await
    }

    /// Two looks [`REAP_CONFIRM`] apart ([`REAP_SEEN`], then [`REAP`]): a
    /// row is reaped only if it stayed expired and unwritten in between.
    async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        let seen: Vec<(i64, String)> = self
            .conns
            .run(async |conn| {
                sqlx::query_as(REAP_SEEN)
                    .bind(queue)
                    .bind(i64::from(limit))
                    .fetch_all(conn)
                    .await
            })
            .await?;
        if seen.is_empty() {
            return Ok(0);
        }
        tokio::time::sleep(REAP_CONFIRM).await;
        let (ids, versions): (Vec<i64>, Vec<String>) = seen.into_iter().unzip();
        Ok(self
            .conns
            .execute(sqlx::query(REAP).bind(ids).bind(versions))
            .await?)
    }

    /// Each queue with finished rows ([`PRUNE_QUEUES`]), with each status.
    async fn prune_scopes(&self, which: Prunable) -> Result<Vec<(String, &'static str)>> {
        let queues: Vec<String> = self
            .run(statement::PRUNE, async |conn| {
                sqlx::query_scalar(PRUNE_QUEUES).fetch_all(conn).await
            })
            .await?;
        Ok(queues
            .into_iter()
            .flat_map(|queue| which.statuses().iter().map(move |&s| (queue.clone(), s)))
            .collect())
    }

    /// [`PRUNE`].
    async fn prune(
        &self,
        (queue, status): &(String, &'static str),
        older_than: Duration,
        limit: u32,
    ) -> Result<u64> {
        Ok(self
            .conns
            .execute(
                sqlx::query(PRUNE)
                    .bind(queue)
                    .bind(*status)
                    .bind(micros(older_than))
                    .bind(i64::from(limit)),
            )
            .await?)
    }

    /// Forwards NOTIFYs on `jobq` for `queues` (see [`listen::listen`]).
    fn announce_control(&self) {
        self.ringer.announce_control(self.deadline);
    }

    async fn flush_wakeups(&self, within: Duration) {
        self.ringer.flush(within).await;
    }

    async fn listen(
        &self,
        queues: &[String],
        watch: &Watch,
        stop: &CancellationToken,
        _give_up: &CancellationToken,
    ) {
        listen::listen(&self.pool, queues, watch, stop, self.deadline).await;
    }

    async fn cancel(&self, id: i64) -> Result<Cancelled> {
        let rows: Vec<(i64, Option<i64>)> = self
            .conns
            .run(async |conn| sqlx::query_as(CANCEL).bind(id).fetch_all(conn).await)
            .await?;
        Ok(Cancelled::of_rows(&rows))
    }

    async fn clock(&self) -> Result<DateTime<Utc>> {
        self.run(statement::READ, async |conn| {
            sqlx::query_scalar(CLOCK).fetch_one(conn).await
        })
        .await
    }

    /// [`STATS_LIVE`].
    async fn stats_live(&self, queue: &str, now: DateTime<Utc>) -> Result<Vec<LiveFigures>> {
        type LiveRow = (String, i64, i64, i64, Option<DateTime<Utc>>);
        let live: Vec<LiveRow> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(STATS_LIVE)
                    .bind(queue)
                    .bind(now)
                    .fetch_all(conn)
                    .await
            })
            .await?;
        Ok(live
            .into_iter()
            .map(|(status, rows, due, expired, earliest)| {
                LiveFigures::new(status, rows, Some(due), Some(expired), earliest)
            })
            .collect())
    }

    /// [`STATS_PER_MINUTE`].
    async fn stats_per_minute(
        &self,
        queue: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64, i64)>> {
        self.run(statement::READ, async |conn| {
            sqlx::query_as(STATS_PER_MINUTE)
                .bind(queue)
                .bind(since)
                .fetch_all(conn)
                .await
        })
        .await
    }

    async fn live_workers(&self) -> Result<Vec<WorkerRecord>> {
        let rows = self
            .run(statement::READ, async |conn| {
                sqlx::query(WORKERS_LIVE).fetch_all(conn).await
            })
            .await?;
        Ok(rows.iter().map(worker_record).collect::<Result<_, _>>()?)
    }

    fn filtered(&self) -> &'static Filtered {
        &FILTERED
    }

    shared::reads!(shared::as_is);

    shared::numbered_reads!();

    shared::server_writes!();
    shared::every_backend_reads!();
    crate::store::flow::flow_methods!(begin_flow);
    crate::store::batch::batch_methods!(begin_flow);

    async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<bool> {
        let query = sqlx::query(SCHEDULE_PAUSE).bind(name).bind(paused);
        Ok(self.conns.execute(query).await? == 1)
    }

    /// One statement ([`bulk_retry`]): the batch's rows that still meet
    /// `guard` locked and retried by primary key.
    async fn retry_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Vec<i64>> {
        let sql = bulk_retry(guard, locks);
        Ok(self
            .conns
            .run(async |conn| sqlx::query_scalar(&sql).bind(ids).fetch_all(conn).await)
            .await?)
    }

    /// One statement ([`bulk_cancel`]), as [`retry_batch`](Self::retry_batch);
    /// its rows are the ones it changed, with the tokens they had.
    async fn cancel_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Cancelled> {
        let sql = bulk_cancel(guard, locks);
        let rows: Vec<(i64, Option<i64>)> = self
            .conns
            .run(async |conn| sqlx::query_as(&sql).bind(ids).fetch_all(conn).await)
            .await?;
        Ok(Cancelled::of_rows(&rows))
    }

    async fn doctor(
        &self,
        options: super::doctor::DoctorOptions,
    ) -> Result<Vec<crate::ops::Check>> {
        self.run_doctor(options.clock).await
    }
}

impl PgStore {
    /// A read that sees every write committed before it: as it is.
    fn causal<'a>(&self, sql: &'a str) -> std::borrow::Cow<'a, str> {
        sql.into()
    }

    /// A write of a workflow's (one statement or one short transaction),
    /// within the deadline.
    async fn flow_write<T>(
        &self,
        work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        within(self.deadline, statement::FLOW, self.conns.run(work)).await
    }

    /// Runs `work` on one of jobq's connections [`within`] the statement
    /// deadline: one statement.
    async fn run<T>(
        &self,
        statement: &'static str,
        work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        within(self.deadline, statement, self.conns.run(work)).await
    }

    /// Runs `sql` (a lease renewal returning `id, lease_token` of the rows
    /// it renewed) for `fences`; the fences it renewed.
    async fn renew(
        &self,
        sql: &'static str,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let (ids, tokens) = fence_arrays(fences);
        let rows: Vec<(i64, i64)> = self
            .conns
            .run(async |conn| {
                sqlx::query_as(sql)
                    .bind(ids)
                    .bind(tokens)
                    .bind(micros(lease))
                    .fetch_all(conn)
                    .await
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|(id, token)| Fence { id, token })
            .collect())
    }
}

/// The migrations not applied yet, in one transaction on `conn` under an
/// advisory lock.
async fn migrate_on(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    let mut tx = begin(conn).await?;
    sqlx::query(MIGRATE_LOCK).execute(&mut *tx).await?;
    tx.execute(MIGRATIONS_TABLE).await?;
    let applied: Vec<i64> = sqlx::query_scalar(MIGRATIONS_APPLIED)
        .fetch_all(&mut *tx)
        .await?;
    for migration in migrate::pending(MIGRATIONS, &applied) {
        tx.execute(migration.sql).await?;
        sqlx::query(MIGRATION_RECORD)
            .bind(migration.version)
            .bind(migration.description)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

/// The values of a filtered statement.
fn arguments(binds: &[Bind]) -> Result<PgArguments, sqlx::Error> {
    let mut args = PgArguments::default();
    for bind in binds {
        let added = match bind {
            Bind::Text(text) => args.add(text.as_str()),
            Bind::Int(n) => args.add(*n),
            Bind::Time(t) => args.add(*t),
        };
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// Every chunk of `jobs` in one transaction on `conn`.
async fn insert_chunks(
    conn: &mut PgConnection,
    jobs: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = begin(conn).await?;
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

/// One idempotent INSERT of `job` with `sql` ([`INSERT`], [`INSERT_QUIET`]
/// or [`INSERT_QUIET_KEYLESS`], which takes no key); a job with metadata or
/// tags is inserted and gets them in a transaction of its own (a savepoint
/// of the caller's).
async fn insert_with(
    conn: &mut PgConnection,
    job: &NewJob,
    sql: &'static str,
) -> Result<Enqueued, sqlx::Error> {
    if !job.attached() {
        return insert_row(conn, job, sql).await;
    }
    shared::insert_attached!(conn, job, tx => insert_row(&mut tx, job, sql))
}

/// [`insert_with`] of the job's row alone.
async fn insert_row(
    conn: &mut PgConnection,
    job: &NewJob,
    sql: &'static str,
) -> Result<Enqueued, sqlx::Error> {
    if let Some((key, unique)) = job.unique_key() {
        return insert_unique(conn, job, key, unique, sql == INSERT).await;
    }
    if let Some((key, limit)) = &job.concurrency {
        return insert_keyed(conn, job, key, *limit, sql == INSERT).await;
    }
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

/// A unique job (see [`UNIQUE_TAKE`]) in a transaction of its own on
/// `conn`, or a savepoint of the caller's (whose transaction an error
/// here then leaves usable): takes its key's row, and returns the job
/// holding the key or inserts this one (with its NOTIFY if `notify`) and
/// writes it in.
async fn insert_unique(
    conn: &mut PgConnection,
    job: &NewJob,
    key: &str,
    unique: jobq_core::Unique,
    notify: bool,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = begin(conn).await?;
    sqlx::query(UNIQUE_TAKE).bind(key).execute(&mut *tx).await?;
    let (job_id, states, within_period, status_bit): (i64, i64, bool, i64) =
        sqlx::query_as(UNIQUE_HOLDER)
            .bind(key)
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
    let (at, delay) = run_at_binds(job.run_at);
    let (id, _): (i64, Option<String>) = sqlx::query_as(INSERT_UNIQUE)
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(at)
        .bind(delay)
        .bind(attempts_bind(job.max_attempts))
        .bind(key)
        .bind(notify)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(UNIQUE_HOLD)
        .bind(key)
        .bind(id)
        .bind(i16::from(unique.state_bits()))
        .bind(unique.period().map(micros))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Enqueued {
        id,
        duplicate: false,
    })
}

/// The statement that sets (`statements[0]`, with `rate`) or removes
/// (`statements[1]`, `rate` `None`) the rate row of `name`: a queue's or a
/// concurrency key's.
fn rate_row<'q>(
    [set, remove]: [&'q str; 2],
    name: &'q str,
    rate: Option<Rate>,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    match rate {
        Some(rate) => sqlx::query(set)
            .bind(name)
            .bind(i32::try_from(rate.starts()).unwrap_or(i32::MAX))
            .bind(rate.period_us())
            .bind(i32::try_from(rate.burst()).unwrap_or(i32::MAX)),
        None => sqlx::query(remove).bind(name),
    }
}

/// A job with a concurrency key in a transaction of its own on `conn`, or
/// a savepoint of the caller's: takes its key's row ([`KEY_TAKE`]), reads
/// the front of the key's jobs, inserts the job `pending` if the key has
/// room ([`key_admits`]) or `blocked`, and lists it in its key.
async fn insert_keyed(
    conn: &mut PgConnection,
    job: &NewJob,
    key: &str,
    limit: u32,
    notify: bool,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = begin(conn).await?;
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
    let (at, delay) = run_at_binds(job.run_at);
    let (id, hits): (i64, i32) = sqlx::query_as(INSERT_KEYED)
        .bind(&job.queue)
        .bind(&job.job_name)
        .bind(&job.payload)
        .bind(job.priority)
        .bind(at)
        .bind(delay)
        .bind(attempts_bind(job.max_attempts))
        .bind(&job.idempotency_key)
        .bind(status)
        .bind(key)
        .bind(notify)
        .bind(i32::try_from(limit).unwrap_or(i32::MAX))
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

/// One release of `keys` (see [`BackendStore::release_keys`]) in a
/// transaction of its own on `conn`.
async fn release_keys_on(conn: &mut PgConnection, keys: &[String]) -> Result<KeyPlan, sqlx::Error> {
    let mut tx = begin(conn).await?;
    let limits: Vec<(String, u32)> = sqlx::query_as::<_, (String, i32)>(KEYS_LOCK)
        .bind(keys)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(key, limit)| (key, key_limit(limit.into())))
        .collect();
    if limits.is_empty() {
        tx.commit().await?;
        return Ok(KeyPlan::default());
    }
    let names: Vec<&str> = limits.iter().map(|(key, _)| key.as_str()).collect();
    let lens: Vec<i64> = limits
        .iter()
        .map(|(_, limit)| i64::from(key_front_len(*limit)))
        .collect();
    let rows: Vec<(String, i64, Option<String>)> = sqlx::query_as(KEY_FRONTS)
        .bind(&names)
        .bind(&lens)
        .fetch_all(&mut *tx)
        .await?;
    let plan = key_plan(&key_fronts(&limits, &rows));
    if !plan.forget.is_empty() {
        let (keys, ids): (Vec<&str>, Vec<i64>) =
            plan.forget.iter().map(|(k, id)| (k.as_str(), *id)).unzip();
        sqlx::query(KEY_FORGET)
            .bind(&keys)
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
    }
    if !plan.unblock.is_empty() {
        sqlx::query(KEY_UNBLOCK)
            .bind(&plan.unblock)
            .execute(&mut *tx)
            .await?;
    }
    if !plan.empty.is_empty() {
        sqlx::query(KEYS_DROP)
            .bind(&plan.empty)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(plan)
}

/// Every job of `jobs`, one at a time, in one transaction on `conn`: a
/// batch with unique jobs (each takes its key's row on its own).
async fn insert_each(
    conn: &mut PgConnection,
    jobs: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut tx = begin(conn).await?;
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let sql = if job.idempotency_key.is_some() {
            INSERT_QUIET
        } else {
            INSERT_QUIET_KEYLESS
        };
        out.push(insert_with(&mut tx, job, sql).await?);
    }
    tx.commit().await?;
    Ok(out)
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

/// Every column as the driver decodes it: `integer` attempts, `timestamptz` times.
impl Columns for PgRow {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.try_get(column)
    }

    fn small(&self, column: &str) -> Result<i16, sqlx::Error> {
        self.try_get(column)
    }

    fn count(&self, column: &str) -> Result<i64, sqlx::Error> {
        Ok(self.try_get::<i32, _>(column)?.into())
    }

    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.try_get(column)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(column)
    }

    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.try_get(column)
    }

    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.try_get(column)
    }
}

/// The claim statement ([`CLAIM`]) on `conn` (a connection, or a limited
/// claim's transaction): up to `claim.limit` due jobs of `claim.queue`,
/// in the order they were picked.
async fn claim_rows(
    conn: &mut PgConnection,
    claim: ClaimRequest<'_>,
) -> Result<Vec<ClaimedJob>, sqlx::Error> {
    let (queue, limit, lease, worker) = (claim.queue, claim.limit, claim.lease, claim.worker);
    let base = new_token_base();
    let mut rows: Vec<ClaimRow> = sqlx::query_as(CLAIM)
        .bind(queue)
        .bind(i64::from(limit))
        .bind(base)
        .bind(micros(lease))
        .bind(worker)
        .fetch_all(conn)
        .await?;
    // Handed out in the order they were picked.
    rows.sort_unstable_by_key(|row| (row.6, row.7, row.0));
    Ok(rows
        .into_iter()
        .map(
            |(
                id,
                job_name,
                payload,
                attempts,
                max_attempts,
                idempotency_key,
                _,
                run_at,
                key,
                metadata,
                tags,
            )| {
                ClaimedJob::new(
                    id,
                    job_name,
                    payload,
                    attempts.into(),
                    max_attempts.into(),
                    idempotency_key,
                    row_token(base, id),
                )
                .keyed(key)
                .due_since(run_at)
                .attached(metadata, tags)
            },
        )
        .collect())
}

/// A limited claim's transaction on `conn` (see
/// [`BackendStore::claim_limited`]): the free slots of the queue, then
/// [`claim_rows`] for at most that many, each written into a slot.
async fn claim_limited_on(
    conn: &mut PgConnection,
    claim: ClaimRequest<'_>,
    flow: Flow,
) -> Result<LimitedClaim, sqlx::Error> {
    let mut tx = begin(conn).await?;
    let plan = if flow.slots {
        let locked: Vec<Slot> = sqlx::query_as(SLOTS_LOCK)
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
        let rows = sqlx::query_as(SLOTS_READ)
            .bind(claim.queue)
            .bind(&holders)
            .fetch_all(&mut *tx)
            .await?;
        let (limit, total, live) = crate::store::policy::slots_read(rows);
        let plan = SlotPlan::of(&locked, &live, limit, total);
        if !plan.retired.is_empty() {
            sqlx::query(SLOTS_RETIRE)
                .bind(claim.queue)
                .bind(&plan.retired)
                .execute(&mut *tx)
                .await?;
        }
        Some(plan)
    } else {
        None
    };
    let mut allowed = Allowed::new(claim.limit, plan.as_ref().map(|plan| plan.room));
    if allowed.reads_rate(flow) {
        let row = sqlx::query_as(RATE_LOCK)
            .bind(claim.queue)
            .fetch_optional(&mut *tx)
            .await?;
        allowed.rate_row(row);
    }
    let take = allowed.take();
    if take == 0 {
        let due: bool = sqlx::query_scalar(DUE_EXISTS)
            .bind(claim.queue)
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
        return Ok(allowed.claimed(Vec::new(), due));
    }
    let jobs = claim_rows(
        &mut tx,
        ClaimRequest {
            limit: take,
            ..claim
        },
    )
    .await?;
    if let Some(SlotPlan { free, .. }) = &plan
        && !jobs.is_empty()
    {
        let slots: Vec<i32> = free.iter().take(jobs.len()).copied().collect();
        let ids: Vec<i64> = jobs.iter().map(|job| job.id).collect();
        let tokens: Vec<i64> = jobs.iter().map(|job| job.token).collect();
        sqlx::query(SLOTS_ASSIGN)
            .bind(claim.queue)
            .bind(&slots)
            .bind(&ids)
            .bind(&tokens)
            .execute(&mut *tx)
            .await?;
    }
    if let Some(tat) = allowed.tat_after(jobs.len()) {
        sqlx::query(RATE_ADVANCE)
            .bind(tat)
            .bind(claim.queue)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(allowed.claimed(jobs, false))
}

shared::fenced_set!(PgStore);

/// A time as PostgreSQL's `timestamptz` columns take it.
fn db_time(time: DateTime<Utc>) -> DateTime<Utc> {
    time
}

/// A `timestamptz` column's time.
fn utc_time(time: DateTime<Utc>) -> DateTime<Utc> {
    time
}

crate::store::flow::flow_insert!(PgConnection, flow_insert_row);
crate::store::batch::batch_insert!(PgConnection, flow_insert_row);

/// Begins the transaction of a workflow's insert.
async fn begin_flow(
    conn: &mut PgConnection,
) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, sqlx::Error> {
    begin(conn).await
}

/// Begins a transaction of jobq's own on `conn` with [`BEGIN_BOUNDED`]
/// (the server ends it if it sits idle); inside a caller's transaction
/// (`enqueue_in`), a savepoint, under the caller's settings.
async fn begin(
    conn: &mut PgConnection,
) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, sqlx::Error> {
    if conn.is_in_transaction() {
        conn.begin().await
    } else {
        conn.begin_with(BEGIN_BOUNDED).await
    }
}

/// One job of a workflow ([`INSERT`]).
async fn flow_insert_row(conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued, sqlx::Error> {
    insert_with(conn, job, INSERT).await
}

/// A workflow statement's leading values: none (the server's clock).
fn flow_now<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    query
}

/// A workflow statement's text: as it is (its ids arrive as one JSON array).
fn flow_sql(sql: &'static str, _n: usize) -> &'static str {
    sql
}

/// Binds a workflow statement's ids, as a JSON array.
fn flow_bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, PgArguments>,
    ids: &[i64],
) -> sqlx::query::Query<'q, sqlx::Postgres, PgArguments> {
    query.bind(crate::store::flow::id_list(ids))
}
