//! Where jobs are stored: one declared contract, [`BackendStore`], and one
//! folder per backend implementing it.
//!
//! # The contract
//!
//! [`BackendStore`] is everything a backend does: connect and migrate;
//! enqueue (one row, a batch, and one row on the caller's connection);
//! claim, settle (complete, transition), renew leases (heartbeat,
//! heartbeat_unlocked), reap, prune; listen for the database's own wake-ups;
//! inspect (job, counts, the figures of `stats`); check the server
//! (doctor); cancel, retry; pause
//! and resume queues; the live workers' rows (register, refresh,
//! unregister, prune the expired, read); list, count and the batches of bulk retry and
//! cancel, whose statements each backend declares as the constant pieces
//! of a [`filter::Filtered`] (see `filter.rs`). Each method documents what
//! it promises; the backends' module docs say how their SQL keeps it.
//!
//! The trait is crate-private (nothing outside jobq can implement it) and
//! not object safe on purpose (`async fn`, associated types): the set of
//! backends is closed, so [`Store`] is an enum matched in one place
//! ([`dispatch!`]) rather than a boxed trait object. No allocation per call,
//! and every arm calls the trait, so a backend missing a method does not
//! compile. Nothing outside `store/` sees a dialect.
//!
//! # Layout
//!
//! Each backend is a folder, behind its Cargo feature:
//!
//! - `mod.rs`: the store (a `Clone` struct owning its pool) and its
//!   `impl BackendStore`;
//! - `sql.rs`: every statement it runs, as constants (IN-lists are built
//!   there from constant pieces); tests reach them as
//!   `jobq_runtime::__private::sql::<backend>`. No SQL text lives anywhere
//!   else (a test below checks it);
//! - `glue.rs`: what the rest of the crate sees: `Jobq::from_*_pool`,
//!   `Jobq::*_pool`, and the `EnqueueConnection` impl of its connection;
//! - its mechanism files: MySQL's resumed-claim `position.rs`, PostgreSQL's
//!   `notify.rs` and `listen.rs`, SQLite's `shared_write.rs` and
//!   `checkpoint.rs`; each backend's `doctor.rs` (its checks, on the
//!   shared plumbing of [`doctor`]);
//! - `tests.rs`: its unit tests, if any.
//!
//! # Adding a backend
//!
//! 1. A Cargo feature in `jobq-runtime/Cargo.toml` enabling only its sqlx
//!    driver (`foo = ["sqlx/foo"]`), added to `default` if it should be on
//!    by default.
//! 2. A folder `store/foo/` as above, with `impl BackendStore for FooStore`
//!    (the compiler lists what is missing) and its migrations in
//!    `jobq-runtime/migrations/foo/`, listed in `store/migrate.rs`.
//! 3. A variant in [`Backend`] (always present, whatever the features), its
//!    URL schemes in `Backend::from_url` and its feature in
//!    `Backend::feature`.
//! 4. `#[cfg(feature = "foo")]` arms: the module and re-export below, the
//!    [`Store`] variant, its arm in [`dispatch!`], in [`connect`] and in
//!    [`Store::enqueue_in`]; the `AnyConnection` variant in `handle.rs`;
//!    its `sql` module in `lib.rs` (`__private::sql`).
//! 5. Its rows in the conformance suite's `on_every_backend!` and a
//!    single-backend check in `.ci/run`.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use tokio_util::sync::CancellationToken;

use self::filter::{Filtered, Kind, Statement, Where};
use crate::handle::{AnyConnection, ConnectOptions};
use crate::ops::{Order, STATS_FINISHED_CAP, STATS_MINUTES, Stats};
use crate::types::{Enqueued, JobInfo, JobStatus, QueueCounts, RunAt};
use crate::{Backend, Error, Result};

pub(crate) mod doctor;
pub(crate) mod filter;
pub(crate) mod migrate;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
mod stash;

#[cfg(feature = "mysql")]
pub(crate) use mysql::MySqlStore;
#[cfg(feature = "postgres")]
pub(crate) use postgres::PgStore;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::SqliteStore;

/// What every backend's store does. See the [module docs](self).
///
/// Times are the database's clock where it has one (the application's on
/// SQLite); durations arrive already clamped to [`MAX_DELAY`](crate::MAX_DELAY).
/// A method that retries does so only for statements jobq started itself
/// ([`retry_transient`]), never inside a caller's transaction.
pub(crate) trait BackendStore: Sized {
    /// The sqlx pool it runs on.
    type Pool;
    /// The connection [`enqueue_in`](Self::enqueue_in) writes through.
    type Connection;

    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Opens a pool of `options.max_connections` for `url` (one of its
    /// schemes), a server's first connection within `options.connect_timeout`
    /// ([`probe`]).
    async fn connect(url: &str, options: &ConnectOptions) -> Result<Self>;

    /// Uses the caller's pool; checks what it must of the server.
    async fn from_pool(pool: Self::Pool) -> Result<Self>;

    /// The pool, for `Jobq::*_pool`.
    fn pool(&self) -> &Self::Pool;

    /// The largest payload the server takes in one statement, below jobq's
    /// own limit, with the setting that decides it: `None` (the default)
    /// when the server's limit is far beyond any payload jobq accepts.
    fn server_payload_limit(&self) -> Option<(usize, String)> {
        None
    }

    /// Applies the embedded migrations; safe from many processes at once.
    async fn migrate(&self) -> Result<()>;

    /// The embedded migrations.
    fn migrations(&self) -> &'static [migrate::Migration];

    /// The versions `jobq_migrations` records (an error if it does not
    /// exist: [`Error::NotMigrated`]).
    async fn applied_migrations(&self) -> Result<Vec<i64>>;

    /// Inserts one row (or finds the row of its idempotency key).
    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued>;

    /// Inserts a batch, all or nothing; results are in input order.
    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>>;

    /// Inserts one row through the caller's connection or transaction,
    /// never retried; on PostgreSQL its NOTIFY goes out when that commits.
    async fn enqueue_in(conn: &mut Self::Connection, job: &NewJob) -> Result<Enqueued>;

    /// Claims up to `limit` due jobs of `queue`, ordered by priority,
    /// run_at, id, each under a token of its own ([`row_token`]); returns
    /// them in that order.
    async fn claim(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>>;

    /// Marks held jobs `done`; returns how many were still held.
    async fn complete(&self, fences: &[Fence]) -> Result<u64>;

    /// Applies one fenced transition; `false` when the fence no longer matched.
    async fn transition(&self, t: &Transition) -> Result<bool>;

    /// Extends the leases of held jobs; returns the fences no longer held.
    async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>>;

    /// Extends the leases of the held jobs among `fences` whose rows no
    /// other transaction has locked, without waiting on any lock; returns
    /// the fences it renewed.
    async fn heartbeat_unlocked(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>>;

    /// Returns up to `limit` expired `processing` rows of `queue` to
    /// `pending` (or `failed` when their attempts are used up); how many.
    async fn reap(&self, queue: &str, limit: u32) -> Result<u64>;

    /// Deletes every row of the `which` kind that finished more than
    /// `older_than` ago, oldest first, at most [`PRUNE_BATCH`] rows per
    /// statement (each a short transaction, see [`in_batches`]); how many.
    async fn prune(&self, which: Prunable, older_than: Duration) -> Result<u64>;

    /// Forwards the database's own wake-ups for `queues` to the in-process
    /// ones until `stop`; returns at once on a backend that has none.
    async fn listen(&self, queues: &[String], stop: &CancellationToken);

    /// The row with this id, as stored.
    async fn job(&self, id: i64) -> Result<Option<JobInfo>>;

    /// How many jobs of `queue` are in each status (see [`counts`]).
    async fn counts(&self, queue: &str) -> Result<QueueCounts>;

    /// Cancels a `pending` or `processing` row: whether it did, and the
    /// claim it ended if the row was `processing`.
    async fn cancel(&self, id: i64) -> Result<Cancelled>;

    /// Sends a `failed` or `cancelled` row back to `pending`, runnable now,
    /// with at least one more attempt; whether it did.
    async fn retry(&self, id: i64) -> Result<bool>;

    /// The database's clock now (the application's on SQLite): the moment
    /// every figure of one `stats` call is read against.
    async fn clock(&self) -> Result<DateTime<Utc>>;

    /// Every queue with a row in `jobq_jobs`, in any status, found by
    /// skipping from one queue to the next in an index (never a scan of the
    /// rows); in no particular order.
    async fn queues_with_rows(&self) -> Result<Vec<String>>;

    /// The figures of one queue at `window.now`, each read through an
    /// index: counts of the live rows, finished rows counted up to `cap`
    /// per status, and the `done`/`failed` rows finished since
    /// `window.since`, by minute (see [`QueueFigures`]).
    async fn queue_figures(&self, queue: &str, window: StatsWindow) -> Result<QueueFigures>;

    /// Marks `queue` paused (`paused = true`) or not; whether that changed it.
    async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool>;

    /// The queues paused now, by name.
    async fn paused_queues(&self) -> Result<Vec<String>>;

    /// Every `pending` job of `queue` not due yet becomes due now; how many
    /// (`jobq_runtime::testing`'s drain with scheduled jobs).
    #[cfg(feature = "testing")]
    async fn make_due(&self, queue: &str) -> Result<u64>;

    /// Inserts the row of a worker starting (or starting over after its
    /// row was deleted as expired); it expires `row.ttl` from now.
    async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()>;

    /// Refreshes worker `id`'s row: `running` jobs now, expiring `ttl` from
    /// now; `false` if the row is gone (deleted as expired).
    async fn refresh_worker(&self, id: i64, running: i64, ttl: Duration) -> Result<bool>;

    /// Deletes worker `id`'s row (its clean shutdown).
    async fn unregister_worker(&self, id: i64) -> Result<()>;

    /// Deletes the rows of every worker whose row has expired; how many.
    async fn prune_workers(&self) -> Result<u64>;

    /// The rows of the workers whose rows have not expired, oldest first.
    async fn live_workers(&self) -> Result<Vec<WorkerRecord>>;

    /// Its filtered statements (listing and bulk actions), from the
    /// constant pieces of its `sql.rs`.
    fn filtered(&self) -> &'static Filtered;

    /// The rows of a list statement ([`Kind::List`]), in its order.
    async fn list(&self, statement: &Statement) -> Result<Vec<JobInfo>>;

    /// The count of a [`Kind::Count`] statement.
    async fn count_where(&self, statement: &Statement) -> Result<u64>;

    /// The ids of a [`Kind::Retry`] or [`Kind::Cancel`] statement (one page
    /// of a bulk action's snapshot), read without locks, in its order.
    async fn ids(&self, statement: &Statement) -> Result<Vec<i64>>;

    /// One short transaction of `retry_where`: those of `ids` whose rows
    /// still meet `guard` ([`Filtered::guard`], statuses a retry applies
    /// to), skipping rows another transaction has locked, retried as
    /// [`retry`](Self::retry) retries; how many it changed.
    async fn retry_batch(&self, ids: &[i64], guard: &'static str) -> Result<u64>;

    /// One short transaction of `cancel_where`, as
    /// [`retry_batch`](Self::retry_batch), cancelling as
    /// [`cancel`](Self::cancel) does.
    async fn cancel_batch(&self, ids: &[i64], guard: &'static str) -> Result<Cancelled>;

    /// Checks the server and jobq's tables for what jobq needs, in the
    /// order the report shows them (see [`doctor`]); `options` give this
    /// host's clock and the workers' lease.
    /// An error reading one check's facts makes that check fail
    /// ([`doctor::guarded`]); only a server that cannot be reached at all
    /// is an `Err`.
    async fn doctor(&self, options: doctor::DoctorOptions) -> Result<Vec<crate::ops::Check>>;
}

/// What a cancel changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cancelled {
    /// Rows it cancelled.
    pub(crate) changed: u64,
    /// The claims of the `processing` rows among them: the attempts whose
    /// workers must stop.
    pub(crate) held: Vec<Fence>,
}

impl Cancelled {
    /// From the `(id, lease token before the cancel)` of each row a cancel
    /// changed.
    pub(crate) fn of_rows(rows: &[(i64, Option<i64>)]) -> Self {
        Self {
            changed: rows.len() as u64,
            held: rows
                .iter()
                .filter_map(|&(id, token)| token.map(|token| Fence { id, token }))
                .collect(),
        }
    }
}

/// The concrete stores, one variant per compiled-in backend.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    #[cfg(feature = "mysql")]
    MySql(MySqlStore),
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
}

/// Runs `$body` with `$s` bound to the concrete store.
macro_rules! dispatch {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "mysql")]
            Store::MySql($s) => $body,
            #[cfg(feature = "sqlite")]
            Store::Sqlite($s) => $body,
            #[cfg(feature = "postgres")]
            Store::Postgres($s) => $body,
        }
    };
}

/// [`dispatch!`] for a call that returns a `Result`: on MySQL/MariaDB the
/// store also sees the result, so that a connect list can react to a lost
/// node (`store/mysql/failover.rs`).
macro_rules! dispatch_seen {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "mysql")]
            Store::MySql($s) => {
                let result = $body;
                $s.seen(&result);
                result
            }
            #[cfg(feature = "sqlite")]
            Store::Sqlite($s) => $body,
            #[cfg(feature = "postgres")]
            Store::Postgres($s) => $body,
        }
    };
}

/// Creates (`create`) or drops database `name` on the server of `url`
/// (MySQL/MariaDB or PostgreSQL), for `jobq_runtime::testing`.
#[cfg(feature = "testing")]
pub(crate) async fn server_database(url: &str, name: &str, create: bool) -> Result<()> {
    match Backend::from_url(url) {
        #[cfg(feature = "mysql")]
        Some(Backend::MySql) => mysql::glue::server_database(url, name, create).await,
        #[cfg(feature = "postgres")]
        Some(Backend::Postgres) => postgres::glue::server_database(url, name, create).await,
        _ => Err(Error::UnsupportedUrl(crate::handle::redact_url(url))),
    }
}

/// Opens one connection to a server within `timeout` and closes it: what a
/// pool's first connect does, but failing with the connection's own error
/// (a refusal, a login, a DNS failure) at once, where the pool retries it
/// until its acquire timeout (30 s) and reports only `PoolTimedOut`.
#[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
pub(crate) async fn probe<O>(url: &str, options: &O, timeout: Duration) -> Result<()>
where
    O: sqlx::ConnectOptions,
    O::Connection: Sized,
{
    use sqlx::Connection as _;
    match tokio::time::timeout(timeout, options.connect()).await {
        Ok(Ok(conn)) => {
            // The pool opens its own; a failed goodbye changes nothing.
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(error.into()),
        Err(_elapsed) => Err(Error::ConnectTimeout {
            url: crate::handle::redact_url(url),
            timeout,
        }),
    }
}

/// Opens the store `url` names, if its backend is compiled in.
pub(crate) async fn connect(url: &str, options: &ConnectOptions) -> Result<Store> {
    let Some(backend) = Backend::from_url(url) else {
        return Err(Error::UnsupportedUrl(crate::handle::redact_url(url)));
    };
    Ok(match backend {
        #[cfg(feature = "mysql")]
        Backend::MySql => Store::MySql(MySqlStore::connect(url, options).await?),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite => Store::Sqlite(SqliteStore::connect(url, options).await?),
        #[cfg(feature = "postgres")]
        Backend::Postgres => Store::Postgres(PgStore::connect(url, options).await?),
        #[allow(unreachable_patterns)]
        backend => {
            return Err(Error::BackendNotCompiled {
                backend,
                feature: backend.feature(),
            });
        }
    })
}

impl Store {
    pub(crate) fn backend(&self) -> Backend {
        dispatch!(self, s => s.backend())
    }

    /// The same store with statement deadline `deadline`.
    pub(crate) fn with_deadline(&self, deadline: Duration) -> Self {
        let mut store = self.clone();
        dispatch!(&mut store, s => s.deadline = deadline.max(crate::handle::MIN_STATEMENT_TIMEOUT));
        store
    }

    /// See [`BackendStore::server_payload_limit`].
    pub(crate) fn server_payload_limit(&self) -> Option<(usize, String)> {
        dispatch!(self, s => s.server_payload_limit())
    }

    /// Applies the embedded migrations; safe from many processes at once.
    pub(crate) async fn migrate(&self) -> Result<()> {
        dispatch_seen!(self, s => s.migrate().await)
    }

    /// Whether every embedded migration is applied: [`Error::NotMigrated`]
    /// for a database never migrated, [`Error::MigrationsPending`] for one
    /// an older jobq migrated. One read of `jobq_migrations`.
    pub(crate) async fn check_migrated(&self) -> Result<()> {
        let applied = dispatch_seen!(self, s => s.applied_migrations().await)?;
        match migrate::missing(dispatch!(self, s => s.migrations()), &applied) {
            None => Ok(()),
            Some(what) => Err(Error::MigrationsPending { what, source: None }),
        }
    }

    pub(crate) async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        dispatch_seen!(self, s => s.enqueue(job).await)
    }

    /// Inserts a batch; results are in input order.
    pub(crate) async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        dispatch_seen!(self, s => s.enqueue_many(jobs).await)
    }

    /// Inserts `job` through the caller's connection, which must be of this
    /// store's backend.
    pub(crate) async fn enqueue_in(
        &self,
        conn: AnyConnection<'_>,
        job: &NewJob,
    ) -> Result<Enqueued> {
        #[allow(unreachable_patterns)]
        match (self, conn) {
            #[cfg(feature = "mysql")]
            (Self::MySql(_), AnyConnection::MySql(c)) => MySqlStore::enqueue_in(c, job).await,
            #[cfg(feature = "sqlite")]
            (Self::Sqlite(_), AnyConnection::Sqlite(c)) => SqliteStore::enqueue_in(c, job).await,
            #[cfg(feature = "postgres")]
            (Self::Postgres(_), AnyConnection::Postgres(c)) => PgStore::enqueue_in(c, job).await,
            (store, given) => Err(Error::BackendMismatch {
                expected: store.backend().name(),
                given: given.backend().name(),
            }),
        }
    }

    /// Claims up to `limit` due jobs of `queue`, ordered by priority, run_at, id.
    pub(crate) async fn claim(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        let claim = ClaimRequest {
            queue,
            limit,
            lease: lease.min(crate::MAX_DELAY),
            worker,
        };
        dispatch_seen!(self, s => s.claim(claim).await)
    }

    /// Deletes every row of the `which` kind that finished more than
    /// `older_than` ago, oldest first, [`PRUNE_BATCH`] rows per statement
    /// (each a short transaction); returns how many.
    pub(crate) async fn prune_all(&self, which: Prunable, older_than: Duration) -> Result<u64> {
        dispatch_seen!(self, s => s.prune(which, older_than).await)
    }

    /// Marks held jobs `done`; returns how many were still held.
    pub(crate) async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        dispatch_seen!(self, s => s.complete(fences).await)
    }

    /// Applies one fenced transition; `false` when the fence no longer matched.
    ///
    /// A move to `failed` is given no delay, whatever it asked for: every
    /// finished row's `run_at` is when it finished (MySQL and SQLite count
    /// and bucket finished rows through `run_at` in the claim index).
    pub(crate) async fn transition(&self, t: &Transition) -> Result<bool> {
        if t.target == Target::Failed && !t.delay.is_zero() {
            let t = Transition {
                delay: Duration::ZERO,
                ..t.clone()
            };
            return dispatch_seen!(self, s => s.transition(&t).await);
        }
        dispatch_seen!(self, s => s.transition(t).await)
    }

    /// Extends the leases of held jobs; returns the fences that are no longer held.
    /// A lease past [`MAX_DELAY`](crate::MAX_DELAY) (e.g. `extend_lease(Duration::MAX)`)
    /// is clamped to it: every backend's time arithmetic holds that.
    pub(crate) async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch_seen!(self, s => s.heartbeat(fences, lease).await)
    }

    /// Extends the leases of the held jobs among `fences` whose rows no other
    /// transaction has locked, without waiting on any lock (for the rows of a
    /// settle stuck on a row lock); returns the fences it renewed. A skipped
    /// row is not lost: its lock holder is the stuck settle, or the one it waits on.
    pub(crate) async fn heartbeat_unlocked(
        &self,
        fences: &[Fence],
        lease: Duration,
    ) -> Result<Vec<Fence>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch_seen!(self, s => s.heartbeat_unlocked(fences, lease).await)
    }

    /// Returns up to `limit` expired `processing` rows of `queue` to `pending`
    /// (or `failed` when their attempts are used up); returns how many.
    pub(crate) async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        dispatch_seen!(self, s => s.reap(queue, limit).await)
    }

    /// Forwards the database's own wake-ups (PostgreSQL NOTIFY) for `queues`
    /// to the in-process ones until `stop`; returns at once on backends that
    /// have none. Polling stays on regardless: a lost listener never stalls a queue.
    pub(crate) async fn listen(&self, queues: &[String], stop: &CancellationToken) {
        dispatch!(self, s => s.listen(queues, stop).await)
    }

    pub(crate) async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
        dispatch_seen!(self, s => s.job(id).await)
    }

    /// How many jobs of `queue` are in each status.
    pub(crate) async fn counts(&self, queue: &str) -> Result<QueueCounts> {
        dispatch_seen!(self, s => s.counts(queue).await)
    }

    /// Cancels one row; `signal` gets the claim it ended (if it was
    /// `processing`) once the change has committed.
    pub(crate) async fn cancel(&self, id: i64, signal: fn(&[Fence])) -> Result<bool> {
        let cancelled = dispatch_seen!(self, s => s.cancel(id).await)?;
        signal(&cancelled.held);
        Ok(cancelled.changed == 1)
    }

    /// Ids one page of a bulk action reads at most here.
    pub(crate) fn bulk_page(&self) -> u32 {
        dispatch!(self, s => s.filtered().ids_page)
    }

    /// The `kind` statement of this backend for `w`.
    pub(crate) fn statement(&self, kind: Kind, w: &Where<'_>, limit: i64) -> Statement {
        dispatch!(self, s => s.filtered().statement(kind, w, limit))
    }

    /// Up to `limit` rows `w` matches, in `order`.
    pub(crate) async fn list(
        &self,
        w: &Where<'_>,
        order: Order,
        limit: u32,
    ) -> Result<Vec<JobInfo>> {
        let statement = self.statement(Kind::List(order), w, i64::from(limit));
        dispatch_seen!(self, s => s.list(&statement).await)
    }

    /// How many rows `w` matches.
    pub(crate) async fn count_where(&self, w: &Where<'_>) -> Result<u64> {
        let statement = self.statement(Kind::Count, w, 0);
        dispatch_seen!(self, s => s.count_where(&statement).await)
    }

    /// Retries every row `w` matches (`w.statuses` already narrowed to the
    /// retryable ones) at most once: the ids it matches are read page by
    /// page ([`filter::Pages`]), then retried in batches of
    /// [`filter::BULK_BATCH`], each re-checking the statuses on the rows it
    /// locks. A job a worker fails again meanwhile is not retried again.
    pub(crate) async fn retry_where(&self, w: Where<'_>) -> Result<u64> {
        let guard = dispatch!(self, s => s.filtered().guard(w.statuses));
        let mut retried = 0;
        let mut pages = filter::Pages::new(w, Kind::Retry);
        while let Some(ids) = self.next_page(&mut pages).await? {
            for batch in ids.chunks(filter::BULK_BATCH) {
                retried += dispatch_seen!(self, s => s.retry_batch(batch, guard).await)?;
            }
        }
        Ok(retried)
    }

    /// Cancels every row `w` matches (`w.statuses` already narrowed to the
    /// cancellable ones) at most once, in pages and batches as
    /// [`retry_where`](Self::retry_where); `signal` gets the claims each
    /// batch ended once it has committed.
    pub(crate) async fn cancel_where(&self, w: Where<'_>, signal: fn(&[Fence])) -> Result<u64> {
        let guard = dispatch!(self, s => s.filtered().guard(w.statuses));
        let mut cancelled = 0;
        let mut pages = filter::Pages::new(w, Kind::Cancel);
        while let Some(ids) = self.next_page(&mut pages).await? {
            for batch in ids.chunks(filter::BULK_BATCH) {
                let batch = dispatch_seen!(self, s => s.cancel_batch(batch, guard).await)?;
                signal(&batch.held);
                cancelled += batch.changed;
            }
        }
        Ok(cancelled)
    }

    /// The ids of the next page of a bulk action, `None` after the last.
    async fn next_page(&self, pages: &mut filter::Pages<'_>) -> Result<Option<Vec<i64>>> {
        let filtered = dispatch!(self, s => s.filtered());
        let Some(statement) = pages.next_statement(filtered) else {
            return Ok(None);
        };
        let ids = dispatch_seen!(self, s => s.ids(&statement).await)?;
        pages.read(filtered, &ids);
        Ok(Some(ids))
    }

    pub(crate) async fn retry(&self, id: i64) -> Result<bool> {
        dispatch_seen!(self, s => s.retry(id).await)
    }

    /// The figures of every queue (see [`Jobq::stats`](crate::Jobq::stats)):
    /// the clock, the queues with rows, the paused ones and those live
    /// workers serve, then each
    /// queue's figures, put together by [`crate::ops::assemble`].
    pub(crate) async fn stats(&self) -> Result<Stats> {
        dispatch!(self, s => {
            let now = s.clock().await?;
            let window = StatsWindow::ending(now);
            let paused = s.paused_queues().await?;
            // One name per live worker serving a queue.
            let served: Vec<String> = s
                .live_workers()
                .await?
                .iter()
                .flat_map(|w| crate::roster::served_queue_names(&w.queues))
                .collect();
            let mut queues = s.queues_with_rows().await?;
            queues.extend(paused.iter().cloned());
            queues.extend(served.iter().cloned());
            queues.sort_unstable();
            queues.dedup();
            let mut figures = Vec::with_capacity(queues.len());
            for queue in &queues {
                figures.push(s.queue_figures(queue, window).await?);
            }
            Ok(crate::ops::assemble(window, figures, &paused, &served))
        })
    }

    /// See [`BackendStore::set_paused`].
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool> {
        dispatch_seen!(self, s => s.set_paused(queue, paused).await)
    }

    /// See [`BackendStore::paused_queues`].
    pub(crate) async fn paused_queues(&self) -> Result<Vec<String>> {
        dispatch_seen!(self, s => s.paused_queues().await)
    }

    /// See [`BackendStore::make_due`].
    #[cfg(feature = "testing")]
    pub(crate) async fn make_due(&self, queue: &str) -> Result<u64> {
        dispatch_seen!(self, s => s.make_due(queue).await)
    }

    /// See [`BackendStore::register_worker`].
    pub(crate) async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()> {
        let row = WorkerRow {
            ttl: row.ttl.min(crate::MAX_DELAY),
            ..*row
        };
        dispatch_seen!(self, s => s.register_worker(&row).await)
    }

    /// See [`BackendStore::refresh_worker`].
    pub(crate) async fn refresh_worker(
        &self,
        id: i64,
        running: i64,
        ttl: Duration,
    ) -> Result<bool> {
        let ttl = ttl.min(crate::MAX_DELAY);
        dispatch_seen!(self, s => s.refresh_worker(id, running, ttl).await)
    }

    /// See [`BackendStore::unregister_worker`].
    pub(crate) async fn unregister_worker(&self, id: i64) -> Result<()> {
        dispatch_seen!(self, s => s.unregister_worker(id).await)
    }

    /// See [`BackendStore::prune_workers`].
    pub(crate) async fn prune_workers(&self) -> Result<u64> {
        dispatch_seen!(self, s => s.prune_workers().await)
    }

    /// The live workers' rows and the clock they were read at.
    pub(crate) async fn live_workers(&self) -> Result<(DateTime<Utc>, Vec<WorkerRecord>)> {
        dispatch_seen!(self, s => {
            match s.live_workers().await {
                Ok(rows) => s.clock().await.map(|now| (now, rows)),
                Err(error) => Err(error),
            }
        })
    }
}

/// The row of a worker registering (see [`BackendStore::register_worker`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerRow<'a> {
    /// Random, new at each start: the row's key.
    pub(crate) id: i64,
    /// Its `claimed_by`.
    pub(crate) worker_id: &'a str,
    pub(crate) host: &'a str,
    pub(crate) pid: i64,
    /// jobq's version.
    pub(crate) version: &'a str,
    /// The served queues, JSON.
    pub(crate) queues: &'a str,
    /// The job kinds it can run, JSON.
    pub(crate) jobs: &'a str,
    pub(crate) running: i64,
    /// How long the row lives without a refresh.
    pub(crate) ttl: Duration,
}

/// A live worker's row as read (see [`BackendStore::live_workers`]).
#[derive(Debug, Clone)]
pub(crate) struct WorkerRecord {
    pub(crate) worker_id: String,
    pub(crate) host: String,
    pub(crate) pid: i64,
    pub(crate) version: String,
    pub(crate) queues: String,
    pub(crate) jobs: String,
    pub(crate) running: i64,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) last_seen: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
}

/// The moment one `stats` call reads its figures at, and where its per-minute
/// history starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatsWindow {
    /// Now, by the database's clock.
    pub(crate) now: DateTime<Utc>,
    /// The start of the oldest minute of history: the minute now running
    /// (truncated to the minute) less [`STATS_MINUTES`] − 1 minutes.
    pub(crate) since: DateTime<Utc>,
    /// How many rows of one finished status are counted at most.
    pub(crate) cap: i64,
}

impl StatsWindow {
    /// The window of a `stats` call at `now`.
    pub(crate) fn ending(now: DateTime<Utc>) -> Self {
        let minute = now
            .duration_trunc(chrono::TimeDelta::minutes(1))
            .unwrap_or(now);
        let history = i64::try_from(STATS_MINUTES).unwrap_or(60) - 1;
        Self {
            now,
            since: minute - chrono::TimeDelta::minutes(history),
            cap: i64::try_from(STATS_FINISHED_CAP).unwrap_or(i64::MAX),
        }
    }
}

/// One queue's figures as a backend reads them, before
/// [`crate::ops::assemble`] turns them into a [`QueueStats`](crate::QueueStats).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct QueueFigures {
    pub(crate) queue: String,
    /// One row per live status read (`pending`, `processing`).
    pub(crate) live: Vec<LiveFigures>,
    /// `done`, `failed` and `cancelled` rows, each counted up to the cap.
    pub(crate) finished: [i64; 3],
    /// `(status, minute, rows)`: rows of `done` or `failed` that finished in
    /// minute `minute` of the window (0 = the oldest, at `since`).
    pub(crate) per_minute: Vec<(String, i64, i64)>,
}

/// The live rows of one queue in one status.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveFigures {
    /// `pending` or `processing`.
    pub(crate) status: String,
    /// All its rows.
    pub(crate) rows: i64,
    /// Rows with `run_at <= now`: due (`pending`).
    pub(crate) due: i64,
    /// Rows with `run_at < now`: lease expired (`processing`, as the reaper sees it).
    pub(crate) expired: i64,
    /// The earliest `run_at`, if any row.
    pub(crate) earliest: Option<DateTime<Utc>>,
}

impl LiveFigures {
    /// The figures of `status` from the columns every backend's statement
    /// returns: rows, due rows, expired rows (the sums are NULL over no row).
    pub(crate) fn new(
        status: String,
        rows: i64,
        due: Option<i64>,
        expired: Option<i64>,
        earliest: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            status,
            rows,
            due: due.unwrap_or(0),
            expired: expired.unwrap_or(0),
            earliest,
        }
    }
}

impl Store {
    /// Every check of [`BackendStore::doctor`], as a report.
    pub(crate) async fn doctor(
        &self,
        options: doctor::DoctorOptions,
    ) -> Result<crate::ops::DoctorReport> {
        let checks = dispatch_seen!(self, s => s.doctor(options).await)?;
        Ok(crate::ops::DoctorReport { checks })
    }
}

static INTERNAL_RETRIES: AtomicU64 = AtomicU64::new(0);

/// How many times jobq re-ran one of its own transactions or statements after
/// a transient database error (deadlock, lock wait timeout, snapshot
/// conflict, busy database) since the process started.
pub fn internal_retries() -> u64 {
    INTERNAL_RETRIES.load(Ordering::Relaxed)
}

/// Runs `work` — one statement or one short transaction of jobq's, getting
/// its connection included — within `deadline`, or gives up on it:
/// [`Error::StatementTimeout`] naming `statement` (one of
/// [`crate::metrics::statement`]'s kinds).
///
/// # The statement deadline
///
/// Every statement jobq starts on its own connections runs under one (a
/// tokio timer per statement, no round trip): a server that stops
/// answering with the connection open (frozen, cut off behind a silent
/// network, overloaded) would otherwise hold the caller, a worker loop or
/// a shutdown for as long as TCP takes to give up, which is forever while
/// the peer's kernel still acknowledges. Giving up drops `work`, and with
/// it the connection it held: on MySQL/MariaDB and PostgreSQL that
/// connection is closed rather than handed out again (see
/// [`stash`](self::stash)), since its state is unknown — a write on it may
/// or may not have taken effect, which jobq's fences make harmless (a
/// settle or renewal that committed is found applied, a claim that did is
/// reaped after its lease).
///
/// The deadline ([`DEFAULT_STATEMENT_TIMEOUT`](crate::DEFAULT_STATEMENT_TIMEOUT),
/// 15 s, or [`ConnectOptions::statement_timeout`](crate::ConnectOptions::statement_timeout))
/// is longer than the lock waits jobq sets for itself — MySQL/MariaDB's
/// `innodb_lock_wait_timeout = 5` on jobq's sessions, SQLite's busy timeout
/// of 10 s — so a statement waiting on a row lock normally gets the
/// database's own error first, which jobq retries as it always did.
/// PostgreSQL's lock waits have no limit of their own: there a wait past
/// the deadline ends at the deadline (the connection closed, the write
/// retried later as after any error).
pub(crate) async fn within<T, Fut>(
    deadline: Duration,
    statement: &'static str,
    work: Fut,
) -> Result<T>
where
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    match tokio::time::timeout(deadline, work).await {
        Ok(result) => Ok(result?),
        Err(_elapsed) => Err(Error::StatementTimeout {
            statement,
            timeout: deadline,
        }),
    }
}

/// Runs `op` again (up to 8 times, with a short jittered pause) while it fails
/// with an error `transient` accepts, each run [`within`] `deadline`. Only
/// for work jobq started itself: never inside a caller's transaction. Each
/// re-run is counted, in [`internal_retries`] and in the
/// `jobq_internal_retries_total` metric under `statement` (one of
/// [`crate::metrics::statement`]'s kinds). A run past its deadline is not
/// retried: a database that did not answer in time is not asked again at
/// once.
pub(crate) async fn retry_transient<T, F, Fut>(
    deadline: Duration,
    statement: &'static str,
    transient: fn(&sqlx::Error) -> bool,
    mut op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 0u32;
    loop {
        let result = match tokio::time::timeout(deadline, op()).await {
            Ok(result) => result,
            Err(_elapsed) => {
                return Err(Error::StatementTimeout {
                    statement,
                    timeout: deadline,
                });
            }
        };
        match result {
            Ok(value) => return Ok(value),
            Err(error) if attempt < 8 && transient(&error) => {
                attempt += 1;
                count_internal_retry(statement, &error, attempt);
                let pause_ms = rand::random_range(1..=(5u64 << attempt.min(5)));
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Counts (and logs) one retry of `statement` after the transient `error`.
pub(crate) fn count_internal_retry(statement: &'static str, error: &sqlx::Error, attempt: u32) {
    INTERNAL_RETRIES.fetch_add(1, Ordering::Relaxed);
    crate::metrics::internal_retry(statement);
    tracing::debug!(
        error = error as &dyn std::error::Error,
        attempt,
        statement,
        "retrying after a transient database error"
    );
}

/// [`QueueCounts`] from `(status, count)` rows, as every backend's counts
/// query returns them.
pub(crate) fn counts(rows: Vec<(String, i64)>) -> Result<QueueCounts> {
    let mut counts = QueueCounts::default();
    for (status, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match status
            .parse::<JobStatus>()
            .map_err(crate::Error::UnknownStatus)?
        {
            JobStatus::Pending => counts.pending = n,
            JobStatus::Processing => counts.processing = n,
            JobStatus::Done => counts.done = n,
            JobStatus::Failed => counts.failed = n,
            JobStatus::Cancelled => counts.cancelled = n,
        }
    }
    Ok(counts)
}

/// Rows one prune statement deletes at most.
const PRUNE_BATCH: u32 = 1000;

/// Runs `delete` (a statement deleting at most its argument's rows) until
/// it deletes fewer than [`PRUNE_BATCH`]; returns how many it deleted.
pub(crate) async fn in_batches<F, Fut>(mut delete: F) -> Result<u64>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    loop {
        let deleted = delete(PRUNE_BATCH).await?;
        total += deleted;
        if deleted < u64::from(PRUNE_BATCH) {
            return Ok(total);
        }
    }
}

/// Which finished rows a prune deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prunable {
    /// `done` and `cancelled`.
    Finished,
    /// `failed`.
    Failed,
}

impl Prunable {
    /// The statuses it deletes.
    pub(crate) fn statuses(self) -> &'static [&'static str] {
        match self {
            Self::Finished => &["done", "cancelled"],
            Self::Failed => &["failed"],
        }
    }
}

/// Microseconds in `d`, saturated to what a signed 64-bit column holds.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A fresh base for the fencing tokens of one claim: random in `[0, 2^62)`.
///
/// Each row of the claim gets its own token, [`row_token`]`(base, id)` =
/// `base + id`, written by the claim statement itself (`lease_token = ? + id`
/// on every backend). With ids below 2^62 the sum cannot overflow.
///
/// Per-row tokens make a fence an exact `(id, token)` pair even where a
/// settle or heartbeat matches `id IN (…) AND lease_token IN (…)` as two
/// lists (MySQL, SQLite): a row whose current claim is not in the batch
/// matches only if its token equals the token of another fence of the
/// batch, `base₁ + id₁ = base₂ + id₂` for two independent random 62-bit
/// bases, which is as likely as two equal random tokens. With one token per
/// claim batch, a worker holding a stale attempt of job A (token T1) that had
/// claimed A again with job B (token T2) settled A through B's T2.
pub(crate) fn new_token_base() -> i64 {
    rand::random::<i64>() & ((1 << 62) - 1)
}

/// The fencing token the claim with `base` writes into row `id`.
pub(crate) fn row_token(base: i64, id: i64) -> i64 {
    base + id
}

/// The deadline of `migrate()` once it has its connection: a migration may
/// rewrite a table of millions of rows (one copies `jobq_jobs` once, about
/// 1 s per 100,000 rows on a small machine), and MySQL's waits up to 120 s
/// for another process's migration first.
pub(crate) const MIGRATE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// A pooled connection that sat idle at least this long is pinged before use.
#[cfg(any(feature = "mysql", feature = "postgres"))]
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pools' `before_acquire` hook: pings a connection only when it has been
/// idle for [`PING_AFTER_IDLE`], instead of sqlx's ping before every checkout,
/// a round trip that doubled the cost of a single-row enqueue. A connection
/// in steady use has just proven itself alive; one that idled across a server
/// restart is pinged, fails, and is replaced before a statement is lost on it.
#[cfg(any(feature = "mysql", feature = "postgres"))]
pub(crate) fn ping_if_idle<DB: sqlx::Database>(
    conn: &mut DB::Connection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> futures_util::future::BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if meta.idle_for >= PING_AFTER_IDLE {
            sqlx::Connection::ping(conn).await?;
        }
        Ok(true)
    })
}

/// A row to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    pub(crate) queue: String,
    pub(crate) job_name: String,
    pub(crate) payload: String,
    pub(crate) priority: i16,
    pub(crate) max_attempts: u32,
    pub(crate) run_at: RunAt,
    pub(crate) idempotency_key: Option<String>,
}

/// What a claim asks for: up to `limit` due jobs of `queue`, leased to
/// `worker` for `lease`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimRequest<'a> {
    pub(crate) queue: &'a str,
    pub(crate) limit: u32,
    pub(crate) lease: Duration,
    pub(crate) worker: &'a str,
}

/// A row this worker now holds.
#[derive(Debug, Clone)]
pub(crate) struct ClaimedJob {
    pub(crate) id: i64,
    pub(crate) job_name: String,
    pub(crate) payload: String,
    /// The attempt now starting (attempts after the claim's increment).
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) token: i64,
    /// Why the row cannot be run as stored (a column that is not UTF-8):
    /// the attempt fails without running the handler, and is not retried.
    pub(crate) unreadable: Option<String>,
    /// When it became due: its `run_at` as the claim picked it (the claim
    /// overwrites the column with the lease deadline), for the queue-wait metric.
    pub(crate) due: Option<DateTime<Utc>>,
}

impl ClaimedJob {
    /// A claimed row; `attempt` is the attempt now starting (the claim's
    /// increment included), as the database's integer type returned it.
    pub(crate) fn new(
        id: i64,
        job_name: String,
        payload: String,
        attempt: i64,
        max_attempts: i64,
        idempotency_key: Option<String>,
        token: i64,
    ) -> Self {
        Self {
            id,
            job_name,
            payload,
            attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
            max_attempts: u32::try_from(max_attempts).unwrap_or(1),
            idempotency_key,
            token,
            unreadable: None,
            due: None,
        }
    }

    /// The same job, due since `run_at` (see [`due`](Self::due)).
    pub(crate) fn due_since(mut self, run_at: DateTime<Utc>) -> Self {
        self.due = Some(run_at);
        self
    }

    /// How long it had been due when claimed, by this host's clock (zero if
    /// the database's clock is ahead); `None` if the claim did not say.
    pub(crate) fn waited(&self) -> Option<Duration> {
        let due = self.due?;
        Some((Utc::now() - due).to_std().unwrap_or(Duration::ZERO))
    }

    pub(crate) fn fence(&self) -> Fence {
        Fence {
            id: self.id,
            token: self.token,
        }
    }
}

/// The claim a settle must still match: the row id and the token written by
/// the claim. A settle whose fence no longer matches changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Fence {
    pub(crate) id: i64,
    pub(crate) token: i64,
}

/// Where a non-successful settle sends a held job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Back to `pending`, runnable after `delay`.
    Pending,
    /// To `failed`, for good.
    Failed,
}

impl Target {
    /// The status it moves a job to, as stored.
    pub(crate) fn status(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Failed => "failed",
        }
    }
}

/// A fenced move of one held job out of `processing` (other than success).
#[derive(Debug, Clone)]
pub(crate) struct Transition {
    pub(crate) fence: Fence,
    pub(crate) target: Target,
    pub(crate) delay: Duration,
    /// Give the attempt back (snooze, shutdown release).
    pub(crate) refund_attempt: bool,
    /// New `last_error`; `None` keeps the old one.
    pub(crate) error: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// How a statement starts (followed by a space or a line continuation).
    const KEYWORDS: [&str; 9] = [
        "SELECT", "UPDATE", "INSERT", "DELETE", "WITH", "SET", "CREATE", "PRAGMA", "BEGIN",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Each re-run after a transient error counts once in the process-wide
    /// counter and once under its statement kind in the metric; the final
    /// success does not count.
    #[test]
    fn a_transient_retry_is_counted_under_its_statement_kind() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let before = super::internal_retries();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            let mut failures = 2;
            let result: crate::Result<u32> = runtime.block_on(super::retry_transient(
                std::time::Duration::from_secs(5),
                crate::metrics::statement::CLAIM,
                |_| true,
                || {
                    let fail = failures > 0;
                    failures -= 1;
                    async move {
                        if fail {
                            Err(sqlx::Error::PoolTimedOut)
                        } else {
                            Ok(7)
                        }
                    }
                },
            ));
            assert_eq!(result.unwrap(), 7);
        });
        assert!(super::internal_retries() >= before + 2);
        let counted: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == crate::metrics::INTERNAL_RETRIES)
            .map(|(key, _, _, value)| {
                let labels: Vec<(String, String)> = key
                    .key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                (labels, value)
            })
            .collect();
        assert_eq!(
            counted,
            [(
                vec![("statement".to_owned(), "claim".to_owned())],
                DebugValue::Counter(2)
            )]
        );
    }

    #[test]
    fn a_url_names_its_backend_by_scheme() {
        use crate::Backend;
        for (url, backend) in [
            ("mysql://root@db/app", Some(Backend::MySql)),
            ("mariadb://root@db/app", Some(Backend::MySql)),
            ("sqlite://jobs.db", Some(Backend::Sqlite)),
            ("sqlite::memory:", Some(Backend::Sqlite)),
            ("postgres://db/app", Some(Backend::Postgres)),
            ("postgresql://db/app", Some(Backend::Postgres)),
            ("redis://db", None),
        ] {
            assert_eq!(Backend::from_url(url), backend, "{url}");
        }
    }

    /// The tests that exist only in a build without every backend.
    /// scripts/backends.sh runs `single_backend::` in each single-backend
    /// build (the default build, which CI tests, has none of them), and
    /// fails if it finds none: put every such test here.
    #[cfg(not(all(feature = "mysql", feature = "postgres", feature = "sqlite")))]
    mod single_backend {
        /// A URL of a backend left out of the build names the feature to enable.
        #[tokio::test]
        async fn a_url_of_a_compiled_out_backend_names_its_feature() {
            let url = if cfg!(not(feature = "postgres")) {
                "postgres://user:secret@db/app"
            } else if cfg!(not(feature = "mysql")) {
                "mysql://user:secret@db/app"
            } else {
                "sqlite::memory:"
            };
            let error = super::super::connect(url, &crate::ConnectOptions::new())
                .await
                .unwrap_err();
            let crate::Error::BackendNotCompiled { backend, feature } = &error else {
                panic!("{error:?}");
            };
            assert_eq!(*feature, backend.feature());
            assert!(
                error.to_string().contains(&format!("`{feature}`")),
                "{error}"
            );
        }
    }

    /// Each backend's SQL is in its own `store/<backend>/sql.rs` and nowhere
    /// else: no other source file of the crate (unit tests aside) has a
    /// string literal that starts like a statement.
    #[test]
    fn sql_lives_only_in_the_backends_sql_files() {
        let mut files = Vec::new();
        rust_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut found = Vec::new();
        for path in files {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name == "sql.rs" || name == "tests.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (at, _) in line.match_indices('"') {
                    let rest = line[at + 1..].trim_start();
                    let sql = KEYWORDS.iter().any(|kw| {
                        rest.strip_prefix(kw)
                            .is_some_and(|after| after.starts_with([' ', '\\']) || after.is_empty())
                    });
                    if sql {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "SQL outside store/<backend>/sql.rs:\n{}",
            found.join("\n")
        );
    }
}
