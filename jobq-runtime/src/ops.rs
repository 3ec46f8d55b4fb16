//! What operating jobq reads and does: figures of every queue
//! ([`Stats`]), listing and bulk actions ([`JobFilter`], [`Page`],
//! [`JobPage`]), and the server check ([`DoctorReport`]). The
//! [`Jobq`](crate::Jobq) methods that return them are in `handle.rs`; each
//! backend serves them from its own folder in `store/`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::types::{JobInfo, JobStatus};

/// Finished rows (`done`, `failed`, `cancelled`) of one queue are counted
/// up to this many per status, so that [`Jobq::stats`](crate::Jobq::stats)
/// costs the same with a year of history as with a day: a count equal to the
/// cap means "at least this many".
pub const STATS_FINISHED_CAP: u64 = 10_000;

/// Minutes of history in [`QueueStats::succeeded_per_minute`] and
/// [`QueueStats::failed_per_minute`].
pub const STATS_MINUTES: usize = 60;

/// The figures of every queue at one moment, read in one call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// When they were read, by the database's clock (the application's on SQLite).
    pub taken_at: DateTime<Utc>,
    /// Every queue with a pending or processing job, a job finished in the
    /// last hour, finished rows of any age, or a pause; by name.
    pub queues: Vec<QueueStats>,
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
    /// `pending` jobs that are due: runnable now.
    pub available: u64,
    /// `pending` jobs due later (delayed, or waiting out a retry backoff).
    pub scheduled: u64,
    /// Claimed and not finished (`processing`), expired leases included.
    pub processing: u64,
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
}

impl QueueStats {
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

/// Which jobs [`Jobq::list`](crate::Jobq::list),
/// [`Jobq::count_where`](crate::Jobq::count_where),
/// [`Jobq::retry_where`](crate::Jobq::retry_where) and
/// [`Jobq::cancel_where`](crate::Jobq::cancel_where) apply to: every field
/// set must match (none set: every job).
///
/// ```
/// use jobq_runtime::{JobFilter, JobStatus};
/// let failed_mail = JobFilter::new().queue("mail").status(JobStatus::Failed);
/// # let _ = failed_mail;
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

    /// Only jobs enqueued in `[from, before)`; either end may be open.
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
