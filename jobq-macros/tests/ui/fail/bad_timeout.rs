use jobq_runtime::job;

#[job(timeout = "30 parsecs")]
async fn slow(user_id: u64) {
    let _ = user_id;
}

#[job(timeout = 30)]
async fn untyped(user_id: u64) {
    let _ = user_id;
}

#[job(timeout = "0s")]
async fn instant(user_id: u64) {
    let _ = user_id;
}

fn main() {}
