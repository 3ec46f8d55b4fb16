//! A worker process of the workflow tests (`tests/tests/workflows.rs`): one
//! real [`Worker`] serving one queue with 4 slots. It prints `started` once
//! its worker runs, then `ran <task> <start µs> <end µs>` on stdout as each
//! step ends, and shuts down gracefully when its stdin closes.
//!
//! - `JOBQ_WORKFLOW_URL`: the database; `JOBQ_WORKFLOW_QUEUE`: the queue.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobq_runtime::{JobContext, JobError, Jobq, Worker, job};

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// A step: its output is 1 plus the sum of its dependencies' outputs
/// (`inputs`, their task names).
#[job(name = "workflow_process_step", max_attempts = 1)]
async fn step(ctx: JobContext, task: String, inputs: Vec<String>) -> Result<u64, JobError> {
    let started = now_us();
    let mut sum = 1;
    for input in &inputs {
        let output: Option<u64> = ctx
            .dependency_output(input)
            .await
            .map_err(JobError::retry)?;
        sum += output.unwrap_or(0);
    }
    // Long enough that one process's slots fill and the other claims too,
    // even when only its poll (500 ms) finds the jobs: 200 jobs take one
    // process with 4 slots over a second.
    tokio::time::sleep(Duration::from_millis(25)).await;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ran {task} {started} {}", now_us());
    let _ = out.flush();
    Ok(sum)
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let jobq = match Jobq::connect_with(&var("JOBQ_WORKFLOW_URL"), 8).await {
        Ok(jobq) => jobq,
        Err(error) => {
            eprintln!("workflow worker: cannot connect: {error}");
            return ExitCode::from(2);
        }
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(var("JOBQ_WORKFLOW_QUEUE"), 4)
        .shutdown_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("workflow worker: {error}");
            return ExitCode::from(3);
        }
    };
    jobq_tests::process::serve_until_stdin_closes(worker.start(), "workflow worker").await
}
