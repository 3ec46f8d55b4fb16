//! An idle worker costs the database almost nothing, whatever its number
//! of queues, and still finds every due job: its watcher (MySQL/MariaDB's
//! waiter, PostgreSQL's and SQLite's look beside their wake-up channel,
//! one statement a second for every queue) reports due jobs, expired
//! leases and changed controls, and the claim loops, the pause loop and
//! the reaper send only their safety nets. The worker here runs on this
//! test's thread (a current-thread runtime) and counts its statements
//! from sqlx's per-statement event, less the watcher's own (MySQL's
//! waiter does not log its statements; PostgreSQL's looks are counted and
//! allowed for; SQLite's statements run on a thread of sqlx's own and are
//! not seen here); before the watcher covered them, four idle queues at
//! the default poll sent 292 statements in ten seconds on MariaDB.

use std::cell::Cell;
use std::time::Duration;

use jobq_runtime::{Backend, Enqueue, JobStatus, Worker, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, unique_queue, wait_for_status};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// Until the first polls have backed off and the watcher covers the queues.
const SETTLE: Duration = Duration::from_secs(3);
/// The window the statements are counted over.
const WINDOW: Duration = Duration::from_secs(10);
/// Most statements in [`WINDOW`] besides the looks: a presence beat (two)
/// and room for one more of them; at the poll interval it would be over a
/// hundred.
const MOST: u64 = 5;
/// Most looks in [`WINDOW`] where they are counted: one a second, and
/// one more at each end.
const LOOKS: u64 = 12;

thread_local! {
    static STATEMENTS: Cell<u64> = const { Cell::new(0) };
}

/// Counts sqlx's per-statement events on this thread.
struct Counter;

impl<S: tracing::Subscriber> Layer<S> for Counter {
    fn on_event(&self, _event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        STATEMENTS.with(|n| n.set(n.get() + 1));
    }
}

fn statements() -> u64 {
    STATEMENTS.with(Cell::get)
}

/// Runs `test` on a current-thread runtime whose every task reports its
/// statements to this thread's [`Counter`].
fn counted(test: impl Future<Output = ()>) {
    let log = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("JOBQ_TEST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        );
    let subscriber = tracing_subscriber::registry()
        .with(Counter.with_filter(Targets::new().with_target("sqlx::query", LevelFilter::TRACE)))
        .with(log);
    let _default = tracing::subscriber::set_default(subscriber);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(test);
}

#[job(name = "idle_noop")]
async fn noop(n: u64) {
    let _ = n;
}

/// Four idle queues at the default poll interval: a handful of statements
/// in ten seconds besides the watcher's; a job scheduled two seconds ahead
/// (its enqueue wakes the loop, which finds it not due) still starts
/// within a second of its time, found by the watcher.
async fn an_idle_worker_sends_almost_nothing_and_still_finds_due_jobs(db: TestDb) {
    let jobq = db.jobq().await;
    let queues: Vec<String> = (0..4).map(|n| unique_queue(&format!("idle{n}"))).collect();
    let mut builder = Worker::builder(jobq.clone());
    for queue in &queues {
        builder = builder.queue_unchecked(queue, 2);
    }
    let handle = builder.build().unwrap().start();
    tokio::time::sleep(SETTLE).await;
    let before = statements();
    tokio::time::sleep(WINDOW).await;
    let sent = statements() - before;
    println!("an idle worker of 4 queues sent {sent} statements in {WINDOW:?}");
    // SQLite's statements run on sqlx's own thread, whose events this
    // counter does not see: its idle rate is measured by the benchmark
    // (`bench steady`), in a process of its own.
    if db.backend() != Backend::Sqlite {
        let most = if db.backend() == Backend::MySql {
            MOST
        } else {
            MOST + LOOKS
        };
        assert!(
            sent <= most,
            "an idle worker of 4 queues sent {sent} statements in {WINDOW:?} (at most {most})"
        );
    }
    let id = jobq
        .enqueue_with(
            Noop::new(1),
            Enqueue::new()
                .queue(&queues[2])
                .delay(Duration::from_secs(2)),
        )
        .await
        .unwrap()
        .id;
    let due = jobq.job(id).await.unwrap().expect("the job").run_at;
    let done = wait_for_status(&jobq, id, JobStatus::Done, Duration::from_secs(20)).await;
    let late = done.claimed_at.expect("claimed") - due;
    println!("the scheduled job started {late} after its time");
    assert!(
        late < chrono::TimeDelta::milliseconds(1_000),
        "the scheduled job started {late} after its time"
    );
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// A lease that runs out while the worker is idle is reaped about when it
/// does, reported by the watcher, not at the reaper's interval (20 s
/// here); the job then runs.
async fn a_lease_that_runs_out_while_idle_is_reaped_at_once(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("idle_lease");
    let id = jobq
        .enqueue_with(Noop::new(2), Enqueue::new().queue(&queue))
        .await
        .unwrap()
        .id;
    // As if a worker that died had claimed it, its lease running out in a second.
    let sql = Db::of(&jobq);
    let held = sql.pick(
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = UTC_TIMESTAMP(6) + INTERVAL 1 SECOND WHERE id = ?",
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = now() + interval '1 second' WHERE id = $1",
        "UPDATE jobq_jobs SET status = 'processing', attempts = 1, lease_token = 7, \
         run_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) + 1000000 WHERE id = ?",
    );
    assert_eq!(sql.execute(held, &[Arg::Int(id)]).await.unwrap(), 1);
    let expires = jobq.job(id).await.unwrap().expect("the job").run_at;
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .reap_interval(Duration::from_secs(20))
        .build()
        .unwrap()
        .start();
    let done = wait_for_status(&jobq, id, JobStatus::Done, Duration::from_secs(40)).await;
    let late = done.claimed_at.expect("claimed") - expires;
    println!("the job whose lease ran out started again {late} after");
    assert!(
        late < chrono::TimeDelta::milliseconds(3_000),
        "the job whose lease ran out started again {late} after (the reap interval is 20 s)"
    );
    assert_eq!(done.attempts, 2);
    handle.shutdown(Duration::from_secs(10)).await.unwrap();
}

jobq_tests::on_every_backend!(run_with = counted;
    an_idle_worker_sends_almost_nothing_and_still_finds_due_jobs,
    a_lease_that_runs_out_while_idle_is_reaped_at_once
);
