//! Presence: the worker's row in `jobq_workers`, so that operators and
//! tools see which workers run, where, on which queues, and which jobs
//! they can run ([`Jobq::workers`](crate::Jobq::workers)).
//!
//! One row per [`Worker`](crate::Worker), keyed by a random id new at each
//! start. Written when the worker starts, refreshed every presence
//! interval (running count, last seen, expiry three intervals ahead),
//! deleted at the end of a clean shutdown. A worker that stops refreshing
//! (killed, frozen, cut off) is ignored by readers once its row expires,
//! and a worker refreshing deletes the row within ten intervals of that:
//! no leader. Per worker, per interval: an UPDATE of a table of a few
//! rows, and every tenth interval a DELETE; nothing per job or per claim.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::task::TaskTracker;

use crate::store::WorkerRow;
use crate::worker::shared::Shared;
use crate::worker::util::{backoff, quietly, unless};

/// What a worker publishes of itself, computed once when it is built, and
/// where its running count comes from.
#[derive(Debug)]
pub(in crate::worker) struct Presence {
    pub(in crate::worker) shared: Arc<Shared>,
    /// The row's key: random, new at each start.
    pub(in crate::worker) id: i64,
    host: String,
    pid: i64,
    /// The served queues and their concurrency, as JSON.
    queues: String,
    /// The job kinds of the registry, as JSON.
    jobs: String,
    /// The job tasks, counted as the running count.
    running: TaskTracker,
}

impl Presence {
    pub(in crate::worker) fn new(
        shared: Arc<Shared>,
        queues: String,
        jobs: String,
        running: TaskTracker,
    ) -> Self {
        Self {
            shared,
            id: crate::store::new_token_base(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: i64::from(std::process::id()),
            queues,
            jobs,
            running,
        }
    }
}

/// A worker's row expires this many presence intervals after its last
/// refresh: two refreshes may be missed (a slow statement, a short outage)
/// before it counts as gone.
const EXPIRY_INTERVALS: u32 = 3;

/// Expired rows of other workers are deleted every this many refreshes:
/// nothing reads an expired row, so they only take room meanwhile, and an
/// idle worker's statements stay under one a second (see
/// `wakeup::WATCH_EVERY`).
const PRUNE_EVERY: u32 = 10;

/// How long a row lives without a refresh.
fn ttl(shared: &Shared) -> Duration {
    shared.settings.presence * EXPIRY_INTERVALS
}

/// Registers the worker at once, then refreshes its row every presence
/// interval and deletes expired rows of other workers. A refresh that
/// finds the row gone (it was deleted as expired while this worker could
/// not reach the database) registers it again. A failed write is logged
/// and tried again after a backoff (at most one interval): presence never
/// stops a worker from working.
pub(in crate::worker) async fn presence_loop(presence: Arc<Presence>) {
    let shared = &presence.shared;
    let interval = shared.settings.presence;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failures = 0u32;
    let mut registered = false;
    let mut beats = 0u32;
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => return,
            _ = ticks.tick() => {}
        }
        // Stopped mid-statement too: a frozen database does not hold up the shutdown.
        // Expired rows are deleted every PRUNE_EVERY beats.
        let prune = registered && beats % PRUNE_EVERY == 0;
        beats = beats.wrapping_add(1);
        let Some(beaten) =
            unless(&shared.stop_background, beat(&presence, registered, prune)).await
        else {
            return;
        };
        // Tried once: later beats refresh first, so a registration whose
        // outcome was unknown is not inserted twice.
        registered = true;
        match beaten {
            Ok(()) => failures = 0,
            Err(error) => {
                failures += 1;
                quietly(|| {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "refreshing this worker's row in jobq_workers failed (has Jobq::migrate run?); it is tried again"
                    );
                });
                ticks.reset_after(backoff(failures).min(interval));
            }
        }
    }
}

/// The first beat registers the worker: one INSERT, which a worker
/// starting has to wait for on SQLite's one write lock, and nothing else
/// (a worker started for a short drain pays one statement at its start).
/// Every later one refreshes the row (registering it again if it was
/// deleted as expired) and, if `prune`, deletes the rows of workers gone.
async fn beat(presence: &Presence, registered: bool, prune: bool) -> crate::Result<()> {
    let shared = &*presence.shared;
    let running = i64::try_from(presence.running.len()).unwrap_or(i64::MAX);
    let ttl = ttl(shared);
    if !registered
        || !shared
            .store
            .refresh_worker(presence.id, running, ttl)
            .await?
    {
        let row = WorkerRow {
            id: presence.id,
            worker_id: &shared.worker_id,
            host: &presence.host,
            pid: presence.pid,
            version: env!("CARGO_PKG_VERSION"),
            queues: &presence.queues,
            jobs: &presence.jobs,
            running,
            ttl,
        };
        shared.store.register_worker(&row).await?;
    }
    if prune {
        shared.store.prune_workers().await?;
    }
    Ok(())
}

/// Deletes the row `id` of the worker, at the end of its shutdown (after
/// the presence loop stopped, so no refresh writes it again). Bounded by
/// one presence interval; if it fails, the row expires on its own.
pub(in crate::worker) async fn unregister(shared: &Shared, id: i64) {
    let wait = shared.settings.presence.max(Duration::from_secs(1));
    match tokio::time::timeout(wait, shared.store.unregister_worker(id)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "deleting this worker's row from jobq_workers failed; it expires on its own"
            );
        }),
        Err(_elapsed) => quietly(|| {
            tracing::warn!(
                "deleting this worker's row from jobq_workers took too long; it expires on its own"
            );
        }),
    }
}
