//! The reaper: returns other workers' expired jobs to `pending`.

use std::sync::Arc;

use super::shared::{Shared, jittered_pause, unless};
use crate::wakeup;

/// Most expired jobs the reaper returns per statement.
const REAP_BATCH: u32 = 500;

pub(super) async fn reaper_loop(shared: Arc<Shared>) {
    let interval = shared.settings.reap_interval();
    while jittered_pause(&shared.stop_background, interval).await {
        for (queue, metrics) in shared.queue_names.iter().zip(&shared.queue_metrics) {
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
    }
}
