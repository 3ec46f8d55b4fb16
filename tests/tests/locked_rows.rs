//! A row locked by someone else (a caller's transaction holding a duplicate
//! `enqueue_in` of its key) delays that row's settle only: the worker's
//! heartbeats go on renewing every other lease, and jobs that finish after it
//! are settled meanwhile.

use std::time::Duration;

use jobq_runtime::{
    Backend, Enqueue, JobContext, JobStatus, Jobq, State, Worker, WorkerHandle, job,
};
use jobq_tests::{Gates, Recorder, TestDb, unique_queue, wait_for_status, wait_until};

const LEASE: Duration = Duration::from_secs(2);
const LONG: Duration = Duration::from_secs(40);

/// Runs for `ms`, or until its gate opens if `gated`.
#[job(name = "locked_work")]
async fn work(
    ctx: &JobContext,
    recorder: State<Recorder>,
    gates: State<Gates<i64>>,
    ms: u64,
    gated: bool,
) {
    recorder.record(ctx.id(), ctx.attempt());
    if gated {
        gates.wait(ctx.id()).await;
    } else {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Runs `$body` (it may `.await`) while a caller's transaction holds a
/// duplicate `enqueue_in` (`$job`, `$options`) of each of `$keys`' rows,
/// then commits the transaction; `$body`'s value. PostgreSQL and MySQL
/// only (SQLite has no row locks).
macro_rules! holding_duplicates {
    ($db:expr, $jobq:expr, $keys:expr, $job:expr, $options:expr, $body:expr) => {
        match $db.backend() {
            Backend::MySql => {
                holding_duplicates!(@on $jobq.mysql_pool().expect("pool"), $jobq, $keys, $job, $options, $body)
            }
            Backend::Postgres => {
                holding_duplicates!(@on $jobq.pg_pool().expect("pool"), $jobq, $keys, $job, $options, $body)
            }
            other => unreachable!("{other:?} has no row locks"),
        }
    };
    (@on $pool:expr, $jobq:expr, $keys:expr, $job:expr, $options:expr, $body:expr) => {{
        let mut tx = $pool.begin().await.expect("begin");
        for key in $keys {
            let enqueued = $jobq
                .enqueue_in_with(&mut *tx, $job, $options.idempotency_key(key))
                .await
                .expect("enqueue_in");
            assert!(enqueued.duplicate, "a duplicate of a job's key");
        }
        let value = $body;
        tx.commit().await.expect("commit");
        value
    }};
}

/// A job that does nothing: the holder of a queue's lowest key.
#[job(name = "locked_floor")]
async fn floor(n: u64) {
    let _ = n;
}

/// A row with the lowest key of `queue` (`{queue}:0`): a caller's
/// REPEATABLE READ transaction that takes a higher key of the queue then
/// locks the gap from this key up, never the gap where keyless rows go
/// (NULLs first) — were its key the table's smallest, every keyless enqueue
/// of every test would wait for it: InnoDB's locking, not jobq's.
async fn floor_key(jobq: &Jobq, queue: &str) {
    jobq.enqueue_with(
        Floor { n: 0 },
        Enqueue::new()
            .queue(queue)
            .idempotency_key(format!("{queue}:0")),
    )
    .await
    .expect("enqueue the floor key");
}

/// A started worker of `slots` slots on a fresh queue (named after `queue`)
/// whose gated jobs wait on the gates returned; `None` on SQLite, which has
/// no row locks (one writer at a time).
async fn gated_worker(
    db: &TestDb,
    queue: &str,
    slots: usize,
) -> Option<(Jobq, String, Recorder, Gates<i64>, WorkerHandle)> {
    if db.backend() == Backend::Sqlite {
        return None;
    }
    let jobq = db.jobq().await;
    let queue = unique_queue(queue);
    let recorder = Recorder::default();
    let gates = Gates::<i64>::default();
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, slots)
        .state(recorder.clone())
        .state(gates.clone())
        .lease(LEASE)
        .reap_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    Some((jobq, queue, recorder, gates, handle))
}

/// Each of `ids` took one attempt (none was reaped); then the worker stops.
async fn none_reaped_then_stop(jobq: &Jobq, ids: &[i64], handle: WorkerHandle) {
    for id in ids {
        let info = jobq.job(*id).await.expect("job").expect("row");
        assert_eq!(info.attempts, 1, "never reaped: {info:?}");
    }
    handle
        .shutdown(Duration::from_secs(10))
        .await
        .expect("shutdown");
}

async fn a_row_locked_by_a_callers_transaction_delays_only_its_own_settle(db: TestDb) {
    let Some((jobq, queue, recorder, gates, handle)) = gated_worker(&db, "locked", 8).await else {
        return; // SQLite: one writer at a time, no row locks
    };
    let on = || Enqueue::new().queue(&queue);
    // A key just below X's: the caller's REPEATABLE READ transaction below
    // locks the gap before X's key in the unique index, and were X's the
    // smallest key in the table that gap would be where keyless rows go
    // (NULLs first), blocking every enqueue without a key until it ends —
    // InnoDB's locking, not jobq's, and not what this test is about.
    jobq.enqueue_with(
        Work {
            ms: 0,
            gated: false,
        },
        on().idempotency_key(format!("{queue}:w")),
    )
    .await
    .expect("enqueue");
    let x = jobq
        .enqueue_with(
            Work { ms: 0, gated: true },
            on().idempotency_key(format!("{queue}:x")),
        )
        .await
        .expect("enqueue")
        .id;
    let mut long = Vec::new();
    for _ in 0..3 {
        let job = Work {
            ms: 4 * LEASE.as_millis() as u64,
            gated: false,
        };
        long.push(jobq.enqueue_with(job, on()).await.expect("enqueue").id);
    }
    wait_until("all five run", LONG, || async { recorder.totals().0 == 5 }).await;
    // A caller's transaction enqueues X's key again, and keeps it open for
    // three leases while X finishes.
    let hold = 3 * LEASE;
    holding_duplicates!(
        db,
        jobq,
        [format!("{queue}:x")],
        Work { ms: 0, gated: true },
        on(),
        {
            gates.open(x);
            let locked_since = std::time::Instant::now();
            // X's settle now waits on the lock; jobs finishing after it settle meanwhile.
            tokio::time::sleep(LEASE / 2).await;
            let mut short = Vec::new();
            for _ in 0..3 {
                let job = Work {
                    ms: 10,
                    gated: false,
                };
                short.push(jobq.enqueue_with(job, on()).await.expect("enqueue").id);
            }
            for id in &short {
                let info = wait_for_status(&jobq, *id, JobStatus::Done, hold).await;
                assert!(
                    locked_since.elapsed() < hold,
                    "job {id} settled only after the lock: {info:?}"
                );
            }
            tokio::time::sleep(hold.saturating_sub(locked_since.elapsed())).await;
            assert_ne!(
                jobq.job(x).await.expect("job").expect("row").status,
                JobStatus::Done
            );
        }
    );
    wait_for_status(&jobq, x, JobStatus::Done, LONG).await;
    for id in &long {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
    }
    assert_eq!(recorder.repeated(), Vec::<i64>::new(), "no job ran twice");
    none_reaped_then_stop(&jobq, &long, handle).await;
}

/// Waits until `gate` opens.
#[job(name = "locked_batch_work")]
async fn batch_work(
    ctx: &JobContext,
    recorder: State<Recorder>,
    gates: State<Gates<i64>>,
    gate: i64,
) {
    recorder.record(ctx.id(), ctx.attempt());
    gates.wait(gate).await;
}

/// Enqueues on `queue` a [`BatchWork`] for each of `keyed` (its key and
/// gate), then `others` without a key on gate 1, and waits until all of
/// them run; the keyed jobs' ids and the others'.
async fn start_batch_work(
    jobq: &Jobq,
    queue: &str,
    recorder: &Recorder,
    keyed: &[(&str, i64)],
    others: usize,
) -> (Vec<i64>, Vec<i64>) {
    let on = || Enqueue::new().queue(queue);
    let mut keyed_ids = Vec::new();
    for (key, gate) in keyed {
        let job = BatchWork { gate: *gate };
        let enqueued = jobq.enqueue_with(job, on().idempotency_key(*key));
        keyed_ids.push(enqueued.await.expect("enqueue").id);
    }
    let mut other_ids = Vec::new();
    for _ in 0..others {
        let job = BatchWork { gate: 1 };
        other_ids.push(jobq.enqueue_with(job, on()).await.expect("enqueue").id);
    }
    wait_until("all of them run", LONG, || async {
        recorder.totals().0 == keyed.len() + others
    })
    .await;
    (keyed_ids, other_ids)
}

async fn the_rows_settled_in_one_batch_with_a_locked_row_keep_their_leases(db: TestDb) {
    const OTHERS: usize = 20;
    let Some((jobq, queue, recorder, gates, handle)) = gated_worker(&db, "locked_batch", 32).await
    else {
        return; // SQLite: one writer at a time, no row locks
    };
    floor_key(&jobq, &queue).await;
    let on = || Enqueue::new().queue(&queue);
    let (key_x, key_y) = (format!("{queue}:x"), format!("{queue}:y"));
    // Y (gate 2) finishes first: its settle waits on Y's lock and holds the
    // turn, so X and the others (gate 1), finishing meanwhile, make up the
    // next batch together.
    let keyed = [(key_y.as_str(), 2), (key_x.as_str(), 1)];
    let (keyed, others) = start_batch_work(&jobq, &queue, &recorder, &keyed, OTHERS).await;
    let (y, x) = (keyed[0], keyed[1]);
    // A caller's transaction enqueues X's and Y's keys again and keeps them
    // open for three leases.
    let hold = 3 * LEASE;
    let waiting = holding_duplicates!(db, jobq, [&key_y, &key_x], BatchWork { gate: 0 }, on(), {
        gates.open(2);
        let locked_since = std::time::Instant::now();
        // Within Y's settle's wait (no event to await it by; the check
        // below tells whether X's batch held others).
        tokio::time::sleep(Duration::from_millis(100)).await;
        gates.open(1);
        tokio::time::sleep(LEASE / 2).await;
        let mut waiting = Vec::new();
        for id in &others {
            let info = jobq.job(*id).await.expect("job").expect("row");
            if info.status == JobStatus::Processing {
                waiting.push(*id);
            }
        }
        assert!(
            !waiting.is_empty(),
            "none of the others was settled in one batch with X"
        );
        tokio::time::sleep(hold.saturating_sub(locked_since.elapsed())).await;
        for id in [x, y] {
            assert_ne!(
                jobq.job(id).await.expect("job").expect("row").status,
                JobStatus::Done
            );
        }
        waiting
    });
    let all: Vec<i64> = [x, y].into_iter().chain(others).collect();
    for id in &all {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
    }
    assert_eq!(
        recorder.repeated(),
        Vec::<i64>::new(),
        "no job ran twice ({} of {OTHERS} were settled with X)",
        waiting.len()
    );
    none_reaped_then_stop(&jobq, &all, handle).await;
}

/// A caller's transaction locks the row of a job that is still running (a
/// duplicate `enqueue_in` of its key) for three leases: the heartbeat goes
/// on renewing every other lease meanwhile (it never waits on a row lock),
/// and the locked job is neither stopped nor reaped — no reaper takes a
/// locked row, and the renewal waiting on its lock renews it the moment
/// the transaction ends.
async fn a_running_jobs_row_locked_by_a_caller_holds_back_no_other_lease(db: TestDb) {
    const OTHERS: usize = 6;
    let Some((jobq, queue, recorder, gates, handle)) =
        gated_worker(&db, "locked_running", 16).await
    else {
        return; // SQLite: one writer at a time, no row locks
    };
    floor_key(&jobq, &queue).await;
    let on = || Enqueue::new().queue(&queue);
    let key_x = format!("{queue}:x");
    let keyed = [(key_x.as_str(), 1)];
    let (keyed, others) = start_batch_work(&jobq, &queue, &recorder, &keyed, OTHERS).await;
    let x = keyed[0];
    let hold = 3 * LEASE;
    holding_duplicates!(db, jobq, [&key_x], BatchWork { gate: 0 }, on(), {
        tokio::time::sleep(hold).await;
    });
    // Every job is still running its first attempt.
    for id in [x].iter().chain(&others) {
        let info = jobq.job(*id).await.expect("job").expect("row");
        assert_eq!(
            (info.status, info.attempts),
            (JobStatus::Processing, 1),
            "still running its first attempt after the lock: {info:?}"
        );
    }
    gates.open(1);
    let all: Vec<i64> = [x].into_iter().chain(others).collect();
    for id in &all {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
    }
    assert_eq!(recorder.repeated(), Vec::<i64>::new(), "no job ran twice");
    none_reaped_then_stop(&jobq, &all, handle).await;
}

/// A caller's transaction that writes a running job's row (a duplicate
/// `enqueue_in` bumps its `dedupe_hits`) holds it past its lease while
/// reapers in other sessions try to take it, pass after pass, before,
/// during and after the commit: the renewal waiting on the lock renews it
/// first every time. On PostgreSQL the waiting renewal takes the row again
/// (the caller's new version) only after the caller's commit has woken it,
/// and a reaper pass that took the new version first reaped the job while
/// its attempt ran on; eight rounds lost it in most runs before the reaper
/// confirmed what it saw.
async fn a_renewal_waiting_on_a_lock_gets_the_row_before_any_reaper(db: TestDb) {
    const ROUNDS: usize = 8;
    const REAPERS: usize = 4;
    let lease = Duration::from_millis(600);
    if db.backend() == Backend::Sqlite {
        return; // one writer at a time, no row locks
    }
    let jobq = db.jobq().await;
    let queue = unique_queue("locked_reapers");
    let (recorder, gates) = (Recorder::default(), Gates::<i64>::default());
    let handle = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .state(recorder.clone())
        .state(gates.clone())
        .lease(lease)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    floor_key(&jobq, &queue).await;
    let on = || Enqueue::new().queue(&queue);
    let mut ids = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("{queue}:r{round}");
        let job = BatchWork {
            gate: 1 + round as i64,
        };
        let id = jobq
            .enqueue_with(job, on().idempotency_key(&key))
            .await
            .expect("enqueue")
            .id;
        wait_until("the job runs", LONG, || async {
            recorder.runs(id).len() == 1
        })
        .await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reapers: Vec<_> = (0..REAPERS)
            .map(|_| {
                let (jobq, queue, stop) = (jobq.clone(), queue.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut reaped = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        reaped += jobq_runtime::__store::reap(&jobq, &queue, 10)
                            .await
                            .expect("reap");
                    }
                    reaped
                })
            })
            .collect();
        holding_duplicates!(db, jobq, [&key], BatchWork { gate: 0 }, on(), {
            tokio::time::sleep(2 * lease).await;
        });
        // The reapers go on for a lease after the commit.
        tokio::time::sleep(lease).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut reaped = 0;
        for reaper in reapers {
            reaped += reaper.await.expect("reaper");
        }
        let info = jobq.job(id).await.expect("job").expect("row");
        assert_eq!(
            (reaped, info.status, info.attempts),
            (0, JobStatus::Processing, 1),
            "round {round}: the lock's own renewal kept the row: {info:?}"
        );
        gates.open(1 + round as i64);
        ids.push(id);
    }
    for id in &ids {
        wait_for_status(&jobq, *id, JobStatus::Done, LONG).await;
    }
    assert_eq!(recorder.repeated(), Vec::<i64>::new(), "no job ran twice");
    none_reaped_then_stop(&jobq, &ids, handle).await;
}

jobq_tests::on_every_backend!(
    a_row_locked_by_a_callers_transaction_delays_only_its_own_settle,
    the_rows_settled_in_one_batch_with_a_locked_row_keep_their_leases,
    a_running_jobs_row_locked_by_a_caller_holds_back_no_other_lease,
    a_renewal_waiting_on_a_lock_gets_the_row_before_any_reaper,
);
