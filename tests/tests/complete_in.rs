//! A handler that completes its own job in its transaction
//! (`CompleteIn`), on every backend: its writes and the job's `done` commit
//! together; rolled back together, the job is not done and the attempt is
//! retried; a completion by an attempt that no longer holds the job (its
//! lease expired and it was claimed again, the job was cancelled, or it
//! was completed already) is refused before the caller commits, writing
//! nothing.

use std::sync::Mutex;
use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{
    Backend, CompleteIn, Error, JobContext, JobError, JobStatus, Jobq, State, Worker, job,
};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, fixture, on, stop, wait_for_status, wait_until};

const LONG: Duration = Duration::from_secs(60);

/// What the handlers' second completions said, by queue (unique to a
/// test and a backend: ids repeat across the backends' databases).
static REFUSED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// In one transaction: records the attempt in `complete_in_paid`, completes
/// the job (output `paid {order}`), then commits — or, on the first attempt
/// when `roll_back_first`, rolls back. With `twice`, completes a second
/// time in the same transaction first and records what that said.
#[job(name = "complete_in_pay", max_attempts = 3, retry = ["10ms"])]
async fn pay(
    ctx: JobContext,
    jobq: State<Jobq>,
    order: u64,
    roll_back_first: bool,
    twice: bool,
) -> Result<(), JobError> {
    macro_rules! in_transaction {
        ($pool:expr, $insert:literal) => {{
            let mut tx = $pool.begin().await.map_err(JobError::retry)?;
            sqlx::query($insert)
                .bind(ctx.id())
                .bind(i64::from(ctx.attempt()))
                .execute(&mut *tx)
                .await
                .map_err(JobError::retry)?;
            ctx.complete_in_with(&mut *tx, &format!("paid {order}"))
                .await
                .map_err(JobError::retry)?;
            if twice {
                let again = ctx.complete_in(&mut *tx).await;
                let said = match again {
                    Err(error @ Error::CompleteIn { .. }) => error.to_string(),
                    other => format!("unexpected: {other:?}"),
                };
                REFUSED.lock().unwrap().push((ctx.queue().to_owned(), said));
            }
            if roll_back_first && ctx.attempt() == 1 {
                tx.rollback().await.map_err(JobError::retry)?;
            } else {
                tx.commit().await.map_err(JobError::retry)?;
            }
        }};
    }
    match jobq.backend() {
        Backend::MySql => in_transaction!(
            jobq.mysql_pool().unwrap(),
            "INSERT INTO complete_in_paid (job_id, attempt) VALUES (?, ?)"
        ),
        Backend::Postgres => in_transaction!(
            jobq.pg_pool().unwrap(),
            "INSERT INTO complete_in_paid (job_id, attempt) VALUES ($1, $2)"
        ),
        _ => in_transaction!(
            jobq.sqlite_pool().unwrap(),
            "INSERT INTO complete_in_paid (job_id, attempt) VALUES (?1, ?2)"
        ),
    }
    Ok(())
}

/// The jobs (queue, id: ids repeat across the backends' databases) whose
/// handler ran to its end after completing in its transaction.
static FINISHED: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());

/// Completes itself in a transaction that commits at once, then works on
/// past two heartbeats before it returns.
#[job(name = "complete_in_then_work")]
async fn then_work(ctx: JobContext, jobq: State<Jobq>) -> Result<(), JobError> {
    macro_rules! in_transaction {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.map_err(JobError::retry)?;
            ctx.complete_in(&mut *tx).await.map_err(JobError::retry)?;
            tx.commit().await.map_err(JobError::retry)?;
        }};
    }
    match jobq.backend() {
        Backend::MySql => in_transaction!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => in_transaction!(jobq.pg_pool().unwrap()),
        _ => in_transaction!(jobq.sqlite_pool().unwrap()),
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    FINISHED
        .lock()
        .unwrap()
        .push((ctx.queue().to_owned(), ctx.id()));
    Ok(())
}

/// Completes itself in a transaction that commits (or, on its first
/// attempt when `roll_back_first`, rolls back), then returns an error.
#[job(name = "complete_in_then_fail", max_attempts = 2, retry = ["10ms"])]
async fn then_fail(
    ctx: JobContext,
    jobq: State<Jobq>,
    roll_back_first: bool,
) -> Result<(), JobError> {
    macro_rules! in_transaction {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.map_err(JobError::retry)?;
            ctx.complete_in(&mut *tx).await.map_err(JobError::retry)?;
            if roll_back_first && ctx.attempt() == 1 {
                tx.rollback().await.map_err(JobError::retry)?;
            } else {
                tx.commit().await.map_err(JobError::retry)?;
            }
        }};
    }
    match jobq.backend() {
        Backend::MySql => in_transaction!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => in_transaction!(jobq.pg_pool().unwrap()),
        _ => in_transaction!(jobq.sqlite_pool().unwrap()),
    }
    Err(JobError::retry(format!(
        "failed after completing, attempt {}",
        ctx.attempt()
    )))
}

/// A handler that returns an error after completing its job in its
/// transaction: if the transaction committed, the job is done and the
/// error changes nothing; if it rolled back, the attempt is settled as the
/// error says (retried, the error its `last_error` and history entry).
async fn an_error_after_a_completion_counts_only_if_the_completion_rolled_back(db: TestDb) {
    let (jobq, queue, worker) = setup(&db, "complete_in_error").await;
    let committed = jobq
        .enqueue_with(ThenFail::new(false), on(&queue))
        .await
        .unwrap()
        .id;
    let rolled_back = jobq
        .enqueue_with(ThenFail::new(true), on(&queue))
        .await
        .unwrap()
        .id;
    let done = wait_for_status(&jobq, committed, JobStatus::Done, LONG).await;
    let retried = wait_for_status(&jobq, rolled_back, JobStatus::Done, LONG).await;
    stop(worker).await;
    assert_eq!((done.attempts, done.last_error.as_deref()), (1, None));
    assert!(done.history.is_empty(), "{:?}", done.history);
    assert_eq!(retried.attempts, 2);
    assert_eq!(retried.history.len(), 1, "{:?}", retried.history);
    assert_eq!(
        retried.history[0].error.as_deref(),
        Some("failed after completing, attempt 1")
    );
}

/// The application's table, and a worker that runs `pay`.
async fn setup(db: &TestDb, name: &str) -> (Jobq, String, jobq_runtime::WorkerHandle) {
    let (jobq, queue, _) = fixture(db, name).await;
    Db::of(&jobq)
        .execute(
            "CREATE TABLE IF NOT EXISTS complete_in_paid (job_id BIGINT NOT NULL, attempt BIGINT NOT NULL, PRIMARY KEY (job_id, attempt))",
            &[],
        )
        .await
        .unwrap();
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 2)
        .state(jobq.clone())
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    (jobq, queue, worker)
}

/// The attempts of job `id` the application's table holds.
async fn paid(jobq: &Jobq, id: i64) -> Vec<i64> {
    let rows: Vec<(i64,)> = Db::of(jobq)
        .fetch_all(
            "SELECT attempt FROM complete_in_paid WHERE job_id = ? ORDER BY attempt",
            &[Arg::Int(id)],
        )
        .await
        .unwrap();
    rows.into_iter().map(|(a,)| a).collect()
}

async fn a_completion_in_a_transaction_commits_with_the_handlers_writes(db: TestDb) {
    let (jobq, queue, worker) = setup(&db, "complete_in").await;
    let id = jobq
        .enqueue_with(Pay::new(1, false, true), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(worker).await;
    assert_eq!(paid(&jobq, id).await, [1], "the handler's write committed");
    assert_eq!(info.attempts, 1);
    assert_eq!(info.output.as_deref(), Some("\"paid 1\""));
    assert!(info.history.is_empty(), "{:?}", info.history);
    // A second completion in the same transaction was refused.
    let refused: Vec<String> = REFUSED
        .lock()
        .unwrap()
        .iter()
        .filter(|(of, _)| *of == queue)
        .map(|(_, said)| said.clone())
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains(&format!("job {id} was not completed in the transaction"))
            && refused[0].contains("no longer holds it"),
        "{}",
        refused[0]
    );
}

async fn a_completion_in_a_transaction_that_rolls_back_is_not_done_and_is_retried(db: TestDb) {
    let (jobq, queue, worker) = setup(&db, "complete_in_rollback").await;
    let id = jobq
        .enqueue_with(Pay::new(2, true, false), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(worker).await;
    assert_eq!(
        paid(&jobq, id).await,
        [2],
        "the first attempt's write rolled back with its completion; the second committed"
    );
    assert_eq!(info.attempts, 2);
    assert_eq!(info.history.len(), 1, "{:?}", info.history);
    let said = info.history[0].error.clone().unwrap_or_default();
    assert!(said.contains("a transaction that did not commit"), "{said}");
}

/// Store level: a reaped claim's completion, and one of a cancelled job,
/// match nothing; the holder's commits with its output.
async fn a_completion_by_an_attempt_that_no_longer_holds_the_job_is_refused(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "complete_in_fence").await;
    let id = jobq
        .enqueue_with(Pay::new(3, false, false), on(&queue))
        .await
        .unwrap()
        .id;
    let stale = __store::claim(&jobq, &queue, 1, Duration::ZERO, "stale")
        .await
        .unwrap();
    wait_until("the stale claim was reaped", LONG, async || {
        __store::reap(&jobq, &queue, 10).await.unwrap() == 1
    })
    .await;
    let holder = __store::claim(&jobq, &queue, 1, LONG, "holder")
        .await
        .unwrap();
    macro_rules! attempt {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            assert!(
                !__store::complete_in(&mut *tx, (id, stale[0].token), Some("1"))
                    .await
                    .unwrap()
            );
            assert!(
                __store::complete_in(&mut *tx, (id, holder[0].token), Some("2"))
                    .await
                    .unwrap()
            );
            assert!(
                !__store::complete_in(&mut *tx, (id, holder[0].token), Some("3"))
                    .await
                    .unwrap()
            );
            tx.commit().await.unwrap();
        }};
    }
    match jobq.backend() {
        Backend::MySql => attempt!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => attempt!(jobq.pg_pool().unwrap()),
        _ => attempt!(jobq.sqlite_pool().unwrap()),
    }
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.output.as_deref()),
        (JobStatus::Done, Some("2"))
    );
    // A cancelled job: nothing to complete.
    let other = jobq
        .enqueue_with(Pay::new(4, false, false), on(&queue))
        .await
        .unwrap()
        .id;
    let claim = __store::claim(&jobq, &queue, 1, LONG, "holder")
        .await
        .unwrap();
    assert_eq!(claim[0].id, other);
    assert!(jobq.cancel(other).await.unwrap());
    macro_rules! cancelled {
        ($pool:expr) => {{
            let mut conn = $pool.acquire().await.unwrap();
            assert!(
                !__store::complete_in(&mut *conn, (other, claim[0].token), None)
                    .await
                    .unwrap()
            );
        }};
    }
    match jobq.backend() {
        Backend::MySql => cancelled!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => cancelled!(jobq.pg_pool().unwrap()),
        _ => cancelled!(jobq.sqlite_pool().unwrap()),
    }
    assert_eq!(
        jobq.job(other).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
}

/// A heartbeat that finds the job done by the handler's own committed
/// transaction is not a lost lease: the handler runs to its end (before,
/// the heartbeat stopped it, with a warning, as a lost lease).
async fn a_handler_that_completed_in_its_transaction_runs_to_its_end(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "complete_in_then").await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .state(jobq.clone())
        .lease(Duration::from_secs(1))
        .heartbeat_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(ThenWork::new(), on(&queue))
        .await
        .unwrap()
        .id;
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    wait_until("the handler ran to its end", LONG, async || {
        FINISHED.lock().unwrap().contains(&(queue.clone(), id))
    })
    .await;
    stop(worker).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!((info.status, info.attempts), (JobStatus::Done, 1));
}

jobq_tests::on_every_backend!(
    an_error_after_a_completion_counts_only_if_the_completion_rolled_back,
    a_handler_that_completed_in_its_transaction_runs_to_its_end,
    a_completion_in_a_transaction_commits_with_the_handlers_writes,
    a_completion_in_a_transaction_that_rolls_back_is_not_done_and_is_retried,
    a_completion_by_an_attempt_that_no_longer_holds_the_job_is_refused
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    a_completion_in_a_transaction_commits_with_the_handlers_writes,
    a_completion_by_an_attempt_that_no_longer_holds_the_job_is_refused
);
