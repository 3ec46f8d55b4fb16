//! The pruner: deletes finished rows past their retention.

use std::sync::Arc;

use crate::store::Prunable;
use crate::worker::shared::Shared;
use crate::worker::util::{jittered_pause, unless};

/// Deletes finished rows past their retention, at jittered intervals.
pub(in crate::worker) async fn prune_loop(shared: Arc<Shared>) {
    let Some(interval) = shared.settings.prune_interval() else {
        return;
    };
    let kinds = [
        (Prunable::Finished, shared.settings.prune_finished),
        (Prunable::Failed, shared.settings.prune_failed),
    ];
    while jittered_pause(&shared.stop_background, interval).await {
        for (which, retention) in kinds {
            let Some(retention) = retention else { continue };
            let pruned = unless(
                &shared.stop_background,
                shared.store.prune_all(which, retention),
            );
            let Some(pruned) = pruned.await else { return };
            match pruned {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(?which, deleted, "pruned finished jobs"),
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    ?which,
                    "pruning finished jobs failed; trying again at the next interval"
                ),
            }
        }
    }
}
