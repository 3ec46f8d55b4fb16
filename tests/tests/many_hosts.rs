//! Many hosts, one database: worker processes on four hosts of a test
//! network (`jobq_tests::net`: network namespaces, 5 ms ± 2 ms round trips
//! to the database through each host's forwarder) drain a backlog; once 30 %
//! is done one host is cut off from the database for three leases while its
//! handlers keep running, then healed. Its jobs are reaped and run again on
//! the other hosts, its late settles are fenced out, and every chaos
//! invariant holds (see `jobq_tests::chaos`): every job done, one side
//! effect each, every repeated execution explained by the partition, each
//! row settled by its last claim.
//!
//! `JOBQ_CHAOS_LONG=1` runs the long form (20,000 jobs, a 15 s cut).
//!
//! The ignored test `throughput_table` measures drains of no-op jobs by
//! 4 hosts × 2 worker processes on loopback and through the network at 0 ms
//! and 5 ms ± 2 ms: `scripts/many-hosts.sh` runs it (release build).
//!
//! Outside CI the tests skip with a message where namespaces cannot be made;
//! under `CI=true` they fail.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobq_runtime::{Enqueue, Job, Jobq};
use jobq_tests::chaos::{self, Config, Placement};
use jobq_tests::net::{self, Network};
use jobq_tests::sql::Db;
use jobq_tests::{TestDb, unique_queue};

const CHAOS_WORKER: &str = env!("CARGO_BIN_EXE_jobq-chaos-worker");
const DRAIN_WORKER: &str = env!("CARGO_BIN_EXE_jobq-drain-worker");
const HOSTS: usize = 4;
const RTT: Duration = Duration::from_millis(5);
const JITTER: Duration = Duration::from_millis(2);

/// Every host of `network` with `url` as it reaches it.
fn placement(network: &Network, url: &str) -> Placement {
    Placement {
        hosts: network
            .hosts()
            .iter()
            .map(|host| {
                let via = host.url_via(url).expect("a forwarder to the database");
                (host.clone(), via)
            })
            .collect(),
    }
}

async fn a_host_cut_off_longer_than_the_lease_has_its_jobs_rerun_elsewhere_and_its_late_settles_fenced_out(
    db: TestDb,
) {
    if !net::usable("many hosts") {
        return;
    }
    let network = Network::create("many", HOSTS).expect("network");
    for host in network.hosts() {
        host.set_delay(RTT, JITTER);
    }
    let config = Config::many_hosts("many-hosts", placement(&network, db.url()));
    let report = chaos::run(&db, CHAOS_WORKER, config).await;
    // The partition did what it is for: the cut host's jobs ran again
    // elsewhere, and its stale attempts were stopped or fenced out.
    assert_eq!(report.partitions.len(), 1, "{report}");
    assert!(
        report.re_executions_after_partition > 0,
        "no job of the cut host ran again: {report}"
    );
    assert!(
        report.max_partition_wait > Duration::ZERO,
        "no job of the cut host was re-run on another host: {report}"
    );
    assert!(
        report.fenced_out + report.leases_lost > 0,
        "the cut host settled or renewed nothing late: {report}"
    );
}

mod mysql {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_host_cut_off_longer_than_the_lease_has_its_jobs_rerun_elsewhere_and_its_late_settles_fenced_out()
     {
        if let Some(db) = jobq_tests::TestDb::mysql() {
            super::a_host_cut_off_longer_than_the_lease_has_its_jobs_rerun_elsewhere_and_its_late_settles_fenced_out(db).await;
        }
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_host_cut_off_longer_than_the_lease_has_its_jobs_rerun_elsewhere_and_its_late_settles_fenced_out()
     {
        if let Some(db) = jobq_tests::TestDb::postgres() {
            super::a_host_cut_off_longer_than_the_lease_has_its_jobs_rerun_elsewhere_and_its_late_settles_fenced_out(db).await;
        }
    }
}

// ---------------------------------------------------------------------------
// Throughput: no-op jobs, loopback vs the network.

/// The drain worker's no-op job (`jobq-drain-worker` registers its handler).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct DrainNoop {
    n: u64,
}

impl Job for DrainNoop {
    const NAME: &'static str = "jobq_drain_noop";
}

/// Where the drain's workers run.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// In the root namespace, on the URL as given (loopback).
    Loopback,
    /// On the hosts of a network, through their forwarders, with this round-trip delay.
    Network(Duration, Duration),
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Loopback => write!(f, "loopback"),
            Path::Network(rtt, jitter) if rtt.is_zero() => {
                let _ = jitter;
                write!(f, "netns, +0 ms")
            }
            Path::Network(rtt, jitter) => write!(f, "netns, +{rtt:?} ± {jitter:?}"),
        }
    }
}

/// What one drain measured.
#[derive(Debug, Default)]
struct Drain {
    jobs_per_sec: f64,
    claims: u64,
    claimed: u64,
    claim_mean_us: f64,
    claim_p50_us: f64,
    claim_p99_us: f64,
    settle_mean_us: f64,
    seconds: f64,
}

/// A worker's `stats …` line, as numbers by key.
fn stats(line: &str) -> std::collections::HashMap<String, f64> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

async fn enqueue_noops(jobq: &Jobq, queue: &str, jobs: u64) {
    let numbers: Vec<u64> = (0..jobs).collect();
    for chunk in numbers.chunks(1000) {
        let batch = chunk
            .iter()
            .map(|&n| (DrainNoop { n }, Enqueue::new().queue(queue)));
        jobq.enqueue_many_with(batch).await.expect("enqueue");
    }
}

/// Microseconds from the first job finished to the last, and how many.
async fn finished_span(jobq: &Jobq, queue: &str) -> (i64, i64) {
    let sql = Db::of(jobq);
    let query = sql.pick(
        "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, MIN(finished_at), MAX(finished_at)) AS SIGNED), \
         CAST(COUNT(*) AS SIGNED) FROM jobq_jobs WHERE queue = ? AND status = 'done'",
        "SELECT (extract(epoch FROM MAX(finished_at) - MIN(finished_at)) * 1000000)::bigint, \
         COUNT(*) FROM jobq_jobs WHERE queue = ? AND status = 'done'",
        "SELECT 0, COUNT(*) FROM jobq_jobs WHERE queue = ?",
    );
    let rows: Vec<(i64, i64)> = sql.fetch_all(query, &[queue.into()]).await.expect("span");
    rows[0]
}

/// `jobs` no-op jobs drained by 2 worker processes on each of 4 hosts (on
/// `path`), `concurrency` slots each.
async fn drain(db: &TestDb, path: Path, concurrency: usize, jobs: u64) -> Drain {
    let jobq = db.jobq().await;
    let queue = unique_queue("many-hosts-drain");
    enqueue_noops(&jobq, &queue, jobs).await;
    let network = match path {
        Path::Loopback => None,
        Path::Network(rtt, jitter) => {
            let network = Network::create("drain", HOSTS).expect("network");
            for host in network.hosts() {
                host.set_delay(rtt, jitter);
            }
            Some(network)
        }
    };
    let mut workers: Vec<Child> = Vec::new();
    for i in 0..2 * HOSTS {
        let (mut command, url) = match &network {
            None => (Command::new(DRAIN_WORKER), db.url().to_owned()),
            Some(network) => {
                let host = network.host(i % HOSTS);
                (
                    host.command(DRAIN_WORKER),
                    host.url_via(db.url()).expect("forwarder"),
                )
            }
        };
        let child = command
            .env("JOBQ_DRAIN_URL", url)
            .env("JOBQ_DRAIN_QUEUE", &queue)
            .env("JOBQ_DRAIN_CONCURRENCY", concurrency.to_string())
            .env("JOBQ_DRAIN_POOL", "6")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a drain worker");
        workers.push(child);
    }
    let start = Instant::now();
    let deadline = Duration::from_secs(600);
    loop {
        let done = jobq.counts(&queue).await.expect("counts").done;
        if done == jobs {
            break;
        }
        assert!(
            start.elapsed() < deadline,
            "{done} of {jobs} done after {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = start.elapsed().as_secs_f64();
    let mut out = Drain {
        seconds,
        ..Drain::default()
    };
    let (mut claim_sum, mut p50s, mut p99s, mut settle_sum, mut settles) =
        (0.0, Vec::new(), Vec::new(), 0.0, 0.0);
    for mut worker in workers {
        drop(worker.stdin.take());
        let stdout = worker.stdout.take().expect("stdout");
        let line = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.starts_with("stats "))
            .expect("the worker's stats");
        worker.wait().expect("the worker stopped");
        let s = stats(&line);
        let claims = s["claims"];
        out.claims += claims as u64;
        out.claimed += s["claimed"] as u64;
        claim_sum += s["claim_mean_us"] * claims;
        p50s.push(s["claim_p50_us"]);
        p99s.push(s["claim_p99_us"]);
        settle_sum += s["settle_mean_us"] * s["settles"];
        settles += s["settles"];
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    out.claim_mean_us = claim_sum / out.claims.max(1) as f64;
    out.claim_p50_us = median(p50s);
    out.claim_p99_us = median(p99s);
    out.settle_mean_us = settle_sum / settles.max(1.0);
    let (span_us, done) = finished_span(&jobq, &queue).await;
    out.jobs_per_sec = done as f64 / (span_us as f64 / 1e6).max(1e-3);
    drop(network);
    out
}

async fn throughput_table_on(db: TestDb) {
    if !net::usable("many hosts throughput") {
        return;
    }
    let jobs = std::env::var("JOBQ_MANY_HOSTS_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let paths = [
        Path::Loopback,
        Path::Network(Duration::ZERO, Duration::ZERO),
        Path::Network(RTT, JITTER),
    ];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\n{} jobs, 4 hosts × 2 worker processes, no-op handler, {} (load before: {})",
        jobs,
        db.backend(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| path | slots/process | jobs/s | claims/s/process | jobs/claim | claim mean / p50 / p99 (ms) | settle mean (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for concurrency in [8, 32] {
        for path in paths {
            let d = drain(&db, path, concurrency, jobs).await;
            println!(
                "| {path} | {concurrency} | {:.0} | {:.0} | {:.1} | {:.2} / {:.2} / {:.2} | {:.2} |",
                d.jobs_per_sec,
                d.claims as f64 / d.seconds / (2 * HOSTS) as f64,
                d.claimed as f64 / d.claims.max(1) as f64,
                d.claim_mean_us / 1000.0,
                d.claim_p50_us / 1000.0,
                d.claim_p99_us / 1000.0,
                d.settle_mean_us / 1000.0,
            );
        }
    }
}

/// The throughput table of `docs/scaling-many-hosts.md`, on MariaDB and
/// PostgreSQL: `scripts/many-hosts.sh` (or `cargo test --release -p
/// jobq-tests --test many_hosts -- --ignored --nocapture --test-threads=1`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement (minutes): scripts/many-hosts.sh"]
async fn throughput_table() {
    if let Some(db) = TestDb::mysql() {
        throughput_table_on(db).await;
    }
    if let Some(db) = TestDb::postgres() {
        throughput_table_on(db).await;
    }
}
