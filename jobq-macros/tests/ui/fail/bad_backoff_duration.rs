use jobq_runtime::job;

#[job(backoff = exponential("1s", "forever"))]
async fn flaky(user_id: u64) {
    let _ = user_id;
}

#[job(backoff = linear("10m", "10s"))]
async fn capped_below_step(user_id: u64) {
    let _ = user_id;
}

#[job(retry = ["1s", "30x"])]
async fn listed(user_id: u64) {
    let _ = user_id;
}

fn main() {}
