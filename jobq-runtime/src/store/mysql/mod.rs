//! MySQL 8.0.1+ / MariaDB 10.6+: `SELECT … FOR UPDATE SKIP LOCKED` at READ COMMITTED.
//!
//! Facts behind this SQL (verified on MariaDB 10.11):
//! - the claim's `ORDER BY priority, run_at, id` is served by the
//!   `(queue, status, priority, run_at, id)` index, so InnoDB locks only the
//!   rows it returns; a filesort would lock every candidate and starve other workers;
//! - every jobq transaction runs at READ COMMITTED: under REPEATABLE READ the
//!   claim's gap locks block enqueues and deadlock claimers;
//! - the reaper selects with SKIP LOCKED and updates by primary key (a bulk
//!   UPDATE through the secondary index deadlocks with settles);
//! - times are the server's `UTC_TIMESTAMP(6)`; the application passes durations only;
//! - `rows_affected` counts *matched* rows (sqlx connects with CLIENT_FOUND_ROWS),
//!   so `ON DUPLICATE KEY UPDATE` must *change* the row to tell a duplicate (2)
//!   from a new row (1): it bumps `dedupe_hits`, wrapping from 2³¹ − 1 to 1
//!   (`bump_hits!`), so the value always changes and never overflows;
//! - no statement depends on the session's `sql_mode` (an application's own
//!   pool may set any): strings in single quotes, no `||`, no backslash
//!   escapes, a `GROUP BY` selects only what it groups (the counts), and no
//!   `SET` expression reads a column that another assignment of the same
//!   statement changes (`attempts = attempts + 1` reads only its own):
//!   MariaDB's `SIMULTANEOUS_ASSIGNMENT` makes every expression see the old
//!   row, the default the columns assigned before it.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::Arguments;
use sqlx::mysql::{MySqlArguments, MySqlConnectOptions, MySqlDatabaseError, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySqlConnection, MySqlPool, Row};

use tokio_util::sync::CancellationToken;

use self::position::{ClaimKey, Position, Positions, injected_top_up_failure};
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
    Allowed, SlotPlan, UniqueRow, key_admits, key_front, key_front_len,
    key_fronts as policy_fronts, key_limit, key_plan, key_rates, key_starts, micros, migrating,
    new_token_base, row_token, within,
};
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, RunAt, Schedule, ScheduleInfo};
use crate::wakeup::Watch;

mod doctor;
mod failover;
pub(crate) mod glue;
mod position;
pub mod sql;
#[cfg(test)]
mod tests;
mod wake;

pub(crate) use position::{fail_next_top_up, top_up_failure_armed};

/// Rows per multi-row INSERT.
const INSERT_CHUNK: usize = 500;
/// Room left in a statement of `max_allowed_packet` bytes for the protocol
/// and the SQL text around the values.
const PACKET_HEADROOM: usize = 16 << 10;
/// How often `migrate` starts over after a transient error.
const MIGRATE_RETRIES: u32 = 30;
/// Ids per IN-list of a settle, heartbeat or bulk batch.
const IN_CHUNK: usize = 1024;
/// Ids per IN-list of a claim's UPDATE. A statement takes at most 65,535
/// placeholders (error 1390 beyond), and a worker may claim up to 9 × its
/// concurrency (90,000 rows) at once: a larger claim updates its rows in
/// several statements of one transaction. Claims up to this size, all but
/// the largest workers' claims, stay one statement.
const CLAIM_CHUNK: usize = 16_384;

/// Text from a column with a binary collation (`utf8mb4_bin`: keys and names
/// compare byte for byte), which the driver reports as binary and will not
/// decode as `String`.
struct Text(String);

impl sqlx::Type<sqlx::MySql> for Text {
    fn type_info() -> sqlx::mysql::MySqlTypeInfo {
        <str as sqlx::Type<sqlx::MySql>>::type_info()
    }

    fn compatible(ty: &sqlx::mysql::MySqlTypeInfo) -> bool {
        <[u8] as sqlx::Type<sqlx::MySql>>::compatible(ty)
    }
}

/// Decoded lossily (U+FFFD for bytes that are not UTF-8): a `utf8mb4`
/// column in strict mode holds only UTF-8, and should a server hand back
/// anything else, one row must not fail a whole claim or an inspection.
impl<'r> sqlx::Decode<'r, sqlx::MySql> for Text {
    fn decode(value: sqlx::mysql::MySqlValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let bytes = <&[u8] as sqlx::Decode<sqlx::MySql>>::decode(value)?;
        Ok(Self(String::from_utf8_lossy(bytes).into_owned()))
    }
}

fn text(row: &sqlx::mysql::MySqlRow, column: &str) -> Result<String, sqlx::Error> {
    Ok(row.try_get::<Text, _>(column)?.0)
}

fn opt_text(row: &sqlx::mysql::MySqlRow, column: &str) -> Result<Option<String>, sqlx::Error> {
    Ok(row.try_get::<Option<Text>, _>(column)?.map(|t| t.0))
}

/// Errors 1061, "Duplicate key name", and 1060, "Duplicate column name":
/// on Galera, what a migration that adds an index or a column gets when
/// another node's run of it (`GET_LOCK` is per node) added it between its
/// check and its `ALTER`; run again, the check finds it there.
fn is_duplicate_index(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
        .is_some_and(|e| matches!(e.number(), 1060 | 1061))
}

/// Error 1317, "Query execution was interrupted": on Galera, what a
/// statement of one node's `migrate()` gets when another node's migration
/// (a DDL replicated in total order) aborts it mid-statement.
fn is_interrupted(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .is_some_and(|e| e.number() == 1317)
}

/// The MySQL/MariaDB store.
#[derive(Debug, Clone)]
pub(crate) struct MySqlStore {
    pool: MySqlPool,
    /// jobq's own statements take their connections here.
    conns: Stash<sqlx::MySql>,
    /// MariaDB has `INSERT … RETURNING`; MySQL does not.
    mariadb: bool,
    /// A node of a Galera cluster: the handle's reads wait until the node
    /// has applied what the cluster committed before them ([`SYNC_WAIT`]).
    galera: bool,
    /// The server's `max_allowed_packet` when the store connected: the
    /// largest statement it accepts (a larger one is refused with error 1153
    /// and the connection is dropped).
    max_packet: usize,
    /// How far apart the ids of one multi-row INSERT are, if they are
    /// consecutive (`innodb_autoinc_lock_mode` 0 or 1, MariaDB's default).
    id_step: Option<i64>,
    /// Per queue, where the last claim that got all the rows it asked for
    /// ended (see [`CLAIM_SELECT_AFTER`]).
    positions: Arc<Positions>,
    /// The connect list, if the URL named several hosts (see `failover.rs`).
    failover: Option<Arc<failover::Failover>>,
    /// The pool `Jobq::mysql_pool` hands the application when jobq built
    /// `pool` itself: jobq's sessions are set up for jobq's statements
    /// ([`SESSION_SETUP`]), and none of that may reach the application's
    /// transactions. Same server and size, the server's session defaults,
    /// no connection until used. `None` for a pool the caller gave, which
    /// is the application's already.
    app_pool: Option<MySqlPool>,
    /// How long one statement or short transaction may take (see
    /// [`super::policy::within`]).
    pub(super) deadline: Duration,
    /// Wakes other processes' workers after an enqueue (see `wake.rs`).
    ringer: Arc<Ringer<wake::MySqlBell>>,
}

impl BackendStore for MySqlStore {
    type Pool = MySqlPool;
    type Connection = MySqlConnection;
    /// A queue, a status and a priority: [`PRUNE`] deletes from that range
    /// of the claim index, in `run_at` order.
    type PruneScope = (String, &'static str, i16);

    const FENCE_CHUNK: usize = IN_CHUNK;

    fn backend(&self) -> Backend {
        Backend::MySql
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Deadlock, lock wait timeout, and MariaDB's snapshot-isolation conflict.
    fn is_transient(error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
            .is_some_and(|e| matches!(e.number(), 1213 | 1205 | 1020))
    }

    async fn connect(url: &str, connect: &ConnectOptions) -> Result<Self> {
        let pool_options = MySqlPoolOptions::new()
            .max_connections(connect.max_connections)
            .test_before_acquire(false)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(SESSION_SETUP).await?;
                    Ok(())
                })
            });
        let Some(list) = failover::connect_list(url) else {
            let options = MySqlConnectOptions::from_str(&glue::mysql_url(url))?;
            crate::store::policy::probe(url, &options, connect.connect_timeout).await?;
            let app_pool = MySqlPoolOptions::new()
                .max_connections(connect.max_connections)
                .connect_lazy_with(options.clone());
            let pool = pool_options
                // While the server is down, sqlx retries a connect inside one acquire
                // with a backoff that doubles up to about 5 s, so a heartbeat
                // that began waiting during an outage waited up to 10 s after
                // the server was back (the outage chaos test saw healthy
                // attempts lose their leases to it); cut at the connect
                // timeout (sqlx's default is 30 s), the next try connects at once.
                .acquire_timeout(connect.connect_timeout)
                .before_acquire(crate::store::policy::ping_if_idle::<sqlx::MySql>)
                .connect_with(options)
                .await?;
            let mut store = Self::from_pool(pool).await?;
            store.app_pool = Some(app_pool);
            store.deadline = connect.statement_timeout;
            return Ok(store);
        };
        let nodes = list
            .into_iter()
            .map(|(url, host)| {
                Ok(failover::Node {
                    options: MySqlConnectOptions::from_str(&glue::mysql_url(&url))?,
                    host,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let shown = crate::options::redact_url(url);
        let (failover, at) =
            failover::Failover::connect(nodes, connect.connect_timeout, &shown).await?;
        let retire = Arc::clone(failover.retire());
        let release_check = connect.connect_timeout;
        let pool = pool_options
            // sqlx retries a refused connect until the acquire timeout
            // (30 s by default) without a word: with a list, a call waiting
            // for a connection to a lost node fails after the connect
            // timeout instead, and that failure moves the pool.
            .acquire_timeout(connect.connect_timeout)
            // A connection handed back is pinged by sqlx with no time
            // limit; on a node that stopped answering (frozen: its sockets
            // open) that ping would hold one of the pool's connections
            // until the node answered again, and a few would leave the
            // pool nothing to open connections to the next node with.
            // Checked first within the connect timeout, it is closed if the
            // node does not answer.
            .after_release(move |conn, _meta| {
                Box::pin(async move {
                    match tokio::time::timeout(release_check, conn.ping()).await {
                        Ok(answered) => answered.map(|()| true),
                        Err(_elapsed) => Err(sqlx::Error::Io(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no answer to a ping within the connect timeout",
                        ))),
                    }
                })
            })
            // A connection opened before the pool last moved is closed
            // rather than handed out.
            .before_acquire(move |conn, meta| {
                if retire.retires_age(meta.age) {
                    Box::pin(async { Ok(false) })
                } else {
                    crate::store::policy::ping_if_idle::<sqlx::MySql>(conn, meta)
                }
            })
            .connect_with(failover.options(at).clone())
            .await?;
        // The application's pool follows jobq's from node to node.
        let retire = Arc::clone(failover.retire());
        let app_pool = MySqlPoolOptions::new()
            .max_connections(connect.max_connections)
            .acquire_timeout(connect.connect_timeout)
            .before_acquire(move |_conn, meta| {
                let keep = !retire.retires_age(meta.age);
                Box::pin(async move { Ok(keep) })
            })
            .connect_lazy_with(failover.options(at).clone());
        failover.follow(app_pool.clone());
        let failover = Arc::new(failover);
        // Started on a later node (the ones before it down): look for the
        // earlier ones from now on, not only after an error.
        Arc::clone(&failover).fail_back_later(pool.clone());
        let mut store = Self::from_pool(pool).await?;
        store.conns = Stash::retiring(
            store.pool.clone(),
            Some(Arc::clone(failover.retire())),
            true,
        );
        store.failover = Some(failover);
        store.app_pool = Some(app_pool);
        store.deadline = connect.statement_timeout;
        Ok(store)
    }

    async fn from_pool(pool: MySqlPool) -> Result<Self> {
        let conns = Stash::new(pool.clone(), true);
        let deadline = crate::DEFAULT_STATEMENT_TIMEOUT;
        let (version, max_packet, autoinc_lock_mode, autoinc_step): (String, u64, i64, i64) =
            within(
                deadline,
                statement::READ,
                conns.run(async |conn| sqlx::query_as(SERVER_SETTINGS).fetch_one(conn).await),
            )
            .await?;
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        let ringer = Arc::new(Ringer::new(wake::MySqlBell::new(pool.clone())));
        // A MariaDB built without wsrep has no such variables: not Galera.
        let galera = mariadb
            && within(
                deadline,
                statement::READ,
                conns.run(async |conn| sqlx::query_scalar::<_, i64>(GALERA).fetch_one(conn).await),
            )
            .await
            .is_ok_and(|on| on == 1);
        if galera {
            GALERA_SEEN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(Self {
            conns,
            failover: None,
            app_pool: None,
            deadline,
            pool,
            mariadb,
            galera,
            max_packet: usize::try_from(max_packet).unwrap_or(usize::MAX),
            // Modes 0 and 1 give the rows of one multi-row INSERT consecutive
            // ids (`auto_increment_increment` apart); mode 2 interleaves them
            // with concurrent INSERTs.
            id_step: (autoinc_lock_mode <= 1).then_some(autoinc_step.max(1)),
            positions: Arc::default(),
            ringer,
        })
    }

    fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// A statement must fit in `max_allowed_packet`.
    fn server_payload_limit(&self) -> Option<(usize, String)> {
        Some((
            self.max_payload_bytes(),
            format!("max_allowed_packet = {} bytes", self.max_packet),
        ))
    }

    fn migrations(&self) -> &'static [migrate::Migration] {
        MIGRATIONS
    }

    /// Under `GET_LOCK` (waiting up to 120 s for another migrator), within
    /// [`MIGRATE_DEADLINE`](super::policy::MIGRATE_DEADLINE).
    async fn migrate(&self) -> Result<()> {
        migrating(&self.conns, self.deadline, async |conn| {
            let locked: Option<i64> = sqlx::query_scalar(MIGRATE_LOCK)
                .fetch_one(&mut *conn)
                .await?;
            if locked != Some(1) {
                return Ok(Err(Error::MigrationLockTimeout {
                    lock: "jobq_migrate",
                    seconds: 120,
                }));
            }
            let applied = self.apply_migrations(conn).await;
            sqlx::query(MIGRATE_UNLOCK).execute(&mut *conn).await?;
            Ok::<_, sqlx::Error>(applied.map_err(Error::from))
        })
        .await?
    }

    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        let enqueued = self.conns.run(async |conn| insert(conn, job).await).await?;
        self.ringer.announce(self.deadline, [job.queue.as_str()]);
        Ok(enqueued)
    }

    /// All or nothing: a batch that fits one statement is one statement (or,
    /// on MySQL, one transaction); a longer one runs its statements in one
    /// transaction, so a row the server refuses leaves nothing of the batch.
    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        let chunks = statement_chunks(jobs, self.max_payload_bytes());
        let inserted = self
            .conns
            .run(async |conn| match chunks.as_slice() {
                [chunk] => self.insert_chunk(conn, chunk, false).await,
                chunks => self.insert_chunks(conn, chunks).await,
            })
            .await?;
        self.ringer
            .announce(self.deadline, jobs.iter().map(|job| job.queue.as_str()));
        Ok(inserted)
    }

    async fn enqueue_in(conn: &mut MySqlConnection, job: &NewJob) -> Result<Enqueued> {
        Ok(insert(conn, job).await?)
    }

    async fn claim(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>> {
        Ok(self.claim_once(claim).await?)
    }

    async fn claim_limited(&self, claim: ClaimRequest<'_>, flow: Flow) -> Result<LimitedClaim> {
        let mut conn = self.conns.get().await?;
        let result = claim_limited_on(&mut conn, claim, flow).await;
        Ok(conn.done(result)?)
    }

    async fn set_rate(&self, queue: &str, rate: Option<Rate>) -> Result<()> {
        self.conns
            .execute(rate_row([RATE_SET, RATE_REMOVE], queue, rate))
            .await?;
        Ok(())
    }

    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        let mut conn = self.conns.get().await?;
        let result = set_limit_on(&mut conn, queue, limit).await;
        Ok(conn.done(result)?)
    }

    async fn prune_unique(&self, after: &str, limit: u32) -> Result<UniquePage> {
        Ok(self
            .conns
            .run(async |conn| {
                let rows: Vec<(String, i64, bool)> =
                    sqlx::query_as::<_, (Text, i64, i64)>(UNIQUE_SCAN)
                        .bind(after)
                        .bind(limit)
                        .fetch_all(&mut *conn)
                        .await?
                        .into_iter()
                        .map(|(key, job_id, gone)| (key.0, job_id, gone != 0))
                        .collect();
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
        let mut conn = self.conns.get().await?;
        let result = release_keys_on(&mut conn, keys).await;
        Ok(conn.done(result)?)
    }

    async fn keys_of(&self, ids: &[i64], rejoin: bool) -> Result<Vec<String>> {
        Ok(self
            .conns
            .run(async |conn| {
                if rejoin {
                    // One transaction: a release that finds the key without
                    // jobs and deletes its row either comes before the row
                    // is made again or sees the job listed.
                    let mut tx = conn.begin_with(BEGIN_RC).await?;
                    for sql in [keys_remake(ids.len()), keys_rejoin(ids.len())] {
                        let mut insert = sqlx::query(&sql);
                        for id in ids {
                            insert = insert.bind(id);
                        }
                        insert.execute(&mut *tx).await?;
                    }
                    tx.commit().await?;
                }
                let sql = keys_of(ids.len());
                let mut read = sqlx::query_as::<_, (Text,)>(&sql);
                for id in ids {
                    read = read.bind(id);
                }
                let keys = read.fetch_all(&mut *conn).await?;
                Ok::<_, sqlx::Error>(keys.into_iter().map(|(key,)| key.0).collect())
            })
            .await?)
    }

    async fn key_page(&self, after: &str, limit: u32) -> Result<Vec<String>> {
        Ok(self
            .conns
            .run(async |conn| {
                let read = sqlx::query_as::<_, (Text,)>(KEY_PAGE)
                    .bind(after)
                    .bind(limit);
                let keys = read.fetch_all(&mut *conn).await?;
                Ok::<_, sqlx::Error>(keys.into_iter().map(|(key,)| key.0).collect())
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
        // On Galera behind a sync wait, as the controls (below).
        let sql = self.read(KEY_RATES);
        let rows: Vec<(Text, i64, i64, i64)> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(&sql).fetch_all(&mut *conn).await
            })
            .await?;
        Ok(key_rates(rows.into_iter().map(
            |(key, starts, period, burst)| (key.0, starts, period, burst),
        )))
    }

    async fn take_key_starts(&self, key: &str, ids: &[i64]) -> Result<Option<KeyStarts>> {
        let wanted = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        Ok(self
            .conns
            .run(async |conn| {
                let mut tx = conn.begin_with(BEGIN_RC).await?;
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
                    let sql = key_started(started.len());
                    let mut stamp = sqlx::query(&sql).bind(now);
                    for id in started {
                        stamp = stamp.bind(id);
                    }
                    stamp.execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(Some(starts))
            })
            .await?)
    }

    async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        Ok(self.fenced_update(COMPLETE_SET, None, fences).await?)
    }

    async fn transition(&self, t: &Transition) -> Result<bool> {
        let status = t.target.status();
        let affected = self
            .conns
            .execute(
                sqlx::query(TRANSITION)
                    .bind(t.record.as_ref().map(|r| r.0))
                    .bind(t.record.as_ref().map(|r| r.0))
                    .bind(t.record.as_ref().map(|r| r.1.as_str()))
                    .bind(status)
                    .bind(micros(t.delay))
                    .bind(i32::from(t.refund_attempt))
                    .bind(&t.error)
                    .bind(status)
                    .bind(t.fence.id)
                    .bind(t.fence.token),
            )
            .await?;
        Ok(affected == 1)
    }

    /// [`HEARTBEAT_SET`] counts the rows it renewed; if it renewed fewer
    /// than `fences`, a read ([`held`]) tells which are no longer held.
    async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let extended = self
            .fenced_update(HEARTBEAT_SET, Some(lease), fences)
            .await?;
        if extended < fences.len() as u64 {
            return Ok(self.not_held(fences).await?);
        }
        Ok(Vec::new())
    }

    /// A short transaction: the held rows no other transaction has locked
    /// (`SKIP LOCKED`), then their leases; returns the fences it renewed.
    async fn heartbeat_unlocked(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let free: HashSet<Fence> = self
            .heartbeat_unlocked_once(fences, lease)
            .await?
            .into_iter()
            .collect();
        Ok(fences
            .iter()
            .filter(|f| free.contains(f))
            .copied()
            .collect())
    }

    async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        Ok(self.reap_once(queue, limit).await?)
    }

    /// Each queue with finished rows ([`PRUNE_QUEUES`]), each status, and
    /// each priority with rows of that status ([`PRUNE_NEXT_PRIORITY`],
    /// one descent of the claim index each: [`priorities`](Self::priorities)).
    async fn prune_scopes(&self, which: Prunable) -> Result<Vec<(String, &'static str, i16)>> {
        let queues: Vec<Text> = self
            .run(statement::PRUNE, async |conn| {
                sqlx::query_scalar(PRUNE_QUEUES).fetch_all(conn).await
            })
            .await?;
        let mut scopes = Vec::new();
        for Text(queue) in queues {
            for &status in which.statuses() {
                for priority in self.priorities(statement::PRUNE, &queue, status).await? {
                    scopes.push((queue.clone(), status, priority));
                }
            }
        }
        Ok(scopes)
    }

    /// [`PRUNE`].
    async fn prune(
        &self,
        (queue, status, priority): &(String, &'static str, i16),
        older_than: Duration,
        limit: u32,
    ) -> Result<u64> {
        Ok(self
            .conns
            .execute(
                sqlx::query(PRUNE)
                    .bind(queue)
                    .bind(*status)
                    .bind(*priority)
                    .bind(micros(older_than))
                    .bind(limit),
            )
            .await?)
    }

    /// The waiter (`wake`): a statement that sleeps until a ringer's
    /// `KILL QUERY` or a second passes, then reports due jobs and changed
    /// controls.
    async fn listen(
        &self,
        queues: &[String],
        watch: &Watch,
        stop: &CancellationToken,
        give_up: &CancellationToken,
    ) {
        wake::wait(&self.pool, queues, watch, (stop, give_up), self.deadline).await;
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

    /// A transaction: the row locked and its token read, then cancelled.
    async fn cancel(&self, id: i64) -> Result<Cancelled> {
        let pick = Statement::fixed(CANCEL_PICK, vec![Bind::Int(id)]);
        Ok(self.cancel_once(&pick).await?)
    }

    async fn clock(&self) -> Result<DateTime<Utc>> {
        let now: NaiveDateTime = self
            .run(statement::READ, async |conn| {
                sqlx::query_scalar(CLOCK).fetch_one(conn).await
            })
            .await?;
        Ok(utc(now))
    }

    async fn queues_with_rows(&self) -> Result<Vec<String>> {
        let sql = self.read(QUEUES);
        let queues: Vec<Text> = self
            .run(statement::READ, async |conn| {
                sqlx::query_scalar(&sql).fetch_all(conn).await
            })
            .await?;
        Ok(queues.into_iter().map(|Text(queue)| queue).collect())
    }

    /// [`STATS_LIVE`] (on Galera behind the sync wait).
    async fn stats_live(&self, queue: &str, now: DateTime<Utc>) -> Result<Vec<LiveFigures>> {
        let now = now.naive_utc();
        type LiveRow = (String, i64, Option<i64>, Option<i64>, Option<NaiveDateTime>);
        let sql = self.read(STATS_LIVE);
        let live: Vec<LiveRow> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(&sql)
                    .bind(now)
                    .bind(now)
                    .bind(queue)
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

    /// [`STATS_FINISHED`]: three counts, each its `?`s.
    async fn stats_finished(&self, queue: &str, cap: i64) -> Result<[i64; 3]> {
        let (done, failed, cancelled) = self
            .run(statement::READ, async |conn| {
                let mut finished = sqlx::query_as::<_, (i64, i64, i64)>(STATS_FINISHED);
                for _ in 0..3 {
                    finished = finished.bind(queue).bind(cap);
                }
                finished.fetch_one(conn).await
            })
            .await?;
        Ok([done, failed, cancelled])
    }

    /// The priorities of the queue's `done` and `failed` rows
    /// ([`NEXT_PRIORITY`], one index descent each), then the ranges of
    /// [`stats_per_minute`] for them.
    async fn stats_per_minute(
        &self,
        queue: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64, i64)>> {
        let since = since.naive_utc();
        let mut priorities = Vec::new();
        for status in ["done", "failed"] {
            priorities.extend(self.priorities(statement::READ, queue, status).await?);
        }
        priorities.sort_unstable();
        priorities.dedup();
        if priorities.is_empty() {
            return Ok(Vec::new());
        }
        let priorities = padded(&priorities);
        let sql = stats_per_minute(priorities.len());
        self.run(statement::READ, async |conn| {
            let mut query = sqlx::query_as(&sql).bind(since).bind(queue);
            for priority in &priorities {
                query = query.bind(priority);
            }
            query.bind(since).fetch_all(conn).await
        })
        .await
    }

    async fn queue_controls(&self) -> Result<Vec<QueueControl>> {
        type Row = (
            Text,
            i64,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        );
        // On Galera behind a sync wait: a limit, pause or rate set through
        // another node before this read is in it. Without the wait a worker
        // starting on a node that had not yet applied a new limit claimed
        // as if the queue had none (4 rows processing under a limit of 3).
        let sql = self.read(CONTROLS);
        let rows: Vec<Row> = self
            .run(statement::READ, async |conn| {
                sqlx::query_as(&sql).fetch_all(conn).await
            })
            .await?;
        Ok(super::policy::controls(
            rows.into_iter()
                .map(|(Text(queue), paused, limit, starts, period, burst, tat)| {
                    (queue, paused != 0, limit, starts, period, burst, tat)
                })
                .collect(),
        ))
    }

    async fn live_workers(&self) -> Result<Vec<WorkerRecord>> {
        let sql = self.read(WORKERS_LIVE);
        let rows = self
            .run(statement::READ, async |conn| {
                sqlx::query(&sql).fetch_all(conn).await
            })
            .await?;
        Ok(rows.iter().map(worker_record).collect::<Result<_, _>>()?)
    }

    fn filtered(&self) -> &'static Filtered {
        &FILTERED
    }

    shared::reads!(MySqlStore::read);

    shared::server_writes!();
    shared::every_backend_reads!();
    crate::store::flow::flow_methods!(begin_flow);
    crate::store::batch::batch_methods!(begin_flow);

    async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<bool> {
        let query = sqlx::query(SCHEDULE_PAUSE).bind(paused).bind(name);
        Ok(self.conns.execute(query).await? == 1)
    }

    /// A transaction: the batch locked ([`bulk_pick`]), then retried by id.
    async fn retry_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Vec<i64>> {
        let pick = bulk_pick_statement(ids, guard, locks);
        let (rows, _) = self.pick_then_update(&pick, retry_ids).await?;
        Ok(rows.into_iter().map(|(id, _)| id).collect())
    }

    /// A transaction: the batch locked ([`bulk_pick`]) with the tokens it
    /// holds, then cancelled by id.
    async fn cancel_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Cancelled> {
        let pick = bulk_pick_statement(ids, guard, locks);
        Ok(self.cancel_once(&pick).await?)
    }

    async fn doctor(
        &self,
        options: super::doctor::DoctorOptions,
    ) -> Result<Vec<crate::ops::Check>> {
        self.run_doctor(options).await
    }
}

impl MySqlStore {
    /// Passes a call's result on to the connect list, if there is one: a
    /// failure as of a lost node starts a check of the node (see
    /// `failover.rs`). Nothing to do on success, nor without a list.
    pub(crate) fn seen<T>(&self, result: &Result<T>) {
        if let (Err(error), Some(failover)) = (result, &self.failover) {
            failover.saw(error, &self.pool);
        }
    }

    /// The pool for the application's own statements (see [`Self::app_pool`]'s field).
    pub(crate) fn app_pool(&self) -> &MySqlPool {
        self.app_pool.as_ref().unwrap_or(&self.pool)
    }

    /// A write of a workflow's (one statement or one short transaction),
    /// within the deadline.
    async fn flow_write<T>(
        &self,
        work: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        within(self.deadline, statement::FLOW, self.conns.run(work)).await
    }

    /// Runs `work` on one of jobq's connections [`within`] the statement
    /// deadline: one statement or one short transaction.
    async fn run<T>(
        &self,
        statement: &'static str,
        work: impl AsyncFnOnce(&mut MySqlConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T> {
        within(self.deadline, statement, self.conns.run(work)).await
    }

    /// With a connect list, the `host:port` of the node new connections go to.
    pub(crate) fn current_node(&self) -> Option<String> {
        self.failover.as_ref().map(|f| f.current_host().to_owned())
    }

    /// `sql`, a read of the handle's (`job`, `counts`, `list`, `stats`), as
    /// it runs here: on Galera behind [`SYNC_WAIT`], so that it sees what
    /// was committed through any node before it (read-your-writes across
    /// nodes). So do the workers' reads of the queues' controls and the
    /// keys' rates, which decide how they claim. The claim and the other
    /// statements of workers do without: their writes are certified
    /// against the cluster's anyway.
    fn read<'a>(&self, sql: &'a str) -> std::borrow::Cow<'a, str> {
        if self.galera {
            synced(sql).into()
        } else {
            sql.into()
        }
    }

    /// A read that sees every write committed before it through any node
    /// ([`read`](Self::read)).
    fn causal<'a>(&self, sql: &'a str) -> std::borrow::Cow<'a, str> {
        self.read(sql)
    }

    /// Applies the migrations `jobq_migrations` does not list (the caller
    /// holds the lock). A transient error (a deadlock; on Galera a
    /// certification conflict with another node's migration, which
    /// `GET_LOCK` does not exclude) starts over from what is applied then.
    async fn apply_migrations(&self, conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
        let mut attempt = 0u32;
        loop {
            match apply_pending(conn, &self.read(MIGRATIONS_APPLIED)).await {
                Err(error)
                    if attempt < MIGRATE_RETRIES
                        && (Self::is_transient(&error)
                            || self.galera
                                && (is_interrupted(&error) || is_duplicate_index(&error))) =>
                {
                    attempt += 1;
                    super::policy::count_internal_retry(statement::MIGRATE, &error, attempt);
                    let pause_ms = rand::random_range(5..=(10u64 << attempt.min(4)));
                    tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                }
                result => return result,
            }
        }
    }

    /// The largest payload one INSERT can carry on this server.
    fn max_payload_bytes(&self) -> usize {
        self.max_packet.saturating_sub(PACKET_HEADROOM)
    }

    /// Every chunk in one transaction on `conn`.
    async fn insert_chunks(
        &self,
        conn: &mut MySqlConnection,
        chunks: &[&[NewJob]],
    ) -> Result<Vec<Enqueued>, sqlx::Error> {
        let mut tx = begin_causal(conn).await?;
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(self.insert_chunk(&mut tx, chunk, true).await?);
        }
        tx.commit().await?;
        Ok(out)
    }

    /// One chunk: a multi-row INSERT where its ids can be known, else one
    /// INSERT per row (in a transaction of its own unless `in_transaction`).
    async fn insert_chunk(
        &self,
        conn: &mut MySqlConnection,
        chunk: &[NewJob],
        in_transaction: bool,
    ) -> Result<Vec<Enqueued>, sqlx::Error> {
        let keyless = chunk.iter().all(NewJob::plain);
        let unique = chunk
            .iter()
            .any(|job| job.unique.is_some() || job.concurrency.is_some() || job.attached());
        if let (true, Some(step)) = (keyless, self.id_step) {
            insert_keyless(conn, chunk, step).await
        } else if self.mariadb && !unique {
            insert_returning(conn, chunk).await
        } else if in_transaction {
            insert_each(conn, chunk).await
        } else {
            let mut tx = begin_causal(conn).await?;
            let out = insert_each(&mut tx, chunk).await?;
            tx.commit().await?;
            Ok(out)
        }
    }

    async fn claim_once(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>, sqlx::Error> {
        let queue = claim.queue;
        let position = self.positions.get(queue);
        let mut conn = self.conns.get().await?;
        let batch = match claim_from(&mut conn, claim, position).await {
            Ok((batch, None)) => conn.done(Ok::<_, sqlx::Error>(batch))?,
            Ok((batch, Some(error))) => {
                // The connection goes back through the pool's checks.
                conn.give_back();
                if Self::is_transient(&error) {
                    // A deadlock, or on Galera a certification conflict
                    // with another node's claim of the same rows: the next
                    // claim takes what is left, as a retry would.
                    super::policy::count_internal_retry(statement::CLAIM, &error, 1);
                } else {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        queue,
                        claimed = batch.jobs.len(),
                        "topping up a claim failed; running the jobs its first part claimed"
                    );
                }
                batch
            }
            Err(error) => return conn.done(Err(error)),
        };
        let rescanned = match position {
            Some(p) if batch.resumed => p.rescanned,
            _ => Instant::now(),
        };
        self.positions.set(queue, batch.end, rescanned);
        Ok(batch.jobs)
    }

    /// `<set> WHERE status = 'processing' AND id IN (…) AND lease_token IN (…)`.
    ///
    /// Matching the two lists separately fences as exactly as matching pairs
    /// because every row of a claim has a token of its own, `base + id`
    /// ([`super::policy::new_token_base`]): a fence's token names its row as well as
    /// its claim, so a row matches another fence's token only if two random
    /// 62-bit bases differ by exactly the difference of two ids. (With one
    /// token per claim batch, a stale fence of a row batched with a fresh
    /// fence of another row from the claim that re-took it matched that row.)
    async fn fenced_update(
        &self,
        set: &str,
        lease: Option<Duration>,
        fences: &[Fence],
    ) -> Result<u64, sqlx::Error> {
        let ids = padded(&fences.iter().map(|f| f.id).collect::<Vec<_>>());
        let tokens = padded(&fences.iter().map(|f| f.token).collect::<Vec<_>>());
        let sql = fenced_update(set, ids.len(), tokens.len());
        let mut query = sqlx::query(&sql);
        if let Some(lease) = lease {
            query = query.bind(micros(lease));
        }
        for id in &ids {
            query = query.bind(id);
        }
        for token in &tokens {
            query = query.bind(token);
        }
        let mut conn = self.conns.get().await?;
        let result = query.execute(&mut *conn).await;
        Ok(conn.done(result)?.rows_affected())
    }

    async fn heartbeat_unlocked_once(
        &self,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>, sqlx::Error> {
        let ids = padded(&fences.iter().map(|f| f.id).collect::<Vec<_>>());
        let tokens = padded(&fences.iter().map(|f| f.token).collect::<Vec<_>>());
        let sql = heartbeat_unlocked_select(ids.len(), tokens.len());
        let mut select = sqlx::query_as::<_, (i64, i64)>(&sql);
        for id in ids.iter().chain(&tokens) {
            select = select.bind(id);
        }
        self.conns
            .run(async |conn| {
                let mut tx = conn.begin_with(BEGIN_RC).await?;
                let free: Vec<Fence> = select
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|(id, token)| Fence { id, token })
                    .collect();
                if !free.is_empty() {
                    let padded_free = padded(&free.iter().map(|f| f.id).collect::<Vec<_>>());
                    let sql = heartbeat_unlocked_update(padded_free.len());
                    let mut update = sqlx::query(&sql).bind(micros(lease));
                    for id in &padded_free {
                        update = update.bind(id);
                    }
                    update.execute(&mut *tx).await?;
                }
                tx.commit().await?;
                Ok(free)
            })
            .await
    }

    /// The fences among `fences` whose row is no longer `processing` under that token.
    async fn not_held(&self, fences: &[Fence]) -> Result<Vec<Fence>, sqlx::Error> {
        let ids = padded(&fences.iter().map(|f| f.id).collect::<Vec<_>>());
        let sql = held(ids.len());
        let mut query = sqlx::query_as::<_, (i64, Option<i64>)>(&sql);
        for id in &ids {
            query = query.bind(id);
        }
        let held: HashSet<(i64, Option<i64>)> = self
            .conns
            .run(async |conn| query.fetch_all(conn).await)
            .await?
            .into_iter()
            .collect();
        Ok(fences
            .iter()
            .filter(|f| !held.contains(&(f.id, Some(f.token))))
            .copied()
            .collect())
    }

    /// The priorities of `queue`'s rows in `status`, lowest first: one
    /// descent of the claim index per priority, plus one; each read a
    /// statement of the `kind` given.
    async fn priorities(&self, kind: &'static str, queue: &str, status: &str) -> Result<Vec<i16>> {
        let mut found = Vec::new();
        let mut after = i32::from(i16::MIN) - 1;
        while let Some(priority) = self
            .run(kind, async |conn| {
                sqlx::query_scalar::<_, Option<i16>>(NEXT_PRIORITY)
                    .bind(queue)
                    .bind(status)
                    .bind(after)
                    .fetch_one(conn)
                    .await
            })
            .await?
        {
            found.push(priority);
            after = i32::from(priority);
        }
        Ok(found)
    }

    /// One cancel transaction: the rows `pick` locks (with their tokens),
    /// then cancelled by id.
    async fn cancel_once(&self, pick: &Statement) -> Result<Cancelled, sqlx::Error> {
        let (rows, _) = self.pick_then_update(pick, cancel_ids).await?;
        Ok(Cancelled::of_rows(&rows))
    }

    /// One transaction: the rows `pick` locks, with the tokens they hold,
    /// then the statement `update` makes for their ids; those rows and how
    /// many it changed.
    async fn pick_then_update(
        &self,
        pick: &Statement,
        update: fn(usize) -> String,
    ) -> Result<(Vec<(i64, Option<i64>)>, u64), sqlx::Error> {
        self.conns
            .run(async |conn| {
                let mut tx = conn.begin_with(BEGIN_RC).await?;
                let rows: Vec<(i64, Option<i64>)> =
                    sqlx::query_as_with(&pick.sql, arguments(&pick.binds)?)
                        .fetch_all(&mut *tx)
                        .await?;
                let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
                let changed = update_ids(&mut tx, update, &ids).await?;
                tx.commit().await?;
                Ok((rows, changed))
            })
            .await
    }

    /// Reaps up to `limit` orphans of `queue`: candidates read without
    /// locks ([`REAP_SELECT`]), then, in one transaction, those still
    /// expired and not held by another transaction locked by primary key
    /// ([`reap_lock`], `SKIP LOCKED`: a row whose settle waits on a
    /// caller's lock is left to that settle) and updated. A reap that finds
    /// nothing expired takes no lock; one that stalls holds only expired
    /// rows (and MariaDB's `idle_transaction_timeout` ends it).
    async fn reap_once(&self, queue: &str, limit: u32) -> Result<u64, sqlx::Error> {
        self.conns
            .run(async |conn| {
                let candidates: Vec<i64> = sqlx::query_scalar(REAP_SELECT)
                    .bind(queue)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                if candidates.is_empty() {
                    return Ok(0);
                }
                let mut tx = conn.begin_with(BEGIN_RC).await?;
                let padded_candidates = padded(&candidates);
                let lock_sql = reap_lock(padded_candidates.len());
                let mut lock = sqlx::query_scalar(&lock_sql);
                for id in &padded_candidates {
                    lock = lock.bind(id);
                }
                let ids: Vec<i64> = lock.fetch_all(&mut *tx).await?;
                if ids.is_empty() {
                    tx.commit().await?;
                    return Ok(0);
                }
                let padded_ids = padded(&ids);
                let sql = reap_update(padded_ids.len());
                let mut update = sqlx::query(&sql);
                for id in &padded_ids {
                    update = update.bind(id);
                }
                update.execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(ids.len() as u64)
            })
            .await
    }
}

/// Runs the statement `sql` makes for an IN-list of `ids` (padded) on
/// `conn`; how many rows it changed. Nothing to run for no ids.
async fn update_ids(
    conn: &mut MySqlConnection,
    sql: fn(usize) -> String,
    ids: &[i64],
) -> Result<u64, sqlx::Error> {
    let mut changed = 0;
    for chunk in ids.chunks(IN_CHUNK) {
        let chunk = padded(chunk);
        let sql = sql(chunk.len());
        let mut update = sqlx::query(&sql);
        for id in &chunk {
            update = update.bind(id);
        }
        changed += update.execute(&mut *conn).await?.rows_affected();
    }
    Ok(changed)
}

/// [`bulk_pick`] of `ids` (padded, see [`padded`]) with their values.
fn bulk_pick_statement(ids: &[i64], guard: &str, locks: RowLocks) -> Statement {
    let ids = padded(ids);
    Statement::fixed(
        &bulk_pick(ids.len(), guard, locks),
        ids.into_iter().map(Bind::Int).collect(),
    )
}

/// The values of a filtered statement.
fn arguments(binds: &[Bind]) -> Result<MySqlArguments, sqlx::Error> {
    let mut args = MySqlArguments::default();
    for bind in binds {
        let added = match bind {
            Bind::Text(text) => args.add(text.as_str()),
            Bind::Int(n) => args.add(*n),
            Bind::Time(t) => args.add(t.naive_utc()),
        };
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// The statement that sets (`statements[0]`, with `rate`) or removes
/// (`statements[1]`, `rate` `None`) the rate row of `name`: a queue's or a
/// concurrency key's.
fn rate_row<'q>(
    [set, remove]: [&'q str; 2],
    name: &'q str,
    rate: Option<Rate>,
) -> sqlx::query::Query<'q, sqlx::MySql, MySqlArguments> {
    match rate {
        Some(rate) => sqlx::query(set)
            .bind(name)
            .bind(rate.starts())
            .bind(rate.period_us())
            .bind(rate.burst()),
        None => sqlx::query(remove).bind(name),
    }
}

/// [`padded`] for owned strings.
fn padded_strings(items: &[String]) -> Vec<&str> {
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    padded(&items)
}

/// Pads a list to the next power of two by repeating its first element, so a
/// statement with an IN-list is prepared for at most log2(max) list lengths
/// per connection instead of one per length.
fn padded<T: Copy>(items: &[T]) -> Vec<T> {
    let mut out = items.to_vec();
    if let Some(&first) = items.first() {
        out.resize(items.len().next_power_of_two(), first);
    }
    out
}

/// Applies the migrations `applied` (a read of `jobq_migrations`) does
/// not list: once each when one process migrates; on Galera, where two
/// nodes can each hold `GET_LOCK`, possibly once per node, which every
/// MySQL migration allows (`IF NOT EXISTS`, a `MODIFY` to the type it has).
async fn apply_pending(conn: &mut MySqlConnection, applied: &str) -> Result<(), sqlx::Error> {
    conn.execute(MIGRATIONS_TABLE).await?;
    let applied: Vec<i64> = sqlx::query_scalar(applied).fetch_all(&mut *conn).await?;
    for migration in migrate::pending(MIGRATIONS, &applied) {
        conn.execute(migration.sql).await?;
        sqlx::query(MIGRATION_RECORD)
            .bind(migration.version)
            .bind(migration.description)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// What a claim got.
struct Claimed {
    jobs: Vec<ClaimedJob>,
    /// The last row's place in the claim order, if the claim got as many
    /// rows as it asked for (there may be more after it).
    end: Option<ClaimKey>,
    /// Whether it went on from a position rather than the beginning.
    resumed: bool,
}

/// Claims up to `limit` rows from `position` on; if fewer are there, the
/// rest from the beginning (rows may wait before the position).
///
/// Those are two transactions. Once the first has committed, its rows are
/// this claim's whatever happens next: if the top-up fails, the first part
/// is returned with the top-up's error beside it (never the error alone,
/// which would leave those rows `processing` with no worker holding them,
/// their attempt counted, until their lease ran out). The next claim starts
/// from the beginning.
async fn claim_from(
    conn: &mut MySqlConnection,
    claim: ClaimRequest<'_>,
    position: Option<Position>,
) -> Result<(Claimed, Option<sqlx::Error>), sqlx::Error> {
    let (queue, limit) = (claim.queue, claim.limit);
    let mut claimed = claim_on(conn, claim, position).await?;
    let got = u32::try_from(claimed.jobs.len()).unwrap_or(u32::MAX);
    if claimed.resumed && got < limit {
        let rest = match injected_top_up_failure(queue) {
            Some(error) => Err(error),
            None => {
                let rest = ClaimRequest {
                    limit: limit - got,
                    ..claim
                };
                claim_on(conn, rest, None).await
            }
        };
        claimed.resumed = false;
        match rest {
            Ok(rest) => {
                claimed.jobs.extend(rest.jobs);
                claimed.end = rest.end;
            }
            // Nothing committed yet: the whole claim may be retried.
            Err(error) if claimed.jobs.is_empty() => return Err(error),
            Err(error) => {
                claimed.end = None;
                return Ok((claimed, Some(error)));
            }
        }
    }
    Ok((claimed, None))
}

/// The claim's transaction on `conn`: lock up to `limit` due rows of `queue`
/// (skipping rows other claimers hold), from the beginning of the claim
/// order or from `position` on, and mark them held under a new token.
async fn claim_on(
    conn: &mut MySqlConnection,
    claim: ClaimRequest<'_>,
    position: Option<Position>,
) -> Result<Claimed, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_RC).await?;
    let claimed = claim_rows(&mut tx, claim, position).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// A limited claim's transaction on `conn` (see
/// [`BackendStore::claim_limited`]): the free slots of the queue, then
/// [`claim_rows`] for at most that many, each written into a slot.
async fn claim_limited_on(
    conn: &mut MySqlConnection,
    claim: ClaimRequest<'_>,
    flow: Flow,
) -> Result<LimitedClaim, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_RC).await?;
    let plan = if flow.slots {
        let locked: Vec<Slot> = sqlx::query_as(SLOTS_LOCK)
            .bind(claim.queue)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(Slot::of_row)
            .collect();
        let holders = super::policy::slot_holders(&locked);
        let ids = if holders.is_empty() {
            Vec::new()
        } else {
            padded(&holders.iter().map(|f| f.id).collect::<Vec<_>>())
        };
        let sql = slots_read(ids.len());
        let mut read = sqlx::query_as(&sql).bind(claim.queue).bind(claim.queue);
        for id in &ids {
            read = read.bind(id);
        }
        let (limit, total, live) = super::policy::slots_read(read.fetch_all(&mut *tx).await?);
        let plan = SlotPlan::of(&locked, &live, limit, total);
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
    let claimed = claim_rows(
        &mut tx,
        ClaimRequest {
            limit: take,
            ..claim
        },
        None,
    )
    .await?;
    if let Some(SlotPlan { free, .. }) = &plan
        && !claimed.jobs.is_empty()
    {
        let sql = slots_assign(claimed.jobs.len());
        let mut assign = sqlx::query(&sql);
        for (slot, job) in free.iter().zip(&claimed.jobs) {
            assign = assign
                .bind(claim.queue)
                .bind(slot)
                .bind(job.id)
                .bind(job.token);
        }
        assign.execute(&mut *tx).await?;
    }
    if let Some(tat) = allowed.tat_after(claimed.jobs.len()) {
        sqlx::query(RATE_ADVANCE)
            .bind(tat)
            .bind(claim.queue)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(allowed.claimed(claimed.jobs, false))
}

/// Sets or removes `queue`'s limit in one transaction (see
/// [`BackendStore::set_limit`]).
async fn set_limit_on(
    conn: &mut MySqlConnection,
    queue: &str,
    limit: Option<u32>,
) -> Result<(), sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_RC).await?;
    match limit {
        Some(limit) => {
            sqlx::query(LIMIT_SET)
                .bind(queue)
                .bind(limit)
                .execute(&mut *tx)
                .await?;
            let slots: Vec<u32> = (0..limit).collect();
            for chunk in slots.chunks(SLOTS_FILL_CHUNK) {
                let sql = slots_fill(chunk.len());
                let mut fill = sqlx::query(&sql);
                for slot in chunk {
                    fill = fill.bind(queue).bind(slot);
                }
                fill.execute(&mut *tx).await?;
            }
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
    .bind(limit.unwrap_or(0))
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Slot rows one statement of [`set_limit_on`] makes.
const SLOTS_FILL_CHUNK: usize = 1_000;

/// The claim's statements inside the caller's transaction `tx`: lock up to
/// `limit` due rows of `queue` (skipping rows other claimers hold), from
/// the beginning of the claim order or from `position` on, and mark them
/// held under a new token.
async fn claim_rows(
    tx: &mut MySqlConnection,
    claim: ClaimRequest<'_>,
    position: Option<Position>,
) -> Result<Claimed, sqlx::Error> {
    let (queue, limit, lease, worker) = (claim.queue, claim.limit, claim.lease, claim.worker);
    type ClaimRow = (i64, Text, Text, i32, i32, i16, NaiveDateTime, Option<Text>);
    let rows: Vec<ClaimRow> = match position {
        None => {
            sqlx::query_as(CLAIM_SELECT)
                .bind(queue)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
        }
        Some(Position {
            after: (priority, run_at, id),
            ..
        }) => {
            sqlx::query_as(CLAIM_SELECT_AFTER)
                .bind(queue)
                .bind(priority)
                .bind(priority)
                .bind(run_at)
                .bind(priority)
                .bind(run_at)
                .bind(id)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
        }
    };
    if rows.is_empty() {
        return Ok(Claimed {
            jobs: Vec::new(),
            end: None,
            resumed: position.is_some(),
        });
    }
    let end = rows
        .last()
        .filter(|_| rows.len() >= limit as usize)
        .map(|r| (r.5, r.6, r.0));
    let base = new_token_base();
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    for chunk in ids.chunks(CLAIM_CHUNK) {
        let chunk = padded(chunk);
        let sql = claim_update(chunk.len());
        let mut update = sqlx::query(&sql)
            .bind(base)
            .bind(micros(lease))
            .bind(worker);
        for id in &chunk {
            update = update.bind(id);
        }
        update.execute(&mut *tx).await?;
    }
    let jobs = rows
        .into_iter()
        .map(
            |(id, job_name, payload, attempts, max_attempts, _, run_at, extras)| {
                let Extras(idempotency_key, key, metadata, tags) = Extras::of(id, extras);
                ClaimedJob::new(
                    id,
                    job_name.0,
                    payload.0,
                    i64::from(attempts) + 1,
                    max_attempts.into(),
                    idempotency_key,
                    row_token(base, id),
                )
                .keyed(key)
                .due_since(run_at.and_utc())
                .attached(metadata, tags)
            },
        )
        .collect();
    Ok(Claimed {
        jobs,
        end,
        resumed: position.is_some(),
    })
}

/// A claimed row's key (idempotency or unique), concurrency key, metadata
/// and tags, read from the claim's one column for them
/// ([`CLAIM_SELECT`]'s JSON array, `NULL` for none).
#[derive(Default, serde::Deserialize)]
struct Extras(
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Extras {
    /// Row `id`'s; an array that does not parse (the server built it, so
    /// this is not expected) reads as none, with a warning, rather than
    /// failing the claim of every row beside it.
    fn of(id: i64, column: Option<Text>) -> Self {
        let Some(Text(json)) = column else {
            return Self::default();
        };
        serde_json::from_str(&json).unwrap_or_else(|error| {
            tracing::warn!(id, %error, "a claimed row's keys, metadata and tags did not parse; running it without them");
            Self::default()
        })
    }
}

/// A batch without idempotency keys as one plain multi-row INSERT:
/// nothing can conflict, and the ids are consecutive from
/// `LAST_INSERT_ID()` (the first row's), `step` apart, in VALUES order.
async fn insert_keyless(
    conn: &mut MySqlConnection,
    chunk: &[NewJob],
    step: i64,
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let now = chunk.iter().all(|job| matches!(job.run_at, RunAt::Now));
    let (sql, args) = if now {
        (
            rows_of(INSERT_ROW_NOW, chunk.len(), ""),
            now_row_arguments(chunk)?,
        )
    } else {
        (insert_rows(chunk.len(), ""), row_arguments(chunk)?)
    };
    let done = sqlx::query_with(&sql, args).execute(&mut *conn).await?;
    let n = chunk.len() as u64;
    if done.rows_affected() != n {
        return Err(sqlx::Error::Protocol(format!(
            "a batch INSERT of {n} rows inserted {}",
            done.rows_affected()
        )));
    }
    let first = i64::try_from(done.last_insert_id()).unwrap_or(i64::MAX);
    Ok((0..chunk.len() as i64)
        .map(|i| Enqueued {
            id: first + i * step,
            duplicate: false,
        })
        .collect())
}

/// MariaDB: one multi-row `INSERT … RETURNING`, duplicates included, in input order.
async fn insert_returning(
    conn: &mut MySqlConnection,
    chunk: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let sql = insert_rows(chunk.len(), INSERT_RETURNING);
    // Prepared once per batch size and connection, kept in sqlx's
    // per-connection cache (100 statements, least recently used out): a
    // size the application repeats costs one round trip, and a one-off
    // size costs prepare + execute + close, as an unprepared query would.
    let rows = sqlx::query_as_with::<_, (i64, i32), _>(&sql, row_arguments(chunk)?)
        .fetch_all(&mut *conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, hits)| Enqueued {
            id,
            duplicate: hits > 0,
        })
        .collect())
}

/// MySQL: no RETURNING and no promise of consecutive ids under
/// `innodb_autoinc_lock_mode = 2`, so one INSERT per row (the caller holds
/// the transaction).
async fn insert_each(
    conn: &mut MySqlConnection,
    chunk: &[NewJob],
) -> Result<Vec<Enqueued>, sqlx::Error> {
    let mut out = Vec::with_capacity(chunk.len());
    for job in chunk {
        out.push(insert(conn, job).await?);
    }
    Ok(out)
}

/// One idempotent INSERT on any MySQL connection (the pool's or the
/// caller's transaction); a job with metadata or tags is inserted and
/// gets them in a transaction of its own (a savepoint of the caller's).
async fn insert(conn: &mut MySqlConnection, job: &NewJob) -> Result<Enqueued, sqlx::Error> {
    if !job.attached() {
        return insert_row(conn, job).await;
    }
    shared::insert_attached!(conn, job, tx => insert_row(&mut tx, job))
}

/// [`insert`] of the job's row alone.
async fn insert_row(conn: &mut MySqlConnection, job: &NewJob) -> Result<Enqueued, sqlx::Error> {
    if let Some((key, unique)) = job.unique_key() {
        return insert_unique(conn, job, key, unique).await;
    }
    if let Some((key, limit)) = &job.concurrency {
        return insert_keyed(conn, job, key, *limit).await;
    }
    let result = sqlx::query_with(insert_sql(job), row_arguments(std::slice::from_ref(job))?)
        .execute(&mut *conn)
        .await?;
    let id = i64::try_from(result.last_insert_id()).unwrap_or(i64::MAX);
    Ok(Enqueued {
        id,
        duplicate: result.rows_affected() == 2,
    })
}

/// Whether this process has connected to a Galera node: its enqueues of
/// unique or keyed jobs, and its workflows' and batches' transactions, then
/// begin behind a sync wait ([`begin_causal`]).
static GALERA_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Begins a transaction on `conn` at READ COMMITTED, or a savepoint if
/// `conn` is in one already (a caller's transaction, or a batch's). On a
/// Galera node ([`GALERA_SEEN`]) the transaction begins once the node has
/// applied every transaction the cluster committed before it
/// ([`BEGIN_RC_CAUSAL`]): what it reads to decide (a unique key's holder, a
/// concurrency key's running jobs) is then at least as new as what any
/// node had committed when the enqueue was made. Without it a node that had
/// not yet applied another node's cancel of a unique key's holder answered
/// a duplicate of the cancelled job, and no job was made: no write of the
/// enqueue's meets that cancel at certification. A caller's transaction
/// begins as the caller began it (see `docs/scaling-galera.md`).
async fn begin_causal(
    conn: &mut MySqlConnection,
) -> Result<sqlx::Transaction<'_, sqlx::MySql>, sqlx::Error> {
    if conn.is_in_transaction() {
        conn.begin().await
    } else if GALERA_SEEN.load(std::sync::atomic::Ordering::Relaxed) {
        conn.begin_with(BEGIN_RC_CAUSAL).await
    } else {
        conn.begin_with(BEGIN_RC).await
    }
}

/// A unique job (see [`UNIQUE_TAKE`]) in a transaction of its own on
/// `conn`, or a savepoint of the caller's: takes its key's row, and
/// returns the job holding the key or inserts this one and writes it in.
async fn insert_unique(
    conn: &mut MySqlConnection,
    job: &NewJob,
    key: &str,
    unique: jobq_core::Unique,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = begin_causal(conn).await?;
    sqlx::query(UNIQUE_TAKE).bind(key).execute(&mut *tx).await?;
    let (job_id, states, within, status_bit): (i64, i64, i64, i64) = sqlx::query_as(UNIQUE_HOLDER)
        .bind(key)
        .fetch_one(&mut *tx)
        .await?;
    let row = UniqueRow {
        job_id,
        states,
        within_period: within != 0,
        status_bit,
    };
    if let Some(id) = row.holder() {
        tx.commit().await?;
        return Ok(Enqueued {
            id,
            duplicate: true,
        });
    }
    let inserted = sqlx::query_with(INSERT_UNIQUE, row_arguments(std::slice::from_ref(job))?)
        .execute(&mut *tx)
        .await?;
    let id = i64::try_from(inserted.last_insert_id()).unwrap_or(i64::MAX);
    sqlx::query(UNIQUE_HOLD)
        .bind(id)
        .bind(i16::from(unique.state_bits()))
        .bind(unique.period().map(micros))
        .bind(key)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Enqueued {
        id,
        duplicate: false,
    })
}

/// A job with a concurrency key in a transaction of its own on `conn`, or
/// a savepoint of the caller's: takes its key's row ([`KEY_TAKE`]), reads
/// the front of the key's jobs, inserts the job `pending` if the key has
/// room ([`key_admits`]) or `blocked`, and lists it in its key.
async fn insert_keyed(
    conn: &mut MySqlConnection,
    job: &NewJob,
    key: &str,
    limit: u32,
) -> Result<Enqueued, sqlx::Error> {
    let mut tx = begin_causal(conn).await?;
    sqlx::query(KEY_TAKE)
        .bind(key)
        .bind(limit)
        .bind(limit)
        .execute(&mut *tx)
        .await?;
    let rows: Vec<(i64, Option<Text>)> = sqlx::query_as(KEY_FRONT)
        .bind(key)
        .bind(key_front_len(limit))
        .fetch_all(&mut *tx)
        .await?;
    let rows: Vec<(i64, Option<String>)> = rows
        .into_iter()
        .map(|(id, status)| (id, status.map(|s| s.0)))
        .collect();
    let status = if key_admits(&key_front(key, limit, &rows)) {
        "pending"
    } else {
        "blocked"
    };
    let sql = match job.idempotency_key {
        Some(_) => INSERT_KEYED_DEDUPE,
        None => INSERT_KEYED,
    };
    let mut args = row_arguments(std::slice::from_ref(job))?;
    let added: Result<(), sqlx::error::BoxDynError> = (|| {
        args.add(status)?;
        args.add(key)?;
        args.add(limit)
    })();
    added.map_err(sqlx::Error::Encode)?;
    let inserted = sqlx::query_with(sql, args).execute(&mut *tx).await?;
    let id = i64::try_from(inserted.last_insert_id()).unwrap_or(i64::MAX);
    sqlx::query(KEY_JOIN)
        .bind(key)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Enqueued {
        id,
        duplicate: inserted.rows_affected() == 2,
    })
}

/// One release of `keys` (see [`BackendStore::release_keys`]) in a
/// transaction of its own on `conn`.
async fn release_keys_on(
    conn: &mut MySqlConnection,
    keys: &[String],
) -> Result<KeyPlan, sqlx::Error> {
    let mut tx = conn.begin_with(BEGIN_RC).await?;
    // IN-lists padded to a power of two (see `padded`): a few statement
    // texts per connection, each prepared once.
    let padded_keys = padded_strings(keys);
    let sql = keys_lock(padded_keys.len());
    let mut lock = sqlx::query_as::<_, (Text, i64)>(&sql);
    for key in &padded_keys {
        lock = lock.bind(key);
    }
    let limits: Vec<(String, u32)> = lock
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(key, limit)| (key.0, key_limit(limit)))
        .collect();
    if limits.is_empty() {
        tx.commit().await?;
        return Ok(KeyPlan::default());
    }
    let names: Vec<&str> = limits.iter().map(|(key, _)| key.as_str()).collect();
    let names = padded(&names);
    let longest = limits.iter().map(|&(_, limit)| key_front_len(limit)).max();
    let sql = key_fronts(names.len());
    let mut read = sqlx::query_as::<_, (Text, i64, Option<Text>)>(&sql);
    for key in &names {
        read = read.bind(key);
    }
    let read = read.bind(longest.unwrap_or(0));
    let rows: Vec<(String, i64, Option<String>)> = read
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|(key, id, status)| (key.0, id, status.map(|s| s.0)))
        .collect();
    let plan = key_plan(&policy_fronts(&limits, &rows));
    if !plan.forget.is_empty() {
        let members: Vec<(&str, i64)> = plan
            .forget
            .iter()
            .map(|(k, id)| (k.as_str(), *id))
            .collect();
        let members = padded(&members);
        let sql = key_forget(members.len());
        let mut forget = sqlx::query(&sql);
        for (key, id) in &members {
            forget = forget.bind(key).bind(id);
        }
        forget.execute(&mut *tx).await?;
    }
    if !plan.unblock.is_empty() {
        let ids = padded(&plan.unblock);
        let sql = key_unblock(ids.len());
        let mut unblock = sqlx::query(&sql);
        for id in &ids {
            unblock = unblock.bind(id);
        }
        unblock.execute(&mut *tx).await?;
    }
    if !plan.empty.is_empty() {
        let sql = keys_drop(plan.empty.len());
        let mut drop = sqlx::query(&sql);
        for key in &plan.empty {
            drop = drop.bind(key);
        }
        drop.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(plan)
}

/// `jobs` in runs of at most [`INSERT_CHUNK`] rows whose values add up to at
/// most `budget` bytes, so each multi-row INSERT fits in `max_allowed_packet`
/// (a batch of payloads that each fit may not fit together).
fn statement_chunks(jobs: &[NewJob], budget: usize) -> Vec<&[NewJob]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, job) in jobs.iter().enumerate() {
        let size = job.payload.len()
            + job.queue.len()
            + job.job_name.len()
            + job.idempotency_key.as_ref().map_or(0, String::len)
            + 64;
        if i > start && (i - start == INSERT_CHUNK || bytes + size > budget) {
            chunks.push(&jobs[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < jobs.len() {
        chunks.push(&jobs[start..]);
    }
    chunks
}

/// The values of `jobs` for their [`INSERT_ROW_NOW`]s, in order.
fn now_row_arguments(jobs: &[NewJob]) -> Result<MySqlArguments, sqlx::Error> {
    let mut args = MySqlArguments::default();
    for job in jobs {
        let added: Result<(), sqlx::error::BoxDynError> = (|| {
            args.add(&job.queue)?;
            args.add(&job.job_name)?;
            args.add(&job.payload)?;
            args.add(job.priority)?;
            args.add(job.max_attempts)
        })();
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// The values of `jobs` for their [`INSERT_ROW`]s, in order.
fn row_arguments(jobs: &[NewJob]) -> Result<MySqlArguments, sqlx::Error> {
    let mut args = MySqlArguments::default();
    for job in jobs {
        let (at, delay) = run_at_binds(job.run_at);
        let added: Result<(), sqlx::error::BoxDynError> = (|| {
            args.add(&job.queue)?;
            args.add(&job.job_name)?;
            args.add(&job.payload)?;
            args.add(job.priority)?;
            args.add(at)?;
            args.add(delay)?;
            args.add(job.max_attempts)?;
            args.add(&job.idempotency_key)
        })();
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(args)
}

/// The single-row INSERT for `job`: with a key, `ON DUPLICATE KEY` turns a
/// repeat into a hit on the existing row; without one nothing can conflict,
/// and the plain INSERT skips the duplicate check's work.
fn insert_sql(job: &NewJob) -> &'static str {
    static KEYED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static KEYLESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if job.idempotency_key.is_some() {
        KEYED.get_or_init(|| insert_rows(1, ON_DUPLICATE))
    } else {
        KEYLESS.get_or_init(|| insert_rows(1, ""))
    }
}

/// `(absolute time, delay µs)` for the `COALESCE(?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)` pair.
fn run_at_binds(run_at: RunAt) -> (Option<NaiveDateTime>, i64) {
    match run_at {
        RunAt::Now => (None, 0),
        RunAt::After(delay) => (None, micros(delay)),
        RunAt::At(at) => (Some(at.naive_utc()), 0),
    }
}

fn utc(t: NaiveDateTime) -> DateTime<Utc> {
    t.and_utc()
}

/// Text columns as [`Text`] (binary collations), times as `DATETIME(6)` in UTC.
impl Columns for sqlx::mysql::MySqlRow {
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
        text(self, column)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        opt_text(self, column)
    }

    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        Ok(utc(self.try_get(column)?))
    }

    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        Ok(self.try_get::<Option<NaiveDateTime>, _>(column)?.map(utc))
    }
}

shared::fenced_set!(MySqlStore);

/// A time as MySQL/MariaDB's `DATETIME(6)` columns hold it (UTC, no zone):
/// bound as a `DATETIME`, not as a `TIMESTAMP`, whose range ends in 2038.
fn db_time(time: DateTime<Utc>) -> NaiveDateTime {
    time.naive_utc()
}

/// A `DATETIME(6)` column's time (UTC).
fn utc_time(time: NaiveDateTime) -> DateTime<Utc> {
    time.and_utc()
}

crate::store::flow::flow_insert!(MySqlConnection, insert);
crate::store::batch::batch_insert!(MySqlConnection, insert);

/// Begins the transaction of a workflow's or a batch's write (see
/// [`begin_causal`]: their jobs may be unique or keyed).
async fn begin_flow(
    conn: &mut MySqlConnection,
) -> Result<sqlx::Transaction<'_, sqlx::MySql>, sqlx::Error> {
    begin_causal(conn).await
}

/// A workflow statement's leading values: none (the server's clock).
fn flow_now<'q>(
    query: sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    query
}

/// A workflow statement's text for `n` ids: its `{ids}` as an IN-list of
/// placeholders, padded to a power of two (see [`padded`]).
fn flow_sql(sql: &'static str, n: usize) -> String {
    sql.replace("{ids}", &vec!["?"; n.max(1).next_power_of_two()].join(", "))
}

/// Binds a workflow statement's ids ([`flow_sql`]'s list, padded).
fn flow_bind<'q>(
    mut query: sqlx::query::Query<'q, sqlx::MySql, MySqlArguments>,
    ids: &[i64],
) -> sqlx::query::Query<'q, sqlx::MySql, MySqlArguments> {
    for id in padded(ids) {
        query = query.bind(id);
    }
    query
}
