//! Helpers for testing an application's own jobs (feature `testing`).
//!
//! [`TestJobq`] is a [`Jobq`] of one test's own with the migrations applied
//! — a throwaway in-memory SQLite database, a database of the test's own on
//! a MySQL/MariaDB or PostgreSQL server ([`TestJobq::isolated`]), or the
//! application's own handle ([`TestJobq::wrap`]): hand it to the code under test, then look at what it enqueued
//! ([`TestJobq::enqueued`], [`TestJobq::assert_enqueued`]) and run those jobs
//! ([`TestJobq::drain`]) through a real [`Worker`] — the same
//! claim → run → settle path as in production, with the same retry
//! schedules, timeouts and states — and get back what happened to each
//! attempt as a value. [`perform`] runs one job inline, without a database.
//!
//! ```
//! use jobq_runtime::testing::{Ended, TestJobq};
//! use jobq_runtime::{JobError, State, job};
//!
//! /// Sends messages (here: pretends to).
//! #[derive(Debug, Default)]
//! struct Messenger;
//!
//! /// Greets a new user.
//! #[job(queue = "greetings")]
//! async fn greet(messenger: State<Messenger>, user_id: u64) -> Result<(), JobError> {
//!     let _ = messenger;
//!     if user_id == 0 {
//!         return Err(JobError::permanent("no such user"));
//!     }
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> jobq_runtime::Result<()> {
//! let jobq = TestJobq::new().await?.state(Messenger);
//! // The code under test enqueues through the `Jobq` (`&*jobq`, or `jobq.jobq().clone()`).
//! jobq.enqueue(Greet::new(42)).await?;
//! jobq.enqueue(Greet::new(0)).await?;
//!
//! jobq.assert_enqueued::<Greet>(|job| job.user_id == 42).await;
//! assert_eq!(jobq.enqueued::<Greet>().await?.len(), 2);
//!
//! let drained = jobq.drain("greetings").await?;
//! assert_eq!(drained.succeeded(), 1);
//! let failed = drained.failed().next().expect("one job failed");
//! assert_eq!(failed.ended, Ended::Failed(JobError::permanent("no such user")));
//! assert!(jobq.enqueued::<Greet>().await?.is_empty());
//! # Ok(()) }
//! ```

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use jobq_core::{Job, JobContext, JobError, Registry, States, error_chain};
use tokio::sync::mpsc;

use crate::error::Result;
use crate::handle::Jobq;
use crate::ops::{JobFilter, MAX_PAGE_LEN, Order, Page};
use crate::types::JobStatus;
use crate::worker::Worker;

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The handler returned `Ok`; the job is `done`.
    Succeeded,
    /// It failed and its job went back to `pending`, to run again after the
    /// delay (its retry schedule's, or the one `JobError::retry_in` gave).
    Retried(JobError, Duration),
    /// It asked to run again after the delay (`JobError::snooze`), not
    /// using up an attempt.
    Snoozed(Duration),
    /// It failed its job for good: a permanent error, or the last attempt.
    Failed(JobError),
    /// It was cancelled before it ended (by a shutdown deadline or a lost lease).
    Interrupted,
}

impl From<crate::worker::Ended> for Ended {
    fn from(ended: crate::worker::Ended) -> Self {
        use crate::worker::Ended as E;
        match ended {
            E::Succeeded => Self::Succeeded,
            E::Retried(error, delay) => Self::Retried(error, delay),
            E::Snoozed(delay) => Self::Snoozed(delay),
            E::Failed(error) => Self::Failed(error),
            E::Interrupted => Self::Interrupted,
        }
    }
}

/// A [`Jobq`] for one test, migrated, with the states its
/// [`drain`](Self::drain)s hand to handlers. Derefs to [`Jobq`].
///
/// Three ways to get one, on any backend:
/// - [`new`](Self::new): an in-memory SQLite database of its own, gone
///   with the last clone of the handle; nothing to set up.
/// - [`isolated`](Self::isolated): a database of its own on the
///   MySQL/MariaDB or PostgreSQL server a URL names (a fresh file for
///   SQLite), dropped when the last clone is — for an application whose
///   code enqueues inside its own transactions on that server
///   ([`Jobq::enqueue_in`]): it makes its own tables there too
///   ([`url`](Self::url)), and tests run in parallel, each in its own
///   database.
/// - [`wrap`](Self::wrap): the application's own handle (a pool from
///   `#[sqlx::test]`, say, which is a database per test already).
///
/// Isolation is by database, as `#[sqlx::test]` does, not by a
/// transaction rolled back at the end (Ecto's sandbox under
/// Oban.Testing, River's `rivertest`): a drain runs a real worker, whose
/// claims and settles are its own transactions on its own connections and
/// see only committed rows.
#[derive(Debug, Clone)]
pub struct TestJobq {
    jobq: Jobq,
    states: States,
    database: Option<Arc<Isolated>>,
}

/// A database [`TestJobq::isolated`] made; dropped (or deleted) with it.
#[derive(Debug)]
struct Isolated {
    url: String,
    /// The server's URL and the database's name; `None` for SQLite, whose
    /// file is deleted.
    server: Option<(String, String)>,
    file: Option<std::path::PathBuf>,
}

/// How [`TestJobq::drain_with`] drains a queue.
#[derive(Debug, Clone)]
#[must_use]
pub struct Drain {
    with_scheduled: bool,
    concurrency: usize,
    timeout: Duration,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            with_scheduled: false,
            concurrency: 1,
            timeout: Duration::from_secs(10),
        }
    }
}

impl Drain {
    /// Due jobs only, one at a time, for at most 10 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also runs the jobs scheduled for later — those enqueued with a delay
    /// and those waiting for a retry — as if their time had come, until the
    /// queue has no pending job left (a job that keeps failing runs until
    /// its attempts run out; one that always snoozes, until the timeout).
    pub fn with_scheduled(mut self) -> Self {
        self.with_scheduled = true;
        self
    }

    /// How many jobs run at once (default 1: in claim order).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// How long the drain may take before it panics (default 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// One attempt a drain ran, and how it ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Attempt {
    /// The job's id.
    pub id: i64,
    /// The job's name.
    pub job_name: String,
    /// Which attempt of the job this was, from 1.
    pub attempt: u32,
    /// How it ended.
    pub ended: Ended,
}

/// What a [`TestJobq::drain`] ran: every attempt, in the order they ended.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Drained {
    /// The attempts, in the order they ended.
    pub attempts: Vec<Attempt>,
}

impl Drained {
    /// Attempts that succeeded.
    pub fn succeeded(&self) -> usize {
        self.count(|e| matches!(e, Ended::Succeeded))
    }

    /// Attempts that failed and left their job to run again.
    pub fn retried(&self) -> impl Iterator<Item = &Attempt> {
        self.attempts
            .iter()
            .filter(|a| matches!(a.ended, Ended::Retried(..)))
    }

    /// Attempts that failed their job for good.
    pub fn failed(&self) -> impl Iterator<Item = &Attempt> {
        self.attempts
            .iter()
            .filter(|a| matches!(a.ended, Ended::Failed(_)))
    }

    /// The attempts of job `id`, in order.
    pub fn of(&self, id: i64) -> impl Iterator<Item = &Attempt> {
        self.attempts.iter().filter(move |a| a.id == id)
    }

    fn count(&self, f: impl Fn(&Ended) -> bool) -> usize {
        self.attempts.iter().filter(|a| f(&a.ended)).count()
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Succeeded => f.write_str("succeeded"),
            Self::Retried(error, delay) => write!(f, "retried in {delay:?}: {error}"),
            Self::Snoozed(delay) => write!(f, "snoozed for {delay:?}"),
            Self::Failed(error) => write!(f, "failed: {error}"),
            Self::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl Deref for TestJobq {
    type Target = Jobq;

    fn deref(&self) -> &Jobq {
        &self.jobq
    }
}

impl TestJobq {
    /// A new in-memory SQLite database of its own, migrated.
    pub async fn new() -> Result<Self> {
        Self::wrap(Jobq::connect("sqlite::memory:").await?).await
    }

    /// The application's own handle, on any backend, its tables migrated
    /// (if they are already, nothing changes). Tests that share a database
    /// see each other's jobs: give each its own (`#[sqlx::test]`'s pool
    /// through [`Jobq::from_mysql_pool`] and the like, or
    /// [`isolated`](Self::isolated)).
    pub async fn wrap(jobq: Jobq) -> Result<Self> {
        jobq.migrate().await?;
        Ok(Self {
            jobq,
            states: States::default(),
            database: None,
        })
    }

    /// A new database of this test's own on the server `url` names,
    /// migrated: on MySQL/MariaDB and PostgreSQL it is named after `url`'s
    /// database (`{database}_jobq_{random}`: a user with privileges on
    /// databases of that prefix is enough) and dropped when the last clone
    /// of this `TestJobq` is, also when the test panics; on SQLite it is a
    /// new file in the temporary directory, deleted then. The
    /// application's own tables go there too: connect its pool to
    /// [`url`](Self::url).
    ///
    /// ```no_run
    /// # async fn demo() -> jobq_runtime::Result<()> {
    /// use jobq_runtime::testing::TestJobq;
    ///
    /// let jobq = TestJobq::isolated("mysql://app:secret@127.0.0.1/app_test").await?;
    /// let pool = jobq_runtime::sqlx::MySqlPool::connect(jobq.url().expect("made by isolated")).await?;
    /// // … create the application's tables on `pool`, run the code under
    /// // test (it enqueues with `jobq.enqueue_in(&mut *tx, …)`), drain.
    /// # drop(pool);
    /// # Ok(()) }
    /// ```
    pub async fn isolated(url: &str) -> Result<Self> {
        let suffix = format!("jobq_{:016x}", rand::random::<u64>());
        let database = match crate::Backend::from_url(url) {
            Some(crate::Backend::Sqlite) => {
                let file = std::env::temp_dir().join(format!("{suffix}.db"));
                Isolated {
                    url: format!("sqlite://{}?mode=rwc", file.display()),
                    server: None,
                    file: Some(file),
                }
            }
            _ => {
                let name = match database_of(url) {
                    "" => suffix,
                    database => format!("{database}_{suffix}"),
                };
                crate::store::server_database(url, &name, true).await?;
                Isolated {
                    url: with_database(url, &name),
                    server: Some((url.to_owned(), name)),
                    file: None,
                }
            }
        };
        // From here on the database is dropped with `database`.
        let database = Arc::new(database);
        let jobq = Jobq::connect(&database.url).await?;
        Ok(Self {
            database: Some(database),
            ..Self::wrap(jobq).await?
        })
    }

    /// The URL of the database [`isolated`](Self::isolated) made, for the
    /// application's own pool; `None` for [`new`](Self::new) and
    /// [`wrap`](Self::wrap).
    pub fn url(&self) -> Option<&str> {
        self.database.as_deref().map(|d| d.url.as_str())
    }

    /// Adds a value handed to handlers that take `State<T>`, as
    /// [`WorkerBuilder::state`](crate::WorkerBuilder::state) does.
    #[must_use]
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.states.insert(value);
        self
    }

    /// The handle, to give to the code under test.
    pub fn jobq(&self) -> &Jobq {
        &self.jobq
    }

    /// The states given with [`state`](Self::state), for [`perform`].
    pub fn states(&self) -> &States {
        &self.states
    }

    /// Runs the due jobs of `queue` through a real worker until none is due
    /// and none is running, and returns every attempt it ran (a job retried
    /// with no delay runs again within the same drain). See [`drain_with`](Self::drain_with).
    ///
    /// # Panics
    /// If the queue is not drained within 10 s, or a job of the queue needs
    /// a state that was not given (the worker does not build).
    pub async fn drain(&self, queue: &str) -> Result<Drained> {
        self.drain_with(queue, Drain::new()).await
    }

    /// [`drain`](Self::drain), as `options` say.
    ///
    /// # Panics
    /// If the queue is not drained within the timeout, or a job of the
    /// queue needs a state that was not given (the worker does not build).
    pub async fn drain_with(&self, queue: &str, options: Drain) -> Result<Drained> {
        let (observer, mut observed) = mpsc::unbounded_channel();
        let worker = Worker::builder(self.jobq.clone())
            .queue_unchecked(queue, options.concurrency)
            .states(self.states.clone())
            .poll_interval(Duration::from_millis(5))
            .observer(observer)
            .build()
            .unwrap_or_else(|error| panic!("draining queue `{queue}`: {error}"));
        let handle = worker.start();
        let deadline = tokio::time::Instant::now() + options.timeout;
        let drained = async {
            // Figures are counted at a clock read before the count: an
            // attempt settled in between as a retry due at once (its
            // `run_at` the settle's time, after that clock) reads as
            // scheduled, not due, while no job runs. The drain ends at the
            // second quiet reading in a row: the second one's clock is read
            // after the first one's count, so such a row reads as due.
            let mut quiet = 0;
            loop {
                if options.with_scheduled {
                    self.make_due(queue).await?;
                }
                let stats = self.jobq.stats().await?;
                // With scheduled jobs, any pending one counts: an attempt
                // settled after `make_due` ran leaves a scheduled row.
                let busy = stats.queue(queue).is_some_and(|q| {
                    q.available > 0
                        || q.processing > 0
                        || (options.with_scheduled && q.scheduled > 0)
                });
                if busy {
                    quiet = 0;
                } else {
                    quiet += 1;
                    if quiet == 2 {
                        return Ok::<_, crate::Error>(());
                    }
                    continue;
                }
                if tokio::time::Instant::now() >= deadline {
                    let q = stats.queue(queue);
                    panic!(
                        "queue `{queue}` was not drained within {:?}: {} jobs due, {} scheduled, {} running",
                        options.timeout,
                        q.map_or(0, |q| q.available),
                        q.map_or(0, |q| q.scheduled),
                        q.map_or(0, |q| q.processing),
                    );
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        let result = drained.await;
        handle.shutdown(Duration::from_secs(5)).await?;
        result?;
        let mut attempts = Vec::new();
        while let Ok(o) = observed.try_recv() {
            attempts.push(Attempt {
                id: o.id,
                job_name: o.job_name,
                attempt: o.attempt,
                ended: o.ended.into(),
            });
        }
        Ok(Drained { attempts })
    }

    /// Makes every pending job of `queue` due now.
    async fn make_due(&self, queue: &str) -> Result<u64> {
        self.jobq.store().make_due(queue).await
    }

    /// The payloads of the pending jobs of type `J` on its own queue
    /// (`J::QUEUE`), due or scheduled, oldest first.
    pub async fn enqueued<J: Job>(&self) -> Result<Vec<J>> {
        self.enqueued_on::<J>(J::QUEUE).await
    }

    /// The payloads of the pending jobs of type `J` on `queue`, oldest first.
    ///
    /// # Panics
    /// If a stored payload does not decode into `J`.
    pub async fn enqueued_on<J: Job>(&self, queue: &str) -> Result<Vec<J>> {
        let filter = JobFilter::new()
            .queue(queue)
            .job_name(J::NAME)
            .status(JobStatus::Pending);
        let mut jobs = Vec::new();
        let mut page = Page::first(MAX_PAGE_LEN).order(Order::OldestFirst);
        loop {
            let found = self.jobq.list(&filter, page).await?;
            for info in found.jobs {
                let job = serde_json::from_str(&info.payload).unwrap_or_else(|error| {
                    panic!(
                        "job {} (`{}`) does not decode into its payload type: {error}",
                        info.id,
                        J::NAME
                    )
                });
                jobs.push(job);
            }
            match found.next {
                Some(next) => page = page.after(Some(next)),
                None => return Ok(jobs),
            }
        }
    }

    /// Asserts that a pending job of type `J` on its own queue matches `matches`.
    ///
    /// # Panics
    /// If none does (listing the ones enqueued), or the database fails.
    pub async fn assert_enqueued<J: Job + fmt::Debug>(&self, matches: impl Fn(&J) -> bool) {
        self.assert_enqueued_on::<J>(J::QUEUE, matches).await;
    }

    /// Asserts that a pending job of type `J` on `queue` matches `matches`.
    ///
    /// # Panics
    /// If none does (listing the ones enqueued), or the database fails.
    pub async fn assert_enqueued_on<J: Job + fmt::Debug>(
        &self,
        queue: &str,
        matches: impl Fn(&J) -> bool,
    ) {
        let jobs = self
            .enqueued_on::<J>(queue)
            .await
            .unwrap_or_else(|error| panic!("listing the jobs on queue `{queue}`: {error}"));
        assert!(
            jobs.iter().any(&matches),
            "no pending `{}` job on queue `{queue}` matches; pending there: {jobs:#?}",
            J::NAME
        );
    }
}

/// `url` with its database path replaced by `name` (the query kept).
#[doc(hidden)]
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let host_start = base.find("://").map_or(0, |i| i + 3);
    let head = match base[host_start..].find('/') {
        Some(i) => &base[..host_start + i],
        None => base,
    };
    format!("{head}/{name}{query}")
}

/// The database `url` names (its path, without the query).
#[doc(hidden)]
pub fn database_of(url: &str) -> &str {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    let host_start = base.find("://").map_or(0, |i| i + 3);
    base[host_start..]
        .split_once('/')
        .map_or("", |(_, database)| database)
}

impl Drop for Isolated {
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            for end in ["", "-wal", "-shm"] {
                let mut path = file.clone().into_os_string();
                path.push(end);
                let _ = std::fs::remove_file(path);
            }
        }
        let Some((url, name)) = self.server.take() else {
            return;
        };
        // Drop may run inside the test's runtime, which cannot be blocked
        // on: the statement runs on a thread and runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(crate::store::server_database(&url, &name, false))
                .map_err(|e| format!("{name}: {e}"))
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("jobq testing: could not drop the test database {error}"),
            Err(_) => eprintln!("jobq testing: dropping the test database panicked"),
        }
    }
}

/// Runs `job`'s handler once, inline, with `ctx` and `states` — no database,
/// no worker — and returns its result, with the job's timeout applied. A
/// state the handler needs and `states` lacks is an `Err` naming it, as is
/// a payload that does not round-trip through JSON.
///
/// ```
/// use jobq_runtime::testing::perform;
/// use jobq_runtime::{JobContext, JobMeta, States, job};
///
/// /// Resizes an image.
/// #[job(queue = "images")]
/// async fn resize(ctx: JobContext, width: u32) -> Result<(), String> {
///     if ctx.attempt() < 2 { Err(format!("busy, try again ({width})")) } else { Ok(()) }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut meta = JobMeta::new(1, "resize", "images");
/// let first = JobContext::detached(meta.clone());
/// assert_eq!(perform(Resize::new(640), first, &States::default()).await.unwrap_err().message(), "busy, try again (640)");
/// meta.attempt = 2;
/// assert!(perform(Resize::new(640), JobContext::detached(meta), &States::default()).await.is_ok());
/// # }
/// ```
///
/// # Panics
/// If `J` has no registration (it is not a `#[job]`), or two jobs share its name.
pub async fn perform<J: Job>(
    job: J,
    ctx: JobContext,
    states: &States,
) -> std::result::Result<(), JobError> {
    let registry = Registry::from_inventory().unwrap_or_else(|error| panic!("{error}"));
    let registration = registry
        .get(J::NAME)
        .unwrap_or_else(|| panic!("job `{}` is not registered (is it a #[job]?)", J::NAME));
    let payload = serde_json::to_string(&job)
        .map_err(|error| JobError::permanent(format!("payload does not serialize: {error}")))?;
    let attempt = (registration.run)(ctx, &payload, states)
        .map_err(|error| JobError::permanent(error_chain(&error)))?;
    match registration.timeout {
        Some(limit) => tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or_else(|_| Err(JobError::timed_out(limit))),
        None => attempt.await,
    }
}
