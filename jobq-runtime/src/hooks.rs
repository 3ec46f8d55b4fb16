//! The store's operations one call each, and fault injection, for jobq's own
//! tests (the contract suite, `tests/tests/contract/`, calls every backend
//! through these; its `fencing.rs` interleaves claims, settles, heartbeats
//! and reaps of two claimers step by step; `tests/tests/claims.rs` makes
//! claims of any size); not public API. Each is a thin wrapper over one
//! method of the store, which a test then reaches without a `Worker`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::{Fence, NewJob, Target, Transition};
use crate::{Enqueue, EnqueueConnection, Enqueued, Jobq, Result};

/// A row as the store inserts it, unchecked: what `Jobq::enqueue_with`
/// builds from a job and its options once it has checked them.
#[derive(Debug, Clone)]
pub struct Row(NewJob);

impl Row {
    /// A row of job `job_name` with `payload`, where and when `options`
    /// say (by default: queue `default`, priority 0,
    /// [`DEFAULT_MAX_ATTEMPTS`](crate::DEFAULT_MAX_ATTEMPTS), due now).
    pub fn new(job_name: &str, payload: impl Into<String>, options: Enqueue) -> Self {
        Self(NewJob {
            queue: options
                .queue
                .unwrap_or_else(|| crate::DEFAULT_QUEUE.to_owned()),
            job_name: job_name.to_owned(),
            payload: payload.into(),
            priority: options.priority.unwrap_or(0),
            max_attempts: options.max_attempts.unwrap_or(crate::DEFAULT_MAX_ATTEMPTS),
            run_at: options.run_at,
            idempotency_key: options.idempotency_key,
            unique: options.unique,
            concurrency: options.concurrency,
            metadata: match options.metadata {
                Some(serde_json::Value::Object(map)) => Some(map),
                _ => None,
            },
            tags: options.tags,
        })
    }
}

/// Inserts one row (or finds the row of its key).
pub async fn enqueue(jobq: &Jobq, row: &Row) -> Result<Enqueued> {
    jobq.store().enqueue(&row.0).await
}

/// Deletes the unique keys' rows whose holders are gone, reading the whole
/// table (every prune that deletes jobs reads a bounded share of it); how
/// many.
pub async fn prune_unique(jobq: &Jobq) -> Result<u64> {
    jobq.store().prune_unique(None).await
}

/// Inserts a batch, all or nothing; results in input order.
pub async fn enqueue_many(jobq: &Jobq, rows: Vec<Row>) -> Result<Vec<Enqueued>> {
    let rows: Vec<NewJob> = rows.into_iter().map(|r| r.0).collect();
    jobq.store().enqueue_many(&rows).await
}

/// Inserts one row through the caller's connection or transaction.
pub async fn enqueue_in<'c>(
    jobq: &Jobq,
    conn: impl EnqueueConnection<'c>,
    row: &Row,
) -> Result<Enqueued> {
    jobq.store()
        .enqueue_in(conn.into_connection(), &row.0)
        .await
}

/// A claim as the store handed it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Claim {
    /// The row.
    pub id: i64,
    /// The fencing token the claim wrote.
    pub token: i64,
    /// The attempt it started.
    pub attempt: u32,
    /// The row's `max_attempts`.
    pub max_attempts: u32,
}

/// Claims up to `limit` due jobs of `queue` for `worker`.
pub async fn claim(
    jobq: &Jobq,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
) -> Result<Vec<Claim>> {
    let claimed = jobq.store().claim(queue, limit, lease, worker).await?;
    Ok(claims(claimed))
}

/// The store's claimed jobs as the tests see them.
fn claims(jobs: Vec<crate::store::ClaimedJob>) -> Vec<Claim> {
    jobs.into_iter().map(|c| claim_of(&c)).collect()
}

/// One claimed job as the tests see it.
fn claim_of(c: &crate::store::ClaimedJob) -> Claim {
    Claim {
        id: c.id,
        token: c.token,
        attempt: c.attempt,
        max_attempts: c.max_attempts,
    }
}

/// Marks held job `id` (its claim's `token`) `done` with `output` (JSON);
/// whether it still held the row.
pub async fn complete_with_output(
    jobq: &Jobq,
    (id, token): (i64, i64),
    output: &str,
) -> Result<bool> {
    jobq.store()
        .complete_with_output(Fence { id, token }, output)
        .await
}

/// Saves held job `id`'s (its claim's `token`) checkpoint `json`; whether
/// it still held the row.
pub async fn save_checkpoint(jobq: &Jobq, (id, token): (i64, i64), json: &str) -> Result<bool> {
    jobq.store()
        .save_checkpoint(Fence { id, token }, json)
        .await
}

/// Records held job `id`'s (its claim's `token`) progress `json`; whether
/// it still held the row.
pub async fn save_progress(jobq: &Jobq, (id, token): (i64, i64), json: &str) -> Result<bool> {
    jobq.store().save_progress(Fence { id, token }, json).await
}

/// Marks held job `id` (its claim's `token`) `done` with `output` on
/// `conn`, in its transaction; whether it still held the row.
pub async fn complete_in<'c>(
    conn: impl EnqueueConnection<'c>,
    (id, token): (i64, i64),
    output: Option<&str>,
) -> Result<bool> {
    crate::store::Store::complete_in(conn.into_connection(), Fence { id, token }, output).await
}

/// The checkpoint saved last for job `id`.
pub async fn load_checkpoint(jobq: &Jobq, id: i64) -> Result<Option<String>> {
    jobq.store().load_checkpoint(id).await
}

/// [`claim`] of a queue with a global concurrency limit, through its slots;
/// also whether the limit held due jobs back.
pub async fn claim_limited(
    jobq: &Jobq,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
) -> Result<(Vec<Claim>, bool)> {
    let flow = crate::store::Flow {
        slots: true,
        rate: false,
    };
    let claimed = jobq
        .store()
        .claim_limited(queue, limit, lease, worker, flow)
        .await?;
    Ok((claims(claimed.jobs), claimed.held_back))
}

/// What [`claim_flow`] took: the claims, whether the concurrency limit held
/// due jobs back, and when the rate did, how long until its next start.
pub type FlowClaim = (Vec<Claim>, bool, Option<Duration>);

/// [`claim`] of a queue with a rate (`limited`: and its global concurrency
/// limit), as a worker claims it.
pub async fn claim_flow(
    jobq: &Jobq,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
    limited: bool,
) -> Result<FlowClaim> {
    let flow = crate::store::Flow {
        slots: limited,
        rate: true,
    };
    let claimed = jobq
        .store()
        .claim_limited(queue, limit, lease, worker, flow)
        .await?;
    Ok((claims(claimed.jobs), claimed.held_back, claimed.next_start))
}

/// Marks the `(id, token)` claims `done` in one batch; how many still held.
pub async fn complete(jobq: &Jobq, fences: &[(i64, i64)]) -> Result<u64> {
    let fences: Vec<Fence> = fences
        .iter()
        .map(|&(id, token)| Fence { id, token })
        .collect();
    jobq.store().complete(&fences).await
}

/// Moves the claim `(id, token)` to `failed` or back to `pending` after
/// `delay`, refunding the attempt or not; whether it still held the row.
pub async fn transition(
    jobq: &Jobq,
    (id, token): (i64, i64),
    failed: bool,
    delay: Duration,
    refund_attempt: bool,
    error: Option<String>,
) -> Result<bool> {
    let transition = Transition {
        fence: Fence { id, token },
        target: if failed {
            Target::Failed
        } else {
            Target::Pending
        },
        delay,
        refund_attempt,
        record: error.as_ref().map(|e| ("error", e.clone())),
        error,
    };
    jobq.store().transition(&transition).await
}

/// A claim as the store handed it out, with the columns it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// Its row, token and attempt.
    pub claim: Claim,
    /// The row's `job_name`.
    pub job_name: String,
    /// The row's `payload`.
    pub payload: String,
    /// The row's `idempotency_key`.
    pub idempotency_key: Option<String>,
    /// The row's `concurrency_key`.
    pub concurrency_key: Option<String>,
}

/// [`claim`], with each row's columns.
pub async fn claim_rows(
    jobq: &Jobq,
    queue: &str,
    limit: u32,
    lease: Duration,
    worker: &str,
) -> Result<Vec<Claimed>> {
    let claimed = jobq.store().claim(queue, limit, lease, worker).await?;
    Ok(claimed
        .into_iter()
        .map(|c| Claimed {
            claim: claim_of(&c),
            job_name: c.job_name,
            payload: c.payload,
            idempotency_key: c.idempotency_key,
            concurrency_key: c.concurrency_key,
        })
        .collect())
}

/// Releases concurrency keys `keys` as a worker does after their jobs
/// settled: how many blocked jobs it unblocked.
pub async fn release_keys(jobq: &Jobq, keys: &[&str]) -> Result<u64> {
    let keys: Vec<String> = keys.iter().map(|&k| k.to_owned()).collect();
    jobq.store().release_keys(&keys).await
}

/// Takes starts from concurrency key `key`'s rate for the claimed jobs
/// `ids`, as a worker does after a claim: `(taken, until the next start)`,
/// `None` when the key has no rate.
pub async fn take_key_starts(
    jobq: &Jobq,
    key: &str,
    ids: &[i64],
) -> Result<Option<(u32, Duration)>> {
    let starts = jobq.store().take_key_starts(key, ids).await?;
    Ok(starts.map(|s| (s.taken, s.next)))
}

/// One round of the reaper's key sweep (`pages` pages of keys from where
/// the last round of this process stopped): how many jobs it unblocked.
pub async fn sweep_keys(jobq: &Jobq, pages: u32) -> Result<u64> {
    jobq.store().sweep_keys(pages).await
}

/// Renews the leases of the `(id, token)` claims; returns those no longer held.
pub async fn heartbeat(
    jobq: &Jobq,
    fences: &[(i64, i64)],
    lease: Duration,
) -> Result<Vec<(i64, i64)>> {
    let fences: Vec<Fence> = fences
        .iter()
        .map(|&(id, token)| Fence { id, token })
        .collect();
    let lost = jobq.store().heartbeat(&fences, lease).await?;
    Ok(lost.into_iter().map(|f| (f.id, f.token)).collect())
}

pub use crate::store::filter::{Bind, Kind};

/// Ids one page of a bulk action reads at most on `jobq`'s backend (the
/// limit of its [`Kind::Retry`] and [`Kind::Cancel`] statements).
pub fn bulk_page(jobq: &Jobq) -> i64 {
    i64::from(jobq.store().bulk_page())
}

/// The `kind` statement of `jobq`'s backend for `filter` (past the id
/// `after`, that way, if given), with its values in order, as the store
/// runs it (for tests that EXPLAIN it: an enqueue-time bound is found
/// in id order as the store finds it, and this panics if that fails);
/// `None` when the action applies to none of the filter's statuses.
pub async fn filtered_statement(
    jobq: &Jobq,
    kind: Kind,
    filter: &crate::JobFilter,
    after: Option<(crate::Order, i64)>,
    limit: i64,
) -> Option<(String, Vec<Bind>)> {
    use crate::store::filter::{Statuses, Where};
    let statuses = match kind {
        Kind::Retry => Statuses::of_action(Statuses::Retryable, filter.status)?,
        Kind::Cancel => Statuses::of_action(Statuses::Cancellable, filter.status)?,
        Kind::List(_) | Kind::Count => Where::new(filter).statuses,
    };
    let w = Where {
        statuses,
        after,
        ..Where::new(filter)
    };
    let w = jobq.store().windowed(w).await.expect("the window's probes");
    let statement = jobq.store().statement(kind, &w, limit);
    Some((statement.sql, statement.binds))
}

/// Tells this process's workers that the `(id, token)` claims were
/// cancelled, as `Jobq::cancel` does once its change has committed (a
/// test sends a late, stale one).
pub fn stop_cancelled(fences: &[(i64, i64)]) {
    let fences: Vec<Fence> = fences
        .iter()
        .map(|&(id, token)| Fence { id, token })
        .collect();
    crate::cancels::stop_cancelled(&fences);
}

/// Returns up to `limit` expired rows of `queue`; how many.
pub async fn reap(jobq: &Jobq, queue: &str, limit: u32) -> Result<u64> {
    jobq.store().reap(queue, limit).await
}

/// Renews the leases of the `(id, token)` claims whose rows no other
/// transaction has locked, without waiting; returns those it renewed.
pub async fn heartbeat_unlocked(
    jobq: &Jobq,
    fences: &[(i64, i64)],
    lease: Duration,
) -> Result<Vec<(i64, i64)>> {
    let fences: Vec<Fence> = fences
        .iter()
        .map(|&(id, token)| Fence { id, token })
        .collect();
    let renewed = jobq.store().heartbeat_unlocked(&fences, lease).await?;
    Ok(renewed.into_iter().map(|f| (f.id, f.token)).collect())
}

/// Cancels row `id`, telling no worker: whether it did, and the
/// `(id, token)` of the claim it ended if the row was `processing`.
pub async fn cancel(jobq: &Jobq, id: i64) -> Result<(bool, Vec<(i64, i64)>)> {
    let cancelled = jobq.store().cancel_row(id).await?;
    let held = cancelled.held.iter().map(|f| (f.id, f.token)).collect();
    Ok((cancelled.changed() == 1, held))
}

/// A worker's row in `jobq_workers`, as a worker registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRow {
    /// The row's key, new at each start.
    pub id: i64,
    /// The worker's id (its `claimed_by`).
    pub worker_id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// jobq's version.
    pub version: String,
    /// The served queues, JSON.
    pub queues: String,
    /// The jobs it can run, JSON.
    pub jobs: String,
    /// Jobs running now.
    pub running: i64,
}

/// Inserts `row`, expiring `ttl` from now.
pub async fn register_worker(jobq: &Jobq, row: &WorkerRow, ttl: Duration) -> Result<()> {
    let row = crate::store::WorkerRow {
        id: row.id,
        worker_id: &row.worker_id,
        host: &row.host,
        pid: row.pid,
        version: &row.version,
        queues: &row.queues,
        jobs: &row.jobs,
        running: row.running,
        ttl,
    };
    jobq.store().register_worker(&row).await
}

/// Refreshes worker row `id`: `running` jobs, expiring `ttl` from now;
/// `false` if the row is gone.
pub async fn refresh_worker(jobq: &Jobq, id: i64, running: i64, ttl: Duration) -> Result<bool> {
    jobq.store().refresh_worker(id, running, ttl).await
}

/// Deletes worker row `id`.
pub async fn unregister_worker(jobq: &Jobq, id: i64) -> Result<()> {
    jobq.store().unregister_worker(id).await
}

/// Deletes every expired worker row; how many.
pub async fn prune_workers(jobq: &Jobq) -> Result<u64> {
    jobq.store().prune_workers().await
}

/// A live worker's row as read, with its times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveWorker {
    /// The worker's id (its `claimed_by`).
    pub worker_id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: i64,
    /// jobq's version.
    pub version: String,
    /// The served queues, JSON.
    pub queues: String,
    /// The jobs it can run, JSON.
    pub jobs: String,
    /// Jobs running at its last refresh.
    pub running: i64,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last refresh.
    pub last_seen: DateTime<Utc>,
    /// When its row expires without another.
    pub expires_at: DateTime<Utc>,
}

/// The rows of the live workers, oldest first, and the clock they
/// were read at.
pub async fn live_workers(jobq: &Jobq) -> Result<(DateTime<Utc>, Vec<LiveWorker>)> {
    let (now, rows) = jobq.store().live_workers().await?;
    let rows = rows
        .into_iter()
        .map(|w| LiveWorker {
            worker_id: w.worker_id,
            host: w.host,
            pid: w.pid,
            version: w.version,
            queues: w.queues,
            jobs: w.jobs,
            running: w.running,
            started_at: w.started_at,
            last_seen: w.last_seen,
            expires_at: w.expires_at,
        })
        .collect();
    Ok((now, rows))
}

/// On MySQL/MariaDB, the next claim of `queue` that tops up a claim going
/// on from the last position fails its top-up as a dropped connection would.
#[cfg(feature = "mysql")]
pub fn fail_next_mysql_top_up(queue: &str) {
    crate::store::mysql::fail_next_top_up(queue);
}

/// Whether a failure armed by [`fail_next_mysql_top_up`] is still waiting.
#[cfg(feature = "mysql")]
pub fn mysql_top_up_failure_armed(queue: &str) -> bool {
    crate::store::mysql::top_up_failure_armed(queue)
}
