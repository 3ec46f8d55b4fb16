//! The contract every backend implements, [`BackendStore`], and the values
//! that cross it. Below the backends, which import it; above the value
//! types and errors.
//!
//! The contract is thin: a method that writes is *one try* of one
//! statement or one short transaction (a few, where a dialect needs them
//! for one step, as MySQL's resumed claim or its reaper), sized by its
//! arguments. What every backend does the same way around those tries is
//! written once above them, in `policy.rs`: the statement deadline of each
//! try, retries of transient errors (which the backend only recognizes,
//! [`BackendStore::is_transient`]), the chunks of a settle or renewal
//! ([`BackendStore::FENCE_CHUNK`] fences each), the batches of a prune. A
//! method that only reads runs each of its statements within the deadline
//! itself and is never retried.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::filter::{Filtered, Statement};
use super::{doctor, migrate};
use crate::error::Result;
use crate::ops::LiveFigures;
use crate::options::{ConnectOptions, Rate};
use crate::roster::WorkerRecord;
use crate::types::Backend;
use crate::types::{Enqueued, JobInfo, QueueCounts, RunAt, Schedule, ScheduleInfo};
use crate::wakeup::Watch;

/// What every backend's store does. See the [module docs](self).
///
/// Times are the database's clock where it has one (the application's on
/// SQLite); durations arrive already clamped to [`MAX_DELAY`](crate::MAX_DELAY).
/// A write is one try: `policy.rs` runs it within [`deadline`](Self::deadline)
/// and tries it again after a transient error, for statements jobq started
/// itself only, never inside a caller's transaction
/// ([`enqueue_in`](Self::enqueue_in) is never retried).
pub(crate) trait BackendStore: Sized {
    /// The sqlx pool it runs on.
    type Pool;
    /// The connection [`enqueue_in`](Self::enqueue_in) writes through.
    type Connection;
    /// What one prune statement deletes from (see [`prune`](Self::prune)).
    type PruneScope;

    /// Fences one settle or lease renewal statement takes at most: what
    /// [`complete`](Self::complete), [`heartbeat`](Self::heartbeat) and
    /// [`heartbeat_unlocked`](Self::heartbeat_unlocked) are given at once.
    const FENCE_CHUNK: usize;

    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// How long one statement or one try of a write may take (see
    /// [`within`](super::policy::within)).
    fn deadline(&self) -> Duration;

    /// Whether `error` is one a try of jobq's own may be run again after
    /// (a deadlock, a lock wait timeout, a busy database).
    fn is_transient(error: &sqlx::Error) -> bool;

    /// Opens a pool of `options.max_connections` for `url` (one of its
    /// schemes), a server's first connection within `options.connect_timeout`
    /// ([`probe`](super::policy::probe)).
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
    /// exist: [`Error::NotMigrated`](crate::Error::NotMigrated)).
    async fn applied_migrations(&self) -> Result<Vec<i64>>;

    /// Inserts one row (or finds the row of its idempotency key). One try.
    async fn enqueue(&self, job: &NewJob) -> Result<Enqueued>;

    /// Inserts a batch, all or nothing; results are in input order. One
    /// try: one statement, or one transaction of the statements its
    /// dialect cuts the batch into.
    async fn enqueue_many(&self, jobs: &[NewJob]) -> Result<Vec<Enqueued>>;

    /// Inserts one row through the caller's connection or transaction,
    /// never retried; on PostgreSQL its NOTIFY goes out when that commits.
    async fn enqueue_in(conn: &mut Self::Connection, job: &NewJob) -> Result<Enqueued>;

    /// Marks held job `fence` `done` (with `output`) in the caller's
    /// transaction; whether it was still held. Never retried.
    async fn complete_in(
        conn: &mut Self::Connection,
        fence: Fence,
        output: Option<&str>,
    ) -> Result<bool>;

    /// Claims up to `claim.limit` due jobs of `claim.queue`, ordered by
    /// priority, run_at, id, each under a token of its own
    /// ([`row_token`](super::policy::row_token)); returns them in that
    /// order. One try.
    async fn claim(&self, claim: ClaimRequest<'_>) -> Result<Vec<ClaimedJob>>;

    /// [`claim`](Self::claim) of a queue with a global concurrency limit,
    /// a rate limit, or both (`flow` says which, as the worker last read
    /// them), in one transaction. Under a limit: locks the queue's slot
    /// rows (`jobq_slots`) that no other claim has locked, reads which of
    /// their holders still hold their rows
    /// ([`SlotPlan`](super::policy::SlotPlan)), and writes each job
    /// claimed into a free slot of its own; other claims of the queue skip
    /// the locked slots meanwhile. Under a rate: locks the queue's rate row
    /// (`jobq_rates`) without waiting — another claim holding it means this
    /// one takes nothing — reads what the rate allows at the database's
    /// clock ([`gcra`](super::policy::gcra)), and moves its theoretical
    /// arrival time on by the jobs claimed. Claims at most the least of
    /// what was asked, the free slots and the starts allowed
    /// ([`Allowed`](super::policy::Allowed)). One try.
    async fn claim_limited(&self, claim: ClaimRequest<'_>, flow: Flow) -> Result<LimitedClaim>;

    /// Sets `queue`'s global concurrency limit (`Some`, already checked:
    /// 1..=[`MAX_QUEUE_LIMIT`](crate::MAX_QUEUE_LIMIT)) or removes it
    /// (`None`): its row in `jobq_limits` and its slot rows `0..limit`,
    /// dropping those above. One short transaction. One try.
    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()>;

    /// Sets `queue`'s rate (`Some`, already checked: [`Rate::problem`] is
    /// `None`) or removes it (`None`): its row in `jobq_rates`. A new row's
    /// theoretical arrival time is 0 (the burst is available at once); a
    /// changed rate keeps its row's. One statement. One try.
    async fn set_rate(&self, queue: &str, rate: Option<Rate>) -> Result<()>;

    /// Every queue that is paused, limited or rate limited, with all three
    /// (see [`controls`](super::policy::controls)).
    async fn queue_controls(&self) -> Result<Vec<QueueControl>>;

    /// Marks held jobs `done` (at most [`FENCE_CHUNK`](Self::FENCE_CHUNK),
    /// one statement); returns how many were still held.
    async fn complete(&self, fences: &[Fence]) -> Result<u64>;

    /// Marks one held job `done` with `output` (its handler's output, JSON);
    /// whether it was still held.
    async fn complete_with_output(&self, fence: Fence, output: &str) -> Result<bool>;

    /// Saves `json` as held job's checkpoint; whether it was still held.
    async fn save_checkpoint(&self, fence: Fence, json: &str) -> Result<bool>;

    /// The checkpoint saved last for job `id`, if any (a read).
    async fn load_checkpoint(&self, id: i64) -> Result<Option<String>>;

    /// Records `json` as held job's progress; whether it was still held.
    async fn save_progress(&self, fence: Fence, json: &str) -> Result<bool>;

    /// Applies one fenced transition; `false` when the fence no longer matched.
    async fn transition(&self, t: &Transition) -> Result<bool>;

    /// Extends the leases of held jobs (at most
    /// [`FENCE_CHUNK`](Self::FENCE_CHUNK), one statement, and where it can
    /// only count the rows it renewed, one read of those it did not);
    /// returns the fences no longer held.
    async fn heartbeat(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>>;

    /// Extends the leases of the held jobs among `fences` (at most
    /// [`FENCE_CHUNK`](Self::FENCE_CHUNK)) whose rows no other transaction
    /// has locked, without waiting on any lock; returns the fences it
    /// renewed. One statement or one short transaction.
    async fn heartbeat_unlocked(&self, fences: &[Fence], lease: Duration) -> Result<Vec<Fence>>;

    /// Returns up to `limit` expired `processing` rows of `queue` to
    /// `pending` (or `failed` when their attempts are used up); how many.
    /// One try.
    async fn reap(&self, queue: &str, limit: u32) -> Result<u64>;

    /// What [`prune`](Self::prune) goes through to delete every row of the
    /// `which` kind (each scope a range of an index its statement deletes
    /// from in order), read without locks.
    async fn prune_scopes(&self, which: Prunable) -> Result<Vec<Self::PruneScope>>;

    /// Deletes up to `limit` rows of `scope` that finished more than
    /// `older_than` ago, oldest first: one statement (a short transaction);
    /// how many.
    async fn prune(
        &self,
        scope: &Self::PruneScope,
        older_than: Duration,
        limit: u32,
    ) -> Result<u64>;

    /// Forwards the database's own wake-ups for `queues` to the in-process
    /// ones until `stop`; returns at once on a backend that has none.
    /// What it writes on its way out after `stop` (a MySQL waiter's row
    /// gone) it waits for, unless `give_up` fires first (the shutdown's
    /// deadline).
    ///
    /// A backend that watches for due jobs or changed controls in the
    /// database on the worker's behalf says so in `watch`.
    async fn listen(
        &self,
        queues: &[String],
        watch: &Watch,
        stop: &CancellationToken,
        give_up: &CancellationToken,
    );

    /// `job` was enqueued in a caller's transaction on `queue`: wake other
    /// processes' workers once it commits, on a backend whose wake-ups
    /// cannot be sent in the transaction itself (MySQL's).
    fn enqueued_in(&self, _job: &Enqueued, _queue: &str) {}

    /// Tells every worker process that queue controls changed or a running
    /// job was cancelled ([`crate::wakeup::CONTROL`]), after the commit.
    fn announce_control(&self);

    /// Waits until the wake-ups owed to other processes' workers (after
    /// enqueues, cancels, changed controls) have been sent, at most
    /// `within` (see [`Ringer::flush`](super::ring::Ringer::flush)).
    async fn flush_wakeups(&self, within: Duration);

    /// The row with this id, as stored.
    async fn job(&self, id: i64) -> Result<Option<JobInfo>>;

    /// How many jobs of `queue` are in each status (see
    /// [`counts`](super::policy::counts)).
    async fn counts(&self, queue: &str) -> Result<QueueCounts>;

    /// Cancels a `pending` or `processing` row: whether it did, and the
    /// claim it ended if the row was `processing`. One try.
    async fn cancel(&self, id: i64) -> Result<Cancelled>;

    /// Sends a `failed` or `cancelled` row back to `pending`, runnable now,
    /// with at least one more attempt; whether it did. One try.
    async fn retry(&self, id: i64) -> Result<bool>;

    /// The database's clock now (the application's on SQLite): the moment
    /// every figure of one `stats` call is read against.
    async fn clock(&self) -> Result<DateTime<Utc>>;

    /// Every queue with a row in `jobq_jobs`, in any status, found by
    /// skipping from one queue to the next in an index (never a scan of the
    /// rows); in no particular order.
    async fn queues_with_rows(&self) -> Result<Vec<String>>;

    /// The live rows of `queue` at `now`, per live status (see
    /// [`LiveFigures`]): one read through an index.
    async fn stats_live(&self, queue: &str, now: DateTime<Utc>) -> Result<Vec<LiveFigures>>;

    /// The `done`, `failed` and `cancelled` rows of `queue`, each status
    /// counted up to `cap`: one read through an index.
    async fn stats_finished(&self, queue: &str, cap: i64) -> Result<[i64; 3]>;

    /// The `done` and `failed` rows of `queue` finished since `since`, by
    /// minute (`(status, minute, rows)`, see
    /// [`QueueFigures::per_minute`](crate::ops::QueueFigures::per_minute)):
    /// one read through an index (after reading which priorities the queue
    /// has, where the index needs them).
    async fn stats_per_minute(
        &self,
        queue: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64, i64)>>;

    /// Marks `queue` paused (`paused = true`) or not; whether that changed
    /// it. One try.
    async fn set_paused(&self, queue: &str, paused: bool) -> Result<bool>;

    /// Every `pending` job of `queue` not due yet becomes due now; how many
    /// (`jobq_runtime::testing`'s drain with scheduled jobs). One try.
    #[cfg(feature = "testing")]
    async fn make_due(&self, queue: &str) -> Result<u64>;

    /// Inserts the row of a worker starting (or starting over after its
    /// row was deleted as expired); it expires `row.ttl` from now. One try.
    async fn register_worker(&self, row: &WorkerRow<'_>) -> Result<()>;

    /// Refreshes a worker's row: `running` jobs now, expiring `ttl` from
    /// now; `false` if the row is gone (deleted as expired). One try.
    async fn refresh_worker(&self, refresh: WorkerRefresh) -> Result<bool>;

    /// Deletes worker `id`'s row (its clean shutdown). One try.
    async fn unregister_worker(&self, id: i64) -> Result<()>;

    /// Deletes the rows of every worker whose row has expired; how many.
    /// One try.
    async fn prune_workers(&self) -> Result<u64>;

    /// Records `tick` as periodic job `name`'s last tick enqueued
    /// (`jobq_schedules`), unless a later one is recorded. One try.
    async fn record_tick(&self, name: &str, tick: DateTime<Utc>) -> Result<()>;

    /// Periodic job `name`'s last tick enqueued, if one was recorded.
    async fn last_tick(&self, name: &str) -> Result<Option<DateTime<Utc>>>;

    /// Stores `schedule` (checked), keeping its last tick and pause. One try.
    async fn put_schedule(&self, schedule: &Schedule) -> Result<()>;

    /// Pauses or resumes stored schedule `name`; `false` if there is none.
    /// One try.
    async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<bool>;

    /// Removes stored schedule `name`; `false` if there is none. One try.
    async fn remove_schedule(&self, name: &str) -> Result<bool>;

    /// The schedules kept in the database, by name; with `name`, only
    /// that one (none if it is not stored).
    async fn stored_schedules(&self, name: Option<&str>) -> Result<Vec<ScheduleInfo>>;

    /// One page of `jobq_unique`: up to `limit` key rows after `after` in
    /// key order, deleting those whose holder has been pruned (each only
    /// if it still names that holder: a key an enqueue is taking meanwhile
    /// stays). One try.
    async fn prune_unique(&self, after: &str, limit: u32) -> Result<UniquePage>;

    /// Releases concurrency keys (see the migration `jobq_keys`): in one
    /// transaction, locks the rows of `keys` (sorted, distinct), reads the
    /// front of each key's job list ([`KeyFront`]: its limit plus
    /// [`KEY_FRONT_SLACK`](super::policy::KEY_FRONT_SLACK) members), and
    /// applies the plan [`policy::key_plan`](super::policy::key_plan)
    /// makes of them: forgets the finished members, unblocks the oldest
    /// blocked jobs up to each key's limit, deletes the rows of keys left
    /// without jobs. Returns the plan it applied. One try.
    async fn release_keys(&self, keys: &[String]) -> Result<KeyPlan>;

    /// The concurrency keys of the rows `ids` that have one, distinct;
    /// with `rejoin`, first lists those rows in their keys again (a
    /// retried job, which a release forgot when it finished). One try.
    async fn keys_of(&self, ids: &[i64], rejoin: bool) -> Result<Vec<String>>;

    /// Up to `limit` keys of `jobq_keys` after `after`, in key order (the
    /// sweep's page).
    async fn key_page(&self, after: &str, limit: u32) -> Result<Vec<String>>;

    /// Sets (`Some`) or removes (`None`) concurrency key `key`'s rate; a
    /// changed rate keeps its arrival time. One try.
    async fn set_key_rate(&self, key: &str, rate: Option<Rate>) -> Result<()>;

    /// Every concurrency key with a rate, in key order (a stored rate no
    /// valid [`Rate`] has is left out).
    async fn key_rates(&self) -> Result<Vec<(String, Rate)>>;

    /// Takes starts from key `key`'s rate for the claimed jobs `ids` (in
    /// claim order), in a transaction that locks its row (takers of one
    /// key take turns), by the database's clock (the application's on
    /// SQLite): the first [`KeyStarts::taken`] of them start, and their
    /// `claimed_at` becomes that moment (when the rate let them start).
    /// `None` when the key has no rate. See
    /// [`policy::key_starts`](super::policy::key_starts). One try.
    async fn take_key_starts(&self, key: &str, ids: &[i64]) -> Result<Option<KeyStarts>>;

    /// The rows of the workers whose rows have not expired, oldest first.
    async fn live_workers(&self) -> Result<Vec<WorkerRecord>>;

    /// Its filtered statements (listing and bulk actions), from the
    /// constant pieces of its `sql.rs`.
    fn filtered(&self) -> &'static Filtered;

    /// The rows of a list statement ([`Kind::List`](super::filter::Kind::List)), in its order.
    async fn list(&self, statement: &Statement) -> Result<Vec<JobInfo>>;

    /// The count of a [`Kind::Count`](super::filter::Kind::Count) statement.
    async fn count_where(&self, statement: &Statement) -> Result<u64>;

    /// The ids of a [`Kind::Retry`](super::filter::Kind::Retry) or
    /// [`Kind::Cancel`](super::filter::Kind::Cancel) statement (one page
    /// of a bulk action's snapshot), read without locks, in its order.
    async fn ids(&self, statement: &Statement) -> Result<Vec<i64>>;

    /// One short transaction of `retry_where`: those of `ids` whose rows
    /// still meet `guard` ([`Filtered::guard`], statuses a retry applies
    /// to), locked as `locks` says (a backend without row locks ignores
    /// it), retried as [`retry`](Self::retry) retries; the ids it changed.
    /// One try.
    async fn retry_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Vec<i64>>;

    /// One short transaction of `cancel_where`, as
    /// [`retry_batch`](Self::retry_batch), cancelling as
    /// [`cancel`](Self::cancel) does. One try.
    async fn cancel_batch(
        &self,
        ids: &[i64],
        guard: &'static str,
        locks: RowLocks,
    ) -> Result<Cancelled>;

    /// Checks the server and jobq's tables for what jobq needs, in the
    /// order the report shows them (see [`doctor`]); `options` give this
    /// host's clock and the workers' lease.
    /// An error reading one check's facts makes that check fail
    /// ([`doctor::guarded`]); only a server that cannot be reached at all
    /// is an `Err`.
    async fn doctor(&self, options: doctor::DoctorOptions) -> Result<Vec<crate::ops::Check>>;

    /// Inserts workflow `flow` in one transaction of its own (see
    /// `store/flow.rs`): every job, their names, their dependencies, the
    /// jobs with a dependency `blocked`; or nothing, refused, if one job
    /// is a duplicate of a stored one. Wakes the workers of its queues.
    async fn enqueue_flow(&self, flow: &NewFlow) -> Result<Vec<Enqueued>>;

    /// [`enqueue_flow`](Self::enqueue_flow) on the caller's connection (their
    /// transaction, never retried; refused: roll it back).
    async fn enqueue_flow_in(conn: &mut Self::Connection, flow: &NewFlow) -> Result<Vec<Enqueued>>;

    /// Records the final status of the finished jobs among `ids` on the
    /// dependencies on them, once; how many it recorded. One statement.
    async fn flow_settle(&self, ids: &[i64]) -> Result<u64>;

    /// The `blocked` dependents of `ids` (`of`), or the `blocked` jobs
    /// among `ids`, with whether each is doomed and ready. One statement.
    async fn flow_dependents(&self, ids: &[i64], of: bool) -> Result<Vec<Dependent>>;

    /// Makes the `blocked` jobs `unblock` (id, queue) `pending` and cancels the
    /// `blocked` jobs `cancel` with `last_error` `why`, and wakes the
    /// workers of the queues it made jobs `pending` in. One transaction.
    async fn flow_move(&self, unblock: &[(i64, String)], cancel: &[i64], why: &str) -> Result<()>;

    /// The sweep's statements: records every unrecorded outcome of a
    /// finished or deleted dependency, then the `blocked` jobs a release
    /// should have moved (at most 500).
    async fn flow_stuck(&self) -> Result<Vec<i64>>;

    /// Reads a page of workflow jobs after id `after` and forgets the
    /// names and dependencies of those whose rows are gone; the last id
    /// read (`None` at the end) and how many it forgot.
    async fn flow_forget(&self, after: i64) -> Result<(Option<i64>, u64)>;

    /// Workflow `workflow`'s jobs and dependencies.
    async fn flow_read(&self, workflow: &str) -> Result<FlowRows>;

    /// Inserts `batch`'s jobs in one transaction of its own (see
    /// `store/batch.rs`), or nothing, refused. Wakes the workers of its
    /// queues.
    async fn enqueue_batch(&self, batch: &NewBatch) -> Result<BatchInsert>;

    /// [`enqueue_batch`](Self::enqueue_batch) on the caller's connection
    /// (their transaction, never retried; refused: roll it back).
    async fn enqueue_batch_in(conn: &mut Self::Connection, batch: &NewBatch)
    -> Result<BatchInsert>;

    /// Closes batch `id`: `None` if there is no such batch, else whether
    /// this call closed it. One statement (and a read if it changed nothing).
    async fn batch_close(&self, id: &str) -> Result<Option<bool>>;

    /// Records the outcome of the ended batch jobs among `ids` (their
    /// final status, `deleted` for one whose row is gone) on their batch
    /// rows, once, and counts them on their batches' rows; how many it
    /// recorded. One short transaction (see `store/batch.rs`).
    async fn batch_settle(&self, ids: &[i64]) -> Result<u64>;

    /// The `blocked` callbacks `of`, with their batches' state. One
    /// statement, a read that sees every write committed before it.
    async fn batch_callbacks(&self, of: CallbacksOf<'_>) -> Result<Vec<Callback>>;

    /// The batch sweep's statements: records every unrecorded outcome of
    /// a finished or deleted batch job, then the `blocked` callbacks a
    /// release should have moved (at most 500).
    async fn batch_stuck(&self) -> Result<Vec<i64>>;

    /// Forgets up to 100 closed batches whose jobs' rows are all gone; how
    /// many.
    async fn batch_forget(&self) -> Result<u64>;

    /// Batch `id` as stored, if it is.
    async fn batch_read(&self, id: &str) -> Result<Option<BatchRows>>;

    /// The jobs of batch `id` that have not ended.
    async fn batch_unfinished(&self, id: &str) -> Result<Vec<i64>>;

    /// The task names and outputs of job `job`'s dependencies.
    async fn flow_outputs(&self, job: i64) -> Result<Vec<(String, Option<String>)>>;
}

/// What one page of [`BackendStore::prune_unique`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UniquePage {
    /// The last key of a full page (more may follow); `None` at the end.
    pub(crate) next: Option<String>,
    /// Key rows deleted.
    pub(crate) deleted: u64,
}

impl UniquePage {
    /// The page of `rows` (`(key, holder, whether the holder is gone)`,
    /// in key order) read with `limit`, having deleted `deleted` of them.
    pub(crate) fn of(rows: &[(String, i64, bool)], limit: u32, deleted: u64) -> Self {
        let full = rows.len() >= limit as usize;
        Self {
            next: rows.last().filter(|_| full).map(|(key, _, _)| key.clone()),
            deleted,
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

/// What a cancel changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cancelled {
    /// The ids of the rows it cancelled.
    pub(crate) ids: Vec<i64>,
    /// The claims of the `processing` rows among them: the attempts whose
    /// workers must stop.
    pub(crate) held: Vec<Fence>,
}

impl Cancelled {
    /// From the `(id, lease token before the cancel)` of each row a cancel
    /// changed.
    pub(crate) fn of_rows(rows: &[(i64, Option<i64>)]) -> Self {
        Self {
            ids: rows.iter().map(|&(id, _)| id).collect(),
            held: rows
                .iter()
                .filter_map(|&(id, token)| token.map(|token| Fence { id, token }))
                .collect(),
        }
    }

    /// How many rows it cancelled.
    pub(crate) fn changed(&self) -> u64 {
        self.ids.len() as u64
    }
}

/// How a bulk action's batch treats a row another transaction holds: its
/// first pass skips it (waiting on one row would hold the batch's others),
/// a second pass over the rows the first left out waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowLocks {
    /// `FOR UPDATE SKIP LOCKED`.
    Skip,
    /// `FOR UPDATE`: within the statement deadline.
    Wait,
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

impl<'a> WorkerRow<'a> {
    /// `query` with the row's values as every backend's statement that
    /// registers a worker takes them first: id, worker id, host, pid,
    /// version, queues, jobs, running (its expiry, dialect, follows).
    pub(crate) fn bind_identity<'q, DB>(
        &self,
        query: sqlx::query::Query<'q, DB, DB::Arguments<'q>>,
    ) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
    where
        'a: 'q,
        DB: sqlx::Database,
        i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
        &'a str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    {
        query
            .bind(self.id)
            .bind(self.worker_id)
            .bind(self.host)
            .bind(self.pid)
            .bind(self.version)
            .bind(self.queues)
            .bind(self.jobs)
            .bind(self.running)
    }
}

/// A worker's refresh of its row (see [`BackendStore::refresh_worker`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerRefresh {
    /// The row's key ([`WorkerRow::id`]).
    pub(crate) id: i64,
    /// Jobs running now.
    pub(crate) running: i64,
    /// How long the row lives from now without another refresh.
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
    /// The key: an idempotency key (taken while its row exists, in
    /// `idempotency_key`), or with `unique` a unique key (taken as
    /// [`Unique`](jobq_core::Unique) says, in `jobq_unique`; the row keeps
    /// it in `unique_key`).
    pub(crate) idempotency_key: Option<String>,
    pub(crate) unique: Option<jobq_core::Unique>,
    /// The concurrency key and its limit: at most that many of the key's
    /// jobs hold it (`pending` or `processing`); the others are `blocked`.
    pub(crate) concurrency: Option<(String, u32)>,
    /// Its metadata (a JSON object), as middleware and the checks see it.
    pub(crate) metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Its tags, each once.
    pub(crate) tags: Vec<String>,
}

impl NewJob {
    /// Neither an idempotency key nor a concurrency key nor metadata or
    /// tags: nothing to check, lock or attach, so it may go in a plain
    /// multi-row INSERT.
    #[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn plain(&self) -> bool {
        self.idempotency_key.is_none() && self.concurrency.is_none() && !self.attached()
    }

    /// Whether it has metadata or tags: the backends then insert it and
    /// write them ([`Attached`]) in one transaction (a savepoint of the
    /// caller's), jobs without either as before.
    pub(crate) fn attached(&self) -> bool {
        self.metadata.is_some() || !self.tags.is_empty()
    }

    /// Its metadata and tags as stored: JSON texts (`None` for none).
    pub(crate) fn attached_json(&self) -> Attached {
        Attached {
            metadata: self
                .metadata
                .as_ref()
                .map(|m| serde_json::Value::Object(m.clone()).to_string()),
            tags: (!self.tags.is_empty())
                .then(|| serde_json::Value::from(self.tags.clone()).to_string()),
        }
    }

    /// The unique key and its rules, if the job is unique by state or period.
    pub(crate) fn unique_key(&self) -> Option<(&str, jobq_core::Unique)> {
        self.idempotency_key.as_deref().zip(self.unique)
    }
}

/// A job's metadata and tags as its row stores them (JSON texts).
#[derive(Debug, Clone, Default)]
pub(crate) struct Attached {
    pub(crate) metadata: Option<String>,
    pub(crate) tags: Option<String>,
}

/// What a key's rate gave a claim's jobs of that key (see
/// [`BackendStore::take_key_starts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyStarts {
    /// Jobs that may start now.
    pub(crate) taken: u32,
    /// How long until the rate allows the next start, after these.
    pub(crate) next: std::time::Duration,
    /// The rate's interval: one start per `interval` on average.
    pub(crate) interval: std::time::Duration,
}

impl KeyStarts {
    /// When the `n`-th (from 0) job the rate had no start for may start,
    /// from now: the starts after `next`, one interval apart.
    pub(crate) fn later(&self, n: u32) -> std::time::Duration {
        self.next.saturating_add(self.interval.saturating_mul(n))
    }
}

/// One key's row and the front of its job list as a release read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyFront {
    pub(crate) key: String,
    /// The key's limit (its row's `max_running`).
    pub(crate) limit: u32,
    /// The first members in enqueue order, at most the read's `front`.
    pub(crate) members: Vec<KeyMember>,
    /// Whether the read stopped at `front` members: more may follow.
    pub(crate) truncated: bool,
}

/// A job listed in its key, and where its row is (`None`: gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMember {
    pub(crate) job_id: i64,
    pub(crate) status: Option<crate::JobStatus>,
}

/// What a release does (see [`BackendStore::release_keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPlan {
    /// Members to forget: `(key, job id)` of finished or deleted jobs.
    pub(crate) forget: Vec<(String, i64)>,
    /// Blocked jobs to make `pending`.
    pub(crate) unblock: Vec<i64>,
    /// Keys left without jobs: their rows are deleted.
    pub(crate) empty: Vec<String>,
    /// Keys whose front was all finished members and may have room for
    /// blocked jobs past it: released again.
    pub(crate) again: Vec<String>,
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

/// Which of a queue's limits a [`claim_limited`](BackendStore::claim_limited)
/// applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flow {
    /// Its global concurrency limit: the claim takes free slots.
    pub(crate) slots: bool,
    /// Its rate: the claim spends starts.
    pub(crate) rate: bool,
}

/// What a [`claim_limited`](BackendStore::claim_limited) took.
#[derive(Debug, Clone, Default)]
pub(crate) struct LimitedClaim {
    /// The jobs claimed, each holding a slot (under a limit) and having
    /// spent a start (under a rate).
    pub(crate) jobs: Vec<ClaimedJob>,
    /// Whether the concurrency limit may have held due jobs back: the
    /// claim took as many jobs as there were free slots, fewer than it was
    /// asked for (more may be due: a claim cannot tell without reading past
    /// its limit), or found no free slot while a job was due.
    pub(crate) held_back: bool,
    /// When the rate may have held due jobs back (the same way, by the
    /// starts it allowed), how long after the claim the rate allows the
    /// next start: zero when another claim held the rate's row (try again
    /// soon). `None` when the rate held nothing back.
    pub(crate) next_start: Option<Duration>,
}

/// How a queue is steered from the database: paused, limited, rate
/// limited, or any of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueControl {
    pub(crate) queue: String,
    /// Claims nothing while set ([`BackendStore::set_paused`]).
    pub(crate) paused: bool,
    /// At most this many of its jobs `processing` at once, across every
    /// worker ([`BackendStore::set_limit`]).
    pub(crate) limit: Option<u32>,
    /// At most this many starts per period, across every worker
    /// ([`BackendStore::set_rate`]).
    pub(crate) rate: Option<Rate>,
    /// The rate's theoretical arrival time as read (µs, the database's
    /// clock), for the stats; it moves with every claim, so the workers'
    /// reader drops it before comparing controls.
    pub(crate) tat: Option<i64>,
}

/// A slot row of a limited queue as a limited claim locked it: its number
/// and the attempt written into it last (`None` if none ever was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) slot: i32,
    pub(crate) holder: Option<Fence>,
}

impl Slot {
    /// From a slot row's `(slot, job_id, lease_token)`.
    pub(crate) fn of_row((slot, job_id, token): (i32, Option<i64>, Option<i64>)) -> Self {
        Self {
            slot,
            holder: job_id.zip(token).map(|(id, token)| Fence { id, token }),
        }
    }
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
    /// Its concurrency key: when the attempt leaves the key (success,
    /// failed for good, cancelled), the worker releases the key.
    pub(crate) concurrency_key: Option<String>,
    pub(crate) token: i64,
    /// Why the row cannot be run as stored (a column that is not UTF-8):
    /// the attempt fails without running the handler, and is not retried.
    pub(crate) unreadable: Option<String>,
    /// When it became due: its `run_at` as the claim picked it (the claim
    /// overwrites the column with the lease deadline), for the queue-wait metric.
    pub(crate) due: Option<DateTime<Utc>>,
    /// Its metadata (JSON text), if any.
    pub(crate) metadata: Option<String>,
    /// Its tags (a JSON array), if any.
    pub(crate) tags: Option<String>,
}

impl ClaimedJob {
    /// What its settle for good is followed by, if anything (its metadata
    /// says so, see `store/flow.rs` and `store/batch.rs`).
    pub(crate) fn releases(&self) -> Option<Releases> {
        let metadata = self.metadata.as_deref()?;
        let releases = Releases {
            flow: metadata.contains(DEPENDENTS_MARK),
            batch: metadata.contains(BATCH_MARK),
        };
        (releases.flow || releases.batch).then_some(releases)
    }

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
            concurrency_key: None,
            token,
            unreadable: None,
            due: None,
            metadata: None,
            tags: None,
        }
    }

    /// The same job, with its metadata and tags as stored (JSON texts).
    pub(crate) fn attached(mut self, metadata: Option<String>, tags: Option<String>) -> Self {
        self.metadata = metadata;
        self.tags = tags;
        self
    }

    /// The same job, holding `key` (see [`concurrency_key`](Self::concurrency_key)).
    pub(crate) fn keyed(mut self, key: Option<String>) -> Self {
        self.concurrency_key = key;
        self
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
    /// The ended attempt's entry in the job's history (`outcome`,
    /// message); `None` records nothing (a release, a job sent back before
    /// it started).
    pub(crate) record: Option<(&'static str, String)>,
}

/// The longest message an entry of the history keeps, in bytes (a longer
/// one is cut at a character boundary, with `…`); `last_error` keeps the
/// whole of the latest.
pub(crate) const HISTORY_MESSAGE_MAX: usize = 2_000;

/// `message` as a history entry keeps it.
pub(crate) fn history_message(message: &str) -> String {
    if message.len() <= HISTORY_MESSAGE_MAX {
        return message.to_owned();
    }
    let mut end = HISTORY_MESSAGE_MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// A workflow to insert: its id, its jobs with their task names, and its
/// dependencies as places in `jobs` (`job`, `on`, whether `job` runs
/// however `on` ends).
#[derive(Debug, Clone)]
pub(crate) struct NewFlow {
    pub(crate) id: String,
    pub(crate) jobs: Vec<(String, NewJob)>,
    pub(crate) edges: Vec<(usize, usize, bool)>,
}

impl NewFlow {
    /// The JSON arrays its statements take once its jobs have ids: the
    /// names (`[job_id, workflow, task]`), the dependencies (`[job_id,
    /// depends_on, run_anyway]`) and the jobs to hold (those with a
    /// dependency).
    pub(crate) fn rows(&self, enqueued: &[Enqueued]) -> (String, String, Vec<i64>) {
        let names: Vec<serde_json::Value> = self
            .jobs
            .iter()
            .zip(enqueued)
            .map(|((task, _), e)| serde_json::json!([e.id, self.id, task]))
            .collect();
        let edges: Vec<serde_json::Value> = self
            .edges
            .iter()
            .map(|&(job, on, anyway)| {
                serde_json::json!([enqueued[job].id, enqueued[on].id, i32::from(anyway)])
            })
            .collect();
        let mut hold: Vec<i64> = self
            .edges
            .iter()
            .map(|&(job, _, _)| enqueued[job].id)
            .collect();
        hold.sort_unstable();
        hold.dedup();
        (
            serde_json::Value::from(names).to_string(),
            serde_json::Value::from(edges).to_string(),
            hold,
        )
    }

    /// Refuses a workflow one of whose jobs was a duplicate of a stored
    /// job (its idempotency key): a workflow takes new jobs only.
    pub(crate) fn check(&self, enqueued: &[Enqueued]) -> Result<()> {
        match self.jobs.iter().zip(enqueued).find(|(_, e)| e.duplicate) {
            Some(((task, _), e)) => Err(crate::error::InvalidArgument::Workflow(format!(
                "task {task:?} is a duplicate of stored job {} (its idempotency key): a workflow takes new jobs only, and none of this one was stored",
                e.id
            ))
            .into()),
            None => Ok(()),
        }
    }
}

/// A batch's jobs to insert, and what to do with the batch: create it
/// (refused if its id is taken) or add to it (refused unless it is open),
/// then close it or not. Each job has its role: `job` (one of the batch's
/// jobs) or a callback's (`finish`, `success`, `failure`), stored `blocked`.
#[derive(Debug, Clone)]
pub(crate) struct NewBatch {
    pub(crate) id: String,
    pub(crate) create: bool,
    pub(crate) close: bool,
    pub(crate) jobs: Vec<(&'static str, NewJob)>,
}

/// The role of a batch's own jobs (see [`NewBatch`]).
pub(crate) const BATCH_JOB: &str = "job";

impl NewBatch {
    /// How many of its jobs are the batch's own (not callbacks).
    pub(crate) fn members(&self) -> i64 {
        self.jobs
            .iter()
            .filter(|(role, _)| *role == BATCH_JOB)
            .count() as i64
    }

    /// The JSON array of its rows once its jobs have ids (`[job_id, batch,
    /// role]`), and the callbacks to hold.
    pub(crate) fn rows(&self, enqueued: &[Enqueued]) -> (String, Vec<i64>) {
        let rows: Vec<serde_json::Value> = self
            .jobs
            .iter()
            .zip(enqueued)
            .map(|((role, _), e)| serde_json::json!([e.id, self.id, role]))
            .collect();
        let mut hold: Vec<i64> = self
            .jobs
            .iter()
            .zip(enqueued)
            .filter(|((role, _), _)| *role != BATCH_JOB)
            .map(|(_, e)| e.id)
            .collect();
        hold.sort_unstable();
        (serde_json::Value::from(rows).to_string(), hold)
    }

    /// Refuses a batch one of whose jobs was a duplicate of a stored job
    /// (its idempotency key): a batch takes new jobs only.
    pub(crate) fn check(&self, enqueued: &[Enqueued]) -> Result<()> {
        match enqueued.iter().find(|e| e.duplicate) {
            Some(e) => Err(crate::error::InvalidArgument::Batch(format!(
                "a job is a duplicate of stored job {} (its idempotency key): a batch takes new jobs only, and none of these was stored",
                e.id
            ))
            .into()),
            None => Ok(()),
        }
    }
}

/// What a batch insert did: stored its jobs, or refused (why).
#[derive(Debug)]
pub(crate) enum BatchInsert {
    Stored(Vec<Enqueued>),
    Refused(String),
}

/// A `blocked` callback of a batch, with its batch's state, as a release
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Callback {
    pub(crate) id: i64,
    pub(crate) queue: String,
    /// `finish`, `success` or `failure`.
    pub(crate) role: String,
    /// The batch is closed to additions.
    pub(crate) closed: bool,
    /// A job of the batch has no outcome recorded (it may still run).
    pub(crate) open: bool,
    /// A job of the batch ended failed, cancelled or deleted.
    pub(crate) failed: bool,
}

/// Which batch callbacks a read evaluates.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallbacksOf<'a> {
    /// Those of the batches of these jobs.
    Jobs(&'a [i64]),
    /// These callbacks.
    Callbacks(&'a [i64]),
    /// Those of this batch.
    Batch(&'a str),
}

/// A batch as stored: closed or not, how many jobs it was given, how many
/// have each (recorded outcome, `open` until recorded; status: `None` once
/// the row is gone), and its callbacks (id, role, status).
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchRows {
    pub(crate) closed: bool,
    pub(crate) jobs: i64,
    pub(crate) counts: Vec<(Option<String>, Option<String>, i64)>,
    pub(crate) callbacks: Vec<(i64, String, Option<String>)>,
}

/// A `blocked` job that depends on settled ones, as a release reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dependent {
    pub(crate) id: i64,
    pub(crate) queue: String,
    /// A dependency it does not run after ended failed, cancelled or gone.
    pub(crate) doomed: bool,
    /// Every dependency has ended.
    pub(crate) ready: bool,
}

/// A workflow as stored: its jobs (id, task, status, `None` once pruned)
/// and its dependencies (job, depends on, runs anyway).
#[derive(Debug, Clone, Default)]
pub(crate) struct FlowRows {
    pub(crate) jobs: Vec<(i64, String, Option<String>)>,
    pub(crate) edges: Vec<(i64, i64, bool)>,
}

/// What a job's settle for good releases: the dependents of its workflow,
/// the callbacks of its batch, or both (a job of both a workflow and a
/// batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Releases {
    /// Jobs of its workflow depend on it.
    pub(crate) flow: bool,
    /// It is one of a batch's jobs.
    pub(crate) batch: bool,
}

/// The settled jobs whose releases are owed, by what they release: the
/// argument of `Store::release_dependents`.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    /// Jobs with dependents in a workflow.
    pub(crate) flows: Vec<i64>,
    /// Jobs of a batch.
    pub(crate) batches: Vec<i64>,
}

impl Settled {
    /// Job `id` alone.
    pub(crate) fn of(id: i64, releases: Releases) -> Self {
        let mut settled = Self::default();
        settled.push(id, releases);
        settled
    }

    /// Job `id`, for what it releases.
    pub(crate) fn push(&mut self, id: i64, releases: Releases) {
        if releases.flow {
            self.flows.push(id);
        }
        if releases.batch {
            self.batches.push(id);
        }
    }

    /// Jobs `ids` for both (an operator's cancel: what each is part of is not read).
    pub(crate) fn both(ids: &[i64]) -> Self {
        Self {
            flows: ids.to_vec(),
            batches: ids.to_vec(),
        }
    }

    /// Whether nothing is owed.
    pub(crate) fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.batches.is_empty()
    }

    /// How many jobs (one counted twice if it is of both).
    pub(crate) fn len(&self) -> usize {
        self.flows.len() + self.batches.len()
    }
}

/// The metadata key of a batch's job: its batch's id.
pub(crate) const BATCH_KEY: &str = "jobq.batch";
/// How [`BATCH_KEY`] shows in a job's metadata text (see [`DEPENDENTS_MARK`]).
pub(crate) const BATCH_MARK: &str = "\"jobq.batch\"";
/// The metadata key of a batch's callback: its batch's id.
pub(crate) const CALLBACK_OF_KEY: &str = "jobq.callback_of";
/// The metadata key of a batch's callback: when it runs (`finish`,
/// `success`, `failure`).
pub(crate) const CALLBACK_KEY: &str = "jobq.callback";
/// The metadata key of a workflow's job: its workflow's id.
pub(crate) const WORKFLOW_KEY: &str = "jobq.workflow";
/// The metadata key of a workflow's job: its task name.
pub(crate) const TASK_KEY: &str = "jobq.task";
/// The metadata key of a workflow's job that others depend on: how many.
pub(crate) const DEPENDENTS_KEY: &str = "jobq.dependents";
/// How [`DEPENDENTS_KEY`] shows in a job's metadata text, for a look
/// without parsing it (a job that only seems to have dependents costs a
/// release that finds none).
pub(crate) const DEPENDENTS_MARK: &str = "\"jobq.dependents\"";
