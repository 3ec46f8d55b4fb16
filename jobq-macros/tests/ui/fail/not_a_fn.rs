use jobq_runtime::job;

#[job]
struct SendWelcome {
    user_id: u64,
}

fn main() {
    let _ = SendWelcome { user_id: 1 };
}
