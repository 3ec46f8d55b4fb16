//! The PostgreSQL store against a real server: what only PostgreSQL does
//! (its plans, NOTIFY/LISTEN and the listener, row locks under SKIP LOCKED,
//! its chunked batches). Behaviours every backend shares are in the
//! conformance suite (`tests/tests/conformance/`), not here.
//!
//! Reads `JOBQ_POSTGRES_URL` (e.g. `postgres://postgres@127.0.0.1:5432/test`);
//! without it every test is skipped, except under `CI=true`, where a missing
//! URL fails. Tests share one database and run in parallel: each works in
//! queues of its own (name + random suffix).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Definition, DispatchError, Enqueue, Job, JobContext, JobError, JobRegistration, JobStatus,
    Jobq, LeaseError, StateRequirement, States, Worker, WorkerHandle,
};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

#[allow(dead_code, unreachable_pub)]
#[path = "../../tests/src/wait.rs"]
mod wait;

use wait::{wait_for_status, wait_until};

/// The store's claim and reaper statements, exactly as it runs them.
use jobq_runtime::__private::sql::postgres::{CLAIM, COMPLETE, HEARTBEAT, REAP};

// ---------------------------------------------------------------------------
// Jobs (implemented by hand: these tests do not depend on `#[job]`).

type Attempt = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send>>;

/// Records that it ran.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    n: u64,
}

impl Job for Note {
    const NAME: &'static str = "pg_test_note";
}

/// Extends its lease every 20 ms until told it is lost, then waits to be stopped.
#[derive(Debug, Serialize, Deserialize)]
struct Block {}

impl Job for Block {
    const NAME: &'static str = "pg_test_block";
}

/// Enqueued by `enqueue_many` into its own queue, which no worker serves;
/// the key comes from the payload.
#[derive(Debug, Serialize, Deserialize)]
struct Batch {
    n: u64,
    key: Option<String>,
}

impl Job for Batch {
    const NAME: &'static str = "pg_test_batch";
    const QUEUE: &'static str = "pg-test-batch";

    fn idempotency_key(&self) -> Option<String> {
        self.key.clone()
    }
}

fn decode<J: Job>(payload: &str) -> Result<J, DispatchError> {
    serde_json::from_str(payload).map_err(|source| DispatchError::Payload {
        job: J::NAME,
        source,
    })
}

fn no_states() -> Vec<StateRequirement> {
    Vec::new()
}

fn run_note(ctx: JobContext, payload: &str, _: &States) -> Result<Attempt, DispatchError> {
    decode::<Note>(payload)?;
    Ok(Box::pin(async move {
        record(ctx.queue(), ctx.id());
        Ok(())
    }))
}

fn run_block(ctx: JobContext, payload: &str, _: &States) -> Result<Attempt, DispatchError> {
    decode::<Block>(payload)?;
    Ok(Box::pin(async move {
        record(ctx.queue(), ctx.id());
        loop {
            match ctx.extend_lease(Duration::from_secs(3)).await {
                Ok(()) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(LeaseError::Lost) => break,
                Err(error) => return Err(JobError::retry(error)),
            }
        }
        record(ctx.queue(), LEASE_LOST);
        // The worker's heartbeat finds the lease lost too and drops this future.
        ctx.cancelled().await;
        Ok(())
    }))
}

fn run_batch(_: JobContext, payload: &str, _: &States) -> Result<Attempt, DispatchError> {
    decode::<Batch>(payload)?;
    Ok(Box::pin(async { Ok(()) }))
}

macro_rules! register {
    ($job:ty, $run:ident) => {
        inventory::submit! {
            JobRegistration::of::<$job>($run, no_states, Definition {
                module_path: module_path!(),
                function: stringify!($run),
                file: file!(),
                line: line!(),
            })
        }
    };
}

register!(Note, run_note);
register!(Block, run_block);
register!(Batch, run_batch);

/// Recorded by `Block` when `extend_lease` reports the lease lost.
const LEASE_LOST: i64 = -1;

/// Job ids each queue's handlers ran, in order (one entry per attempt).
static RUNS: Mutex<Option<HashMap<String, Vec<i64>>>> = Mutex::new(None);

fn record(queue: &str, id: i64) {
    let mut runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    runs.get_or_insert_with(HashMap::new)
        .entry(queue.to_owned())
        .or_default()
        .push(id);
}

fn runs(queue: &str) -> Vec<i64> {
    let runs = RUNS.lock().unwrap_or_else(PoisonError::into_inner);
    runs.as_ref()
        .and_then(|r| r.get(queue))
        .cloned()
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Helpers.

/// The server to test against, or `None` to skip.
fn url() -> Option<String> {
    match std::env::var("JOBQ_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "JOBQ_POSTGRES_URL is not set but CI=true: the PostgreSQL tests must run in CI; \
             set it, e.g. JOBQ_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test"
        ),
        _ => {
            eprintln!("skipped: set JOBQ_POSTGRES_URL to run the PostgreSQL tests");
            None
        }
    }
}

/// A migrated handle with a pool of `max_connections`, or `None` to skip.
async fn jobq(max_connections: u32) -> Option<Jobq> {
    let url = url()?;
    let jobq = Jobq::connect_with(&url, max_connections)
        .await
        .expect("connect to JOBQ_POSTGRES_URL");
    jobq.migrate().await.expect("migrate");
    Some(jobq)
}

fn pool(jobq: &Jobq) -> &PgPool {
    jobq.pg_pool().expect("a PostgreSQL handle")
}

/// A queue name no other test (or earlier run) uses.
fn unique(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{name}-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn count(pool: &PgPool, queue: &str, status: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM jobq_jobs WHERE queue = $1 AND status = $2")
        .bind(queue)
        .bind(status)
        .fetch_one(pool)
        .await
        .expect("count rows")
}

async fn status(jobq: &Jobq, id: i64) -> JobStatus {
    jobq.job(id)
        .await
        .expect("read job")
        .expect("job exists")
        .status
}

/// A started worker serving `queue` with a 20 ms poll.
fn worker(jobq: &Jobq, queue: &str, concurrency: usize) -> WorkerHandle {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, concurrency)
        .poll_interval(Duration::from_millis(20))
        .build()
        .expect("build worker")
        .start()
}

async fn enqueue_notes(jobq: &Jobq, queue: &str, n: u64) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let enqueued = jobq
            .enqueue_with(Note { n: i }, Enqueue::new().queue(queue))
            .await
            .expect("enqueue");
        ids.push(enqueued.id);
    }
    ids
}

/// `statement`'s plan for `args`, as a custom and as a generic plan.
async fn claim_plans(conn: &mut PgConnection, statement: &str, args: &str) -> [String; 2] {
    let name = unique("plan").replace('-', "_");
    let params = if statement == CLAIM {
        "text, bigint, bigint, bigint, text"
    } else if statement == COMPLETE {
        "bigint[], bigint[]"
    } else if statement == HEARTBEAT {
        "bigint[], bigint[], bigint"
    } else {
        "text, bigint"
    };
    sqlx::raw_sql(&format!("PREPARE {name}({params}) AS {statement}"))
        .execute(&mut *conn)
        .await
        .expect("prepare");
    let mut plans = Vec::new();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::raw_sql(&format!("SET plan_cache_mode = {mode}"))
            .execute(&mut *conn)
            .await
            .expect("set plan_cache_mode");
        let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}({args})"))
            .fetch_all(&mut *conn)
            .await
            .expect("explain");
        plans.push(lines.join("\n"));
    }
    [plans.remove(0), plans.remove(0)]
}

// ---------------------------------------------------------------------------
// The claim.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_reads_the_partial_claim_index_in_order_without_sorting() {
    let Some(jobq) = jobq(2).await else { return };
    let queue = unique("explain-claim");
    sqlx::query(
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts)
         SELECT $1, 'pg_test_note', '{\"n\":0}', (g % 3)::smallint, now() - interval '1 second', 3
           FROM generate_series(1, 3000) AS g",
    )
    .bind(&queue)
    .execute(pool(&jobq))
    .await
    .expect("insert rows");
    sqlx::query("ANALYZE jobq_jobs")
        .execute(pool(&jobq))
        .await
        .expect("analyze");

    let mut conn = pool(&jobq).acquire().await.expect("connection");
    let args = format!("'{queue}', 10, 1, 30000000, 'explain'");
    for plan in claim_plans(&mut conn, CLAIM, &args).await {
        assert!(plan.contains("LockRows"), "{plan}");
        assert!(
            plan.contains("Index Scan using jobq_jobs_claim on jobq_jobs"),
            "the claim must read the partial claim index:\n{plan}"
        );
        assert!(
            !plan.contains("Sort"),
            "the claim must not sort; the index gives its order:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan"),
            "the claim must not scan the table:\n{plan}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_reads_the_partial_lease_index() {
    let Some(jobq) = jobq(2).await else { return };
    let queue = unique("explain-reap");
    let mut conn = pool(&jobq).acquire().await.expect("connection");
    for plan in claim_plans(&mut conn, REAP, &format!("'{queue}', 500")).await {
        assert!(
            plan.contains("Index Scan using jobq_jobs_lease on jobq_jobs"),
            "the reaper must read the partial lease index:\n{plan}"
        );
        assert!(!plan.contains("Sort"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
}

/// Settles and heartbeats join the fence list to the table on the primary
/// key (index lookups, or one hash join), never through the partial lease
/// index: that plan, taken on stale statistics, looped over the fence list
/// for every processing row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settles_and_heartbeats_look_fences_up_by_primary_key() {
    let Some(jobq) = jobq(2).await else { return };
    let queue = unique("explain-settle");
    sqlx::query(
        "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, status, lease_token)
         SELECT $1, 'pg_test_note', '{\"n\":0}', 0, now() + interval '1 minute', 3, 'processing', 7
           FROM generate_series(1, 3000)",
    )
    .bind(&queue)
    .execute(pool(&jobq))
    .await
    .expect("insert rows");
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM jobq_jobs WHERE queue = $1 LIMIT 1000")
        .bind(&queue)
        .fetch_all(pool(&jobq))
        .await
        .expect("ids");
    let ids = format!(
        "'{{{}}}'",
        ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
    );
    let tokens = format!("array_fill(7::bigint, ARRAY[{}])", 1000);
    let mut conn = pool(&jobq).acquire().await.expect("connection");
    let settle = claim_plans(&mut conn, COMPLETE, &format!("{ids}, {tokens}")).await;
    let heartbeat = claim_plans(&mut conn, HEARTBEAT, &format!("{ids}, {tokens}, 30000000")).await;
    for plan in settle.iter().chain(&heartbeat) {
        assert!(!plan.contains("jobq_jobs_lease"), "{plan}");
        assert!(
            plan.contains("Index Cond: (id = f.id)") || plan.contains("Hash Cond"),
            "fences must be looked up by id or hashed:\n{plan}"
        );
    }
    sqlx::query("DELETE FROM jobq_jobs WHERE queue = $1")
        .bind(&queue)
        .execute(pool(&jobq))
        .await
        .expect("clean up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_skips_rows_another_open_claim_holds_without_waiting() {
    let Some(jobq) = jobq(4).await else { return };
    let queue = unique("disjoint");
    enqueue_notes(&jobq, &queue, 10).await;

    type Claimed = (i64, String, String, i32, i32, Option<String>);
    let mut first = pool(&jobq).begin().await.expect("begin");
    let held: Vec<Claimed> = sqlx::query_as(CLAIM)
        .bind(&queue)
        .bind(4i64)
        .bind(1i64)
        .bind(30_000_000i64)
        .bind("first")
        .fetch_all(&mut *first)
        .await
        .expect("first claim");
    assert_eq!(held.len(), 4);

    // The first transaction is still open and holds its 4 rows.
    let started = Instant::now();
    let second: Vec<Claimed> = tokio::time::timeout(
        Duration::from_secs(5),
        sqlx::query_as(CLAIM)
            .bind(&queue)
            .bind(4i64)
            .bind(2i64)
            .bind(30_000_000i64)
            .bind("second")
            .fetch_all(pool(&jobq)),
    )
    .await
    .expect("the second claim must not wait for the first transaction")
    .expect("second claim");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(second.len(), 4);
    let first_ids: HashSet<i64> = held.iter().map(|r| r.0).collect();
    assert!(
        second.iter().all(|r| !first_ids.contains(&r.0)),
        "claims overlap: {first_ids:?} and {:?}",
        second.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    assert!(
        second.iter().all(|r| r.3 == 1),
        "attempts after the first claim are 1"
    );

    first.rollback().await.expect("rollback");
    assert_eq!(count(pool(&jobq), &queue, "pending").await, 6);
    assert_eq!(count(pool(&jobq), &queue, "processing").await, 4);
}

// ---------------------------------------------------------------------------
// Enqueue.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_many_returns_ids_in_input_order() {
    let Some(jobq) = jobq(2).await else { return };
    let existing_key = unique("existing");
    let repeated_key = unique("repeated");
    let existing = jobq
        .enqueue(Batch {
            n: 99,
            key: Some(existing_key.clone()),
        })
        .await
        .expect("enqueue");

    let batch = vec![
        Batch { n: 0, key: None },
        Batch {
            n: 1,
            key: Some(repeated_key.clone()),
        },
        Batch { n: 2, key: None },
        Batch {
            n: 3,
            key: Some(repeated_key.clone()),
        },
        Batch {
            n: 4,
            key: Some(existing_key),
        },
        Batch { n: 5, key: None },
    ];
    let results = jobq.enqueue_many(batch).await.expect("enqueue_many");

    let duplicates: Vec<bool> = results.iter().map(|e| e.duplicate).collect();
    assert_eq!(duplicates, [false, false, false, true, true, false]);
    assert_eq!(
        results[3].id, results[1].id,
        "a key repeated in the batch is one job"
    );
    assert_eq!(
        results[4].id, existing.id,
        "an existing key returns the existing job"
    );
    let new: Vec<i64> = [0, 1, 2, 5].iter().map(|&i| results[i].id).collect();
    assert!(new.is_sorted(), "new ids follow input order: {new:?}");
    for (i, enqueued) in results.iter().enumerate() {
        let payload = jobq
            .job(enqueued.id)
            .await
            .expect("read")
            .expect("exists")
            .payload;
        let stored: Batch = serde_json::from_str(&payload).expect("payload");
        let expected = match i {
            3 => 1,
            4 => 99,
            _ => i as u64,
        };
        assert_eq!(stored.n, expected, "result {i} names job {}", enqueued.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_many_keeps_input_order_across_chunks() {
    let Some(jobq) = jobq(2).await else { return };
    let results = jobq
        .enqueue_many((0..2500).map(|n| Batch { n, key: None }))
        .await
        .expect("enqueue_many");
    assert_eq!(results.len(), 2500);
    let ids: Vec<i64> = results.iter().map(|e| e.id).collect();
    assert!(ids.is_sorted(), "ids in input order");
    let stored: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, payload FROM jobq_jobs WHERE id = ANY($1) ORDER BY id")
            .bind(&ids)
            .fetch_all(pool(&jobq))
            .await
            .expect("read rows");
    assert_eq!(stored.len(), 2500);
    for (i, (id, payload)) in stored.iter().enumerate() {
        assert_eq!(*id, ids[i]);
        assert_eq!(
            serde_json::from_str::<Batch>(payload).expect("payload").n,
            i as u64
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_job_is_not_claimed_before_its_time() {
    let Some(jobq) = jobq(4).await else { return };
    let queue = unique("delay");
    let delay = Duration::from_millis(1500);
    let delayed = jobq
        .enqueue_with(Note { n: 1 }, Enqueue::new().queue(&queue).delay(delay))
        .await
        .expect("enqueue")
        .id;
    let now = jobq
        .enqueue_with(Note { n: 2 }, Enqueue::new().queue(&queue))
        .await
        .expect("enqueue")
        .id;
    let handle = worker(&jobq, &queue, 4);

    wait_until(
        "the job due now is done",
        Duration::from_secs(10),
        || async { status(&jobq, now).await == JobStatus::Done },
    )
    .await;
    assert_eq!(status(&jobq, delayed).await, JobStatus::Pending);
    assert_eq!(runs(&queue), [now]);

    reach_then_stop(&jobq, delayed, JobStatus::Done, handle).await;
    let waited: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM claimed_at - created_at)::float8 FROM jobq_jobs WHERE id = $1",
    )
    .bind(delayed)
    .fetch_one(pool(&jobq))
    .await
    .expect("read times");
    assert!(
        waited >= delay.as_secs_f64(),
        "claimed {waited} s after enqueue"
    );
}

// ---------------------------------------------------------------------------
// Transactional enqueue.

/// Receives notifications on `jobq` until one names `queue`; returns the
/// queues named before it.
async fn notifications_until(listener: &mut PgListener, queue: &str) -> Vec<String> {
    let mut before = Vec::new();
    loop {
        let notification = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("a notification within 10 s")
            .expect("receive");
        if notification.payload() == queue {
            return before;
        }
        before.push(notification.payload().to_owned());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_in_a_rolled_back_transaction_stores_and_announces_nothing() {
    // One connection each for the listener, the open transaction and the checks.
    let Some(jobq) = jobq(4).await else { return };
    let rolled_back = unique("outbox-rollback");
    let committed = unique("outbox-commit");
    let mut listener = PgListener::connect_with(pool(&jobq))
        .await
        .expect("listener");
    listener.listen("jobq").await.expect("listen");

    let mut tx = pool(&jobq).begin().await.expect("begin");
    jobq.enqueue_in_with(&mut *tx, Note { n: 1 }, Enqueue::new().queue(&rolled_back))
        .await
        .expect("enqueue_in");
    tx.rollback().await.expect("rollback");

    let mut tx = pool(&jobq).begin().await.expect("begin");
    jobq.enqueue_in_with(&mut *tx, Note { n: 2 }, Enqueue::new().queue(&committed))
        .await
        .expect("enqueue_in");
    // Not yet committed: invisible to others.
    assert_eq!(count(pool(&jobq), &committed, "pending").await, 0);
    tx.commit().await.expect("commit");

    assert_eq!(count(pool(&jobq), &rolled_back, "pending").await, 0);
    assert_eq!(count(pool(&jobq), &committed, "pending").await, 1);
    // Notifications arrive in commit order: one from the rolled-back
    // transaction would come before the committed one.
    let before = notifications_until(&mut listener, &committed).await;
    assert!(
        !before.contains(&rolled_back),
        "a rolled-back enqueue notified: {before:?}"
    );
}

// ---------------------------------------------------------------------------
// Wake-ups.

/// A worker on `queue` that polls only every 300 s, on a pool of its own whose
/// sessions carry a unique `application_name`, so its LISTEN session can be found.
async fn idle_worker(url: &str, queue: &str) -> (Jobq, WorkerHandle, String) {
    let app = unique("jobq-listen-test");
    let options = PgConnectOptions::from_str(url)
        .expect("parse url")
        .application_name(&app);
    let worker_pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("connect");
    let jobq = Jobq::from_pg_pool(worker_pool).await.expect("jobq");
    jobq.migrate().await.expect("migrate");
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(queue, 2)
        // Polls adapt down to 1/32 of this after a claim that found jobs:
        // still far beyond the 5 s a NOTIFY has to start a job in.
        .poll_interval(Duration::from_secs(300))
        .build()
        .expect("build")
        .start();
    (jobq, handle, app)
}

/// The backend pids of `app`'s sessions that are listening.
async fn listening_sessions(jobq: &Jobq, app: &str) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(app)
    .fetch_all(pool(jobq))
    .await
    .expect("pg_stat_activity")
}

/// Enqueues two jobs with raw SQL plus `pg_notify` on an unrelated connection
/// (so no in-process wake-up is involved) and asserts the idle worker starts
/// each one well before its poll.
///
/// The first job may be taken by the worker's first claim (or the claim that
/// follows the listener's connect); once it has run, the claim loop sleeps for
/// its poll, so only the NOTIFY can start the second.
async fn assert_notify_wakes(url: &str, queue: &str) {
    let mut other = PgConnection::connect(url).await.expect("connect");
    let enqueue_raw = format!(
        "INSERT INTO jobq_jobs (queue, job_name, payload, run_at, max_attempts) \
         VALUES ('{queue}', 'pg_test_note', '{{\"n\":0}}', now(), 1); \
         SELECT pg_notify('jobq', '{queue}')"
    );
    let before = runs(queue).len();
    for expected in before + 1..=before + 2 {
        let started = Instant::now();
        sqlx::raw_sql(&enqueue_raw)
            .execute(&mut other)
            .await
            .expect("raw enqueue");
        wait_until(
            &format!("the worker starts job {expected} well before its poll"),
            Duration::from_secs(5),
            || async { runs(queue).len() == expected },
        )
        .await;
        eprintln!(
            "job {expected} started {:?} after its NOTIFY",
            started.elapsed()
        );
    }
}

/// Waits (10 s at most) until job `id` is `status`; then the worker stops.
async fn reach_then_stop(jobq: &Jobq, id: i64, status: JobStatus, handle: WorkerHandle) {
    wait_for_status(jobq, id, status, Duration::from_secs(10)).await;
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}

/// [`idle_worker`], once its listener listens.
async fn listening_worker(url: &str, queue: &str) -> (Jobq, WorkerHandle, String) {
    let (jobq, handle, app) = idle_worker(url, queue).await;
    wait_until("the worker listens", Duration::from_secs(10), || async {
        !listening_sessions(&jobq, &app).await.is_empty()
    })
    .await;
    (jobq, handle, app)
}

/// [`assert_notify_wakes`]; then the worker stops with both jobs done.
async fn two_notifies_wake_it(url: &str, queue: &str, jobq: &Jobq, handle: WorkerHandle) {
    assert_notify_wakes(url, queue).await;
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    assert_eq!(count(pool(jobq), queue, "done").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_from_another_connection_wakes_an_idle_worker() {
    let Some(url) = url() else { return };
    let queue = unique("notify");
    let (jobq, handle, _) = listening_worker(&url, &queue).await;
    two_notifies_wake_it(&url, &queue, &jobq, handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects_after_its_session_is_killed() {
    let Some(url) = url() else { return };
    let queue = unique("relisten");
    let (jobq, handle, app) = listening_worker(&url, &queue).await;
    let first = listening_sessions(&jobq, &app).await[0];

    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first)
        .fetch_one(pool(&jobq))
        .await
        .expect("terminate");
    assert!(killed);
    wait_until(
        "the worker listens on a new session",
        Duration::from_secs(10),
        || async {
            let now = listening_sessions(&jobq, &app).await;
            !now.is_empty() && !now.contains(&first)
        },
    )
    .await;

    two_notifies_wake_it(&url, &queue, &jobq, handle).await;
}

// ---------------------------------------------------------------------------
// Leases.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_reaped_and_the_job_runs_again() {
    let Some(jobq) = jobq(4).await else { return };
    let queue = unique("reap");
    // A job some vanished worker claimed, whose lease ran out a second ago.
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO jobq_jobs (queue, job_name, payload, status, run_at, attempts, max_attempts, lease_token, claimed_by, claimed_at)
         VALUES ($1, 'pg_test_note', '{\"n\":0}', 'processing', now() - interval '1 second', 1, 3, 42, 'gone:1', now() - interval '31 seconds')
         RETURNING id",
    )
    .bind(&queue)
    .fetch_one(pool(&jobq))
    .await
    .expect("insert");
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .poll_interval(Duration::from_millis(20))
        .reap_interval(Duration::from_millis(100))
        .build()
        .expect("build")
        .start();
    reach_then_stop(&jobq, id, JobStatus::Done, handle).await;

    assert_eq!(runs(&queue), [id]);
    let info = jobq.job(id).await.expect("read").expect("exists");
    assert_eq!(info.attempts, 2);
    let error = info.last_error.expect("last_error");
    assert!(
        error.contains("lease expired during attempt 1: worker gone:1"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_running_job_loses_its_lease_and_is_not_settled() {
    let Some(jobq) = jobq(4).await else { return };
    let queue = unique("cancel");
    let id = jobq
        .enqueue_with(Block {}, Enqueue::new().queue(&queue))
        .await
        .expect("enqueue")
        .id;
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .poll_interval(Duration::from_millis(20))
        .lease(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(500))
        .build()
        .expect("build")
        .start();
    wait_until("the job runs", Duration::from_secs(10), || async {
        runs(&queue) == [id]
    })
    .await;
    assert_eq!(handle.held_jobs(), 1);

    assert!(jobq.cancel(id).await.expect("cancel"));
    // The worker is in this process: the cancel stops the attempt at once
    // (before the handler's own extend_lease, every 20 ms, is likely to
    // find the lease lost; if it did, it says so).
    wait_until(
        "the cancel drops the job",
        Duration::from_secs(10),
        || async { handle.held_jobs() == 0 },
    )
    .await;
    let seen = runs(&queue);
    assert!(seen == [id] || seen == [id, LEASE_LOST], "{seen:?}");
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
    let info = jobq.job(id).await.expect("read").expect("exists");
    assert_eq!(
        info.status,
        JobStatus::Cancelled,
        "the stopped attempt did not settle"
    );
    assert_eq!(info.attempts, 1);

    assert!(
        jobq.retry(id).await.expect("retry"),
        "a cancelled job can be retried"
    );
    assert!(
        !jobq.retry(id).await.expect("retry"),
        "a pending job cannot"
    );
    let info = jobq.job(id).await.expect("read").expect("exists");
    assert_eq!(info.status, JobStatus::Pending);
    assert!(info.finished_at.is_none());
    assert!(info.max_attempts > info.attempts);
}

// ---------------------------------------------------------------------------
// Scale.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_on_separate_pools_run_each_job_exactly_once() {
    let Some(url) = url() else { return };
    let queue = unique("eight");
    let mut handles = Vec::new();
    let mut jobqs = Vec::new();
    for _ in 0..8 {
        let jobq = Jobq::connect_with(&url, 3).await.expect("connect");
        jobq.migrate().await.expect("migrate");
        handles.push(worker(&jobq, &queue, 8));
        jobqs.push(jobq);
    }
    // Enqueued while the workers run, from four tasks at once.
    let mut enqueuers = tokio::task::JoinSet::new();
    for part in 0..4u64 {
        let (jobq, queue) = (jobqs[part as usize].clone(), queue.clone());
        enqueuers.spawn(async move {
            let mut ids = Vec::new();
            for n in 0..500 {
                let options = Enqueue::new().queue(&queue);
                ids.push(
                    jobq.enqueue_with(Note { n: part * 500 + n }, options)
                        .await
                        .expect("enqueue")
                        .id,
                );
            }
            ids
        });
    }
    let mut ids: Vec<i64> = enqueuers.join_all().await.concat();
    ids.sort_unstable();
    assert_eq!(ids.len(), 2000);

    let jobq = &jobqs[0];
    wait_until(
        "all 2,000 jobs are done",
        Duration::from_secs(120),
        || async { count(pool(jobq), &queue, "done").await == 2000 },
    )
    .await;
    for handle in handles {
        handle
            .shutdown(Duration::from_secs(5))
            .await
            .expect("shutdown");
    }

    let mut ran = runs(&queue);
    ran.sort_unstable();
    assert_eq!(ran.len(), 2000, "2,000 attempts for 2,000 jobs");
    assert_eq!(ran, ids, "each job ran exactly once");
    let (attempts, workers): (i64, i64) = sqlx::query_as(
        "SELECT sum(attempts), count(DISTINCT claimed_by) FROM jobq_jobs WHERE queue = $1",
    )
    .bind(&queue)
    .fetch_one(pool(jobq))
    .await
    .expect("summary");
    assert_eq!(attempts, 2000);
    eprintln!("2,000 jobs settled by {workers} of 8 workers");
}
