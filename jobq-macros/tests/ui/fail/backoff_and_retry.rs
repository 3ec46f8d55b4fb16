use jobq_runtime::job;

#[job(backoff = fixed("5s"), retry = ["1s", "1m"])]
async fn flaky(user_id: u64) {
    let _ = user_id;
}

fn main() {}
