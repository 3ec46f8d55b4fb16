use jobq_runtime::job;

#[job]
async fn count(user_id: u64) -> u32 {
    let _ = user_id;
    1
}

fn main() {}
