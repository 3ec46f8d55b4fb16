//! The PostgreSQL store against a real server: what only PostgreSQL does —
//! the plans of its claim, reaper, settles and heartbeats, NOTIFY/LISTEN
//! and the listener. What every backend's store promises (claims that skip
//! locked rows, batches in input order across chunks, settles fenced by
//! token…) is in the contract suite (`tests/tests/contract/`), and what the
//! worker builds on it in the conformance suite (`tests/tests/conformance/`),
//! each run on every backend: not here.
//!
//! Reads `JOBQ_POSTGRES_URL` (e.g. `postgres://postgres@127.0.0.1:5432/test`);
//! without it every test is skipped, except under `CI=true`, where a missing
//! URL fails. Tests share one database and run in parallel: each works in
//! queues of its own (name + random suffix).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Definition, DispatchError, Enqueue, Job, JobContext, JobError, JobRegistration, Jobq,
    StateRequirement, States, Worker, WorkerHandle,
};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

#[allow(dead_code, unreachable_pub)]
#[path = "../../tests/src/wait.rs"]
mod wait;

use wait::wait_until;

/// The store's claim and reaper statements, exactly as it runs them.
use jobq_runtime::__private::sql::postgres::{CLAIM, COMPLETE, HEARTBEAT, REAP_SEEN};

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
    for plan in claim_plans(&mut conn, REAP_SEEN, &format!("'{queue}', 500")).await {
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
