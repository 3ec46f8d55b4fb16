//! A worker process of the chaos harness (`jobq_tests::chaos`): one real
//! [`Worker`] serving one queue of chaos jobs, configured by environment
//! variables. It shuts down gracefully when its stdin closes (the controller
//! closed it, or died) or when `JOBQ_CHAOS_MAX_SECS` pass; the controller
//! also `kill -9`s it at random.
//!
//! - `JOBQ_CHAOS_URL`: the database; `JOBQ_CHAOS_QUEUE`: the queue;
//! - `JOBQ_CHAOS_CONCURRENCY`, `JOBQ_CHAOS_POOL`, `JOBQ_CHAOS_LEASE_MS`,
//!   `JOBQ_CHAOS_MAX_SLEEP_MS`, `JOBQ_CHAOS_MAX_SECS`;
//! - `JOBQ_CHAOS_LOG`: a tracing filter for stderr (default `warn`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use jobq_runtime::{JobContext, Jobq, State, Worker, job};
use jobq_tests::chaos::{Effects, MAX_ATTEMPTS};
use jobq_tests::sql::Db;
use tokio::io::AsyncReadExt;

/// Logs its execution, sleeps a little, records its side effect once per key.
#[job(name = "jobq_chaos", max_attempts = 1000, retry = ["100ms"])]
async fn chaos(
    ctx: JobContext,
    effects: State<Effects>,
    run: String,
    n: u64,
) -> Result<(), String> {
    let _ = n;
    effects
        .run(ctx.id(), ctx.attempt(), &ctx.idempotency_key(), &run)
        .await
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JOBQ_CHAOS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    assert_eq!(MAX_ATTEMPTS, 1000, "keep the #[job] attribute in step");
    let url = var("JOBQ_CHAOS_URL");
    let queue = var("JOBQ_CHAOS_QUEUE");
    let concurrency = number("JOBQ_CHAOS_CONCURRENCY", 2) as usize;
    let pool = u32::try_from(number("JOBQ_CHAOS_POOL", 6)).unwrap_or(6);
    let lease = Duration::from_millis(number("JOBQ_CHAOS_LEASE_MS", 2_000));
    let max_sleep_ms = number("JOBQ_CHAOS_MAX_SLEEP_MS", 50);
    let deadline = Instant::now() + Duration::from_secs(number("JOBQ_CHAOS_MAX_SECS", 600));
    let pid = std::process::id();
    let worker_id = format!("chaos-{pid}");

    // A replacement may start while the database is down: keep trying.
    let jobq = loop {
        match Jobq::connect_with(&url, pool).await {
            Ok(jobq) => break jobq,
            Err(error) if Instant::now() < deadline => {
                tracing::warn!(error = %error, "chaos worker: cannot connect yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                eprintln!("chaos worker {pid}: cannot connect: {error}");
                return ExitCode::from(2);
            }
        }
    };
    let effects = Effects {
        db: Db::of(&jobq),
        pid,
        worker: worker_id.clone(),
        max_sleep_ms,
    };
    let worker = match Worker::builder(jobq)
        .queue_unchecked(&queue, concurrency)
        .state(effects)
        .lease(lease)
        .poll_interval(Duration::from_millis(100))
        .shutdown_timeout(Duration::from_secs(10))
        .worker_id(worker_id)
        .build()
    {
        Ok(worker) => worker,
        Err(error) => {
            eprintln!("chaos worker {pid}: {error}");
            return ExitCode::from(3);
        }
    };
    let stop = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        let eof = async {
            while let Ok(n) = stdin.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        };
        tokio::select! {
            () = eof => {}
            () = tokio::time::sleep_until(deadline.into()) => {
                eprintln!("chaos worker {pid}: JOBQ_CHAOS_MAX_SECS passed; stopping");
            }
        }
    };
    let result = worker.run_until(stop).await;
    // The stdin reader is a blocking thread that would hold the runtime open.
    match result {
        Ok(()) => std::process::exit(0),
        Err(error) => {
            eprintln!("chaos worker {pid}: {error}");
            std::process::exit(1)
        }
    }
}
