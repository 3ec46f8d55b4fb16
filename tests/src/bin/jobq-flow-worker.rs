//! A worker process of the flow-control tests (`tests/tests/flow_control.rs`):
//! one real [`Worker`] serving one queue. It prints `started` once its
//! worker runs, then `ran <id> <attempt> <n> <µs since the epoch>` as each
//! job starts (each job then takes `JOBQ_FLOW_JOB_MS`, default 20 ms, or
//! `n` − 10⁹ ms for `n` above 10⁹; with
//! `JOBQ_FLOW_FAIL_EVERY` = k, a job whose `n` is a multiple of k fails its
//! first attempt, to run again 30 ms later; one whose future is dropped
//! before it ends prints `stopped <id> <µs since the epoch>`), and shuts
//! down gracefully when its stdin closes.
//!
//! Its `jobq_flow_steps` job works through `n` steps of 100 ms from the
//! checkpoint its last attempt saved, saving each step and reporting it as
//! progress (`step <id> <attempt> <step>`).
//!
//! - `JOBQ_FLOW_URL`: the database; `JOBQ_FLOW_QUEUE`: the queue;
//! - `JOBQ_FLOW_CONCURRENCY` (default 4), `JOBQ_FLOW_POLL_MS` (default
//!   100), `JOBQ_FLOW_LEASE_MS` (default 30,000), `JOBQ_FLOW_DEADLINE_MS`
//!   (the statement and connect deadline, default 15,000).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use jobq_runtime::{ConnectOptions, JobContext, JobError, Jobq, Worker, job};

/// A job whose `n` is `LONG_JOBS + ms` takes `ms` milliseconds, whatever
/// `JOBQ_FLOW_JOB_MS` says.
const LONG_JOBS: u64 = 1_000_000_000;

/// Microseconds since the epoch.
fn now_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// An attempt under way: says `stopped <id> <µs since the epoch>` if its
/// future is dropped before it ends (a cancel, a lost lease).
struct Running(i64, bool);

impl Drop for Running {
    fn drop(&mut self) {
        if !self.1 {
            say(format_args!("stopped {} {}", self.0, now_us()));
        }
    }
}

/// Says it started, then takes its time.
#[job(name = "jobq_flow_work")]
async fn work(ctx: JobContext, n: u64) -> Result<(), JobError> {
    say(format_args!(
        "ran {} {} {n} {}",
        ctx.id(),
        ctx.attempt(),
        now_us()
    ));
    let mut running = Running(ctx.id(), false);
    let ms = n
        .checked_sub(LONG_JOBS)
        .unwrap_or_else(|| number("JOBQ_FLOW_JOB_MS", 20));
    tokio::time::sleep(Duration::from_millis(ms)).await;
    running.1 = true;
    let every = number("JOBQ_FLOW_FAIL_EVERY", 0);
    if every > 0 && n % every == 0 && ctx.attempt() == 1 {
        return Err(JobError::retry_in(
            Duration::from_millis(30),
            "the first attempt fails",
        ));
    }
    Ok(())
}

/// Works through `n` steps of 100 ms from the checkpoint the last attempt
/// saved: saves each step as its checkpoint and reports it as progress,
/// saying `step <id> <attempt> <step>`; returns the step it started from.
#[job(name = "jobq_flow_steps")]
async fn steps(ctx: JobContext, n: u64) -> Result<u64, JobError> {
    let from = ctx.last_checkpoint::<u64>().await?.unwrap_or(0);
    for step in from..n {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ctx.checkpoint(&(step + 1)).await?;
        ctx.progress(step + 1, n, &format!("step {}", step + 1));
        say(format_args!(
            "step {} {} {}",
            ctx.id(),
            ctx.attempt(),
            step + 1
        ));
    }
    Ok(from)
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
    // jobq's warnings (and more with `JOBQ_TEST_LOG`) on stderr.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JOBQ_TEST_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let url = var("JOBQ_FLOW_URL");
    let queue = var("JOBQ_FLOW_QUEUE");
    let concurrency = usize::try_from(number("JOBQ_FLOW_CONCURRENCY", 4)).unwrap_or(4);
    let deadline = Duration::from_millis(number("JOBQ_FLOW_DEADLINE_MS", 15_000));
    let options = ConnectOptions::new()
        .max_connections(6)
        .statement_timeout(deadline)
        .connect_timeout(deadline);
    let jobq = match Jobq::connect_with_options(&url, options).await {
        Ok(jobq) => jobq,
        Err(error) => {
            eprintln!("flow worker: cannot connect: {error}");
            return ExitCode::from(2);
        }
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(&queue, concurrency)
        .poll_interval(Duration::from_millis(number("JOBQ_FLOW_POLL_MS", 100)))
        .lease(Duration::from_millis(number("JOBQ_FLOW_LEASE_MS", 30_000)))
        .shutdown_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("flow worker: {error}");
            return ExitCode::from(3);
        }
    };
    jobq_tests::process::serve_until_stdin_closes(worker.start(), "flow worker").await
}
