//! Waiting on a condition with a deadline: the one polling loop of jobq's
//! tests. `jobq-runtime`'s own integration tests include this file by path
//! (`#[path = "../../tests/src/wait.rs"] mod wait;`), so it needs only `std`,
//! `tokio` and `jobq_runtime`.

use std::fmt::{self, Display};
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobq_runtime::{JobInfo, JobStatus, Jobq};

/// Polls `condition` every 10 ms until it holds or `deadline` passes;
/// whether it held. For a wait that must not panic (inside a handler).
pub async fn eventually<F, Fut>(deadline: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if condition().await {
            return true;
        }
        if start.elapsed() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls `condition` every 10 ms until it holds; panics naming `what`
/// (formatted only then) once `deadline` passes.
pub async fn wait_until<F, Fut>(what: impl Display, deadline: Duration, condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    assert!(
        eventually(deadline, condition).await,
        "timed out after {deadline:?} waiting until {what}"
    );
}

/// Waits until `done` jobs of `queue` are `done`.
pub async fn wait_for_done(jobq: &Jobq, queue: &str, done: u64, deadline: Duration) {
    let what = format!("{done} jobs of {queue} are done");
    wait_until(what, deadline, || async {
        jobq.counts(queue).await.expect("counts").done == done
    })
    .await;
}

/// Waits until job `id` has `status`; returns its row. On timeout the panic
/// shows the row as last seen.
pub async fn wait_for_status(
    jobq: &Jobq,
    id: i64,
    status: JobStatus,
    deadline: Duration,
) -> JobInfo {
    let last = Mutex::new(None);
    wait_until(
        StatusWait {
            id,
            status,
            last: &last,
        },
        deadline,
        || async {
            let info = jobq.job(id).await.expect("job").expect("job exists");
            let reached = info.status == status;
            *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(info);
            reached
        },
    )
    .await;
    let last = last.into_inner().unwrap_or_else(PoisonError::into_inner);
    last.expect("the job was read")
}

/// What [`wait_for_status`] waits for, with the row as last seen.
struct StatusWait<'a> {
    id: i64,
    status: JobStatus,
    last: &'a Mutex<Option<JobInfo>>,
}

impl Display for StatusWait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        write!(
            f,
            "job {} is {}; last seen: {:?}",
            self.id, self.status, *last
        )
    }
}
