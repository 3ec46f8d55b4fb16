//! Metrics, through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! jobq records into whatever recorder the application installed
//! (`metrics-exporter-prometheus`, an OpenTelemetry bridge, a test's
//! `DebuggingRecorder`…) and forces none: without one, every metric is a
//! no-op. Install the recorder **before** building workers and enqueuing:
//! the handles a worker (or the first enqueue of a queue and job) takes are
//! bound to the recorder installed at that moment.
//!
//! Every label has bounded cardinality: a queue name, a job name (a job name
//! no handler is registered for is labelled `unregistered`), an outcome or a
//! statement kind; never a job id or key.
//!
//! | name | type | labels | what |
//! | --- | --- | --- | --- |
//! | `jobq_jobs_enqueued_total` | counter | `queue`, `job` | rows inserted by `enqueue*` (a duplicate of an idempotency key is not counted; an `enqueue_in` is counted when its statement ran, whether or not the caller's transaction commits) |
//! | `jobq_jobs_claimed_total` | counter | `queue` | rows a worker's claims took |
//! | `jobq_attempts_total` | counter | `queue`, `job`, `outcome` | attempts that ended, by outcome: `succeeded`, `retried` (back to `pending`, an attempt used), `failed` (for good), `snoozed` (back to `pending`, the attempt given back), `released` (stopped by shutdown, handed back unstarted or unfinished), `lease_lost` (stopped because the lease was lost: reclaimed or cancelled) |
//! | `jobq_jobs_cancelled_total` | counter | — | jobs [`Jobq::cancel`](crate::Jobq::cancel) cancelled |
//! | `jobq_settles_fenced_out_total` | counter | `settle` | settles the database refused because the attempt no longer held the row (`settle` = `complete` for successes, `transition` for the rest) |
//! | `jobq_jobs_reaped_total` | counter | `queue` | orphans (expired leases) a worker's reaper returned |
//! | `jobq_internal_retries_total` | counter | `statement` | jobq's own statements and transactions re-run after a transient error (deadlock, lock wait timeout, busy database), by statement kind (`claim`, `complete`, `transition`, `heartbeat`, `reap`, `enqueue`, …); [`internal_retries`](crate::internal_retries) is their sum |
//! | `jobq_queue_wait_seconds` | histogram | `queue` | from a job's `run_at` (when it became due) to its claim, by this host's clock |
//! | `jobq_run_seconds` | histogram | `queue`, `job` | an attempt's run time, handler start to outcome |
//! | `jobq_claim_seconds` | histogram | `queue` | one claim statement (or transaction), as the worker waited for it |
//! | `jobq_settle_seconds` | histogram | `settle` | one settle write: a batch of successes (`complete`) or one other outcome (`transition`) |
//! | `jobq_queue_available` | gauge | `queue` | due `pending` jobs (from [`Jobq::stats`](crate::Jobq::stats), see [`WorkerBuilder::stats_gauges_every`](crate::WorkerBuilder::stats_gauges_every)) |
//! | `jobq_queue_scheduled` | gauge | `queue` | `pending` jobs due later |
//! | `jobq_queue_processing` | gauge | `queue` | claimed and not finished |
//! | `jobq_queue_expired_leases` | gauge | `queue` | `processing` rows whose lease expired |
//! | `jobq_queue_oldest_available_age_seconds` | gauge | `queue` | how long the oldest due job has waited (queue lag); 0 when none is due |
//! | `jobq_queue_paused` | gauge | `queue` | 1 if the queue is paused, else 0 |
//! | `jobq_queue_limit` | gauge | `queue` | its global concurrency limit, 0 when none |
//! | `jobq_queue_held_back` | gauge | `queue` | due jobs held back by the global concurrency limit |
//! | `jobq_queue_blocked` | gauge | `queue` | jobs waiting behind the running jobs of their concurrency key |
//! | `jobq_queue_rate_per_second` | gauge | `queue` | job starts a second its rate allows (starts ÷ period), 0 when none |
//! | `jobq_queue_rate_held_back` | gauge | `queue` | due jobs held back by the rate |
//! | `jobq_queue_succeeded_last_hour` | gauge | `queue` | jobs that succeeded in the last hour |
//! | `jobq_queue_failed_last_hour` | gauge | `queue` | jobs that failed for good in the last hour |
//!
//! Histograms are recorded in seconds; the exporter chooses the buckets
//! ([`DURATION_BUCKETS`] is a fit for all four with
//! `metrics-exporter-prometheus`'s `set_buckets`).
//!
//! # Cost
//!
//! The worker takes its handles once, when it is built: one set per served
//! queue, per registered job name and per outcome. Recording on the hot path
//! (claim, attempt, settle) is then an atomic increment or a histogram
//! sample on a handle, with no allocation and no lookup in the recorder.
//! Enqueue looks its counter up in a small map by queue and job name (taken
//! from the recorder once per pair).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use ::metrics::{
    Counter, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge,
    histogram,
};

use crate::ops::Stats;

/// Rows inserted by `enqueue*`, by `queue` and `job`.
pub const JOBS_ENQUEUED: &str = "jobq_jobs_enqueued_total";
/// Rows claimed, by `queue`.
pub const JOBS_CLAIMED: &str = "jobq_jobs_claimed_total";
/// Attempts that ended, by `queue`, `job` and `outcome`.
pub const ATTEMPTS: &str = "jobq_attempts_total";
/// Jobs cancelled through [`Jobq::cancel`](crate::Jobq::cancel).
pub const JOBS_CANCELLED: &str = "jobq_jobs_cancelled_total";
/// Settles refused because the attempt no longer held the row, by `settle`.
pub const SETTLES_FENCED_OUT: &str = "jobq_settles_fenced_out_total";
/// Orphans returned by reapers, by `queue`.
pub const JOBS_REAPED: &str = "jobq_jobs_reaped_total";
/// jobq's own statements re-run after a transient error, by `statement`.
pub const INTERNAL_RETRIES: &str = "jobq_internal_retries_total";
/// `run_at` to claim, in seconds, by `queue`.
pub const QUEUE_WAIT_SECONDS: &str = "jobq_queue_wait_seconds";
/// An attempt's run time, in seconds, by `queue` and `job`.
pub const RUN_SECONDS: &str = "jobq_run_seconds";
/// One claim's latency, in seconds, by `queue`.
pub const CLAIM_SECONDS: &str = "jobq_claim_seconds";
/// One settle write's latency, in seconds, by `settle`.
pub const SETTLE_SECONDS: &str = "jobq_settle_seconds";
/// Due `pending` jobs, by `queue`.
pub const QUEUE_AVAILABLE: &str = "jobq_queue_available";
/// `pending` jobs due later, by `queue`.
pub const QUEUE_SCHEDULED: &str = "jobq_queue_scheduled";
/// `processing` jobs, by `queue`.
pub const QUEUE_PROCESSING: &str = "jobq_queue_processing";
/// `processing` rows whose lease expired, by `queue`.
pub const QUEUE_EXPIRED_LEASES: &str = "jobq_queue_expired_leases";
/// Age of the oldest due job in seconds (queue lag), by `queue`.
pub const QUEUE_OLDEST_AVAILABLE_AGE_SECONDS: &str = "jobq_queue_oldest_available_age_seconds";
/// 1 if paused, by `queue`.
pub const QUEUE_PAUSED: &str = "jobq_queue_paused";
/// The global concurrency limit (0: none), by `queue`.
pub const QUEUE_LIMIT: &str = "jobq_queue_limit";
/// Due jobs held back by the global concurrency limit, by `queue`.
pub const QUEUE_HELD_BACK: &str = "jobq_queue_held_back";
/// Gauge: jobs waiting behind the running jobs of their concurrency key.
pub const QUEUE_BLOCKED: &str = "jobq_queue_blocked";
/// Job starts a second the queue's rate allows (0: none), by `queue`.
pub const QUEUE_RATE_PER_SECOND: &str = "jobq_queue_rate_per_second";
/// Due jobs held back by the queue's rate, by `queue`.
pub const QUEUE_RATE_HELD_BACK: &str = "jobq_queue_rate_held_back";
/// Successes in the last hour, by `queue`.
pub const QUEUE_SUCCEEDED_LAST_HOUR: &str = "jobq_queue_succeeded_last_hour";
/// Failures for good in the last hour, by `queue`.
pub const QUEUE_FAILED_LAST_HOUR: &str = "jobq_queue_failed_last_hour";

/// Histogram buckets, in seconds, that fit jobq's four histograms: 100 µs to
/// about 10 minutes, roughly ×2.5 apart.
pub const DURATION_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 25.0, 60.0, 150.0, 600.0,
];

/// The `job` label of a job name no handler is registered for.
pub(crate) const UNREGISTERED: &str = "unregistered";

/// Label names.
const QUEUE: &str = "queue";
const JOB: &str = "job";
const OUTCOME: &str = "outcome";
const SETTLE: &str = "settle";
const STATEMENT: &str = "statement";

/// How an attempt ended, as the `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Succeeded,
    Retried,
    Failed,
    Snoozed,
    Released,
    LeaseLost,
}

impl Outcome {
    const ALL: [Self; 6] = [
        Self::Succeeded,
        Self::Retried,
        Self::Failed,
        Self::Snoozed,
        Self::Released,
        Self::LeaseLost,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Retried => "retried",
            Self::Failed => "failed",
            Self::Snoozed => "snoozed",
            Self::Released => "released",
            Self::LeaseLost => "lease_lost",
        }
    }
}

/// Which settle write, as the `settle` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// A batch of successes.
    Complete,
    /// One other outcome (retry, failure, snooze, release).
    Transition,
}

impl Settle {
    fn label(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Transition => "transition",
        }
    }
}

/// The statement kinds of [`INTERNAL_RETRIES`], given to `retry_transient`
/// at its call sites, and named by `Error::StatementTimeout`.
// Some kinds are used by one backend only.
#[cfg_attr(
    not(all(feature = "mysql", feature = "postgres", feature = "sqlite")),
    allow(dead_code)
)]
pub(crate) mod statement {
    pub(crate) const CONNECT: &str = "connect";
    pub(crate) const ENQUEUE: &str = "enqueue";
    pub(crate) const CLAIM: &str = "claim";
    pub(crate) const COMPLETE: &str = "complete";
    pub(crate) const TRANSITION: &str = "transition";
    pub(crate) const CHECKPOINT: &str = "checkpoint";
    pub(crate) const HEARTBEAT: &str = "heartbeat";
    pub(crate) const REAP: &str = "reap";
    pub(crate) const PRUNE: &str = "prune";
    pub(crate) const CANCEL: &str = "cancel";
    pub(crate) const MIGRATE: &str = "migrate";
    pub(crate) const RETRY: &str = "retry";
    pub(crate) const PAUSE: &str = "pause";
    /// Setting a queue's global concurrency limit.
    pub(crate) const LIMIT: &str = "limit";
    /// Setting a queue's rate.
    pub(crate) const RATE: &str = "rate";
    /// Releasing concurrency keys (after a settle, and the sweep).
    pub(crate) const RELEASE: &str = "release";
    /// Workflows: enqueueing one, and releasing or cancelling the jobs
    /// that depend on settled ones (after a settle, a cancel, and the sweep).
    pub(crate) const FLOW: &str = "flow";
    /// `jobq_runtime::testing`'s drain with scheduled jobs.
    #[cfg(feature = "testing")]
    pub(crate) const MAKE_DUE: &str = "make_due";
    /// Reads of the handle (`job`, `counts`, `list`, `stats`, …).
    pub(crate) const READ: &str = "read";
    pub(crate) const DOCTOR: &str = "doctor";
    /// The live-worker registry (`jobq_workers`).
    pub(crate) const WORKERS: &str = "workers";
    /// Periodic jobs' last ticks (`jobq_schedules`).
    pub(crate) const CRON: &str = "cron";
}

/// Gives the recorder each metric's description and unit (Prometheus'
/// `# HELP` lines), once per process: when the first worker is built or the
/// first job enqueued.
fn describe() {
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| {
        for (name, what) in [
            (
                JOBS_ENQUEUED,
                "Rows inserted by enqueue (duplicates of a key not counted).",
            ),
            (JOBS_CLAIMED, "Rows claimed by workers."),
            (ATTEMPTS, "Attempts that ended, by outcome."),
            (JOBS_CANCELLED, "Jobs cancelled."),
            (
                SETTLES_FENCED_OUT,
                "Settles refused because the attempt no longer held the row.",
            ),
            (
                JOBS_REAPED,
                "Rows with expired leases returned to pending by reapers.",
            ),
            (
                INTERNAL_RETRIES,
                "jobq's own statements re-run after a transient database error.",
            ),
        ] {
            describe_counter!(name, Unit::Count, what);
        }
        for (name, what) in [
            (QUEUE_WAIT_SECONDS, "From a job's run_at to its claim."),
            (RUN_SECONDS, "An attempt's run time."),
            (CLAIM_SECONDS, "One claim statement's latency."),
            (SETTLE_SECONDS, "One settle write's latency."),
        ] {
            describe_histogram!(name, Unit::Seconds, what);
        }
        for (name, what) in [
            (QUEUE_AVAILABLE, "Due pending jobs."),
            (QUEUE_SCHEDULED, "Pending jobs due later."),
            (QUEUE_PROCESSING, "Claimed and not finished."),
            (QUEUE_EXPIRED_LEASES, "Processing rows whose lease expired."),
            (
                QUEUE_OLDEST_AVAILABLE_AGE_SECONDS,
                "How long the oldest due job has waited (queue lag).",
            ),
            (QUEUE_PAUSED, "1 if the queue is paused."),
            (
                QUEUE_LIMIT,
                "The queue's global concurrency limit (0: none).",
            ),
            (
                QUEUE_HELD_BACK,
                "Due jobs held back by the queue's global concurrency limit.",
            ),
            (
                QUEUE_BLOCKED,
                "Jobs waiting behind the running jobs of their concurrency key.",
            ),
            (
                QUEUE_RATE_PER_SECOND,
                "Job starts a second the queue's rate allows (0: none).",
            ),
            (
                QUEUE_RATE_HELD_BACK,
                "Due jobs held back by the queue's rate.",
            ),
            (
                QUEUE_SUCCEEDED_LAST_HOUR,
                "Jobs that succeeded in the last hour.",
            ),
            (
                QUEUE_FAILED_LAST_HOUR,
                "Jobs that failed for good in the last hour.",
            ),
        ] {
            describe_gauge!(name, what);
        }
    });
}

/// A transient error made jobq re-run a `statement` of its own.
pub(crate) fn internal_retry(statement: &'static str) {
    counter!(INTERNAL_RETRIES, STATEMENT => statement).increment(1);
}

/// `count` jobs were cancelled.
pub(crate) fn cancelled(count: u64) {
    if count > 0 {
        counter!(JOBS_CANCELLED).increment(count);
    }
}

/// Enqueue counters by queue, then job name: taken from the recorder once per pair.
type EnqueueCounters = HashMap<String, HashMap<&'static str, Counter>>;

static ENQUEUED: LazyLock<Mutex<EnqueueCounters>> = LazyLock::new(Mutex::default);

/// `count` rows of `job` were inserted into `queue`.
pub(crate) fn enqueued(queue: &str, job: &'static str, count: u64) {
    if count == 0 {
        return;
    }
    describe();
    let mut counters = ENQUEUED.lock().unwrap_or_else(PoisonError::into_inner);
    let by_job = match counters.get_mut(queue) {
        Some(by_job) => by_job,
        None => counters.entry(queue.to_owned()).or_default(),
    };
    by_job
        .entry(job)
        .or_insert_with(|| counter!(JOBS_ENQUEUED, QUEUE => queue.to_owned(), JOB => job))
        .increment(count);
}

/// A worker's handles, taken when it is built.
#[derive(Debug)]
pub(crate) struct WorkerMetrics {
    fenced_out_complete: Counter,
    fenced_out_transition: Counter,
    settle_complete: Histogram,
    settle_transition: Histogram,
}

impl WorkerMetrics {
    pub(crate) fn new() -> Self {
        describe();
        let fenced_out = |settle: Settle| counter!(SETTLES_FENCED_OUT, SETTLE => settle.label());
        let latency = |settle: Settle| histogram!(SETTLE_SECONDS, SETTLE => settle.label());
        Self {
            fenced_out_complete: fenced_out(Settle::Complete),
            fenced_out_transition: fenced_out(Settle::Transition),
            settle_complete: latency(Settle::Complete),
            settle_transition: latency(Settle::Transition),
        }
    }

    /// A settle write of `settle` took `took`.
    pub(crate) fn settled(&self, settle: Settle, took: Duration) {
        match settle {
            Settle::Complete => &self.settle_complete,
            Settle::Transition => &self.settle_transition,
        }
        .record(took.as_secs_f64());
    }

    /// `count` settles of `settle` were fenced out.
    pub(crate) fn fenced_out(&self, settle: Settle, count: u64) {
        match settle {
            Settle::Complete => &self.fenced_out_complete,
            Settle::Transition => &self.fenced_out_transition,
        }
        .increment(count);
    }
}

/// One served queue's handles, and those of every registered job on it.
#[derive(Debug)]
pub(crate) struct QueueMetrics {
    claimed: Counter,
    reaped: Counter,
    queue_wait: Histogram,
    claim_latency: Histogram,
    jobs: HashMap<&'static str, Arc<JobMetrics>>,
    unregistered: Arc<JobMetrics>,
}

impl QueueMetrics {
    /// The handles of `queue`, for the registered job names `jobs`.
    pub(crate) fn new(queue: &str, jobs: impl IntoIterator<Item = &'static str>) -> Self {
        let label = || queue.to_owned();
        Self {
            claimed: counter!(JOBS_CLAIMED, QUEUE => label()),
            reaped: counter!(JOBS_REAPED, QUEUE => label()),
            queue_wait: histogram!(QUEUE_WAIT_SECONDS, QUEUE => label()),
            claim_latency: histogram!(CLAIM_SECONDS, QUEUE => label()),
            jobs: jobs
                .into_iter()
                .map(|job| (job, Arc::new(JobMetrics::new(queue, job))))
                .collect(),
            unregistered: Arc::new(JobMetrics::new(queue, UNREGISTERED)),
        }
    }

    /// A claim took `took` and returned `count` jobs.
    pub(crate) fn claimed(&self, count: usize, took: Duration) {
        self.claim_latency.record(took.as_secs_f64());
        if count > 0 {
            self.claimed.increment(count as u64);
        }
    }

    /// A claimed job had been due for `waited`.
    pub(crate) fn waited(&self, waited: Duration) {
        self.queue_wait.record(waited.as_secs_f64());
    }

    /// The reaper returned `count` orphans.
    pub(crate) fn reaped(&self, count: u64) {
        self.reaped.increment(count);
    }

    /// The handles of job `name` on this queue.
    pub(crate) fn job(&self, name: &str) -> &Arc<JobMetrics> {
        self.jobs.get(name).unwrap_or(&self.unregistered)
    }
}

/// One job name's handles on one queue.
#[derive(Debug)]
pub(crate) struct JobMetrics {
    outcomes: [Counter; Outcome::ALL.len()],
    run_time: Histogram,
}

impl JobMetrics {
    fn new(queue: &str, job: &'static str) -> Self {
        Self {
            outcomes: Outcome::ALL.map(|outcome| {
                counter!(ATTEMPTS, QUEUE => queue.to_owned(), JOB => job, OUTCOME => outcome.label())
            }),
            run_time: histogram!(RUN_SECONDS, QUEUE => queue.to_owned(), JOB => job),
        }
    }

    /// An attempt ran for `took`.
    pub(crate) fn ran(&self, took: Duration) {
        self.run_time.record(took.as_secs_f64());
    }

    /// An attempt ended with `outcome`.
    pub(crate) fn ended(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].increment(1);
    }
}

/// The stats gauges of one [`Jobq`](crate::Jobq) handle and its clones:
/// whose turn it is to read the stats, and which queues the last read listed.
#[derive(Debug, Default)]
pub(crate) struct Gauges(Mutex<GaugeTurn>);

#[derive(Debug, Default)]
struct GaugeTurn {
    /// When a worker on this handle last took its turn.
    last: Option<Instant>,
    /// The queues the last read listed (a queue that disappears has its gauges zeroed).
    queues: Vec<String>,
}

impl Gauges {
    /// Whether the caller reads the stats now: no worker on this handle did
    /// during the last `interval` (less a tenth, for the pauses' jitter).
    /// However many workers a process builds on one handle, the stats are
    /// read once per interval.
    pub(crate) fn take_turn(&self, interval: Duration) -> bool {
        let mut turn = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if turn
            .last
            .is_some_and(|last| now.duration_since(last) < interval.mul_f64(0.9))
        {
            return false;
        }
        turn.last = Some(now);
        true
    }

    /// Sets the per-queue gauges from `stats`; a queue the previous read
    /// listed and this one does not has its gauges set to zero.
    pub(crate) fn set(&self, stats: &Stats) {
        let mut turn = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for queue in &stats.queues {
            let age = queue
                .oldest_available_age
                .map_or(0.0, |age| age.as_secs_f64());
            let values = [
                (QUEUE_AVAILABLE, queue.available as f64),
                (QUEUE_SCHEDULED, queue.scheduled as f64),
                (QUEUE_PROCESSING, queue.processing as f64),
                (QUEUE_EXPIRED_LEASES, queue.expired_leases as f64),
                (QUEUE_OLDEST_AVAILABLE_AGE_SECONDS, age),
                (QUEUE_PAUSED, if queue.paused { 1.0 } else { 0.0 }),
                (QUEUE_LIMIT, f64::from(queue.limit.unwrap_or(0))),
                (QUEUE_HELD_BACK, queue.held_back as f64),
                (QUEUE_BLOCKED, queue.blocked as f64),
                (
                    QUEUE_RATE_PER_SECOND,
                    queue
                        .rate
                        .map_or(0.0, |r| f64::from(r.starts()) / r.period().as_secs_f64()),
                ),
                (QUEUE_RATE_HELD_BACK, queue.rate_held_back as f64),
                (
                    QUEUE_SUCCEEDED_LAST_HOUR,
                    queue.succeeded_last_hour() as f64,
                ),
                (QUEUE_FAILED_LAST_HOUR, queue.failed_last_hour() as f64),
            ];
            for (name, value) in values {
                gauge!(name, QUEUE => queue.queue.clone()).set(value);
            }
        }
        let listed = |name: &String| stats.queues.iter().any(|q| &q.queue == name);
        for gone in turn.queues.iter().filter(|q| !listed(q)) {
            for name in GAUGES {
                gauge!(name, QUEUE => gone.clone()).set(0.0);
            }
        }
        turn.queues = stats.queues.iter().map(|q| q.queue.clone()).collect();
    }
}

/// Every gauge [`Gauges::set`] sets.
const GAUGES: [&str; 13] = [
    QUEUE_AVAILABLE,
    QUEUE_SCHEDULED,
    QUEUE_PROCESSING,
    QUEUE_EXPIRED_LEASES,
    QUEUE_OLDEST_AVAILABLE_AGE_SECONDS,
    QUEUE_PAUSED,
    QUEUE_LIMIT,
    QUEUE_HELD_BACK,
    QUEUE_BLOCKED,
    QUEUE_RATE_PER_SECOND,
    QUEUE_RATE_HELD_BACK,
    QUEUE_SUCCEEDED_LAST_HOUR,
    QUEUE_FAILED_LAST_HOUR,
];
