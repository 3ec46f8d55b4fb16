//! The statements every backend writes alike, word for word (each backend's
//! own are in its `sql.rs`).

use crate::store::filter::WindowPieces;

/// The search for an enqueue-time bound (`filter::Window`): standard SQL
/// that MySQL/MariaDB, PostgreSQL and SQLite all run as written.
pub(crate) const WINDOW: WindowPieces = WindowPieces {
    last_id: "SELECT id FROM jobq_jobs ORDER BY id DESC LIMIT 1",
    probe: [
        "SELECT id FROM (SELECT id, created_at FROM jobq_jobs",
        " WHERE id >= ",
        " ORDER BY id LIMIT 1) AS probe WHERE created_at >= ",
    ],
};

/// Which of `n` job ids have committed rows: a ringer's watch for jobs
/// enqueued in callers' transactions (MySQL/MariaDB and SQLite; `?` placeholders).
#[cfg(any(feature = "mysql", feature = "sqlite"))]
pub(crate) fn visible_sql(n: usize) -> String {
    let marks = vec!["?"; n].join(", ");
    format!("SELECT id FROM jobq_jobs WHERE id IN ({marks})")
}

/// The lock clause of a bulk action's batch (MySQL/MariaDB and PostgreSQL).
#[cfg(any(feature = "mysql", feature = "postgres"))]
pub(crate) fn row_locks(locks: crate::store::contract::RowLocks) -> &'static str {
    match locks {
        crate::store::contract::RowLocks::Skip => " FOR UPDATE SKIP LOCKED",
        crate::store::contract::RowLocks::Wait => " FOR UPDATE",
    }
}
