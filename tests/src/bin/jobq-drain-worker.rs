//! A worker process for throughput measurements (`tests/tests/many_hosts.rs`,
//! `scripts/many-hosts.sh`): one real [`Worker`] serving one queue of no-op
//! jobs, so what is measured is jobq's claim and settle, not a handler.
//!
//! - `JOBQ_DRAIN_URL`: the database; `JOBQ_DRAIN_QUEUE`: the queue;
//! - `JOBQ_DRAIN_CONCURRENCY` (default 8), `JOBQ_DRAIN_POOL` (default
//!   concurrency + 4).
//!
//! It prints `ready` once its worker is built and, when its stdin closes (a
//! graceful shutdown), one line of what its metrics recorded:
//! `stats claims=… claimed=… claim_mean_us=… claim_p50_us=… claim_p99_us=…
//! settles=… settle_mean_us=… settle_p50_us=… succeeded=…`.

use std::io::Read;
use std::time::Duration;

use jobq_runtime::{Jobq, Worker, job, metrics as m};
use jobq_tests::metrics;

/// Does nothing: the measured cost is the claim and the settle.
#[job(name = "jobq_drain_noop", max_attempts = 5)]
async fn drain_noop(n: u64) {
    let _ = n;
}

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Mean, median and 99th percentile of `samples` (seconds), in µs.
fn summary(mut samples: Vec<f64>) -> (u64, u64, u64) {
    if samples.is_empty() {
        return (0, 0, 0);
    }
    samples.sort_by(f64::total_cmp);
    let us = |s: f64| (s * 1e6) as u64;
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (us(mean), us(at(0.5)), us(at(0.99)))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    metrics::install();
    let url = std::env::var("JOBQ_DRAIN_URL").expect("JOBQ_DRAIN_URL");
    let queue = std::env::var("JOBQ_DRAIN_QUEUE").expect("JOBQ_DRAIN_QUEUE");
    let concurrency = number("JOBQ_DRAIN_CONCURRENCY", 8) as usize;
    let pool = number("JOBQ_DRAIN_POOL", concurrency as u64 + 4) as u32;
    let jobq = Jobq::connect_with(&url, pool).await.expect("connect");
    let worker = Worker::builder(jobq)
        .queue_unchecked(&queue, concurrency)
        .poll_interval(Duration::from_millis(100))
        .build()
        .expect("build the worker");
    println!("ready");
    let (closed, on_close) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        let _ = closed.send(());
    });
    worker
        .run_until(async {
            let _ = on_close.await;
        })
        .await
        .expect("the worker ran");
    let claims = metrics::histogram(m::CLAIM_SECONDS, &[("queue", &queue)]);
    let settles = metrics::histogram(m::SETTLE_SECONDS, &[("settle", "complete")]);
    let claimed = metrics::counter(m::JOBS_CLAIMED, &[("queue", &queue)]);
    let succeeded = metrics::counter(
        m::ATTEMPTS,
        &[
            ("queue", &queue),
            ("job", "jobq_drain_noop"),
            ("outcome", "succeeded"),
        ],
    );
    let (claim_count, settle_count) = (claims.len(), settles.len());
    let (claim_mean, claim_p50, claim_p99) = summary(claims);
    let (settle_mean, settle_p50, _) = summary(settles);
    println!(
        "stats claims={claim_count} claimed={claimed} claim_mean_us={claim_mean} claim_p50_us={claim_p50} claim_p99_us={claim_p99} settles={settle_count} settle_mean_us={settle_mean} settle_p50_us={settle_p50} succeeded={succeeded}"
    );
}
