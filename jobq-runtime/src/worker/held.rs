//! The jobs a worker holds: claimed and not settled yet, each with its
//! lease by this host's clock and the token that stops its attempt.
//!
//! The claim pipeline adds a job when its claim returns; its settle (or
//! the completer's, or the rescuer's) forgets it; the heartbeat renews
//! what is held and stops what it finds lost; a cancel in this process
//! stops it through [`crate::cancels`]. A shutdown past its deadline stops
//! every attempt still held at once ([`HeldJobs::stop_all`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::util::{lock, quietly};
use crate::store::Fence;

/// A job this worker holds, claimed and not yet settled: the handles its
/// claim loop, its task, its settlement and the heartbeat share (one
/// allocation per job).
#[derive(Debug)]
pub(super) struct Held {
    /// Cancels the running attempt.
    cancel: CancellationToken,
    /// Its lease by this host's clock (see [`Lease`]).
    lease: Mutex<Lease>,
    /// Set before `cancel` when the lease was lost: the attempt must not settle.
    lease_lost: AtomicBool,
    /// Set when the attempt has ended and its outcome is being settled: a
    /// heartbeat that then finds the row gone from `processing` is seeing
    /// that settle (a fenced-out one is reported by the settle), not a lost lease.
    ended: AtomicBool,
    /// Set when the attempt completed its job in a transaction of the
    /// handler's ([`CompleteIn`](crate::CompleteIn)): a heartbeat that then
    /// finds the row gone from `processing` is seeing that completion, not
    /// a lost lease, and lets the handler finish.
    completed_in: AtomicBool,
}

/// The latest a job's lease can end, by this host's clock: the moment the
/// last renewal that went through (or the claim) was *sent*, plus the lease
/// it asked for. The database sets the lease from its own clock when the
/// statement runs, which is later, so the lease there ends no earlier than
/// this (two clocks ticking at one rate). A renewal whose answer never came
/// — an error, or no answer within the statement deadline — moves nothing:
/// the worker cannot know whether it went through.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// When the statement that set it was sent.
    sent: Instant,
    /// `sent` plus the lease it asked for.
    ends: Instant,
}

impl Held {
    fn new(cancel: CancellationToken, claimed: Instant, lease: Duration) -> Self {
        Self {
            cancel,
            lease: Mutex::new(Lease {
                sent: claimed,
                ends: claimed + lease,
            }),
            lease_lost: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            completed_in: AtomicBool::new(false),
        }
    }

    /// A renewal sent at `sent`, asking for `lease` from then, went
    /// through. An older one answering after a newer one changes nothing
    /// (the database keeps the newer one's, as it ran later).
    pub(super) fn renewed(&self, sent: Instant, lease: Duration) {
        let mut held = lock(&self.lease);
        if sent >= held.sent {
            *held = Lease {
                sent,
                ends: sent + lease,
            };
        }
    }

    /// When its lease can end, by this host's clock.
    fn lease_ends(&self) -> Instant {
        lock(&self.lease).ends
    }

    /// The token that cancels the running attempt.
    pub(super) fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the heartbeat found the lease lost: the attempt must not settle.
    pub(super) fn lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::SeqCst)
    }

    /// The lease was lost: marks it so and stops the attempt.
    pub(super) fn lose_lease(&self) {
        self.lease_lost.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether the attempt has ended and its outcome is being settled.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// The attempt has ended; its outcome is settled next.
    pub(super) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
    }

    /// The attempt completed its job in the handler's transaction.
    pub(super) fn complete_in(&self) {
        self.completed_in.store(true, Ordering::SeqCst);
    }

    /// Whether a row found gone from `processing` is expected: the attempt
    /// ended (its settle is under way) or completed its job itself.
    fn settling(&self) -> bool {
        self.ended() || self.completed_in.load(Ordering::SeqCst)
    }
}

/// Held attempts by fence, hashed with foldhash: a fence is the database's
/// id and token, and the map is written twice per attempt.
type ByFence = HashMap<Fence, Arc<Held>, foldhash::fast::RandomState>;

/// The jobs claimed and not settled yet, by fence.
#[derive(Debug)]
pub(super) struct HeldJobs {
    jobs: Mutex<ByFence>,
    /// Set when a shutdown's deadline is near: every attempt held then is
    /// cancelled, and so is one held after (released to `pending`). Each
    /// attempt has a token of its own (a child of one shared token would
    /// lock the parent's node at every hold and every drop, across the
    /// runtime's threads).
    stopping: AtomicBool,
    /// The lease a claim and a renewal ask for.
    lease: Duration,
    /// See [`Settings::lease_margin`](super::settings::Settings::lease_margin).
    margin: Duration,
}

impl HeldJobs {
    pub(super) fn new(lease: Duration, margin: Duration) -> Self {
        Self {
            jobs: Mutex::default(),
            stopping: AtomicBool::new(false),
            lease,
            margin,
        }
    }

    fn jobs(&self) -> MutexGuard<'_, ByFence> {
        lock(&self.jobs)
    }

    /// How many jobs are held.
    pub(super) fn len(&self) -> usize {
        self.jobs().len()
    }

    /// The fences of every held job.
    pub(super) fn fences(&self) -> Vec<Fence> {
        self.jobs().keys().copied().collect()
    }

    /// Registers a claimed job as held (heartbeats renew its lease from now
    /// on), its attempt cancelled by [`stop_all`](Self::stop_all).
    ///
    /// `claimed` is when the claim was sent: its lease runs from then by
    /// this host's clock (see [`Held::renewed`]). `answered` is when its
    /// answer came: a claim answered so late that its lease may end within
    /// the margin (a partition or a frozen process held the answer back)
    /// may already be reaped and running elsewhere, so the job is held
    /// lost: it does not start and is not settled, as when a heartbeat
    /// finds a lease lost, and the reaper returns it.
    pub(super) fn hold(&self, fence: Fence, claimed: Instant, answered: Instant) -> Arc<Held> {
        let held = Arc::new(Held::new(CancellationToken::new(), claimed, self.lease));
        if held.lease_ends() <= answered + self.margin {
            held.lose_lease();
            quietly(|| {
                tracing::warn!(
                    job.id = fence.id,
                    waited_ms = u64::try_from((answered - claimed).as_millis()).unwrap_or(u64::MAX),
                    "lease lost: the claim's answer came when its lease may end (the database or the network held it back); not starting the attempt, the reaper returns the job"
                );
            });
            return held;
        }
        self.jobs().insert(fence, Arc::clone(&held));
        // Read after the insert: a `stop_all` that ran before it is seen
        // here, one that runs after it finds the job in the map.
        if self.stopping.load(Ordering::SeqCst) {
            held.cancel.cancel();
        }
        held
    }

    /// Forgets settled (or given up) jobs.
    pub(super) fn release(&self, fences: &[Fence]) {
        let mut held = self.jobs();
        for fence in fences {
            held.remove(fence);
        }
    }

    /// A renewal of `fences` sent at `sent` went through: moves the leases
    /// of those still held.
    pub(super) fn renewed(&self, fences: &[Fence], sent: Instant) {
        let held = self.jobs();
        for fence in fences {
            if let Some(job) = held.get(fence) {
                job.renewed(sent, self.lease);
            }
        }
    }

    /// Cancels every attempt still running (a shutdown's deadline is near).
    pub(super) fn stop_all(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for job in self.jobs().values() {
            job.cancel.cancel();
        }
    }

    /// The soonest moment a running attempt must stop because its lease
    /// was not renewed (see [`stop_unrenewed`](Self::stop_unrenewed)); `None`
    /// while nothing that runs is held.
    pub(super) fn next_lease_stop(&self) -> Option<Instant> {
        let margin = self.margin;
        self.jobs()
            .values()
            .filter(|job| !job.settling())
            .map(|job| {
                job.lease_ends()
                    .checked_sub(margin)
                    .unwrap_or_else(Instant::now)
            })
            .min()
    }

    /// Stops, as a lost lease does, every attempt whose lease may end within
    /// the lease margin because no renewal went through (the database did
    /// not answer): its cancellation token fires and it is not settled, so
    /// that it does not run beside the attempt another worker starts once
    /// the reaper returns the job. Attempts that have ended are left to
    /// their settle. How many it stopped.
    pub(super) fn stop_unrenewed(&self) -> usize {
        let stop_from = Instant::now() + self.margin;
        let mut held = self.jobs();
        let unrenewed: Vec<Fence> = held
            .iter()
            .filter(|(_, job)| !job.settling() && job.lease_ends() <= stop_from)
            .map(|(fence, _)| *fence)
            .collect();
        for fence in &unrenewed {
            if let Some(job) = held.remove(fence) {
                job.lose_lease();
            }
        }
        drop(held);
        for fence in &unrenewed {
            quietly(|| {
                tracing::warn!(
                    job.id = fence.id,
                    "lease lost: not renewed in time (the database did not answer) and it may end now; stopping the attempt without settling it, the reaper returns the job"
                );
            });
        }
        unrenewed.len()
    }

    /// Stops the attempt of `fence` whose row is no longer held (its lease
    /// was lost, or it was cancelled): forgets it and cancels it, so it
    /// neither renews nor settles; whether it was held and running. An
    /// attempt that has ended already is left to its settle, which the
    /// fence turns away.
    pub(super) fn stop_lost(&self, fence: Fence) -> bool {
        let mut held = self.jobs();
        if held.get(&fence).is_none_or(|job| job.settling()) {
            return false;
        }
        match held.remove(&fence) {
            Some(job) => {
                job.lose_lease();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(2);
    const MARGIN: Duration = Duration::from_millis(200);

    #[test]
    fn a_claim_answered_in_time_is_held_and_renewed() {
        let jobs = HeldJobs::new(LEASE, MARGIN);
        let claimed = Instant::now();
        let held = jobs.hold(Fence { id: 1, token: 1 }, claimed, claimed + LEASE / 2);
        assert!(!held.lease_lost());
        assert_eq!(jobs.fences(), [Fence { id: 1, token: 1 }]);
    }

    /// A shutdown's `stop_all` cancels the attempts held then, and one held
    /// after it (a claim answered while the shutdown ran); not one settled
    /// before it.
    #[test]
    fn stop_all_cancels_what_is_held_and_what_is_held_after() {
        let jobs = HeldJobs::new(LEASE, MARGIN);
        let now = Instant::now();
        let fence = |id| Fence { id, token: 1 };
        let settled = jobs.hold(fence(1), now, now);
        let running = jobs.hold(fence(2), now, now);
        jobs.release(&[fence(1)]);
        assert!(!running.cancel_token().is_cancelled());
        jobs.stop_all();
        assert!(running.cancel_token().is_cancelled());
        assert!(!settled.cancel_token().is_cancelled());
        let late = jobs.hold(fence(3), now, now);
        assert!(late.cancel_token().is_cancelled());
        assert!(!late.lease_lost(), "stopped, not lost: it is released");
    }

    /// The answer came when the lease, run from the claim's send, may end
    /// within the margin: another worker may run the job already.
    #[test]
    fn a_claim_answered_as_its_lease_may_end_is_lost_and_not_held() {
        let jobs = HeldJobs::new(LEASE, MARGIN);
        let claimed = Instant::now();
        for (n, answered) in [LEASE - MARGIN, LEASE, 3 * LEASE].into_iter().enumerate() {
            let fence = Fence {
                id: n as i64,
                token: 1,
            };
            let held = jobs.hold(fence, claimed, claimed + answered);
            assert!(held.lease_lost(), "answered after {answered:?}");
            assert!(held.cancel_token().is_cancelled());
        }
        assert_eq!(jobs.len(), 0, "none is renewed or settled");
    }
}
