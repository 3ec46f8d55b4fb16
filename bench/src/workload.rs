//! The workloads, each measured as raw SQL and through jobq, and the runs.

use std::time::{Duration, Instant};

use jobq_runtime::{Batch, BatchCallback, Enqueue, Jobq, Rate, Worker, WorkerHandle, Workflow};
use tokio::task::JoinSet;

use crate::job::{BenchNoop, Probe, QUEUE, now_us};
use crate::raw::Db;
use crate::report::{BackendReport, Row, Summary, load};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

/// How a backend is run.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) runs: usize,
    pub(crate) quick: bool,
    pub(crate) poll: Duration,
    pub(crate) only: Vec<String>,
}

/// How long any one drain may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(300);
/// Turns each side takes in an enqueue workload (see `run`).
const ENQUEUE_BLOCKS: u64 = 6;
/// Drains of 1,000 jobs per measurement, summed: one takes 15–50 ms, and
/// five of them (the earlier count) moved the 1,000-pending and
/// 1,000,000-finished-rows figures by ±15 % from run to run.
const SHORT_DRAIN_REPEATS: u32 = 20;

/// Jobs per second of the latency workloads.
const RATE: f64 = 200.0;
/// The jobq worker's concurrency where a workload does not vary it.
const DEFAULT_CONCURRENCY: usize = 32;

/// What one side of one workload did in one run.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    jobs: u64,
    secs: f64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
}

impl Sample {
    fn rate(self) -> f64 {
        self.jobs as f64 / self.secs
    }
}

/// [`Side::JobqDrainFlow`]'s shapes: none (plain jobs), one fan-out and
/// fan-in, diamonds of 4, one batch with a finish callback, batches of 3
/// with one each.
const FLOW_NONE: u8 = 0;
const FLOW_FAN: u8 = 1;
const FLOW_DIAMONDS: u8 = 2;
const FLOW_BATCH: u8 = 3;
const FLOW_BATCHES: u8 = 4;

/// One workload: a raw side (if any), a jobq side, and how big.
#[derive(Debug, Clone)]
struct Spec {
    id: &'static str,
    title: String,
    raw: Option<Side>,
    jobq: Side,
    jobs: u64,
    /// Drains of the backlog per run (short drains are repeated and summed).
    repeats: u32,
    /// Runs after the 1,000,000 finished rows were added.
    history: bool,
}

#[derive(Debug, Clone, Copy)]
enum Side {
    /// `tasks` tasks, each with its own connection, single-row INSERTs.
    RawEnqueueOne {
        tasks: usize,
    },
    /// One connection, multi-row INSERTs of `batch`.
    RawEnqueueMany {
        batch: usize,
    },
    /// `conns` tasks with their own connection claiming `batch` at a time.
    RawDrain {
        conns: usize,
        batch: u32,
    },
    JobqEnqueueOne {
        tasks: usize,
    },
    JobqEnqueueMany {
        batch: usize,
    },
    JobqDrain {
        concurrency: usize,
    },
    /// [`Side::JobqDrain`] with a Prometheus recorder installed (`metrics`
    /// false: the same worker without one, the baseline of the metrics rows).
    JobqDrainMetrics {
        concurrency: usize,
        metrics: bool,
    },
    /// [`Side::JobqDrain`] on a queue with a global concurrency limit of
    /// `limit` (`None`: no limit, the baseline of the limit rows).
    JobqDrainLimited {
        concurrency: usize,
        limit: Option<u32>,
    },
    /// [`Side::JobqDrain`] on a queue with a rate far above what the drain
    /// achieves (`rated` false: no rate, the baseline of the rate rows).
    JobqDrainRated {
        concurrency: usize,
        rated: bool,
    },
    /// [`Side::JobqDrain`] of jobs spread over `keys` concurrency keys at
    /// limit 1, enqueued through jobq (`None`: the same jobs without keys,
    /// filled as every drain's, the baseline of the keys row).
    JobqDrainKeyed {
        concurrency: usize,
        keys: Option<u64>,
    },
    /// [`Side::JobqDrain`] of `bench_remember` jobs of `mode` (enqueued
    /// through jobq; `REMEMBER_PLAIN`: the baseline of their rows).
    JobqDrainRemember {
        concurrency: usize,
        mode: u8,
    },
    /// [`Side::JobqDrain`] of the same jobs as a workflow of `flow`'s shape
    /// ([`FLOW_FAN`], [`FLOW_DIAMONDS`]; [`FLOW_NONE`]: plain, the baseline
    /// of the workflow rows), with the time from each fan-in's last
    /// dependency's settle to its claim as the latency.
    JobqDrainFlow {
        concurrency: usize,
        flow: u8,
    },
    /// Worker in this process; enqueues at `RATE` from this process or another.
    JobqLatency {
        other_process: bool,
    },
}

impl Side {
    fn describe(self) -> String {
        match self {
            Self::RawEnqueueOne { tasks } => format!("{tasks} conn × 1-row INSERT"),
            Self::RawEnqueueMany { batch } => format!("1 conn × {batch}-row INSERT"),
            Self::RawDrain { conns, batch } => format!("{conns} conn × batch {batch}"),
            Self::JobqEnqueueOne { tasks } => format!("{tasks} task × enqueue"),
            Self::JobqEnqueueMany { batch } => format!("enqueue_many({batch})"),
            Self::JobqDrain { concurrency } => format!("worker, concurrency {concurrency}"),
            Self::JobqDrainMetrics {
                concurrency,
                metrics,
            } => format!(
                "worker, concurrency {concurrency}, {}",
                if metrics {
                    "Prometheus recorder"
                } else {
                    "no recorder"
                }
            ),
            Self::JobqDrainLimited { concurrency, limit } => match limit {
                Some(limit) => format!("worker, concurrency {concurrency}, queue limit {limit}"),
                None => format!("worker, concurrency {concurrency}, no limit"),
            },
            Self::JobqDrainRated { concurrency, rated } => format!(
                "worker, concurrency {concurrency}, {}",
                if rated {
                    "queue rate 1,000,000/s burst 10,000"
                } else {
                    "no rate"
                }
            ),
            Self::JobqDrainKeyed { concurrency, keys } => match keys {
                Some(keys) => format!("worker, concurrency {concurrency}, {keys} keys at limit 1"),
                None => format!("worker, concurrency {concurrency}, no keys"),
            },
            Self::JobqDrainRemember { concurrency, mode } => format!(
                "worker, concurrency {concurrency}, {}",
                match mode {
                    crate::job::REMEMBER_CHECKPOINT => "a checkpoint per job",
                    crate::job::REMEMBER_COMPLETE_IN => "each job completed in its own transaction",
                    _ => "jobs that return at once",
                }
            ),
            Self::JobqDrainFlow { concurrency, flow } => format!(
                "worker, concurrency {concurrency}, {}",
                match flow {
                    FLOW_FAN => "one fan-out and fan-in",
                    FLOW_DIAMONDS => "diamonds of 4",
                    FLOW_BATCH => "one batch and its finish callback",
                    FLOW_BATCHES => "batches of 3 with a finish callback each",
                    _ => "the same jobs plain",
                }
            ),
            Self::JobqLatency { other_process } => format!(
                "{RATE:.0} jobs/s from {}, concurrency {DEFAULT_CONCURRENCY}",
                if other_process {
                    "another process"
                } else {
                    "the same process"
                }
            ),
        }
    }
}

fn specs(quick: bool, latency_secs: f64) -> Vec<Spec> {
    // JOBQ_BENCH_SCALE multiplies the sized workloads (longer runs for A/B
    // comparisons on a noisy machine, where a 0.2 s drain ranks nothing).
    let scale: u64 = std::env::var("JOBQ_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let s = |full: u64| {
        if quick {
            (full / 10).max(50)
        } else {
            full * scale
        }
    };
    let spec = |id, title: &str, raw, jobq, jobs| Spec {
        id,
        title: title.to_owned(),
        raw,
        jobq,
        jobs,
        repeats: 1,
        history: false,
    };
    // The raw side with `conns` connections claiming `batch` rows, against a
    // worker of `concurrency` slots.
    let drain = |id, title, (conns, batch), concurrency, jobs| {
        let raw = Side::RawDrain { conns, batch };
        spec(id, title, Some(raw), Side::JobqDrain { concurrency }, jobs)
    };
    let metrics_drain = |id, title, concurrency, jobs| {
        let side = |metrics| Side::JobqDrainMetrics {
            concurrency,
            metrics,
        };
        spec(id, title, Some(side(false)), side(true), jobs)
    };
    // The same worker on the same queue without and with a global limit
    // equal to its concurrency.
    let limited_drain = |id, title, concurrency: usize, jobs| {
        let side = |limit| Side::JobqDrainLimited { concurrency, limit };
        let limit = u32::try_from(concurrency).ok();
        spec(id, title, Some(side(None)), side(limit), jobs)
    };
    // The same worker on the same queue without and with a rate far above
    // what it drains at.
    let rated_drain = |id, title, concurrency: usize, jobs| {
        let side = |rated| Side::JobqDrainRated { concurrency, rated };
        spec(id, title, Some(side(false)), side(true), jobs)
    };
    // The same worker on the same queue without and with its jobs spread
    // over 1,000 concurrency keys at limit 1.
    let keyed_drain = |id, title, concurrency: usize, jobs| {
        let side = |keys| Side::JobqDrainKeyed { concurrency, keys };
        spec(id, title, Some(side(None)), side(Some(1_000)), jobs)
    };
    // The same jobs plain and as workflows of `flow`'s shape.
    let flow_drain = |id, title, concurrency: usize, flow, jobs| {
        let side = |flow| Side::JobqDrainFlow { concurrency, flow };
        spec(id, title, Some(side(FLOW_NONE)), side(flow), jobs)
    };
    // The same jobs without and with what `mode` makes them do.
    let remember_drain = |id, title, concurrency: usize, mode, jobs| {
        let side = |mode| Side::JobqDrainRemember { concurrency, mode };
        spec(
            id,
            title,
            Some(side(crate::job::REMEMBER_PLAIN)),
            side(mode),
            jobs,
        )
    };
    let enqueue_one = |id, title, tasks, jobs| {
        let raw = Side::RawEnqueueOne { tasks };
        spec(id, title, Some(raw), Side::JobqEnqueueOne { tasks }, jobs)
    };
    let latency_jobs = (RATE * latency_secs) as u64;
    let latency = |id, title, other_process| {
        let jobq = Side::JobqLatency { other_process };
        spec(id, title, None, jobq, latency_jobs)
    };
    vec![
        enqueue_one("enqueue1", "enqueue, single rows, 1 task", 1, s(3_000)),
        enqueue_one("enqueue8", "enqueue, single rows, 8 tasks", 8, s(8_000)),
        spec(
            "enqueue100",
            "enqueue, batches of 100",
            Some(Side::RawEnqueueMany { batch: 100 }),
            Side::JobqEnqueueMany { batch: 100 },
            s(20_000),
        ),
        drain("drain1", "drain, concurrency 1", (1, 1), 1, s(600)),
        drain("drain8", "drain, concurrency 8", (1, 8), 8, s(4_000)),
        drain("drain32", "drain, concurrency 32", (1, 32), 32, s(20_000)),
        // The "raw" side of these is jobq without a limit.
        limited_drain(
            "limit8",
            "drain with a queue limit = concurrency 8 vs none",
            8,
            s(4_000),
        ),
        limited_drain(
            "limit32",
            "drain with a queue limit = concurrency 32 vs none",
            32,
            s(20_000),
        ),
        // The "raw" side of this is jobq without a rate.
        rated_drain(
            "rate",
            "drain with a queue rate far above the drain's vs none, concurrency 8",
            8,
            s(4_000),
        ),
        // The "raw" side of this is jobq without keys.
        keyed_drain(
            "keys1000",
            "drain of 1,000 keys at limit 1 vs no keys, concurrency 32",
            32,
            s(20_000),
        ),
        // The "raw" side of these is the same jobs without dependencies.
        flow_drain(
            "fanout10k",
            "drain of a workflow: 1 job, 10,000 after it, 1 after all vs the same jobs plain, concurrency 32",
            32,
            FLOW_FAN,
            s(10_000) + 2,
        ),
        flow_drain(
            "diamonds",
            "drain of 1,000 workflows of 4 (a diamond) vs the same jobs plain, concurrency 32",
            32,
            FLOW_DIAMONDS,
            s(4_000),
        ),
        flow_drain(
            "batch10k",
            "drain of a batch of 10,000 jobs and its finish callback vs the same jobs plain, concurrency 32",
            32,
            FLOW_BATCH,
            s(10_000) + 1,
        ),
        flow_drain(
            "batches",
            "drain of 1,000 batches of 3 jobs and a finish callback vs the same jobs plain, concurrency 32",
            32,
            FLOW_BATCHES,
            s(4_000),
        ),
        // The "raw" side of these is jobq running the same jobs plainly.
        remember_drain(
            "checkpoint8",
            "drain of jobs that checkpoint once vs plain, concurrency 8",
            8,
            crate::job::REMEMBER_CHECKPOINT,
            s(4_000),
        ),
        remember_drain(
            "complete_in8",
            "drain of jobs completed in their own transaction vs plain, concurrency 8",
            8,
            crate::job::REMEMBER_COMPLETE_IN,
            s(4_000),
        ),
        // The "raw" side of these is jobq with metrics off.
        metrics_drain(
            "metrics8",
            "drain with metrics on vs off, concurrency 8",
            8,
            s(4_000),
        ),
        metrics_drain(
            "metrics32",
            "drain with metrics on vs off, concurrency 32",
            32,
            s(20_000),
        ),
        drain(
            "best",
            "drain, raw best vs jobq defaults",
            (8, 100),
            32,
            s(20_000),
        ),
        latency("latency", "latency, enqueuer in-process", false),
        latency(
            "latency_xproc",
            "latency, enqueuer in another process",
            true,
        ),
        Spec {
            repeats: SHORT_DRAIN_REPEATS,
            ..drain("backlog1k", "drain, backlog 1,000", (1, 32), 32, 1_000)
        },
        drain(
            "backlog100k",
            if quick {
                "drain, backlog 10,000 (--quick)"
            } else {
                "drain, backlog 100,000"
            },
            (1, 32),
            32,
            if quick { 10_000 } else { 100_000 },
        ),
        Spec {
            repeats: SHORT_DRAIN_REPEATS,
            history: true,
            ..drain(
                "history1m",
                if quick {
                    "drain, backlog 1,000 + 100,000 done rows (--quick)"
                } else {
                    "drain, backlog 1,000 + 1,000,000 done rows"
                },
                (1, 32),
                32,
                1_000,
            )
        },
    ]
}

/// The `n` jobs of an enqueue workload in batches of `batch`, each built
/// just before it is sent.
fn noop_batches(n: u64, batch: usize) -> impl Iterator<Item = Vec<BenchNoop>> {
    let step = batch as u64;
    (0..n).step_by(batch).map(move |i| {
        (i..(i + step).min(n))
            .map(|k| BenchNoop::nth(k, 0))
            .collect()
    })
}

/// Everything one side needs.
struct Bench {
    url: String,
    db: Db,
    jobq: Jobq,
    poll: Duration,
}

/// Runs every workload `runs` times on the database at `url`.
pub(crate) async fn run_backend(url: &str, options: &Options) -> Res<BackendReport> {
    let started = Instant::now();
    let load_before = load();
    ensure_database(url).await?;
    let jobq = Jobq::connect(url).await?;
    jobq.migrate().await?;
    let db = Db::connect(url, 40).await?;
    let server_version = db.version().await?;
    let backend = format!("{}", jobq.backend());
    crate::note(format_args!("== {backend} ({server_version}) at {url}"));
    let bench = Bench {
        url: url.to_owned(),
        db,
        jobq,
        poll: options.poll,
    };
    let latency_secs = if options.quick { 2.0 } else { 5.0 };
    let specs: Vec<Spec> = specs(options.quick, latency_secs)
        .into_iter()
        .filter(|s| options.only.is_empty() || options.only.iter().any(|o| o == s.id))
        .collect();
    let mut samples: Vec<(Vec<Sample>, Vec<Sample>)> = vec![Default::default(); specs.len()];
    let history_rows = if options.quick { 100_000 } else { 1_000_000 };
    for pass in [false, true] {
        if pass && !specs.iter().any(|s| s.history) {
            continue;
        }
        if pass {
            bench.db.reset().await?;
            crate::note(format_args!("adding {history_rows} done rows"));
            bench.db.add_history(history_rows).await?;
        }
        for run in 0..options.runs {
            for (spec, (raw, jobq)) in specs.iter().zip(samples.iter_mut()) {
                if spec.history != pass {
                    continue;
                }
                // Enqueue workloads last a fraction of a second each, and the
                // disk's pace drifts by ±20 % from one second to the next: the
                // two sides take turns in blocks, each side's sample the sum of
                // its blocks.
                let blocks = if spec.id.starts_with("enqueue") {
                    ENQUEUE_BLOCKS
                } else {
                    1
                };
                let n = spec.jobs / blocks;
                let mut sums: [Option<Sample>; 2] = [None, None];
                for block in 0..blocks {
                    // Alternate which side goes first, so drift favours neither.
                    let order = if (run + block as usize) % 2 == 0 {
                        [true, false]
                    } else {
                        [false, true]
                    };
                    for raw_side in order {
                        let side = if raw_side { spec.raw } else { Some(spec.jobq) };
                        let Some(side) = side else { continue };
                        // Other sessions on this machine may restart the database
                        // servers (fault-injection tests): retry a failed measurement.
                        let mut attempt = 1;
                        let sample = loop {
                            match bench.measure(spec, side, n).await {
                                Ok(sample) => break sample,
                                Err(error) if attempt < 3 => {
                                    crate::note(format_args!(
                                        "{} failed ({error}); measuring again",
                                        spec.id
                                    ));
                                    attempt += 1;
                                    tokio::time::sleep(Duration::from_secs(3)).await;
                                    bench.db.delete_unfinished().await?;
                                }
                                Err(error) => return Err(error),
                            }
                        };
                        let sum = &mut sums[usize::from(!raw_side)];
                        *sum = Some(match sum.take() {
                            None => sample,
                            Some(so_far) => Sample {
                                jobs: so_far.jobs + sample.jobs,
                                secs: so_far.secs + sample.secs,
                                ..so_far
                            },
                        });
                    }
                }
                for (raw_side, sample) in [(true, sums[0]), (false, sums[1])] {
                    let Some(sample) = sample else { continue };
                    crate::note(format_args!(
                        "[{backend} run {}/{}] {:<14} {:<5} {:>9.0} jobs/s{}",
                        run + 1,
                        options.runs,
                        spec.id,
                        if raw_side { "raw" } else { "jobq" },
                        sample.rate(),
                        sample.p50_ms.map_or_else(String::new, |p50| format!(
                            "  p50 {p50:.2} ms  p99 {:.2} ms",
                            sample.p99_ms.unwrap_or(f64::NAN)
                        )),
                    ));
                    if raw_side {
                        raw.push(sample);
                    } else {
                        jobq.push(sample);
                    }
                }
            }
        }
    }
    bench.db.reset().await?;
    bench.db.close().await;

    let mut rows: Vec<Row> = specs
        .iter()
        .zip(&samples)
        .map(|(spec, (raw, jobq))| {
            let rates = |s: &[Sample]| s.iter().map(|s| s.rate()).collect::<Vec<_>>();
            let raw_rate = Summary::of(&rates(raw));
            let jobq_rate = Summary::of(&rates(jobq));
            let ratio = raw_rate
                .as_ref()
                .zip(jobq_rate.as_ref())
                .map(|(r, j)| j.median / r.median);
            let p = |f: fn(&Sample) -> Option<f64>| {
                Summary::of(&jobq.iter().filter_map(f).collect::<Vec<_>>())
            };
            Row {
                backend: backend.clone(),
                workload: spec.title.clone(),
                raw_config: spec.raw.map_or_else(|| "—".to_owned(), Side::describe),
                jobq_config: spec.jobq.describe(),
                jobs: spec.jobs * u64::from(spec.repeats),
                raw_jobs_per_s: raw_rate,
                jobq_jobs_per_s: jobq_rate,
                ratio,
                jobq_p50_ms: p(|s| s.p50_ms),
                jobq_p99_ms: p(|s| s.p99_ms),
                target: None,
                target_met: None,
            }
        })
        .collect();
    judge(&specs, &mut rows, &bench.jobq, options.poll);
    Ok(BackendReport {
        backend,
        server_version,
        url: url.to_owned(),
        runs: options.runs,
        quick: options.quick,
        poll_interval_ms: u64::try_from(options.poll.as_millis()).unwrap_or(u64::MAX),
        load_before,
        load_after: load(),
        seconds: started.elapsed().as_secs_f64(),
        rows,
    })
}

/// Fills in each row's target and whether it is met.
fn judge(specs: &[Spec], rows: &mut [Row], jobq: &Jobq, poll: Duration) {
    let backlog_1k = specs
        .iter()
        .zip(rows.iter())
        .find(|(s, _)| s.id == "backlog1k")
        .and_then(|(_, r)| r.jobq_jobs_per_s.as_ref().map(|s| s.median));
    let half_poll_ms = poll.as_secs_f64() * 500.0;
    for (spec, row) in specs.iter().zip(rows.iter_mut()) {
        let p50 = row.jobq_p50_ms.as_ref().map(|s| s.median);
        let p99 = row.jobq_p99_ms.as_ref().map(|s| s.median);
        let (target, met) = match spec.id {
            "enqueue1" | "enqueue8" | "enqueue100" | "drain1" | "drain8" | "drain32" => {
                ("≥ 0.90 × raw".to_owned(), row.ratio.map(|r| r >= 0.9))
            }
            "best" => ("≥ 0.80 × raw best".to_owned(), row.ratio.map(|r| r >= 0.8)),
            "limit8" | "limit32" => ("≥ 0.90 × no limit".to_owned(), row.ratio.map(|r| r >= 0.9)),
            "rate" => ("≥ 0.90 × no rate".to_owned(), row.ratio.map(|r| r >= 0.9)),
            "keys1000" => ("≥ 0.50 × no keys".to_owned(), row.ratio.map(|r| r >= 0.5)),
            "fanout10k" | "diamonds" | "batch10k" | "batches" => (
                "release → claim p99 ≤ 50 ms".to_owned(),
                p99.map(|b| b <= 50.0),
            ),
            "metrics8" | "metrics32" => (
                "≥ 0.97 × metrics off".to_owned(),
                row.ratio.map(|r| r >= 0.97),
            ),
            "latency" => (
                "p50 ≤ 2 ms, p99 ≤ 10 ms".to_owned(),
                p50.zip(p99).map(|(a, b)| a <= 2.0 && b <= 10.0),
            ),
            "latency_xproc" => match jobq.backend() {
                jobq_runtime::Backend::Postgres => {
                    ("p50 ≤ 5 ms (NOTIFY)".to_owned(), p50.map(|a| a <= 5.0))
                }
                _ => (
                    format!("p50 ≤ {half_poll_ms:.0} ms (½ poll)"),
                    p50.map(|a| a <= half_poll_ms),
                ),
            },
            "backlog100k" | "history1m" => (
                "jobq ≥ 0.85 × its backlog-1,000 figure".to_owned(),
                row.jobq_jobs_per_s
                    .as_ref()
                    .zip(backlog_1k)
                    .map(|(s, base)| s.median >= 0.85 * base),
            ),
            _ => continue,
        };
        row.target = Some(target);
        row.target_met = met;
    }
}

impl Bench {
    async fn measure(&self, spec: &Spec, side: Side, n: u64) -> Res<Sample> {
        if !spec.history {
            self.db.reset().await?;
        }
        self.db.quiesce().await?;
        let sample = match side {
            Side::RawEnqueueOne { tasks } => self.raw_enqueue_one(tasks, n).await?,
            Side::RawEnqueueMany { batch } => self.raw_enqueue_many(batch, n).await?,
            Side::JobqEnqueueOne { tasks } => self.jobq_enqueue_one(tasks, n).await?,
            Side::JobqEnqueueMany { batch } => self.jobq_enqueue_many(batch, n).await?,
            Side::RawDrain { .. }
            | Side::JobqDrain { .. }
            | Side::JobqDrainMetrics { .. }
            | Side::JobqDrainLimited { .. }
            | Side::JobqDrainRated { .. }
            | Side::JobqDrainKeyed { .. }
            | Side::JobqDrainRemember { .. }
            | Side::JobqDrainFlow { .. } => {
                let mut total = Sample::default();
                let mut fan_ins: Vec<(i64, Vec<i64>)> = Vec::new();
                for _ in 0..spec.repeats {
                    match side {
                        Side::JobqDrainKeyed {
                            keys: Some(keys), ..
                        } => self.fill_keyed(n, keys).await?,
                        Side::JobqDrainRemember { mode, .. } => self.fill_remember(n, mode).await?,
                        Side::JobqDrainFlow { flow, .. } if flow != FLOW_NONE => {
                            fan_ins = self.fill_flow(n, flow).await?;
                        }
                        _ => self.db.fill(n).await?,
                    }
                    let mut one = self.drain(side, n).await?;
                    if !fan_ins.is_empty() {
                        let (p50, p99) = self.release_latency(&fan_ins).await?;
                        one.p50_ms = Some(p50);
                        one.p99_ms = Some(p99);
                    }
                    if std::env::var_os("BENCH_VERBOSE").is_some() {
                        crate::note(format_args!("  drain of {n}: {:.1} ms", one.secs * 1000.0));
                    }
                    total.jobs += one.jobs;
                    total.secs += one.secs;
                    total.p50_ms = one.p50_ms;
                    total.p99_ms = one.p99_ms;
                }
                total
            }
            Side::JobqLatency { other_process } => self.latency(other_process, n).await?,
        };
        Ok(sample)
    }

    async fn raw_enqueue_one(&self, tasks: usize, n: u64) -> Res<Sample> {
        let conns = self.db.conns(tasks).await?;
        let per = n / tasks as u64;
        let start = Instant::now();
        let mut set = JoinSet::new();
        for (k, mut conn) in conns.into_iter().enumerate() {
            set.spawn(async move {
                let base = k as u64 * per;
                for i in base..base + per {
                    conn.enqueue_one(&BenchNoop::nth(i, 0)).await?;
                }
                Ok::<_, sqlx::Error>(())
            });
        }
        for r in set.join_all().await {
            r?;
        }
        self.enqueued(per * tasks as u64, start).await
    }

    async fn jobq_enqueue_one(&self, tasks: usize, n: u64) -> Res<Sample> {
        let per = n / tasks as u64;
        let start = Instant::now();
        let mut set = JoinSet::new();
        for k in 0..tasks as u64 {
            let jobq = self.jobq.clone();
            set.spawn(async move {
                for i in k * per..(k + 1) * per {
                    jobq.enqueue(BenchNoop::nth(i, 0)).await?;
                }
                Ok::<_, jobq_runtime::Error>(())
            });
        }
        for r in set.join_all().await {
            r?;
        }
        self.enqueued(per * tasks as u64, start).await
    }

    async fn raw_enqueue_many(&self, batch: usize, n: u64) -> Res<Sample> {
        let mut conn = self.db.conns(1).await?.pop().expect("a connection");
        let start = Instant::now();
        for jobs in noop_batches(n, batch) {
            conn.enqueue_many(&jobs).await?;
        }
        drop(conn);
        self.enqueued(n, start).await
    }

    async fn jobq_enqueue_many(&self, batch: usize, n: u64) -> Res<Sample> {
        let start = Instant::now();
        for jobs in noop_batches(n, batch) {
            self.jobq.enqueue_many(jobs).await?;
        }
        self.enqueued(n, start).await
    }

    /// The sample of an enqueue workload, after checking every row arrived.
    async fn enqueued(&self, n: u64, start: Instant) -> Res<Sample> {
        let secs = start.elapsed().as_secs_f64();
        let pending = self.db.count("pending").await?;
        if pending != i64::try_from(n)? {
            return Err(format!("enqueued {n} jobs but {pending} rows are pending").into());
        }
        Ok(Sample {
            jobs: n,
            secs,
            ..Sample::default()
        })
    }

    async fn drain(&self, side: Side, n: u64) -> Res<Sample> {
        let probe = Probe::new(n);
        let secs = match side {
            Side::RawDrain { conns, batch } => {
                let conns = self.db.conns(conns).await?;
                let start = Instant::now();
                let mut set = JoinSet::new();
                for mut conn in conns {
                    let probe = probe.clone();
                    set.spawn(async move { conn.drain(batch, &probe).await });
                }
                let mut done = 0;
                for r in set.join_all().await {
                    done += r?;
                }
                let secs = start.elapsed().as_secs_f64();
                if done != n {
                    return Err(format!("raw drain settled {done} of {n}").into());
                }
                secs
            }
            Side::JobqDrain { concurrency } => {
                let cpu = crate::job::cpu_ns();
                let (start, started_us) = (Instant::now(), crate::job::now_us());
                let worker = self.start_worker(concurrency, &probe)?;
                probe.wait(DEADLINE).await?;
                let drained = start.elapsed();
                worker.shutdown(Duration::from_secs(60)).await?;
                if std::env::var_os("BENCH_PHASES").is_some() {
                    let first = probe.first_us().saturating_sub(started_us);
                    let (us, server) = crate::job::cpu_ns();
                    crate::note(format_args!(
                        "  phases: first run {:.1} ms, drained {:.1} ms, shutdown {:.1} ms; \
                         cpu per job: bench {:.2} µs, servers {:.2} µs",
                        first as f64 / 1000.0,
                        drained.as_secs_f64() * 1000.0,
                        (start.elapsed() - drained).as_secs_f64() * 1000.0,
                        (us - cpu.0) as f64 / 1000.0 / n as f64,
                        (server - cpu.1) as f64 / 1000.0 / n as f64,
                    ));
                }
                start.elapsed().as_secs_f64()
            }
            Side::JobqDrainMetrics {
                concurrency,
                metrics,
            } => {
                // The worker's handles bind to the switch's position now.
                crate::metrics::set(metrics);
                let start = Instant::now();
                let worker = self.start_worker(concurrency, &probe);
                crate::metrics::set(false);
                let worker = worker?;
                probe.wait(DEADLINE).await?;
                worker.shutdown(Duration::from_secs(60)).await?;
                let secs = start.elapsed().as_secs_f64();
                if metrics && !crate::metrics::render().contains("jobq_attempts_total") {
                    return Err("the recorder saw no attempt: metrics were not on".into());
                }
                secs
            }
            Side::JobqDrainLimited { concurrency, limit } => {
                self.jobq.set_queue_limit(QUEUE, limit).await?;
                let start = Instant::now();
                let worker = self.start_worker(concurrency, &probe)?;
                probe.wait(DEADLINE).await?;
                worker.shutdown(Duration::from_secs(60)).await?;
                let secs = start.elapsed().as_secs_f64();
                self.jobq.set_queue_limit(QUEUE, None).await?;
                secs
            }
            Side::JobqDrainKeyed { concurrency, .. }
            | Side::JobqDrainRemember { concurrency, .. }
            | Side::JobqDrainFlow { concurrency, .. } => {
                let start = Instant::now();
                let worker = self.start_worker(concurrency, &probe)?;
                probe.wait(DEADLINE).await?;
                worker.shutdown(Duration::from_secs(60)).await?;
                start.elapsed().as_secs_f64()
            }
            Side::JobqDrainRated { concurrency, rated } => {
                let rate = Rate::per(1_000_000, Duration::from_secs(1)).with_burst(10_000);
                self.jobq
                    .set_queue_rate(QUEUE, rated.then_some(rate))
                    .await?;
                let start = Instant::now();
                let worker = self.start_worker(concurrency, &probe)?;
                probe.wait(DEADLINE).await?;
                worker.shutdown(Duration::from_secs(60)).await?;
                let secs = start.elapsed().as_secs_f64();
                self.jobq.set_queue_rate(QUEUE, None).await?;
                secs
            }
            _ => unreachable!("not a drain"),
        };
        self.check_drained(&probe, n).await?;
        Ok(Sample {
            jobs: n,
            secs,
            ..Sample::default()
        })
    }

    /// `n` `bench_remember` jobs of `mode` on the bench queue, enqueued
    /// through jobq in batches.
    async fn fill_remember(&self, n: u64, mode: u8) -> Res<()> {
        let mut i = 0;
        while i < n {
            let batch: Vec<_> = (i..n.min(i + 1_000))
                .map(|k| crate::job::BenchRemember::new(mode, k))
                .collect();
            i += batch.len() as u64;
            self.jobq.enqueue_many(batch).await?;
        }
        self.db.analyze().await?;
        Ok(())
    }

    /// `n` jobs on the bench queue, job `i` under concurrency key `i % keys`
    /// at limit 1, enqueued through jobq in batches (a key's first job
    /// `pending`, the rest `blocked`): what the keys row drains.
    async fn fill_keyed(&self, n: u64, keys: u64) -> Res<()> {
        let mut i = 0;
        while i < n {
            let batch: Vec<_> = (i..n.min(i + 1_000))
                .map(|k| {
                    let key = format!("bench:{}", k % keys);
                    (BenchNoop::nth(k, 0), Enqueue::new().concurrency_key(key, 1))
                })
                .collect();
            i += batch.len() as u64;
            self.jobq.enqueue_many_with(batch).await?;
        }
        self.db.analyze().await?;
        Ok(())
    }

    /// `n` jobs on the bench queue as workflows of `flow`'s shape: one
    /// root, `n - 2` after it and one after all of them ([`FLOW_FAN`]), or
    /// `n / 4` diamonds ([`FLOW_DIAMONDS`]). Each fan-in's id with the ids
    /// it waits on.
    async fn fill_flow(&self, n: u64, flow: u8) -> Res<Vec<(i64, Vec<i64>)>> {
        let on = || Enqueue::new().queue(QUEUE);
        let mut fan_ins = Vec::new();
        if flow == FLOW_FAN {
            let mut workflow = Workflow::new("bench-fan");
            workflow.add_with("root", BenchNoop::nth(0, 0), on());
            let middle: Vec<String> = (1..n - 1).map(|k| format!("m{k}")).collect();
            for (k, name) in middle.iter().enumerate() {
                workflow
                    .add_with(name.as_str(), BenchNoop::nth(k as u64 + 1, 0), on())
                    .after(["root"]);
            }
            workflow
                .add_with("join", BenchNoop::nth(n - 1, 0), on())
                .after(middle.iter().map(String::as_str));
            let stored = self.jobq.enqueue_workflow(workflow).await?;
            let deps = middle.iter().map(|m| stored.jobs[m]).collect();
            fan_ins.push((stored.jobs["join"], deps));
        } else if flow == FLOW_BATCH || flow == FLOW_BATCHES {
            // One batch of `n - 1` jobs, or `n / 4` of 3; a finish callback each.
            let (batches, size) = if flow == FLOW_BATCH {
                (1, n - 1)
            } else {
                (n / 4, 3)
            };
            let run = rand::random::<u32>();
            // Stored open, its jobs added 10,000 a call, then closed.
            const CHUNK: u64 = 10_000;
            for b in 0..batches {
                let id = format!("bench-{run:08x}-{b}");
                let k = b * (size + 1);
                let mut batch = Batch::new(&id);
                batch.keep_open();
                batch.on_with(BatchCallback::Finish, BenchNoop::nth(k + size, 0), on());
                let callback = self.jobq.enqueue_batch(batch).await?.callbacks[0].1;
                let mut members = Vec::with_capacity(size as usize);
                for from in (0..size).step_by(CHUNK as usize) {
                    let mut more = Batch::new(&id);
                    for j in from..(from + CHUNK).min(size) {
                        more.add_with(BenchNoop::nth(k + j, 0), on());
                    }
                    members.extend(self.jobq.add_to_batch(more).await?.jobs);
                }
                self.jobq.close_batch(&id).await?;
                fan_ins.push((callback, members));
            }
        } else {
            for d in 0..n / 4 {
                let mut workflow = Workflow::new(format!("bench-diamond-{d}"));
                let k = d * 4;
                workflow.add_with("a", BenchNoop::nth(k, 0), on());
                workflow
                    .add_with("b", BenchNoop::nth(k + 1, 0), on())
                    .after(["a"]);
                workflow
                    .add_with("c", BenchNoop::nth(k + 2, 0), on())
                    .after(["a"]);
                workflow
                    .add_with("d", BenchNoop::nth(k + 3, 0), on())
                    .after(["b", "c"]);
                let stored = self.jobq.enqueue_workflow(workflow).await?;
                fan_ins.push((stored.jobs["d"], vec![stored.jobs["b"], stored.jobs["c"]]));
            }
        }
        self.db.analyze().await?;
        Ok(fan_ins)
    }

    /// The time from each fan-in's last dependency's settle (`finished_at`)
    /// to its claim (`claimed_at`), by the database's clock: its p50 and p99 (ms).
    async fn release_latency(&self, fan_ins: &[(i64, Vec<i64>)]) -> Res<(f64, f64)> {
        let mut times = std::collections::HashMap::new();
        let filter = jobq_runtime::JobFilter::new().queue(QUEUE);
        let mut page = jobq_runtime::Page::first(1_000);
        loop {
            let got = self.jobq.list(&filter, page).await?;
            for job in &got.jobs {
                times.insert(job.id, (job.claimed_at, job.finished_at));
            }
            match got.next {
                Some(next) => page = page.after(Some(next)),
                None => break,
            }
        }
        let mut waits: Vec<f64> = fan_ins
            .iter()
            .filter_map(|(join, deps)| {
                let claimed = times.get(join)?.0?;
                let last = deps.iter().filter_map(|d| times.get(d)?.1).max()?;
                Some((claimed - last).num_microseconds()? as f64 / 1000.0)
            })
            .collect();
        if waits.len() != fan_ins.len() {
            return Err(format!(
                "{} of {} fan-ins have no times",
                fan_ins.len() - waits.len(),
                fan_ins.len()
            )
            .into());
        }
        waits.sort_by(f64::total_cmp);
        let at = |q: f64| waits[((waits.len() - 1) as f64 * q).round() as usize];
        Ok((at(0.5), at(0.99)))
    }

    /// A worker of `concurrency` slots on the bench queue, its runs counted by `probe`.
    fn start_worker(&self, concurrency: usize, probe: &Probe) -> Res<WorkerHandle> {
        let worker = Worker::builder(self.jobq.clone())
            .queue(QUEUE, concurrency)
            .state(probe.clone())
            .state(self.jobq.clone())
            .poll_interval(self.poll)
            .build()?;
        Ok(worker.start())
    }

    /// Every job ran exactly once and nothing is left pending or processing.
    async fn check_drained(&self, probe: &Probe, n: u64) -> Res<()> {
        let (pending, processing) = (
            self.db.count("pending").await?,
            self.db.count("processing").await?,
        );
        if probe.count() != n || pending != 0 || processing != 0 {
            return Err(format!(
                "after draining {n} jobs: {} runs, {pending} pending, {processing} processing",
                probe.count()
            )
            .into());
        }
        Ok(())
    }

    async fn latency(&self, other_process: bool, n: u64) -> Res<Sample> {
        let probe = Probe::new(n);
        let worker = self.start_worker(DEFAULT_CONCURRENCY, &probe)?;
        // Let the worker's first (empty) claim and listener start happen.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = Instant::now();
        if other_process {
            let status = tokio::process::Command::new(std::env::current_exe()?)
                .args(["enqueuer", "--url", &self.url])
                .args(["--rate", &RATE.to_string(), "--count", &n.to_string()])
                .status()
                .await?;
            if !status.success() {
                return Err(format!("the enqueuer process failed: {status}").into());
            }
        } else {
            let begin = tokio::time::Instant::now();
            let interval = Duration::from_secs_f64(1.0 / RATE);
            let mut enqueue_us = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
            for i in 0..n {
                tokio::time::sleep_until(begin + interval.mul_f64(i as f64)).await;
                let sent = now_us();
                self.jobq.enqueue(BenchNoop::nth(i, sent)).await?;
                enqueue_us.push(now_us().saturating_sub(sent));
            }
            if std::env::var_os("BENCH_VERBOSE").is_some() {
                enqueue_us.sort_unstable();
                let at = |p: f64| {
                    enqueue_us[((enqueue_us.len() as f64 * p) as usize).min(enqueue_us.len() - 1)]
                };
                crate::note(format_args!(
                    "  enqueue call: p50 {:.2} ms  p99 {:.2} ms",
                    at(0.5) as f64 / 1000.0,
                    at(0.99) as f64 / 1000.0
                ));
            }
        }
        probe.wait(DEADLINE).await?;
        let secs = start.elapsed().as_secs_f64();
        worker.shutdown(Duration::from_secs(60)).await?;
        self.check_drained(&probe, n).await?;
        let latencies = probe.latencies();
        let pct = |p: f64| {
            let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
            latencies[i] as f64 / 1000.0
        };
        Ok(Sample {
            jobs: n,
            secs,
            p50_ms: Some(pct(0.50)),
            p99_ms: Some(pct(0.99)),
        })
    }
}

/// Creates the database named in a MySQL or PostgreSQL URL if it is missing,
/// through the server's default database.
pub(crate) async fn ensure_database(url: &str) -> Res<()> {
    if url.starts_with("sqlite") || Db::connect(url, 1).await.is_ok() {
        return Ok(());
    }
    let (base, name) = url
        .rsplit_once('/')
        .ok_or_else(|| format!("no database name in {url}"))?;
    let name = name.split('?').next().unwrap_or(name);
    if url.starts_with("postgres") {
        let admin = Db::connect(&format!("{base}/postgres"), 1).await?;
        admin
            .execute(&format!("CREATE DATABASE \"{name}\""))
            .await?;
        admin.close().await;
    } else {
        let admin = Db::connect(&format!("{base}/"), 1).await?;
        admin
            .execute(&format!("CREATE DATABASE IF NOT EXISTS `{name}`"))
            .await?;
        admin.close().await;
    }
    Ok(())
}
