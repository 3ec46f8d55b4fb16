//! The checkpointer: copies the write-ahead log into the database file off
//! the commit path.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

use super::sql::CHECKPOINT;

/// WAL pages a commit may leave before SQLite makes the committing
/// connection copy the log into the database (`wal_autocheckpoint`, 1,000 by
/// default) on the pools jobq opens. The checkpointer task normally keeps the
/// log far below this; the limit is a backstop for when it cannot run.
pub(super) const WAL_AUTOCHECKPOINT_BACKSTOP: u32 = 10_000;
/// Pause between checkpoints while writes arrive.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);
/// Longest pause between checkpoints when nothing is written.
const CHECKPOINT_IDLE: Duration = Duration::from_secs(2);
/// Longest a lone write after a quiet spell waits in the log.
const CHECKPOINT_LAZY: Duration = Duration::from_secs(30);

/// Copies the write-ahead log into the database file from a connection of
/// its own, so that no commit does it.
///
/// In WAL mode a commit appends to the log and, with `synchronous = NORMAL`,
/// does not wait for the disk; but the commit that takes the log past
/// `wal_autocheckpoint` pages then copies it into the database and syncs the
/// file, which stalls that writer, and every writer queued behind it, for
/// milliseconds (the tail of jobq's enqueue-to-start latency). A `PASSIVE`
/// checkpoint waits for no one and blocks no one; the next writer after a
/// complete one starts the log over. The pause between checkpoints grows
/// while nothing is written and resets when the log grows.
///
/// Between checkpoints it looks at the log's file (its size and modification
/// time, no statement): while no process has written since the last
/// checkpoint there is nothing to copy, and an idle worker sends nothing.
/// A lone write into an idle log (a worker's presence every 10 s, one job)
/// is copied within [`CHECKPOINT_LAZY`], or at once if more writes follow
/// it: a few pages in the log cost nothing, and an idle worker would
/// otherwise checkpoint after every presence refresh of every process.
pub(super) async fn checkpoint_loop(pool: SqlitePool, stop: CancellationToken) {
    let log = log_path(&pool.connect_options().get_filename().to_string_lossy());
    let mut pause = CHECKPOINT_EVERY;
    let mut last = (-1, -1);
    let mut seen = None;
    // Since when the log holds lone writes not yet copied.
    let mut lone: Option<Instant> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        let overdue = lone.is_some_and(|since| since.elapsed() >= CHECKPOINT_LAZY);
        // A log that cannot be read (not there yet, say) is checkpointed.
        if let Some(stamp) = log_stamp(&log) {
            if seen == Some(stamp) {
                pause = (pause * 2).min(CHECKPOINT_IDLE);
                if !overdue {
                    continue;
                }
            } else {
                seen = Some(stamp);
                // Written after a quiet spell: looked at again soon, and
                // copied then only if the writes go on.
                if pause == CHECKPOINT_IDLE && !overdue {
                    lone.get_or_insert_with(Instant::now);
                    pause = CHECKPOINT_EVERY;
                    continue;
                }
            }
        }
        lone = None;
        let result: Result<(i64, i64, i64), sqlx::Error> =
            sqlx::query_as(CHECKPOINT).fetch_one(&pool).await;
        match result {
            Ok((_busy, log, copied)) => {
                pause = if (log, copied) == last {
                    (pause * 2).min(CHECKPOINT_IDLE)
                } else {
                    CHECKPOINT_EVERY
                };
                last = (log, copied);
            }
            Err(sqlx::Error::PoolClosed) => return,
            Err(error) => {
                tracing::debug!(%error, "SQLite WAL checkpoint failed; trying again later");
                pause = CHECKPOINT_IDLE;
            }
        }
    }
}

/// The write-ahead log of the database file `database`: SQLite names it
/// after the file, with `-wal` appended.
fn log_path(database: &str) -> PathBuf {
    PathBuf::from(format!("{database}-wal"))
}

/// The log's size and last modification: a write by any process changes
/// them (a complete checkpoint's next writer starts the log over, which
/// writes its header).
fn log_stamp(log: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(log).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
