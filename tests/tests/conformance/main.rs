//! The behavioural suite: every promise of the worker and the handle that is
//! not dialect-specific, written once and run against MariaDB/MySQL,
//! PostgreSQL and SQLite.
//!
//! Tests share a database and run in parallel, so each uses its own queue.
//! On Galera (`galera::…`) they share the cluster of this binary
//! (`jobq_tests::galera::shared`).
//! One module per guarantee area; the jobs and the arrange step they share
//! (`jobq_tests::fixture`: a handle, a queue of the test's own, a recorder;
//! [`worker`] on them; [`run_alone`] for one job's outcome) live here.

/// Instantiates each test on every backend, and on a 3-node Galera
/// cluster (`galera::…`: the test's handle on node 0, the handles it
/// connects itself, its extra workers, on the nodes in turn).
macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        jobq_tests::on_every_backend!($($test),*);
        jobq_tests::on_galera!($($test),*);
    };
}

mod cancel;
mod claims;
mod cron;
mod enqueue;
mod leases;
mod prune;
mod retries;
mod settles;
mod shutdown;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{
    Enqueue, Job, JobContext, JobError, JobInfo, JobStatus, Jobq, State, Worker, job,
};
use jobq_tests::{
    Recorder, TestDb, assert_contains, assert_took, enqueue_ids, fixture, on, stop, wait_for_done,
    wait_for_status, wait_until,
};

/// Held attempts of a gated job, by attempt number.
type Gates = jobq_tests::Gates<u32>;

#[job(name = "conf_record")]
async fn record(ctx: &JobContext, recorder: State<Recorder>, n: u64) {
    let _ = n;
    recorder.record(ctx.id(), ctx.attempt());
}

#[job(name = "conf_permanent")]
async fn permanent(ctx: JobContext, recorder: State<Recorder>) -> Result<(), JobError> {
    recorder.record(ctx.id(), ctx.attempt());
    Err(JobError::permanent("no such user"))
}

#[job(name = "conf_long")]
async fn long(ctx: JobContext, recorder: State<Recorder>, first_attempt_ms: u64) {
    recorder.record(ctx.id(), ctx.attempt());
    if ctx.attempt() == 1 {
        tokio::time::sleep(Duration::from_millis(first_attempt_ms)).await;
    }
}

/// The idempotency keys handlers saw.
#[derive(Debug, Clone, Default)]
struct KeyLog(Arc<Mutex<Vec<String>>>);

impl KeyLog {
    /// Notes the key the handler of `ctx` sees.
    fn note(&self, ctx: &JobContext) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ctx.idempotency_key());
    }

    /// The keys noted so far, in order.
    fn seen(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

const LONG: Duration = Duration::from_secs(20);

/// The whole arrange-act step of a test of one job's outcome: `job` runs
/// alone on a fresh queue and worker (2 slots) until it is `status`; its row
/// then, and the recorder of its runs.
async fn run_alone<J: Job>(
    db: &TestDb,
    queue: &str,
    job: J,
    status: JobStatus,
) -> (JobInfo, Recorder) {
    let (jobq, queue, recorder) = fixture(db, queue).await;
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    let id = enqueue(&jobq, job, on(&queue)).await;
    let info = wait_for_status(&jobq, id, status, LONG).await;
    stop(handle).await;
    (info, recorder)
}

/// A worker on `queue` with the states every job here needs.
fn worker(
    jobq: &Jobq,
    queue: &str,
    concurrency: usize,
    recorder: &Recorder,
) -> jobq_runtime::WorkerBuilder {
    Worker::builder(jobq.clone())
        .queue_unchecked(queue, concurrency)
        .state(recorder.clone())
        .state(Gates::default())
        .state(KeyLog::default())
        .poll_interval(Duration::from_millis(50))
        .reap_interval(Duration::from_millis(100))
}

/// Enqueues `job` with `options`; its id.
async fn enqueue<J: Job>(jobq: &Jobq, job: J, options: Enqueue) -> i64 {
    jobq.enqueue_with(job, options).await.unwrap().id
}
