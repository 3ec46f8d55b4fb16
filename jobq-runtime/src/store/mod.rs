//! Where jobs are stored: one enum over the three concrete stores.
//!
//! The set of backends is closed, so [`Store`] is an enum matched in one
//! place ([`dispatch!`]) rather than a boxed trait object: no allocation per
//! call, no `async fn` in `dyn` traits, and every backend must implement every
//! operation (the compiler checks the match). Each concrete store owns its pool
//! and its SQL; nothing outside `store/` sees a dialect.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::types::{Enqueued, JobInfo, JobStatus, QueueCounts, RunAt};
use crate::{Backend, Result};

mod migrate;
pub(crate) mod mysql;
pub(crate) mod postgres;
pub(crate) mod sqlite;
mod stash;

pub(crate) use mysql::MySqlStore;
pub(crate) use postgres::PgStore;
pub(crate) use sqlite::SqliteStore;

/// A pooled connection that sat idle at least this long is pinged before use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pools' `before_acquire` hook: pings a connection only when it has been
/// idle for [`PING_AFTER_IDLE`], instead of sqlx's ping before every checkout,
/// a round trip that doubled the cost of a single-row enqueue. A connection
/// in steady use has just proven itself alive; one that idled across a server
/// restart is pinged, fails, and is replaced before a statement is lost on it.
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
        }
    }

    /// [`new`](Self::new) for a row whose text columns were read as bytes
    /// (SQLite stores whatever another program wrote: a BLOB, or text that
    /// is not UTF-8). Each is decoded as UTF-8; one that is not is decoded
    /// lossily (U+FFFD) and the job marked [`unreadable`](Self::unreadable),
    /// so that it fails on its own instead of failing the whole claim.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_bytes(
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

/// The concrete stores.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    MySql(MySqlStore),
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Runs `$body` with `$s` bound to the concrete store.
macro_rules! dispatch {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            Store::MySql($s) => $body,
            Store::Sqlite($s) => $body,
            Store::Postgres($s) => $body,
        }
    };
}

impl Store {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Self::MySql(_) => Backend::MySql,
            Self::Sqlite(_) => Backend::Sqlite,
            Self::Postgres(_) => Backend::Postgres,
        }
    }

    /// The largest payload the server takes in one statement, below jobq's
    /// own limit, with the setting that decides it: `None` when the server's
    /// limit is far beyond any payload jobq accepts.
    pub(crate) fn server_payload_limit(&self) -> Option<(usize, String)> {
        match self {
            Self::MySql(s) => Some((
                s.max_payload_bytes(),
                format!("max_allowed_packet = {} bytes", s.max_packet()),
            )),
            Self::Sqlite(_) | Self::Postgres(_) => None,
        }
    }

    /// Applies the embedded migrations; safe from many processes at once.
    pub(crate) async fn migrate(&self) -> Result<()> {
        dispatch!(self, s => s.migrate().await)
    }

    pub(crate) async fn enqueue(&self, job: &NewJob) -> Result<Enqueued> {
        dispatch!(self, s => s.enqueue(job).await)
    }

    /// Inserts a batch; results are in input order.
    pub(crate) async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>> {
        dispatch!(self, s => s.enqueue_many(jobs).await)
    }

    /// Claims up to `limit` due jobs of `queue`, ordered by priority, run_at, id.
    pub(crate) async fn claim(
        &self,
        queue: &str,
        limit: u32,
        lease: Duration,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch!(self, s => s.claim(queue, limit, lease, worker).await)
    }

    /// Deletes every row of the `which` kind that finished more than
    /// `older_than` ago, oldest first, [`PRUNE_BATCH`] rows per statement
    /// (each a short transaction); returns how many.
    pub(crate) async fn prune_all(&self, which: Prunable, older_than: Duration) -> Result<u64> {
        match self {
            Self::MySql(s) => s.prune_all(which, older_than).await,
            Self::Postgres(s) => in_batches(|limit| s.prune(which, older_than, limit)).await,
            Self::Sqlite(s) => in_batches(|limit| s.prune(which, older_than, limit)).await,
        }
    }

    /// Marks held jobs `done`; returns how many were still held.
    pub(crate) async fn complete(&self, fences: &[Fence]) -> Result<u64> {
        dispatch!(self, s => s.complete(fences).await)
    }

    /// Applies one fenced transition; `false` when the fence no longer matched.
    pub(crate) async fn transition(&self, t: &Transition) -> Result<bool> {
        dispatch!(self, s => s.transition(t).await)
    }

    /// Extends the leases of held jobs; returns the fences that are no longer held.
    /// A lease past [`MAX_DELAY`](crate::MAX_DELAY) (e.g. `extend_lease(Duration::MAX)`)
    /// is clamped to it: every backend's time arithmetic holds that.
    pub(crate) async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>> {
        let lease = lease.min(crate::MAX_DELAY);
        dispatch!(self, s => s.heartbeat(fences, lease).await)
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
        dispatch!(self, s => s.heartbeat_unlocked(fences, lease).await)
    }

    /// Returns up to `limit` expired `processing` rows of `queue` to `pending`
    /// (or `failed` when their attempts are used up); returns how many.
    pub(crate) async fn reap(&self, queue: &str, limit: u32) -> Result<u64> {
        dispatch!(self, s => s.reap(queue, limit).await)
    }

    /// Forwards the database's own wake-ups (PostgreSQL NOTIFY) for `queues`
    /// to the in-process ones until `stop`; returns at once on backends that
    /// have none. Polling stays on regardless: a lost listener never stalls a queue.
    pub(crate) async fn listen(&self, queues: &[String], stop: &CancellationToken) {
        dispatch!(self, s => s.listen(queues, stop).await)
    }

    pub(crate) async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
        dispatch!(self, s => s.job(id).await)
    }

    /// How many jobs of `queue` are in each status.
    pub(crate) async fn counts(&self, queue: &str) -> Result<QueueCounts> {
        const SQL: &str = "SELECT status, COUNT(*) FROM jobq_jobs WHERE queue = ? GROUP BY status";
        let rows: Vec<(String, i64)> = match self {
            // An ENUM with a binary collation is reported as BINARY: read it as text.
            Self::MySql(s) => {
                sqlx::query_as(&SQL.replacen("status", "CAST(status AS CHAR)", 1))
                    .bind(queue)
                    .fetch_all(s.pool())
                    .await?
            }
            Self::Sqlite(s) => sqlx::query_as(SQL).bind(queue).fetch_all(s.pool()).await?,
            Self::Postgres(s) => {
                sqlx::query_as(&SQL.replace('?', "$1"))
                    .bind(queue)
                    .fetch_all(s.pool())
                    .await?
            }
        };
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

    pub(crate) async fn cancel(&self, id: i64) -> Result<bool> {
        dispatch!(self, s => s.cancel(id).await)
    }

    pub(crate) async fn retry(&self, id: i64) -> Result<bool> {
        dispatch!(self, s => s.retry(id).await)
    }
}

static INTERNAL_RETRIES: AtomicU64 = AtomicU64::new(0);

/// How many times jobq re-ran one of its own transactions or statements after
/// a transient database error (deadlock, lock wait timeout, snapshot
/// conflict, busy database) since the process started.
pub fn internal_retries() -> u64 {
    INTERNAL_RETRIES.load(Ordering::Relaxed)
}

/// Runs `op` again (up to 8 times, with a short jittered pause) while it fails
/// with an error `transient` accepts. Only for work jobq started itself:
/// never inside a caller's transaction.
pub(crate) async fn retry_transient<T, F, Fut>(
    transient: fn(&sqlx::Error) -> bool,
    mut op: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 0u32;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt < 8 && transient(&error) => {
                attempt += 1;
                INTERNAL_RETRIES.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    attempt,
                    "retrying after a transient database error"
                );
                let pause_ms = rand::random_range(1..=(5u64 << attempt.min(5)));
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
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

/// `bytes` as text, and whether they were valid UTF-8 (if not, each bad
/// sequence is replaced by U+FFFD).
pub(crate) fn lossy_utf8(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, true),
        Err(error) => (
            String::from_utf8_lossy(error.as_bytes()).into_owned(),
            false,
        ),
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

/// Pads a list to the next power of two by repeating its first element, so a
/// statement with an IN-list is prepared for at most log2(max) list lengths
/// per connection instead of one per length.
pub(crate) fn padded<T: Copy>(items: &[T]) -> Vec<T> {
    let mut out = items.to_vec();
    if let Some(&first) = items.first() {
        out.resize(items.len().next_power_of_two(), first);
    }
    out
}

/// `?, ?, ?` with `n` placeholders.
pub(crate) fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}
