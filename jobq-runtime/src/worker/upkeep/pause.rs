//! Pauses and limits: the worker's one reader of `jobq_queues`,
//! `jobq_limits` and `jobq_rates`, telling its claim loops which of their
//! queues are paused, which have a global concurrency limit and which a
//! rate.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::error::Error;
use crate::store::{Flow, QueueControl};
use crate::worker::shared::Shared;
use crate::worker::util::{backoff, jittered_pause, quietly, unless};

/// The controls of the served queues that are paused or limited, as last
/// read: `None` until the first read.
pub(in crate::worker) type Paused = Option<Vec<QueueControl>>;

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
///
/// While the database watcher compares the controls for the worker (see
/// [`crate::wakeup::Watch::controls_fresh`]), a tick reads them only as a
/// safety net ([`CONTROLS_NET`]): the watcher wakes the loop when they
/// change, as an announcement from another process does.
pub(in crate::worker) async fn pause_loop(pauses: Arc<Pauses>) {
    let shared = &pauses.shared;
    // The first read goes out beside the migrations' check, so a worker
    // starting waits one round trip for both before it claims.
    // Another process announced changed controls: read them now. Armed
    // before the first read, as before every read: an announcement during
    // it is not missed (a worker's wake-up channel comes up, and says so,
    // while that read is under way).
    let control = crate::wakeup::subscribe(crate::wakeup::CONTROL);
    let mut announced = Box::pin(control.notified());
    announced.as_mut().enable();
    let first_ticket = shared.watch.controls_reading();
    let (migrated, first) = tokio::join!(migrated(shared), shared.store.queue_controls());
    if !migrated {
        return;
    }
    let mut first = Some((first_ticket, first));
    let poll = shared.settings.poll;
    let mut ticks = tokio::time::interval(poll);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failures = 0u32;
    let mut last_read = tokio::time::Instant::now();
    loop {
        tokio::select! {
            biased;
            () = shared.stop_background.cancelled() => return,
            _ = ticks.tick() => {
                // A poll interval under half a second is kept as
                // configured, as the claim loops keep it.
                if first.is_none()
                    && failures == 0
                    && poll >= crate::wakeup::POLL_WATCHED_FROM
                    && shared.watch.controls_fresh(crate::wakeup::WATCH_FRESH)
                    && last_read.elapsed() < CONTROLS_NET.max(poll)
                {
                    continue;
                }
            }
            () = &mut announced, if failures == 0 => ticks.reset(),
        }
        last_read = tokio::time::Instant::now();
        let (ticket, read) = match first.take() {
            Some(first) => first,
            None => {
                announced = Box::pin(control.notified());
                announced.as_mut().enable();
                let ticket = shared.watch.controls_reading();
                let read = unless(&shared.stop_background, shared.store.queue_controls());
                let Some(read) = read.await else {
                    return;
                };
                (ticket, read)
            }
        };
        match read {
            Ok(controls) => {
                failures = 0;
                // The keys' rates before the controls reach the claim
                // loops: their first claims know them too.
                if unless(&shared.stop_background, read_key_rates(shared))
                    .await
                    .is_none()
                {
                    return;
                }
                // A rate's arrival time moves with every claim: not a change.
                let served: Vec<QueueControl> = controls
                    .into_iter()
                    .filter(|c| shared.queue_names.contains(&c.queue))
                    .map(|c| QueueControl { tat: None, ..c })
                    .collect();
                let paused = names(&served, |c| c.paused);
                let limited: Vec<(&str, u32)> = served
                    .iter()
                    .filter_map(|c| c.limit.map(|n| (c.queue.as_str(), n)))
                    .collect();
                let rated: Vec<(&str, String)> = served
                    .iter()
                    .filter_map(|c| c.rate.map(|r| (c.queue.as_str(), r.to_string())))
                    .collect();
                pauses.paused.send_if_modified(|known| {
                    let changed = known.as_ref() != Some(&served);
                    if changed {
                        match known {
                            // The first read logs only queues found paused or limited.
                            None if served.is_empty() => {}
                            None => quietly(|| {
                                tracing::info!(?paused, ?limited, ?rated, "queues paused or limited at start: nothing is claimed from paused ones until resumed");
                            }),
                            Some(before) => {
                                if names(before, |c| c.paused) != paused {
                                    quietly(|| tracing::info!(?paused, "paused queues changed"));
                                }
                                quietly(|| tracing::info!(?limited, ?rated, "queue limits changed"));
                            }
                        }
                        *known = Some(served.clone());
                    }
                    changed
                });
                shared.watch.controls_read(ticket);
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

/// How often the pause loop reads the controls while the database
/// watcher compares them (the net under the watcher's comparisons).
const CONTROLS_NET: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads which concurrency keys have a rate into
/// [`Shared::rated_keys`]; a failed read keeps the last set.
async fn read_key_rates(shared: &Shared) {
    match shared.store.key_rates().await {
        Ok(rates) => {
            let keys: std::collections::HashSet<String> =
                rates.into_iter().map(|(key, _)| key).collect();
            let mut known = shared
                .rated_keys
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *known != keys {
                quietly(|| tracing::info!(keys = keys.len(), "keys with a rate changed"));
                *known = keys;
            }
        }
        Err(error) => quietly(|| {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "reading the keys' rates failed; the last ones read stay in force"
            );
        }),
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

/// Whether `queue` is to claim nothing now: paused, or the controls not
/// read yet.
pub(in crate::worker) fn holds(paused: &Paused, queue: &str) -> bool {
    paused
        .as_ref()
        .is_none_or(|controls| controls.iter().any(|c| c.paused && c.queue == queue))
}

/// Whether `queue` has a global concurrency limit and whether it has a
/// rate, as last read: its claims then take slots or spend starts
/// ([`crate::store::Store::claim_limited`]).
pub(in crate::worker) fn limited(paused: &Paused, queue: &str) -> Flow {
    paused
        .as_ref()
        .and_then(|controls| controls.iter().find(|c| c.queue == queue))
        .map_or(Flow::default(), |c| Flow {
            slots: c.limit.is_some(),
            rate: c.rate.is_some(),
        })
}

/// The names of `controls` that `which` picks.
fn names(controls: &[QueueControl], which: impl Fn(&QueueControl) -> bool) -> Vec<&str> {
    controls
        .iter()
        .filter(|c| which(c))
        .map(|c| c.queue.as_str())
        .collect()
}
