//! Lock behaviour under load on MariaDB/MySQL: enqueuers (single, batched,
//! and racing on a small set of idempotency keys), claimers, a reaper fed by
//! a worker without heartbeats, retries, cancels and re-tries all at once for
//! 8 s (30 s with `JOBQ_CHAOS_LONG=1`). No deadlock or lock-wait timeout may
//! reach a user call or a worker's loop: jobq retries its own transactions
//! (`jobq_runtime::internal_retries()` counts how often), and every job
//! reaches a final state.
//!
//! Run twice: with the pool jobq builds (every session READ COMMITTED), and
//! with a caller's pool whose sessions are REPEATABLE READ (the server
//! default) with a 5 s lock wait timeout, where jobq relies on its
//! per-transaction `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`.
//!
//! `enqueue_in` is not part of the load: inside the caller's transaction jobq
//! never retries, by design, so a deadlock there is the caller's to handle.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{Enqueue, JobContext, JobError, Jobq, Worker, job};
use jobq_tests::sql::Db;
use jobq_tests::{TestDb, unique_queue, wait_until};
use sqlx::Executor;
use sqlx::mysql::MySqlPoolOptions;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Succeeds (85 %), fails twice then succeeds (12 %), or stalls past a 1 s lease (3 %).
#[job(name = "load_work", max_attempts = 3, retry = ["20ms"])]
async fn work(ctx: &JobContext, kind: u8) -> Result<(), JobError> {
    match kind {
        0..=84 => tokio::time::sleep(Duration::from_millis(u64::from(kind % 5))).await,
        85..=96 if ctx.attempt() < 3 => return Err(JobError::retry("planned failure")),
        85..=96 => {}
        _ => tokio::time::sleep(Duration::from_millis(1_500)).await,
    }
    Ok(())
}

/// WARN and ERROR events of jobq, by message.
#[derive(Default)]
struct Warnings(Mutex<BTreeMap<String, u64>>);

impl Warnings {
    fn get() -> &'static Self {
        static WARNINGS: OnceLock<Warnings> = OnceLock::new();
        WARNINGS.get_or_init(Self::default)
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        } else if field.name() == "error" {
            let _ = write!(self.0, " [{value:?}]");
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_owned();
        }
    }
}

struct Counting;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Counting {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() <= tracing::Level::WARN && meta.target().starts_with("jobq_runtime") {
            let mut message = Message(String::new());
            event.record(&mut message);
            *Warnings::get()
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(message.0)
                .or_default() += 1;
        }
    }
}

/// What jobq is expected to warn about under this load: failed attempts,
/// expired leases and the fenced-out settles that follow them.
fn expected(message: &str) -> bool {
    message.starts_with("attempt failed")
        || message.starts_with("lease lost")
        || message.starts_with("settle fenced out")
        || message.starts_with("completed jobs were no longer held")
}

/// Load runs one at a time: `internal_retries()` is per process.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn duration() -> Duration {
    if jobq_tests::chaos::long() {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(8)
    }
}

async fn innodb_deadlocks(db: &Db) -> i64 {
    db.fetch_all::<(String, String)>("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'", &[])
        .await
        .ok()
        .and_then(|rows| rows.first().and_then(|r| r.1.parse().ok()))
        .unwrap_or(-1)
}

/// Runs the load with `handles[i]` for workers and enqueuers; panics on a broken promise.
async fn load(label: &str, handles: Vec<Jobq>) {
    let _serial = SERIAL.lock().await;
    let queues = [unique_queue("load-a"), unique_queue("load-b")];
    let admin = handles[0].clone();
    let db = Db::of(&admin);
    let retries_before = jobq_runtime::internal_retries();
    let deadlocks_before = innodb_deadlocks(&db).await;
    let warnings_before = Warnings::get().snapshot();
    let keys = format!("load-{:08x}", rand::random::<u32>());

    // Workers: three with heartbeats, one without (its stalled jobs expire:
    // the reaper's traffic), each on its own pool.
    let mut workers = Vec::new();
    for (i, jobq) in handles.iter().take(4).enumerate() {
        let mut builder = Worker::builder(jobq.clone())
            .queue_unchecked(&queues[0], 8)
            .queue_unchecked(&queues[1], 8)
            .lease(Duration::from_secs(1))
            .poll_interval(Duration::from_millis(50))
            .reap_interval(Duration::from_millis(100));
        if i == 3 {
            builder = builder.disable_heartbeats();
        }
        workers.push(builder.build().unwrap().start());
    }

    let user_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = Arc::new(AtomicU64::new(0));
    let enqueued = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + duration();
    // Backpressure: enqueuers only read while the backlog is deep, so the
    // drain after the load stays short.
    let backlogged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let monitor = {
        let (admin, queues, backlogged) = (admin.clone(), queues.clone(), Arc::clone(&backlogged));
        tokio::spawn(async move {
            while Instant::now() < until {
                let mut pending = 0;
                for q in &queues {
                    pending += admin.counts(q).await.map_or(0, |c| c.pending);
                }
                backlogged.store(pending > 1_500, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for (t, jobq) in handles.iter().cycle().take(6).enumerate() {
        let (jobq, queues, keys) = (jobq.clone(), queues.clone(), keys.clone());
        let (errors, calls, enqueued, backlogged) = (
            Arc::clone(&user_errors),
            Arc::clone(&calls),
            Arc::clone(&enqueued),
            Arc::clone(&backlogged),
        );
        tasks.push(tokio::spawn(async move {
            let mut recent: Vec<i64> = Vec::new();
            while Instant::now() < until {
                let queue = &queues[rand::random_range(0..2)];
                let on = Enqueue::new().queue(queue);
                let roll = if backlogged.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    99
                } else {
                    rand::random_range(0..100u32)
                };
                let what;
                let result: jobq_runtime::Result<()> = match roll {
                    0..=39 => {
                        what = "enqueue";
                        jobq.enqueue_with(Work::new(rand::random_range(0..100)), on)
                            .await
                            .map(|e| {
                                enqueued.fetch_add(1, Ordering::Relaxed);
                                recent.push(e.id);
                            })
                    }
                    40..=59 => {
                        what = "enqueue_many";
                        let batch = (0..20).map(|_| {
                            (
                                Work::new(rand::random_range(0..100)),
                                Enqueue::new().queue(queue),
                            )
                        });
                        jobq.enqueue_many_with(batch).await.map(|e| {
                            enqueued.fetch_add(e.len() as u64, Ordering::Relaxed);
                        })
                    }
                    60..=69 => {
                        // Batches over 20 shared keys in random order: the
                        // duplicate-key row locks of concurrent batches are
                        // taken in different orders, the classic deadlock.
                        what = "enqueue_many (shared keys)";
                        let mut picked: Vec<u32> = (0..20).collect();
                        for i in (1..picked.len()).rev() {
                            picked.swap(i, rand::random_range(0..=i));
                        }
                        let batch = picked.into_iter().take(8).map(|k| {
                            (
                                Work::new(0),
                                Enqueue::new()
                                    .queue(queue)
                                    .idempotency_key(format!("{keys}:batch:{k}")),
                            )
                        });
                        jobq.enqueue_many_with(batch).await.map(|e| {
                            let new = e.iter().filter(|e| !e.duplicate).count();
                            enqueued.fetch_add(new as u64, Ordering::Relaxed);
                        })
                    }
                    70..=79 => {
                        // Racing on 50 keys: duplicate-key locks between enqueuers.
                        what = "enqueue (shared key)";
                        let key = format!("{keys}:{}", rand::random_range(0..50));
                        jobq.enqueue_with(Work::new(0), on.idempotency_key(key))
                            .await
                            .map(|e| {
                                if !e.duplicate {
                                    enqueued.fetch_add(1, Ordering::Relaxed);
                                }
                            })
                    }
                    80..=87 if !recent.is_empty() => {
                        what = "cancel";
                        let id = recent[rand::random_range(0..recent.len())];
                        jobq.cancel(id).await.map(drop)
                    }
                    88..=95 if !recent.is_empty() => {
                        what = "retry";
                        let id = recent[rand::random_range(0..recent.len())];
                        jobq.retry(id).await.map(drop)
                    }
                    _ => {
                        what = "counts";
                        jobq.counts(queue).await.map(drop)
                    }
                };
                calls.fetch_add(1, Ordering::Relaxed);
                if let Err(error) = result {
                    let mut chain = error.to_string();
                    let mut source = std::error::Error::source(&error);
                    while let Some(cause) = source {
                        chain.push_str(": ");
                        chain.push_str(&cause.to_string());
                        source = cause.source();
                    }
                    errors
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(format!("task {t} {what}: {chain}"));
                }
                if recent.len() > 200 {
                    recent.drain(..100);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("a load task panicked");
    }
    monitor.await.unwrap();
    // Drain: every job reaches a final state (stalled ones after their lease).
    wait_until("every job is final", Duration::from_secs(60), || {
        let (admin, queues) = (admin.clone(), queues.clone());
        async move {
            let mut open = 0;
            for q in &queues {
                let c = admin.counts(q).await.unwrap();
                open += c.pending + c.processing;
            }
            open == 0
        }
    })
    .await;
    for worker in workers {
        worker.shutdown(Duration::from_secs(10)).await.unwrap();
    }

    let mut totals = jobq_runtime::QueueCounts::default();
    let mut reaped = 0;
    for q in &queues {
        let c = admin.counts(q).await.unwrap();
        totals.done += c.done;
        totals.failed += c.failed;
        totals.cancelled += c.cancelled;
        let (n,): (i64,) = db
            .fetch_all::<(i64,)>(
                "SELECT COUNT(*) FROM jobq_jobs WHERE queue = ? AND last_error LIKE 'lease expired%'",
                &[q.as_str().into()],
            )
            .await
            .unwrap()[0];
        reaped += n;
    }
    let retries = jobq_runtime::internal_retries() - retries_before;
    let deadlocks = innodb_deadlocks(&db).await - deadlocks_before;
    let mut unexpected = Vec::new();
    let mut seen = Vec::new();
    for (message, n) in Warnings::get().snapshot() {
        let n = n - warnings_before.get(&message).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        seen.push(format!("{n}× {message}"));
        if !expected(&message) {
            unexpected.push(format!("{n}× {message}"));
        }
    }
    let errors = user_errors
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    println!(
        "lock load `{label}` for {:?}: {} user calls, {} jobs enqueued; done {}, failed {}, cancelled {}; {reaped} reaped after an expired lease; \
         jobq's internal retries {retries}; server deadlocks (all sessions) {deadlocks}; user-call errors {}; unexpected worker warnings {}",
        duration(),
        calls.load(Ordering::Relaxed),
        enqueued.load(Ordering::Relaxed),
        totals.done,
        totals.failed,
        totals.cancelled,
        errors.len(),
        unexpected.len(),
    );
    for line in &seen {
        println!("  jobq warned: {line}");
    }
    assert!(errors.is_empty(), "errors reached user calls: {errors:#?}");
    assert!(
        unexpected.is_empty(),
        "database errors reached the workers' loops: {unexpected:#?}"
    );
    assert!(reaped > 0, "the load exercised the reaper");
    assert!(totals.done > 0);
}

fn init() {
    let _ = tracing_subscriber::registry().with(Counting).try_init();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_no_deadlock_reaches_a_caller_or_a_worker_at_read_committed() {
    init();
    let Some(db) = TestDb::mysql() else { return };
    let mut handles = Vec::new();
    for _ in 0..4 {
        handles.push(Jobq::connect_with(db.url(), 10).await.unwrap());
    }
    handles[0].migrate().await.unwrap();
    load("READ COMMITTED sessions (jobq's pool)", handles).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_no_deadlock_reaches_a_caller_or_a_worker_with_repeatable_read_sessions() {
    init();
    let Some(db) = TestDb::mysql() else { return };
    let mut handles = Vec::new();
    for _ in 0..4 {
        let pool = MySqlPoolOptions::new()
            .max_connections(10)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    conn.execute(
                        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
                         SET SESSION innodb_lock_wait_timeout = 5",
                    )
                    .await?;
                    // MariaDB 10.6.18+/10.11.8+: locking reads of rows changed
                    // after the snapshot fail with 1020 instead of waiting.
                    let _ = conn
                        .execute("SET SESSION innodb_snapshot_isolation = ON")
                        .await;
                    Ok(())
                })
            })
            .connect(db.url())
            .await
            .unwrap();
        let isolation = session_isolation(&pool).await;
        assert_eq!(isolation, "REPEATABLE-READ");
        handles.push(Jobq::from_mysql_pool(pool).await.unwrap());
    }
    handles[0].migrate().await.unwrap();
    load("REPEATABLE READ sessions (caller's pool)", handles).await;
}

/// MariaDB calls it `tx_isolation`, MySQL 8 `transaction_isolation`.
async fn session_isolation(pool: &sqlx::MySqlPool) -> String {
    for sql in ["SELECT @@tx_isolation", "SELECT @@transaction_isolation"] {
        if let Ok(level) = sqlx::query_scalar::<_, String>(sql).fetch_one(pool).await {
            return level;
        }
    }
    panic!("no isolation level variable")
}
