use metrics::{counter, histogram};
use std::time::Instant;
fn per_job(n: u64) -> f64 {
    // what a worker does per job with handles taken once (batch of 1 claim per job = worst case)
    let claimed = counter!("jobq_jobs_claimed_total", "queue" => "q");
    let claim = histogram!("jobq_claim_seconds", "queue" => "q");
    let wait = histogram!("jobq_queue_wait_seconds", "queue" => "q");
    let run = histogram!("jobq_run_seconds", "queue" => "q", "job" => "j");
    let ok = counter!("jobq_attempts_total", "queue" => "q", "job" => "j", "outcome" => "succeeded");
    let settle = histogram!("jobq_settle_seconds", "settle" => "complete");
    let t = Instant::now();
    for i in 0..n {
        let a = Instant::now();
        claimed.increment(1);
        claim.record(a.elapsed().as_secs_f64());
        wait.record((i % 100) as f64 * 1e-3);
        let b = Instant::now();
        run.record(b.elapsed().as_secs_f64());
        ok.increment(1);
        settle.record(b.elapsed().as_secs_f64());
    }
    t.elapsed().as_nanos() as f64 / n as f64
}
fn main() {
    let n = 2_000_000;
    let off = per_job(n);
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder().unwrap();
    let on = per_job(n);
    let _ = handle.render().len();
    let on2 = per_job(n);
    println!("per job: no recorder {off:.0} ns, prometheus {on:.0} ns ({on2:.0} ns after a render)");
}
