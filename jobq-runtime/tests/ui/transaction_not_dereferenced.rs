//! A transaction passed as `&mut tx` instead of `&mut *tx`.

use jobq_runtime::sqlx::{MySql, Transaction};
use jobq_runtime::{Jobq, job};

#[job]
async fn hello(n: u64) {
    let _ = n;
}

async fn sign_up(jobq: &Jobq, mut tx: Transaction<'_, MySql>) {
    jobq.enqueue_in(&mut tx, Hello::new(1)).await.unwrap();
    tx.commit().await.unwrap();
}

fn main() {
    let _ = sign_up;
}
