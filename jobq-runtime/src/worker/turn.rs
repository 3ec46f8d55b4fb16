//! The settle turn: how the completer's batch writes and the heartbeat's
//! renewals take turns on this worker's rows, each statement fenced by the
//! rows' lease tokens. The whole protocol is here; the completer
//! ([`write`](SettleTurn::write), [`beside`](SettleTurn::beside)) and the
//! heartbeat ([`renew`](SettleTurn::renew), [`stuck`](SettleTurn::stuck))
//! only call it with their statements.
//!
//! # Why a turn
//!
//! A settle batch and a heartbeat both update many of this worker's rows
//! in one statement: run side by side they can lock the same rows in
//! opposite orders, and PostgreSQL reports that deadlock only after
//! `deadlock_timeout` (1 s), a second in which settles stall. So each takes
//! the turn around its statement. (Locking the rows in id order first
//! instead cost a worker of concurrency 1 a third of its jobs/s: a row lock
//! is a WAL record of its own.)
//!
//! # When a settle waits on a row lock
//!
//! A heartbeat waits for the turn only briefly ([`TURN_WAIT`]): a settle
//! that holds it longer is waiting on a row lock someone else holds (a
//! caller's transaction with a duplicate `enqueue_in` of that job's key),
//! and the heartbeat then renews every lease but those of the batch being
//! settled without the turn ("beside" it). Disjoint rows cannot deadlock,
//! and a lock on one row delays no other lease.
//!
//! A batch whose write holds the turn longer than [`STUCK_AFTER`] gives the
//! turn back and finishes beside it: its rows are marked *stuck*, plain
//! renewals leave them out (the write holds some of their locks), and the
//! heartbeat renews them with a statement that skips locked rows
//! (`heartbeat_unlocked`): those the write has not reached yet. A new batch
//! waits out a heartbeat renewing beside (the `beside` lock) before it
//! writes, so it never runs beside a heartbeat that did not leave its rows
//! out. A shutdown waits for the writes finishing beside, at most one lease
//! ([`SettleTurn::wait_beside`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::util::lock;
use crate::store::Fence;

/// Longest a heartbeat waits for a settle batch to finish before renewing
/// the other leases beside it (at most a quarter of the heartbeat interval).
const TURN_WAIT: Duration = Duration::from_millis(200);

/// How long a batch of successes may hold the turn before it is deemed
/// stuck on a row lock and finishes beside (at most half a heartbeat interval).
const STUCK_AFTER: Duration = Duration::from_secs(1);

/// The turn and what the heartbeat must know of the settle writes going on.
#[derive(Debug)]
pub(super) struct SettleTurn {
    /// Taken around a settle batch and a heartbeat's plain renewal.
    turn: tokio::sync::Mutex<()>,
    /// The batch being written under the turn.
    settling: Mutex<Vec<Fence>>,
    /// The rows of batches whose write finishes beside the turn.
    stuck: Mutex<Vec<Fence>>,
    /// Held by a heartbeat that renews beside a settle holding the turn; a
    /// new batch takes it once before writing.
    beside: tokio::sync::Mutex<()>,
    /// The writes finishing beside the turn, waited for by the shutdown.
    beside_writes: TaskTracker,
    /// [`STUCK_AFTER`], or half the heartbeat interval if shorter.
    stuck_after: Duration,
    /// [`TURN_WAIT`], or a quarter of the heartbeat interval if shorter.
    turn_wait: Duration,
}

/// How a write under the turn went.
pub(super) enum Turned<F: Future> {
    /// It ended under the turn.
    Done(F::Output),
    /// It outlasted the time a batch may hold the turn: its rows are marked
    /// stuck and the turn was given back. The caller finishes the write
    /// with [`SettleTurn::beside`], and drops the [`Stuck`] when it ends.
    Stuck(Pin<Box<F>>, Stuck),
}

/// The rows of a write finishing beside the turn, marked stuck while this
/// lives (see [`SettleTurn::renew`]).
#[derive(Debug)]
pub(super) struct Stuck {
    turn: Arc<SettleTurn>,
    batch: Vec<Fence>,
}

impl Stuck {
    /// The rows the write settles.
    pub(super) fn batch(&self) -> &[Fence] {
        &self.batch
    }

    /// The write has ended: its rows are no longer stuck. Returns them.
    pub(super) fn done(mut self) -> Vec<Fence> {
        let batch = std::mem::take(&mut self.batch);
        self.turn.unstick(&batch);
        batch
    }
}

impl Drop for Stuck {
    fn drop(&mut self) {
        if !self.batch.is_empty() {
            self.turn.unstick(&self.batch);
        }
    }
}

impl SettleTurn {
    /// The turn of a worker whose heartbeat runs every `heartbeat_interval`.
    pub(super) fn new(heartbeat_interval: Duration) -> Self {
        Self {
            turn: tokio::sync::Mutex::new(()),
            settling: Mutex::default(),
            stuck: Mutex::default(),
            beside: tokio::sync::Mutex::new(()),
            beside_writes: TaskTracker::new(),
            stuck_after: STUCK_AFTER.min(heartbeat_interval / 2),
            turn_wait: TURN_WAIT.min(heartbeat_interval / 4),
        }
    }

    /// The completer's side: runs `write`, the settle of `batch`, under the
    /// turn (after any heartbeat renewing beside the previous batch). A
    /// write that outlasts the time a batch may hold the turn is handed back
    /// unfinished ([`Turned::Stuck`]), its rows marked stuck.
    pub(super) async fn write<F: Future>(self: &Arc<Self>, batch: &[Fence], write: F) -> Turned<F> {
        let turn = self.turn.lock().await;
        self.set_settling(batch);
        // Waits out a heartbeat renewing beside the previous batch (uncontended otherwise).
        drop(self.beside.lock().await);
        let mut write = Box::pin(write);
        match tokio::time::timeout(self.stuck_after, &mut write).await {
            Ok(result) => {
                self.set_settling(&[]);
                drop(turn);
                Turned::Done(result)
            }
            Err(_) => {
                // Waiting on a row lock someone else holds: only these rows
                // wait for it; the turn goes back to the heartbeats and to
                // the batches after this one.
                lock(&self.stuck).extend_from_slice(batch);
                self.set_settling(&[]);
                drop(turn);
                let stuck = Stuck {
                    turn: Arc::clone(self),
                    batch: batch.to_vec(),
                };
                Turned::Stuck(write, stuck)
            }
        }
    }

    /// Runs `finish`, the rest of a stuck write, beside the turn; the
    /// shutdown waits for it ([`wait_beside`](Self::wait_beside)).
    pub(super) fn beside(&self, finish: impl Future<Output = ()> + Send + 'static) {
        self.beside_writes.spawn(finish);
    }

    /// The shutdown's side: waits for the writes finishing beside the
    /// turn, at most `within`.
    pub(super) async fn wait_beside(&self, within: Duration) {
        self.beside_writes.close();
        let _ = tokio::time::timeout(within, self.beside_writes.wait()).await;
    }

    /// The heartbeat's side: renews the leases of `fences` with `renew`,
    /// given those among them that no settle write holds. Under the turn if
    /// it comes within the turn wait (leaving out the stuck rows); else
    /// beside the settle holding it (leaving out its batch too).
    pub(super) async fn renew<T, R>(
        &self,
        fences: &[Fence],
        renew: impl FnOnce(Vec<Fence>) -> R,
    ) -> T
    where
        R: Future<Output = T>,
    {
        match tokio::time::timeout(self.turn_wait, self.turn.lock()).await {
            Ok(_turn) => {
                // Not the rows of a stuck write (it holds some of their
                // locks), read once the turn is ours: a write that became
                // stuck while this heartbeat waited for the turn gave it up.
                let others = not_writing(fences, &lock(&self.stuck), &[]);
                renew(others).await
            }
            Err(_) => {
                // The settle holding the turn waits on a row lock: renew the
                // rest beside it.
                let _beside = self.beside.lock().await;
                let others = not_writing(fences, &lock(&self.stuck), &lock(&self.settling));
                renew(others).await
            }
        }
    }

    /// The rows of the writes finishing beside the turn, which the
    /// heartbeat renews apart, skipping the locked ones.
    pub(super) fn stuck(&self) -> Vec<Fence> {
        lock(&self.stuck).clone()
    }

    /// Records the batch of successes written under the turn (none: `&[]`).
    fn set_settling(&self, batch: &[Fence]) {
        let mut settling = lock(&self.settling);
        settling.clear();
        settling.extend_from_slice(batch);
    }

    /// The write of `batch` has ended.
    fn unstick(&self, batch: &[Fence]) {
        lock(&self.stuck).retain(|fence| !batch.contains(fence));
    }
}

/// The fences among `fences` that neither a stuck write nor the settle in
/// progress is updating.
fn not_writing(fences: &[Fence], stuck: &[Fence], settling: &[Fence]) -> Vec<Fence> {
    if stuck.is_empty() && settling.is_empty() {
        return fences.to_vec();
    }
    let writing: std::collections::HashSet<&Fence> = stuck.iter().chain(settling).collect();
    fences
        .iter()
        .filter(|fence| !writing.contains(fence))
        .copied()
        .collect()
}
