use jobq_runtime::job;

#[job(queue = "mail", priority = 1, queue = "sms")]
async fn send_welcome(user_id: u64) {
    let _ = user_id;
}

fn main() {}
