//! The contract suite: what every backend's store promises, method by
//! method, written once and run against MariaDB/MySQL, PostgreSQL, SQLite
//! and a 3-node Galera cluster — in the spirit of River's
//! `riverdrivertest`. A new backend is done when it passes this suite.
//!
//! Each test calls the store directly: through `jobq_runtime::__store`
//! (thin wrappers, one store method each), or through a `Jobq` method that
//! adds nothing to its store method but a check of its arguments or a
//! signal to this process's workers (`job`, `counts`, `retry`, `cancel`,
//! `pause`, `resume`, `paused_queues`, `prune_finished`, `prune_failed`) —
//! never through a `Worker`. It asserts the rows as stored: status,
//! attempts, token, error, and each time column against the others the
//! same statement wrote (a claimed row's `run_at` is its `claimed_at` plus
//! the lease, a finished row's `run_at` is its `finished_at`, …). What the
//! worker builds on top of these is the conformance suite's
//! (`tests/tests/conformance/`).
//!
//! One module per area of the contract: [`enqueue`], [`claim`],
//! [`settle`] (and [`fencing`], a model of every operation by two
//! claimers), [`heartbeat`], [`reap`], [`prune`], [`control`] (cancel,
//! retry, pause), [`inspect`] (job, counts), [`workers`] (`jobq_workers`).
//! A backend that differs says so in the test, in one documented branch;
//! no test is written twice.
//!
//! Tests share a database and run in parallel, so each works in queues of
//! its own. No sleeps: a lease is made to expire by moving its deadline
//! back ([`expire`]), and the one wait for the clock (a job delayed by
//! 200 ms) polls with a deadline. On Galera (`galera::…`) the handle is on
//! node 0 (`jobq_tests::galera::shared`), and so is every transaction a
//! test holds open.

/// Instantiates each test on every backend, and on the 3-node Galera
/// cluster (`galera::…`).
macro_rules! contract {
    ($($test:ident),* $(,)?) => {
        jobq_tests::on_every_backend!($($test),*);
        jobq_tests::on_galera!($($test),*);
    };
}

mod claim;
mod control;
mod enqueue;
mod fencing;
mod heartbeat;
mod inspect;
mod keys;
mod limits;
mod prune;
mod rates;
mod reap;
mod settle;
mod unique;
mod workers;

use std::time::{Duration, Instant};

use jobq_runtime::__store::{self, Claim, Row};
use jobq_runtime::{Backend, Enqueue, JobInfo, JobStatus, Jobq};
use jobq_tests::sql::{Arg, Db};
use jobq_tests::{TestDb, unique_queue};

/// The job name of every row the suite writes (no worker runs them).
const JOB: &str = "contract_probe";

/// Long enough that no lease runs out unless a test expires it.
const LEASE: Duration = Duration::from_secs(60);

/// A row of [`JOB`] on `queue` with payload `{"n":n}`, due now, 3 attempts.
fn row(queue: &str, n: i64) -> Row {
    row_with(n, Enqueue::new().queue(queue).max_attempts(3))
}

/// A row of [`JOB`] with payload `{"n":n}`, placed by `options`.
fn row_with(n: i64, options: Enqueue) -> Row {
    Row::new(JOB, format!("{{\"n\":{n}}}"), options)
}

/// Enqueues [`row`]`(queue, n)`; its id.
async fn enqueue(jobq: &Jobq, queue: &str, n: i64) -> i64 {
    let enqueued = __store::enqueue(jobq, &row(queue, n)).await.unwrap();
    assert!(!enqueued.duplicate);
    enqueued.id
}

/// Enqueues `row`; its id.
async fn enqueue_row(jobq: &Jobq, row: &Row) -> i64 {
    __store::enqueue(jobq, row).await.unwrap().id
}

/// One claim of up to `limit` rows of `queue` by `worker`, leased for [`LEASE`].
async fn claim(jobq: &Jobq, queue: &str, limit: u32, worker: &str) -> Vec<Claim> {
    __store::claim(jobq, queue, limit, LEASE, worker)
        .await
        .unwrap()
}

/// The ids of `claims`, in their order.
fn ids(claims: &[Claim]) -> Vec<i64> {
    claims.iter().map(|c| c.id).collect()
}

/// A claim that must take exactly one row: `id`.
async fn claim_only(jobq: &Jobq, queue: &str, id: i64, worker: &str) -> Claim {
    let claimed = claim(jobq, queue, 10, worker).await;
    assert_eq!(ids(&claimed), [id], "{claimed:?}");
    claimed[0]
}

/// The fence of a claim, as the store's settles take it.
fn fence(claim: &Claim) -> (i64, i64) {
    (claim.id, claim.token)
}

/// Row `id` as `Jobq::job` reads it.
async fn info(jobq: &Jobq, id: i64) -> JobInfo {
    jobq.job(id).await.unwrap().expect("the row exists")
}

/// Row `id` and its lease token (not part of `JobInfo`).
async fn stored(jobq: &Jobq, id: i64) -> (JobInfo, Option<i64>) {
    let db = Db::of(jobq);
    let sql = "SELECT lease_token FROM jobq_jobs WHERE id = ?";
    let token: Vec<(Option<i64>,)> = db.fetch_all(sql, &[Arg::Int(id)]).await.unwrap();
    (info(jobq, id).await, token[0].0)
}

/// Asserts that row `id` is held by `claim` of `worker`: `processing`
/// under its token, its lease `lease` from the claim.
async fn assert_held(jobq: &Jobq, claim: &Claim, worker: &str, lease: Duration) -> JobInfo {
    let (row, token) = stored(jobq, claim.id).await;
    assert_eq!(
        (row.status, row.attempts, token),
        (JobStatus::Processing, claim.attempt, Some(claim.token)),
        "{row:?}"
    );
    assert_eq!(row.claimed_by.as_deref(), Some(worker));
    let claimed_at = row.claimed_at.expect("a claimed row says when");
    assert_eq!(row.run_at - claimed_at, chrono_of(lease), "{row:?}");
    assert_eq!(row.finished_at, None);
    row
}

/// Asserts that row `id` is finished in `status`: no token, its `run_at`
/// its `finished_at`.
async fn assert_finished(jobq: &Jobq, id: i64, status: JobStatus) -> JobInfo {
    let (row, token) = stored(jobq, id).await;
    assert_eq!((row.status, token), (status, None), "{row:?}");
    assert_eq!(row.finished_at, Some(row.run_at), "{row:?}");
    row
}

fn chrono_of(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap()
}

/// Moves the lease of `processing` row `id` an hour into the past, as if
/// its worker had stopped renewing it long ago.
async fn expire(jobq: &Jobq, id: i64) {
    let db = Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_jobs SET run_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ? AND status = 'processing'",
        "UPDATE jobq_jobs SET run_at = now() - interval '1 hour' WHERE id = ? AND status = 'processing'",
        "UPDATE jobq_jobs SET run_at = run_at - 7200000000 WHERE id = ? AND status = 'processing'",
    );
    assert_eq!(db.execute(sql, &[Arg::Int(id)]).await.unwrap(), 1);
}

/// Moves the times of finished row `id` an hour back, as if it finished
/// long ago (`finished_at`, and `run_at`, the same time on a finished row).
async fn finished_an_hour_ago(jobq: &Jobq, id: i64) {
    assert_finished(jobq, id, info(jobq, id).await.status).await;
    let db = Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_jobs SET finished_at = finished_at - INTERVAL 1 HOUR, run_at = run_at - INTERVAL 1 HOUR WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - interval '1 hour', run_at = run_at - interval '1 hour' WHERE id = ?",
        "UPDATE jobq_jobs SET finished_at = finished_at - 3600000000, run_at = run_at - 3600000000 WHERE id = ?",
    );
    assert_eq!(db.execute(sql, &[Arg::Int(id)]).await.unwrap(), 1);
}

/// How long a call that waits on no lock may take. A lock wait lasts until
/// the holder ends, or the server's lock wait timeout (5 s on jobq's
/// MySQL sessions).
const NO_WAIT: Duration = Duration::from_millis(500);

/// Runs `call`, which must not wait on a lock, and asserts it took less
/// than [`NO_WAIT`] (it is given 5 s, to fail rather than hang).
async fn without_waiting<T>(what: &str, call: impl Future<Output = T>) -> T {
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{what} waited on a lock"));
    let took = started.elapsed();
    assert!(took < NO_WAIT, "{what} took {took:?}: it waited on a lock");
    out
}
