//! jobq in one file: define jobs, enqueue a few hundred, run a worker until
//! they are done, print a summary.
//!
//! ```text
//! cargo run -p jobq-examples --example quickstart                 # SQLite, nothing to install
//! DATABASE_URL=mysql://root@127.0.0.1:3306/test cargo run -p jobq-examples --example quickstart
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p jobq-examples --example quickstart
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use jobq_runtime::{Enqueue, JobContext, JobError, Jobq, State, Worker, job};

/// What the handlers did, shown in the summary; cloned into the worker as `State<Stats>`.
#[derive(Debug, Clone)]
struct Stats(Arc<Counters>);

#[derive(Debug)]
struct Counters {
    done: AtomicU64,
    retried: AtomicU64,
    progress: ProgressBar,
}

impl Stats {
    fn finished(&self) {
        self.0.done.fetch_add(1, Ordering::Relaxed);
        self.0.progress.inc(1);
    }
}

/// Sends the welcome mail (pretends to).
#[job(queue = "quickstart", key = "welcome:{user_id}")]
async fn send_welcome(ctx: &JobContext, stats: State<Stats>, user_id: u64, locale: String) {
    let _ = (ctx.idempotency_key(), user_id, locale);
    tokio::time::sleep(Duration::from_millis(rand::random_range(1..5))).await;
    stats.finished();
}

/// Resizes an image (pretends to).
#[job(queue = "quickstart", timeout = "10s")]
async fn resize_image(stats: State<Stats>, path: String, width: u32) {
    let _ = (path, width);
    tokio::time::sleep(Duration::from_millis(rand::random_range(2..8))).await;
    stats.finished();
}

/// Charges a card; the payment provider is flaky and fails every first attempt.
#[job(queue = "quickstart", max_attempts = 5, retry = ["100ms", "1s"])]
async fn charge_card(
    ctx: JobContext,
    stats: State<Stats>,
    order_id: u64,
    cents: u64,
) -> Result<(), JobError> {
    let _ = (order_id, cents);
    if ctx.attempt() == 1 {
        stats.0.retried.fetch_add(1, Ordering::Relaxed);
        return Err(JobError::retry("payment provider timed out"));
    }
    stats.finished();
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .init();

    let url = match std::env::var("DATABASE_URL") {
        Ok(url) => url,
        Err(_) => {
            let path =
                std::env::temp_dir().join(format!("jobq-quickstart-{}.db", std::process::id()));
            format!("sqlite://{}", path.display())
        }
    };
    println!("jobq quickstart on {url}");
    let jobq = Jobq::connect(&url).await?;
    jobq.migrate().await?;

    // A run-unique key prefix, so reruns on a shared database enqueue anew.
    let run: u32 = rand::random();
    let (welcomes, images, charges) = (200u64, 150u64, 50u64);
    let total = welcomes + images + charges;
    let started = Instant::now();
    let mails = (0..welcomes).map(|i| {
        let job = SendWelcome::new(u64::from(run) * 1_000 + i, "en".into());
        (job, Enqueue::new())
    });
    jobq.enqueue_many_with(mails).await?;
    jobq.enqueue_many((0..images).map(|i| ResizeImage::new(format!("img/{i}.png"), 640)))
        .await?;
    for order in 0..charges {
        jobq.enqueue_with(ChargeCard::new(order, 1_999), Enqueue::new().priority(-1))
            .await?;
    }
    let enqueued = started.elapsed();

    let progress = ProgressBar::new(total).with_style(ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} jobs {msg}",
    )?);
    let stats = Stats(Arc::new(Counters {
        done: AtomicU64::new(0),
        retried: AtomicU64::new(0),
        progress: progress.clone(),
    }));
    let running = Instant::now();
    let handle = Worker::builder(jobq.clone())
        .queue("quickstart", 16)
        .state(stats.clone())
        .poll_interval(Duration::from_millis(100))
        .build()?
        .start();
    while stats.0.done.load(Ordering::Relaxed) < total {
        progress.set_message(format!(
            "({} retried)",
            stats.0.retried.load(Ordering::Relaxed)
        ));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ran = running.elapsed();
    handle.shutdown(Duration::from_secs(10)).await?;
    progress.finish();

    let counts = jobq.counts("quickstart").await?;
    println!();
    println!("enqueued {total} jobs in {enqueued:.2?}");
    println!(
        "done {} | retried {} | failed {} | {:.0} jobs/s",
        stats.0.done.load(Ordering::Relaxed),
        stats.0.retried.load(Ordering::Relaxed),
        counts.failed,
        total as f64 / ran.as_secs_f64()
    );
    println!(
        "queue `quickstart` in the database: {} done, {} pending, {} processing, {} failed",
        counts.done, counts.pending, counts.processing, counts.failed
    );
    Ok(())
}
