//! What operating jobq reads and does: figures of every queue
//! ([`Stats`]), listing and bulk actions ([`JobFilter`], [`Page`],
//! [`JobPage`]), and the server check ([`DoctorReport`]). The
//! [`Jobq`](crate::Jobq) methods that return them are in `handle.rs`; each
//! backend serves them from its own folder in `store/`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};

use crate::types::{JobInfo, JobStatus};

/// Finished rows (`done`, `failed`, `cancelled`) of one queue are counted
/// up to this many per status, so that [`Jobq::stats`](crate::Jobq::stats)
/// costs the same with a year of history as with a day: a count equal to the
/// cap means "at least this many".
pub const STATS_FINISHED_CAP: u64 = 10_000;

/// Minutes of history in [`QueueStats::succeeded_per_minute`] and
/// [`QueueStats::failed_per_minute`].
pub const STATS_MINUTES: usize = 60;

/// The figures of every queue at one moment, read in one call, from
/// [`Jobq::stats`](crate::Jobq::stats).
///
/// ```
/// use std::time::Duration;
/// use jobq_runtime::{job, Enqueue, Jobq};
///
/// /// Expires a session.
/// #[job(queue = "sessions")]
/// async fn expire(session: u64) {
///     let _ = session;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// jobq.enqueue(Expire::new(1)).await?;
/// let later = Enqueue::new().delay(Duration::from_secs(3600));
/// jobq.enqueue_with(Expire::new(2), later).await?;
///
/// let stats = jobq.stats().await?;
/// let sessions = stats.queue("sessions").expect("a queue with pending jobs");
/// assert_eq!((sessions.available, sessions.scheduled, sessions.processing), (1, 1, 0));
/// assert!(sessions.oldest_available_age.is_some()); // the queue's lag
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// When they were read, by the database's clock (the application's on SQLite).
    pub taken_at: DateTime<Utc>,
    /// Every queue with a pending or processing job, a job finished in the
    /// last hour, finished rows of any age, a pause, or a live worker
    /// serving it; by name.
    pub queues: Vec<QueueStats>,
    /// The rates of concurrency keys ([`Jobq::set_key_rate`](crate::Jobq::set_key_rate)),
    /// by key: the most starts of a key's jobs per period, whatever their queue.
    pub key_rates: Vec<(String, crate::options::Rate)>,
}

impl Stats {
    /// The figures of `queue`, if it is known.
    pub fn queue(&self, queue: &str) -> Option<&QueueStats> {
        self.queues.iter().find(|q| q.queue == queue)
    }
}

/// The figures of one queue. The three to alert on are
/// [`oldest_available_age`](Self::oldest_available_age) (queue lag),
/// [`expired_leases`](Self::expired_leases) and
/// [`processing`](Self::processing) (claimed and not finished).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Whether workers are told not to claim from it ([`Jobq::pause`](crate::Jobq::pause)).
    pub paused: bool,
    /// How many live workers serve it ([`Jobq::workers`](crate::Jobq::workers)).
    pub workers: usize,
    /// Its global concurrency limit ([`Jobq::set_queue_limit`](crate::Jobq::set_queue_limit)):
    /// at most this many of its jobs `processing` at once, across every worker.
    pub limit: Option<u32>,
    /// Due jobs the limit holds back: [`available`](Self::available) while
    /// the jobs holding leases fill the limit, else 0.
    pub held_back: u64,
    /// Its rate limit ([`Jobq::set_queue_rate`](crate::Jobq::set_queue_rate)):
    /// at most so many job starts per period, across every worker.
    pub rate: Option<crate::options::Rate>,
    /// Due jobs the rate holds back: those of
    /// [`available`](Self::available) beyond the starts the rate allows
    /// at [`Stats::taken_at`] (with a burst of 1, all but one of them, or
    /// all while the last start is less than an interval ago).
    pub rate_held_back: u64,
    /// `pending` jobs that are due: runnable now.
    pub available: u64,
    /// `pending` jobs due later (delayed, or waiting out a retry backoff).
    pub scheduled: u64,
    /// Claimed and not finished (`processing`), expired leases included.
    pub processing: u64,
    /// Jobs waiting behind the running jobs of their concurrency key
    /// (`blocked`, see [`Enqueue::concurrency_key`](crate::Enqueue::concurrency_key)).
    pub blocked: u64,
    /// `processing` rows whose lease has expired: their worker died or is
    /// stuck; a reaper returns them to `pending`.
    pub expired_leases: u64,
    /// How long the oldest due `pending` job has been due (now − its
    /// `run_at`): the queue's lag. `None` when nothing is due.
    pub oldest_available_age: Option<Duration>,
    /// `done` rows, counted up to [`STATS_FINISHED_CAP`].
    pub done: u64,
    /// `failed` rows, counted up to [`STATS_FINISHED_CAP`].
    pub failed: u64,
    /// `cancelled` rows, counted up to [`STATS_FINISHED_CAP`].
    pub cancelled: u64,
    /// Jobs that succeeded in each of the last [`STATS_MINUTES`] minutes,
    /// oldest first; the last entry is the minute now running.
    pub succeeded_per_minute: Vec<u64>,
    /// Jobs that failed for good in each of the last [`STATS_MINUTES`]
    /// minutes, oldest first.
    pub failed_per_minute: Vec<u64>,
    /// The running (`processing`) jobs that have reported progress
    /// ([`JobContext::progress`](jobq_core::JobContext::progress)), by id,
    /// at most [`STATS_PROGRESS_CAP`] of them.
    pub in_progress: Vec<RunningProgress>,
}

/// [`QueueStats::in_progress`] lists at most this many jobs per queue (the
/// lowest ids: the longest running, mostly); `jobq list --status
/// processing` lists them all.
pub const STATS_PROGRESS_CAP: u32 = 20;

/// A running job and the progress it last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunningProgress {
    /// The job's id.
    pub id: i64,
    /// Its job name.
    pub job_name: String,
    /// Its attempt running now (from 1).
    pub attempt: u32,
    /// What it last reported.
    pub progress: crate::types::JobProgress,
}

impl RunningProgress {
    /// The entry of a listed job, if it is running and has reported progress.
    pub(crate) fn of(job: JobInfo) -> Option<Self> {
        (job.status == JobStatus::Processing).then_some(())?;
        Some(Self {
            id: job.id,
            attempt: job.attempts,
            progress: job.progress?,
            job_name: job.job_name,
        })
    }
}

impl QueueStats {
    /// Whether it is paused, served by live workers (how many), or served
    /// by none: jobs enqueued to it wait.
    pub fn state(&self) -> QueueState {
        if self.paused {
            QueueState::Paused
        } else if self.workers > 0 {
            QueueState::Served(self.workers)
        } else {
            QueueState::NoWorker
        }
    }

    /// All `pending` jobs, due or not.
    pub fn pending(&self) -> u64 {
        self.available + self.scheduled
    }

    /// Jobs that succeeded in the last minute (the one now running).
    pub fn succeeded_last_minute(&self) -> u64 {
        self.succeeded_per_minute.last().copied().unwrap_or(0)
    }

    /// Jobs that succeeded in the last hour.
    pub fn succeeded_last_hour(&self) -> u64 {
        self.succeeded_per_minute.iter().sum()
    }

    /// Jobs that failed for good in the last hour.
    pub fn failed_last_hour(&self) -> u64 {
        self.failed_per_minute.iter().sum()
    }
}

/// Who serves a queue now ([`QueueStats::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueState {
    /// Paused ([`Jobq::pause`](crate::Jobq::pause)): no worker claims from it.
    Paused,
    /// Served by this many live workers.
    Served(usize),
    /// No live worker serves it: its jobs wait.
    NoWorker,
}

impl fmt::Display for QueueState {
    /// `paused`, `served by 1 worker`, `served by 3 workers`, `no worker`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Paused => f.write_str("paused"),
            Self::Served(1) => f.write_str("served by 1 worker"),
            Self::Served(n) => write!(f, "served by {n} workers"),
            Self::NoWorker => f.write_str("no worker"),
        }
    }
}

/// Which jobs [`Jobq::list`](crate::Jobq::list),
/// [`Jobq::count_where`](crate::Jobq::count_where),
/// [`Jobq::retry_where`](crate::Jobq::retry_where) and
/// [`Jobq::cancel_where`](crate::Jobq::cancel_where) apply to: every field
/// set must match (none set: every job).
///
/// ```
/// use jobq_runtime::{job, JobFilter, JobStatus, Jobq, Page};
///
/// /// Pings a host.
/// #[job(queue = "pings")]
/// async fn ping(host: String) {
///     let _ = host;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let a = jobq.enqueue(Ping::new("a.example".into())).await?;
/// jobq.enqueue(Ping::new("b.example".into())).await?;
/// jobq.cancel(a.id).await?;
///
/// let cancelled = JobFilter::new().queue("pings").status(JobStatus::Cancelled);
/// assert_eq!(jobq.count_where(&cancelled).await?, 1);
/// let page = jobq.list(&cancelled, Page::first(10)).await?;
/// assert_eq!(page.jobs[0].id, a.id);
/// assert_eq!(jobq.retry_where(&cancelled).await?, 1); // back to pending
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFilter {
    /// Jobs of this queue.
    pub queue: Option<String>,
    /// Jobs in this status.
    pub status: Option<JobStatus>,
    /// Jobs of this registered name.
    pub job_name: Option<String>,
    /// Jobs whose idempotency key starts with this (byte for byte).
    pub key_prefix: Option<String>,
    /// Jobs enqueued at or after this time.
    pub created_from: Option<DateTime<Utc>>,
    /// Jobs enqueued before this time.
    pub created_before: Option<DateTime<Utc>>,
    /// Jobs with this tag ([`Enqueue::tag`](crate::Enqueue::tag)), read
    /// through the tags' index.
    pub tag: Option<String>,
}

impl JobFilter {
    /// Every job.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only jobs of `queue`.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Only jobs in `status`.
    pub fn status(mut self, status: JobStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only jobs of the registered name `name`.
    pub fn job_name(mut self, name: impl Into<String>) -> Self {
        self.job_name = Some(name.into());
        self
    }

    /// Only jobs whose idempotency key starts with `prefix`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = Some(prefix.into());
        self
    }

    /// Only jobs tagged `tag` (see [`Enqueue::tag`](crate::Enqueue::tag)).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    /// Only jobs enqueued in `[from, before)`; either end may be open.
    ///
    /// Read as a range of ids (ids are handed out in enqueue order), whose
    /// ends are found by a binary search of the primary key; every job
    /// returned was enqueued in the window, and a job whose enqueue time is
    /// out of id order (enqueued by a host whose clock was behind another's)
    /// may be missed near an end.
    pub fn created(mut self, from: Option<DateTime<Utc>>, before: Option<DateTime<Utc>>) -> Self {
        self.created_from = from;
        self.created_before = before;
        self
    }
}

/// Which way a list runs: by id, which is the order jobs were enqueued in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Order {
    /// Most recently enqueued first.
    #[default]
    NewestFirst,
    /// First enqueued first.
    OldestFirst,
}

/// Jobs a [`Page`] holds at most, whatever it asks for.
pub const MAX_PAGE_LEN: u32 = 1000;

/// One page of a list: up to `limit` jobs after `after`, in `order`.
///
/// ```
/// use jobq_runtime::{job, JobFilter, Jobq, Order, Page};
///
/// /// Archives a document.
/// #[job(queue = "archive")]
/// async fn archive(doc: u32) {
///     let _ = doc;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// jobq.enqueue_many((0..5).map(Archive::new)).await?;
///
/// let filter = JobFilter::new().queue("archive");
/// let mut page = Page::first(2).order(Order::OldestFirst);
/// let mut docs = Vec::new();
/// loop {
///     let found = jobq.list(&filter, page).await?;
///     docs.extend(found.jobs.iter().map(|j| j.payload.clone()));
///     match found.next {
///         Some(cursor) => page = page.after(Some(cursor)), // `cursor.to_string()` for a URL
///         None => break,
///     }
/// }
/// assert_eq!(docs, ["{\"doc\":0}", "{\"doc\":1}", "{\"doc\":2}", "{\"doc\":3}", "{\"doc\":4}"]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// Which way.
    pub order: Order,
    /// How many jobs at most (1..=[`MAX_PAGE_LEN`]).
    pub limit: u32,
    /// Where the previous page ended ([`JobPage::next`]); `None`: the start.
    pub after: Option<Cursor>,
}

impl Default for Page {
    fn default() -> Self {
        Self {
            order: Order::NewestFirst,
            limit: 50,
            after: None,
        }
    }
}

impl Page {
    /// The first page of `limit` jobs, newest first.
    pub fn first(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// The same page running the other way.
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The page after `cursor`.
    pub fn after(mut self, cursor: Option<Cursor>) -> Self {
        self.after = cursor;
        self
    }
}

/// Where a page ended: the next page starts after it. Keyset paging (the
/// last id seen), so a page costs the same however deep it is, and rows
/// inserted meanwhile neither shift nor repeat what follows. As text
/// (`Display` / `FromStr`) for URLs and the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor(pub(crate) i64);

impl Cursor {
    /// The id the page ended on.
    pub fn last_id(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Cursor {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Cursor)
    }
}

/// One page of jobs and where the next one starts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobPage {
    /// The jobs, in the page's order.
    pub jobs: Vec<JobInfo>,
    /// The cursor of the next page; `None` when this one is the last.
    pub next: Option<Cursor>,
}

/// What [`Jobq::doctor`](crate::Jobq::doctor) found, check by check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorReport {
    /// Every check, in the order they ran.
    pub checks: Vec<Check>,
}

impl DoctorReport {
    /// The worst status of any check (`Ok` when there are none).
    pub fn worst(&self) -> CheckStatus {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(CheckStatus::Ok)
    }

    /// The check named `name`, if it ran.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// One check of [`DoctorReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Check {
    /// A short stable name (`server_version`, `isolation`, `clock_skew`, …).
    pub name: String,
    /// How it went.
    pub status: CheckStatus,
    /// What was found, in one line.
    pub found: String,
    /// What to do about it, in one line; `None` when the check passed.
    pub advice: Option<String>,
}

/// How a [`Check`] went, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum CheckStatus {
    /// As jobq needs it.
    Ok,
    /// Works, but not as well as it could, or worth a look.
    Warn,
    /// jobq will not work right on it.
    Fail,
}

impl CheckStatus {
    /// `ok`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// The [`Stats`] of one call from what the backend read: one
/// [`QueueStats`] per queue of `figures` (sorted by name), `paused` marked,
/// `limits` and `rates` (with the starts each allows at the window's end)
/// given, each with how many of the `served` queue names (one per
/// live worker serving it) are its own; `key_rates` listed by key. The one
/// place rows become figures, whatever the backend.
pub(crate) fn assemble(
    window: StatsWindow,
    figures: Vec<QueueFigures>,
    paused: &[String],
    limits: &[(String, u32)],
    rates: &[(String, crate::options::Rate, u32)],
    served: &[String],
    mut key_rates: Vec<(String, crate::options::Rate)>,
) -> Stats {
    let mut queues: Vec<QueueStats> = figures
        .into_iter()
        .map(|f| {
            let workers = served.iter().filter(|q| **q == f.queue).count();
            let limit = limits
                .iter()
                .find(|(queue, _)| *queue == f.queue)
                .map(|&(_, n)| n);
            let mut stats = QueueStats {
                workers,
                limit,
                ..queue_stats(window, f, paused)
            };
            // Jobs whose leases are still running hold the limit's slots.
            let running = stats.processing.saturating_sub(stats.expired_leases);
            if limit.is_some_and(|n| running >= u64::from(n)) {
                stats.held_back = stats.available;
            }
            // Due jobs beyond the starts the rate allows now wait for it.
            if let Some(&(_, rate, allowed)) =
                rates.iter().find(|(queue, ..)| *queue == stats.queue)
            {
                stats.rate = Some(rate);
                stats.rate_held_back = stats.available.saturating_sub(u64::from(allowed));
            }
            stats
        })
        .collect();
    queues.sort_by(|a, b| a.queue.cmp(&b.queue));
    key_rates.sort_by(|a, b| a.0.cmp(&b.0));
    Stats {
        taken_at: window.now,
        queues,
        key_rates,
    }
}

/// One queue's [`QueueStats`] from its [`QueueFigures`].
fn queue_stats(window: StatsWindow, figures: QueueFigures, paused: &[String]) -> QueueStats {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let mut stats = QueueStats {
        paused: paused.contains(&figures.queue),
        done: count(figures.finished[0]),
        failed: count(figures.finished[1]),
        cancelled: count(figures.finished[2]),
        succeeded_per_minute: vec![0; STATS_MINUTES],
        failed_per_minute: vec![0; STATS_MINUTES],
        queue: figures.queue,
        ..QueueStats::default()
    };
    for live in figures.live {
        match live.status.as_str() {
            "pending" => {
                stats.available = count(live.due);
                stats.scheduled = count(live.rows - live.due);
                stats.oldest_available_age = live
                    .earliest
                    .filter(|&earliest| earliest <= window.now)
                    .map(|earliest| (window.now - earliest).to_std().unwrap_or_default());
            }
            "processing" => {
                stats.processing = count(live.rows);
                stats.expired_leases = count(live.expired);
            }
            "blocked" => stats.blocked = count(live.rows),
            _ => {}
        }
    }
    for (status, minute, rows) in figures.per_minute {
        let buckets = match status.as_str() {
            "done" => &mut stats.succeeded_per_minute,
            "failed" => &mut stats.failed_per_minute,
            _ => continue,
        };
        // A row that finished after `now` was read (a settle racing this
        // call) counts in the minute now running.
        if let Ok(minute) = usize::try_from(minute) {
            buckets[minute.min(STATS_MINUTES - 1)] += count(rows);
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::LiveFigures;
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn the_window_ends_in_the_minute_now_running() {
        let window = StatsWindow::ending(at("2026-12-01T10:30:45.5Z"));
        assert_eq!(window.since, at("2026-12-01T09:31:00Z"));
        assert_eq!(window.cap, STATS_FINISHED_CAP as i64);
    }

    #[test]
    fn figures_become_queue_stats() {
        let window = StatsWindow::ending(at("2026-12-01T10:30:45Z"));
        let figures = QueueFigures {
            queue: "b".into(),
            live: vec![
                LiveFigures::new(
                    "pending".into(),
                    5,
                    Some(3),
                    Some(3),
                    Some(at("2026-12-01T10:30:40Z")),
                ),
                LiveFigures::new("processing".into(), 2, Some(1), Some(1), None),
            ],
            finished: [7, 8, 9],
            per_minute: vec![
                ("done".into(), 59, 4),
                ("done".into(), 0, 1),
                ("failed".into(), 58, 2),
                ("done".into(), 60, 1),
            ],
        };
        let paused = vec!["a".to_owned()];
        let only_paused = QueueFigures {
            queue: "a".into(),
            ..QueueFigures::default()
        };
        let served = ["b".to_owned(), "a".to_owned(), "b".to_owned()];
        let stats = assemble(
            window,
            vec![figures, only_paused],
            &paused,
            &[],
            &[],
            &served,
            Vec::new(),
        );
        assert_eq!(stats.queues[0].queue, "a");
        assert!(stats.queues[0].paused);
        // Paused wins over the worker serving it.
        assert_eq!(stats.queues[0].state(), super::QueueState::Paused);
        assert_eq!(stats.queues[0].state().to_string(), "paused");
        assert_eq!(stats.queue("b").unwrap().workers, 2);
        assert_eq!(
            stats.queue("b").unwrap().state().to_string(),
            "served by 2 workers"
        );
        assert_eq!(stats.queues[0].pending(), 0);
        let b = stats.queue("b").unwrap();
        assert!(!b.paused);
        assert_eq!((b.available, b.scheduled), (3, 2));
        assert_eq!((b.processing, b.expired_leases), (2, 1));
        assert_eq!(b.oldest_available_age, Some(Duration::from_secs(5)));
        assert_eq!((b.done, b.failed, b.cancelled), (7, 8, 9));
        assert_eq!(b.succeeded_last_minute(), 5);
        assert_eq!(b.succeeded_last_hour(), 6);
        assert_eq!(b.succeeded_per_minute[0], 1);
        assert_eq!(b.failed_per_minute[58], 2);
        assert_eq!(b.failed_last_hour(), 2);
    }

    #[test]
    fn nothing_due_means_no_lag() {
        let window = StatsWindow::ending(at("2026-12-01T10:30:45Z"));
        let figures = QueueFigures {
            queue: "q".into(),
            live: vec![LiveFigures::new(
                "pending".into(),
                1,
                None,
                None,
                Some(at("2026-12-01T11:00:00Z")),
            )],
            ..QueueFigures::default()
        };
        let stats = assemble(window, vec![figures], &[], &[], &[], &[], Vec::new());
        assert_eq!(stats.queues[0].state().to_string(), "no worker");
        assert_eq!(stats.queues[0].oldest_available_age, None);
        assert_eq!(stats.queues[0].scheduled, 1);
    }
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
    /// `pending`, `processing` or `blocked`.
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
