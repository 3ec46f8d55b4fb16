//! Checkpoints and progress, on every backend (and Galera): a handler saves
//! its checkpoint through its `JobContext`, fenced by its attempt's lease;
//! the next attempt — here after its worker process was killed with
//! SIGKILL — starts from the last one saved; a stale attempt's checkpoint is
//! refused; a checkpoint whose type changed fails the attempt with a clear
//! message; progress is visible from another process while the job runs.

use std::time::Duration;

use jobq_runtime::__store;
use jobq_runtime::{CheckpointError, JobContext, JobError, JobStatus, Worker, job};
use jobq_tests::{
    TestDb, WorkerProcess, fixture, on, stop, unique_queue, wait_for_status, wait_until,
};
use tokio::process::Command;

const LONG: Duration = Duration::from_secs(60);
const WORKER: &str = env!("CARGO_BIN_EXE_jobq-flow-worker");

/// `jobq-flow-worker`'s steps job, here: returns the checkpoint it would
/// start from, at once.
#[job(name = "jobq_flow_steps")]
async fn steps(ctx: JobContext, n: u64) -> Result<u64, CheckpointError> {
    let _ = n;
    Ok(ctx.last_checkpoint::<u64>().await?.unwrap_or(0))
}

/// Attempt 1 saves a text checkpoint and fails; attempt 2 reads it as a
/// number (its type "changed between deploys").
#[job(name = "checkpoint_changed", max_attempts = 2, retry = ["10ms"])]
async fn changed(ctx: JobContext) -> Result<(), JobError> {
    if ctx.attempt() == 1 {
        ctx.checkpoint("page 3").await?;
        return Err(JobError::retry("the first attempt fails after saving"));
    }
    let from: Option<u64> = ctx.last_checkpoint().await?;
    let _ = from;
    Ok(())
}

/// A worker process runs the steps job; the test reads its progress from
/// here while it runs, kills the process (SIGKILL) past step 3, and a
/// worker of its own runs the next attempt: it starts from the checkpoint
/// the killed attempt saved last.
async fn a_checkpoint_survives_a_kill_and_progress_shows_while_it_runs(db: TestDb) {
    let jobq = db.jobq().await;
    jobq.migrate().await.unwrap();
    let queue = unique_queue("checkpoint_kill");
    let mut command = Command::new(WORKER);
    command
        .env("JOBQ_FLOW_URL", db.url())
        .env("JOBQ_FLOW_QUEUE", &queue)
        .env("JOBQ_FLOW_LEASE_MS", "1000");
    let mut process = WorkerProcess::start(command, LONG).await;
    let id = jobq
        .enqueue_with(Steps::new(1_000), on(&queue))
        .await
        .unwrap()
        .id;
    // Progress, seen from this process while the job runs there.
    let seen = async || {
        let info = jobq.job(id).await.unwrap().unwrap();
        info.status == JobStatus::Processing
            && info
                .progress
                .as_ref()
                .is_some_and(|p| p.done >= 3 && p.total == 1_000)
    };
    wait_until("the running job's progress reached step 3", LONG, seen).await;
    let progress = jobq.job(id).await.unwrap().unwrap().progress.unwrap();
    assert_eq!(progress.note, format!("step {}", progress.done));
    // And in the queue's stats.
    let stats = jobq.stats().await.unwrap();
    let running = &stats
        .queue(&queue)
        .expect("the queue's figures")
        .in_progress;
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!((running[0].id, running[0].attempt), (id, 1));
    assert!(running[0].progress.done >= progress.done, "{running:?}");
    assert_eq!(running[0].progress.total, 1_000);
    process.kill().await;
    let saved: u64 = __store::load_checkpoint(&jobq, id)
        .await
        .unwrap()
        .expect("a checkpoint")
        .parse()
        .unwrap();
    assert!(saved >= 3, "{saved}");
    let printed = process.printed();
    let last_step = printed
        .iter()
        .filter_map(|l| l.strip_prefix(&format!("step {id} 1 ")))
        .filter_map(|n| n.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    // Each step is saved before it is said.
    assert!(saved >= last_step, "saved {saved}, said {last_step}");
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(200))
        .build()
        .unwrap()
        .start();
    wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(worker).await;
    assert_eq!(
        jobq.output::<Steps>(id).await.unwrap(),
        Some(saved),
        "the next attempt started from the last checkpoint"
    );
}

/// Only the attempt that holds the job saves its checkpoint: a reaped
/// claim's save matches nothing, the holder's is kept.
async fn a_stale_attempts_checkpoint_is_refused(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "checkpoint_fence").await;
    let id = jobq
        .enqueue_with(Steps::new(1), on(&queue))
        .await
        .unwrap()
        .id;
    let stale = __store::claim(&jobq, &queue, 1, Duration::ZERO, "stale")
        .await
        .unwrap();
    assert!(
        __store::save_checkpoint(&jobq, (id, stale[0].token), "1")
            .await
            .unwrap()
    );
    wait_until("the stale claim was reaped", LONG, async || {
        __store::reap(&jobq, &queue, 10).await.unwrap() == 1
    })
    .await;
    let holder = __store::claim(&jobq, &queue, 1, LONG, "holder")
        .await
        .unwrap();
    assert_eq!(
        __store::load_checkpoint(&jobq, id)
            .await
            .unwrap()
            .as_deref(),
        Some("1")
    );
    assert!(
        !__store::save_checkpoint(&jobq, (id, stale[0].token), "99")
            .await
            .unwrap()
    );
    assert!(
        __store::save_checkpoint(&jobq, (id, holder[0].token), "2")
            .await
            .unwrap()
    );
    // The same value again is still a save (rows matched, not changed).
    assert!(
        __store::save_checkpoint(&jobq, (id, holder[0].token), "2")
            .await
            .unwrap()
    );
    assert_eq!(
        __store::load_checkpoint(&jobq, id)
            .await
            .unwrap()
            .as_deref(),
        Some("2")
    );
    assert!(
        __store::complete(&jobq, &[(id, holder[0].token)])
            .await
            .unwrap()
            == 1
    );
    assert!(
        !__store::save_checkpoint(&jobq, (id, holder[0].token), "3")
            .await
            .unwrap()
    );
    assert_eq!(
        __store::load_checkpoint(&jobq, id)
            .await
            .unwrap()
            .as_deref(),
        Some("2")
    );
}

async fn a_checkpoint_of_a_changed_type_fails_the_attempt_and_says_why(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "checkpoint_changed").await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Changed::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(worker).await;
    let error = info.last_error.unwrap_or_default();
    assert!(
        error
            .contains("the saved checkpoint does not deserialize into `core::option::Option<u64>`")
            || error.contains("the saved checkpoint does not deserialize into `u64`"),
        "{error}"
    );
    assert_eq!(info.history.len(), 2, "{:?}", info.history);
}

jobq_tests::on_every_backend!(
    a_checkpoint_survives_a_kill_and_progress_shows_while_it_runs,
    a_stale_attempts_checkpoint_is_refused,
    a_checkpoint_of_a_changed_type_fails_the_attempt_and_says_why
);
jobq_tests::on_every_backend!(@backend galera, [tokio {}],
    a_stale_attempts_checkpoint_is_refused
);
