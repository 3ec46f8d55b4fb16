//! A worker process of the live-worker tests (`tests/tests/workers.rs`):
//! one real [`Worker`] serving `JOBQ_PRESENCE_QUEUE`, refreshing its row
//! in `jobq_workers` every `JOBQ_PRESENCE_MS` (default 200). It links a
//! job the test binary does not, [`welcome`], which it publishes: the
//! tests enqueue it by name as a tool would. It prints `started <worker
//! id>` once its worker runs, and shuts down gracefully when its stdin
//! closes (the tests also kill it with SIGKILL).
//!
//! - `JOBQ_PRESENCE_URL`: the database.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use jobq_runtime::{Jobq, Worker, job};

/// Welcomes a user: a job with a queue, attempts, a timeout, a key
/// template and an optional field, for `enqueue_json` to take from the
/// published kind.
#[job(
    name = "jobq_presence_welcome",
    queue = "presence-mail",
    max_attempts = 5,
    timeout = "30s",
    key = "welcome:{user_id}"
)]
async fn welcome(user_id: u64, locale: Option<String>) {
    let _ = (user_id, locale);
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let url = var("JOBQ_PRESENCE_URL");
    let queue = var("JOBQ_PRESENCE_QUEUE");
    let presence = Duration::from_millis(number("JOBQ_PRESENCE_MS", 200));
    let jobq = match Jobq::connect_with(&url, 4).await {
        Ok(jobq) => jobq,
        Err(error) => {
            eprintln!("presence worker: cannot connect: {error}");
            return ExitCode::from(2);
        }
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(&queue, 2)
        .presence_interval(presence)
        .poll_interval(Duration::from_millis(100))
        .shutdown_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("presence worker: {error}");
            return ExitCode::from(3);
        }
    };
    let handle = worker.start();
    println!("started {}", handle.id());
    let _ = std::io::stdout().flush();
    jobq_tests::process::until_stdin_closes().await;
    let result = handle.shutdown(Duration::from_secs(10)).await;
    // The stdin reader is a blocking thread that would hold the runtime open.
    match result {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("presence worker: {error}");
            std::process::exit(1)
        }
    }
}
