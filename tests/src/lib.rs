//! Shared harness of jobq's integration tests: real databases from the
//! environment, unique queues per test, a recorder of handler runs, and
//! waiting on conditions with deadlines.
//!
//! - MySQL/MariaDB from `JOBQ_MYSQL_URL`, PostgreSQL from `JOBQ_POSTGRES_URL`:
//!   when unset the test is skipped, except under `CI=true`, where it fails.
//! - SQLite: a new file in a temporary directory per test.
//! - Waiting: [`wait_until`] (and [`eventually`], [`wait_for_status`] on it)
//!   is the one polling loop, shared with `jobq-runtime`'s own tests.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{Backend, Enqueue, Error, Job, Jobq, Worker, WorkerHandle};
use tokio::sync::Notify;

pub mod chaos;
pub mod galera;
pub mod metrics;
pub mod net;
pub mod process;
pub mod proxy;
pub mod scratch;
pub mod services;
pub mod sql;
pub mod statements;
mod wait;

pub use process::WorkerProcess;
pub use scratch::{ScratchDb, ScratchUser};
pub use wait::{eventually, wait_for_done, wait_for_status, wait_until};

/// A database for one test.
#[derive(Debug)]
pub struct TestDb {
    backend: Backend,
    url: String,
    /// On a Galera cluster, the other nodes' URLs: [`url`](Self::url) hands
    /// them out in turn, so handles a test connects itself (its workers)
    /// spread over the nodes while [`jobq`](Self::jobq) stays on the first.
    spread: Vec<String>,
    turn: std::sync::atomic::AtomicUsize,
    _dir: Option<tempfile::TempDir>,
}

fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("JOBQ_TEST_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
            )
            .with_test_writer()
            .try_init();
    });
}

fn from_env(var: &str, backend: Backend) -> Option<TestDb> {
    init_tracing();
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(TestDb {
            backend,
            url,
            spread: Vec::new(),
            turn: Default::default(),
            _dir: None,
        }),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{var} is not set: under CI=true every backend must be tested, none skipped")
        }
        _ => {
            eprintln!("skipped: {var} is not set");
            None
        }
    }
}

impl TestDb {
    /// MariaDB/MySQL from `JOBQ_MYSQL_URL`.
    pub fn mysql() -> Option<Self> {
        from_env("JOBQ_MYSQL_URL", Backend::MySql)
    }

    /// PostgreSQL from `JOBQ_POSTGRES_URL`.
    pub fn postgres() -> Option<Self> {
        from_env("JOBQ_POSTGRES_URL", Backend::Postgres)
    }

    /// The database at `url`, of `backend` (a test cluster's, say).
    pub fn at(backend: Backend, url: impl Into<String>) -> Self {
        init_tracing();
        Self {
            backend,
            url: url.into(),
            spread: Vec::new(),
            turn: Default::default(),
            _dir: None,
        }
    }

    /// A fresh SQLite file.
    pub fn sqlite() -> Option<Self> {
        init_tracing();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("jobq.db").display());
        Some(Self {
            backend: Backend::Sqlite,
            url,
            spread: Vec::new(),
            turn: Default::default(),
            _dir: Some(dir),
        })
    }

    /// The database `jobq` of the test run's Galera cluster
    /// ([`galera::run_urls`]), or else of this binary's
    /// ([`galera::shared`]): [`jobq`](Self::jobq) connects to node 0 and
    /// [`url`](Self::url) names every node in turn. `None` (skipped, said
    /// on stderr) where Galera cannot run, except under `CI=true`.
    pub fn galera() -> Option<Self> {
        init_tracing();
        if !galera::should_run("this Galera test") {
            return None;
        }
        let spread = galera::run_urls().unwrap_or_else(|| {
            let cluster = galera::shared();
            (0..cluster.len()).map(|i| cluster.url(i)).collect()
        });
        Some(Self {
            backend: Backend::MySql,
            url: spread[0].clone(),
            spread,
            turn: Default::default(),
            _dir: None,
        })
    }

    /// Which backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The connection URL; on Galera each call names the next node
    /// (node 1 first).
    pub fn url(&self) -> &str {
        if self.spread.is_empty() {
            return &self.url;
        }
        let turn = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.spread[(turn + 1) % self.spread.len()]
    }

    /// On Galera, every node's URL, node 0 first; else none.
    pub fn nodes(&self) -> &[String] {
        &self.spread
    }

    /// A new handle with its own pool, migrated (on Galera, on node 0).
    pub async fn jobq(&self) -> Jobq {
        let jobq = Jobq::connect(&self.url).await.expect("connect");
        jobq.migrate().await.expect("migrate");
        jobq
    }
}

/// A queue name no other test uses.
pub fn unique_queue(test: &str) -> String {
    format!("{test}-{:08x}", rand::random::<u32>())
}

/// The arrange step of most tests: a migrated handle, a queue no other test
/// uses (named after `queue`), and a recorder for the handlers' runs.
pub async fn fixture(db: &TestDb, queue: &str) -> (Jobq, String, Recorder) {
    (db.jobq().await, unique_queue(queue), Recorder::default())
}

/// A started worker of `concurrency` slots on `queue` (unchecked), polling
/// every 50 ms.
pub fn start_worker(jobq: &Jobq, queue: &str, concurrency: usize) -> WorkerHandle {
    let builder = Worker::builder(jobq.clone()).queue_unchecked(queue, concurrency);
    let poll = Duration::from_millis(50);
    builder.poll_interval(poll).build().expect("build").start()
}

/// Options that put a job on `queue`.
pub fn on(queue: &str) -> Enqueue {
    Enqueue::new().queue(queue)
}

/// Shuts the worker down, giving its jobs 10 s.
pub async fn stop(handle: WorkerHandle) {
    handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

/// The message of an [`Error::Invalid`]; panics on anything else.
pub fn invalid(result: jobq_runtime::Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::Invalid(message)) => message.to_string(),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

/// Enqueues `jobs` in one batch; their ids, in order.
pub async fn enqueue_ids<J: Job>(
    jobq: &Jobq,
    jobs: impl IntoIterator<Item = (J, Enqueue)>,
) -> Vec<i64> {
    let enqueued = jobq.enqueue_many_with(jobs).await.expect("enqueue_many");
    enqueued.into_iter().map(|e| e.id).collect()
}

/// Asserts that `text` (a message, an error) contains each of `parts`.
#[track_caller]
pub fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "expected {part:?} in: {text}");
    }
}

/// Asserts that `took` lies in `window` (at least its start, less than its
/// end); `what` names the wait.
pub fn assert_took(took: Duration, window: Range<Duration>, what: &str) {
    assert!(
        window.contains(&took),
        "{what} took {took:?}, outside {window:?}"
    );
}

/// One run of a handler.
#[derive(Debug, Clone)]
pub struct Run {
    /// The attempt number the handler saw.
    pub attempt: u32,
    /// When it started.
    pub at: Instant,
}

/// How many of a test's jobs run at once in this process, the most seen,
/// and how many ran; handed to handlers as `State<Concurrency>`.
#[derive(Debug, Clone, Default)]
pub struct Concurrency {
    now: Arc<std::sync::atomic::AtomicU64>,
    most: Arc<std::sync::atomic::AtomicU64>,
    ran: Arc<std::sync::atomic::AtomicU64>,
}

impl Concurrency {
    /// Counts a job running for `hold`, then ran.
    pub async fn run_for(&self, hold: Duration) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        tokio::time::sleep(hold).await;
        self.now.fetch_sub(1, SeqCst);
        self.ran.fetch_add(1, SeqCst);
    }

    /// The most jobs seen running at once.
    pub fn most(&self) -> u64 {
        self.most.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many jobs ran to their end.
    pub fn ran(&self) -> u64 {
        self.ran.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Records handler runs by job id; handed to handlers as `State<Recorder>`.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    runs: Arc<Mutex<HashMap<i64, Vec<Run>>>>,
    changed: Arc<Notify>,
}

impl Recorder {
    /// Notes that job `id` started attempt `attempt`.
    pub fn record(&self, id: i64, attempt: u32) {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id)
            .or_default()
            .push(Run {
                attempt,
                at: Instant::now(),
            });
        self.changed.notify_waiters();
    }

    /// The runs of job `id`.
    pub fn runs(&self, id: i64) -> Vec<Run> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
            .unwrap_or_default()
    }

    /// How many distinct jobs ran, and how many runs in all.
    pub fn totals(&self) -> (usize, usize) {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        (runs.len(), runs.values().map(Vec::len).sum())
    }

    /// Job ids that ran more than once.
    pub fn repeated(&self) -> Vec<i64> {
        let runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        runs.iter()
            .filter(|(_, r)| r.len() > 1)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// Lets a test hold handler runs until it opens them, by key (a job id, an attempt number…).
#[derive(Debug)]
pub struct Gates<K> {
    open: Arc<Mutex<std::collections::HashSet<K>>>,
    changed: Arc<Notify>,
}

impl<K> Clone for Gates<K> {
    fn clone(&self) -> Self {
        Self {
            open: Arc::clone(&self.open),
            changed: Arc::clone(&self.changed),
        }
    }
}

impl<K> Default for Gates<K> {
    fn default() -> Self {
        Self {
            open: Arc::default(),
            changed: Arc::default(),
        }
    }
}

impl<K: Eq + std::hash::Hash> Gates<K> {
    /// Lets the runs waiting on `key` go on, and any later ones.
    pub fn open(&self, key: K) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
        self.changed.notify_waiters();
    }

    /// Waits until `key` is open.
    pub async fn wait(&self, key: K) {
        loop {
            let changed = self.changed.notified();
            if self
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&key)
            {
                return;
            }
            changed.await;
        }
    }
}

/// Instantiates each `async fn test(db: TestDb)` of the calling file on a
/// Galera cluster only, as `galera::test` ([`TestDb::galera`]: the handle
/// on node 0, the handles a test connects itself on every node in turn).
#[macro_export]
macro_rules! on_galera {
    ($($test:ident),* $(,)?) => {
        $crate::on_every_backend!(@backend galera, [tokio {}], $($test),*);
    };
}

/// Instantiates each `async fn test(db: TestDb)` of the calling file once per
/// backend, as `mysql::test`, `postgres::test` and `sqlite::test`.
///
/// A setup hook runs in every instance before the database is opened:
/// `on_every_backend!(setup = hook; a, b)` calls `super::hook()` first (a
/// log counter to install, say). `on_every_backend!(run_with = runner; a, b)`
/// makes each instance a plain `#[test]` that hands the test's future to
/// `super::runner(future)`, for a test that needs its own runtime (a
/// subscriber on every runtime thread, say).
#[macro_export]
macro_rules! on_every_backend {
    (setup = $setup:ident; $($test:ident),* $(,)?) => {
        $crate::on_every_backend!(@each [tokio {$setup}] $($test),*);
    };
    (run_with = $runner:ident; $($test:ident),* $(,)?) => {
        $crate::on_every_backend!(@each [runner $runner] $($test),*);
    };
    ($($test:ident),* $(,)?) => {
        $crate::on_every_backend!(@each [tokio {}] $($test),*);
    };
    (@each $how:tt $($test:ident),*) => {
        $crate::on_every_backend!(@backend mysql, $how, $($test),*);
        $crate::on_every_backend!(@backend postgres, $how, $($test),*);
        $crate::on_every_backend!(@backend sqlite, $how, $($test),*);
    };
    (@backend galera, [tokio $setup:tt], $($test:ident),*) => {
        mod galera {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    $crate::on_every_backend!(@setup $setup);
                    if let Some(db) = $crate::TestDb::galera() {
                        super::$test(db).await;
                    }
                }
            )*
        }
    };
    (@backend $backend:ident, [tokio $setup:tt], $($test:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    $crate::on_every_backend!(@setup $setup);
                    if let Some(db) = $crate::TestDb::$backend() {
                        super::$test(db).await;
                    }
                }
            )*
        }
    };
    (@backend $backend:ident, [runner $runner:ident], $($test:ident),*) => {
        mod $backend {
            $(
                #[test]
                fn $test() {
                    if let Some(db) = $crate::TestDb::$backend() {
                        super::$runner(super::$test(db));
                    }
                }
            )*
        }
    };
    (@setup {}) => {};
    (@setup {$setup:ident}) => {
        super::$setup()
    };
}
