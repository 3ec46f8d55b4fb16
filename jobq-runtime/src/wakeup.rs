//! In-process wake-ups: an enqueue in this process wakes this process's
//! claim loops for that queue at once instead of at their next poll.
//!
//! Keyed by queue name only, process-wide: two `Jobq` handles on different
//! databases that share a queue name wake each other spuriously, which costs
//! one empty claim and is never wrong.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

/// The name under which a change of queue controls (a pause, a limit, a
/// rate) or a cancel of a running job is announced, to every worker
/// process: no queue has it (a queue name is at least one byte). Workers
/// then read the controls and renew their leases (which finds a cancelled
/// job) at once instead of at their next poll or heartbeat.
pub(crate) const CONTROL: &str = "";

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

/// Whether this process's claim loops of one queue are waiting for jobs,
/// for a waiter that watches the database on their behalf (MySQL's, see
/// `store::mysql::wake`): it asks about a queue only while one of its
/// loops waits, so a process busy with its backlog sends the waiter's
/// statement nothing.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// Claim loops of the queue waiting for a wake-up or their next poll.
    idle: AtomicUsize,
    /// Claims the queue's loops have started: a waiter reports a queue's
    /// due jobs once per claim, not again while the claim it asked for is
    /// still to come.
    claims: AtomicU64,
}

impl Waiting {
    /// Whether a loop of the queue waits.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) fn idle(&self) -> bool {
        self.idle.load(Ordering::Acquire) > 0
    }

    /// Claims started so far.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) fn claims(&self) -> u64 {
        self.claims.load(Ordering::Acquire)
    }

    /// A loop of the queue starts a claim.
    pub(crate) fn claiming(&self) {
        self.claims.fetch_add(1, Ordering::AcqRel);
    }

    /// A loop of the queue waits until the guard drops.
    pub(crate) fn wait(self: &Arc<Self>) -> IdleGuard {
        if self.idle.fetch_add(1, Ordering::AcqRel) == 0 {
            became_idle().notify_waiters();
        }
        IdleGuard(Arc::clone(self))
    }
}

/// A claim loop waiting (see [`Waiting::wait`]).
#[derive(Debug)]
pub(crate) struct IdleGuard(Arc<Waiting>);

impl Drop for IdleGuard {
    fn drop(&mut self) {
        self.0.idle.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The waiting state of `queue`'s claim loops in this process.
pub(crate) fn waiting(queue: &str) -> Arc<Waiting> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<Waiting>>>> = OnceLock::new();
    let mut table = TABLE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(table.entry(queue.to_owned()).or_default())
}

/// Notified whenever a claim loop of any queue starts waiting.
pub(crate) fn became_idle() -> &'static Notify {
    static IDLE: Notify = Notify::const_new();
    &IDLE
}
