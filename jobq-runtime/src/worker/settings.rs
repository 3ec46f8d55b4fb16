//! A worker's configuration as the builder checked it: its served queues,
//! its durations and limits. Plain values, copied into whatever needs them.

use std::time::Duration;

use crate::options::DEFAULT_LEASE;

/// A served queue, as configured.
#[derive(Debug, Clone)]
pub(super) struct QueueSpec {
    pub(super) name: String,
    pub(super) concurrency: usize,
    pub(super) checked: bool,
}

/// A worker's durations and limits, as configured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) lease: Duration,
    pub(super) heartbeat: Option<Duration>,
    pub(super) heartbeats_enabled: bool,
    pub(super) poll: Duration,
    pub(super) reap: Option<Duration>,
    pub(super) shutdown_timeout: Duration,
    /// Retention of `done` and `cancelled` rows, if this worker prunes them.
    pub(super) prune_finished: Option<Duration>,
    /// Retention of `failed` rows, if this worker prunes them.
    pub(super) prune_failed: Option<Duration>,
    /// Most payload bytes a queue's claim loop holds claimed ahead of free slots.
    pub(super) claim_ahead_bytes: usize,
    /// How often the stats gauges are refreshed, if at all.
    pub(super) stats_gauges: Option<Duration>,
    /// How often the worker refreshes its row in `jobq_workers`.
    pub(super) presence: Duration,
}

/// Default of [`WorkerBuilder::presence_interval`](super::WorkerBuilder::presence_interval).
pub const DEFAULT_PRESENCE_INTERVAL: Duration = Duration::from_secs(10);

/// Default of [`WorkerBuilder::claim_ahead_bytes`](super::WorkerBuilder::claim_ahead_bytes): 64 MiB per queue.
pub const DEFAULT_CLAIM_AHEAD_BYTES: usize = 64 << 20;

impl Default for Settings {
    fn default() -> Self {
        Self {
            lease: DEFAULT_LEASE,
            heartbeat: None,
            heartbeats_enabled: true,
            poll: Duration::from_millis(500),
            reap: None,
            shutdown_timeout: Duration::from_secs(30),
            prune_finished: None,
            prune_failed: None,
            claim_ahead_bytes: DEFAULT_CLAIM_AHEAD_BYTES,
            stats_gauges: None,
            presence: DEFAULT_PRESENCE_INTERVAL,
        }
    }
}

impl Settings {
    pub(super) fn heartbeat_interval(&self) -> Duration {
        self.heartbeat.unwrap_or(self.lease / 3)
    }

    /// How long before its lease can end a worker stops an attempt it could
    /// not renew: a tenth of the lease (the reaper of another worker may
    /// take the job the moment the lease has ended, and this worker's clock,
    /// timers and scheduling are a little late), but no more than half the
    /// time a heartbeat leaves to spare, so that a heartbeat interval close
    /// to the lease does not stop attempts whose renewal is on its way.
    pub(super) fn lease_margin(&self) -> Duration {
        let spare = self.lease.saturating_sub(self.heartbeat_interval());
        (self.lease / 10).min(spare / 2)
    }

    pub(super) fn reap_interval(&self) -> Duration {
        self.reap.unwrap_or(self.lease / 6)
    }

    /// How often the pruner runs: every minute, or every quarter of the
    /// shortest retention if that is shorter (at least every 100 ms).
    pub(super) fn prune_interval(&self) -> Option<Duration> {
        let shortest = match (self.prune_finished, self.prune_failed) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some((shortest / 4).clamp(Duration::from_millis(100), Duration::from_secs(60)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Settings;

    fn margin(lease: u64, heartbeat: Option<u64>) -> Duration {
        Settings {
            lease: Duration::from_secs(lease),
            heartbeat: heartbeat.map(Duration::from_secs),
            ..Settings::default()
        }
        .lease_margin()
    }

    /// A tenth of the lease with the default heartbeat (a third of it);
    /// half of what is left to spare with a heartbeat close to the lease.
    #[test]
    fn an_unrenewed_attempt_stops_a_tenth_of_the_lease_early_or_half_the_spare_time() {
        assert_eq!(margin(30, None), Duration::from_secs(3));
        assert_eq!(margin(30, Some(20)), Duration::from_secs(3));
        assert_eq!(margin(30, Some(29)), Duration::from_millis(500));
    }
}
