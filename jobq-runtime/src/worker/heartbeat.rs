//! The heartbeat: renews the leases of every held job, stops those whose
//! lease was lost. It takes turns with the completer's writes through the
//! settle turn ([`super::turn`]).

use std::sync::Arc;

use super::inject;
use super::shared::Shared;
use super::turn::SettleTurn;
use super::util::{quietly, unless};
use crate::store::Fence;

/// The heartbeat's state: the worker's shared state and its side of the settle turn.
#[derive(Debug)]
pub(super) struct Heartbeat {
    pub(super) shared: Arc<Shared>,
    pub(super) turn: Arc<SettleTurn>,
}

/// Renews the leases of every held job each heartbeat interval, and stops
/// those it finds lost. It also keeps each lease by this host's clock (see
/// `Held::renewed`): an attempt whose lease may end before a renewal goes
/// through — the database does not answer, or fails every renewal — is
/// stopped a margin before it can, whether or not a renewal is in flight.
pub(super) async fn heartbeat_loop(heartbeat: Arc<Heartbeat>) {
    let Heartbeat { shared, turn } = &*heartbeat;
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
            Ok((renewed, lost)) => {
                for fence in lost {
                    if held.stop_lost(fence) {
                        quietly(|| {
                            tracing::warn!(
                                job.id = fence.id,
                                "lease lost (expired and re-claimed, or cancelled); stopping the attempt without settling it"
                            );
                        });
                    }
                }
                held.renewed(&renewed, sent);
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
/// [`SettleTurn::renew`]): the fences it renewed and those it found lost.
async fn renew(
    shared: &Shared,
    turn: &SettleTurn,
    fences: &[Fence],
) -> crate::Result<(Vec<Fence>, Vec<Fence>)> {
    let lease = shared.settings.lease;
    let (others, result) = turn
        .renew(fences, |others| async move {
            let result = shared.store.heartbeat(&others, lease).await;
            (others, result)
        })
        .await;
    let lost = result?;
    let renewed = if lost.is_empty() {
        others
    } else {
        let lost_set: std::collections::HashSet<&Fence> = lost.iter().collect();
        others
            .into_iter()
            .filter(|f| !lost_set.contains(f))
            .collect()
    };
    Ok((renewed, lost))
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
