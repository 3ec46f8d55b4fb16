//! The SQLite store through the public API: `Jobq` and `Worker` on a real
//! SQLite file, for what only SQLite does: an in-memory database, the
//! write-ahead log and its checkpointer, the one shared write connection,
//! two OS processes draining one file. What every backend's store promises
//! is in the contract suite (`tests/tests/contract/`), and what the worker
//! builds on it in the conformance suite (`tests/tests/conformance/`), each
//! run on every backend: not here.
//!
//! `#[job]` is not used here: the test job implements `Job` by hand and
//! registers its handler with `inventory`, as the macro's expansion does.

use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use jobq_runtime::{
    Definition, DispatchError, Job, JobContext, JobError, JobInfo, JobRegistration, JobStatus,
    Jobq, RetryPolicy, StateRequirement, States, Worker,
};
use serde::{Deserialize, Serialize};
use sqlx::SqlitePool;

#[allow(dead_code, unreachable_pub)]
#[path = "../../tests/src/wait.rs"]
mod wait;

use wait::eventually;

/// The test job: records every run in `probe_runs` / `probe_counts`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Probe {
    n: i64,
    /// Its idempotency key; a field after `n` in the payload too, which
    /// the trigger of `concurrent_enqueues_each_get_their_own_row_and_a_bad_row_fails_alone`
    /// matches on (`{"n":13,…`).
    key: Option<String>,
}

impl Job for Probe {
    const NAME: &'static str = "sqlite_store_probe";
    const QUEUE: &'static str = "probe";
    const MAX_ATTEMPTS: u32 = 3;

    fn retry_policy() -> RetryPolicy {
        RetryPolicy::fixed(Duration::from_millis(10))
    }

    fn idempotency_key(&self) -> Option<String> {
        self.key.clone()
    }
}

impl Probe {
    fn new(n: i64) -> Self {
        Self {
            n,
            ..Self::default()
        }
    }

    async fn run(self, ctx: JobContext, side: SqlitePool) -> Result<(), JobError> {
        record(&side, &ctx, self.n, "start").await
    }
}

/// The side tables the handler writes to, in the jobs database itself, so
/// that the handler's writes compete for the same write lock as the queue's.
#[derive(Debug, Clone)]
struct Side(SqlitePool);

type JobFuture = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'static>>;

fn run_probe(ctx: JobContext, payload: &str, states: &States) -> Result<JobFuture, DispatchError> {
    let probe: Probe = serde_json::from_str(payload).map_err(|source| DispatchError::Payload {
        job: Probe::NAME,
        source,
    })?;
    let side = states.get::<Side>().ok_or(DispatchError::MissingState {
        job: Probe::NAME,
        type_name: "Side",
    })?;
    Ok(Box::pin(probe.run(ctx, side.0.clone())))
}

fn probe_states() -> Vec<StateRequirement> {
    vec![StateRequirement::of::<Side>()]
}

inventory::submit! {
    JobRegistration::of::<Probe>(
        run_probe,
        probe_states,
        Definition { module_path: module_path!(), function: "probe", file: file!(), line: line!() },
    )
}

async fn record(side: &SqlitePool, ctx: &JobContext, n: i64, phase: &str) -> Result<(), JobError> {
    let now = chrono::Utc::now().timestamp_micros();
    sqlx::query(
        "INSERT INTO probe_runs (job_id, attempt, n, phase, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .bind(ctx.id())
    .bind(ctx.attempt())
    .bind(n)
    .bind(phase)
    .bind(now)
    .execute(side)
    .await
    .map_err(|e| JobError::retry(format!("recording the run failed: {e}")))?;
    if phase == "start" {
        sqlx::query(
            "INSERT INTO probe_counts (job_id, runs) VALUES (?1, 1) \
             ON CONFLICT (job_id) DO UPDATE SET runs = runs + 1",
        )
        .bind(ctx.id())
        .execute(side)
        .await
        .map_err(|e| JobError::retry(format!("counting the run failed: {e}")))?;
    }
    Ok(())
}

/// A migrated database in a fresh temporary file, with the side tables.
struct Db {
    dir: tempfile::TempDir,
    jobq: Jobq,
}

impl Db {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let jobq = Jobq::connect(&url(&dir)).await.unwrap();
        jobq.migrate().await.unwrap();
        create_side_tables(pool(&jobq)).await;
        Self { dir, jobq }
    }

    fn pool(&self) -> &SqlitePool {
        pool(&self.jobq)
    }

    async fn job(&self, id: i64) -> JobInfo {
        self.jobq.job(id).await.unwrap().expect("the job exists")
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql)
            .fetch_one(self.pool())
            .await
            .unwrap()
    }
}

fn url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("jobs.db").display())
}

fn pool(jobq: &Jobq) -> &SqlitePool {
    jobq.sqlite_pool().expect("a SQLite Jobq")
}

async fn create_side_tables(pool: &SqlitePool) {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS probe_runs (seq INTEGER PRIMARY KEY AUTOINCREMENT, \
             job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, n INTEGER NOT NULL, \
             phase TEXT NOT NULL, at INTEGER NOT NULL); \
         CREATE TABLE IF NOT EXISTS probe_counts (job_id INTEGER PRIMARY KEY, runs INTEGER NOT NULL); \
         CREATE TABLE IF NOT EXISTS probe_control (name TEXT PRIMARY KEY);",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn an_in_memory_database_runs_jobs_on_its_single_connection() {
    let jobq = Jobq::connect("sqlite::memory:").await.unwrap();
    jobq.migrate().await.unwrap();
    create_side_tables(pool(&jobq)).await;
    let enqueued = jobq.enqueue_many((0..20).map(Probe::new)).await.unwrap();
    let worker = Worker::builder(jobq.clone())
        .queue(Probe::QUEUE, 4)
        .state(Side(pool(&jobq).clone()))
        .build()
        .unwrap()
        .start();
    let done = eventually(Duration::from_secs(20), || async {
        let mut all = true;
        for e in &enqueued {
            all &= jobq.job(e.id).await.unwrap().unwrap().status == JobStatus::Done;
        }
        all
    })
    .await;
    worker.shutdown(Duration::from_secs(10)).await.unwrap();
    assert!(done, "not every job reached done");
}

#[tokio::test]
async fn the_write_ahead_log_is_copied_into_the_database_off_the_commit_path() {
    let db = Db::new().await;
    // A commit copies the log into the database only past a backstop far
    // above SQLite's default of 1,000 pages.
    let autocheckpoint: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert!(
        autocheckpoint > 1000,
        "wal_autocheckpoint = {autocheckpoint}"
    );

    // About 1,200 pages (~5 MB) into the log in one commit: below the
    // backstop, so only the checkpointer task can move them into the file.
    let file = db.dir.path().join("jobs.db");
    let size = || std::fs::metadata(&file).unwrap().len();
    let before = size();
    sqlx::raw_sql(
        "CREATE TABLE filler (b BLOB NOT NULL); \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200) \
         INSERT INTO filler (b) SELECT randomblob(4000) FROM n;",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let copied = eventually(Duration::from_secs(10), || async {
        size() >= before + 4_000_000
    })
    .await;
    assert!(
        copied,
        "the database file stayed at {} bytes (was {before}): the log was not checkpointed",
        size()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enqueues_each_get_their_own_row_and_a_bad_row_fails_alone() {
    let db = Db::new().await;
    // The row of job 13 is refused by the database.
    sqlx::raw_sql(
        "CREATE TRIGGER reject_13 BEFORE INSERT ON jobq_jobs \
         WHEN NEW.payload LIKE '{\"n\":13,%' BEGIN SELECT RAISE(ABORT, 'row 13 refused'); END;",
    )
    .execute(db.pool())
    .await
    .unwrap();
    // Another connection holds the write lock while the enqueues start, so
    // that they queue up behind it and share writes.
    let mut blocker = db.pool().acquire().await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..40)
        .map(|n| {
            let jobq = db.jobq.clone();
            let started = started.clone();
            tokio::spawn(async move {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                jobq.enqueue(Probe::new(n)).await
            })
        })
        .collect();
    let all_started = eventually(Duration::from_secs(10), || async {
        started.load(std::sync::atomic::Ordering::SeqCst) == 40
    })
    .await;
    assert!(all_started);
    sqlx::raw_sql("COMMIT")
        .execute(&mut *blocker)
        .await
        .unwrap();
    drop(blocker);

    for (n, task) in tasks.into_iter().enumerate() {
        let result = task.await.unwrap();
        if n == 13 {
            let error = result.expect_err("row 13 is refused");
            assert!(
                format!("{:?}", error).contains("row 13 refused"),
                "{error:?}"
            );
            continue;
        }
        let enqueued = result.unwrap_or_else(|e| panic!("enqueue {n} failed: {e:?}"));
        let stored = db.job(enqueued.id).await;
        assert!(
            stored.payload.starts_with(&format!("{{\"n\":{n},")),
            "enqueue {n} got job {} with payload {}",
            enqueued.id,
            stored.payload
        );
    }
    assert_eq!(db.count("SELECT COUNT(*) FROM jobq_jobs").await, 39);
}

/// Set in the child processes of [`two_processes_drain_one_file_running_every_job_once`]:
/// the database file to work on.
const CHILD_DB: &str = "JOBQ_SQLITE_TEST_CHILD_DB";
const CROSS_PROCESS_JOBS: i64 = 1000;

#[tokio::test]
async fn two_processes_drain_one_file_running_every_job_once() {
    if let Ok(url) = std::env::var(CHILD_DB) {
        return drain_as_child(&url).await;
    }
    let db = Db::new().await;
    let url = url(&db.dir);
    let exe = std::env::current_exe().unwrap();
    let children: Vec<tokio::process::Child> = (0..2)
        .map(|_| {
            tokio::process::Command::new(&exe)
                .args([
                    "--exact",
                    "two_processes_drain_one_file_running_every_job_once",
                    "--nocapture",
                ])
                .env(CHILD_DB, &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap()
        })
        .collect();

    // Both workers are running before the first job exists, so both get work.
    assert!(
        eventually(Duration::from_secs(30), || async {
            db.count("SELECT COUNT(*) FROM probe_control WHERE name LIKE 'ready:%'")
                .await
                == 2
        })
        .await,
        "the child processes never became ready"
    );
    let jobs: Vec<Probe> = (0..CROSS_PROCESS_JOBS).map(Probe::new).collect();
    db.jobq.enqueue_many(jobs).await.unwrap();
    sqlx::query("INSERT INTO probe_control (name) VALUES ('go')")
        .execute(db.pool())
        .await
        .unwrap();

    for child in children {
        let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("a child process did not finish in time")
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "child failed: {}\nstdout:\n{}\nstderr:\n{stderr}",
            output.status,
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            !stderr.contains("locked"),
            "child logged a locking error:\n{stderr}"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        if let Some(line) = stdout.lines().find(|l| l.starts_with("child ")) {
            println!("{line}");
        }
        assert!(
            !stderr.contains("WARN") && !stderr.contains("ERROR"),
            "child logged warnings or errors:\n{stderr}"
        );
    }

    let n = CROSS_PROCESS_JOBS;
    for (what, sql, want) in [
        (
            "every job done in one attempt",
            "SELECT COUNT(*) FROM jobq_jobs WHERE status = 'done' AND attempts = 1",
            n,
        ),
        (
            "no job failed an attempt",
            "SELECT COUNT(*) FROM jobq_jobs WHERE last_error IS NOT NULL",
            0,
        ),
        (
            "every job ran once",
            "SELECT COUNT(*) FROM probe_counts WHERE runs = 1",
            n,
        ),
        (
            "no job ran twice",
            "SELECT COALESCE(SUM(runs), 0) FROM probe_counts",
            n,
        ),
        (
            "both processes ran jobs",
            "SELECT COUNT(DISTINCT claimed_by) FROM jobq_jobs",
            2,
        ),
    ] {
        assert_eq!(db.count(sql).await, want, "{what}: {sql}");
    }
}

/// The child's side of the two-process test: a worker of concurrency 8 on
/// the shared file until every job has been settled; warnings go to stderr.
async fn drain_as_child(url: &str) {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let jobq = Jobq::connect(url).await.unwrap();
    jobq.migrate().await.unwrap();
    let pool = pool(&jobq).clone();
    let worker = Worker::builder(jobq.clone())
        .queue(Probe::QUEUE, 8)
        .state(Side(pool.clone()))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let handle = worker.start();
    let handle_id = handle.id().to_owned();
    sqlx::query("INSERT INTO probe_control (name) VALUES (?1)")
        .bind(format!("ready:{}", std::process::id()))
        .execute(&pool)
        .await
        .unwrap();
    let drained = eventually(Duration::from_secs(90), || async {
        let remaining: i64 = sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM probe_control WHERE name = 'go') = 0 \
                 OR EXISTS (SELECT 1 FROM jobq_jobs WHERE status IN ('pending', 'processing'))",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        remaining == 0
    })
    .await;
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
    assert!(drained, "the queue was not drained in time");
    let ran: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_jobs WHERE claimed_by = ?1")
        .bind(handle_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    println!(
        "child {}: ran {ran} jobs, {} internal retries after transient errors",
        std::process::id(),
        jobq_runtime::internal_retries()
    );
}
