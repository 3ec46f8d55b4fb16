use jobq_runtime::job;

#[job(max_attempts = 0)]
async fn never(user_id: u64) {
    let _ = user_id;
}

#[job(max_attempts = -1, priority = 40000)]
async fn negative(user_id: u64) {
    let _ = user_id;
}

fn main() {}
