//! Cancels reach running attempts of this process at once: every worker of
//! the process is listed here (below the client and the worker, which both
//! use it), and `Jobq::cancel` / `cancel_where` hand the
//! claims they ended (row id and the lease token it had) to
//! [`stop_cancelled`] once their change has committed. Workers of other
//! processes learn of it at their next heartbeat, which finds the row no
//! longer held.
//!
//! A claim is an exact `(id, token)` pair: a later claim of the same row
//! (after a retry) has another token, so a late signal cannot stop it.
//! Nothing is added to the claim or settle path: a worker is listed once,
//! and a cancel looks its claims up in each worker's held jobs.

use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError, Weak};

use crate::store::contract::Fence;

/// What holds attempts a cancel may stop: each worker's shared state.
pub(crate) trait Holder: Send + Sync {
    /// Stops the attempt of `fence` if this holds it and it runs: it is
    /// forgotten (not renewed, not settled) and its handler's cancellation
    /// token fires; whether it did.
    fn stop_lost(&self, fence: Fence) -> bool;
}

/// Every worker of this process that may hold jobs.
static HOLDERS: Mutex<Vec<Weak<dyn Holder>>> = Mutex::new(Vec::new());

/// Lists a new worker (forgetting those that are gone).
pub(crate) fn register(holder: Weak<dyn Holder>) {
    let mut holders = HOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
    holders.retain(|h| h.strong_count() > 0);
    holders.push(holder);
}

/// Stops the attempts of `fences` that a worker of this process runs.
pub(crate) fn stop_cancelled(fences: &[Fence]) {
    if fences.is_empty() {
        return;
    }
    let holders: Vec<_> = HOLDERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for holder in holders {
        for &fence in fences {
            if holder.stop_lost(fence) {
                // A subscriber that panics (a closed stderr) must not stop
                // the cancel.
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    tracing::info!(
                        job.id = fence.id,
                        "job cancelled; stopping the attempt without settling it"
                    );
                }));
            }
        }
    }
}
