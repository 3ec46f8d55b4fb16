//! The heartbeat: renews the leases of every held job, stops those whose lease was lost.

use std::sync::Arc;
use std::time::Duration;

use super::inject;
use super::shared::{Shared, lock, quietly, unless};
use crate::store::Fence;

/// Longest a heartbeat waits for a settle batch to finish before renewing
/// the other leases beside it (at most a quarter of the heartbeat interval).
const TURN_WAIT: Duration = Duration::from_millis(200);

/// Renews the leases of every held job each heartbeat interval, and stops
/// those it finds lost. It also keeps each lease by this host's clock (see
/// `Held::renewed`): an attempt whose lease may end before a renewal goes
/// through — the database does not answer, or fails every renewal — is
/// stopped a margin before it can, whether or not a renewal is in flight.
pub(super) async fn heartbeat_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.settings.heartbeat_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => break,
            () = lease_stop(&shared) => {
                shared.stop_unrenewed();
                continue;
            }
            _ = tick.tick() => {}
        }
        let fences: Vec<Fence> = shared.held().keys().copied().collect();
        if fences.is_empty() {
            continue;
        }
        inject::point!(Heartbeat, &shared.queue_names[0]);
        let sent = tokio::time::Instant::now();
        let renewal = renew(&shared, &fences);
        tokio::pin!(renewal);
        let result = loop {
            tokio::select! {
                biased;
                () = shared.stop_background.cancelled() => return,
                result = &mut renewal => break result,
                () = lease_stop(&shared) => {
                    shared.stop_unrenewed();
                }
            }
        };
        match result {
            Ok((renewed, lost)) => {
                for fence in lost {
                    if shared.stop_lost(fence) {
                        quietly(|| {
                            tracing::warn!(
                                job.id = fence.id,
                                "lease lost (expired and re-claimed, or cancelled); stopping the attempt without settling it"
                            );
                        });
                    }
                }
                let held = shared.held();
                for fence in &renewed {
                    if let Some(job) = held.get(fence) {
                        job.renewed(sent, shared.settings.lease);
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
        renew_stuck(&shared).await;
    }
}

/// Completes when the first running attempt must stop because its lease
/// was not renewed (see `Shared::next_lease_stop`); never while none runs.
async fn lease_stop(shared: &Shared) {
    match shared.next_lease_stop() {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One renewal of `fences` (less the rows settle writes hold): the fences
/// it renewed and those it found lost.
async fn renew(shared: &Shared, fences: &[Fence]) -> crate::Result<(Vec<Fence>, Vec<Fence>)> {
    let wait = TURN_WAIT.min(shared.settings.heartbeat_interval() / 4);
    let (others, result) = match tokio::time::timeout(wait, shared.bulk_writes.lock()).await {
        Ok(_turn) => {
            // Not the rows of a stuck write (it holds some of their
            // locks), read once the turn is ours: a write that became
            // stuck while this heartbeat waited for the turn gave it up.
            let others = not_writing(fences, &lock(&shared.stuck), &[]);
            let result = shared.store.heartbeat(&others, shared.settings.lease).await;
            (others, result)
        }
        Err(_) => {
            // The settle holding the turn waits on a row lock: renew the
            // rest beside it.
            let _beside = shared.beside.lock().await;
            let others = not_writing(fences, &lock(&shared.stuck), &lock(&shared.settling));
            let result = shared.store.heartbeat(&others, shared.settings.lease).await;
            (others, result)
        }
    };
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
async fn renew_stuck(shared: &Shared) {
    let stuck = lock(&shared.stuck).clone();
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
        let held = shared.held();
        for fence in renewed {
            if let Some(job) = held.get(fence) {
                job.renewed(sent, shared.settings.lease);
            }
        }
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
