//! Batches, on every backend: a batch's callbacks run once, after its jobs
//! (finish and success when every job succeeded, the failure callback
//! cancelled; the failure callback at the first failure, while the batch
//! is still open, the success callback cancelled); an open batch takes
//! more jobs until closed and finishes only once closed; an empty batch
//! fires at once; what cannot be stored is refused whole; each callback
//! runs exactly once when the last two jobs finish at the same instant on
//! two handles (on Galera, two nodes), 100 times over; a worker process
//! killed between a job's settle and the release leaves the callback to
//! the sweep, which runs it once; a batch in a caller's transaction exists
//! once it commits; cancelling a batch runs its failure and finish
//! callbacks; a pruned batch is forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Batch, BatchCallback, Error, InvalidArgument, JobContext, JobError, JobStatus, Jobq, Worker,
    WorkerHandle, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, fixture, on, stop, wait_for_status};

const LONG: Duration = Duration::from_secs(60);

/// What ran: `(batch, what, when)`, `what` being `item <n>` at an item's
/// end or `callback <when>` at a callback's start.
static RUNS: Mutex<Vec<(String, String, Instant)>> = Mutex::new(Vec::new());

fn record(batch: &str, what: String) {
    RUNS.lock().unwrap_or_else(PoisonError::into_inner).push((
        batch.to_owned(),
        what,
        Instant::now(),
    ));
}

/// The events of batch `batch`, in order, with their instants.
fn runs(batch: &str) -> Vec<(String, Instant)> {
    RUNS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(b, _, _)| b == batch)
        .map(|(_, w, t)| (w.clone(), *t))
        .collect()
}

/// How many times `what` ran in batch `batch`.
fn count(batch: &str, what: &str) -> usize {
    runs(batch).iter().filter(|(w, _)| w == what).count()
}

/// A job of a batch; fails for good when `fail`.
#[job(name = "batch_test_item", max_attempts = 1)]
async fn item(batch: String, n: u64, fail: bool) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_millis(2)).await;
    record(&batch, format!("item {n}"));
    if fail {
        return Err(JobError::permanent("this item fails"));
    }
    Ok(())
}

/// A callback: records which, reading its batch from its metadata.
#[job(name = "batch_test_callback", max_attempts = 1)]
async fn callback(ctx: JobContext, when: String) -> Result<(), JobError> {
    let batch = ctx
        .metadata()
        .and_then(|m| m.get("jobq.callback_of"))
        .and_then(|b| b.as_str())
        .ok_or_else(|| JobError::permanent("no jobq.callback_of in the metadata"))?
        .to_owned();
    record(&batch, format!("callback {when}"));
    Ok(())
}

fn item_of(batch: &str, n: u64, fail: bool) -> Item {
    Item::new(batch.to_owned(), n, fail)
}

/// A batch of `jobs` items on `queue` (the failing ones as `fail` says)
/// with a callback of each kind on `queue` too.
fn batch_of(id: &str, queue: &str, jobs: u64, fail: impl Fn(u64) -> bool) -> Batch {
    let mut batch = Batch::new(id);
    for n in 0..jobs {
        batch.add_with(item_of(id, n, fail(n)), on(queue));
    }
    for when in [
        BatchCallback::Finish,
        BatchCallback::Success,
        BatchCallback::Failure,
    ] {
        batch.on_with(when, Callback::new(when.as_str().to_owned()), on(queue));
    }
    batch
}

fn worker(jobq: &Jobq, queue: &str, slots: usize) -> WorkerHandle {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, slots)
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(200))
        .build()
        .unwrap()
        .start()
}

/// The callback ids of `stored`, by kind.
fn callbacks(stored: &jobq_runtime::BatchEnqueued) -> HashMap<BatchCallback, i64> {
    stored.callbacks.iter().copied().collect()
}

/// The `last_error` of job `id`.
async fn last_error(jobq: &Jobq, id: i64) -> String {
    jobq.job(id)
        .await
        .unwrap()
        .expect("job")
        .last_error
        .unwrap_or_default()
}

/// 20 jobs that succeed: finish and success run once, after every job;
/// the failure callback is cancelled, saying why.
async fn a_batch_that_succeeds_runs_finish_and_success_once_after_its_jobs(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-ok").await;
    let id = format!("ok-{queue}");
    let stored = jobq
        .enqueue_batch(batch_of(&id, &queue, 20, |_| false))
        .await
        .unwrap();
    assert_eq!(stored.jobs.len(), 20);
    let cb = callbacks(&stored);
    for when in cb.values() {
        assert_eq!(
            jobq.job(*when).await.unwrap().unwrap().status,
            JobStatus::Blocked
        );
    }
    let handle = worker(&jobq, &queue, 4);
    wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
    wait_for_status(&jobq, cb[&BatchCallback::Success], JobStatus::Done, LONG).await;
    wait_for_status(
        &jobq,
        cb[&BatchCallback::Failure],
        JobStatus::Cancelled,
        LONG,
    )
    .await;
    assert!(
        last_error(&jobq, cb[&BatchCallback::Failure])
            .await
            .contains("every job succeeded")
    );
    stop(handle).await;
    let events = runs(&id);
    let last_item = events
        .iter()
        .filter(|(w, _)| w.starts_with("item"))
        .map(|(_, t)| *t)
        .max()
        .unwrap();
    for when in ["finish", "success"] {
        let what = format!("callback {when}");
        assert_eq!(count(&id, &what), 1, "{what} ran once: {events:?}");
        let at = events.iter().find(|(w, _)| *w == what).unwrap().1;
        assert!(at >= last_item, "{what} ran after every job");
    }
    assert_eq!(count(&id, "callback failure"), 0);
    let info = jobq.batch(&id).await.unwrap().expect("stored");
    assert_eq!(
        (
            info.closed,
            info.jobs,
            info.succeeded,
            info.unfinished,
            info.state()
        ),
        (true, 20, 20, 0, "succeeded")
    );
    assert_eq!(info.callbacks.len(), 3);
}

/// A job fails for good in a batch kept open: the failure callback runs
/// at once, the success callback is cancelled, the finish callback waits
/// for the close and runs after it.
async fn a_first_failure_runs_the_failure_callback_at_once_and_finish_waits_for_the_close(
    db: TestDb,
) {
    let (jobq, queue, _) = fixture(&db, "batch-fail").await;
    let id = format!("fail-{queue}");
    let mut batch = batch_of(&id, &queue, 5, |n| n == 2);
    batch.keep_open();
    let stored = jobq.enqueue_batch(batch).await.unwrap();
    let cb = callbacks(&stored);
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, cb[&BatchCallback::Failure], JobStatus::Done, LONG).await;
    wait_for_status(
        &jobq,
        cb[&BatchCallback::Success],
        JobStatus::Cancelled,
        LONG,
    )
    .await;
    assert!(
        last_error(&jobq, cb[&BatchCallback::Success])
            .await
            .contains("failed")
    );
    for job in &stored.jobs {
        wait_for_status(
            &jobq,
            *job,
            if *job == stored.jobs[2] {
                JobStatus::Failed
            } else {
                JobStatus::Done
            },
            LONG,
        )
        .await;
    }
    assert_eq!(jobq.batch(&id).await.unwrap().unwrap().state(), "open");
    // Open, so more jobs may come: finish waits.
    let more = jobq
        .add_to_batch({
            let mut more = Batch::new(&id);
            more.add_with(item_of(&id, 5, false), on(&queue));
            more
        })
        .await
        .unwrap();
    wait_for_status(&jobq, more.jobs[0], JobStatus::Done, LONG).await;
    let closed_at = Instant::now();
    assert!(jobq.close_batch(&id).await.unwrap());
    assert!(!jobq.close_batch(&id).await.unwrap(), "closed once");
    wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
    stop(handle).await;
    let events = runs(&id);
    let finish = events
        .iter()
        .find(|(w, _)| w == "callback finish")
        .expect("finish ran")
        .1;
    assert!(
        finish >= closed_at,
        "finish ran after the close: {events:?}"
    );
    assert_eq!(count(&id, "callback failure"), 1);
    assert_eq!(count(&id, "callback finish"), 1);
    assert_eq!(count(&id, "callback success"), 0);
    let info = jobq.batch(&id).await.unwrap().unwrap();
    assert_eq!(
        (info.jobs, info.succeeded, info.failed, info.state()),
        (6, 5, 1, "finished with failures")
    );
    // Closed: no more jobs, and nothing stored.
    let refused = jobq
        .add_to_batch({
            let mut more = Batch::new(&id);
            more.add_with(item_of(&id, 6, false), on(&queue));
            more
        })
        .await;
    assert!(
        matches!(&refused, Err(Error::Invalid(InvalidArgument::Batch(why))) if why.contains("closed")),
        "{refused:?}"
    );
    assert_eq!(jobq.batch(&id).await.unwrap().unwrap().jobs, 6);
}

/// A batch with callbacks and no job, closed: finish and success run.
async fn an_empty_batch_finishes_when_closed(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-empty").await;
    let id = format!("empty-{queue}");
    let stored = jobq
        .enqueue_batch(batch_of(&id, &queue, 0, |_| false))
        .await
        .unwrap();
    let cb = callbacks(&stored);
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
    wait_for_status(&jobq, cb[&BatchCallback::Success], JobStatus::Done, LONG).await;
    wait_for_status(
        &jobq,
        cb[&BatchCallback::Failure],
        JobStatus::Cancelled,
        LONG,
    )
    .await;
    stop(handle).await;
}

/// Each refusal says why, and nothing of the batch is stored.
async fn a_batch_that_cannot_be_stored_is_refused_and_stores_nothing(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-bad").await;
    let why = |result: jobq_runtime::Result<jobq_runtime::BatchEnqueued>| match result {
        Err(Error::Invalid(InvalidArgument::Batch(why))) => why,
        other => panic!("refused, not {other:?}"),
    };
    let id = format!("bad-{queue}");
    assert!(why(jobq.enqueue_batch(Batch::new("")).await).contains("1 to 100 bytes"));
    assert!(why(jobq.enqueue_batch(Batch::new("x".repeat(101))).await).contains("1 to 100 bytes"));
    let mut keyed = batch_of(&id, &queue, 1, |_| false);
    keyed.on_with(
        BatchCallback::Finish,
        Callback::new("finish".into()),
        on(&queue).concurrency_key("k", 1),
    );
    assert!(why(jobq.enqueue_batch(keyed).await).contains("concurrency key"));
    assert!(jobq.batch(&id).await.unwrap().is_none());
    jobq.enqueue_batch(batch_of(&id, &queue, 1, |_| false))
        .await
        .unwrap();
    assert!(
        why(jobq
            .enqueue_batch(batch_of(&id, &queue, 3, |_| false))
            .await)
        .contains("exists")
    );
    assert!(
        why(jobq.add_to_batch(batch_of(&id, &queue, 1, |_| false)).await).contains("callbacks")
    );
    assert!(why(jobq.add_to_batch(Batch::new(&id)).await).contains("no job"));
    let mut unknown = Batch::new(format!("nobody-{queue}"));
    unknown.add_with(item_of(&id, 0, false), on(&queue));
    assert!(why(jobq.add_to_batch(unknown).await).contains("there is no batch"));
    assert!(matches!(
        jobq.close_batch(&format!("nobody-{queue}")).await,
        Err(Error::Invalid(InvalidArgument::Batch(_)))
    ));
    // A job that is a duplicate of a stored one (its idempotency key).
    let key = format!("dup-{queue}");
    jobq.enqueue_with(item_of(&id, 9, false), on(&queue).idempotency_key(&key))
        .await
        .unwrap();
    let mut dup = Batch::new(format!("dup-{queue}"));
    dup.add_with(item_of(&id, 1, false), on(&queue));
    dup.add_with(item_of(&id, 9, false), on(&queue).idempotency_key(&key));
    assert!(why(jobq.enqueue_batch(dup).await).contains("duplicate"));
    assert!(jobq.batch(&format!("dup-{queue}")).await.unwrap().is_none());
    // What is stored: the one batch of one job and three callbacks, and
    // the one job with the key.
    let rows: Vec<(i64,)> = Db::of(&jobq)
        .fetch_all(
            "SELECT COUNT(*) FROM jobq_jobs WHERE queue = ?",
            &[Arg::Text(queue.clone())],
        )
        .await
        .unwrap();
    assert_eq!(rows[0].0, 5);
}

/// Whether `queue`'s race barrier let both jobs of a round through.
static BARRIERS: Mutex<Option<HashMap<String, Arc<tokio::sync::Barrier>>>> = Mutex::new(None);

/// A job of the race: waits until the other job of its round runs too
/// (each worker has one slot, so the two run on the two handles), then
/// both end at once.
#[job(name = "batch_race_item", max_attempts = 1)]
async fn race_item(ctx: JobContext) {
    let barrier = BARRIERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .entry(ctx.queue().to_owned())
        .or_insert_with(|| Arc::new(tokio::sync::Barrier::new(2)))
        .clone();
    let _ = tokio::time::timeout(Duration::from_secs(10), barrier.wait()).await;
}

/// 100 rounds: a batch of two jobs that end at the same instant on two
/// handles of their own (on Galera, two nodes), whose settles and
/// releases race; each round's finish and success callbacks run exactly
/// once and its failure callback is cancelled.
async fn callbacks_run_exactly_once_when_the_last_two_jobs_finish_together(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-race").await;
    let other = Jobq::connect(db.url()).await.unwrap();
    let callbacks_queue = format!("{queue}-cb");
    let (one, two) = (worker(&jobq, &queue, 1), worker(&other, &queue, 1));
    let called = worker(&jobq, &callbacks_queue, 4);
    let mut all = Vec::new();
    for round in 0..100 {
        let id = format!("race{round}-{queue}");
        let mut batch = Batch::new(&id);
        batch.add_with(RaceItem::new(), on(&queue));
        batch.add_with(RaceItem::new(), on(&queue));
        for when in [
            BatchCallback::Finish,
            BatchCallback::Success,
            BatchCallback::Failure,
        ] {
            batch.on_with(
                when,
                Callback::new(when.as_str().to_owned()),
                on(&callbacks_queue),
            );
        }
        let stored = jobq.enqueue_batch(batch).await.unwrap();
        let cb = callbacks(&stored);
        wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
        wait_for_status(&jobq, cb[&BatchCallback::Success], JobStatus::Done, LONG).await;
        wait_for_status(
            &jobq,
            cb[&BatchCallback::Failure],
            JobStatus::Cancelled,
            LONG,
        )
        .await;
        all.push(id);
    }
    stop(called).await;
    stop(one).await;
    stop(two).await;
    for id in &all {
        assert_eq!(count(id, "callback finish"), 1, "{id}: {:?}", runs(id));
        assert_eq!(count(id, "callback success"), 1, "{id}: {:?}", runs(id));
        assert_eq!(count(id, "callback failure"), 0, "{id}: {:?}", runs(id));
    }
}

/// The job `jobq-batch-worker` runs (its `item`).
#[job(name = "batch_item", max_attempts = 1)]
async fn process_item(n: u64) {
    let _ = n;
}

/// A worker process that aborts (as `kill -9`) right after a batch job's
/// settle committed, before the release: the job is done, the callback
/// still `blocked`; a worker started after runs the callback, once, by
/// its sweep.
async fn a_worker_killed_between_a_settle_and_the_release_leaves_the_callback_to_the_sweep(
    db: TestDb,
) {
    let (jobq, queue, _) = fixture(&db, "batch-kill").await;
    let callbacks_queue = format!("{queue}-cb");
    let id = format!("kill-{queue}");
    let mut batch = Batch::new(&id);
    batch.add_with(ProcessItem::new(1), on(&queue));
    batch.on_with(
        BatchCallback::Finish,
        Callback::new("finish".into()),
        on(&callbacks_queue),
    );
    let stored = jobq.enqueue_batch(batch).await.unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_jobq-batch-worker"));
    command
        .env("JOBQ_BATCH_URL", db.url())
        .env("JOBQ_BATCH_QUEUE", &queue)
        .env("JOBQ_BATCH_ABORT", "1");
    let mut process = jobq_tests::WorkerProcess::start(command, LONG).await;
    let status = process.exited(LONG).await;
    assert!(
        !status.success(),
        "the worker process aborted: {status}, printed {:?}",
        process.printed()
    );
    assert!(process.printed().iter().any(|l| l == "ran 1"));
    let finish = callbacks(&stored)[&BatchCallback::Finish];
    assert_eq!(
        jobq.job(stored.jobs[0]).await.unwrap().unwrap().status,
        JobStatus::Done
    );
    assert_eq!(
        jobq.job(finish).await.unwrap().unwrap().status,
        JobStatus::Blocked,
        "the release never ran"
    );
    let handle = worker(&jobq, &callbacks_queue, 2);
    wait_for_status(&jobq, finish, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(count(&id, "callback finish"), 1);
}

/// A job marked done and one deleted behind jobq's back (as a worker
/// that died before its release leaves them): the sweep runs the failure
/// callback (the deleted job) and, the batch closed, the finish callback.
async fn a_release_a_dead_worker_never_made_is_made_by_the_sweep(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-sweep").await;
    let id = format!("sweep-{queue}");
    let nobody = format!("{queue}-nobody");
    let mut batch = Batch::new(&id);
    batch.add_with(item_of(&id, 0, false), on(&nobody));
    batch.add_with(item_of(&id, 1, false), on(&nobody));
    for when in [BatchCallback::Finish, BatchCallback::Failure] {
        batch.on_with(when, Callback::new(when.as_str().to_owned()), on(&queue));
    }
    let stored = jobq.enqueue_batch(batch).await.unwrap();
    let db_ = Db::of(&jobq);
    db_.execute(
        "UPDATE jobq_jobs SET status = 'done' WHERE id = ?",
        &[Arg::Int(stored.jobs[0])],
    )
    .await
    .unwrap();
    db_.execute(
        "DELETE FROM jobq_jobs WHERE id = ?",
        &[Arg::Int(stored.jobs[1])],
    )
    .await
    .unwrap();
    let cb = callbacks(&stored);
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, cb[&BatchCallback::Failure], JobStatus::Done, LONG).await;
    wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
    stop(handle).await;
    let info = jobq.batch(&id).await.unwrap().unwrap();
    assert_eq!((info.succeeded, info.deleted), (1, 1));
}

/// Cancelling a batch cancels its jobs that have not run; its failure and
/// finish callbacks then run, its success callback is cancelled.
async fn cancelling_a_batch_cancels_its_jobs_and_runs_failure_and_finish(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-cancel").await;
    let id = format!("cancel-{queue}");
    let nobody = format!("{queue}-nobody");
    let mut batch = Batch::new(&id);
    for n in 0..3 {
        batch.add_with(item_of(&id, n, false), on(&nobody));
    }
    for when in [
        BatchCallback::Finish,
        BatchCallback::Success,
        BatchCallback::Failure,
    ] {
        batch.on_with(when, Callback::new(when.as_str().to_owned()), on(&queue));
    }
    batch.keep_open();
    let stored = jobq.enqueue_batch(batch).await.unwrap();
    assert_eq!(jobq.cancel_batch(&id).await.unwrap(), 3);
    let cb = callbacks(&stored);
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(&jobq, cb[&BatchCallback::Failure], JobStatus::Done, LONG).await;
    wait_for_status(&jobq, cb[&BatchCallback::Finish], JobStatus::Done, LONG).await;
    wait_for_status(
        &jobq,
        cb[&BatchCallback::Success],
        JobStatus::Cancelled,
        LONG,
    )
    .await;
    stop(handle).await;
    let info = jobq.batch(&id).await.unwrap().unwrap();
    assert_eq!((info.closed, info.cancelled), (true, 3));
}

/// Once a batch's job rows are gone (pruned), its rows go too, by the
/// sweep.
async fn a_pruned_batch_leaves_no_rows_behind(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-forget").await;
    let id = format!("forget-{queue}");
    let stored = jobq
        .enqueue_batch(batch_of(&id, &queue, 2, |_| false))
        .await
        .unwrap();
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(
        &jobq,
        callbacks(&stored)[&BatchCallback::Finish],
        JobStatus::Done,
        LONG,
    )
    .await;
    wait_for_status(
        &jobq,
        callbacks(&stored)[&BatchCallback::Failure],
        JobStatus::Cancelled,
        LONG,
    )
    .await;
    let db_ = Db::of(&jobq);
    let rows = async || {
        db_.count(
            "SELECT COUNT(*) FROM jobq_batch_jobs WHERE batch = ?",
            &[Arg::Text(id.clone())],
        )
        .await
        .unwrap()
    };
    // The batch's rows are there while its jobs' are (asked before the
    // prune: the running worker's sweep may forget them the moment they go).
    assert_eq!(rows().await, 5);
    let pruned = db_
        .execute(
            "DELETE FROM jobq_jobs WHERE queue = ?",
            &[Arg::Text(queue.clone())],
        )
        .await
        .unwrap();
    assert_eq!(pruned, 5);
    jobq_tests::wait_until("the batch's rows are forgotten", LONG, async || {
        jobq.batch(&id).await.unwrap().is_none() && rows().await == 0
    })
    .await;
    stop(handle).await;
}

/// Rolled back, no batch; committed, it runs.
async fn a_batch_enqueued_in_a_transaction_exists_once_it_commits(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "batch-tx").await;
    let (rolled, kept) = (format!("rolled-{queue}"), format!("kept-{queue}"));
    macro_rules! twice {
        ($pool:expr) => {{
            let pool = $pool;
            let mut tx = pool.begin().await.unwrap();
            jobq.enqueue_batch_in(&mut *tx, batch_of(&rolled, &queue, 2, |_| false))
                .await
                .unwrap();
            tx.rollback().await.unwrap();
            let mut tx = pool.begin().await.unwrap();
            let stored = jobq
                .enqueue_batch_in(&mut *tx, batch_of(&kept, &queue, 2, |_| false))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            stored
        }};
    }
    let stored = match jobq.backend() {
        jobq_runtime::Backend::MySql => twice!(jobq.mysql_pool().unwrap()),
        jobq_runtime::Backend::Postgres => twice!(jobq.pg_pool().unwrap()),
        jobq_runtime::Backend::Sqlite => twice!(jobq.sqlite_pool().unwrap()),
        other => panic!("no pool for {other:?}"),
    };
    assert!(jobq.batch(&rolled).await.unwrap().is_none());
    let handle = worker(&jobq, &queue, 2);
    wait_for_status(
        &jobq,
        callbacks(&stored)[&BatchCallback::Success],
        JobStatus::Done,
        LONG,
    )
    .await;
    stop(handle).await;
    assert!(runs(&rolled).is_empty());
}

jobq_tests::on_every_backend!(
    a_batch_that_succeeds_runs_finish_and_success_once_after_its_jobs,
    a_first_failure_runs_the_failure_callback_at_once_and_finish_waits_for_the_close,
    an_empty_batch_finishes_when_closed,
    a_batch_that_cannot_be_stored_is_refused_and_stores_nothing,
    callbacks_run_exactly_once_when_the_last_two_jobs_finish_together,
    a_worker_killed_between_a_settle_and_the_release_leaves_the_callback_to_the_sweep,
    a_release_a_dead_worker_never_made_is_made_by_the_sweep,
    cancelling_a_batch_cancels_its_jobs_and_runs_failure_and_finish,
    a_pruned_batch_leaves_no_rows_behind,
    a_batch_enqueued_in_a_transaction_exists_once_it_commits
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    a_batch_that_succeeds_runs_finish_and_success_once_after_its_jobs,
    callbacks_run_exactly_once_when_the_last_two_jobs_finish_together,
    a_worker_killed_between_a_settle_and_the_release_leaves_the_callback_to_the_sweep
);
