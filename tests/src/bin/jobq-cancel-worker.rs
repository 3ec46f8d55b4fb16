//! A worker process for `tests/tests/cancel_running.rs`: one [`Worker`] on
//! one queue whose job (`cancel_elsewhere`) waits until it is cancelled.
//! It prints `started <id>` when an attempt starts and `cancelled <id>`
//! when its cancellation token fires, one line each on stdout, and shuts
//! down when its stdin closes.
//!
//! - `JOBQ_CANCEL_URL`: the database; `JOBQ_CANCEL_QUEUE`: the queue;
//! - `JOBQ_CANCEL_HEARTBEAT_MS`: the heartbeat interval (the lease is 30 s).

use std::io::Write;
use std::time::Duration;

use jobq_runtime::{JobContext, Jobq, Worker, job};

/// Waits until cancelled, saying so on stdout: the worker drops the
/// attempt's future as its cancellation token fires.
#[job(name = "cancel_elsewhere")]
async fn cancel_elsewhere(ctx: &JobContext) {
    say(&format!("started {}", ctx.id()));
    let _stopped = Stopped(ctx.id());
    ctx.cancelled().await;
}

/// Says `cancelled <id>` when the attempt is dropped.
struct Stopped(i64);

impl Drop for Stopped {
    fn drop(&mut self) {
        say(&format!("cancelled {}", self.0));
    }
}

/// One line on stdout, flushed at once.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = var("JOBQ_CANCEL_URL");
    let queue = var("JOBQ_CANCEL_QUEUE");
    let heartbeat: u64 = var("JOBQ_CANCEL_HEARTBEAT_MS")
        .parse()
        .expect("JOBQ_CANCEL_HEARTBEAT_MS is a number");
    let jobq = Jobq::connect_with(&url, 4).await.expect("connect");
    let handle = Worker::builder(jobq)
        .queue_unchecked(&queue, 1)
        .lease(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_millis(heartbeat))
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start();
    say("ready");
    jobq_tests::process::until_stdin_closes().await;
    handle
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
