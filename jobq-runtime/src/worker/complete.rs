//! The completer: settles successes in batches.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::mpsc;

use super::inject;
use super::shared::{Shared, backoff, lock, panicked, quietly, unless};
use crate::error::Result;
use crate::metrics::Settle;
use crate::store::Fence;

/// Most successes the completer settles per statement.
const COMPLETE_BATCH: usize = 1000;

/// How long a batch of successes may hold the turn before it is deemed
/// stuck on a row lock and finishes beside (at most half a heartbeat interval).
const STUCK_AFTER: Duration = Duration::from_secs(1);

/// Settles successes in batches: whatever accumulated while the previous
/// batch was being written goes in the next one. On shutdown it drains what
/// is left and stops.
pub(super) async fn completer(shared: Arc<Shared>, mut completions: mpsc::Receiver<Fence>) {
    let mut batch = Vec::with_capacity(COMPLETE_BATCH);
    loop {
        let stopping = tokio::select! {
            biased;
            received = completions.recv_many(&mut batch, COMPLETE_BATCH) => received == 0,
            () = shared.stop_completer.cancelled() => true,
        };
        if stopping {
            while let Ok(fence) = completions.try_recv() {
                batch.push(fence);
            }
        }
        if !batch.is_empty() {
            // settle_completions catches what panics in its writes; this is
            // for the rest (the completer must outlive any one batch).
            let handed_off = AssertUnwindSafe(settle_completions(&shared, &batch, stopping))
                .catch_unwind()
                .await
                .unwrap_or(false);
            if !handed_off {
                shared.release_held(&batch);
            }
            batch.clear();
        }
        if stopping {
            break;
        }
    }
}

/// Writes one batch of successes, retrying while the database is unreachable.
/// Giving up (after a few tries, or when a shutdown's deadline passes) loses
/// nothing: the jobs stay `processing` and run again when their leases
/// expire (at-least-once). Returns `true` if the write was stuck on a row
/// lock and handed off to finish beside (which then releases the batch from
/// the held set).
async fn settle_completions(shared: &Arc<Shared>, batch: &[Fence], stopping: bool) -> bool {
    match unless(
        &shared.deadline_passed,
        settle_until_done(shared, batch, stopping),
    )
    .await
    {
        Some(handed_off) => handed_off,
        None => {
            quietly(|| {
                tracing::error!(
                    jobs = batch.len(),
                    "the shutdown's deadline passed before completed jobs were settled; they run again when their leases expire"
                );
            });
            false
        }
    }
}

/// [`settle_completions`] without the shutdown's deadline.
async fn settle_until_done(shared: &Arc<Shared>, batch: &[Fence], stopping: bool) -> bool {
    let give_up_after = if stopping { 3 } else { 20 };
    let mut failures = 0;
    loop {
        let result = {
            let turn = shared.bulk_writes.lock().await;
            set_settling(shared, batch);
            // Waits out a heartbeat renewing beside the previous batch (uncontended otherwise).
            drop(shared.beside.lock().await);
            let mut write = Box::pin(complete_batch(Arc::clone(shared), batch.to_vec()));
            let stuck_after = STUCK_AFTER.min(shared.settings.heartbeat_interval() / 2);
            let result = match tokio::time::timeout(stuck_after, &mut write).await {
                Ok(result) => result,
                Err(_) => {
                    // Waiting on a row lock someone else holds: only these
                    // rows wait for it; the turn goes back to the heartbeats
                    // and to the batches after this one.
                    lock(&shared.stuck).extend_from_slice(batch);
                    set_settling(shared, &[]);
                    drop(turn);
                    let shared = Arc::clone(shared);
                    let batch = batch.to_vec();
                    shared.clone().beside_writes.spawn(async move {
                        settle_beside(&shared, write, &batch).await;
                        lock(&shared.stuck).retain(|fence| !batch.contains(fence));
                        shared.release_held(&batch);
                    });
                    return true;
                }
            };
            set_settling(shared, &[]);
            drop(turn);
            result
        };
        match result {
            Ok(settled) => {
                if settled < batch.len() as u64 {
                    let fenced_out = batch.len() as u64 - settled;
                    quietly(|| {
                        if failures == 0 {
                            tracing::warn!(
                                fenced_out,
                                "completed jobs were no longer held (lease expired and re-claimed, or cancelled); their completion was not applied"
                            );
                        } else {
                            // A failed try may have committed with only its
                            // reply lost: those rows are done by this batch.
                            tracing::warn!(
                                fenced_out,
                                failed_tries = failures,
                                "a retried write of completed jobs found some no longer held: an earlier try committed and only its reply was lost, or their leases expired and they were re-claimed or cancelled; this try changed nothing for them"
                            );
                        }
                    });
                }
                return false;
            }
            Err(error) => {
                failures += 1;
                if failures >= give_up_after {
                    quietly(|| {
                        tracing::error!(
                            error = &error as &dyn std::error::Error,
                            jobs = batch.len(),
                            "giving up settling completed jobs; they will run again when their leases expire"
                        );
                    });
                    return false;
                }
                let pause = backoff(failures);
                quietly(|| {
                    tracing::warn!(error = &error as &dyn std::error::Error, retry_in = ?pause, "settling completed jobs failed; retrying");
                });
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Finishes the write of a batch that outlasted `STUCK_AFTER` beside the
/// turn: waiting on a row lock, or on a database that does not answer (the
/// write then ends at its statement deadline). A failed write is tried
/// again, with backoff, for one lease from now — long enough for a frozen
/// database, or a connect list's move to the next node, not to make these
/// jobs run again — and given up when a shutdown's deadline passes: the
/// rows are then reaped when their leases expire, and run again.
async fn settle_beside(
    shared: &Arc<Shared>,
    write: impl std::future::Future<Output = Result<u64>>,
    batch: &[Fence],
) {
    let give_up = tokio::time::Instant::now() + shared.settings.lease;
    let mut result = unless(&shared.deadline_passed, write).await;
    let mut failures = 0;
    while let Some(Err(error)) = &result {
        if tokio::time::Instant::now() >= give_up {
            break;
        }
        failures += 1;
        let pause = backoff(failures);
        quietly(|| {
            tracing::warn!(
                error = error as &dyn std::error::Error,
                jobs = batch.len(),
                retry_in = ?pause,
                "settling completed jobs that waited on a row lock or on the database failed; retrying"
            );
        });
        if unless(&shared.deadline_passed, tokio::time::sleep(pause))
            .await
            .is_none()
        {
            result = None;
            break;
        }
        let write = complete_batch(Arc::clone(shared), batch.to_vec());
        result = unless(&shared.deadline_passed, write).await;
    }
    match result {
        Some(Ok(_)) => {}
        Some(Err(error)) => quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                jobs = batch.len(),
                "giving up settling completed jobs that waited on a row lock or on the database; they will run again when their leases expire"
            );
        }),
        None => quietly(|| {
            tracing::error!(
                jobs = batch.len(),
                "the shutdown's deadline passed before completed jobs were settled; they run again when their leases expire"
            );
        }),
    }
}

/// One write of a batch of successes; a panic in it is a failed write.
async fn complete_batch(shared: Arc<Shared>, batch: Vec<Fence>) -> Result<u64> {
    AssertUnwindSafe(async {
        if inject::fire(inject::Point::CompleterWrite, &shared.queue_names[0]).is_some() {
            panic!("jobq fault injection: the batch write dropped (a panic here)");
        }
        let started = tokio::time::Instant::now();
        let settled = shared.store.complete(&batch).await?;
        shared.metrics.settled(Settle::Complete, started.elapsed());
        let fenced_out = (batch.len() as u64).saturating_sub(settled);
        if fenced_out > 0 {
            shared.metrics.fenced_out(Settle::Complete, fenced_out);
        }
        Ok(settled)
    })
    .catch_unwind()
    .await
    .unwrap_or_else(|panic| Err(panicked("completer", panic.as_ref())))
}

/// Records the batch of successes written under the turn (none: `&[]`).
fn set_settling(shared: &Shared, batch: &[Fence]) {
    let mut settling = lock(&shared.settling);
    settling.clear();
    settling.extend_from_slice(batch);
}
