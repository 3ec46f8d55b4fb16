//! Pauses: the worker's one reader of `jobq_queues`, telling its claim
//! loops which of their queues are paused.

use std::sync::Arc;

use tokio::time::MissedTickBehavior;

use super::shared::{Shared, backoff, quietly, unless};

/// Reads the paused queues once per poll interval (one query per interval
/// for the whole worker, whatever the number of queues it serves, and none
/// per claim or job) and publishes those this worker serves to its claim
/// loops, which claim nothing from a paused queue and nothing at all
/// before the first read has succeeded: a worker started while its queue is
/// paused claims nothing from it. When a read fails, the last set read
/// stays in force and the next read comes after a backoff (at most one
/// poll interval).
pub(super) async fn pause_loop(shared: Arc<Shared>) {
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
                shared.pauses.send_if_modified(|known| {
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
                        "reading the paused queues failed (has Jobq::migrate run?); the last ones read stay in force"
                    );
                });
                let pause = backoff(failures).min(poll);
                ticks.reset_after(pause);
            }
        }
    }
}

/// Whether `queue` is to claim nothing now: paused, or the paused queues
/// not read yet.
pub(super) fn holds(paused: &Option<Vec<String>>, queue: &str) -> bool {
    paused
        .as_ref()
        .is_none_or(|paused| paused.iter().any(|p| p == queue))
}
