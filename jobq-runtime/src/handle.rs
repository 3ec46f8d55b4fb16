//! The `Jobq` handle: connect, migrate, enqueue, inspect.

use std::sync::Arc;
use std::time::Duration;

use jobq_core::Job;

use crate::connection::EnqueueConnection;
use crate::error::{Error, InvalidArgument, Result};
use crate::ops::{Cursor, DoctorReport, JobFilter, JobPage, MAX_PAGE_LEN, Page, Stats};
use crate::options::{
    ConnectOptions, DEFAULT_MAX_PAYLOAD_BYTES, MAX_DELAY, MAX_JOB_NAME_LEN, MAX_KEY_LEN,
    MAX_QUEUE_LEN,
};
use crate::roster::{self, JobKind, PublishedJob, WorkerInfo};
use crate::seam::{EnqueueLayer, EnqueueLayers};
use crate::store::filter::{Statuses, Where};
use crate::store::{self, NewJob, Prunable, Store};
use crate::types::Backend;
use crate::types::{Enqueue, Enqueued, JobInfo, QueueCounts, RunAt, Schedule, ScheduleInfo};
use crate::wakeup;

/// A cheap-to-clone handle on one database's jobs.
///
/// ```no_run
/// # async fn demo() -> jobq_runtime::Result<()> {
/// let jobq = jobq_runtime::Jobq::connect("sqlite://jobs.db").await?;
/// jobq.migrate().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Jobq {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    max_payload_bytes: usize,
    /// Shared by the handles `with_max_payload_bytes` makes of this one.
    gauges: Arc<crate::metrics::Gauges>,
    /// What every row goes through before it is checked and stored (none:
    /// one branch per row).
    enqueue_layers: EnqueueLayers,
}

impl Jobq {
    /// Connects to `mysql://`/`mariadb://`, `sqlite://` (or `sqlite::memory:`)
    /// or `postgres://`/`postgresql://`, building a pool of 10 connections.
    /// A URL of a backend whose Cargo feature is off is refused with
    /// [`Error::BackendNotCompiled`], naming the feature.
    ///
    /// Its first connection is opened within 5 s, and a refusal reported
    /// as such (see [`ConnectOptions`]).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with_options(url, ConnectOptions::new()).await
    }

    /// Like [`connect`](Self::connect) with a pool of `max_connections`.
    pub async fn connect_with(url: &str, max_connections: u32) -> Result<Self> {
        Self::connect_with_options(url, ConnectOptions::new().max_connections(max_connections))
            .await
    }

    /// Like [`connect`](Self::connect) with the pool size and connect
    /// timeout of `options`.
    pub async fn connect_with_options(url: &str, options: ConnectOptions) -> Result<Self> {
        Ok(Self::new(store::connect(url, &options).await?))
    }

    pub(crate) fn new(store: Store) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
                gauges: Arc::default(),
                enqueue_layers: EnqueueLayers::default(),
            }),
        }
    }

    /// The same handle with another payload size limit.
    ///
    /// On MySQL/MariaDB the server's own limit also applies: a payload that
    /// cannot fit in one statement of `max_allowed_packet` bytes (as read when
    /// the handle connected) is refused at enqueue with an error naming it,
    /// and `enqueue_many` splits its INSERTs so each fits.
    #[must_use]
    pub fn with_max_payload_bytes(self, max_payload_bytes: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                store: self.inner.store.clone(),
                max_payload_bytes,
                gauges: Arc::clone(&self.inner.gauges),
                enqueue_layers: self.inner.enqueue_layers.clone(),
            }),
        }
    }

    /// The same handle with another statement deadline: how long one
    /// statement or short transaction of jobq's may take (see
    /// [`ConnectOptions::statement_timeout`]; the default is
    /// [`DEFAULT_STATEMENT_TIMEOUT`](crate::DEFAULT_STATEMENT_TIMEOUT)). Workers built on the new handle use
    /// it too.
    #[must_use]
    pub fn with_statement_timeout(self, timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                store: self.inner.store.with_deadline(timeout),
                max_payload_bytes: self.inner.max_payload_bytes,
                gauges: Arc::clone(&self.inner.gauges),
                enqueue_layers: self.inner.enqueue_layers.clone(),
            }),
        }
    }

    /// The same handle with `layer` after its enqueue layers: every row an
    /// enqueue of the new handle stores goes through it first (see
    /// [`EnqueueLayer`](crate::middleware::EnqueueLayer): it may change the
    /// row, add metadata and tags, or refuse it). Workers built on the new
    /// handle enqueue their cron ticks through it too; the handle it was
    /// made from keeps its own layers.
    #[must_use]
    pub fn with_enqueue_layer(self, layer: impl EnqueueLayer) -> Self {
        let mut enqueue_layers = self.inner.enqueue_layers.clone();
        enqueue_layers.push(Arc::new(layer));
        Self {
            inner: Arc::new(Inner {
                store: self.inner.store.clone(),
                max_payload_bytes: self.inner.max_payload_bytes,
                gauges: Arc::clone(&self.inner.gauges),
                enqueue_layers,
            }),
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The stats gauges' bookkeeping, shared by this handle's clones.
    pub(crate) fn gauges(&self) -> &crate::metrics::Gauges {
        &self.inner.gauges
    }

    /// Which database this handle stores jobs in.
    pub fn backend(&self) -> Backend {
        self.inner.store.backend()
    }

    /// Waits until the wake-ups this handle owes the workers of other
    /// processes — after its enqueues, cancels, pauses and changed limits —
    /// have been sent, at most the statement deadline.
    ///
    /// They go out right after each commit from a task of the handle's, so
    /// a process that enqueues and exits at once (a script, a one-off
    /// command) could end before they do: call this last. Without it those
    /// workers still find the jobs, at their next poll. Also waits for a
    /// job enqueued in a transaction (`enqueue_in`) to be seen committed,
    /// up to two seconds. A handle whose wake-ups are sent returns at once.
    ///
    /// ```no_run
    /// # async fn example(jobq: jobq_runtime::Jobq) -> jobq_runtime::Result<()> {
    /// use jobq_runtime::Enqueue;
    /// jobq.enqueue_json("send_welcome", r#"{"user_id": 7}"#, Enqueue::new()).await?;
    /// jobq.flush().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn flush(&self) {
        self.store().flush_wakeups().await;
    }

    /// Creates or upgrades the `jobq_jobs` table. Idempotent, and safe to run
    /// from many processes at once (the migrator takes a database lock).
    pub async fn migrate(&self) -> Result<()> {
        self.store().migrate().await
    }

    /// Deletes the `done` and `cancelled` jobs that finished more than
    /// `older_than` ago (by `finished_at`, the database's clock; the
    /// application's on SQLite), oldest first, 1,000 per statement, reading
    /// only the rows it deletes; returns how many. Their idempotency keys are free again afterwards. A worker
    /// can do this on a schedule: [`WorkerBuilder::prune_finished_after`](crate::WorkerBuilder::prune_finished_after).
    pub async fn prune_finished(&self, older_than: Duration) -> Result<u64> {
        self.store().prune_all(Prunable::Finished, older_than).await
    }

    /// Deletes the `failed` jobs that failed more than `older_than` ago, as
    /// [`prune_finished`](Self::prune_finished) does the finished ones.
    pub async fn prune_failed(&self, older_than: Duration) -> Result<u64> {
        self.store().prune_all(Prunable::Failed, older_than).await
    }

    /// Stores a job to run as soon as a worker is free.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future before it completes may or may
    /// not have stored the job (the statement may already have reached the
    /// database, which commits it whether or not the reply is read). To
    /// enqueue again after a drop without risking a second row, enqueue with
    /// an idempotency key; the same holds for every `enqueue*` call.
    pub async fn enqueue<J: Job>(&self, job: J) -> Result<Enqueued> {
        self.enqueue_with(job, Enqueue::new()).await
    }

    /// Stores a job with options (delay, priority, queue, attempts, key).
    ///
    /// # Cancel safety
    /// As [`enqueue`](Self::enqueue)'s.
    pub async fn enqueue_with<J: Job>(&self, job: J, options: Enqueue) -> Result<Enqueued> {
        let row = self.row(&job, options)?;
        let enqueued = self.store().enqueue(&row).await?;
        count_enqueued::<J>(&row.queue, &[enqueued]);
        wakeup::notify(&row.queue);
        Ok(enqueued)
    }

    /// Stores many jobs in as few round trips as the backend allows; results in input order.
    ///
    /// # Cancel safety
    /// As [`enqueue`](Self::enqueue)'s, for the batch as a whole: it is
    /// stored whole or not at all, so a dropped future left either every job
    /// or none.
    pub async fn enqueue_many<J: Job>(
        &self,
        jobs: impl IntoIterator<Item = J>,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_many_with(jobs.into_iter().map(|job| (job, Enqueue::new())))
            .await
    }

    /// [`enqueue_many`](Self::enqueue_many) with options per job.
    pub async fn enqueue_many_with<J: Job>(
        &self,
        jobs: impl IntoIterator<Item = (J, Enqueue)>,
    ) -> Result<Vec<Enqueued>> {
        let rows = jobs
            .into_iter()
            .map(|(job, options)| self.row(&job, options))
            .collect::<Result<Vec<_>>>()?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let enqueued = self.store().enqueue_many(&rows).await?;
        // One count per run of rows into one queue (usually the whole
        // batch): the counters' lock and lookups once, not once per row.
        let mut at = 0;
        for run in rows.chunk_by(|a, b| a.queue == b.queue) {
            let end = (at + run.len()).min(enqueued.len());
            count_enqueued::<J>(&run[0].queue, &enqueued[at..end]);
            at = end;
        }
        let mut queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        for queue in queues {
            wakeup::notify(queue);
        }
        Ok(enqueued)
    }

    /// Stores a job inside the caller's own transaction (the outbox pattern):
    /// rolled back, no job; committed, one job.
    ///
    /// `conn` is that backend's sqlx connection, e.g. `&mut *tx` for a
    /// `sqlx::Transaction<'_, MySql>`. jobq never retries inside a caller's
    /// transaction: a deadlock is returned to the caller, whose transaction it is.
    ///
    /// On MySQL/MariaDB, an enqueue of an idempotency key that exists locks
    /// the existing row and, as InnoDB's duplicate-key check does at every
    /// isolation level, the gap before that key in the key index, until the
    /// transaction ends: enqueues of keys that fall in that gap (and of no
    /// key, if it is the smallest) wait for it. Keep such transactions short.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes leaves the insert in the
    /// caller's transaction done or not: roll the transaction back (dropping
    /// it does) to be sure there is no job, as after any dropped sqlx query.
    pub async fn enqueue_in<'c, C, J>(&self, conn: C, job: J) -> Result<Enqueued>
    where
        C: EnqueueConnection<'c>,
        J: Job,
    {
        self.enqueue_in_with(conn, job, Enqueue::new()).await
    }

    /// [`enqueue_in`](Self::enqueue_in) with options.
    pub async fn enqueue_in_with<'c, C, J>(
        &self,
        conn: C,
        job: J,
        options: Enqueue,
    ) -> Result<Enqueued>
    where
        C: EnqueueConnection<'c>,
        J: Job,
    {
        let row = self.row(&job, options)?;
        let enqueued = self
            .store()
            .enqueue_in(conn.into_connection(), &row)
            .await?;
        count_enqueued::<J>(&row.queue, &[enqueued]);
        // Wakes claimers early; if the caller's transaction has not committed
        // yet they find nothing and the next poll picks the job up.
        wakeup::notify(&row.queue);
        Ok(enqueued)
    }

    /// The job with this id, as stored.
    pub async fn job(&self, id: i64) -> Result<Option<JobInfo>> {
        self.store().job(id).await
    }

    /// The output job `id` of type `J` returned when it succeeded (what its
    /// `#[job]` fn returned: the `T` of a `Result<T, E>`, or a bare `T`),
    /// read back typed; `None` when there is no such job or it has no
    /// output (not done yet, or it returns nothing). [`job`](Self::job)
    /// gives it as JSON ([`JobInfo::output`]).
    ///
    /// # Errors
    /// [`Error::Output`] when the stored output is not JSON of
    /// `J::Output` (the type changed since the job ran); a database error.
    ///
    /// ```
    /// use jobq_runtime::{job, Jobq, JobStatus};
    ///
    /// #[job]
    /// async fn make_thumbnail(width: u32) -> Result<String, std::io::Error> {
    ///     Ok(format!("thumbs/{width}.png"))
    /// }
    ///
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// # let jobq = Jobq::connect("sqlite::memory:").await?;
    /// # jobq.migrate().await?;
    /// let id = jobq.enqueue(MakeThumbnail::new(64)).await?.id;
    /// // … once a worker ran it:
    /// let path: Option<String> = jobq.output::<MakeThumbnail>(id).await?;
    /// # assert_eq!(path, None);
    /// # Ok(()) }
    /// ```
    pub async fn output<J>(&self, id: i64) -> Result<Option<J::Output>>
    where
        J: jobq_core::JobOutput,
        J::Output: serde::de::DeserializeOwned,
    {
        let Some(job) = self.store().job(id).await? else {
            return Ok(None);
        };
        let Some(json) = job.output else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|source| Error::Output {
                id,
                job: job.job_name,
                type_name: std::any::type_name::<J::Output>(),
                source,
            })
    }

    /// How many jobs of `queue` are in each status.
    pub async fn counts(&self, queue: &str) -> Result<QueueCounts> {
        self.store().counts(queue).await
    }

    /// Cancels a `pending` or `processing` job; `false` if it was neither.
    ///
    /// A running attempt is stopped without being settled: its handler's
    /// [`JobContext::cancellation_token`](crate::JobContext::cancellation_token)
    /// fires
    /// - at once (right after the cancel commits) when the worker running
    ///   it is in this process, whichever `Jobq` handle it was built from;
    /// - at that worker's next heartbeat otherwise (another process or
    ///   machine: within one heartbeat interval, a third of the lease by
    ///   default), when the heartbeat finds the row no longer held.
    ///
    /// Only the attempt the cancel ended is stopped: the row's lease token
    /// at the cancel names it, so a later attempt of the same job (after a
    /// [`retry`](Self::retry)) is never hit by it.
    pub async fn cancel(&self, id: i64) -> Result<bool> {
        let cancelled = self
            .store()
            .cancel(id, crate::cancels::stop_cancelled)
            .await?;
        crate::metrics::cancelled(u64::from(cancelled));
        Ok(cancelled)
    }

    /// Sends a `failed` or `cancelled` job back to `pending`, runnable now,
    /// with at least one more attempt; `false` if it was neither.
    pub async fn retry(&self, id: i64) -> Result<bool> {
        self.store().retry(id).await
    }

    /// The figures of every queue, in one call: counts by status, queue
    /// lag, expired leases, throughput over the last hour, pauses, and how
    /// many live workers serve it ([`QueueStats::state`](crate::QueueStats::state):
    /// paused, served by N workers, or no worker). Each is read through an
    /// index (the live workers from their small table, `jobq_workers`), so
    /// it is cheap enough to scrape every few seconds whatever the history kept.
    ///
    /// One statement finds the queues (skipping from queue to queue in an
    /// index), then a few per queue read its figures; finished rows are
    /// counted up to [`STATS_FINISHED_CAP`](crate::STATS_FINISHED_CAP) per
    /// status, so a long history costs no more than a short one.
    pub async fn stats(&self) -> Result<Stats> {
        self.store().stats().await
    }

    /// Tells every worker, in every process, to claim nothing more from
    /// `queue` (within one poll interval) until [`resume`](Self::resume);
    /// stored in the database, so it outlives restarts and deploys. Running
    /// jobs finish. `false` if it was paused already.
    ///
    /// A queue name is checked as [`enqueue`](Self::enqueue) checks it.
    /// Pausing a queue no job was ever enqueued to is allowed: workers
    /// started on it later claim nothing until it is resumed.
    pub async fn pause(&self, queue: &str) -> Result<bool> {
        validate_queue(queue)?;
        self.store().set_paused(queue, true).await
    }

    /// Lifts [`pause`](Self::pause); `false` if `queue` was not paused.
    /// Workers claim from it again within one poll interval.
    pub async fn resume(&self, queue: &str) -> Result<bool> {
        validate_queue(queue)?;
        self.store().set_paused(queue, false).await
    }

    /// Stores `schedule` in the database (or replaces the one of that
    /// name, keeping whether it is paused): from then on every worker, in
    /// every process, enqueues its job at each of its ticks — one row per
    /// tick, keyed `cron:{name}:{tick}`, however many processes run — with
    /// no restart. Workers see the change within milliseconds (it is
    /// announced as a pause is) and at most a minute later (they read the
    /// schedules every minute too); a change takes effect from the next
    /// tick. Refused with [`InvalidArgument::Schedule`] if the name or job
    /// name is empty or over 200 bytes, the cron expression or the time
    /// zone does not parse, the payload is not a JSON object, or the queue
    /// is not a valid name. The job is not looked up: a tick of a job no
    /// process knows is stored as [`enqueue_json`](Self::enqueue_json)
    /// stores it (into the schedule's queue, or refused and logged by the
    /// worker if it has none).
    pub async fn put_schedule(&self, schedule: Schedule) -> Result<()> {
        check_schedule(&schedule)?;
        self.store().put_schedule(&schedule).await
    }

    /// Pauses stored schedule `name`: no worker enqueues its ticks until
    /// [`resume_schedule`](Self::resume_schedule) (ticks missed meanwhile
    /// are not made up). `false` if no schedule of that name is stored.
    pub async fn pause_schedule(&self, name: &str) -> Result<bool> {
        self.store().set_schedule_paused(name, true).await
    }

    /// Lifts [`pause_schedule`](Self::pause_schedule); `false` if no
    /// schedule of that name is stored.
    pub async fn resume_schedule(&self, name: &str) -> Result<bool> {
        self.store().set_schedule_paused(name, false).await
    }

    /// Removes stored schedule `name`: no tick after this is enqueued (a
    /// row already enqueued stays). `false` if there was none.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.store().remove_schedule(name).await
    }

    /// The schedules kept in the database, by name (those declared in code
    /// are not: they live in the workers that declare them).
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.store().stored_schedules().await
    }

    /// The queues paused now, by name.
    pub async fn paused_queues(&self) -> Result<Vec<String>> {
        let controls = self.store().queue_controls().await?;
        Ok(controls
            .into_iter()
            .filter(|c| c.paused)
            .map(|c| c.queue)
            .collect())
    }

    /// Sets `queue`'s global concurrency limit: at most `limit` of its jobs
    /// `processing` at once, across every worker of every process (each
    /// worker's own concurrency for the queue still bounds that worker);
    /// `None` removes it. Stored in the database, like a pause, so it needs
    /// no deploy and outlives restarts; workers apply a new limit within
    /// one poll interval.
    ///
    /// Each job claimed under a limit holds one of the queue's slots (rows
    /// of `jobq_slots`, written by the claim in its transaction) for as long
    /// as its attempt holds its row: the slot is free again as soon as the
    /// row moves on, whether the attempt settled, was released at shutdown,
    /// cancelled, or reaped after its worker died (within about one lease).
    /// A stale attempt's settle frees nothing. Lowering a limit stops new
    /// claims at once; jobs running above the new limit finish. A queue
    /// without a limit claims as it always did, at no cost.
    ///
    /// `limit` must be 1 to [`MAX_QUEUE_LIMIT`](crate::MAX_QUEUE_LIMIT)
    /// ([`InvalidArgument::QueueLimit`](crate::InvalidArgument::QueueLimit));
    /// pause a queue to run none of its jobs.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// let jobq = jobq_runtime::Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// // At most 5 exports at once, whatever the number of workers.
    /// jobq.set_queue_limit("exports", Some(5)).await?;
    /// let stats = jobq.stats().await?;
    /// assert_eq!(stats.queues[0].limit, Some(5));
    /// jobq.set_queue_limit("exports", None).await?;
    /// assert!(jobq.set_queue_limit("exports", Some(0)).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn set_queue_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        validate_queue(queue)?;
        if let Some(n) = limit
            && !(1..=crate::options::MAX_QUEUE_LIMIT).contains(&n)
        {
            return Err(crate::error::InvalidArgument::QueueLimit {
                queue: queue.to_owned(),
                limit: n,
            }
            .into());
        }
        self.store().set_limit(queue, limit).await
    }

    /// The global concurrency limit of each limited queue
    /// ([`set_queue_limit`](Self::set_queue_limit)), by queue name.
    pub async fn queue_limits(&self) -> Result<Vec<(String, u32)>> {
        let controls = self.store().queue_controls().await?;
        Ok(controls
            .into_iter()
            .filter_map(|c| c.limit.map(|n| (c.queue, n)))
            .collect())
    }

    /// Sets `queue`'s rate limit: at most [`Rate::starts`](crate::Rate::starts)
    /// job starts per [`Rate::period`](crate::Rate::period), across every
    /// worker of every process, spread evenly — one start per
    /// [`interval`](crate::Rate::interval) on average, never more than the
    /// rate's [`burst`](crate::Rate::burst) at once — or removes it
    /// (`None`). Stored in the database, like a pause or a limit, so it needs
    /// no deploy and outlives restarts; workers apply a new rate within one
    /// poll interval. A queue may have a rate and a concurrency limit
    /// ([`set_queue_limit`](Self::set_queue_limit)): its claims take the
    /// least of both.
    ///
    /// A start is a claim: each claim of a rate-limited queue locks the
    /// queue's rate row without waiting, reads how many starts the rate
    /// allows at the database's clock (the application's on SQLite),
    /// claims at most that many, and moves the rate on by the jobs it
    /// claimed, in one transaction — a claim that fails spends nothing, and
    /// nothing is held between claims, so a crash or an outage leaves
    /// nothing to give back. A retry is a new start. Workers sleep until
    /// the rate allows the next start. A job a worker claimed ahead of a
    /// free slot (short jobs, see [`Worker`](crate::Worker)) has spent its
    /// start at the claim and runs when a slot frees, about one claim round
    /// trip later. See [`Rate`](crate::Rate) for what is guaranteed.
    ///
    /// The rate must have 1 to [`MAX_RATE_STARTS`](crate::MAX_RATE_STARTS)
    /// starts, at most one a microsecond, a period of
    /// [`MIN_RATE_PERIOD`](crate::MIN_RATE_PERIOD) to
    /// [`MAX_RATE_PERIOD`](crate::MAX_RATE_PERIOD) and a burst of 1 to its
    /// starts ([`InvalidArgument::QueueRate`](crate::InvalidArgument::QueueRate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// use jobq_runtime::Rate;
    ///
    /// let jobq = jobq_runtime::Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// // At most 100 calls a minute to the payment provider, one every 600 ms.
    /// let rate = Rate::per(100, Duration::from_secs(60));
    /// jobq.set_queue_rate("payments", Some(rate)).await?;
    /// assert_eq!(jobq.queue_rates().await?, vec![("payments".to_owned(), rate)]);
    /// jobq.set_queue_rate("payments", None).await?;
    /// assert!(jobq.set_queue_rate("payments", Some(Rate::per(0, Duration::from_secs(1)))).await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn set_queue_rate(&self, queue: &str, rate: Option<crate::Rate>) -> Result<()> {
        validate_queue(queue)?;
        check_rate(queue, rate)?;
        self.store().set_rate(queue, rate).await
    }

    /// The rate of each rate-limited queue
    /// ([`set_queue_rate`](Self::set_queue_rate)), by queue name.
    pub async fn queue_rates(&self) -> Result<Vec<(String, crate::Rate)>> {
        let controls = self.store().queue_controls().await?;
        Ok(controls
            .into_iter()
            .filter_map(|c| c.rate.map(|rate| (c.queue, rate)))
            .collect())
    }

    /// Sets a rate on concurrency key `key` (`Some`: at most `rate.starts()`
    /// starts of the key's jobs per period, at most its burst at once,
    /// counted across every worker of every process) or removes it
    /// (`None`). For a payment provider or a tenant: give its jobs the
    /// concurrency key ([`Enqueue::concurrency_key`](crate::Enqueue::concurrency_key),
    /// with a limit as high as you like, up to
    /// [`MAX_KEY_CONCURRENCY`](crate::MAX_KEY_CONCURRENCY)) and the key a
    /// rate. Stored in the database (`jobq_key_rates`), like a queue's
    /// rate; workers apply a new one within one poll interval.
    ///
    /// A start is a claim, as for a queue's rate: a worker that claimed
    /// jobs of a rated key takes starts for them from the key's row
    /// (locked for the moment, a GCRA like the queue's), runs those it got
    /// a start for, and sends the others back to `pending`, each to the
    /// start the rate gives it, their attempts not counted — so a throttled
    /// key's jobs wait out of the claim's way and other keys run meanwhile.
    /// Its limits are [`set_queue_rate`](Self::set_queue_rate)'s
    /// ([`InvalidArgument::QueueRate`](crate::InvalidArgument::QueueRate));
    /// the key is checked as a concurrency key is.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// use jobq_runtime::Rate;
    ///
    /// let jobq = jobq_runtime::Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// // At most 100 calls a minute to one provider, whatever the queue.
    /// let rate = Rate::per(100, Duration::from_secs(60));
    /// jobq.set_key_rate("provider:acme", Some(rate)).await?;
    /// assert_eq!(jobq.key_rates().await?, vec![("provider:acme".to_owned(), rate)]);
    /// jobq.set_key_rate("provider:acme", None).await?;
    /// assert!(jobq.key_rates().await?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn set_key_rate(&self, key: &str, rate: Option<crate::Rate>) -> Result<()> {
        let len = key.chars().count();
        if len == 0 || len > crate::options::MAX_KEY_LEN || key.contains('\0') {
            return Err(crate::error::InvalidArgument::ConcurrencyKey {
                job: "(a key rate)".to_owned(),
                key: key.to_owned(),
                limit: 1,
            }
            .into());
        }
        check_rate(key, rate)?;
        self.store().set_key_rate(key, rate).await
    }

    /// The rate of each concurrency key that has one
    /// ([`set_key_rate`](Self::set_key_rate)), by key.
    pub async fn key_rates(&self) -> Result<Vec<(String, crate::Rate)>> {
        self.store().key_rates().await
    }

    /// One page of the jobs `filter` matches, by id (the order they were
    /// enqueued in), [`Page::limit`] clamped to 1..=[`MAX_PAGE_LEN`].
    ///
    /// Keyset paging: the next page is the jobs past [`JobPage::next`], so
    /// a page costs the same however deep, and jobs enqueued or finished
    /// between pages neither repeat nor push any job that existed past a
    /// page boundary. Newest first, jobs enqueued after the first page are
    /// not in the later ones (their ids are higher); oldest first they show
    /// up at the end.
    ///
    /// # Which filters an index serves
    /// A queue, with or without a status, is a range of the claim index on
    /// MySQL/MariaDB and SQLite; on PostgreSQL a queue with status
    /// `pending` or `processing` is a range of its partial claim or lease
    /// index. Those indexes are in claim order, not id order: the page is
    /// sorted from every matching row (never from the whole table), which
    /// costs in proportion to how many match. Every other filter walks the
    /// primary key in id order and stops when the page is full, reading
    /// past the rows that do not match. An enqueue-time window is a range
    /// of ids (each bound found by a binary search of the primary key: ids
    /// are handed out in enqueue order), a job name a range of an index of
    /// its own on MySQL/MariaDB and SQLite; the key prefix is a range of the unique
    /// key index on MySQL/MariaDB and SQLite (byte for byte, `%` and `_`
    /// are plain characters), and matched with `starts_with` on PostgreSQL.
    pub async fn list(&self, filter: &JobFilter, page: Page) -> Result<JobPage> {
        validate_filter(filter)?;
        let limit = page.limit.clamp(1, MAX_PAGE_LEN);
        let w = Where {
            after: page.after.map(|cursor| (page.order, cursor.last_id())),
            ..Where::new(filter)
        };
        let mut jobs = self.store().list(&w, page.order, limit + 1).await?;
        let more = jobs.len() > limit as usize;
        jobs.truncate(limit as usize);
        let next = if more {
            jobs.last().map(|job| Cursor(job.id))
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }

    /// How many jobs `filter` matches. Served by the same indexes as
    /// [`list`](Self::list), but it reads every matching row: a filter no
    /// index serves counts by reading the table.
    pub async fn count_where(&self, filter: &JobFilter) -> Result<u64> {
        validate_filter(filter)?;
        self.store().count_where(&Where::new(filter)).await
    }

    /// [`retry`](Self::retry) for every `failed` or `cancelled` job `filter`
    /// matches; how many it sent back to `pending`. Jobs in other statuses
    /// are left alone (a filter on another status retries nothing).
    ///
    /// Each job at most once per call: the ids the filter matches are read
    /// first, without locks, in pages of up to 100,000 in id order (each
    /// page starting past the last id of the one before), and each page is
    /// then retried in batches of 500, each its own short transaction: the
    /// batch's rows are locked by id skipping those another transaction
    /// holds (`FOR UPDATE SKIP LOCKED` on MySQL/MariaDB and PostgreSQL),
    /// and those still `failed` or `cancelled` (and in the filter's status,
    /// if it has one) are retried; then the rows it skipped are locked the
    /// same way waiting for them (within the statement deadline), so no
    /// row is left out for being held. A job that fails again while the
    /// call runs is not retried again by it: call again for that. Not one
    /// transaction: a failure part way leaves the batches before it done.
    pub async fn retry_where(&self, filter: &JobFilter) -> Result<u64> {
        validate_filter(filter)?;
        let Some(statuses) = Statuses::of_action(Statuses::Retryable, filter.status) else {
            return Ok(0);
        };
        let w = Where {
            statuses,
            ..Where::new(filter)
        };
        let retried = self.store().retry_where(w).await?;
        if let Some(queue) = filter.queue.as_deref().filter(|_| retried > 0) {
            wakeup::notify(queue);
        }
        Ok(retried)
    }

    /// [`cancel`](Self::cancel) for every `pending` or `processing` job
    /// `filter` matches, each at most once per call, in pages and batches
    /// as [`retry_where`](Self::retry_where); how many it cancelled. Running attempts are stopped as `cancel`
    /// stops them: at once in this process, after each batch commits, and
    /// at the next heartbeat elsewhere.
    pub async fn cancel_where(&self, filter: &JobFilter) -> Result<u64> {
        validate_filter(filter)?;
        let Some(statuses) = Statuses::of_action(Statuses::Cancellable, filter.status) else {
            return Ok(0);
        };
        let w = Where {
            statuses,
            ..Where::new(filter)
        };
        let cancelled = self
            .store()
            .cancel_where(w, crate::cancels::stop_cancelled)
            .await?;
        crate::metrics::cancelled(cancelled);
        Ok(cancelled)
    }

    /// Checks the server and jobq's tables for what jobq needs, each check
    /// `ok`, `warn` or `fail` with one line of what to do; see
    /// [`DoctorReport`]. Read-only: plans are EXPLAINed (on PostgreSQL in a
    /// transaction rolled back), never run.
    ///
    /// The checks, by [`Check::name`](crate::Check::name): `server_version`,
    /// `isolation`, `storage_engine` and `binlog_format` (MySQL/MariaDB),
    /// `journal_mode` (SQLite), `migrations`, `clock_skew`, one `plan_*`
    /// per claim, reaper and prune statement, and `lock_waits`
    /// (MySQL/MariaDB); on a Galera node also `galera_cluster`,
    /// `galera_sync_wait` and `galera_lease` (the workers' lease against
    /// `evs.suspect_timeout`: this call assumes the default lease, 30 s;
    /// [`doctor_with_lease`](Self::doctor_with_lease) names yours). A check
    /// whose facts cannot be read (a missing table, a privilege) fails
    /// saying so; an unreachable server is an `Err`.
    ///
    /// ```no_run
    /// # async fn demo(jobq: jobq_runtime::Jobq) -> jobq_runtime::Result<()> {
    /// let report = jobq.doctor().await?;
    /// for check in &report.checks {
    ///     println!("{} {} {}", check.status.as_str(), check.name, check.found);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn doctor(&self) -> Result<DoctorReport> {
        self.store()
            .doctor(store::doctor::DoctorOptions::default())
            .await
    }

    /// [`doctor`](Self::doctor) for workers whose
    /// [`lease`](crate::WorkerBuilder::lease) is `lease`: the checks that
    /// depend on it (`galera_lease`) judge that one.
    pub async fn doctor_with_lease(&self, lease: std::time::Duration) -> Result<DoctorReport> {
        let options = store::doctor::DoctorOptions {
            lease,
            ..Default::default()
        };
        self.store().doctor(options).await
    }

    /// [`doctor`](Self::doctor) as if this host's clock were `offset` off:
    /// how tests simulate a skewed host where the database's clock cannot
    /// be moved for one session (PostgreSQL). Not public API.
    #[doc(hidden)]
    pub async fn doctor_with_host_clock_offset(
        &self,
        offset: chrono::TimeDelta,
    ) -> Result<DoctorReport> {
        self.store()
            .doctor(store::doctor::DoctorOptions {
                clock: store::doctor::HostClock { offset },
                ..Default::default()
            })
            .await
    }

    /// Stores a job given by name and JSON payload, for tools that do not
    /// link the job's Rust type (the `jobq enqueue` command).
    ///
    /// The job is looked up in this process's own `#[job]`s, else among
    /// the jobs the live workers publish ([`job_kinds`](Self::job_kinds)).
    /// A job found either way gives the defaults that `options` does not
    /// override (queue, priority, attempts, and the idempotency key from
    /// its `key` template, computed from the JSON as the job's `format!`
    /// would, or refused when that cannot be known for sure), and its
    /// published fields check the payload: a JSON object, with no field
    /// the job does not have and every field that is not an `Option`.
    /// Field types are not checked: a payload that does not decode fails
    /// its attempt for good, as a bad row does.
    ///
    /// A job found nowhere is refused with [`InvalidArgument::UnknownJob`]
    /// naming the known ones, unless `options` names a queue: then it is
    /// stored there with priority 0,
    /// [`DEFAULT_MAX_ATTEMPTS`](jobq_core::DEFAULT_MAX_ATTEMPTS) and no
    /// key, unchecked (a job whose workers have not started yet).
    ///
    /// # Cancel safety
    /// As [`enqueue`](Self::enqueue)'s.
    pub async fn enqueue_json(
        &self,
        job_name: &str,
        payload: &str,
        mut options: Enqueue,
    ) -> Result<Enqueued> {
        let value = match serde_json::from_str::<serde_json::Value>(payload) {
            Ok(value) => value,
            Err(source) => {
                return Err(InvalidArgument::PayloadNotJson {
                    job: job_name.to_owned(),
                    message: source.to_string(),
                }
                .into());
            }
        };
        let registration = jobq_core::__private::inventory::iter::<jobq_core::JobRegistration>
            .into_iter()
            .find(|r| r.name == job_name);
        let kind = match registration {
            Some(registration) => Some(JobKind::of(registration)),
            None => {
                self.published_kind(job_name, options.queue.is_some())
                    .await?
            }
        };
        let (defaults, key, unique, concurrency) = match &kind {
            Some(kind) => {
                kind.check(&value)
                    .map_err(|problem| InvalidArgument::PayloadFields {
                        job: job_name.to_owned(),
                        problem,
                        fields: kind.fields_text(),
                    })?;
                let key = match (&kind.key_template, &options.idempotency_key) {
                    (Some(template), None) => {
                        Some(roster::render_key(template, &value).map_err(|problem| {
                            InvalidArgument::KeyTemplate {
                                job: job_name.to_owned(),
                                template: template.clone(),
                                problem,
                            }
                        })?)
                    }
                    _ => None,
                };
                // The job's concurrency key, from the payload as a worker's
                // enqueue would make it: an enqueue by name is limited too.
                let concurrency = match (&kind.concurrency_key, &options.concurrency) {
                    (Some((template, limit)), None) => {
                        let key = roster::render_key(template, &value).map_err(|problem| {
                            InvalidArgument::KeyTemplate {
                                job: job_name.to_owned(),
                                template: template.clone(),
                                problem,
                            }
                        })?;
                        Some((key, *limit))
                    }
                    _ => None,
                };
                let defaults = Defaults {
                    queue: kind.queue.clone(),
                    priority: kind.priority,
                    max_attempts: kind.max_attempts,
                };
                // The job's own tags first, as a worker's enqueue stores them.
                options.tags.splice(0..0, kind.tags.iter().cloned());
                (defaults, key, kind.unique, concurrency)
            }
            None => (
                Defaults {
                    queue: jobq_core::DEFAULT_QUEUE.to_owned(),
                    priority: 0,
                    max_attempts: jobq_core::DEFAULT_MAX_ATTEMPTS,
                },
                None,
                None,
                None,
            ),
        };
        let options = Enqueue {
            unique: options.unique.or(unique),
            concurrency: options.concurrency.or(concurrency),
            ..options
        };
        let row = self.row_of(job_name, payload.to_owned(), key, defaults, options)?;
        let enqueued = self.store().enqueue(&row).await?;
        if !enqueued.duplicate {
            // A name no job of this process registers is labelled as such:
            // the label set stays bounded whatever a tool enqueues.
            let label = registration.map_or(crate::metrics::UNREGISTERED, |r| r.name);
            crate::metrics::enqueued(&row.queue, label, 1);
        }
        wakeup::notify(&row.queue);
        Ok(enqueued)
    }

    /// The job `job_name` as the live workers publish it; `None` if none
    /// does and `queue_given`, else [`InvalidArgument::UnknownJob`].
    async fn published_kind(&self, job_name: &str, queue_given: bool) -> Result<Option<JobKind>> {
        let published = self.job_kinds().await?;
        if let Some(job) = published.iter().find(|job| job.kind.name == job_name) {
            return Ok(Some(job.kind.clone()));
        }
        if queue_given {
            return Ok(None);
        }
        let mut known: Vec<String> = published.into_iter().map(|job| job.kind.name).collect();
        known.extend(
            jobq_core::__private::inventory::iter::<jobq_core::JobRegistration>
                .into_iter()
                .map(|r| r.name.to_owned()),
        );
        known.sort_unstable();
        known.dedup();
        Err(InvalidArgument::UnknownJob {
            job: job_name.to_owned(),
            known,
        }
        .into())
    }

    /// The workers running now, in any process on any host, oldest first:
    /// each [`Worker`](crate::Worker) registers itself in `jobq_workers`
    /// when it starts (host, pid, jobq's version, queues and concurrency,
    /// the jobs it can run), refreshes its row every presence interval
    /// ([`WorkerBuilder::presence_interval`](crate::WorkerBuilder::presence_interval),
    /// 10 s by default, with its running count) and deletes it when it
    /// shuts down. A worker that stopped refreshing (killed, frozen, cut
    /// off from the database) is left out once its row expires, three
    /// presence intervals after its last refresh; any worker deletes such
    /// rows. One read of a small table.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let (now, records) = self.store().live_workers().await?;
        Ok(records
            .into_iter()
            .map(|record| roster::worker_info(record, now))
            .collect())
    }

    /// Every job the live workers publish, by name, with its defaults
    /// (queue, priority, attempts, timeout, key template) and payload
    /// fields: what tools that do not link the application's jobs (the
    /// `jobq` command, the dashboard) know of them. Where live workers
    /// define a job differently (a rolling deploy), the one that started
    /// last wins, and [`PublishedJob::disagreeing`] names the others.
    pub async fn job_kinds(&self) -> Result<Vec<PublishedJob>> {
        Ok(roster::published_jobs(&self.workers().await?))
    }

    /// Validates and serializes one job into a row.
    pub(crate) fn row<J: Job>(&self, job: &J, options: Enqueue) -> Result<NewJob> {
        let payload = serde_json::to_string(job).map_err(|source| Error::Serialize {
            job: J::NAME.to_owned(),
            source,
        })?;
        let defaults = Defaults {
            queue: J::QUEUE.to_owned(),
            priority: J::PRIORITY,
            max_attempts: J::MAX_ATTEMPTS,
        };
        let concurrency = job.concurrency_key().map(|key| (key, J::CONCURRENCY));
        let mut tags: Vec<String> = J::TAGS.iter().map(|t| (*t).to_owned()).collect();
        tags.extend(options.tags);
        let options = Enqueue {
            unique: options.unique.or(J::UNIQUE),
            concurrency: options.concurrency.or(concurrency),
            tags,
            ..options
        };
        self.row_of(J::NAME, payload, job.idempotency_key(), defaults, options)
    }

    /// Validates one job's parts into a row: `key` is the job's own
    /// idempotency key, used when `options` gives none. The row goes
    /// through the handle's enqueue layers, if any, before it is checked.
    fn row_of(
        &self,
        job_name: &str,
        payload: String,
        key: Option<String>,
        defaults: Defaults,
        options: Enqueue,
    ) -> Result<NewJob> {
        let metadata = match options.metadata {
            None => None,
            Some(serde_json::Value::Object(map)) => Some(map),
            Some(other) => {
                return Err(InvalidArgument::Metadata {
                    job: job_name.to_owned(),
                    bytes: other.to_string().len(),
                    why: "is not a JSON object",
                }
                .into());
            }
        };
        #[cfg(feature = "otel")]
        let metadata = with_trace_context(metadata);
        let mut row = NewJob {
            metadata,
            tags: options.tags,
            queue: options.queue.unwrap_or(defaults.queue),
            job_name: job_name.to_owned(),
            payload,
            priority: options.priority.unwrap_or(defaults.priority),
            max_attempts: options.max_attempts.unwrap_or(defaults.max_attempts),
            run_at: options.run_at,
            idempotency_key: options.idempotency_key.or(key),
            unique: options.unique,
            concurrency: options.concurrency,
        };
        if !self.inner.enqueue_layers.is_empty() {
            self.inner.enqueue_layers.apply(&mut row)?;
        }
        self.check(&mut row)?;
        Ok(row)
    }

    /// Checks a row before it is stored: its payload's size, its job name,
    /// queue, key and attempts, and its run time (one past what every
    /// backend stores is refused; one before the epoch means now).
    fn check(&self, row: &mut NewJob) -> Result<()> {
        check_attached(row)?;
        let job_name = row.job_name.as_str();
        let payload = &row.payload;
        if payload.len() > self.inner.max_payload_bytes {
            return Err(InvalidArgument::PayloadTooLarge {
                job: job_name.to_owned(),
                bytes: payload.len(),
                limit: self.inner.max_payload_bytes,
            }
            .into());
        }
        if let Some((limit, setting)) = self.store().server_payload_limit() {
            if payload.len() > limit {
                return Err(InvalidArgument::PayloadOverServerLimit {
                    job: job_name.to_owned(),
                    bytes: payload.len(),
                    backend: self.backend(),
                    limit,
                    setting,
                }
                .into());
            }
        }
        validate_job_name(job_name)?;
        validate_queue(&row.queue)?;
        if let Some(key) = &row.idempotency_key {
            let len = key.chars().count();
            if len == 0 || len > MAX_KEY_LEN {
                return Err(InvalidArgument::KeyLength {
                    job: job_name.to_owned(),
                    chars: len,
                }
                .into());
            }
            if let Some(at) = key.find('\0') {
                return Err(InvalidArgument::KeyNul {
                    job: job_name.to_owned(),
                    key: key.clone(),
                    at,
                }
                .into());
            }
        }
        if let Some(unique) = row.unique {
            if row.idempotency_key.is_none() {
                return Err(InvalidArgument::UniqueWithoutKey {
                    job: job_name.to_owned(),
                }
                .into());
            }
            if let Some(period) = unique.period() {
                if period.is_zero() || period > MAX_DELAY {
                    return Err(InvalidArgument::UniquePeriod {
                        job: job_name.to_owned(),
                        period,
                    }
                    .into());
                }
            }
        }
        if let Some((key, limit)) = &row.concurrency {
            let len = key.chars().count();
            if len == 0
                || len > MAX_KEY_LEN
                || key.contains('\0')
                || *limit == 0
                || *limit > jobq_core::MAX_KEY_CONCURRENCY
            {
                return Err(InvalidArgument::ConcurrencyKey {
                    job: job_name.to_owned(),
                    key: key.clone(),
                    limit: *limit,
                }
                .into());
            }
            if row.unique.is_some() {
                return Err(InvalidArgument::UniqueWithConcurrencyKey {
                    job: job_name.to_owned(),
                }
                .into());
            }
        }
        let max_attempts = row.max_attempts;
        if max_attempts == 0 || max_attempts > i32::MAX as u32 {
            return Err(InvalidArgument::MaxAttempts {
                job: job_name.to_owned(),
                max_attempts,
            }
            .into());
        }
        match row.run_at {
            RunAt::After(delay) if delay > MAX_DELAY => {
                return Err(InvalidArgument::DelayTooLong {
                    job: job_name.to_owned(),
                    delay,
                }
                .into());
            }
            RunAt::At(at) => {
                let latest = chrono::Utc::now()
                    + chrono::Duration::from_std(MAX_DELAY).unwrap_or(chrono::TimeDelta::MAX);
                if at > latest {
                    return Err(InvalidArgument::RunAtTooLate {
                        job: job_name.to_owned(),
                        run_at: at,
                    }
                    .into());
                }
                // Past is past: the earliest instant every backend stores
                // (MySQL's DATETIME starts at year 1000) still means "now".
                row.run_at = RunAt::At(at.max(chrono::DateTime::UNIX_EPOCH));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Checks what a filter names as a job would be checked: its queue and job
/// name as at enqueue, its key prefix as a key (1 to [`MAX_KEY_LEN`]
/// characters, no NUL).
fn validate_filter(filter: &JobFilter) -> Result<(), InvalidArgument> {
    if let Some(queue) = &filter.queue {
        validate_queue(queue)?;
    }
    if let Some(name) = &filter.job_name {
        validate_job_name(name)?;
    }
    if let Some(prefix) = &filter.key_prefix {
        let chars = prefix.chars().count();
        if chars == 0 || chars > MAX_KEY_LEN {
            return Err(InvalidArgument::KeyPrefixLength {
                prefix: prefix.clone(),
                chars,
            });
        }
        if let Some(at) = prefix.find('\0') {
            return Err(InvalidArgument::KeyPrefixNul {
                prefix: prefix.clone(),
                at,
            });
        }
    }
    if let Some(tag) = &filter.tag {
        if tag.is_empty() || tag.len() > jobq_core::MAX_TAG_LEN || tag.contains('\0') {
            return Err(InvalidArgument::Tags {
                job: "(a filter)".to_owned(),
                tags: vec![tag.clone()],
            });
        }
    }
    Ok(())
}

/// Counts the rows among `enqueued` (of job `J`, into `queue`) that were
/// inserted, not found by their idempotency key.
fn count_enqueued<J: Job>(queue: &str, enqueued: &[Enqueued]) {
    let inserted = enqueued.iter().filter(|e| !e.duplicate).count();
    crate::metrics::enqueued(queue, J::NAME, inserted as u64);
}

/// A job's defaults, from its `Job` impl or its registration.
#[derive(Debug, Clone)]
struct Defaults {
    queue: String,
    priority: i16,
    max_attempts: u32,
}

/// `metadata` with the current span's W3C trace context added, when it
/// carries one (see [`crate::otel`]); the caller's own keys win.
#[cfg(feature = "otel")]
fn with_trace_context(
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let context = crate::otel::current();
    if context.is_empty() {
        return metadata;
    }
    let mut metadata = metadata.unwrap_or_default();
    for (key, value) in context {
        metadata
            .entry(key)
            .or_insert(serde_json::Value::String(value));
    }
    Some(metadata)
}

/// Checks a row's tags (each once, in the order given: a repeated tag is
/// dropped) and the size of its metadata.
fn check_attached(row: &mut NewJob) -> Result<(), InvalidArgument> {
    let mut seen = std::collections::HashSet::new();
    row.tags.retain(|tag| seen.insert(tag.clone()));
    let bad_tag = |t: &String| t.is_empty() || t.len() > jobq_core::MAX_TAG_LEN || t.contains('\0');
    if row.tags.len() > jobq_core::MAX_TAGS || row.tags.iter().any(bad_tag) {
        return Err(InvalidArgument::Tags {
            job: row.job_name.clone(),
            tags: row.tags.clone(),
        });
    }
    if let Some(metadata) = &row.metadata {
        let bytes = serde_json::to_string(metadata).map_or(usize::MAX, |json| json.len());
        if bytes > jobq_core::MAX_METADATA_BYTES {
            return Err(InvalidArgument::Metadata {
                job: row.job_name.clone(),
                bytes,
                why: "is too large",
            });
        }
    }
    Ok(())
}

/// Checks a job name: 1 to [`MAX_JOB_NAME_LEN`] bytes, no NUL.
pub(crate) fn validate_job_name(name: &str) -> Result<(), InvalidArgument> {
    validate_name(
        name,
        MAX_JOB_NAME_LEN,
        |name, bytes| InvalidArgument::JobNameLength { name, bytes },
        |name, at| InvalidArgument::JobNameNul { name, at },
    )
}

/// Checks a name: 1 to `max` bytes (else the error `length` makes of the
/// name and its length), no NUL (else the one `nul` makes of the name and
/// the NUL's offset).
fn validate_name(
    name: &str,
    max: usize,
    length: fn(String, usize) -> InvalidArgument,
    nul: fn(String, usize) -> InvalidArgument,
) -> Result<(), InvalidArgument> {
    if name.is_empty() || name.len() > max {
        return Err(length(name.to_owned(), name.len()));
    }
    match name.find('\0') {
        Some(at) => Err(nul(name.to_owned(), at)),
        None => Ok(()),
    }
}

/// Refuses a rate no stored rate may have (see [`Rate`](crate::Rate)), for
/// the queue or concurrency key `name`.
fn check_rate(name: &str, rate: Option<crate::Rate>) -> Result<(), InvalidArgument> {
    match rate.and_then(|rate| rate.problem().map(|problem| (rate, problem))) {
        Some((rate, problem)) => Err(InvalidArgument::QueueRate {
            queue: name.to_owned(),
            rate,
            problem,
        }),
        None => Ok(()),
    }
}

/// Whether `schedule` can run: see [`Jobq::put_schedule`].
pub(crate) fn check_schedule(schedule: &Schedule) -> Result<(), InvalidArgument> {
    let problem = |problem: String| InvalidArgument::Schedule {
        name: schedule.name.clone(),
        problem,
    };
    validate_job_name(&schedule.name).map_err(|e| problem(format!("its name: {e}")))?;
    validate_job_name(&schedule.job_name).map_err(|e| problem(format!("its job: {e}")))?;
    <croner::Cron as std::str::FromStr>::from_str(&schedule.cron).map_err(|e| {
        problem(format!(
            "the cron expression `{}` does not parse: {e}",
            schedule.cron
        ))
    })?;
    if let Some(zone) = &schedule.time_zone {
        <chrono_tz::Tz as std::str::FromStr>::from_str(zone).map_err(|_| {
            problem(format!(
                "`{zone}` is not an IANA time zone name (such as `Europe/Paris`)"
            ))
        })?;
    }
    match serde_json::from_str::<serde_json::Value>(&schedule.payload) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err(problem("its payload is not a JSON object".to_owned())),
        Err(e) => return Err(problem(format!("its payload is not JSON: {e}"))),
    }
    if let Some(queue) = &schedule.queue {
        validate_queue(queue).map_err(|e| problem(format!("its queue: {e}")))?;
    }
    Ok(())
}

/// Checks a queue name: 1 to 128 bytes, no NUL.
pub(crate) fn validate_queue(queue: &str) -> Result<(), InvalidArgument> {
    validate_name(
        queue,
        MAX_QUEUE_LEN,
        |queue, bytes| InvalidArgument::QueueLength { queue, bytes },
        |queue, at| InvalidArgument::QueueNul { queue, at },
    )
}
