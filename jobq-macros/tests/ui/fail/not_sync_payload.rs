use std::cell::Cell;

use jobq_runtime::job;

#[job]
async fn tally(count: Cell<u32>) {
    let _ = count;
}

fn main() {}
