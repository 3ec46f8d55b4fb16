//! The stats gauges: [`Jobq::stats`](crate::Jobq::stats) read once per
//! interval per `Jobq` handle (however many workers share it), its figures
//! set as the per-queue gauges of [`crate::metrics`].

use std::sync::Arc;

use crate::handle::Jobq;
use crate::worker::shared::Shared;
use crate::worker::util::{jittered_pause, quietly, unless};

/// The stats gauges' state: the handle the worker was built on, whose
/// gauges they are (shared by its clones).
#[derive(Debug)]
pub(in crate::worker) struct StatsGauges {
    pub(in crate::worker) shared: Arc<Shared>,
    pub(in crate::worker) jobq: Jobq,
}

/// Refreshes the gauges every `stats_gauges` interval (jittered) until the
/// worker's background stops; a failed read is logged and tried at the next one.
pub(in crate::worker) async fn stats_loop(gauges: Arc<StatsGauges>) {
    let StatsGauges { shared, jobq } = &*gauges;
    let Some(interval) = shared.settings.stats_gauges else {
        return;
    };
    loop {
        if jobq.gauges().take_turn(interval) {
            let Some(stats) = unless(&shared.stop_background, jobq.stats()).await else {
                return;
            };
            match stats {
                Ok(stats) => jobq.gauges().set(&stats),
                Err(error) => quietly(|| {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "reading the stats for the gauges failed; trying again at the next interval"
                    );
                }),
            }
        }
        if !jittered_pause(&shared.stop_background, interval).await {
            return;
        }
    }
}
