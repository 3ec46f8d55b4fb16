//! A short-lived producer of the wake-up tests (`tests/tests/wakeups.rs`):
//! connects, enqueues one `jobq_flow_work` job (`jobq-flow-worker`'s) with
//! `n` = `JOBQ_ONCE_N` on `JOBQ_ONCE_QUEUE` at `JOBQ_ONCE_URL`, prints
//! `enqueued <µs since the epoch>` (taken just before the enqueue),
//! calls [`Jobq::flush`] (not with `JOBQ_ONCE_NO_FLUSH=1`) and exits.

use std::process::ExitCode;

use jobq_runtime::{Enqueue, Jobq};

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

async fn run() -> Result<(), String> {
    let url = var("JOBQ_ONCE_URL")?;
    let queue = var("JOBQ_ONCE_QUEUE")?;
    let n: u64 = var("JOBQ_ONCE_N")?
        .parse()
        .map_err(|e| format!("JOBQ_ONCE_N: {e}"))?;
    let jobq = Jobq::connect(&url)
        .await
        .map_err(|e| jobq_runtime::error_chain(&e))?;
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    jobq.enqueue_json(
        "jobq_flow_work",
        &format!(r#"{{"n": {n}}}"#),
        Enqueue::new().queue(&queue),
    )
    .await
    .map_err(|e| jobq_runtime::error_chain(&e))?;
    println!("enqueued {at}");
    if std::env::var("JOBQ_ONCE_NO_FLUSH").as_deref() != Ok("1") {
        jobq.flush().await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("jobq-enqueue-once: {error}");
            ExitCode::FAILURE
        }
    }
}
