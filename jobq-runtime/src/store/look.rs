//! The watcher of the backends whose statements cannot sleep until an
//! enqueue interrupts them (PostgreSQL, SQLite; MySQL's waiter is its own,
//! see `mysql::wake`): while their wake-up channel is up (a `LISTEN`
//! connection, a bound socket), one look every [`LOOK_EVERY`] at every queue whose
//! claim loops wait for jobs — the earliest `run_at` of its `pending` and
//! of its `processing` rows — wakes the loops of a queue with a job due
//! (scheduled, retried, reaped, or written by hand), tells the reaper of
//! an expired lease, and sleeps until the next job is due if that is
//! sooner. The channel carries other processes' enqueues and announced
//! controls at once; the look covers the rest, so the claim loops, the
//! pause loop and the reaper poll only as safety nets (see
//! [`Watch`](crate::wakeup::Watch)).

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::wakeup::{self, Lookout, Watch};

/// How long a look may be from the last: how long a job that came due
/// without a wake-up (a retry, a reaped job, a row written by hand) waits
/// at most, and an idle worker's one statement per this long.
pub(crate) const LOOK_EVERY: Duration = wakeup::WATCH_EVERY;

/// What one look found, per queue: µs until its earliest `pending` row's
/// `run_at` (≤ 0: due) and until its earliest `processing` row's (≤ 0: a
/// lease expired), `None` where it has none.
pub(crate) type Looked = Vec<(String, Option<i64>, Option<i64>)>;

/// Looks at `queues` with `look` (within `deadline` each) for as long as
/// it succeeds; returns the error that ended it. The caller runs it while
/// its wake-up channel is up, and drops it when the channel goes down:
/// then `watch` no longer counts on it and the loops poll again.
async fn keep_looking(
    queues: &[String],
    watch: &Watch,
    deadline: Duration,
    mut look: impl FnMut(Vec<String>) -> BoxFuture<'static, Result<Looked, sqlx::Error>>,
) -> sqlx::Error {
    let mut lookout = Lookout::new(queues);
    let _covered = watch.cover(queues);
    loop {
        // The channel carries announced controls while it is up.
        watch.controls_compared();
        let idle = wakeup::became_idle().notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        let watched = lookout.queues();
        if watched.is_empty() {
            // Every loop busy (or already told): nothing to look for
            // until one waits again.
            let _ = tokio::time::timeout(LOOK_EVERY, idle).await;
            continue;
        }
        let looked = match tokio::time::timeout(deadline, look(watched.clone())).await {
            Ok(Ok(looked)) => looked,
            Ok(Err(error)) => return error,
            Err(_elapsed) => {
                return sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer to the look at the queues within {deadline:?}"),
                ));
            }
        };
        let mut next = LOOK_EVERY;
        for (queue, pending, processing) in looked {
            match pending {
                Some(wait) if wait <= 0 => lookout.due(&queue),
                Some(wait) => {
                    next = next.min(Duration::from_micros(wait.unsigned_abs()));
                }
                None => {}
            }
            if processing.is_some_and(|wait| wait <= 0) {
                watch.lease_expired();
            }
        }
        tracing::trace!(?watched, ?next, "looked");
        tokio::time::sleep(next).await;
    }
}

/// [`keep_looking`] for as long as the caller's channel is up: a look that
/// fails is tried again after a backoff (the loops poll meanwhile), and the
/// channel stays as it is.
pub(crate) async fn look_while_up(
    queues: &[String],
    watch: &Watch,
    deadline: Duration,
    mut look: impl FnMut(Vec<String>) -> BoxFuture<'static, Result<Looked, sqlx::Error>>,
) -> std::convert::Infallible {
    let mut failures = 0u32;
    // Stopped by the caller's channel going (this future is dropped).
    let never = tokio_util::sync::CancellationToken::new();
    loop {
        let error = keep_looking(queues, watch, deadline, &mut look).await;
        let what = "looking at the queues for due jobs failed; they are polled meanwhile";
        crate::store::policy::listen_failed(&mut failures, &error, what, &never).await;
    }
}
