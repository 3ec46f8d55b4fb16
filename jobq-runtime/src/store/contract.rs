//! The contract every backend implements, [`BackendStore`], and the values
//! that cross it. Below the backends, which import it; above the value
//! types and errors. Policy written once for every backend (retries of
//! transient errors, deadlines, batches) is in `policy.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::filter::{Filtered, Statement};
use super::policy::Prunable;
use super::{doctor, migrate};
use crate::error::Result;
use crate::ops::{QueueFigures, StatsWindow};
use crate::options::ConnectOptions;
use crate::roster::WorkerRecord;
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, RunAt};

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
