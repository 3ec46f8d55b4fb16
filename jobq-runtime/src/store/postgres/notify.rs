//! The [`Notifier`]: NOTIFYs for enqueues on jobq's own pool, sent after
//! their commits, coalesced.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};

use super::sql::{NOTIFIER_SESSION, NOTIFY};
use crate::metrics::statement;
use crate::store::policy::within;
use crate::store::stash::Closing;

/// Least time between two NOTIFYs of one store: an enqueue after a quiet
/// spell is announced at once, then at most one NOTIFY per pause. The pause
/// doubles while at least [`STREAM_ENQUEUES`] enqueues arrive during one, up
/// to [`MAX_NOTIFY_PAUSE`], and starts over otherwise: a trickle (200
/// jobs/s) is announced job by job, a stream of thousands per second about
/// every 32 ms. Each NOTIFY is a transaction of its own on the server (it
/// takes a transaction id and the notification queue's lock): with one per
/// 8 ms a single task's stream of single-row enqueues ran about 10 % slower
/// than with none. Workers busy with such a stream do not wait for them: a
/// claim that found jobs is followed by another at once.
const NOTIFY_PAUSE: Duration = Duration::from_millis(2);
/// The longest pause between two NOTIFYs of a stream of enqueues.
const MAX_NOTIFY_PAUSE: Duration = Duration::from_millis(32);
/// Enqueues during one pause that make the next pause longer.
const STREAM_ENQUEUES: u32 = 4;

/// Sends the NOTIFYs of enqueues made on jobq's pool, after their INSERTs
/// committed: one statement at a time, at most one per [`NOTIFY_PAUSE`],
/// for every queue enqueued to since the previous one.
///
/// A `pg_notify` inside the enqueue's own statement would be simpler, but
/// PostgreSQL serializes the commits of notifying transactions (a
/// database-wide lock held until the commit record is flushed), so
/// concurrent enqueues could no longer share a WAL flush: 8 concurrent
/// enqueuers did 513 jobs/s that way, against 2,175 for plain INSERTs. Here
/// the INSERTs commit freely and only the notifier takes that lock. A
/// NOTIFY that fails is logged; workers find the jobs at their next poll.
/// (`enqueue_in` still notifies inside the caller's transaction.)
///
/// It sends on a connection of its own with `synchronous_commit = off`: a
/// NOTIFY is not durable anyway, so its commit need not wait for a WAL flush
/// (and holds that lock for microseconds, not a disk write).
#[derive(Debug, Default)]
pub(super) struct Notifier {
    state: Mutex<NotifierState>,
    /// One connection, opened on first use with the store pool's options.
    pool: OnceLock<PgPool>,
}

#[derive(Debug, Default)]
struct NotifierState {
    /// Queues enqueued to and not yet announced.
    queues: BTreeSet<String>,
    /// Enqueues since the last NOTIFY went out.
    enqueues: u32,
    /// Whether a task is sending.
    sending: bool,
}

impl Notifier {
    fn state(&self) -> std::sync::MutexGuard<'_, NotifierState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Announces `queues`: now, or right after the NOTIFY in flight.
    pub(super) fn announce<'q>(
        self: &Arc<Self>,
        pool: &PgPool,
        deadline: Duration,
        queues: impl IntoIterator<Item = &'q str>,
    ) {
        let mut state = self.state();
        state.enqueues = state.enqueues.saturating_add(1);
        for queue in queues {
            if !state.queues.contains(queue) {
                state.queues.insert(queue.to_owned());
            }
        }
        if state.sending || state.queues.is_empty() {
            return;
        }
        state.sending = true;
        drop(state);
        let notifier = Arc::clone(self);
        let pool = self
            .pool
            .get_or_init(|| {
                PgPoolOptions::new()
                    .max_connections(1)
                    .test_before_acquire(false)
                    .before_acquire(crate::store::policy::ping_if_idle::<sqlx::Postgres>)
                    .after_connect(|conn, _meta| {
                        Box::pin(async move {
                            conn.execute(NOTIFIER_SESSION).await?;
                            Ok(())
                        })
                    })
                    .connect_lazy_with((*pool.connect_options()).clone())
            })
            .clone();
        tokio::spawn(async move { notifier.send(&pool, deadline).await });
    }

    /// Sends until nothing is left to announce, each NOTIFY within
    /// `deadline` (the store's statement deadline; past it the connection
    /// is closed and the queues are left to the workers' polling).
    async fn send(&self, pool: &PgPool, deadline: Duration) {
        let mut pause = NOTIFY_PAUSE;
        loop {
            let queues: Vec<String> = {
                let mut state = self.state();
                if state.queues.is_empty() {
                    state.sending = false;
                    return;
                }
                state.enqueues = 0;
                std::mem::take(&mut state.queues).into_iter().collect()
            };
            let notify = Closing::run(pool, async |conn| {
                sqlx::query(NOTIFY).bind(&queues).execute(conn).await
            });
            if let Err(error) = within(deadline, statement::NOTIFY, notify).await {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    ?queues,
                    "announcing enqueued jobs with NOTIFY failed; workers of other processes find them at their next poll"
                );
            }
            // Announcements arriving meanwhile go out together after the pause.
            tokio::time::sleep(pause).await;
            pause = if self.state().enqueues >= STREAM_ENQUEUES {
                (pause * 2).min(MAX_NOTIFY_PAUSE)
            } else {
                NOTIFY_PAUSE
            };
        }
    }
}
