//! In-process wake-ups: an enqueue in this process wakes this process's
//! claim loops for that queue at once instead of at their next poll.
//!
//! Keyed by queue name only, process-wide: two `Jobq` handles on different
//! databases that share a queue name wake each other spuriously, which costs
//! one empty claim and is never wrong.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

fn table() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The notifier for `queue` (created on first use).
pub(crate) fn subscribe(queue: &str) -> Arc<Notify> {
    let mut table = table()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(table.entry(queue.to_owned()).or_default())
}

/// Wakes every claim loop of this process waiting on `queue`.
pub(crate) fn notify(queue: &str) {
    let notify = {
        let table = table()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        table.get(queue).cloned()
    };
    if let Some(notify) = notify {
        notify.notify_waiters();
    }
}
