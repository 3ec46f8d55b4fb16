//! Pauses: the worker's one reader of `jobq_queues`, telling its claim
//! loops which of their queues are paused.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::error::Error;
use crate::worker::shared::Shared;
use crate::worker::util::{backoff, jittered_pause, quietly, unless};

/// The paused queues as last read: `None` until the first read.
pub(in crate::worker) type Paused = Option<Vec<String>>;

/// The pause loop's state: the sending end of what the claim loops watch.
#[derive(Debug)]
pub(in crate::worker) struct Pauses {
    shared: Arc<Shared>,
    paused: watch::Sender<Paused>,
}

impl Pauses {
    /// The pause loop's state, and what the claim loops watch.
    pub(in crate::worker) fn new(shared: Arc<Shared>) -> (Self, watch::Receiver<Paused>) {
        let (paused, watched) = watch::channel(None);
        (Self { shared, paused }, watched)
    }
}

/// First checks that the database has every migration this jobq needs
/// ([`migrated`]), then reads the paused queues once per poll interval (one
/// query per interval for the whole worker, whatever the number of queues
/// it serves, and none per claim or job) and publishes those this worker
/// serves to its claim loops, which claim nothing from a paused queue and
/// nothing at all before the first read has succeeded: a worker started
/// while its queue is paused claims nothing from it. When a read fails,
/// the last set read stays in force and the next read comes after a
/// backoff (at most one poll interval).
pub(in crate::worker) async fn pause_loop(pauses: Arc<Pauses>) {
    let shared = &pauses.shared;
    if !migrated(shared).await {
        return;
    }
    let poll = shared.settings.poll;
    let mut ticks = tokio::time::interval(poll);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failures = 0u32;
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(read) = unless(&shared.stop_background, shared.store.paused_queues()).await else {
            return;
        };
        match read {
            Ok(paused) => {
                failures = 0;
                let served: Vec<String> = paused
                    .into_iter()
                    .filter(|queue| shared.queue_names.contains(queue))
                    .collect();
                pauses.paused.send_if_modified(|known| {
                    let changed = known.as_ref() != Some(&served);
                    if changed {
                        // The first read logs only queues found paused.
                        match known {
                            None if served.is_empty() => {}
                            None => quietly(|| {
                                tracing::info!(paused = ?served, "queues paused at start: nothing is claimed from them until resumed");
                            }),
                            Some(_) => quietly(|| {
                                tracing::info!(paused = ?served, "paused queues changed");
                            }),
                        }
                        *known = Some(served);
                    }
                    changed
                });
            }
            Err(error) => {
                failures += 1;
                quietly(|| {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "reading the paused queues failed; the last ones read stay in force"
                    );
                });
                let pause = backoff(failures).min(poll);
                ticks.reset_after(pause);
            }
        }
    }
}

/// Whether the database has every migration this jobq needs, read once at
/// the worker's start, before its claim loops may claim anything. A
/// database never migrated, or migrated by an older jobq, fails the worker
/// at once with [`Error::NotMigrated`] or [`Error::MigrationsPending`] (its
/// `run_until` and `shutdown` return it; `false` once the worker stops);
/// another error (the database unreachable) is tried again after a backoff
/// of at most one poll interval, claiming nothing meanwhile.
async fn migrated(shared: &Shared) -> bool {
    let mut failures = 0u32;
    loop {
        match shared.store.check_migrated().await {
            Ok(()) => return true,
            Err(error @ (Error::NotMigrated { .. } | Error::MigrationsPending { .. })) => {
                shared.fail(error);
                shared.stop_background.cancelled().await;
                return false;
            }
            Err(error) => {
                failures += 1;
                quietly(|| {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "reading the migrations applied failed; nothing is claimed until it succeeds"
                    );
                });
                let pause = backoff(failures).min(shared.settings.poll);
                if !jittered_pause(&shared.stop_background, pause).await {
                    return false;
                }
            }
        }
    }
}

/// Whether `queue` is to claim nothing now: paused, or the paused queues
/// not read yet.
pub(in crate::worker) fn holds(paused: &Paused, queue: &str) -> bool {
    paused
        .as_ref()
        .is_none_or(|paused| paused.iter().any(|p| p == queue))
}
