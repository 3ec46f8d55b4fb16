//! The completer: settles successes in batches, taking turns with the
//! heartbeat through the settle turn ([`super::turn`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::inject;
use super::shared::Shared;
use super::turn::{SettleTurn, Turned};
use super::util::{backoff, panicked, quietly, unless};
use crate::error::Result;
use crate::metrics::Settle;
use crate::store::Fence;

/// Most successes the completer settles per statement.
const COMPLETE_BATCH: usize = 1000;

/// Releases of concurrency keys (one per batch with keyed jobs) running at
/// once beside the completer's writes: a release costs a few times a
/// batch's write, and two in flight kept a drain of 1,000 keys at limit 1
/// from waiting on them.
const RELEASES_IN_FLIGHT: usize = 2;

/// Successes waiting to be settled before job tasks wait (backpressure).
const COMPLETE_BACKLOG: usize = 10_000;

/// The completer and what it owns: the receiving end of the successes the
/// attempts hand it, its stop signal, and its side of the settle turn.
#[derive(Debug)]
pub(super) struct Completer {
    shared: Arc<Shared>,
    turn: Arc<SettleTurn>,
    completions: mpsc::Receiver<Fence>,
    /// Makes it drain what is left and stop.
    stop: CancellationToken,
}

impl Completer {
    /// A completer and the sender the attempts hand their successes to.
    pub(super) fn new(shared: Arc<Shared>, turn: Arc<SettleTurn>) -> (Self, mpsc::Sender<Fence>) {
        let (sender, completions) = mpsc::channel(COMPLETE_BACKLOG);
        let completer = Self {
            shared,
            turn,
            completions,
            stop: CancellationToken::new(),
        };
        (completer, sender)
    }

    /// The signal that makes it drain what is left and stop.
    pub(super) fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Settles successes in batches: whatever accumulated while the previous
    /// batch was being written goes in the next one. On stop it drains what
    /// is left and ends.
    pub(super) async fn run(self) {
        let Self {
            shared,
            turn,
            mut completions,
            stop,
        } = self;
        let mut batch = Vec::with_capacity(COMPLETE_BATCH);
        // The releases of the last batches' concurrency keys, running beside
        // the next batches' writes (at most `RELEASES_IN_FLIGHT`).
        let mut releasing: std::collections::VecDeque<tokio::task::JoinHandle<()>> =
            std::collections::VecDeque::new();
        loop {
            let stopping = tokio::select! {
                biased;
                received = completions.recv_many(&mut batch, COMPLETE_BATCH) => received == 0,
                () = stop.cancelled() => true,
            };
            if stopping {
                while let Ok(fence) = completions.try_recv() {
                    batch.push(fence);
                }
            }
            if !batch.is_empty() {
                // settle_completions catches what panics in its writes; this
                // is for the rest (the completer must outlive any one batch).
                let settle = settle_completions(&shared, &turn, &batch, stopping);
                let handed_off = AssertUnwindSafe(settle)
                    .catch_unwind()
                    .await
                    .unwrap_or(false);
                if !handed_off {
                    shared.held.release(&batch);
                }
                // Released after the batch's write (a write given up on, or
                // still finishing beside the turn, leaves its jobs holding
                // their keys: the release unblocks nothing for them, and
                // the sweep does once they have moved on).
                if !handed_off {
                    // (A batch finishing beside forgets its outputs itself.)
                    shared.forget_outputs(&batch);
                }
                let flows = shared.take_completed_flows(&batch);
                if !flows.is_empty() {
                    let shared = Arc::clone(&shared);
                    releasing.push_back(tokio::spawn(async move {
                        shared.release_dependents(&flows).await;
                    }));
                }
                let keys = shared.take_completed_keys(&batch);
                if !keys.is_empty() {
                    if releasing.len() >= RELEASES_IN_FLIGHT {
                        if let Some(oldest) = releasing.pop_front() {
                            let _ = oldest.await;
                        }
                    }
                    let shared = Arc::clone(&shared);
                    releasing.push_back(tokio::spawn(async move {
                        shared.release_keys(&keys).await;
                    }));
                }
                batch.clear();
            }
            if stopping {
                break;
            }
        }
        for release in releasing {
            let _ = unless(&shared.deadline_passed, release).await;
        }
    }
}

/// Writes one batch of successes, retrying while the database is unreachable.
/// Giving up (after a few tries, or when a shutdown's deadline passes) loses
/// nothing: the jobs stay `processing` and run again when their leases
/// expire (at-least-once). Returns `true` if the write was stuck on a row
/// lock and handed off to finish beside (which then releases the batch from
/// the held set).
async fn settle_completions(
    shared: &Arc<Shared>,
    turn: &Arc<SettleTurn>,
    batch: &[Fence],
    stopping: bool,
) -> bool {
    match unless(
        &shared.deadline_passed,
        settle_until_done(shared, turn, batch, stopping),
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
async fn settle_until_done(
    shared: &Arc<Shared>,
    turn: &Arc<SettleTurn>,
    batch: &[Fence],
    stopping: bool,
) -> bool {
    let give_up_after = if stopping { 3 } else { 20 };
    let mut failures = 0;
    loop {
        let write = complete_batch(Arc::clone(shared), batch.to_vec());
        let result = match turn.write(batch, write).await {
            Turned::Done(result) => result,
            Turned::Stuck(write, stuck) => {
                let shared = Arc::clone(shared);
                turn.beside(async move {
                    settle_beside(&shared, write, stuck.batch()).await;
                    let batch = stuck.done();
                    shared.forget_outputs(&batch);
                    shared.held.release(&batch);
                });
                return true;
            }
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

/// Finishes, beside the settle turn, the write of a batch that held the
/// turn too long: waiting on a row lock, or on a database that does not answer (the
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
        let outputs = shared.outputs_of(&batch);
        // Boxed: the store's future (a statement through its retry,
        // deadline and connection stash, for the largest backend) is
        // kilobytes, copied into this block's state at every batch inline.
        let settled = if outputs.is_empty() {
            Box::pin(shared.store.complete(&batch)).await?
        } else {
            // Jobs with an output: one statement each, the rest together.
            let with: std::collections::HashSet<Fence> = outputs.iter().map(|(f, _)| *f).collect();
            let plain: Vec<Fence> = batch
                .iter()
                .filter(|f| !with.contains(f))
                .copied()
                .collect();
            let mut settled = if plain.is_empty() {
                0
            } else {
                Box::pin(shared.store.complete(&plain)).await?
            };
            for (fence, output) in &outputs {
                let write = Box::pin(shared.store.complete_with_output(*fence, output));
                settled += u64::from(write.await?);
            }
            settled
        };
        shared.settled.notify_waiters();
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
