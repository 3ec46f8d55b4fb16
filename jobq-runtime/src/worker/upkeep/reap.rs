//! The reaper: returns other workers' expired jobs to `pending`.

use std::sync::Arc;

use crate::metrics::QueueMetrics;
use crate::wakeup;
use crate::worker::shared::Shared;
use crate::worker::util::{jittered_pause, unless};

/// Most expired jobs the reaper returns per statement.
const REAP_BATCH: u32 = 500;

/// How often the reaper runs while the database watcher reports expired
/// leases (the net under it).
const REAP_NET: std::time::Duration = std::time::Duration::from_secs(60);

/// Pages of concurrency keys the reaper's sweep releases per round
/// (`KEY_SWEEP_PAGE` = 200 keys each), resuming where the last round
/// stopped: every key within (keys / 200) reap intervals of one worker,
/// and no more than 200 key releases a round however many keys there are
/// (each locks its key's row a moment, as an enqueue of the key does).
const KEY_SWEEP_PAGES: u32 = 1;

/// The reaper's state: the served queues with their metric handles (it
/// counts what it returns).
#[derive(Debug)]
pub(in crate::worker) struct Reaper {
    pub(in crate::worker) shared: Arc<Shared>,
    pub(in crate::worker) queues: Vec<(String, Arc<QueueMetrics>)>,
}

/// Returns the served queues' expired jobs to `pending`, at jittered
/// intervals, until the worker's background stops.
///
/// While the database watcher covers every served queue (see
/// [`wakeup::Watch`]), it reports expired leases and an interval passes
/// with no statement: the reaper then runs when told, or as a safety net
/// every [`REAP_NET`].
pub(in crate::worker) async fn reaper_loop(reaper: Arc<Reaper>) {
    let shared = &reaper.shared;
    let interval = shared.settings.reap_interval();
    let mut last_pass = tokio::time::Instant::now();
    // A reap interval shorter than the watcher's look is kept, and its
    // reports are not needed (nor extra passes beside the interval's).
    let watched = interval >= wakeup::WATCH_EVERY;
    loop {
        tokio::select! {
            biased;
            () = shared.watch.expired(), if watched => {}
            pause = jittered_pause(&shared.stop_background, interval) => {
                if !pause {
                    return;
                }
                let covered = watched
                    && shared.watch.jobs()
                    && reaper.queues.iter().all(|(queue, _)| wakeup::waiting(queue).idle());
                if covered && last_pass.elapsed() < REAP_NET.max(interval) {
                    continue;
                }
            }
        }
        last_pass = tokio::time::Instant::now();
        for (queue, metrics) in &reaper.queues {
            loop {
                let reaped = unless(
                    &shared.stop_background,
                    shared.store.reap(queue, REAP_BATCH),
                );
                let Some(reaped) = reaped.await else { return };
                match reaped {
                    Ok(0) => break,
                    Ok(returned) => {
                        metrics.reaped(returned);
                        tracing::info!(queue.name = %queue, returned, "returned jobs with expired leases");
                        wakeup::notify(queue);
                        if returned < u64::from(REAP_BATCH) {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(error = &error as &dyn std::error::Error, queue.name = %queue, "reaping expired leases failed");
                        break;
                    }
                }
            }
        }
        sweep_keys(shared).await;
        sweep_dependents(shared).await;
    }
}

/// Releases what a release after a settle missed in the workflows (see
/// `Store::sweep_dependents`): its process died between the two, or a
/// reaped job failed for good.
async fn sweep_dependents(shared: &Shared) {
    let swept = unless(&shared.stop_background, shared.store.sweep_dependents());
    match swept.await {
        None | Some(Ok(_)) => {}
        Some(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "sweeping the jobs that wait on others failed"
            );
        }
    }
}

/// Releases a share of the concurrency keys (see `Store::sweep_keys`):
/// what a settle did not release (its process died, a reaped job failed
/// for good, a cancel whose release failed) is released here.
async fn sweep_keys(shared: &Shared) {
    let swept = unless(
        &shared.stop_background,
        shared.store.sweep_keys(KEY_SWEEP_PAGES),
    );
    match swept.await {
        None | Some(Ok(0)) => {}
        Some(Ok(unblocked)) => {
            tracing::info!(unblocked, "the key sweep unblocked jobs");
            for queue in &shared.queue_names {
                wakeup::notify(queue);
            }
        }
        Some(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "sweeping concurrency keys failed"
            );
        }
    }
}
