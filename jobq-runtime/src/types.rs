//! Public value types: enqueue options, results, and what `Jobq::job` reports.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::backends;

/// Makes [`Backend`] and its values from the list of backends.
macro_rules! backend_enum {
    (() $(
        $variant:ident($feature:literal) $module:ident::$store:ident {
            $(#[$doc:meta])*
            name: $name:literal,
            schemes: [$($scheme:literal),+],
            $($rest:tt)*
        }
    )*) => {
        /// Which database a [`Jobq`](crate::Jobq) stores its jobs in.
        ///
        /// Every variant exists whatever the crate's features: a backend that is
        /// compiled out is still named (in [`Error::BackendNotCompiled`](crate::Error::BackendNotCompiled)).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Backend {
            $($(#[$doc])* $variant,)*
        }

        impl Backend {
            /// A human name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The Cargo feature of `jobq-runtime` that compiles this backend in.
            pub fn feature(self) -> &'static str {
                match self {
                    $(Self::$variant => $feature,)*
                }
            }

            /// The backend a database URL names by its scheme (`mysql` of
            /// `mysql://…`): the one with that scheme in the list of backends.
            pub(crate) fn from_url(url: &str) -> Option<Self> {
                match url.split(':').next().unwrap_or_default() {
                    $($($scheme)|+ => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

backends::list!(backend_enum);

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobStatus {
    /// Waiting for `run_at` and a free worker.
    Pending,
    /// Claimed by a worker; `run_at` is its lease deadline.
    Processing,
    /// Ran successfully.
    Done,
    /// Attempts exhausted, a permanent error, or a payload that does not decode.
    Failed,
    /// Cancelled by [`Jobq::cancel`](crate::Jobq::cancel).
    Cancelled,
    /// Waiting behind the running jobs of its concurrency key
    /// ([`Enqueue::concurrency_key`]): not claimable until a place of its
    /// key frees up, then `pending`, in enqueue order.
    Blocked,
}

impl JobStatus {
    /// The value stored in the `status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Blocked => "blocked",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "pending" => Self::Pending,
            "processing" => Self::Processing,
            "done" => Self::Done,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "blocked" => Self::Blocked,
            other => return Err(format!("unknown job status `{other}`")),
        })
    }
}

/// What an enqueue did.
///
/// ```
/// use jobq_runtime::{job, Jobq};
///
/// /// Mails an order's invoice, once per order.
/// #[job(queue = "invoices", key = "invoice:{order_id}")]
/// async fn send_invoice(order_id: u64) {
///     let _ = order_id;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let first = jobq.enqueue(SendInvoice::new(9)).await?;
/// let again = jobq.enqueue(SendInvoice::new(9)).await?; // the same key: `invoice:9`
/// assert!(!first.duplicate);
/// assert!(again.duplicate);
/// assert_eq!(again.id, first.id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Enqueued {
    /// The job's id: the new row's, or the existing one's for a duplicate key.
    pub id: i64,
    /// `true` when a job with the same idempotency key already existed and nothing was inserted.
    pub duplicate: bool,
}

/// Options for one enqueue: when, how urgent, where, how many attempts, which key.
///
/// ```
/// use std::time::Duration;
/// use jobq_runtime::{job, Enqueue, Jobq};
///
/// /// Sends a newsletter.
/// #[job(queue = "newsletters")]
/// async fn newsletter(issue: u32) {
///     let _ = issue;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let opts = Enqueue::new()
///     .delay(Duration::from_secs(60))
///     .priority(-5)
///     .queue("newsletters-bulk")
///     .max_attempts(3)
///     .idempotency_key("newsletter:42");
/// let job = jobq.enqueue_with(Newsletter::new(42), opts).await?;
/// let info = jobq.job(job.id).await?.unwrap();
/// assert_eq!(
///     (info.queue.as_str(), info.priority, info.max_attempts),
///     ("newsletters-bulk", -5, 3)
/// );
/// assert!(info.run_at > info.created_at);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Enqueue {
    pub(crate) run_at: RunAt,
    pub(crate) priority: Option<i16>,
    pub(crate) queue: Option<String>,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) unique: Option<jobq_core::Unique>,
    pub(crate) concurrency: Option<(String, u32)>,
    pub(crate) metadata: Option<serde_json::Value>,
    pub(crate) tags: Vec<String>,
}

/// When a job may first run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum RunAt {
    #[default]
    Now,
    After(Duration),
    At(DateTime<Utc>),
}

impl Enqueue {
    /// The job's own defaults: run now, its queue, priority and attempt limit, its key.
    pub fn new() -> Self {
        Self::default()
    }

    /// Not before `delay` from now (the database's clock). A delay over 100
    /// years ([`MAX_DELAY`](crate::MAX_DELAY)) is refused at enqueue.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.run_at = RunAt::After(delay);
        self
    }

    /// Not before this instant. An instant in the past means "now" (one
    /// before 1970 is stored as 1970-01-01T00:00:00Z, which every backend
    /// holds); one more than 100 years ahead ([`MAX_DELAY`](crate::MAX_DELAY))
    /// is refused at enqueue.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = RunAt::At(at);
        self
    }

    /// Smaller runs first; overrides the job's default.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Another queue than the job's default.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Another attempt limit than the job's default (at least 1).
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// The idempotency key: if a job with this key exists, nothing is inserted
    /// and its id is returned. Overrides the key the job's `key` template gives.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Makes the key unique by state and/or period rather than for as
    /// long as its row exists (see [`Unique`](crate::Unique)); overrides
    /// the job's own `#[job(unique = …)]`. The job must have a key.
    ///
    /// ```
    /// use jobq_runtime::{job, Enqueue, Jobq, Unique};
    ///
    /// /// Mails a user their digest.
    /// #[job(queue = "digests", key = "digest:{user_id}")]
    /// async fn digest(user_id: u64) {
    ///     let _ = user_id;
    /// }
    ///
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// let jobq = Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// let active = || Enqueue::new().unique(Unique::while_active());
    /// let first = jobq.enqueue_with(Digest::new(7), active()).await?;
    /// let again = jobq.enqueue_with(Digest::new(7), active()).await?;
    /// assert_eq!((again.id, again.duplicate), (first.id, true));
    /// jobq.cancel(first.id).await?; // no longer pending or processing
    /// let next = jobq.enqueue_with(Digest::new(7), active()).await?;
    /// assert!(!next.duplicate && next.id != first.id);
    /// # Ok(()) }
    /// ```
    pub fn unique(mut self, unique: jobq_core::Unique) -> Self {
        self.unique = Some(unique);
        self
    }

    /// At most `limit` jobs of concurrency key `key` run at once, across
    /// every worker of every process, and they start in enqueue order;
    /// overrides the job's own `#[job(concurrency_key = …, concurrency = …)]`.
    /// A job beyond the limit waits as [`JobStatus::Blocked`] until a job
    /// of its key succeeds, fails for good or is cancelled. A job of the
    /// key that is pending or running holds a place, a job waiting to
    /// retry included: with a limit of 1 the key's jobs run one by one, in
    /// order, each through its retries (see `docs/flow-control.md`).
    ///
    /// ```
    /// use jobq_runtime::{job, Enqueue, JobStatus, Jobq};
    ///
    /// /// Syncs one customer's account.
    /// #[job(queue = "sync")]
    /// async fn sync_account(customer: u64) {
    ///     let _ = customer;
    /// }
    ///
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// let jobq = Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// let one_at_a_time = || Enqueue::new().concurrency_key("customer:7", 1);
    /// let first = jobq.enqueue_with(SyncAccount::new(7), one_at_a_time()).await?;
    /// let second = jobq.enqueue_with(SyncAccount::new(7), one_at_a_time()).await?;
    /// assert_eq!(jobq.job(first.id).await?.unwrap().status, JobStatus::Pending);
    /// assert_eq!(jobq.job(second.id).await?.unwrap().status, JobStatus::Blocked);
    /// # Ok(()) }
    /// ```
    pub fn concurrency_key(mut self, key: impl Into<String>, limit: u32) -> Self {
        self.concurrency = Some((key.into(), limit));
        self
    }

    /// Metadata stored with the job: a JSON object (at most
    /// [`MAX_METADATA_BYTES`](crate::MAX_METADATA_BYTES)), readable from
    /// the handler's [`JobContext::metadata`](crate::JobContext::metadata),
    /// [`JobInfo::metadata`] and `jobq show`. Enqueue middleware may add
    /// to it (trace propagation keeps the enqueuer's trace context here).
    ///
    /// ```
    /// use jobq_runtime::{job, Enqueue, JobFilter, Jobq, Page};
    /// use serde_json::json;
    ///
    /// /// Imports a file.
    /// #[job(queue = "imports", tags = ["import"])]
    /// async fn import(file: String) {
    ///     let _ = file;
    /// }
    ///
    /// # #[tokio::main]
    /// # async fn main() -> jobq_runtime::Result<()> {
    /// let jobq = Jobq::connect("sqlite::memory:").await?;
    /// jobq.migrate().await?;
    /// let options = Enqueue::new()
    ///     .metadata(json!({"requested_by": "ops@example.com"}))
    ///     .tags(["customer:42", "nightly"]);
    /// let id = jobq.enqueue_with(Import::new("a.csv".into()), options).await?.id;
    /// let info = jobq.job(id).await?.unwrap();
    /// assert_eq!(info.tags, ["import", "customer:42", "nightly"]);
    /// assert_eq!(info.metadata.unwrap()["requested_by"], "ops@example.com");
    /// let page = jobq.list(&JobFilter::new().tag("customer:42"), Page::first(10)).await?;
    /// assert_eq!(page.jobs.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Adds a tag (1 to [`MAX_TAG_LEN`](crate::MAX_TAG_LEN) bytes): stored
    /// with the job beside its type's own (`#[job(tags = [...])]`), at most
    /// [`MAX_TAGS`](crate::MAX_TAGS) in all, a repeated one once; listings
    /// filter by tag through an index ([`JobFilter::tag`](crate::JobFilter::tag),
    /// `jobq list --tag`).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Adds each of `tags` (see [`tag`](Self::tag)).
    pub fn tags<T: Into<String>>(mut self, tags: impl IntoIterator<Item = T>) -> Self {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }
}

/// A job as stored, as [`Jobq::job`](crate::Jobq::job) reports it.
///
/// ```
/// use jobq_runtime::{job, JobStatus, Jobq};
///
/// /// Restocks a product.
/// #[job(queue = "stock")]
/// async fn restock(sku: String) {
///     let _ = sku;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let job = jobq.enqueue(Restock::new("A-1".into())).await?;
/// let info = jobq.job(job.id).await?.expect("the row exists");
/// assert_eq!(info.status, JobStatus::Pending);
/// assert_eq!(info.job_name, "restock");
/// assert_eq!(info.payload, r#"{"sku":"A-1"}"#);
/// assert_eq!((info.attempts, info.last_error), (0, None));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobInfo {
    /// Row id.
    pub id: i64,
    /// Queue.
    pub queue: String,
    /// Registered job name.
    pub job_name: String,
    /// The JSON payload as stored.
    pub payload: String,
    /// Where it is in its life.
    pub status: JobStatus,
    /// Smaller runs first.
    pub priority: i16,
    /// Attempts started so far.
    pub attempts: u32,
    /// Attempt limit.
    pub max_attempts: u32,
    /// `pending`: not before; `processing`: the lease deadline; `done`,
    /// `failed`, `cancelled`: when it finished.
    pub run_at: DateTime<Utc>,
    /// Idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// The message of the last failed attempt.
    pub last_error: Option<String>,
    /// The worker that claimed it last.
    pub claimed_by: Option<String>,
    /// When it was claimed last.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When it reached `done`, `failed` or `cancelled`.
    pub finished_at: Option<DateTime<Utc>>,
    /// Its attempts that ended other than in success, oldest first: the
    /// latest [`HISTORY_CAP`] (older ones are dropped as new ones come; the
    /// attempt numbers show the gap). [`timeline`](Self::timeline) adds
    /// the attempt that is running or succeeded. Read by
    /// [`Jobq::job`](crate::Jobq::job); empty in the rows of
    /// [`Jobq::list`](crate::Jobq::list), which leaves it out.
    pub history: Vec<AttemptRecord>,
    /// What its handler returned when it succeeded, as JSON (`None`: not
    /// done, or it returns nothing). Read by [`Jobq::job`](crate::Jobq::job);
    /// left out of the rows of [`Jobq::list`](crate::Jobq::list).
    /// [`Jobq::output`](crate::Jobq::output) reads it typed.
    pub output: Option<String>,
    /// How far its attempt said it was, last ([`JobContext::progress`]):
    /// kept after the attempt ends, replaced by the next attempt's first
    /// report.
    ///
    /// [`JobContext::progress`]: crate::JobContext::progress
    pub progress: Option<JobProgress>,
    /// The metadata it was enqueued with (a JSON object), if any
    /// ([`Enqueue::metadata`]). Read by [`Jobq::job`](crate::Jobq::job);
    /// left out of the rows of [`Jobq::list`](crate::Jobq::list).
    pub metadata: Option<serde_json::Value>,
    /// The tags it was enqueued with ([`Enqueue::tags`], `#[job(tags = [...])]`).
    pub tags: Vec<String>,
}

/// Tags as a row stores them (a JSON array of strings); none for NULL or
/// text that does not read (written by hand).
pub(crate) fn parse_tags(text: Option<&str>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}

/// Metadata as a row stores it (a JSON object); `None` for NULL, a stored
/// text that does not read is kept as a JSON string.
pub(crate) fn parse_metadata(text: Option<String>) -> Option<serde_json::Value> {
    let text = text?;
    Some(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

/// A running job's progress as its handler reported it
/// ([`JobInfo::progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobProgress {
    /// How much is done.
    pub done: u64,
    /// Of how much (0: not known).
    pub total: u64,
    /// What the handler said with it.
    pub note: String,
}

impl JobProgress {
    /// `done` of `total` as a fraction, when `total` is known.
    pub fn fraction(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        (self.total > 0).then(|| self.done as f64 / self.total as f64)
    }

    /// As stored: `{"done":…,"total":…,"note":…}`; `None` if it does not
    /// read (written by hand).
    pub(crate) fn parse(text: Option<&str>) -> Option<JobProgress> {
        #[derive(serde::Deserialize)]
        struct Stored {
            done: u64,
            total: u64,
            #[serde(default)]
            note: String,
        }
        let stored: Stored = serde_json::from_str(text?).ok()?;
        Some(JobProgress {
            done: stored.done,
            total: stored.total,
            note: stored.note,
        })
    }
}

impl fmt::Display for JobProgress {
    /// `40/100 (40%) copying rows`, `40 copying rows` when the total is unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fraction() {
            Some(fraction) => write!(f, "{}/{} ({:.0}%)", self.done, self.total, fraction * 100.0)?,
            None => write!(f, "{}", self.done)?,
        }
        if !self.note.is_empty() {
            write!(f, " {}", self.note)?;
        }
        Ok(())
    }
}

/// How many ended attempts a job's [`history`](JobInfo::history) keeps:
/// past it, the oldest entry goes as each new one comes (each backend's
/// statements that append an entry hold the number too; a test checks
/// they agree).
pub const HISTORY_CAP: usize = 25;

/// One attempt of a job, as its history keeps it (see
/// [`JobInfo::history`] and [`JobInfo::timeline`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptRecord {
    /// Its number (1 for the first; a snoozed attempt's number is used
    /// again by the next, which it did not count against the limit).
    pub attempt: u32,
    /// The worker that ran it (`host:pid:…` by default, as `claimed_by`).
    pub worker: Option<String>,
    /// When it was claimed.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended; `None` while it runs.
    pub ended_at: Option<DateTime<Utc>>,
    /// How it ended: `error`, `panic`, `timeout`, `snooze`, `lease expired`
    /// (its worker stopped renewing it: killed, crashed, cut off), or, in a
    /// [`timeline`](JobInfo::timeline) only, `succeeded`, `running` or
    /// `cancelled`.
    pub outcome: String,
    /// What it said: the error's message (a panic's with where it
    /// happened), cut at 2,000 bytes.
    pub error: Option<String>,
}

impl AttemptRecord {
    /// How long it ran (until now for a running attempt: `None`).
    pub fn duration(&self) -> Option<Duration> {
        (self.ended_at? - self.started_at?).to_std().ok()
    }

    /// The history as stored (a JSON array of objects with `attempt`,
    /// `worker`, `started_us`, `ended_us`, `outcome`, `error`); entries
    /// that do not read (a value written by hand) are left out, never an
    /// error: any row can be inspected.
    pub(crate) fn parse_history(text: Option<&str>) -> Vec<AttemptRecord> {
        #[derive(serde::Deserialize)]
        struct Stored {
            attempt: Option<i64>,
            worker: Option<String>,
            started_us: Option<i64>,
            ended_us: Option<i64>,
            outcome: Option<String>,
            error: Option<String>,
        }
        let Some(text) = text else {
            return Vec::new();
        };
        let entries: Vec<serde_json::Value> = serde_json::from_str(text).unwrap_or_default();
        entries
            .into_iter()
            .filter_map(|entry| serde_json::from_value::<Stored>(entry).ok())
            .map(|e| AttemptRecord {
                attempt: e.attempt.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
                worker: e.worker,
                started_at: e.started_us.and_then(DateTime::from_timestamp_micros),
                ended_at: e.ended_us.and_then(DateTime::from_timestamp_micros),
                outcome: e.outcome.unwrap_or_else(|| "unknown".to_owned()),
                error: e.error,
            })
            .collect()
    }
}

impl JobInfo {
    /// Every attempt, oldest first: the [`history`](Self::history), then
    /// the attempt the row itself describes when the history does not hold
    /// it — `running` (status `processing`), `succeeded` (`done`) or
    /// `cancelled` (cancelled while it ran).
    pub fn timeline(&self) -> Vec<AttemptRecord> {
        let mut timeline = self.history.clone();
        let recorded = self.history.last().map(|r| (r.attempt, r.started_at));
        let last = (self.attempts, self.claimed_at);
        let outcome = match self.status {
            JobStatus::Processing => Some("running"),
            JobStatus::Done => Some("succeeded"),
            JobStatus::Cancelled => Some("cancelled"),
            _ => None,
        };
        if let Some(outcome) = outcome
            && self.claimed_at.is_some()
            && recorded != Some(last)
        {
            timeline.push(AttemptRecord {
                attempt: self.attempts,
                worker: self.claimed_by.clone(),
                started_at: self.claimed_at,
                ended_at: match self.status {
                    JobStatus::Processing => None,
                    _ => self.finished_at,
                },
                outcome: outcome.to_owned(),
                error: None,
            });
        }
        timeline
    }

    /// The payload indented for reading, its keys in the order they are
    /// stored (a map read back would sort them); the text as stored where
    /// it is not one JSON value.
    ///
    /// ```
    /// # fn show(job: &jobq_runtime::JobInfo) {
    /// println!("{}", job.payload_pretty());
    /// # }
    /// ```
    pub fn payload_pretty(&self) -> String {
        pretty_json(&self.payload)
    }

    /// The [`output`](Self::output) indented for reading, as
    /// [`payload_pretty`](Self::payload_pretty) does the payload.
    pub fn output_pretty(&self) -> Option<String> {
        self.output.as_deref().map(pretty_json)
    }

    /// [`metadata`](Self::metadata) as indented JSON, if any.
    pub fn metadata_pretty(&self) -> Option<String> {
        let metadata = self.metadata.as_ref()?;
        serde_json::to_string_pretty(metadata).ok()
    }
}

/// `text` as indented JSON in its own key order, or `text` itself where it
/// is not one JSON value.
fn pretty_json(text: &str) -> String {
    let mut out = Vec::new();
    let mut from = serde_json::Deserializer::from_str(text);
    let mut to = serde_json::Serializer::pretty(&mut out);
    let indented = serde_transcode::transcode(&mut from, &mut to).is_ok() && from.end().is_ok();
    match String::from_utf8(out) {
        Ok(pretty) if indented => pretty,
        _ => text.to_owned(),
    }
}

/// How many jobs of one queue are in each status, from
/// [`Jobq::counts`](crate::Jobq::counts).
///
/// ```
/// use jobq_runtime::{job, Jobq};
///
/// /// Rotates a log file.
/// #[job(queue = "logs")]
/// async fn rotate(file: String) {
///     let _ = file;
/// }
///
/// # #[tokio::main]
/// # async fn main() -> jobq_runtime::Result<()> {
/// let jobq = Jobq::connect("sqlite::memory:").await?;
/// jobq.migrate().await?;
/// let a = jobq.enqueue(Rotate::new("a.log".into())).await?;
/// jobq.enqueue(Rotate::new("b.log".into())).await?;
/// jobq.cancel(a.id).await?;
/// let counts = jobq.counts("logs").await?;
/// assert_eq!((counts.pending, counts.cancelled, counts.total()), (1, 1, 2));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounts {
    /// Waiting to run.
    pub pending: u64,
    /// Claimed by a worker.
    pub processing: u64,
    /// Succeeded.
    pub done: u64,
    /// Failed for good.
    pub failed: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Waiting behind the running jobs of their concurrency key.
    pub blocked: u64,
}

impl QueueCounts {
    /// All jobs of the queue.
    pub fn total(&self) -> u64 {
        self.pending + self.processing + self.done + self.failed + self.cancelled + self.blocked
    }
}

/// A periodic job kept in the database ([`Jobq::put_schedule`](crate::Jobq::put_schedule)):
/// every worker enqueues job `job_name` with `payload` at each tick of
/// `cron`, keyed `cron:{name}:{tick}` as a schedule declared in code is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The schedule's name: the prefix of its ticks' keys (1 to 200 bytes,
    /// as a job name). A schedule declared in code is named after its job.
    pub name: String,
    /// The job enqueued, by name (as [`Jobq::enqueue_json`](crate::Jobq::enqueue_json) takes it).
    pub job_name: String,
    /// The job's payload, JSON (`{}` by default).
    pub payload: String,
    /// The cron expression (five fields, six with seconds first, or a
    /// nickname such as `@daily`).
    pub cron: String,
    /// The IANA time zone the expression is read in; `None`: UTC.
    pub time_zone: Option<String>,
    /// The queue; `None`: the job's default.
    pub queue: Option<String>,
    /// The priority; `None`: the job's default.
    pub priority: Option<i16>,
}

impl Schedule {
    /// Schedule `name`: job `job_name` at each tick of `cron`, in UTC, with
    /// payload `{}` and the job's defaults.
    pub fn new(
        name: impl Into<String>,
        job_name: impl Into<String>,
        cron: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            job_name: job_name.into(),
            payload: "{}".to_owned(),
            cron: cron.into(),
            time_zone: None,
            queue: None,
            priority: None,
        }
    }

    /// The job's payload (JSON).
    #[must_use]
    pub fn payload(mut self, json: impl Into<String>) -> Self {
        self.payload = json.into();
        self
    }

    /// Reads the expression in the IANA time zone `zone`.
    #[must_use]
    pub fn time_zone(mut self, zone: impl Into<String>) -> Self {
        self.time_zone = Some(zone.into());
        self
    }

    /// Enqueues into `queue` rather than the job's default.
    #[must_use]
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Enqueues with `priority` rather than the job's default.
    #[must_use]
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }
}

/// A schedule kept in the database, as [`Jobq::schedules`](crate::Jobq::schedules) reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The schedule.
    pub schedule: Schedule,
    /// Whether it is paused ([`Jobq::pause_schedule`](crate::Jobq::pause_schedule)).
    pub paused: bool,
    /// The last tick recorded by a worker that catches up, if any.
    pub last_tick: Option<DateTime<Utc>>,
    /// When it was last stored, paused or resumed.
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::pretty_json;

    #[test]
    fn a_pretty_payload_keeps_the_stored_key_order() {
        let text = r#"{"zeta":1,"alpha":{"b":[true,null],"a":"x"}}"#;
        assert_eq!(
            pretty_json(text),
            "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"b\": [\n      true,\n      null\n    ],\n    \"a\": \"x\"\n  }\n}"
        );
    }

    #[test]
    fn a_payload_that_is_not_one_json_value_is_shown_as_stored() {
        for text in ["not json", "{\"a\":1} trailing", "{\"a\":", ""] {
            assert_eq!(pretty_json(text), text);
        }
    }
}
