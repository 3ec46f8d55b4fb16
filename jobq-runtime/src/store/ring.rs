//! The [`Ringer`]: wakes other processes' workers after enqueues, on
//! backends whose wake-ups are not the database's own (MySQL's kills of
//! waiting statements, SQLite's datagrams to workers on the same host).
//!
//! Enqueues announce their queues; one task per store rings for all the
//! queues announced since its last round, at most one round per
//! [`RING_PAUSE`] (a bell's own [`Bell::PAUSE`]). PostgreSQL's NOTIFYs
//! for enqueues on jobq's pool go through one too. A job enqueued in a caller's transaction becomes
//! visible when the caller commits, which jobq does not see: the ringer
//! watches for its row (a read of the watched ids each round, for up to
//! [`WATCH_FOR`]) and rings for its queue once it appears. A round that
//! fails is logged; the workers find the jobs at their next poll.
//!
//! A queue the bell knows nobody waits for ([`Bell::may_hear`]: MySQL's
//! list of waiters, while it is fresh) is not rung for, and an enqueue
//! that announces only such queues starts no round: a process that
//! enqueues while no worker waits pays no task, timer or statement per
//! enqueue.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Least time between two rounds of one store's ringer: an enqueue after a
/// quiet spell is rung for at once, then at most one round per pause. The
/// pause doubles while at least [`STREAM`] enqueues arrive during one, up
/// to [`MAX_RING_PAUSE`], and starts over otherwise: a trickle is rung for
/// job by job, a stream of thousands a second about every 16 ms (whose
/// queues' workers claim every millisecond on their own while they find
/// jobs, see the claim loop's polling).
const RING_PAUSE: Duration = Duration::from_millis(1);
/// The longest pause between two rounds of a stream of enqueues.
const MAX_RING_PAUSE: Duration = Duration::from_millis(16);
/// Enqueues during one pause that make the next pause longer.
const STREAM: u32 = 4;
/// How long the ringer watches for the row of a job enqueued in a caller's
/// transaction; a row not seen by then (rolled back, or a transaction
/// still open) is left to the workers' polling.
const WATCH_FOR: Duration = Duration::from_secs(2);

/// How a backend wakes the workers of other processes.
pub(crate) trait Bell: Send + 'static {
    /// The least time between two rounds.
    const PAUSE: Duration = RING_PAUSE;
    /// The longest pause between two rounds of a stream of enqueues.
    const MAX_PAUSE: Duration = MAX_RING_PAUSE;

    /// Which of `ids` have committed rows now.
    fn visible(
        &mut self,
        ids: &[i64],
    ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send;

    /// Wakes the workers waiting for any of `queues`.
    fn ring(
        &mut self,
        queues: &BTreeSet<String>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// After a failed or cut-short round: start afresh (a new connection,
    /// no cached list of waiters).
    fn reset(&mut self);

    /// Whether a round now could wake anyone for `queue`. A bell that knows
    /// its list of waiters holds none for it (a list it would not re-read
    /// yet) says no, and an enqueue to it starts no round: nobody listening
    /// costs an enqueue no task, timer or statement.
    fn may_hear(&self, _queue: &str) -> bool {
        true
    }
}

/// Rings a [`Bell`] for enqueues (see the module docs).
#[derive(Debug)]
pub(crate) struct Ringer<B> {
    state: Mutex<State<B>>,
    /// Told when the ringing task hands the bell back, nothing left to ring.
    idle: tokio::sync::Notify,
}

#[derive(Debug)]
struct State<B> {
    /// Queues enqueued to and not yet rung for.
    queues: BTreeSet<String>,
    /// Announcements since the last round.
    announced: u32,
    /// Jobs enqueued in callers' transactions, watched for until their
    /// rows appear: id, queue, since when.
    watched: Vec<(i64, String, Instant)>,
    /// The bell, while no task rings it (the task holds it meanwhile).
    bell: Option<B>,
}

impl<B: Bell> Ringer<B> {
    pub(crate) fn new(bell: B) -> Self {
        Self {
            state: Mutex::new(State {
                queues: BTreeSet::new(),
                announced: 0,
                watched: Vec::new(),
                bell: Some(bell),
            }),
            idle: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rings for `queues`: now, or right after the round in flight.
    pub(crate) fn announce<'q>(
        self: &Arc<Self>,
        deadline: Duration,
        queues: impl IntoIterator<Item = &'q str>,
    ) {
        let mut state = self.state();
        state.announced = state.announced.saturating_add(1);
        for queue in queues {
            // A queue nobody can hear is left out while the bell is idle
            // (a round in flight holds it, and rings what it finds).
            let unheard = state
                .bell
                .as_ref()
                .is_some_and(|bell| !bell.may_hear(queue));
            if !unheard && !state.queues.contains(queue) {
                state.queues.insert(queue.to_owned());
            }
        }
        if state.queues.is_empty() && state.watched.is_empty() {
            return;
        }
        self.start(state, deadline);
    }

    /// Watches for job `id`'s row, enqueued in a caller's transaction, and
    /// rings for `queue` when it appears. (PostgreSQL notifies in the
    /// caller's transaction: it watches for no row.)
    #[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
    fn watch(self: &Arc<Self>, deadline: Duration, id: i64, queue: &str) {
        let mut state = self.state();
        state.watched.push((id, queue.to_owned(), Instant::now()));
        self.start(state, deadline);
    }

    /// After a change of the controls (a pause, a limit, a rate) or a
    /// cancel: rings the waiters of [`CONTROL`](crate::wakeup::CONTROL).
    pub(crate) fn announce_control(self: &Arc<Self>, deadline: Duration) {
        self.announce(deadline, [crate::wakeup::CONTROL]);
    }

    /// After `job` was enqueued to `queue` in a caller's transaction:
    /// watches for its row (a duplicate made none).
    #[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn enqueued_in(
        self: &Arc<Self>,
        deadline: Duration,
        job: &crate::types::Enqueued,
        queue: &str,
    ) {
        if !job.duplicate {
            self.watch(deadline, job.id, queue);
        }
    }

    /// Waits until everything announced has been rung for (and the jobs
    /// watched for have appeared, or been given up on), at most `within`:
    /// for a process about to exit, whose ringing task would end with it.
    pub(crate) async fn flush(&self, within: Duration) {
        let _ = tokio::time::timeout(within, async {
            loop {
                let idle = self.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                {
                    let state = self.state();
                    if state.bell.is_some() && state.queues.is_empty() && state.watched.is_empty() {
                        return;
                    }
                }
                idle.await;
            }
        })
        .await;
    }

    /// Starts the ringing task unless it runs (it holds the bell then).
    fn start(self: &Arc<Self>, mut state: MutexGuard<'_, State<B>>, deadline: Duration) {
        let Some(bell) = state.bell.take() else {
            return;
        };
        drop(state);
        let ringer = Arc::clone(self);
        tokio::spawn(async move { ringer.ring(bell, deadline).await });
    }

    /// Rings until nothing is left to ring for, each round within
    /// `deadline`; then hands the bell back.
    async fn ring(&self, mut bell: B, deadline: Duration) {
        let mut pause = B::PAUSE;
        loop {
            let (queues, watched) = {
                let mut state = self.state();
                state
                    .watched
                    .retain(|(_, _, since)| since.elapsed() < WATCH_FOR);
                // Announced while this task held the bell: asked now.
                state.queues.retain(|queue| bell.may_hear(queue));
                if state.queues.is_empty() && state.watched.is_empty() {
                    state.bell = Some(bell);
                    drop(state);
                    self.idle.notify_waiters();
                    return;
                }
                let watched: Vec<i64> = state.watched.iter().map(|(id, _, _)| *id).collect();
                state.announced = 0;
                (std::mem::take(&mut state.queues), watched)
            };
            let round = tokio::time::timeout(deadline, self.round(&mut bell, queues, &watched));
            let failed = match round.await {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(error.to_string()),
                Err(_elapsed) => Some(format!("no answer within {deadline:?}")),
            };
            if let Some(error) = failed {
                bell.reset();
                tracing::warn!(
                    error,
                    "waking other processes' workers failed; they find the jobs at their next poll"
                );
            }
            tokio::time::sleep(pause).await;
            pause = if self.state().announced >= STREAM {
                (pause * 2).min(B::MAX_PAUSE)
            } else {
                B::PAUSE
            };
        }
    }

    /// One round: the watched rows that appeared join `queues`, then the
    /// bell rings for them.
    async fn round(
        &self,
        bell: &mut B,
        mut queues: BTreeSet<String>,
        watched: &[i64],
    ) -> Result<(), sqlx::Error> {
        if !watched.is_empty() {
            let seen = bell.visible(watched).await?;
            let mut state = self.state();
            state.watched.retain(|(id, queue, _)| {
                let appeared = seen.contains(id);
                if appeared {
                    queues.insert(queue.clone());
                }
                !appeared
            });
        }
        if queues.is_empty() {
            return Ok(());
        }
        bell.ring(&queues).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A bell that counts its rings, heard for the queues it is given.
    struct Counting {
        rings: Arc<AtomicUsize>,
        heard: &'static [&'static str],
    }

    impl Bell for Counting {
        async fn visible(&mut self, _ids: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
            Ok(Vec::new())
        }

        async fn ring(&mut self, _queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
            self.rings.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }

        fn reset(&mut self) {}

        fn may_hear(&self, queue: &str) -> bool {
            self.heard.contains(&queue)
        }
    }

    fn ringer(heard: &'static [&'static str]) -> (Arc<Ringer<Counting>>, Arc<AtomicUsize>) {
        let rings = Arc::new(AtomicUsize::new(0));
        let bell = Counting {
            rings: Arc::clone(&rings),
            heard,
        };
        (Arc::new(Ringer::new(bell)), rings)
    }

    #[tokio::test]
    async fn an_enqueue_nobody_can_hear_starts_no_round() {
        let deadline = Duration::from_secs(1);
        let (ringer, rings) = ringer(&["heard"]);
        ringer.announce(deadline, ["unheard"]);
        assert!(
            ringer.state().bell.is_some(),
            "the bell stays idle: no task was started"
        );
        ringer.flush(deadline).await;
        assert_eq!(rings.load(Ordering::SeqCst), 0);

        ringer.announce(deadline, ["unheard", "heard"]);
        ringer.flush(deadline).await;
        assert_eq!(rings.load(Ordering::SeqCst), 1, "a heard queue rings");
        assert!(ringer.state().queues.is_empty());
    }

    #[tokio::test]
    async fn a_stream_to_a_queue_nobody_can_hear_keeps_no_round_going() {
        let deadline = Duration::from_secs(1);
        let (ringer, rings) = ringer(&["heard"]);
        ringer.announce(deadline, ["heard"]);
        while rings.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // The ringing task holds the bell, in its pause after the round.
        ringer.announce(deadline, ["unheard"]);
        assert!(ringer.state().bell.is_none());
        ringer.flush(deadline).await;
        assert_eq!(
            rings.load(Ordering::SeqCst),
            1,
            "no second round for a queue nobody can hear"
        );
    }
}
