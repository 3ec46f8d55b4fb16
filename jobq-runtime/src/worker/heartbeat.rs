//! The heartbeat: renews the leases of every held job, stops those whose
//! lease was lost. It takes turns with the completer's writes through the
//! settle turn ([`super::turn`]).
//!
//! # A row locked by someone else
//!
//! A renewal never waits on a row lock: a caller's transaction that holds
//! the row of a running job (a duplicate `enqueue_in` of its key) would
//! otherwise hold back every lease of the statement, for as long as the
//! database lets a lock wait (5 s on MySQL/MariaDB, the statement deadline
//! on PostgreSQL) — long enough for them to expire and be reaped while
//! their handlers run. So the renewal skips locked rows, and each row it
//! skipped gets a renewal of its own beside the heartbeat that does wait on
//! the lock ([`wait_for_lock`]). While that renewal waits, the row is safe:
//! no reaper takes a locked row (they skip locked rows), and when the lock
//! goes, the waiting renewal keeps it: its lease runs from when it writes
//! the row, and the reapers do not come first (MySQL/MariaDB grants the
//! lock to the waiting renewal; PostgreSQL's reaper takes only a row that
//! kept its version between two looks). Its attempt is not stopped
//! by the lease clock meanwhile, as long as the database answers the
//! heartbeat's renewals (which also tells a row lock from a database that
//! stopped answering). A skipped row that is no longer held (cancelled,
//! reaped) is found at once by the same renewal, which does not wait on a
//! row it does not match.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::inject;
use super::shared::Shared;
use super::turn::SettleTurn;
use super::util::{lock, quietly, unless};
use crate::store::Fence;

/// The heartbeat's state: the worker's shared state, its side of the
/// settle turn, and the rows whose renewal waits on another transaction's
/// lock.
#[derive(Debug)]
pub(super) struct Heartbeat {
    pub(super) shared: Arc<Shared>,
    pub(super) turn: Arc<SettleTurn>,
    /// The rows with a renewal waiting on their lock ([`wait_for_lock`]).
    pub(super) locked: Mutex<HashSet<Fence>>,
}

/// Renews the leases of every held job each heartbeat interval, and stops
/// those it finds lost. It also keeps each lease by this host's clock (see
/// `Held::renewed`): an attempt whose lease may end before a renewal goes
/// through — the database does not answer, or fails every renewal — is
/// stopped a margin before it can, whether or not a renewal is in flight.
pub(super) async fn heartbeat_loop(heartbeat: Arc<Heartbeat>) {
    let Heartbeat { shared, turn, .. } = &*heartbeat;
    let held = &shared.held;
    let mut tick = tokio::time::interval(shared.settings.heartbeat_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A job cancelled in another process (announced with the controls):
    // renew now, which finds its lease gone.
    let control = crate::wakeup::subscribe(crate::wakeup::CONTROL);
    let mut announced = Box::pin(control.notified());
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => break,
            () = lease_stop(shared) => {
                held.stop_unrenewed();
                continue;
            }
            _ = tick.tick() => {}
            () = &mut announced => tick.reset(),
        }
        // Armed before the renewal: an announcement during it is not missed.
        announced = Box::pin(control.notified());
        announced.as_mut().enable();
        let fences = held.fences();
        if fences.is_empty() {
            continue;
        }
        inject::point!(Heartbeat, &shared.queue_names[0]);
        let sent = tokio::time::Instant::now();
        let renewal = renew(shared, turn, &fences);
        tokio::pin!(renewal);
        let result = loop {
            tokio::select! {
                biased;
                () = shared.stop_background.cancelled() => return,
                result = &mut renewal => break result,
                () = lease_stop(shared) => {
                    held.stop_unrenewed();
                }
            }
        };
        match result {
            Ok((renewed, skipped)) => {
                held.renewed(&renewed, sent);
                // The database answered: the rows whose renewal waits on a
                // lock are still locked (or found lost by that renewal).
                let waiting: Vec<Fence> = lock(&heartbeat.locked).iter().copied().collect();
                held.renewed(&waiting, sent);
                for fence in skipped {
                    if lock(&heartbeat.locked).insert(fence) {
                        tokio::spawn(wait_for_lock(Arc::clone(&heartbeat), fence));
                    }
                }
            }
            Err(error) => quietly(|| {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    jobs = fences.len(),
                    "renewing leases failed; retrying at the next heartbeat"
                );
            }),
        }
        renew_stuck(shared, turn).await;
    }
}

/// Completes when the first running attempt must stop because its lease
/// was not renewed (see `HeldJobs::next_lease_stop`); never while none runs.
async fn lease_stop(shared: &Shared) {
    match shared.held.next_lease_stop() {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One renewal of `fences` (less the rows settle writes hold, see
/// [`SettleTurn::renew`]) that waits on no row lock: the fences it renewed
/// and those it skipped (locked by another transaction, or no longer held).
async fn renew(
    shared: &Shared,
    turn: &SettleTurn,
    fences: &[Fence],
) -> crate::Result<(Vec<Fence>, Vec<Fence>)> {
    let lease = shared.settings.lease;
    let (others, result) = turn
        .renew(fences, |others| async move {
            let result = shared.store.heartbeat_unlocked(&others, lease).await;
            (others, result)
        })
        .await;
    let renewed = result?;
    if renewed.len() == others.len() {
        return Ok((renewed, Vec::new()));
    }
    let renewed_set: HashSet<&Fence> = renewed.iter().collect();
    let skipped = others
        .iter()
        .filter(|f| !renewed_set.contains(f))
        .copied()
        .collect();
    Ok((renewed, skipped))
}

/// The renewal of a row the heartbeat skipped, waiting on its lock (see
/// the module docs): renews it when the lock goes, or finds it lost (then
/// stops its attempt). Retried while the database reports its lock waits
/// as errors; after an error, the next heartbeat that skips the row starts
/// another. Ends with the worker's background tasks.
async fn wait_for_lock(heartbeat: Arc<Heartbeat>, fence: Fence) {
    let shared = &heartbeat.shared;
    let sent = tokio::time::Instant::now();
    let fences = [fence];
    let renewal = shared.store.heartbeat(&fences, shared.settings.lease);
    let result = unless(&shared.stop_background, renewal).await;
    lock(&heartbeat.locked).remove(&fence);
    match result {
        None => {}
        Some(Ok(lost)) if lost.is_empty() => shared.held.renewed(&[fence], sent),
        Some(Ok(_)) if shared.held.stop_lost(fence) => quietly(|| {
            tracing::warn!(
                job.id = fence.id,
                "lease lost (expired and re-claimed, or cancelled); stopping the attempt without settling it"
            );
        }),
        Some(Ok(_)) => {}
        Some(Err(error)) => quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                job.id = fence.id,
                "renewing a lease held up by another transaction's row lock failed; retrying at the next heartbeat"
            );
        }),
    }
}

/// Renews the leases of the rows of stuck writes that nobody has locked:
/// those the write has not reached yet while it waits on a row lock. The
/// others are locked by the write (it settles them) or by the transaction it
/// waits on (the reaper skips them too), so they are not lost. No cost while
/// nothing is stuck.
async fn renew_stuck(shared: &Shared, turn: &SettleTurn) {
    let stuck = turn.stuck();
    if stuck.is_empty() {
        return;
    }
    let sent = tokio::time::Instant::now();
    let renewal = shared
        .store
        .heartbeat_unlocked(&stuck, shared.settings.lease);
    let Some(result) = unless(&shared.stop_background, renewal).await else {
        return;
    };
    if let Ok(renewed) = &result {
        shared.held.renewed(renewed, sent);
    }
    if let Err(error) = result {
        quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                jobs = stuck.len(),
                "renewing the leases of completed jobs waiting on a row lock failed; retrying at the next heartbeat"
            );
        });
    }
}
