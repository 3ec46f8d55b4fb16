//! Each job's attempt history, on every backend: every attempt that ended
//! other than in success is kept with the job — its number, the worker that
//! ran it, when it started and ended, how it ended and what it said — the
//! latest `HISTORY_CAP`; a successful attempt adds nothing to the row (the
//! row's own `claimed_by`, `claimed_at` and `finished_at` are it, and
//! `JobInfo::timeline` shows it). Two workers take turns at one job's
//! attempts (an error, a panic, a timeout, a snooze, then success), each
//! attempt naming the worker that ran it; a worker process killed with
//! SIGKILL mid-attempt leaves an attempt the reaper records as `lease
//! expired`, naming that process's worker.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jobq_runtime::{
    AttemptRecord, HISTORY_CAP, JobContext, JobError, JobInfo, JobStatus, Jobq, State, Worker, job,
};
use jobq_tests::{TestDb, WorkerProcess, fixture, on, stop, unique_queue, wait_for_status};
use tokio::process::Command;

const LONG: Duration = Duration::from_secs(60);
const WORKER: &str = env!("CARGO_BIN_EXE_jobq-flow-worker");

/// Which worker ran each run of a job, in order.
#[derive(Debug, Clone, Default)]
struct Runs(Arc<Mutex<Vec<&'static str>>>);

impl Runs {
    fn push(&self, worker: &'static str) -> usize {
        let mut runs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        runs.push(worker);
        runs.len()
    }

    fn all(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The name of the worker a handler runs in (each worker has its own).
struct Me(&'static str);

/// Run 1 fails, run 2 panics, run 3 overruns its timeout, run 4 snoozes
/// (its attempt given back), run 5 succeeds.
#[job(name = "history_steps", max_attempts = 6, retry = ["10ms"], timeout = "300ms")]
async fn steps(runs: State<Runs>, me: State<Me>) -> Result<(), JobError> {
    match runs.push(me.0) {
        1 => Err(JobError::retry("the first run fails")),
        2 => panic!("the second run panics"),
        3 => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        }
        4 => Err(JobError::snooze(Duration::from_millis(10))),
        _ => Ok(()),
    }
}

/// Always fails, saying which attempt it was.
#[job(name = "history_always", max_attempts = 30, retry = ["1ms"])]
async fn always(ctx: JobContext) -> Result<(), String> {
    Err(format!("failure {}", ctx.attempt()))
}

/// The job `jobq-flow-worker` runs, here finished at once.
#[job(name = "jobq_flow_work")]
async fn flow_work(n: u64) {
    let _ = n;
}

/// Two workers (`a`, `b`) on one queue, turns taken as the claims fall:
/// each attempt's entry names the worker whose handler ran it.
async fn an_attempt_history_across_an_error_a_panic_a_timeout_and_a_snooze(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "history").await;
    let runs = Runs::default();
    let start = |name: &'static str| {
        Worker::builder(jobq.clone())
            .queue_unchecked(&queue, 1)
            .state(runs.clone())
            .state(Me(name))
            .worker_id(name)
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap()
            .start()
    };
    let (a, b) = (start("a"), start("b"));
    let id = jobq
        .enqueue_with(Steps::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(a).await;
    stop(b).await;
    let runs = runs.all();
    assert_eq!(runs.len(), 5, "{runs:?}");
    let history = &info.history;
    let outcomes: Vec<&str> = history.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        ["error", "panic", "timeout", "snooze"],
        "{history:#?}"
    );
    // The snoozed attempt gave its number back to the next.
    let numbers: Vec<u32> = history.iter().map(|r| r.attempt).collect();
    assert_eq!(numbers, [1, 2, 3, 4], "{history:#?}");
    let said = |i: usize| history[i].error.clone().unwrap_or_default();
    assert_eq!(said(0), "the first run fails");
    assert!(
        said(1).starts_with("handler panicked at tests/tests/history.rs:")
            && said(1).ends_with(": the second run panics"),
        "{}",
        said(1)
    );
    assert_eq!(said(2), "attempt timed out after 300ms");
    assert_eq!(said(3), "snoozed for 10ms");
    for (record, ran) in history.iter().zip(&runs) {
        assert_eq!(record.worker.as_deref(), Some(*ran), "{history:#?}");
        let (started, ended) = (record.started_at.unwrap(), record.ended_at.unwrap());
        assert!(started <= ended, "{record:?}");
        assert!(started >= info.created_at, "{record:?}");
    }
    assert!(
        history[2].duration().unwrap() >= Duration::from_millis(300),
        "{:?}",
        history[2]
    );
    // The timeline adds the attempt that succeeded, from the row.
    let timeline = info.timeline();
    assert_eq!(timeline.len(), 5);
    let last = &timeline[4];
    assert_eq!(
        (last.attempt, last.outcome.as_str(), last.worker.as_deref()),
        (4, "succeeded", Some(runs[4]))
    );
    assert_eq!(last.ended_at, info.finished_at);
    // A list page leaves the history out; one job read has it.
    assert!(list_row(&jobq, &queue).await.history.is_empty());
}

/// A job that fails 30 times keeps its latest [`HISTORY_CAP`] (25)
/// attempts: 6 to 30, the oldest dropped as new ones came.
async fn the_history_keeps_the_latest_attempts_up_to_its_cap(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "history_cap").await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let id = jobq
        .enqueue_with(Always::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let info = wait_for_status(&jobq, id, JobStatus::Failed, LONG).await;
    stop(worker).await;
    assert_eq!(info.attempts, 30);
    assert_eq!(info.history.len(), HISTORY_CAP);
    let numbers: Vec<u32> = info.history.iter().map(|r| r.attempt).collect();
    assert_eq!(numbers, (6..=30).collect::<Vec<u32>>());
    let last: &AttemptRecord = info.history.last().unwrap();
    assert_eq!(
        last.error.as_deref(),
        Some("failure 30 (attempt 30 of 30: attempts exhausted)")
    );
    assert_eq!(info.last_error, last.error);
    // A failed job's timeline is its history.
    assert_eq!(info.timeline(), info.history);
}

/// A worker process killed (SIGKILL) while its attempt runs: the reaper
/// records the attempt as `lease expired`, naming that process's worker;
/// the next attempt, here, succeeds.
async fn a_killed_processs_attempt_is_recorded_as_lease_expired(db: TestDb) {
    let jobq = db.jobq().await;
    jobq.migrate().await.unwrap();
    let queue = unique_queue("history_kill");
    let mut command = Command::new(WORKER);
    command
        .env("JOBQ_FLOW_URL", db.url())
        .env("JOBQ_FLOW_QUEUE", &queue)
        .env("JOBQ_FLOW_LEASE_MS", "1000");
    let mut process = WorkerProcess::start(command, LONG).await;
    // Runs for a minute (see `jobq-flow-worker`).
    let id = jobq
        .enqueue_with(FlowWork::new(1_000_060_000), on(&queue))
        .await
        .unwrap()
        .id;
    let held = async || jobq.job(id).await.unwrap().unwrap().status == JobStatus::Processing;
    jobq_tests::wait_until("the process runs the job", LONG, held).await;
    let pid = process.pid().expect("its pid");
    process.kill().await;
    let worker = Worker::builder(jobq.clone())
        .queue_unchecked(&queue, 1)
        .worker_id("after")
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(200))
        .build()
        .unwrap()
        .start();
    let info = wait_for_status(&jobq, id, JobStatus::Done, LONG).await;
    stop(worker).await;
    assert_eq!(info.history.len(), 1, "{:#?}", info.history);
    let lost = &info.history[0];
    assert_eq!((lost.attempt, lost.outcome.as_str()), (1, "lease expired"));
    let killed = lost.worker.clone().unwrap_or_default();
    assert!(
        killed.contains(&format!(":{pid}:")),
        "the killed process's worker ({pid}): {killed}"
    );
    assert!(
        lost.error.as_deref().unwrap_or("").contains(&killed),
        "{lost:?}"
    );
    let timeline = info.timeline();
    let last = timeline.last().unwrap();
    assert_eq!(
        (last.attempt, last.outcome.as_str(), last.worker.as_deref()),
        (2, "succeeded", Some("after"))
    );
}

/// The (only) row of `queue` as `Jobq::list` reads it.
async fn list_row(jobq: &Jobq, queue: &str) -> JobInfo {
    let filter = jobq_runtime::JobFilter::new().queue(queue);
    let page = jobq
        .list(&filter, jobq_runtime::Page::first(10))
        .await
        .unwrap();
    page.jobs.into_iter().next().expect("the row")
}

jobq_tests::on_every_backend!(
    an_attempt_history_across_an_error_a_panic_a_timeout_and_a_snooze,
    the_history_keeps_the_latest_attempts_up_to_its_cap,
    a_killed_processs_attempt_is_recorded_as_lease_expired
);
