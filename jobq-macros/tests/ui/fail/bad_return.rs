use jobq_runtime::job;

// A job's output must serialize: `Instant` does not.
#[job]
async fn count(user_id: u64) -> std::time::Instant {
    let _ = user_id;
    std::time::Instant::now()
}

fn main() {}
