use jobq_runtime::job;

#[job(queue = "mail", max_attempt = 3, colour = "blue")]
async fn send_welcome(user_id: u64) {
    let _ = user_id;
}

fn main() {}
