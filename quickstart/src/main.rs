//! jobq in one file: define jobs, enqueue a few hundred, run a worker until
//! they are done, print a summary.
//!
//! ```text
//! cargo run -p quickstart                  # SQLite in a fresh temp file, removed at the end
//! DATABASE_URL=mysql://root@127.0.0.1:3306/test cargo run -p quickstart --features mysql
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run -p quickstart --features postgres
//! ```
//!
//! By default the quickstart creates a new SQLite file per run and deletes
//! it (with its `-wal` and `-shm` files) when it ends. On a `DATABASE_URL`
//! that already has jobs, its summary counts only the rows of this run.
//!
//! Its output may be cut short (`cargo run -p quickstart | head -3`): a
//! closed stdout ends the printing, not the run, which finishes, removes
//! its database and exits 0 (see [`say`]). Logs are coloured only on a
//! terminal, and never with `NO_COLOR` set.

// Every line goes through `say`, which a closed pipe cannot panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use jobq_runtime::{Enqueue, JobContext, JobError, JobStatus, Jobq, State, Worker, job};

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

/// Charges a card; the payment provider is flaky and fails every first
/// attempt, so jobq retries each charge once.
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

/// Stdout could not be written (its reader went away): print no more.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// `println!` that a closed stdout cannot panic: the line is dropped, and
/// so is every later one.
fn say(line: std::fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Whether `stream` is a terminal that takes colours (`NO_COLOR` unset).
fn colours(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_ansi(colours(&std::io::stdout()))
        // A log line that cannot be written (stdout closed) is dropped, not
        // reported on stderr, which may be closed too.
        .log_internal_errors(false)
        .init();

    // A run-unique id: in the temp file's name and the welcome mails' keys.
    let run: u32 = rand::random();
    let (url, temp) = match std::env::var("DATABASE_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let temp = TempDatabase::new(run);
            (format!("sqlite://{}", temp.path.display()), Some(temp))
        }
    };
    say(format_args!("jobq quickstart on {url}"));
    let jobq = Jobq::connect(&url).await?;
    jobq.migrate().await?;

    let (welcomes, images, charges) = (200u64, 150u64, 50u64);
    let total = welcomes + images + charges;
    let started = Instant::now();
    // This run's job ids, to count only its own rows at the end.
    let mut ids = Vec::new();
    let mails = (0..welcomes).map(|i| {
        let job = SendWelcome::new(u64::from(run) * 1_000 + i, "en".into());
        (job, Enqueue::new())
    });
    ids.extend(jobq.enqueue_many_with(mails).await?);
    let resizes = (0..images).map(|i| ResizeImage::new(format!("img/{i}.png"), 640));
    ids.extend(jobq.enqueue_many(resizes).await?);
    for order in 0..charges {
        let charge = ChargeCard::new(order, 1_999);
        ids.push(
            jobq.enqueue_with(charge, Enqueue::new().priority(-1))
                .await?,
        );
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

    let mut counts = std::collections::HashMap::new();
    for job in &ids {
        if let Some(info) = jobq.job(job.id).await? {
            *counts.entry(info.status).or_insert(0) += 1;
        }
    }
    let count = |status| counts.get(&status).copied().unwrap_or(0);
    let retried = stats.0.retried.load(Ordering::Relaxed);
    say(format_args!(""));
    say(format_args!("enqueued {total} jobs in {enqueued:.2?}"));
    say(format_args!(
        "done {} | retried {retried} | failed {} | {:.0} jobs/s",
        stats.0.done.load(Ordering::Relaxed),
        count(JobStatus::Failed),
        total as f64 / ran.as_secs_f64()
    ));
    say(format_args!(
        "retried {retried}: each charge_card job fails its first attempt on purpose (a flaky \
         payment provider); jobq ran it again 100 ms later, the first step of its \
         `retry = [\"100ms\", \"1s\"]`, and the second attempt succeeded"
    ));
    say(format_args!(
        "this run's {total} rows in the database: {} done, {} pending, {} processing, {} failed",
        count(JobStatus::Done),
        count(JobStatus::Pending),
        count(JobStatus::Processing),
        count(JobStatus::Failed),
    ));
    if let Some(temp) = temp {
        // Closed first: the last connection to close checkpoints the WAL.
        if let Some(pool) = jobq.sqlite_pool() {
            pool.close().await;
        }
        drop(temp);
        say(format_args!(
            "removed the temp database (and its -wal and -shm files)"
        ));
    }
    Ok(())
}

/// A SQLite file of this run in the temp directory, deleted with its `-wal`
/// and `-shm` files when dropped (also when `main` returns an error).
struct TempDatabase {
    path: std::path::PathBuf,
}

impl TempDatabase {
    fn new(run: u32) -> Self {
        let path = std::env::temp_dir().join(format!("jobq-quickstart-{run:08x}.db"));
        let temp = Self { path };
        temp.remove();
        temp
    }

    fn files(&self) -> [std::path::PathBuf; 3] {
        let name = self.path.as_os_str();
        let with = |suffix: &str| {
            let mut file = name.to_owned();
            file.push(suffix);
            std::path::PathBuf::from(file)
        };
        [self.path.clone(), with("-wal"), with("-shm")]
    }

    fn remove(&self) {
        for file in self.files() {
            let _ = std::fs::remove_file(file);
        }
    }
}

impl Drop for TempDatabase {
    fn drop(&mut self) {
        self.remove();
    }
}
