//! An idle worker costs the database almost nothing, whatever its number
//! of queues, and still finds every due job: its watcher (MySQL/MariaDB's
//! waiter, PostgreSQL's and SQLite's look beside their wake-up channel,
//! one statement every 1.25 s for every queue) reports due jobs, expired
//! leases and changed controls, and the claim loops, the pause loop and
//! the reaper send only their safety nets: under one statement a second in
//! all. In a test binary of its own:
//! another worker starting in the process makes this one read its
//! controls (announcements are process-wide). The worker here runs on this
//! test's thread (a current-thread runtime) and counts its statements
//! from sqlx's per-statement event, less the watcher's own (MySQL's
//! waiter does not log its statements; PostgreSQL's looks are counted and
//! allowed for; SQLite's statements run on a thread of sqlx's own and are
//! not seen here); before the watcher covered them, four idle queues at
//! the default poll sent 292 statements in ten seconds on MariaDB.

use std::time::Duration;

use jobq_runtime::{Backend, Enqueue, JobStatus, Worker, job};
use jobq_tests::statements::{counted, statements};
use jobq_tests::{TestDb, unique_queue, wait_for_status};

/// Until the first polls have backed off and the watcher covers the queues.
const SETTLE: Duration = Duration::from_secs(5);
/// The window the statements are counted over.
const WINDOW: Duration = Duration::from_secs(10);
/// Most statements in [`WINDOW`] besides the looks: a presence beat (two)
/// and room for one more of them; at the poll interval it would be over a
/// hundred.
const MOST: u64 = 5;
/// Most statements in [`WINDOW`] where the looks are counted: one a second
/// (the looks' one per 1.25 s, eight or nine, and presence's refresh).
const ONE_A_SECOND: u64 = WINDOW.as_secs();

#[job(name = "idle_statements_noop")]
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
            ONE_A_SECOND
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

jobq_tests::on_every_backend!(run_with = counted;
    an_idle_worker_sends_almost_nothing_and_still_finds_due_jobs
);
