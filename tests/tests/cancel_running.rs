//! Cancelling a running job: the handler's cancellation token fires at once
//! when the worker is in the cancelling process, and within one heartbeat
//! interval when it is in another; only the attempt the cancel ended is
//! stopped.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{__store, JobContext, JobFilter, JobStatus, State, Worker, job};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{Gates, Recorder, TestDb, on, unique_queue, wait_for_status, wait_until};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Long enough that a heartbeat cannot be what stopped an attempt.
const LONG_HEARTBEAT: Duration = Duration::from_secs(20);

/// What the handler saw: attempts started, cancellations seen (with when),
/// and gates that let an attempt finish.
#[derive(Debug, Clone, Default)]
struct Seen {
    started: Recorder,
    cancelled: Recorder,
    finish: Gates<(i64, u32)>,
}

/// Runs until cancelled, or until its gate opens (then it succeeds). A
/// cancelled attempt's future is dropped by the worker as the token fires:
/// the drop is when the cancel reached it.
#[job(name = "cancel_waits")]
async fn waits(ctx: &JobContext, seen: State<Seen>) {
    seen.started.record(ctx.id(), ctx.attempt());
    let mut stopped = Stopped {
        seen: Seen::clone(&seen),
        id: ctx.id(),
        attempt: ctx.attempt(),
        finished: false,
    };
    tokio::select! {
        () = ctx.cancelled() => {}
        () = seen.finish.wait((ctx.id(), ctx.attempt())) => stopped.finished = true,
    }
}

/// Like [`waits`], but never looks at its context's token: it only awaits
/// its gate. The worker stops it all the same, by dropping its future.
#[job(name = "cancel_ignores_token")]
async fn ignores_token(ctx: &JobContext, seen: State<Seen>) {
    seen.started.record(ctx.id(), ctx.attempt());
    let mut stopped = Stopped {
        seen: Seen::clone(&seen),
        id: ctx.id(),
        attempt: ctx.attempt(),
        finished: false,
    };
    seen.finish.wait((ctx.id(), ctx.attempt())).await;
    stopped.finished = true;
}

/// Records a stop of an attempt that did not finish.
struct Stopped {
    seen: Seen,
    id: i64,
    attempt: u32,
    finished: bool,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.finished {
            self.seen.cancelled.record(self.id, self.attempt);
        }
    }
}

/// The job the `jobq-cancel-worker` process runs.
#[job(name = "cancel_elsewhere")]
async fn cancel_elsewhere() {}

const WORKER: &str = env!("CARGO_BIN_EXE_jobq-cancel-worker");

fn worker(db: &jobq_runtime::Jobq, queue: &str, seen: &Seen) -> jobq_runtime::WorkerHandle {
    Worker::builder(db.clone())
        .queue_unchecked(queue, 2)
        .state(seen.clone())
        .lease(Duration::from_secs(60))
        .heartbeat_interval(LONG_HEARTBEAT)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start()
}

async fn started(seen: &Seen, id: i64, attempt: u32) {
    wait_until(
        format!("attempt {attempt} of job {id} runs"),
        Duration::from_secs(10),
        || async { seen.started.runs(id).len() >= attempt as usize },
    )
    .await;
}

/// The lease token of `id` as stored.
/// Enqueues one job that runs until it is told to finish, returning its id.
async fn enqueue_waiting(jobq: &jobq_runtime::Jobq, queue: &str) -> i64 {
    jobq.enqueue_with(Waits::new(), on(queue)).await.unwrap().id
}

/// Waits until the handler running `id` saw its cancel (`what`, in the timeout's message).
async fn cancel_seen(seen: &Seen, id: i64, what: &str) {
    wait_until(what, Duration::from_secs(10), || async {
        !seen.cancelled.runs(id).is_empty()
    })
    .await;
}

async fn token(jobq: &jobq_runtime::Jobq, id: i64) -> i64 {
    let rows: Vec<(Option<i64>,)> = Db::of(jobq)
        .fetch_all(
            "SELECT lease_token FROM jobq_jobs WHERE id = ?",
            &[Arg::Int(id)],
        )
        .await
        .unwrap();
    rows[0].0.expect("held")
}

/// `cancel` through another handle (its own pool) of the same database
/// reaches the handler well before the next heartbeat, and the row stays
/// `cancelled` (the stopped attempt does not settle).
async fn a_cancel_reaches_a_handler_of_this_process_at_once(db: TestDb) {
    let queue = unique_queue("cancel-now");
    let jobq = db.jobq().await;
    let seen = Seen::default();
    let handle = worker(&jobq, &queue, &seen);
    let id = enqueue_waiting(&jobq, &queue).await;
    started(&seen, id, 1).await;
    let other = db.jobq().await;
    let at = Instant::now();
    assert!(other.cancel(id).await.unwrap());
    cancel_seen(&seen, id, "the handler sees the cancel").await;
    let took = seen.cancelled.runs(id)[0].at.duration_since(at);
    println!(
        "{:?}: cancel reached the handler in {took:?} (heartbeat every {LONG_HEARTBEAT:?})",
        db.backend()
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
    jobq_tests::stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Cancelled);
}

/// A handler that never checks its cancellation token is stopped at its
/// next `.await` all the same: the worker drops its future as the token
/// fires, so the code after that await never runs.
async fn a_handler_that_ignores_its_token_is_stopped_at_its_next_await(db: TestDb) {
    let queue = unique_queue("cancel-ignored");
    let jobq = db.jobq().await;
    let seen = Seen::default();
    let handle = worker(&jobq, &queue, &seen);
    let id = jobq
        .enqueue_with(IgnoresToken::new(), on(&queue))
        .await
        .unwrap()
        .id;
    started(&seen, id, 1).await;
    let at = Instant::now();
    assert!(jobq.cancel(id).await.unwrap());
    cancel_seen(&seen, id, "the handler's future is dropped").await;
    let took = seen.cancelled.runs(id)[0].at.duration_since(at);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    jobq_tests::stop(handle).await;
    let info = jobq.job(id).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Cancelled);
}

/// `cancel_where` stops every running attempt it cancelled, at once.
async fn cancel_where_reaches_running_handlers_at_once(db: TestDb) {
    let queue = unique_queue("cancel-where-now");
    let jobq = db.jobq().await;
    let seen = Seen::default();
    let handle = worker(&jobq, &queue, &seen);
    let a = enqueue_waiting(&jobq, &queue).await;
    let b = enqueue_waiting(&jobq, &queue).await;
    started(&seen, a, 1).await;
    started(&seen, b, 1).await;
    let at = Instant::now();
    let cancelled = jobq
        .cancel_where(&JobFilter::new().queue(&queue))
        .await
        .unwrap();
    assert_eq!(cancelled, 2);
    for id in [a, b] {
        cancel_seen(&seen, id, "the handler sees the cancel").await;
        let took = seen.cancelled.runs(id)[0].at.duration_since(at);
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
    jobq_tests::stop(handle).await;
}

/// The signal names the attempt it ended: after a retry, a late signal of
/// the cancelled attempt does not stop the new one, which finishes.
async fn a_cancel_stops_only_the_attempt_it_ended(db: TestDb) {
    let queue = unique_queue("cancel-fenced");
    let jobq = db.jobq().await;
    let seen = Seen::default();
    let handle = worker(&jobq, &queue, &seen);
    let id = enqueue_waiting(&jobq, &queue).await;
    started(&seen, id, 1).await;
    let first = token(&jobq, id).await;
    assert!(jobq.cancel(id).await.unwrap());
    cancel_seen(&seen, id, "attempt 1 sees the cancel").await;
    assert!(jobq.retry(id).await.unwrap());
    started(&seen, id, 2).await;
    let second = token(&jobq, id).await;
    assert_ne!(first, second);
    // The first attempt's signal, late: the second attempt is not its.
    __store::stop_cancelled(&[(id, first)]);
    seen.finish.open((id, 2));
    wait_for_status(&jobq, id, JobStatus::Done, Duration::from_secs(10)).await;
    let cancelled: Vec<u32> = seen.cancelled.runs(id).iter().map(|r| r.attempt).collect();
    assert_eq!(cancelled, [1]);
    jobq_tests::stop(handle).await;
}

/// Lines the worker process printed, as they come.
#[derive(Debug, Clone, Default)]
struct Lines(Arc<Mutex<Vec<(String, Instant)>>>);

impl Lines {
    fn at(&self, line: &str) -> Option<Instant> {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().find(|(l, _)| l == line).map(|(_, at)| *at)
    }
}

/// A worker in another process learns of the cancel from its heartbeat:
/// its handler is stopped within one heartbeat interval (1 s here), not
/// at once and not only when the lease (30 s) runs out.
async fn a_cancel_reaches_a_handler_of_another_process_within_a_heartbeat(db: TestDb) {
    let heartbeat = Duration::from_secs(1);
    let queue = unique_queue("cancel-elsewhere");
    let jobq = db.jobq().await;
    let mut child = tokio::process::Command::new(WORKER)
        .env("JOBQ_CANCEL_URL", db.url())
        .env("JOBQ_CANCEL_QUEUE", &queue)
        .env(
            "JOBQ_CANCEL_HEARTBEAT_MS",
            heartbeat.as_millis().to_string(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn jobq-cancel-worker");
    let lines = Lines::default();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let reader = {
        let lines = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out.next_line().await {
                lines
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((line, Instant::now()));
            }
        })
    };
    let id = jobq
        .enqueue_with(CancelElsewhere::new(), on(&queue))
        .await
        .unwrap()
        .id;
    let started = format!("started {id}");
    wait_until(
        "the other process runs the job",
        Duration::from_secs(30),
        || async { lines.at(&started).is_some() },
    )
    .await;
    let at = Instant::now();
    assert!(jobq.cancel(id).await.unwrap());
    let cancelled = format!("cancelled {id}");
    wait_until(
        "the other process sees the cancel",
        Duration::from_secs(10),
        || async { lines.at(&cancelled).is_some() },
    )
    .await;
    let took = lines.at(&cancelled).unwrap().duration_since(at);
    println!(
        "{:?}: cancel reached another process's handler in {took:?} (heartbeat every {heartbeat:?})",
        db.backend()
    );
    assert!(
        took < heartbeat + Duration::from_millis(700),
        "within one heartbeat interval (and the time to renew): {took:?}"
    );
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the worker process exits")
        .unwrap();
    assert!(status.success(), "{status}");
    reader.await.unwrap();
    assert_eq!(
        jobq.job(id).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
}

jobq_tests::on_every_backend!(
    a_cancel_reaches_a_handler_of_this_process_at_once,
    a_handler_that_ignores_its_token_is_stopped_at_its_next_await,
    cancel_where_reaches_running_handlers_at_once,
    a_cancel_stops_only_the_attempt_it_ended,
    a_cancel_reaches_a_handler_of_another_process_within_a_heartbeat,
);
