use std::time::Duration;

use jobq_runtime::{Job, Unique, job};

/// One digest per user waiting or running, and none again within the hour.
#[job(key = "digest:{user_id}", unique = "active", unique_for = "1h")]
async fn digest(user_id: u64) {
    let _ = user_id;
}

/// One report per day per account, whatever became of the last one.
#[job(key = "report:{account}", unique_for = "1d")]
async fn report(account: String) {
    let _ = account;
}

/// Debounced until a worker picks it up.
#[job(key = "reindex:{index}", unique = "pending")]
async fn reindex(index: String) {
    let _ = index;
}

fn main() {
    assert_eq!(
        Digest::UNIQUE,
        Some(Unique::while_active().within(Duration::from_secs(3600)))
    );
    assert_eq!(Report::UNIQUE, Some(Unique::for_period(Duration::from_secs(86_400))));
    assert_eq!(Reindex::UNIQUE, Some(Unique::while_pending()));
}
