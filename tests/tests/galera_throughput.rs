//! Drain throughput on a 3-node Galera cluster with the same workers placed
//! on 1, 2 or 3 nodes, and how often a claim met another node's claim at
//! certification. Not a test (it asserts only that every drain finished):
//! run it by hand, on a quiet machine, with
//!
//! ```text
//! cargo test --release -p jobq-tests --test galera_throughput -- --ignored --nocapture
//! ```
//!
//! `JOBQ_TPUT_JOBS` (default 6,000), `JOBQ_TPUT_WORKERS` (6 handles, each
//! its own pool, as separate processes would have), `JOBQ_TPUT_CONCURRENCY`
//! (8), `JOBQ_TPUT_RUNS` (3 per placement, interleaved). Each run enqueues
//! the backlog through node 0, then starts the workers (worker `w` on node
//! `w % nodes`) and times them until every job is done. Per claim: jobq's
//! own retries of the claim (`jobq_internal_retries_total{statement="claim"}`)
//! and the cluster's certification failures plus brute-force aborts
//! (`wsrep_local_cert_failures` + `wsrep_local_bf_aborts`, summed over the
//! nodes), both deltas over the drain.

use std::time::{Duration, Instant};

use jobq_runtime::{JobContext, Jobq, Worker, job, metrics as names};
use jobq_tests::{galera, metrics, on, unique_queue};

#[job(name = "galera_tput_noop")]
async fn noop(ctx: &JobContext, n: u64) {
    let _ = (ctx, n);
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One drain's figures.
#[derive(Debug, Clone, Copy)]
struct Drain {
    rate: f64,
    claims: u64,
    claim_retries: u64,
    /// jobq's retries of its other statements in the drain (settles,
    /// heartbeats, the reaper): how many of the cluster's aborts are not
    /// claims.
    other_retries: u64,
    /// Certification failures and brute-force aborts.
    cert: u64,
    bf: u64,
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn drain(
    cluster: &galera::Cluster,
    database: &str,
    nodes: usize,
    jobs: u64,
    workers: usize,
    concurrency: usize,
) -> Drain {
    let head = Jobq::connect(&cluster.url_of(0, database))
        .await
        .expect("connect");
    let queue = unique_queue(&format!("tput{nodes}"));
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1_000) {
        head.enqueue_many_with(chunk.iter().map(|&n| (Noop::new(n), on(&queue))))
            .await
            .expect("enqueue");
    }
    let mut handles = Vec::new();
    for w in 0..workers {
        let url = cluster.url_of(w % nodes, database);
        let jobq = Jobq::connect_with(&url, concurrency as u32 + 2)
            .await
            .expect("connect a worker");
        // Every node has the backlog before the clock starts.
        let seen = jobq.counts(&queue).await.expect("counts").pending;
        assert_eq!(seen, jobs, "node {} sees the backlog", w % nodes);
        handles.push(jobq);
    }
    let claim = [("statement", "claim")];
    let retries_before = metrics::counter(names::INTERNAL_RETRIES, &claim);
    let others_before = other_retries();
    let cert_before = cluster.total("wsrep_local_cert_failures");
    let bf_before = cluster.total("wsrep_local_bf_aborts");
    let start = Instant::now();
    let running: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(w, jobq)| {
            Worker::builder(jobq.clone())
                .queue_unchecked(&queue, concurrency)
                .worker_id(format!("node{}-w{w}", w % nodes))
                .poll_interval(Duration::from_millis(50))
                .build()
                .expect("build")
                .start()
        })
        .collect();
    loop {
        if head.counts(&queue).await.expect("counts").done == jobs {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "drain within 5 min"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let claim_retries = metrics::counter(names::INTERNAL_RETRIES, &claim) - retries_before;
    let other_retries = other_retries() - others_before;
    let cert = cluster.total("wsrep_local_cert_failures") - cert_before;
    let bf = cluster.total("wsrep_local_bf_aborts") - bf_before;
    for worker in running {
        worker
            .shutdown(Duration::from_secs(10))
            .await
            .expect("shutdown");
    }
    let claims =
        metrics::histogram(names::CLAIM_SECONDS, &[("queue", queue.as_str())]).len() as u64;
    Drain {
        rate: jobs as f64 / secs,
        claims,
        claim_retries,
        other_retries,
        cert,
        bf,
    }
}

/// jobq's retries of every statement a drain runs but the claim.
fn other_retries() -> u64 {
    ["complete", "transition", "heartbeat", "reap"]
        .iter()
        .map(|&statement| metrics::counter(names::INTERNAL_RETRIES, &[("statement", statement)]))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run by hand on a quiet machine (see the file's docs)"]
async fn galera_drain_throughput_by_nodes() {
    if !galera::should_run("galera_throughput") {
        return;
    }
    metrics::install();
    let cluster = galera::shared();
    let database = "jobq_tput";
    cluster
        .sql(0, &format!("CREATE DATABASE IF NOT EXISTS {database}"))
        .expect("create the database");
    Jobq::connect(&cluster.url_of(0, database))
        .await
        .expect("connect")
        .migrate()
        .await
        .expect("migrate");
    let jobs = env("JOBQ_TPUT_JOBS", 6_000);
    let workers = env("JOBQ_TPUT_WORKERS", 6) as usize;
    let concurrency = env("JOBQ_TPUT_CONCURRENCY", 8) as usize;
    let runs = env("JOBQ_TPUT_RUNS", 3) as usize;
    let placements: Vec<usize> = (1..=cluster.len().min(3)).collect();
    let mut results: Vec<Vec<Drain>> = vec![Vec::new(); placements.len()];
    println!(
        "galera throughput: {jobs} jobs, {workers} workers × concurrency {concurrency}, {runs} runs per placement; load before: {}",
        load()
    );
    for run in 0..runs {
        for (p, &nodes) in placements.iter().enumerate() {
            let d = drain(cluster, database, nodes, jobs, workers, concurrency).await;
            println!(
                "  run {run} nodes {nodes}: {:.0} jobs/s, {} claims, {} claim retries, {} other retries, {} cert failures + {} BF aborts (load {})",
                d.rate,
                d.claims,
                d.claim_retries,
                d.other_retries,
                d.cert,
                d.bf,
                load()
            );
            results[p].push(d);
        }
    }
    println!(
        "| workers on | jobs/s (median, min–max) | claims | claim retries / claim | other statements' retries / claim | cert failures / claim | BF aborts / claim |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (p, &nodes) in placements.iter().enumerate() {
        let mut rates: Vec<f64> = results[p].iter().map(|d| d.rate).collect();
        rates.sort_by(f64::total_cmp);
        let claims: u64 = results[p].iter().map(|d| d.claims).sum();
        let retries: u64 = results[p].iter().map(|d| d.claim_retries).sum();
        let others: u64 = results[p].iter().map(|d| d.other_retries).sum();
        let cert: u64 = results[p].iter().map(|d| d.cert).sum();
        let bf: u64 = results[p].iter().map(|d| d.bf).sum();
        let per_claim = |n: u64| n as f64 / claims.max(1) as f64;
        println!(
            "| {nodes} node{} | {:.0} ({:.0}–{:.0}) | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            if nodes == 1 { "" } else { "s" },
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1],
            claims / runs as u64,
            per_claim(retries),
            per_claim(others),
            per_claim(cert),
            per_claim(bf),
        );
    }
    println!("load after: {}", load());
}
