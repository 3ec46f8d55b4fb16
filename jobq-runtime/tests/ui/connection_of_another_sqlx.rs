//! `cargo add sqlx` picked another version than jobq's: its `MySqlConnection`
//! is another type, and the error says which sqlx jobq takes.

use jobq_runtime::{Jobq, job};

#[job]
async fn hello(n: u64) {
    let _ = n;
}

async fn sign_up(jobq: &Jobq, conn: &mut sqlx_other::MySqlConnection) {
    jobq.enqueue_in(conn, Hello::new(1)).await.unwrap();
}

fn main() {
    let _ = sign_up;
}
