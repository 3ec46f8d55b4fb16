//! Periodic jobs: every worker that schedules one enqueues it at each tick
//! of its cron schedule with the idempotency key `cron:{name}:{tick}`, so
//! exactly one row exists per tick however many workers schedule it, without
//! a leader.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use croner::Cron;
use futures_util::future::BoxFuture;
use jobq_core::Job;
use tokio_util::sync::CancellationToken;

use crate::error::{ConfigError, Result};
use crate::handle::Jobq;
use crate::types::{Enqueue, Enqueued};

/// Longest single sleep before a tick: the wall clock is looked at again
/// after it, so a clock that was set or a machine that slept is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Pause after a failed enqueue of a tick, doubling up to [`MAX_RETRY_PAUSE`].
const RETRY_PAUSE: Duration = Duration::from_millis(250);
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(10);

/// Enqueues the entry's job with the given idempotency key.
type EnqueueFn = Arc<dyn Fn(Jobq, String) -> BoxFuture<'static, Result<Enqueued>> + Send + Sync>;

/// A schedule as given to the builder, parsed at `build`.
pub(in crate::worker) struct CronSpec {
    name: &'static str,
    schedule: String,
    enqueue: EnqueueFn,
}

impl fmt::Debug for CronSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSpec")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl CronSpec {
    pub(in crate::worker) fn new<J>(schedule: &str, job: J, options: Enqueue) -> Self
    where
        J: Job + Clone + Send + Sync + 'static,
    {
        let enqueue: EnqueueFn = Arc::new(move |jobq: Jobq, key: String| {
            let job = job.clone();
            let options = options.clone().idempotency_key(key);
            Box::pin(async move { jobq.enqueue_with(job, options).await })
        });
        Self {
            name: J::NAME,
            schedule: schedule.to_owned(),
            enqueue,
        }
    }

    pub(in crate::worker) fn name(&self) -> &'static str {
        self.name
    }

    /// Parses the schedule (see [`WorkerBuilder::cron`](crate::worker::WorkerBuilder::cron)).
    pub(in crate::worker) fn parse(self) -> Result<CronEntry> {
        let cron = Cron::from_str(&self.schedule).map_err(|e| ConfigError::CronSchedule {
            job: self.name,
            schedule: self.schedule.clone(),
            reason: e.to_string(),
        })?;
        Ok(CronEntry { spec: self, cron })
    }
}

/// A parsed schedule and the job it enqueues.
pub(in crate::worker) struct CronEntry {
    spec: CronSpec,
    cron: Cron,
}

impl fmt::Debug for CronEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronEntry").field(&self.spec).finish()
    }
}

impl CronEntry {
    /// The job's name.
    pub(in crate::worker) fn name(&self) -> &'static str {
        self.spec.name
    }
}

/// The idempotency key of `name`'s row for `tick`.
pub(in crate::worker) fn tick_key(name: &str, tick: DateTime<Utc>) -> String {
    format!(
        "cron:{name}:{}",
        tick.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// Enqueues `entry`'s job at each tick until `stop`. Ticks that pass while
/// the database refuses the enqueue, or while the process is not running,
/// are skipped, not made up.
pub(in crate::worker) async fn cron_loop(jobq: Jobq, entry: CronEntry, stop: CancellationToken) {
    let mut after = Utc::now();
    loop {
        let tick = match entry.cron.find_next_occurrence(&after, false) {
            Ok(tick) => tick,
            Err(error) => {
                tracing::error!(job.name = entry.spec.name, %error, "the cron schedule has no next tick; it stops");
                return;
            }
        };
        while let Ok(left) = (tick - Utc::now()).to_std() {
            if left.is_zero() {
                break;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(left.min(MAX_SLEEP)) => {}
            }
        }
        if !enqueue_tick(&jobq, &entry, tick, &stop).await {
            return;
        }
        after = tick.max(Utc::now());
    }
}

/// Enqueues the row of `tick`, retrying until it is stored or the next tick
/// is due; `false` if stopped meanwhile.
async fn enqueue_tick(
    jobq: &Jobq,
    entry: &CronEntry,
    tick: DateTime<Utc>,
    stop: &CancellationToken,
) -> bool {
    let key = tick_key(entry.spec.name, tick);
    let next = entry.cron.find_next_occurrence(&tick, false).ok();
    let mut pause = RETRY_PAUSE;
    loop {
        let enqueue = (entry.spec.enqueue)(jobq.clone(), key.clone());
        let enqueued = tokio::select! {
            biased;
            () = stop.cancelled() => return false,
            enqueued = enqueue => enqueued,
        };
        match enqueued {
            Ok(enqueued) => {
                tracing::debug!(
                    job.name = entry.spec.name,
                    %tick,
                    id = enqueued.id,
                    duplicate = enqueued.duplicate,
                    "cron tick enqueued"
                );
                return true;
            }
            Err(error) => {
                let give_up = next.is_none_or(|next| next <= Utc::now() + pause);
                tracing::warn!(
                    job.name = entry.spec.name,
                    %tick,
                    error = &error as &dyn std::error::Error,
                    give_up,
                    "enqueueing a cron tick failed"
                );
                if give_up {
                    return true;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_RETRY_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticks_key_names_the_job_and_the_second() {
        let tick = DateTime::parse_from_rfc3339("2026-11-30T07:45:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            tick_key("nightly_report", tick),
            "cron:nightly_report:2026-11-30T07:45:00Z"
        );
    }
}
