use std::rc::Rc;

use jobq_runtime::job;

async fn flush() {}

#[job]
async fn holds_rc(user_id: u64) {
    let counter = Rc::new(user_id);
    flush().await;
    let _ = counter;
}

fn main() {}
