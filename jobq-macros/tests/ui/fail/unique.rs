use jobq_runtime::job;

/// Unique without a key to be unique by.
#[job(unique = "active")]
async fn no_key(user_id: u64) {
    let _ = user_id;
}

/// An unknown set of states, and a zero period.
#[job(key = "digest:{user_id}", unique = "running", unique_for = "0s")]
async fn bad_values(user_id: u64) {
    let _ = user_id;
}

fn main() {}
