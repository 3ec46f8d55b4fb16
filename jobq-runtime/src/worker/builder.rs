//! `Worker::builder(jobq)…build()`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use jobq_core::{Job, Registry, States};

use super::pipeline::Observer;
use super::settings::{QueueSpec, Settings};
use super::supervisor::{Parts, Worker};
use super::upkeep::cron::CronSpec;
use crate::error::{ConfigError, Result};
use crate::handle::Jobq;
use crate::handle::{validate_job_name, validate_queue};
use crate::seam::{JobLayer, JobLayers};
use crate::types::Enqueue;

/// Most jobs of one queue a worker runs at once. A claim takes up to this
/// many rows in one statement, and on MySQL/MariaDB marks them with an
/// IN-list (padded to 16,384 ids), well below the 65,535 placeholders a
/// prepared statement may have; a concurrency beyond that would make every
/// claim of a deep queue fail.
const MAX_CONCURRENCY: usize = 10_000;

/// Longest lease, reap interval and shutdown timeout: a day. Every claim and
/// heartbeat writes `now + lease` to a DATETIME/TIMESTAMP, which a lease of
/// years would overflow; and a worker that holds a job a day without
/// renewing it has stopped.
const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);
/// Longest poll interval: an hour.
const MAX_POLL: Duration = Duration::from_secs(3600);

/// [`ConfigError::OutOfRange`] unless `min <= value <= max`.
fn within(what: &'static str, value: Duration, min: Duration, max: Duration) -> Result<()> {
    if value < min || value > max {
        return Err(ConfigError::OutOfRange {
            what,
            value,
            min,
            max,
        }
        .into());
    }
    Ok(())
}

/// Builds a [`Worker`]; see [`Worker::builder`].
///
/// ```
/// use std::time::Duration;
/// use jobq_runtime::{job, Jobq, State, Worker};
///
/// /// Where reports go.
/// #[derive(Debug)]
/// struct ReportStore;
///
/// /// Builds the nightly report.
/// #[job(queue = "reports")]
/// async fn nightly_report(store: State<ReportStore>) {
///     let _ = store;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// // A job of a served queue needs a state the builder was not given:
/// let refused = Worker::builder(jobq.clone()).queue("reports", 1).build();
/// assert!(refused.unwrap_err().to_string().contains("ReportStore"));
///
/// let worker = Worker::builder(jobq)
///     .queue("reports", 2)
///     .state(ReportStore)
///     .cron("0 3 * * *", NightlyReport::new()) // 03:00 UTC, one row per tick
///     .lease(Duration::from_secs(60))
///     .shutdown_timeout(Duration::from_secs(10))
///     .build()?;
/// # drop(worker);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    jobq: Jobq,
    queues: Vec<QueueSpec>,
    states: States,
    settings: Settings,
    worker_id: Option<String>,
    cron: Vec<CronSpec>,
    /// How far the cron entries' clock runs ahead of this host's (tests).
    cron_clock: chrono::TimeDelta,
    /// [`cron_catch_up`](Self::cron_catch_up)'s window.
    cron_catch_up: Option<Duration>,
    observer: Option<Observer>,
    layers: JobLayers,
}

impl WorkerBuilder {
    pub(super) fn new(jobq: Jobq) -> Self {
        Self {
            jobq,
            queues: Vec::new(),
            states: States::default(),
            settings: Settings::default(),
            worker_id: None,
            cron: Vec::new(),
            cron_clock: chrono::TimeDelta::zero(),
            cron_catch_up: None,
            observer: None,
            layers: JobLayers::default(),
        }
    }

    /// Serves `queue` with at most `concurrency` jobs running at once
    /// (1 to 10,000). `build` fails if no registered job has this queue as its default.
    pub fn queue(mut self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queues.push(QueueSpec {
            name: queue.into(),
            concurrency,
            checked: true,
        });
        self
    }

    /// Serves `queue` without checking that a registered job defaults to it:
    /// for queues that only receive jobs enqueued with [`Enqueue::queue`](crate::Enqueue::queue).
    pub fn queue_unchecked(mut self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queues.push(QueueSpec {
            name: queue.into(),
            concurrency,
            checked: false,
        });
        self
    }

    /// Enqueues `job` at every tick of the cron `schedule`, in UTC (see
    /// [`cron_in`](Self::cron_in) for a time zone): five
    /// fields (`minute hour day-of-month month day-of-week`, e.g.
    /// `"0 3 * * *"` for 03:00 every day), six with seconds first
    /// (`"*/10 * * * * *"`: every ten seconds), or a nickname such as
    /// `"@hourly"` or `"@daily"` (parsed by the `croner` crate).
    ///
    /// Every worker that schedules a job enqueues it with the idempotency
    /// key `cron:{name}:{tick}` (e.g. `cron:nightly_report:2026-11-30T03:00:00Z`),
    /// so one row exists per tick however many processes run this worker,
    /// with no leader. The row goes to the job's own queue, which some
    /// worker must serve. Ticks pass unenqueued while no worker runs or the
    /// database refuses the enqueue until the next tick is due; they are not
    /// made up later, unless the worker catches up
    /// ([`cron_catch_up`](Self::cron_catch_up)). `build` fails if the
    /// schedule does not parse or the same job is scheduled twice.
    pub fn cron<J>(self, schedule: &str, job: J) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        self.cron_with(schedule, job, Enqueue::new())
    }

    /// [`cron`](Self::cron) with enqueue options (queue, priority, attempts);
    /// the idempotency key is always the tick's.
    pub fn cron_with<J>(mut self, schedule: &str, job: J, options: Enqueue) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        self.cron.push(CronSpec::new(None, schedule, job, options));
        self
    }

    /// [`cron`](Self::cron) with the schedule read in the IANA time zone
    /// `time_zone` (`"Europe/Paris"`, `"America/New_York"`): `"0 3 * * *"`
    /// is 03:00 there, summer and winter. The tick's key stays the UTC
    /// instant, so processes in any zone agree on it.
    ///
    /// Daylight saving time, as Vixie cron: a fixed time a spring-forward
    /// skips (02:30 when 02:00 becomes 03:00) runs right after the gap
    /// (03:00), that day; a fixed time a fall-back repeats runs once, at its
    /// first occurrence; a schedule with a wildcard or a step in its
    /// seconds, minutes or hours (`"*/15 * * * *"`) runs at each time the
    /// wall clock shows — none in the gap, twice in the repeated hour.
    /// `build` fails if the zone is not one of the IANA database's names.
    ///
    /// ```
    /// # use jobq_runtime::{job, Jobq, Worker};
    /// #[job(queue = "mornings")]
    /// async fn morning_report() {}
    ///
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// let jobq = Jobq::connect("sqlite::memory:").await?;
    /// let worker = Worker::builder(jobq)
    ///     .queue("mornings", 1)
    ///     .cron_in("Europe/Paris", "0 8 * * MON-FRI", MorningReport::new())
    ///     .build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub fn cron_in<J>(self, time_zone: &str, schedule: &str, job: J) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        self.cron_in_with(time_zone, schedule, job, Enqueue::new())
    }

    /// [`cron_in`](Self::cron_in) with enqueue options (queue, priority,
    /// attempts); the idempotency key is always the tick's.
    pub fn cron_in_with<J>(
        mut self,
        time_zone: &str,
        schedule: &str,
        job: J,
        options: Enqueue,
    ) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        self.cron
            .push(CronSpec::new(Some(time_zone), schedule, job, options));
        self
    }

    /// Makes this worker's cron schedules catch up: at its start, each
    /// enqueues the ticks that passed since the last one enqueued — by any
    /// process — while no worker ran (a deploy, an outage), if they are
    /// within `window` of now, at most 100 of them (the latest), oldest
    /// first, each keyed by its tick as usual. Off by default: ticks missed
    /// are skipped. The schedules kept in the database
    /// ([`Jobq::put_schedule`](crate::Jobq::put_schedule)) catch up too, at
    /// the worker's start; one changed or resumed while it runs starts from
    /// its next tick (a pause skips ticks, it does not owe them).
    ///
    /// The last tick enqueued is kept in `jobq_schedules`, one row per
    /// schedule, written at each tick by the workers that catch up (one
    /// statement a tick more). At a schedule's first start with a catch-up
    /// nothing is owed. A tick enqueued just before a crash and not yet
    /// recorded is enqueued again at the next start: a duplicate of its key,
    /// unless its row was pruned meanwhile.
    pub fn cron_catch_up(mut self, window: Duration) -> Self {
        self.cron_catch_up = Some(window);
        self
    }

    /// Runs this worker's cron schedules (declared on this builder, and
    /// those kept in the database) by a clock that reads `now` at this call
    /// (and goes on from there at the host's pace): for tests that cross a
    /// daylight saving change. Not for production.
    #[doc(hidden)]
    pub fn cron_clock(mut self, now: chrono::DateTime<chrono::Utc>) -> Self {
        self.cron_clock = now - chrono::Utc::now();
        self
    }

    /// A value handed to handlers that take `State<T>`.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// How long a claim holds a job before another worker may take it over
    /// (default 30 s). Heartbeats renew it while the job runs.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// How often the leases of running jobs are renewed (default: a third of the lease).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.settings.heartbeat = Some(interval);
        self
    }

    /// Turns heartbeats off (for tests of lease expiry).
    #[doc(hidden)]
    pub fn disable_heartbeats(mut self) -> Self {
        self.settings.heartbeats_enabled = false;
        self
    }

    /// How often an idle queue is polled when no enqueue wakes it (default 500 ms).
    ///
    /// Polling adapts: after a claim that found jobs the next poll comes
    /// 1 ms later, and the wait doubles after each claim that finds
    /// nothing, back to this interval. Enqueues in this process and in
    /// others wake idle queues at once; polling is the net under them.
    ///
    /// While the database watcher covers the worker's queues (its wake-up
    /// channel is up: MySQL's waiter, PostgreSQL's `LISTEN`, SQLite's
    /// socket), it finds jobs that come due without a wake-up within about
    /// a second, and an idle queue is polled only every 60 s; an interval
    /// under half a second is kept as set.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.settings.poll = interval;
        self
    }

    /// How often expired leases are looked for (default: a sixth of the lease, jittered ±20 %).
    ///
    /// While the database watcher covers every queue of the worker and
    /// they are idle, it reports expired leases (within about a second)
    /// and the reaper runs then, or every 60 s; an interval under a second
    /// is kept as set.
    pub fn reap_interval(mut self, interval: Duration) -> Self {
        self.settings.reap = Some(interval);
        self
    }

    /// Deletes `done` and `cancelled` jobs once they finished more than
    /// `retention` ago (off by default: rows stay until deleted). The worker
    /// prunes the whole table, every minute or every quarter of the
    /// retention if shorter, 1,000 rows per statement; any number of
    /// workers may do so at once. A pruned job's idempotency key is free
    /// again. See [`Jobq::prune_finished`].
    pub fn prune_finished_after(mut self, retention: Duration) -> Self {
        self.settings.prune_finished = Some(retention);
        self
    }

    /// Deletes `failed` jobs once they failed more than `retention` ago
    /// (off by default: failed rows stay for inspection and
    /// [`Jobq::retry`]). See [`prune_finished_after`](Self::prune_finished_after).
    pub fn prune_failed_after(mut self, retention: Duration) -> Self {
        self.settings.prune_failed = Some(retention);
        self
    }

    /// The deadline of the shutdown [`Worker::run_until`] starts after its
    /// signal, and of the one a dropped [`WorkerHandle`](crate::WorkerHandle)
    /// starts (default 30 s): it returns by then, running jobs getting it
    /// less [`SHUTDOWN_FINAL_WRITES`](crate::SHUTDOWN_FINAL_WRITES) (see
    /// [`WorkerHandle::shutdown`](crate::WorkerHandle::shutdown)).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.settings.shutdown_timeout = timeout;
        self
    }

    /// Most payload bytes each queue holds claimed ahead of free slots
    /// (default [`DEFAULT_CLAIM_AHEAD_BYTES`](crate::DEFAULT_CLAIM_AHEAD_BYTES),
    /// 64 MiB). Claims ahead stop while the buffered payloads reach it, so a
    /// queue of large payloads buffers few; the claims for free slots are
    /// not limited (those jobs start at once).
    pub fn claim_ahead_bytes(mut self, bytes: usize) -> Self {
        self.settings.claim_ahead_bytes = bytes;
        self
    }

    /// Refreshes the per-queue gauges of [`crate::metrics`] (available,
    /// scheduled, processing, expired leases, queue lag, paused, the last
    /// hour's successes and failures) from [`Jobq::stats`] every `interval`
    /// (10 ms to 1 day; 15 s suits a Prometheus scrape). Off by default.
    ///
    /// One read per interval per [`Jobq`] handle, however many workers of
    /// the process are built on it or its clones (the first whose turn
    /// comes reads, for all queues), not one per job: the gauges cost one
    /// stats query per interval.
    pub fn stats_gauges_every(mut self, interval: Duration) -> Self {
        self.settings.stats_gauges = Some(interval);
        self
    }

    /// How often this worker refreshes its row in `jobq_workers` (default
    /// [`DEFAULT_PRESENCE_INTERVAL`](crate::DEFAULT_PRESENCE_INTERVAL),
    /// 10 s; 10 ms to 1 hour): its running count and last-seen time, as
    /// [`Jobq::workers`] reports them. The row expires three intervals
    /// after the last refresh: a worker killed without a shutdown drops
    /// out of [`Jobq::workers`] within that. One UPDATE and one DELETE (of
    /// expired rows) per interval per worker; nothing per job.
    pub fn presence_interval(mut self, interval: Duration) -> Self {
        self.settings.presence = interval;
        self
    }

    /// Reports how each attempt ended to `observer` (`testing`'s drain).
    #[cfg(feature = "testing")]
    pub(crate) fn observer(mut self, observer: Observer) -> Self {
        self.observer = Some(observer);
        self
    }

    /// All of `states` handed to handlers, as [`state`](Self::state) each.
    #[cfg(feature = "testing")]
    pub(crate) fn states(mut self, states: States) -> Self {
        self.states = states;
        self
    }

    /// Runs every attempt's handler call through `layer`, inside the
    /// layers added before: the first added is outermost (see
    /// [`JobLayer`](crate::middleware::JobLayer) and the built-in
    /// [`Logging`](crate::middleware::Logging)).
    pub fn job_layer(mut self, layer: impl JobLayer) -> Self {
        self.layers.push(Arc::new(layer));
        self
    }

    /// The id written to `claimed_by` (default `host:pid:random`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Checks the configuration against the job registry and builds the worker.
    ///
    /// Fails when a duration is out of its range (lease 100 ms to 1 day;
    /// heartbeat interval 1 ms to under the lease; poll interval 1 ms to
    /// 1 hour; reap interval 1 ms to 1 day; shutdown timeout up to 1 day;
    /// retentions up to 100 years; stats gauge interval 10 ms to 1 day;
    /// presence interval 10 ms to 1 hour), no queue is served, a concurrency is 0 or over 10,000, a queue is served
    /// twice, a checked queue has no registered job, a registered job of a
    /// served queue needs a `State<T>` that was not given, two jobs share a
    /// name, a job name (of a served queue or a cron entry) is empty or over
    /// [`MAX_JOB_NAME_LEN`](crate::MAX_JOB_NAME_LEN) bytes, a cron schedule
    /// does not parse, or a job is scheduled twice.
    pub fn build(self) -> Result<Worker> {
        let registry = Registry::from_inventory()?;
        if self.queues.is_empty() {
            return Err(ConfigError::NoQueue.into());
        }
        let mut seen = BTreeSet::new();
        for spec in &self.queues {
            validate_queue(&spec.name).map_err(ConfigError::QueueName)?;
            if spec.concurrency == 0 || spec.concurrency > MAX_CONCURRENCY {
                return Err(ConfigError::Concurrency {
                    queue: spec.name.clone(),
                    concurrency: spec.concurrency,
                    max: MAX_CONCURRENCY,
                }
                .into());
            }
            if !seen.insert(spec.name.as_str()) {
                return Err(ConfigError::QueueServedTwice {
                    queue: spec.name.clone(),
                }
                .into());
            }
            if spec.checked && !registry.iter().any(|r| r.queue == spec.name) {
                let known: BTreeSet<&str> = registry.iter().map(|r| r.queue).collect();
                return Err(ConfigError::UnknownQueue {
                    queue: spec.name.clone(),
                    known: known.into_iter().map(str::to_owned).collect(),
                }
                .into());
            }
        }
        for registration in registry.iter().filter(|r| seen.contains(r.queue)) {
            validate_job_name(registration.name).map_err(ConfigError::JobName)?;
            for requirement in (registration.states)() {
                if !self.states.contains(&requirement) {
                    return Err(ConfigError::MissingState {
                        job: registration.name,
                        definition: registration.definition.to_string(),
                        type_name: requirement.type_name,
                        given: self.states.type_names(),
                    }
                    .into());
                }
            }
        }
        let settings = self.settings;
        let ms = Duration::from_millis(1);
        within(
            "lease",
            settings.lease,
            Duration::from_millis(100),
            MAX_LEASE,
        )?;
        within("poll interval", settings.poll, ms, MAX_POLL)?;
        within("reap interval", settings.reap_interval(), ms, MAX_LEASE)?;
        within(
            "shutdown timeout",
            settings.shutdown_timeout,
            Duration::ZERO,
            MAX_LEASE,
        )?;
        for retention in [settings.prune_finished, settings.prune_failed]
            .into_iter()
            .flatten()
        {
            within("retention", retention, Duration::ZERO, crate::MAX_DELAY)?;
        }
        if let Some(interval) = settings.stats_gauges {
            within(
                "stats gauge interval",
                interval,
                Duration::from_millis(10),
                MAX_LEASE,
            )?;
        }
        within(
            "presence interval",
            settings.presence,
            Duration::from_millis(10),
            MAX_POLL,
        )?;
        if settings.heartbeat_interval() < ms || settings.heartbeat_interval() >= settings.lease {
            return Err(ConfigError::HeartbeatInterval {
                interval: settings.heartbeat_interval(),
                lease: settings.lease,
            }
            .into());
        }
        let mut scheduled = BTreeSet::new();
        let mut entries = Vec::with_capacity(self.cron.len());
        for spec in self.cron {
            validate_job_name(spec.name()).map_err(ConfigError::JobName)?;
            if !scheduled.insert(spec.name().to_owned()) {
                let job = spec.name().to_owned();
                return Err(ConfigError::CronScheduledTwice { job }.into());
            }
            entries.push(spec.parse(self.cron_clock, self.cron_catch_up)?);
        }
        let cron = super::upkeep::cron::Schedules {
            entries,
            stored: super::upkeep::cron::StoredCron {
                clock: self.cron_clock,
                catch_up: self.cron_catch_up,
            },
        };
        let worker_id = self.worker_id.unwrap_or_else(default_worker_id);
        Ok(Worker::new(Parts {
            jobq: self.jobq,
            queues: self.queues,
            registry,
            states: self.states,
            settings,
            worker_id,
            cron,
            observer: self.observer,
            layers: self.layers,
        }))
    }
}

fn default_worker_id() -> String {
    format!(
        "{}:{}:{:04x}",
        gethostname::gethostname().to_string_lossy(),
        std::process::id(),
        rand::random::<u16>()
    )
}

impl Worker {
    /// Starts configuring a worker on `jobq`'s database.
    pub fn builder(jobq: Jobq) -> WorkerBuilder {
        WorkerBuilder::new(jobq)
    }
}
