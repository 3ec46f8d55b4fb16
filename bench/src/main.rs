//! jobq's benchmark: each workload runs twice in one invocation, on the same
//! server and table, once as hand-written SQL (the same claim and settle jobq
//! uses, on connections each task holds) and once through jobq's public API,
//! so the framework's overhead is the number to read.
//!
//! ```text
//! cargo run --release -p jobq-bench --bin bench -- --backend all --runs 3 --out results.json
//! cargo run --release -p jobq-bench --bin bench -- --backend mysql --url mysql://root@127.0.0.1:3306/jobq_bench --quick
//! cargo run --release -p jobq-bench --bin bench -- --only drain8,metrics8,metrics32
//! cargo run --release -p jobq-bench --bin bench -- steady --backend all --out steady.json
//! ```
//!
//! `bench steady` is the steady-state latency sweep across processes (see
//! `steady.rs`).
//!
//! The bench empties (TRUNCATE/DELETE) the `jobq_jobs` table of the database
//! it is given between workloads: give it a database of its own (the default
//! URLs name `jobq_bench`, which it creates if missing).

// Output goes through `say`/`note`, which a closed pipe cannot panic (the
// results still reach `--out` when stdout is cut short by `| head`).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod job;
mod metrics;
mod raw;
mod report;
mod steady;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use jobq_runtime::Jobq;
use serde::Serialize;

use crate::job::{BenchNoop, now_us};
use crate::report::{BackendReport, load, table};

const MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/jobq_bench";
const POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/jobq_bench";

/// jobq against raw SQL on MySQL/MariaDB, PostgreSQL and SQLite.
#[derive(Debug, Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Which database(s) to measure.
    #[arg(long, value_enum, default_value_t = BackendArg::All)]
    backend: BackendArg,
    /// The database URL (one backend only). Defaults: the `jobq_bench`
    /// database on 127.0.0.1 as root/postgres; a temporary SQLite file.
    #[arg(long)]
    url: Option<String>,
    /// Runs of every workload; the table shows the median and min–max.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// CI-sized runs: every workload about ten times smaller.
    #[arg(long)]
    quick: bool,
    /// The worker's poll interval (the latency across processes depends on it
    /// where the database has no wake-ups).
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Only these workloads (comma-separated ids: enqueue1, enqueue8,
    /// enqueue100, drain1, drain8, drain32, limit8, limit32 (drain with a
    /// queue limit equal to the concurrency; its "raw" side is the same worker
    /// without a limit), rate (drain with a queue rate far above the drain's;
    /// its "raw" side is the same worker without a rate), keys1000 (drain of
    /// jobs over 1,000 concurrency keys at limit 1; its "raw" side is the same
    /// worker without keys), checkpoint8, complete_in8 (drain of jobs that
    /// save a checkpoint each, or complete themselves in a transaction of
    /// their own; the "raw" side is the same jobs doing neither), fanout10k,
    /// diamonds (drain of one workflow of a job, 10,000 after it and one
    /// after all, or of 1,000 diamonds; the "raw" side is the same jobs
    /// plain; p50/p99 are the release → claim times of the fan-ins),
    /// batch10k, batches (drain of a batch of 10,000 jobs and its finish
    /// callback, or of 1,000 batches of 3 and one each; p50/p99 are the
    /// times from the batch's last settle to the callback's claim), metrics8,
    /// metrics32 (drain with
    /// metrics on vs off; its "raw" side is jobq without a recorder), best,
    /// latency, latency_xproc, backlog1k, backlog100k, history1m); all by default.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Enqueues jobs at a steady rate through jobq (the other process of the
    /// cross-process latency workload).
    Enqueuer {
        #[arg(long)]
        url: String,
        /// Jobs per second.
        #[arg(long)]
        rate: f64,
        #[arg(long)]
        count: u64,
    },
    /// Enqueue → start latency at steady rates with the producer and the
    /// worker in processes of their own, measured from each job's scheduled
    /// time; one job after a silence; the idle worker's statements per second.
    Steady(steady::SteadyArgs),
    /// `bench steady`'s worker process.
    #[command(hide = true)]
    SteadyWorker(steady::WorkerArgs),
    /// `bench steady`'s producer process.
    #[command(hide = true)]
    SteadyProducer(steady::ProducerArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    Mysql,
    Postgres,
    Sqlite,
    All,
}

#[derive(Debug, Serialize)]
struct Results {
    command: String,
    cores: usize,
    backends: Vec<BackendReport>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let cli = Cli::parse();
    init_tracing(matches!(&cli.command, Some(Command::SteadyWorker(w)) if w.count_statements));
    match cli.command {
        Some(Command::Enqueuer { url, rate, count }) => return enqueuer(&url, rate, count).await,
        Some(Command::Steady(args)) => return steady::run(args).await,
        Some(Command::SteadyWorker(args)) => return steady::worker(args).await,
        Some(Command::SteadyProducer(args)) => return steady::producer(args).await,
        None => {}
    }
    let backends = match cli.backend {
        BackendArg::All => vec![BackendArg::Mysql, BackendArg::Postgres, BackendArg::Sqlite],
        one => vec![one],
    };
    if cli.url.is_some() && backends.len() > 1 {
        return Err("--url needs a single --backend".into());
    }
    let mut reports = Vec::new();
    for backend in backends {
        let _dir;
        let url = match (backend, &cli.url) {
            (_, Some(url)) => url.clone(),
            (BackendArg::Mysql, None) => MYSQL_URL.to_owned(),
            (BackendArg::Postgres, None) => POSTGRES_URL.to_owned(),
            (_, None) => {
                let dir = tempfile::tempdir()?;
                let url = format!("sqlite://{}", dir.path().join("bench.db").display());
                _dir = dir;
                url
            }
        };
        let report = workload::run_backend(
            &url,
            &workload::Options {
                runs: cli.runs.max(1),
                quick: cli.quick,
                poll: Duration::from_millis(cli.poll_ms),
                only: cli.only.clone(),
            },
        )
        .await?;
        say(format_args!("{}", table(&report)));
        reports.push(report);
    }
    if reports.len() > 1 {
        say(format_args!("load average now: {:.1}", load()));
    }
    if let Some(out) = cli.out {
        let results = Results {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            backends: reports,
        };
        std::fs::write(&out, serde_json::to_string_pretty(&results)?)?;
        note(format_args!("wrote {}", out.display()));
    }
    Ok(())
}

/// Logs to stderr (`RUST_LOG`, default `warn`); with `count_statements`,
/// also counts sqlx's per-statement events (see [`steady::StatementCounter`]).
fn init_tracing(count_statements: bool) {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .with_filter(filter);
    let counter = count_statements.then(|| {
        steady::StatementCounter
            .with_filter(Targets::new().with_target("sqlx::query", LevelFilter::TRACE))
    });
    tracing_subscriber::registry()
        .with(log)
        .with(counter)
        .init();
}

/// A line on stdout; dropped if stdout is closed.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
}

/// A line on stderr; dropped if stderr is closed.
pub(crate) fn note(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The other process of the cross-process latency workload.
async fn enqueuer(
    url: &str,
    rate: f64,
    count: u64,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let jobq = Jobq::connect(url).await?;
    let start = tokio::time::Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate);
    for i in 0..count {
        tokio::time::sleep_until(start + interval.mul_f64(i as f64)).await;
        jobq.enqueue(BenchNoop::nth(i, now_us())).await?;
    }
    Ok(())
}
