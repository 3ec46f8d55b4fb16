//! A queue's claim loop: claims, claims ahead (prefetch) and paces polling.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Pipeline;
use super::attempt::{self, Pace};
use crate::error::Result;
use crate::metrics::{Outcome, QueueMetrics};
use crate::store::{ClaimedJob, Fence, Flow, Target, Transition};
use crate::wakeup;
use crate::worker::inject;
use crate::worker::settings::QueueSpec;
use crate::worker::shared::Shared;
use crate::worker::upkeep::pause;
use crate::worker::util::{backoff, panicked, quietly, unless};

/// A queue's claim loop: keeps the queue's slots fed from a small buffer of
/// claimed jobs, refilled by one claim at a time.
///
/// Without a buffer, every slot that frees waits a whole claim round trip
/// for its next job, and a worker of short jobs spends its time waiting on
/// the database. So the loop claims, besides the free slots, as many extra
/// jobs as the slots are expected to finish during one claim: concurrency ×
/// claim round trip ÷ the jobs' run time (both moving averages), at most
/// `MAX_PREFETCH_FACTOR` × concurrency; and it counts the buffered jobs the
/// slots will have started by the time the claim returns as gone already,
/// so that the claim replaces them. Jobs that take longer than a claim
/// are never claimed ahead of a free slot, so a worker of slow jobs holds
/// nothing another worker could be running. Claimed jobs are held (their
/// leases renewed) from the claim on, start in claim order, and on shutdown
/// those not started go back to `pending` without counting an attempt.
///
/// While the queue is paused (as the worker's pause loop last read it, see
/// [`pause::pause_loop`]) the loop claims nothing, wake-ups included: the
/// jobs it holds run and settle, and it claims at once when the pause is
/// lifted.
pub(in crate::worker) async fn claim_loop(
    pipeline: Arc<Pipeline>,
    queue: QueueSpec,
    queue_metrics: Arc<QueueMetrics>,
) {
    let shared = &*pipeline.shared;
    let mut pauses = pipeline.pauses.clone();
    let slots = Arc::new(Semaphore::new(queue.concurrency));
    let pace = Arc::new(Pace::default());
    let wake = wakeup::subscribe(&queue.name);
    let waiting = wakeup::waiting(&queue.name);
    // Shared by the queue's attempt tasks (a reference count each, not a copy).
    let queue_name: Arc<str> = Arc::from(queue.name.as_str());
    let mut buffer: VecDeque<attempt::Registered> = VecDeque::new();
    // Payload bytes in `buffer`, and a moving average of a claimed payload's size.
    let mut buffered_bytes = 0usize;
    let mut payload_size = 0usize;
    let mut claiming: Option<BoxFuture<'static, (Result<Claimed>, Duration)>> = None;
    // Moving average of a claim's round trip.
    let mut round_trip = Duration::ZERO;
    let mut failures = 0u32;
    // Whether the last claim came back full: more jobs are probably waiting.
    let mut backlog = false;
    // Claims in a row that found nothing; an idle worker starts idle.
    let mut empty_claims = u32::MAX;
    // When to claim without a wake-up or backlog.
    let mut next_poll = tokio::time::Instant::now();
    // When the last claim found nothing and no limit, rate or key held
    // anything back: while the database watcher covers the queue, the
    // next poll is a safety net from then.
    let mut idle_since: Option<tokio::time::Instant> = None;
    // Empty claims in a row since a wake-up or a claim that found jobs: a
    // loop woken for jobs another worker took polls once more at its
    // interval before it leaves the queue to the watcher (in a burst
    // shared by several workers, that next poll finds the rest).
    let mut empty_since_wake = 0u32;
    let woken = wake.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let mut was_woken = false;
    // The queue's global limit held due jobs back at the last claim (and
    // how many claims in a row): the next claim comes when a settle of this
    // worker frees a slot, or after a short pause for other workers' settles.
    let mut held_back = false;
    let mut held_claims = 0u32;
    let settled = shared.settled.notified();
    tokio::pin!(settled);
    settled.as_mut().enable();
    // The queue's rate held due jobs back at the last claim: the next claim
    // comes when the rate allows the next start (`next_poll`), not at a
    // wake-up or a settle.
    let mut rate_held = false;
    // The last claim took jobs a key's rate sent back: claim no job ahead
    // of a free slot (it would only be sent back too).
    let mut key_throttled = false;
    // The limit of the claim in flight.
    let mut asked = 0;
    loop {
        if !buffer.is_empty() {
            inject::point!(Buffered, &queue.name);
        }
        // Start what the free slots can take, in claim order.
        let mut started = false;
        while !buffer.is_empty() {
            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                break;
            };
            let size = start_next(
                &pipeline,
                &queue_name,
                &mut buffer,
                permit,
                &pace,
                &queue_metrics,
            );
            buffered_bytes -= size;
            pipeline.buffered_bytes.fetch_sub(size, Ordering::Relaxed);
            started = true;
        }
        if started {
            // tokio keeps the task spawned last in a slot that only this
            // worker runs, and wakes no other worker for it: a handler that
            // blocks its thread from there can leave the runtime's I/O driver
            // unpolled, stalling every database call in the process. Spawning
            // an empty task after the jobs moves them where idle workers can
            // take them, and wakes one.
            tokio::spawn(async {});
        }
        // The queue's controls as last read, once for the whole turn: whether
        // it is paused and whether it claims through its slots and its rate
        // come from the same read. Read twice, a first read arriving in
        // between made a turn that saw no controls yet (so no limit) and
        // then "not paused" claim past the limit.
        let (paused, limited) = {
            let controls = pauses.borrow_and_update();
            (
                pause::holds(&controls, &queue.name),
                pause::limited(&controls, &queue.name),
            )
        };
        inject::stall!(ControlsRead, &queue.name);
        // Under a global limit, a job claimed ahead would hold a slot
        // another worker could be running it in. Under a rate it spends its
        // start at the claim and runs when a slot frees: about one claim
        // round trip later, what claiming ahead is sized for (jobs longer
        // than a claim are never claimed ahead).
        let ahead = if limited.slots || key_throttled {
            0
        } else {
            prefetch(queue.concurrency, round_trip, pace.get())
        }
        .min(
            // Within the byte budget, at the payload size seen so far.
            shared
                .settings
                .claim_ahead_bytes
                .saturating_sub(buffered_bytes)
                / payload_size.max(1),
        );
        // The buffered jobs the slots will have started by the time a claim
        // sent now returns: what the claim must replace besides the free
        // slots. Counting them as still buffered made each claim ask only
        // for what the last one's round trip had used: a buffer drained
        // during one claim was refilled by the next, claims alternated
        // between a few jobs and the rest, and the slots waited on every
        // other claim (a drain of no-op jobs at concurrency 1 ran at half
        // the rate one claim in flight allows). Not under a limit, a rate
        // or a key's rate, whose claims take only what starts at once.
        let used_during_claim = if limited.slots || limited.rate || key_throttled {
            0
        } else {
            during_claim(queue.concurrency, round_trip, pace.get()).min(buffer.len())
        };
        let wanted_now = || {
            claim_size(
                slots.available_permits(),
                ahead,
                buffer.len(),
                used_during_claim,
            )
        };
        let wanted = wanted_now();
        // Armed before the due time is read, so a hint after it is not
        // missed; only while the loop may leave its queue to the watcher
        // (not on every turn of a busy loop).
        let mut hinted = idle_since.map(|_| Box::pin(waiting.hinted()));
        if let Some(hinted) = hinted.as_mut() {
            hinted.as_mut().enable();
        }
        // The database watcher finds this queue's due jobs (whoever made
        // them due: an enqueue, a schedule, a retry, a reap) and wakes
        // the loop: its own polls are only the net under it.
        // A poll interval shorter than the watcher's look is kept (the
        // watcher would find jobs later than it); a job this process sent
        // back for later is claimed when due.
        let poll_at = match idle_since {
            Some(since)
                if !backlog
                    && failures == 0
                    && shared.settings.poll >= wakeup::POLL_WATCHED_FROM
                    && shared.watch.jobs() =>
            {
                let net = next_poll.max(since + shared.settings.poll.max(WATCHED_POLL));
                waiting
                    .next_due()
                    .map_or(net, |due| net.min(due.max(next_poll)))
            }
            _ => next_poll,
        };
        let due = !paused && (backlog || was_woken || tokio::time::Instant::now() >= poll_at);
        if claiming.is_none() && wanted > 0 && due {
            if backlog && buffer.is_empty() && ahead == 0 {
                // Jobs end in bursts (a batch started together): let the ones
                // finishing right now hand back their slots, so one claim
                // serves the whole burst. Never waits on a running job.
                for _ in 0..4 {
                    let free = slots.available_permits();
                    tokio::task::yield_now().await;
                    if slots.available_permits() == free {
                        break;
                    }
                }
            }
            let wanted = wanted_now();
            // Re-armed before the claim, so an enqueue during the claim is not missed.
            if was_woken {
                empty_since_wake = 0;
            }
            was_woken = false;
            woken.set(wake.notified());
            woken.as_mut().enable();
            settled.set(shared.settled.notified());
            settled.as_mut().enable();
            asked = wanted;
            waiting.claiming();
            claiming = Some(claim(
                &pipeline,
                &queue.name,
                wanted,
                limited,
                &queue_metrics,
            ));
        }
        let idle_claimer = claiming.is_none() && wanted > 0 && !paused;
        // Waiting for jobs from elsewhere (not for a limit's slot or a
        // rate's next start): a database waiter may watch on its behalf.
        // A queue whose last claim found jobs claims again in a moment anyway.
        let _waiting = (idle_claimer
            && !backlog
            && !was_woken
            && empty_claims > 0
            && failures == 0
            && !held_back
            && !rate_held)
            .then(|| waiting.wait());
        tokio::select! {
            biased;
            () = shared.stop_claiming.cancelled() => break,
            (result, took) = async { claiming.as_mut().expect("a claim in flight").await }, if claiming.is_some() => {
                claiming = None;
                match result {
                    Ok(Claimed { jobs, held_back: held, next_start, wake }) => {
                        quietly(|| tracing::trace!(asked, got = jobs.len(), ?took, buffered = buffer.len(), free = slots.available_permits(), "claimed"));
                        failures = 0;
                        round_trip = if round_trip.is_zero() { took } else { (round_trip * 7 + took) / 8 };
                        backlog = jobs.len() == asked;
                        empty_claims = if jobs.is_empty() { empty_claims.saturating_add(1) } else { 0 };
                        // Once the polls after a claim with jobs have backed
                        // off to their longest: a stream's quick re-claims stay.
                        let backed_off = empty_claims >= BACKED_OFF
                            || poll_after(shared.settings.poll, empty_claims) >= shared.settings.poll;
                        empty_since_wake = if jobs.is_empty() { empty_since_wake.saturating_add(1) } else { 0 };
                        idle_since = (empty_since_wake >= 2 && backed_off && !held && next_start.is_none() && wake.is_none())
                            .then(tokio::time::Instant::now);
                        next_poll = tokio::time::Instant::now() + poll_after(shared.settings.poll, empty_claims);
                        held_back = held;
                        if held || next_start.is_some() {
                            held_claims = held_claims.saturating_add(1);
                            next_poll = tokio::time::Instant::now() + held_poll(shared.settings.poll, held_claims);
                        } else {
                            held_claims = 0;
                        }
                        rate_held = false;
                        if let Some(next) = next_start.filter(|next| !next.is_zero()) {
                            // The rate allows no start before `next`: sleep
                            // until then (the concurrency limit's own wait
                            // is the shorter, if it held too).
                            rate_held = true;
                            next_poll = next_poll.max(tokio::time::Instant::now() + next);
                        }
                        key_throttled = wake.is_some();
                        if let Some(wake) = wake.filter(|_| !rate_held) {
                            // Back when the first job a key's rate sent back may start.
                            next_poll = next_poll.min(tokio::time::Instant::now() + wake);
                        }
                        let mut added = 0;
                        for job in &jobs {
                            let size = job.payload_len();
                            added += size;
                            payload_size = if payload_size == 0 { size } else { payload_size - payload_size / 8 + size / 8 };
                        }
                        buffered_bytes += added;
                        pipeline.buffered_bytes.fetch_add(added, Ordering::Relaxed);
                        buffer.extend(jobs);
                    }
                    Err(error) => {
                        failures += 1;
                        idle_since = None;
                        backlog = false;
                        held_back = false;
                        rate_held = false;
                        was_woken = false;
                        let pause = backoff(failures);
                        next_poll = tokio::time::Instant::now() + pause;
                        quietly(|| {
                            tracing::warn!(
                                error = &error as &dyn std::error::Error,
                                retry_in = ?pause,
                                "claim failed; retrying"
                            );
                        });
                    }
                }
            }
            // A slot came free: handed back at once, for the top of the loop
            // to start a buffered job on or to claim for.
            permit = Arc::clone(&slots).acquire_owned(), if !buffer.is_empty() || wanted == 0 => {
                if permit.is_err() {
                    break;
                }
            }
            // The paused queues changed: claim at once if this one was
            // lifted. Likewise the rates: a rate changed or removed while
            // this loop waits for its next start is claimed under at once.
            changed = pauses.changed(), if paused || rate_held => {
                if changed.is_err() {
                    break;
                }
                next_poll = tokio::time::Instant::now();
                idle_since = None;
            }
            () = &mut woken, if idle_claimer && !was_woken && failures == 0 && !rate_held => was_woken = true,
            // A settle of this worker's freed a slot of the limited queue.
            () = &mut settled, if idle_claimer && held_back && !was_woken && !rate_held => was_woken = true,
            () = tokio::time::sleep_until(poll_at), if idle_claimer && !backlog && !was_woken => {}
            // A job this process sent back comes due sooner than the loop's next poll.
            () = async { hinted.as_mut().expect("armed").await }, if hinted.is_some() && idle_claimer && poll_at > next_poll => {}
        }
    }
    // Stopping: a claim in flight may already hold rows; take them, then
    // hand back everything that did not start. A claim still going when
    // the shutdown's deadline passes is dropped (its connection closed):
    // rows it may have claimed are reaped after their lease.
    if let Some(in_flight) = claiming
        && let Some((Ok(claimed), _)) = unless(&shared.deadline_passed, in_flight).await
    {
        buffer.extend(claimed.jobs);
    }
    pipeline
        .buffered_bytes
        .fetch_sub(buffered_bytes, Ordering::Relaxed);
    attempt::release_unstarted(&pipeline, &queue.name, buffer.into(), &queue_metrics).await;
}

/// Claims up to `limit` jobs of `queue` and registers them as held (in the
/// same poll as the claim returns: no await point between); also reports how
/// long the claim took. A panic in the claim (a subscriber's, inside the
/// driver) is a failed claim. Records the claim's latency, its jobs and
/// how long each had been due in `metrics`.
///
/// A queue with a global concurrency limit or a rate (`limited`) claims
/// through its slots and its rate ([`crate::store::Store::claim_limited`]);
/// the claim then also says whether the limit held due jobs back, and
/// when the rate did, how long until its next start.
fn claim(
    pipeline: &Arc<Pipeline>,
    queue: &str,
    limit: usize,
    limited: Flow,
    metrics: &Arc<QueueMetrics>,
) -> BoxFuture<'static, (Result<Claimed>, Duration)> {
    let pipeline = Arc::clone(pipeline);
    let queue = queue.to_owned();
    let metrics = Arc::clone(metrics);
    Box::pin(async move {
        let started = tokio::time::Instant::now();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let shared = &pipeline.shared;
        let (lease, worker) = (shared.settings.lease, &shared.worker_id);
        let result = AssertUnwindSafe(async {
            if limited.slots || limited.rate {
                let claim = shared
                    .store
                    .claim_limited(&queue, limit, lease, worker, limited)
                    .await?;
                Ok((claim.jobs, claim.held_back, claim.next_start))
            } else {
                Ok((
                    shared.store.claim(&queue, limit, lease, worker).await?,
                    false,
                    None,
                ))
            }
        })
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked("claim", panic.as_ref())));
        let (result, held_back, next_start, wake) = match result {
            Ok((jobs, held_back, next_start)) => {
                let (jobs, wake) = throttle(shared, jobs).await;
                (Ok(jobs), held_back, next_start, wake)
            }
            Err(error) => (Err(error), false, None, None),
        };
        let answered = tokio::time::Instant::now();
        if let Ok(jobs) = &result {
            metrics.claimed(jobs.len(), answered - started);
            for waited in jobs.iter().filter_map(|job| job.waited()) {
                metrics.waited(waited);
            }
        }
        let registered = result.map(|jobs| {
            jobs.into_iter()
                .map(|job| attempt::register(&pipeline, job, started, answered))
                .collect::<Vec<_>>()
        });
        if registered.is_ok() && inject::fire(inject::Point::Claimed, &queue).is_some() {
            panic!("jobq fault injection: the claim loop dropped after a claim");
        }
        let claimed = registered.map(|jobs| Claimed {
            jobs,
            held_back,
            next_start,
            wake,
        });
        (claimed, answered - started)
    })
}

/// The claimed `jobs` whose keys' rates gave them a start now: for each
/// key with a rate ([`Shared::rated_keys`]) among them, takes starts from
/// its rate for its jobs in claim order, and sends the rest back to
/// `pending`, each to the start the rate gives it (one interval apart
/// after the next), their attempts not counted. Sent back with a fenced
/// transition, so nothing else holds them; one whose transition fails
/// stays `processing` unheld and is reaped when its lease runs out. A
/// key whose starts cannot be read sends all its jobs back one poll
/// interval on: the rate is never exceeded for want of a read.
async fn throttle(
    shared: &Shared,
    mut jobs: Vec<ClaimedJob>,
) -> (Vec<ClaimedJob>, Option<Duration>) {
    let mut rated: Vec<String> = {
        let keys = shared
            .rated_keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if keys.is_empty() {
            return (jobs, None);
        }
        jobs.iter()
            .filter_map(|job| job.concurrency_key.as_ref())
            .filter(|key| keys.contains(*key))
            .cloned()
            .collect()
    };
    rated.sort_unstable();
    rated.dedup();
    let mut later: Vec<(Fence, Duration)> = Vec::new();
    for key in &rated {
        let of_key: Vec<Fence> = jobs
            .iter()
            .filter(|job| job.concurrency_key.as_ref() == Some(key))
            .map(ClaimedJob::fence)
            .collect();
        let ids: Vec<i64> = of_key.iter().map(|fence| fence.id).collect();
        match shared.store.take_key_starts(key, &ids).await {
            Ok(Some(starts)) => {
                let taken = starts.taken as usize;
                for (n, fence) in of_key.into_iter().skip(taken).enumerate() {
                    let n = u32::try_from(n).unwrap_or(u32::MAX);
                    later.push((fence, starts.later(n)));
                }
            }
            // The rate was removed since the pause loop read it.
            Ok(None) => {}
            Err(error) => {
                quietly(|| {
                    tracing::warn!(error = &error as &dyn std::error::Error, key = %key, "taking starts from a key's rate failed; its jobs go back for one poll interval");
                });
                later.extend(of_key.into_iter().map(|f| (f, shared.settings.poll)));
            }
        }
    }
    for (fence, delay) in &later {
        let back = Transition {
            fence: *fence,
            target: Target::Pending,
            delay: *delay,
            refund_attempt: true,
            error: None,
            record: None,
        };
        if let Err(error) = shared.store.transition(&back).await {
            quietly(|| {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    job.id = fence.id,
                    "sending a job its key's rate held back to pending failed; it is reaped when its lease runs out"
                );
            });
        }
    }
    jobs.retain(|job| !later.iter().any(|(fence, _)| fence.id == job.id));
    (jobs, later.iter().map(|&(_, delay)| delay).min())
}

/// What one claim of the loop took.
struct Claimed {
    jobs: Vec<attempt::Registered>,
    /// The queue's global limit held due jobs back: no more slots were free.
    held_back: bool,
    /// The queue's rate held due jobs back: its next start is this far off
    /// (zero: another claim held the rate, try again soon).
    next_start: Option<Duration>,
    /// Jobs a key's rate sent back: the first may start this far off (the
    /// loop claims again then, if not sooner).
    wake: Option<Duration>,
}

/// Starts the oldest buffered job on `permit`, unless its lease was lost
/// while it waited (then the permit goes back); returns the size of the
/// payload it took from the buffer.
fn start_next(
    pipeline: &Arc<Pipeline>,
    queue: &Arc<str>,
    buffer: &mut VecDeque<attempt::Registered>,
    permit: OwnedSemaphorePermit,
    pace: &Arc<Pace>,
    queue_metrics: &QueueMetrics,
) -> usize {
    let Some(next) = buffer.pop_front() else {
        return 0;
    };
    let size = next.payload_len();
    if next.lost() {
        next.ended_unstarted(queue_metrics, Outcome::LeaseLost);
    } else {
        attempt::start(pipeline, queue, next, permit, pace, queue_metrics);
    }
    size
}

/// Most jobs claimed ahead of free slots, as a multiple of the concurrency.
const MAX_PREFETCH_FACTOR: usize = 8;

/// How many jobs to claim beyond the free slots: about as many as the busy
/// slots finish during one claim round trip, so none of them waits on the
/// database. None until both the claim and the jobs have been timed.
fn prefetch(concurrency: usize, round_trip: Duration, job: Option<Duration>) -> usize {
    during_claim(concurrency, round_trip, job).min(concurrency.saturating_mul(MAX_PREFETCH_FACTOR))
}

/// How many jobs a claim sent now asks for: the `free` slots and the jobs
/// to claim `ahead` of them, less the `buffered` jobs that will still wait
/// when it returns (those the slots do not start, `used_during_claim`,
/// during its round trip).
fn claim_size(free: usize, ahead: usize, buffered: usize, used_during_claim: usize) -> usize {
    (free + ahead).saturating_sub(buffered.saturating_sub(used_during_claim))
}

/// How many jobs `concurrency` slots start during one claim round trip, at
/// the jobs' run time `job`. None until both have been timed.
fn during_claim(concurrency: usize, round_trip: Duration, job: Option<Duration>) -> usize {
    let Some(job) = job else { return 0 };
    if round_trip.is_zero() {
        return 0;
    }
    // (A float's cast saturates.)
    (concurrency as f64 * round_trip.as_secs_f64() / job.as_secs_f64().max(1e-9)) as usize
}

/// How long a claim loop held back by its queue's global limit waits for
/// another worker's settle to free a slot (its own settles wake it at
/// once), after `held_claims` such claims in a row: as [`poll_after`],
/// at most a quarter of the poll interval.
fn held_poll(poll: Duration, held_claims: u32) -> Duration {
    let fast = (poll / 32).max(ACTIVE_POLL).min(poll);
    fast.saturating_mul(1 << held_claims.saturating_sub(1).min(6))
        .min(poll / 4)
}

/// The safety net's poll of an idle queue the database watcher covers
/// (see [`crate::wakeup::Watch`]), unless the poll interval is longer.
const WATCHED_POLL: Duration = Duration::from_secs(60);

/// The wait after a claim that found jobs: [`poll_after`]'s shortest.
const ACTIVE_POLL: Duration = Duration::from_millis(1);

/// Adaptive polling: how long to wait before claiming again without a
/// wake-up after `empty_claims` claims in a row found nothing. Jobs that
/// just arrived are likely followed by more, so after a claim that found
/// some the next comes [`ACTIVE_POLL`] later (a stream of thousands a
/// second is claimed in batches a millisecond apart, whether or not a
/// wake-up comes for each job), then twice as long after each empty claim,
/// back to the full interval. Jobs from other processes wake an idle queue
/// at once (see `wakeup` and the stores' wake-ups); polling is the net
/// under them.
fn poll_after(poll: Duration, empty_claims: u32) -> Duration {
    ACTIVE_POLL
        .min(poll)
        .saturating_mul(1 << empty_claims.min(BACKED_OFF))
        .min(poll)
}

/// Empty claims in a row after which [`poll_after`] waits its longest.
const BACKED_OFF: u32 = 12;

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A claim of no-op jobs at concurrency 1: eight came back, one
    /// started. The seven still buffered run long before the next claim
    /// returns, so it asks for eight more, not for the one the slot took.
    #[test]
    fn a_claim_replaces_the_buffered_jobs_its_round_trip_uses() {
        let (round_trip, job) = (MS / 2, Some(MS / 50));
        let ahead = prefetch(1, round_trip, job);
        assert_eq!(ahead, 8, "capped at 8 × the concurrency");
        let used = during_claim(1, round_trip, job).min(7);
        assert_eq!(claim_size(0, ahead, 7, used), 8);
        // Counting them as still buffered: the alternation of 1 and 8.
        assert_eq!(claim_size(0, ahead, 7, 0), 1);
    }

    /// Jobs slower than a claim: nothing ahead, nothing counted as used, a
    /// claim asks for the free slots the buffer does not fill.
    #[test]
    fn slow_jobs_are_claimed_for_free_slots_only() {
        let (round_trip, job) = (MS / 2, Some(MS * 10));
        assert_eq!(prefetch(8, round_trip, job), 0);
        let used = during_claim(8, round_trip, job);
        assert_eq!(used, 0);
        assert_eq!(claim_size(3, 0, 1, used), 2);
        assert_eq!(claim_size(3, 0, 5, used), 0);
    }

    /// Untimed (the first claim, or no job run yet): no claiming ahead.
    #[test]
    fn nothing_is_claimed_ahead_before_claims_and_jobs_are_timed() {
        assert_eq!(during_claim(4, MS, None), 0);
        assert_eq!(during_claim(4, Duration::ZERO, Some(MS)), 0);
        assert_eq!(prefetch(4, Duration::ZERO, Some(MS)), 0);
    }

    /// Jobs as long as a claim's round trip at concurrency 8: eight are
    /// claimed ahead, and the eight buffered now will have started.
    #[test]
    fn jobs_as_long_as_a_claim_are_replaced_one_for_one() {
        // (Whole seconds: the ratio is exact in floating point.)
        let second = Duration::from_secs(1);
        let (round_trip, job) = (second, Some(second));
        let ahead = prefetch(8, round_trip, job);
        assert_eq!(ahead, 8);
        let used = during_claim(8, round_trip, job).min(8);
        assert_eq!(claim_size(0, ahead, 8, used), 8);
        // Twelve buffered: four will still wait, four more are asked for.
        let used = during_claim(8, round_trip, job).min(12);
        assert_eq!(claim_size(0, ahead, 12, used), 4);
    }
}
