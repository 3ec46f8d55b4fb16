use jobq_runtime::job;

#[job(backoff = "exponential")]
async fn as_string(user_id: u64) {
    let _ = user_id;
}

#[job(backoff = quadratic("1s"))]
async fn unknown_form(user_id: u64) {
    let _ = user_id;
}

#[job(backoff = fixed("1s", "2s"))]
async fn too_many_arguments(user_id: u64) {
    let _ = user_id;
}

fn main() {}
