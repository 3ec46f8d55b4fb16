//! `bench steady` (issue 29): enqueue → start latency at a steady rate, with
//! the producer and the worker each in a process of its own; the same for
//! one job after a silence; and how many statements an idle worker sends.
//!
//! ```text
//! cargo run --release -p jobq-bench --bin bench -- steady --backend all --out steady.json
//! cargo run --release -p jobq-bench --bin bench -- steady --backend sqlite --rates 200,1000 --secs 2 --runs 1 --idle-samples 1 --idle-gap-secs 3
//! ```
//!
//! This process only orchestrates. For each rate it empties the table,
//! starts a `steady-worker` (a jobq worker with the defaults, concurrency
//! 32) and, once that prints `ready`, a `steady-producer`, which enqueues
//! single jobs through [`Jobq::enqueue`] at `start + i / rate` from 64
//! tasks. A job carries the time it was scheduled for, and its latency is
//! the handler's start minus that time: a producer that falls behind
//! counts against jobq (no coordinated omission; tokio's 1 ms timer alone
//! makes the producer up to ~1 ms late, which its report shows). The first
//! 0.5 s of jobs are a warm-up, run but not measured.
//!
//! The worker reads commands on stdin: `stats` answers one JSON line
//! ([`WorkerReport`] without latencies); end of input shuts the worker down,
//! and its last line carries every measured latency.
//!
//! From idle, one worker and one long-running producer (`--on-demand`, one
//! job per line on its stdin, its connections opened by a warm-up job) go
//! through `--idle-samples` silences of `--idle-gap-secs` (plus a random
//! 0–1 s, so that the job comes at a random point of the worker's poll
//! cycle), each ended by one job. Within each silence, less a second at its
//! start (where the previous job's settle may still run), the worker counts
//! the statements it sends, from sqlx's per-statement log event, and the
//! server counts what it receives: MariaDB/MySQL's `Questions` (every
//! client's: its rate before the worker started is reported beside it),
//! PostgreSQL's transactions in the bench database (`pg_stat_database`,
//! flushed by each backend at most once a second, so the window's edges are
//! ±1 s of traffic); SQLite has no server to ask.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use jobq_runtime::{Jobq, Worker};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinSet;
use tracing_subscriber::layer::{Context, Layer};

use crate::BackendArg;
use crate::job::{Probe, STEADY_QUEUE, SteadyNoop, now_us};
use crate::raw::Db;
use crate::report::{Summary, load, round};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

/// Measured at the start of every rate but not counted.
const WARMUP_SECS: f64 = 0.5;
/// The worker's concurrency.
const CONCURRENCY: usize = 32;
/// Producer tasks: each takes the next job's number, sleeps until its
/// time and enqueues it, so up to this many enqueues are in flight.
const PRODUCER_TASKS: usize = 64;
/// The producer's pool (PostgreSQL allows 100 connections by default).
const PRODUCER_CONNECTIONS: u32 = 32;
/// How long a producer stays after its last enqueue: jobq's PostgreSQL
/// store sends an enqueue's NOTIFY from a task of its own, up to 32 ms
/// later, which a process that exits at once never sends.
const LINGER: Duration = Duration::from_millis(500);
/// The p99 a rate must stay within to count as sustained.
const P99_GOAL_MS: f64 = 50.0;
/// How long the worker may take to start the last job after the producer is done.
const DRAIN_DEADLINE: Duration = Duration::from_secs(120);
/// Left out of each idle window: after the worker starts and after each idle
/// job, the time its settle may take.
const SETTLE: Duration = Duration::from_secs(1);

/// `bench steady`'s options.
#[derive(Debug, Args)]
pub(crate) struct SteadyArgs {
    /// Which database(s) to measure.
    #[arg(long, value_enum, default_value_t = BackendArg::All)]
    backend: BackendArg,
    /// The database URL (one backend only); the defaults as for the main bench.
    #[arg(long)]
    url: Option<String>,
    /// Jobs per second to sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [200, 1_000, 5_000, 10_000, 20_000])]
    rates: Vec<u32>,
    /// Measured seconds per rate (after 0.5 s of warm-up).
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Runs of every rate; the table shows the median run.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The worker's poll interval; jobq's default unless given.
    #[arg(long)]
    poll_ms: Option<u64>,
    /// Jobs enqueued after a silence.
    #[arg(long, default_value_t = 5)]
    idle_samples: usize,
    /// The silence before each of them, in seconds.
    #[arg(long, default_value_t = 10)]
    idle_gap_secs: u64,
    /// Also write the results as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The worker process's options.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = CONCURRENCY)]
    concurrency: usize,
    #[arg(long)]
    poll_ms: Option<u64>,
    /// Count the statements this process sends (see [`StatementCounter`]).
    #[arg(long)]
    pub(crate) count_statements: bool,
}

/// The producer process's options.
#[derive(Debug, Args)]
pub(crate) struct ProducerArgs {
    #[arg(long)]
    url: String,
    /// Jobs per second.
    #[arg(long, default_value_t = 1.0)]
    rate: f64,
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// The first this many jobs are warm-up: run but not measured.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// Instead, one job per line read on stdin (`enqueue`, or `warmup` for
    /// one not measured), scheduled for now, each answered `enqueued`.
    #[arg(long)]
    on_demand: bool,
}

/// What the worker process answers.
#[derive(Debug, Serialize, Deserialize)]
struct WorkerReport {
    /// Handlers started.
    jobs: u64,
    /// Statements sent (0 unless counted).
    statements: u64,
    /// Handler start − scheduled time of every measured job, µs, sorted;
    /// in the last report only.
    latencies_us: Vec<u64>,
}

/// What the producer process reports: how late its tasks began each
/// enqueue (warm-up excluded).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProducerReport {
    enqueued: u64,
    late_p99_ms: f64,
    late_max_ms: f64,
}

/// Enqueue → start of the measured jobs of one run, in ms.
#[derive(Debug, Clone, Serialize)]
struct Percentiles {
    jobs: usize,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of sorted µs; `None` if empty.
    fn of(sorted_us: &[u64]) -> Option<Self> {
        let n = sorted_us.len();
        let at = |p: f64| {
            let i = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
            sorted_us[i] as f64 / 1000.0
        };
        (n > 0).then(|| Self {
            jobs: n,
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: at(1.0),
        })
    }
}

/// One run of one rate.
#[derive(Debug, Clone, Serialize)]
struct RateRun {
    latency: Percentiles,
    producer: ProducerReport,
}

/// Every run of one rate.
#[derive(Debug, Clone, Serialize)]
struct RateReport {
    rate: u32,
    /// Jobs per run, warm-up included.
    jobs: u64,
    /// The run whose p99 is the median (the lower one of an even count).
    median_run: RateRun,
    p99_ms: Summary,
    runs: Vec<RateRun>,
}

/// One job after each silence, and what the silences cost.
#[derive(Debug, Clone, Serialize)]
struct IdleReport {
    gap_secs: u64,
    /// Enqueue → start of each job, ms, sorted.
    samples_ms: Vec<f64>,
    median_ms: f64,
    max_ms: f64,
    /// The silences measured, summed.
    window_secs: f64,
    /// Statements the worker process sent in them.
    worker_statements: u64,
    worker_statements_per_s: f64,
    /// What the server counted in them: MariaDB's `Questions`, PostgreSQL's
    /// transactions (commits + rollbacks) in the bench database; none on SQLite.
    server_counter: Option<String>,
    server_count: Option<u64>,
    server_per_s: Option<f64>,
    /// The same with no worker running, over one window before it started:
    /// MariaDB's `Questions` counts every client of the server.
    server_baseline_per_s: Option<f64>,
}

/// Everything `bench steady` measured on one backend.
#[derive(Debug, Clone, Serialize)]
struct SteadyReport {
    backend: String,
    server_version: String,
    url: String,
    runs: usize,
    secs: f64,
    warmup_secs: f64,
    /// `None`: jobq's default.
    poll_ms: Option<u64>,
    concurrency: usize,
    producer_tasks: usize,
    producer_connections: u32,
    load_before: f64,
    load_after: f64,
    seconds: f64,
    rates: Vec<RateReport>,
    /// The highest swept rate whose median p99 ≤ 50 ms.
    highest_rate_p99_le_50ms: Option<u32>,
    idle: IdleReport,
}

/// The JSON file.
#[derive(Debug, Serialize)]
struct Results {
    command: String,
    cores: usize,
    backends: Vec<SteadyReport>,
}

/// `bench steady`: every backend asked for, a table each, then the summary.
pub(crate) async fn run(args: SteadyArgs) -> Res<()> {
    let backends = match args.backend {
        BackendArg::All => vec![BackendArg::Mysql, BackendArg::Postgres, BackendArg::Sqlite],
        one => vec![one],
    };
    if args.url.is_some() && backends.len() > 1 {
        return Err("--url needs a single --backend".into());
    }
    if args.rates.contains(&0) || args.secs <= 0.0 {
        return Err("rates and --secs must be positive".into());
    }
    if args.idle_samples == 0 || args.idle_gap_secs < 2 {
        return Err("--idle-samples must be ≥ 1 and --idle-gap-secs ≥ 2".into());
    }
    let mut reports = Vec::new();
    for backend in backends {
        // SQLite's file, shared by the worker and producer processes.
        let dir = tempfile::tempdir()?;
        let url = match (backend, &args.url) {
            (_, Some(url)) => url.clone(),
            (BackendArg::Mysql, None) => crate::MYSQL_URL.to_owned(),
            (BackendArg::Postgres, None) => crate::POSTGRES_URL.to_owned(),
            (_, None) => format!("sqlite://{}", dir.path().join("steady.db").display()),
        };
        let report = Steady::connect(&url, &args).await?.run().await?;
        crate::say(format_args!("{}", details(&report)));
        reports.push(report);
        if let Some(out) = &args.out {
            let results = Results {
                command: std::env::args().collect::<Vec<_>>().join(" "),
                cores: std::thread::available_parallelism().map_or(0, usize::from),
                backends: reports.clone(),
            };
            std::fs::write(out, serde_json::to_string_pretty(&results)?)?;
        }
    }
    crate::say(format_args!("{}", summary(&reports, &args.rates)));
    if let Some(out) = &args.out {
        crate::note(format_args!("wrote {}", out.display()));
    }
    Ok(())
}

/// One backend's measurement.
struct Steady<'a> {
    url: String,
    args: &'a SteadyArgs,
    db: Db,
    backend: String,
    server_version: String,
}

impl<'a> Steady<'a> {
    /// Creates the database if missing and migrates it.
    async fn connect(url: &str, args: &'a SteadyArgs) -> Res<Self> {
        crate::workload::ensure_database(url).await?;
        let jobq = Jobq::connect(url).await?;
        jobq.migrate().await?;
        let db = Db::connect(url, 2).await?;
        Ok(Self {
            url: url.to_owned(),
            args,
            server_version: db.version().await?,
            backend: jobq.backend().to_string(),
            db,
        })
    }

    /// Every rate `--runs` times (the rates in turn within a run), then idle.
    async fn run(&self) -> Res<SteadyReport> {
        let (started, load_before) = (Instant::now(), load());
        crate::note(format_args!(
            "== steady: {} ({}) at {}",
            self.backend, self.server_version, self.url
        ));
        let mut runs: Vec<Vec<RateRun>> = vec![Vec::new(); self.args.rates.len()];
        for run in 0..self.args.runs.max(1) {
            for (&rate, runs) in self.args.rates.iter().zip(runs.iter_mut()) {
                let one = self.rate_with_retries(rate).await?;
                crate::note(format_args!(
                    "  run {} at {rate}/s: p50 {} p99 {} max {} ms (producer late p99 {} ms)",
                    run + 1,
                    round(one.latency.p50_ms),
                    round(one.latency.p99_ms),
                    round(one.latency.max_ms),
                    round(one.producer.late_p99_ms),
                ));
                runs.push(one);
            }
        }
        let rates: Vec<RateReport> = self
            .args
            .rates
            .iter()
            .zip(runs)
            .map(|(&rate, runs)| {
                let p99s: Vec<f64> = runs.iter().map(|r| r.latency.p99_ms).collect();
                let mut by_p99 = runs.clone();
                by_p99.sort_by(|a, b| a.latency.p99_ms.total_cmp(&b.latency.p99_ms));
                RateReport {
                    rate,
                    jobs: self.jobs(rate).0,
                    median_run: by_p99[(by_p99.len() - 1) / 2].clone(),
                    p99_ms: Summary::of(&p99s).expect("at least one run"),
                    runs,
                }
            })
            .collect();
        let idle = self.idle().await?;
        Ok(SteadyReport {
            backend: self.backend.clone(),
            server_version: self.server_version.clone(),
            url: self.url.clone(),
            runs: self.args.runs.max(1),
            secs: self.args.secs,
            warmup_secs: WARMUP_SECS,
            poll_ms: self.args.poll_ms,
            concurrency: CONCURRENCY,
            producer_tasks: PRODUCER_TASKS,
            producer_connections: PRODUCER_CONNECTIONS,
            load_before,
            load_after: load(),
            seconds: started.elapsed().as_secs_f64(),
            highest_rate_p99_le_50ms: rates
                .iter()
                .filter(|r| r.median_run.latency.p99_ms <= P99_GOAL_MS)
                .map(|r| r.rate)
                .max(),
            rates,
            idle,
        })
    }

    /// Jobs per run at `rate`: (all, warm-up).
    fn jobs(&self, rate: u32) -> (u64, u64) {
        let warmup = (f64::from(rate) * WARMUP_SECS).ceil() as u64;
        let measured = (f64::from(rate) * self.args.secs).ceil() as u64;
        (warmup + measured, warmup)
    }

    /// [`Self::rate`], again after a failure: other sessions on this machine
    /// may restart the database servers.
    async fn rate_with_retries(&self, rate: u32) -> Res<RateRun> {
        let mut attempt = 1;
        loop {
            match self.rate(rate).await {
                Err(error) if attempt < 3 => {
                    crate::note(format_args!("{rate}/s failed ({error}); measuring again"));
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                result => return result,
            }
        }
    }

    /// One run at `rate` on an empty table.
    async fn rate(&self, rate: u32) -> Res<RateRun> {
        self.db.reset().await?;
        self.db.quiesce().await?;
        let (count, warmup) = self.jobs(rate);
        let mut worker = WorkerProcess::start(&self.url, self.args.poll_ms, false).await?;
        let producer = produce(&self.url, rate, count, warmup).await?;
        worker.wait_for(count, DRAIN_DEADLINE).await?;
        let report = worker.finish().await?;
        if report.jobs != count {
            return Err(format!("{count} jobs enqueued, {} handlers ran", report.jobs).into());
        }
        let latency = Percentiles::of(&report.latencies_us).ok_or("no job measured")?;
        Ok(RateRun { latency, producer })
    }

    /// One job after each of `--idle-samples` silences, and the statements
    /// sent in the silences.
    async fn idle(&self) -> Res<IdleReport> {
        self.db.reset().await?;
        self.db.quiesce().await?;
        let counter = ServerCounter::open(&self.url).await?;
        let gap = Duration::from_secs(self.args.idle_gap_secs);
        let window = gap.saturating_sub(SETTLE);
        // What the server counts with no worker (other clients, on a shared server).
        let baseline = match &counter {
            Some(c) => Some(c.count_over(window).await? as f64 / window.as_secs_f64()),
            None => None,
        };
        let mut worker = WorkerProcess::start(&self.url, self.args.poll_ms, true).await?;
        // One producer throughout, its connections opened by a warm-up job,
        // as a long-running service's are.
        let mut producer =
            Peer::start("steady-producer", &["--url", &self.url, "--on-demand"]).await?;
        producer.ask("warmup").await?;
        worker.wait_for(1, Duration::from_secs(60)).await?;
        tokio::time::sleep(SETTLE).await;
        let (mut secs, mut statements, mut server) = (0.0, 0, 0);
        // A random extra 0–1 s (0–poll if longer) before each window: the job
        // comes at a random point of the worker's poll cycle, not at the same
        // one every time.
        let cycle = Duration::from_millis(self.args.poll_ms.unwrap_or(0).max(1_000));
        for k in 1..=self.args.idle_samples as u64 {
            tokio::time::sleep(cycle.mul_f64(rand::random::<f64>())).await;
            let (before, started) = (worker.stats().await?.statements, Instant::now());
            match &counter {
                Some(c) => server += c.count_over(window).await?,
                None => tokio::time::sleep(window).await,
            }
            statements += worker.stats().await?.statements - before;
            secs += started.elapsed().as_secs_f64();
            producer.ask("enqueue").await?;
            worker.wait_for(k + 1, Duration::from_secs(60)).await?;
            tokio::time::sleep(SETTLE).await;
        }
        producer.finish().await?;
        let samples_ms: Vec<f64> = worker
            .finish()
            .await?
            .latencies_us
            .iter()
            .map(|&us| us as f64 / 1000.0)
            .collect();
        let median = Summary::of(&samples_ms).ok_or("no idle sample")?.median;
        let per_s = |n: u64| n as f64 / secs;
        Ok(IdleReport {
            gap_secs: self.args.idle_gap_secs,
            median_ms: median,
            max_ms: samples_ms.last().copied().unwrap_or(f64::NAN),
            samples_ms,
            window_secs: secs,
            worker_statements: statements,
            worker_statements_per_s: per_s(statements),
            server_counter: counter.as_ref().map(|c| c.what().to_owned()),
            server_count: counter.as_ref().map(|_| server),
            server_per_s: counter.as_ref().map(|_| per_s(server)),
            server_baseline_per_s: baseline,
        })
    }
}

/// Runs a `steady-producer` to the end and returns its report.
async fn produce(url: &str, rate: u32, count: u64, warmup: u64) -> Res<ProducerReport> {
    let output = Command::new(std::env::current_exe()?)
        .args(["steady-producer", "--url", url, "--rate", &rate.to_string()])
        .args([
            "--count",
            &count.to_string(),
            "--warmup",
            &warmup.to_string(),
        ])
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await?;
    if !output.status.success() {
        return Err(format!("the producer process failed: {}", output.status).into());
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// A child process of this binary that reads commands on its stdin and
/// answers each with a line on its stdout: a `steady-worker`, or a
/// `steady-producer --on-demand`.
struct Peer {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Peer {
    /// Starts `bench <name> <args>` and waits for its `ready`.
    async fn start(name: &'static str, args: &[&str]) -> Res<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let mut peer = Self {
            name,
            child,
            stdin,
            stdout,
        };
        let line = peer.line(Duration::from_secs(30)).await?;
        if line != "ready" {
            return Err(format!("{name} said {line:?}, not ready").into());
        }
        Ok(peer)
    }

    /// Its next line.
    async fn line(&mut self, timeout: Duration) -> Res<String> {
        let name = self.name;
        tokio::time::timeout(timeout, self.stdout.next_line())
            .await
            .map_err(|_| format!("{name} did not answer within {timeout:?}"))??
            .ok_or_else(|| format!("{name} exited").into())
    }

    /// Sends `command`; the answer.
    async fn ask(&mut self, command: &str) -> Res<String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        stdin.write_all(format!("{command}\n").as_bytes()).await?;
        stdin.flush().await?;
        self.line(Duration::from_secs(30)).await
    }

    /// Closes its stdin; its last line, once it exited.
    async fn finish(mut self) -> Res<String> {
        drop(self.stdin.take());
        let last = self.line(Duration::from_secs(60)).await?;
        let status = self.child.wait().await?;
        if !status.success() {
            return Err(format!("{} failed: {status}", self.name).into());
        }
        Ok(last)
    }
}

/// A `steady-worker` process.
struct WorkerProcess(Peer);

impl WorkerProcess {
    async fn start(url: &str, poll_ms: Option<u64>, count_statements: bool) -> Res<Self> {
        let (concurrency, poll) = (CONCURRENCY.to_string(), poll_ms.map(|ms| ms.to_string()));
        let mut args = vec!["--url", url, "--concurrency", &concurrency];
        if let Some(poll) = &poll {
            args.extend(["--poll-ms", poll]);
        }
        if count_statements {
            args.push("--count-statements");
        }
        Ok(Self(Peer::start("steady-worker", &args).await?))
    }

    /// Its counts so far.
    async fn stats(&mut self) -> Res<WorkerReport> {
        Ok(serde_json::from_str(&self.0.ask("stats").await?)?)
    }

    /// Waits until `jobs` handlers started; an error after `deadline`.
    async fn wait_for(&mut self, jobs: u64, deadline: Duration) -> Res<()> {
        let until = Instant::now() + deadline;
        loop {
            let started = self.stats().await?.jobs;
            if started >= jobs {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(
                    format!("only {started} of {jobs} jobs started within {deadline:?}").into(),
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Shuts it down; its last report, with the latencies.
    async fn finish(self) -> Res<WorkerReport> {
        Ok(serde_json::from_str(&self.0.finish().await?)?)
    }
}

/// The server's own count of what it received, read on a connection of its
/// own (on PostgreSQL, one to the `postgres` database, outside the count).
struct ServerCounter {
    db: Db,
    /// The bench database's name (PostgreSQL).
    database: String,
    /// What two reads in a row differ by: the reading itself.
    overhead: u64,
}

impl ServerCounter {
    /// `None` on SQLite.
    async fn open(url: &str) -> Res<Option<Self>> {
        let (base, rest) = url
            .rsplit_once('/')
            .ok_or_else(|| format!("no database name in {url}"))?;
        let database = rest.split('?').next().unwrap_or(rest);
        let db = if url.starts_with("postgres") {
            // The same URL and parameters, on the `postgres` database.
            let params = &rest[database.len()..];
            Db::connect(&format!("{base}/postgres{params}"), 1).await?
        } else if url.starts_with("sqlite") {
            return Ok(None);
        } else {
            Db::connect(url, 1).await?
        };
        let mut counter = Self {
            db,
            database: database.to_owned(),
            overhead: 0,
        };
        let first = counter.read().await?;
        counter.overhead = counter.read().await?.saturating_sub(first);
        Ok(Some(counter))
    }

    /// What it counts over `window`, less the reading.
    async fn count_over(&self, window: Duration) -> Res<u64> {
        let before = self.read().await?;
        tokio::time::sleep(window).await;
        Ok(self.read().await?.saturating_sub(before + self.overhead))
    }

    fn what(&self) -> &'static str {
        match self.db {
            Db::Postgres(_) => "PostgreSQL transactions (xact_commit + xact_rollback)",
            _ => "Questions",
        }
    }

    async fn read(&self) -> Res<u64> {
        Ok(match &self.db {
            Db::MySql(pool) => {
                let (_, value): (String, String) =
                    sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Questions'")
                        .fetch_one(pool)
                        .await?;
                value.parse()?
            }
            Db::Postgres(pool) => {
                sqlx::query("SELECT pg_stat_clear_snapshot()")
                    .execute(pool)
                    .await?;
                let n: i64 = sqlx::query_scalar(
                    "SELECT COALESCE(SUM(xact_commit + xact_rollback), 0)::BIGINT \
                     FROM pg_stat_database WHERE datname = $1",
                )
                .bind(&self.database)
                .fetch_one(pool)
                .await?;
                u64::try_from(n)?
            }
            Db::Sqlite(_) => 0,
        })
    }
}

/// Statements this process sent: [`StatementCounter`] counts them.
static STATEMENTS: AtomicU64 = AtomicU64::new(0);

/// Counts sqlx's per-statement log event (target `sqlx::query`, one per
/// statement, at DEBUG or at WARN when slow); installed only in a worker
/// process started with `--count-statements`, since enabling the event
/// costs sqlx a little work per statement.
#[derive(Debug)]
pub(crate) struct StatementCounter;

impl<S: tracing::Subscriber> Layer<S> for StatementCounter {
    fn on_event(&self, _event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        STATEMENTS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The `steady-worker` process: serves the steady queue until its stdin closes.
pub(crate) async fn worker(args: WorkerArgs) -> Res<()> {
    let jobq = Jobq::connect(&args.url).await?;
    let probe = Probe::new(u64::MAX);
    let mut builder = Worker::builder(jobq)
        .queue(STEADY_QUEUE, args.concurrency)
        .state(probe.clone());
    if let Some(ms) = args.poll_ms {
        builder = builder.poll_interval(Duration::from_millis(ms));
    }
    let handle = builder.build()?.start();
    crate::say(format_args!("ready"));
    let report = |latencies_us| WorkerReport {
        jobs: probe.count(),
        statements: STATEMENTS.load(Ordering::Relaxed),
        latencies_us,
    };
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        if line.trim() == "stats" {
            let stats = serde_json::to_string(&report(Vec::new()))?;
            crate::say(format_args!("{stats}"));
        }
    }
    handle.shutdown(Duration::from_secs(30)).await?;
    let last = serde_json::to_string(&report(probe.latencies()))?;
    crate::say(format_args!("{last}"));
    Ok(())
}

/// The `steady-producer` process: job `i` at `start + i / rate`, from
/// [`PRODUCER_TASKS`] tasks taking the next `i` in turn.
pub(crate) async fn producer(args: ProducerArgs) -> Res<()> {
    let jobq = Jobq::connect_with(&args.url, PRODUCER_CONNECTIONS).await?;
    if args.on_demand {
        crate::say(format_args!("ready"));
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = stdin.next_line().await? {
            let warmup = line.trim() == "warmup";
            jobq.enqueue(SteadyNoop::new(now_us(), warmup)).await?;
            crate::say(format_args!("enqueued"));
        }
        crate::say(format_args!("done"));
        return Ok(());
    }
    let next = Arc::new(AtomicU64::new(0));
    let (start, start_us) = (tokio::time::Instant::now(), now_us());
    let mut tasks = JoinSet::new();
    for _ in 0..PRODUCER_TASKS {
        let (jobq, next) = (jobq.clone(), Arc::clone(&next));
        let (rate, count, warmup) = (args.rate, args.count, args.warmup);
        tasks.spawn(async move {
            let mut late_us = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<_, jobq_runtime::Error>(late_us);
                }
                let offset = Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(start + offset).await;
                if i >= warmup {
                    let late = start.elapsed().saturating_sub(offset);
                    late_us.push(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
                }
                let scheduled_us = start_us + u64::try_from(offset.as_micros()).unwrap_or(u64::MAX);
                jobq.enqueue(SteadyNoop::new(scheduled_us, i < warmup))
                    .await?;
            }
        });
    }
    let mut late_us = Vec::new();
    for task in tasks.join_all().await {
        late_us.extend(task?);
    }
    late_us.sort_unstable();
    let late = Percentiles::of(&late_us);
    tokio::time::sleep(LINGER).await;
    let report = ProducerReport {
        enqueued: args.count,
        late_p99_ms: late.as_ref().map_or(0.0, |l| l.p99_ms),
        late_max_ms: late.as_ref().map_or(0.0, |l| l.max_ms),
    };
    crate::say(format_args!("{}", serde_json::to_string(&report)?));
    Ok(())
}

/// `12345` as `12,345`.
fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One backend's rates in full.
fn details(report: &SteadyReport) -> String {
    let runs = report.runs;
    let mut out = format!(
        "### {} ({}), {runs} run{} of {} s + {WARMUP_SECS} s warm-up, poll {}, load {:.1} → {:.1}\n\n\
         | jobs/s | p50 ms | p90 ms | p99 ms (min–max) | p99.9 ms | max ms | producer late p99 / max ms |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
        report.backend,
        report.server_version,
        if runs == 1 { "" } else { "s" },
        report.secs,
        report
            .poll_ms
            .map_or_else(|| "default".to_owned(), |ms| format!("{ms} ms")),
        report.load_before,
        report.load_after,
    );
    for rate in &report.rates {
        let (m, p99) = (&rate.median_run.latency, &rate.p99_ms);
        let producer = &rate.median_run.producer;
        out.push_str(&format!(
            "| {} | {} | {} | {} ({}–{}) | {} | {} | {} / {} |\n",
            thousands(rate.rate),
            round(m.p50_ms),
            round(m.p90_ms),
            round(m.p99_ms),
            round(p99.min),
            round(p99.max),
            round(m.p999_ms),
            round(m.max_ms),
            round(producer.late_p99_ms),
            round(producer.late_max_ms),
        ));
    }
    let idle = &report.idle;
    out.push_str(&format!(
        "\nFrom idle ({} × {} s of silence): {} ms. Idle worker: {} statements/s sent{}.\n",
        idle.samples_ms.len(),
        idle.gap_secs,
        idle.samples_ms
            .iter()
            .map(|&ms| round(ms))
            .collect::<Vec<_>>()
            .join(", "),
        round(idle.worker_statements_per_s),
        match (
            &idle.server_counter,
            idle.server_per_s,
            idle.server_baseline_per_s
        ) {
            (Some(what), Some(per_s), Some(baseline)) => format!(
                ", the server counted {}/s ({what}; {}/s before the worker started)",
                round(per_s),
                round(baseline)
            ),
            _ => String::new(),
        },
    ));
    out
}

/// Every backend in one table, like the README's.
fn summary(reports: &[SteadyReport], rates: &[u32]) -> String {
    let mut out = String::from("| backend |");
    for (i, &rate) in rates.iter().enumerate() {
        let unit = if i == 0 { " jobs/s p50 / p99 ms" } else { "" };
        out.push_str(&format!(" {}{unit} |", thousands(rate)));
    }
    out.push_str(
        " highest rate with p99 ≤ 50 ms | from idle p50 / max ms | idle worker statements/s |\n|---|",
    );
    out.push_str(&"---:|".repeat(rates.len() + 3));
    out.push('\n');
    for report in reports {
        out.push_str(&format!("| {} |", report.backend));
        for rate in &report.rates {
            let m = &rate.median_run.latency;
            out.push_str(&format!(" {} / {} |", round(m.p50_ms), round(m.p99_ms)));
        }
        let idle = &report.idle;
        out.push_str(&format!(
            " {} | {} / {} | {} ({}) |\n",
            report
                .highest_rate_p99_le_50ms
                .map_or_else(|| "none".to_owned(), thousands),
            round(idle.median_ms),
            round(idle.max_ms),
            round(idle.worker_statements_per_s),
            match (idle.server_per_s, idle.server_baseline_per_s) {
                (Some(per_s), Some(baseline)) => format!(
                    "server {}, {} without the worker",
                    round(per_s),
                    round(baseline)
                ),
                _ => "server n/a".to_owned(),
            },
        ));
    }
    out
}
