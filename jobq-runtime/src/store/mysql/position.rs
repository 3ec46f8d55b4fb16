//! Where each queue's claims go on from (see [`CLAIM_SELECT_AFTER`]), and
//! the test hook that fails a claim's top-up.
//!
//! [`CLAIM_SELECT_AFTER`]: super::sql::CLAIM_SELECT_AFTER

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;

/// How long claims may go on from where the previous one ended before one
/// starts from the beginning again. Rows that sort before that position (a
/// job of higher priority, one enqueued with a time already past, rows
/// another claimer skipped and gave back) wait at most this long while a
/// backlog drains; once the backlog is drained, every claim starts from the
/// beginning.
const RESCAN_AFTER: Duration = Duration::from_millis(200);

/// A row's place in the claim order: `(priority, run_at, id)`.
pub(super) type ClaimKey = (i16, NaiveDateTime, i64);

/// Where a queue's claims go on from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Position {
    pub(super) after: ClaimKey,
    /// When the last claim from the beginning ran.
    pub(super) rescanned: Instant,
}

/// Per queue, where the last claim that got all the rows it asked for ended.
#[derive(Debug, Default)]
pub(super) struct Positions(Mutex<HashMap<String, Position>>);

impl Positions {
    /// Where the next claim of `queue` starts, if it need not start from the
    /// beginning (see [`RESCAN_AFTER`]).
    pub(super) fn get(&self, queue: &str) -> Option<Position> {
        let positions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        positions
            .get(queue)
            .filter(|p| p.rescanned.elapsed() < RESCAN_AFTER)
            .copied()
    }

    /// Records where a claim ended: `end` is its last row if it got all it
    /// asked for; `rescanned` is when the last claim from the beginning ran.
    pub(super) fn set(&self, queue: &str, end: Option<ClaimKey>, rescanned: Instant) {
        let mut positions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match (end, positions.get_mut(queue)) {
            (Some(after), Some(position)) => *position = Position { after, rescanned },
            (Some(after), None) => {
                positions.insert(queue.to_owned(), Position { after, rescanned });
            }
            (None, _) => {
                positions.remove(queue);
            }
        }
    }
}

/// Queues whose next top-up claim fails (a test hook, see
/// `jobq_runtime::__store::fail_next_mysql_top_up`); read only when a claim
/// tops up.
static FAIL_TOP_UP: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(crate) fn fail_next_top_up(queue: &str) {
    FAIL_TOP_UP
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(queue.to_owned());
}

pub(crate) fn top_up_failure_armed(queue: &str) -> bool {
    FAIL_TOP_UP
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|q| q == queue)
}

/// Takes the failure armed for `queue`'s next top-up, if any.
pub(super) fn injected_top_up_failure(queue: &str) -> Option<sqlx::Error> {
    let mut armed = FAIL_TOP_UP.lock().unwrap_or_else(PoisonError::into_inner);
    let at = armed.iter().position(|q| q == queue)?;
    armed.swap_remove(at);
    Some(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "injected by a test: the connection dropped during the top-up claim",
    )))
}
