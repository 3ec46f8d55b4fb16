//! Shared harness of jobq's integration tests: real databases from the
//! environment, unique queues per test, a recorder of handler runs, and
//! waiting on conditions with deadlines.
//!
//! - MySQL/MariaDB from `JOBQ_MYSQL_URL`, PostgreSQL from `JOBQ_POSTGRES_URL`:
//!   when unset the test is skipped, except under `CI=true`, where it fails.
//! - SQLite: a new file in a temporary directory per test.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{Backend, JobInfo, JobStatus, Jobq};
use tokio::sync::Notify;

pub mod chaos;
pub mod services;
pub mod sql;

/// A database for one test.
#[derive(Debug)]
pub struct TestDb {
    backend: Backend,
    url: String,
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

    /// A fresh SQLite file.
    pub fn sqlite() -> Option<Self> {
        init_tracing();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("jobq.db").display());
        Some(Self {
            backend: Backend::Sqlite,
            url,
            _dir: Some(dir),
        })
    }

    /// Which backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The connection URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new handle with its own pool, migrated.
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

/// Polls `condition` every 10 ms until it holds or `deadline` passes;
/// panics with `what` on timeout.
pub async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if condition().await {
            return;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until job `id` has `status`; returns its row.
pub async fn wait_for_status(
    jobq: &Jobq,
    id: i64,
    status: JobStatus,
    deadline: Duration,
) -> JobInfo {
    let start = Instant::now();
    loop {
        let info = jobq.job(id).await.expect("job").expect("job exists");
        if info.status == status {
            return info;
        }
        let last = info;
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for job {id} to be {status}; last seen: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One run of a handler.
#[derive(Debug, Clone)]
pub struct Run {
    /// The attempt number the handler saw.
    pub attempt: u32,
    /// When it started.
    pub at: Instant,
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

/// Instantiates each `async fn test(db: TestDb)` of the calling file once per
/// backend, as `mysql::test`, `postgres::test` and `sqlite::test`.
#[macro_export]
macro_rules! on_every_backend {
    ($($test:ident),* $(,)?) => {
        $crate::on_every_backend!(@backend mysql, $($test),*);
        $crate::on_every_backend!(@backend postgres, $($test),*);
        $crate::on_every_backend!(@backend sqlite, $($test),*);
    };
    (@backend $backend:ident, $($test:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    if let Some(db) = $crate::TestDb::$backend() {
                        super::$test(db).await;
                    }
                }
            )*
        }
    };
}
