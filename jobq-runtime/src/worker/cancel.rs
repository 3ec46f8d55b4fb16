//! Cancels reach running attempts of this process at once: every worker of
//! the process is listed here, and `Jobq::cancel` / `cancel_where` hand the
//! claims they ended (row id and the lease token it had) to
//! [`stop_cancelled`] once their change has committed. Workers of other
//! processes learn of it at their next heartbeat, which finds the row no
//! longer held.
//!
//! A claim is an exact `(id, token)` pair: a later claim of the same row
//! (after a retry) has another token, so a late signal cannot stop it.
//! Nothing is added to the claim or settle path: a worker is listed once,
//! and a cancel looks its claims up in each worker's held jobs.

use std::sync::{Arc, Mutex, Weak};

use super::shared::{Shared, lock, quietly};
use crate::store::Fence;

/// Every worker of this process that may hold jobs.
static WORKERS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Lists a new worker (forgetting those that are gone).
pub(super) fn register(shared: &Arc<Shared>) {
    let mut workers = lock(&WORKERS);
    workers.retain(|w| w.strong_count() > 0);
    workers.push(Arc::downgrade(shared));
}

/// Stops the attempts of `fences` that a worker of this process runs: each
/// is forgotten (not renewed, not settled) and its handler's cancellation
/// token fires.
pub(crate) fn stop_cancelled(fences: &[Fence]) {
    if fences.is_empty() {
        return;
    }
    let workers: Vec<Arc<Shared>> = lock(&WORKERS).iter().filter_map(Weak::upgrade).collect();
    for shared in workers {
        for &fence in fences {
            if shared.stop_lost(fence) {
                quietly(|| {
                    tracing::info!(
                        job.id = fence.id,
                        "job cancelled; stopping the attempt without settling it"
                    );
                });
            }
        }
    }
}
