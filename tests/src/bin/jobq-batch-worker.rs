//! A worker process of the batch tests (`tests/tests/batches.rs`): one
//! real [`Worker`] serving one queue with 2 slots, running `batch_item`
//! jobs. With `JOBQ_BATCH_ABORT=1` the process aborts (as `kill -9` would)
//! right after a batch job's settle has committed, before the release that
//! would move the batch's callbacks. It prints `started` once its worker
//! runs, `ran <n>` as each job ends, and shuts down gracefully when its
//! stdin closes.
//!
//! - `JOBQ_BATCH_URL`: the database; `JOBQ_BATCH_QUEUE`: the queue.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use jobq_runtime::__inject::{Action, Point, arm};
use jobq_runtime::{Jobq, Worker, job};

/// A job of a batch: prints that it ran.
#[job(name = "batch_item", max_attempts = 1)]
async fn item(n: u64) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ran {n}");
    let _ = out.flush();
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let queue = var("JOBQ_BATCH_QUEUE");
    if std::env::var("JOBQ_BATCH_ABORT").is_ok_and(|v| v == "1") {
        arm(&queue, Point::BeforeRelease, Action::Abort, 1);
    }
    let jobq = match Jobq::connect_with(&var("JOBQ_BATCH_URL"), 4).await {
        Ok(jobq) => jobq,
        Err(error) => {
            eprintln!("batch worker: cannot connect: {error}");
            return ExitCode::from(2);
        }
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(queue, 2)
        .poll_interval(Duration::from_millis(50))
        .shutdown_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("batch worker: {error}");
            return ExitCode::from(3);
        }
    };
    jobq_tests::process::serve_until_stdin_closes(worker.start(), "batch worker").await
}
