//! A worker process of the pause tests (`tests/tests/pause.rs`): one real
//! [`Worker`] serving one queue with one slot, polling every
//! `JOBQ_PAUSE_POLL_MS` (default 100). It prints `started` once its worker
//! runs, then `ran <id>` on stdout as each job starts (each job then takes
//! `JOBQ_PAUSE_JOB_MS`, default 200 ms), and shuts down gracefully when its
//! stdin closes.
//!
//! - `JOBQ_PAUSE_URL`: the database; `JOBQ_PAUSE_QUEUE`: the queue.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use jobq_runtime::{JobContext, Jobq, Worker, job};

/// Says it ran, then takes a while (so two workers share the jobs).
#[job(name = "jobq_pause_echo")]
async fn echo(ctx: JobContext, n: u64) {
    let _ = n;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ran {}", ctx.id());
        let _ = out.flush();
    }
    tokio::time::sleep(job_time()).await;
}

fn job_time() -> Duration {
    Duration::from_millis(number("JOBQ_PAUSE_JOB_MS", 200))
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
    let url = var("JOBQ_PAUSE_URL");
    let queue = var("JOBQ_PAUSE_QUEUE");
    let poll = Duration::from_millis(number("JOBQ_PAUSE_POLL_MS", 100));
    let jobq = match Jobq::connect_with(&url, 4).await {
        Ok(jobq) => jobq,
        Err(error) => {
            eprintln!("pause worker: cannot connect: {error}");
            return ExitCode::from(2);
        }
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(&queue, 1)
        .poll_interval(poll)
        .shutdown_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("pause worker: {error}");
            return ExitCode::from(3);
        }
    };
    jobq_tests::process::serve_until_stdin_closes(worker.start(), "pause worker").await
}
