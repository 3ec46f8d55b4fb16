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

/// The read of the stored schedules, in no order (PostgreSQL and SQLite:
/// MySQL/MariaDB reads the names as text, see its `SCHEDULES_STORED`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! stored_schedules {
    () => {
        "SELECT name, job_name, payload, schedule, time_zone, queue, \
         priority, paused_at, last_tick, updated_at FROM jobq_schedules \
         WHERE job_name IS NOT NULL"
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use stored_schedules;

/// The statements of workflows (`store/flow.rs`) every backend writes alike
/// but for how a list of job ids arrives — `$in`, what follows a column to
/// say it is one of them (an IN-list of placeholders, a subquery over a
/// JSON array bound as text, `= ANY` of an array made from one) — and its
/// placeholders (`$p`, `$p2`). "The ids" below are that list.
macro_rules! flow_statements {
    ($in:literal, $p:literal) => {
        /// Holds the new jobs the ids that have dependencies (`blocked`).
        pub const FLOW_HOLD: &str = concat!(
            "UPDATE jobq_jobs SET status = 'blocked' WHERE status = 'pending' AND id ", $in
        );

        /// Records the final status of the finished jobs among the ids on
        /// the dependencies on them (their `outcome`), once.
        pub const FLOW_SETTLE: &str = concat!(
            "UPDATE jobq_deps SET outcome = (SELECT j.status FROM jobq_jobs j WHERE j.id = jobq_deps.depends_on) ",
            "WHERE outcome IS NULL AND depends_on ", $in, " AND EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_deps.depends_on ",
            "AND j.status IN ('done', 'failed', 'cancelled'))"
        );

        /// The `blocked` jobs that depend on the ids: their id, queue, and
        /// whether a dependency ended in a way they do not run after
        /// (`doomed`) and whether every dependency has ended (`ready`).
        pub const FLOW_DEPENDENTS_OF: &str = concat!(
            $crate::store::sql::flow_dependents!(),
            " WHERE w.status = 'blocked' AND w.id IN (SELECT d.job_id FROM jobq_deps d WHERE d.depends_on ", $in, ")"
        );

        /// [`FLOW_DEPENDENTS_OF`] for the `blocked` jobs the ids themselves.
        pub const FLOW_EVALUATE: &str = concat!(
            $crate::store::sql::flow_dependents!(),
            " WHERE w.status = 'blocked' AND w.id ", $in
        );

        /// Records `deleted` on the dependencies on the ids whose job row is
        /// gone (see `FLOW_GONE_PICK`).
        pub const FLOW_GONE: &str = concat!(
            "UPDATE jobq_deps SET outcome = 'deleted' WHERE outcome IS NULL AND depends_on ", $in, " AND NOT EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_deps.depends_on)"
        );

        /// A page of workflow jobs after id `$p`, in id order, with whether
        /// the job's row is gone (pruned, deleted): at most 500.
        pub const FLOW_ORPHANS: &str = concat!(
            "SELECT f.job_id AS id, CASE WHEN j.id IS NULL THEN 1 ELSE 0 END AS gone ",
            "FROM jobq_flow_jobs f LEFT JOIN jobq_jobs j ON j.id = f.job_id WHERE f.job_id > ",
            $p,
            " ORDER BY f.job_id LIMIT 500"
        );

        /// Forgets the dependencies of the jobs the ids (their rows are gone).
        pub const FLOW_FORGET_DEPS: &str = concat!("DELETE FROM jobq_deps WHERE job_id ", $in);

        /// Forgets the workflow names of the jobs the ids (their rows are gone).
        pub const FLOW_FORGET_JOBS: &str = concat!(
            "DELETE FROM jobq_flow_jobs WHERE job_id ", $in
        );

        /// The jobs of workflow `$p`: id, task, status (NULL once pruned).
        pub const FLOW_READ: &str = concat!(
            "SELECT f.job_id AS id, f.task, j.status FROM jobq_flow_jobs f ",
            "LEFT JOIN jobq_jobs j ON j.id = f.job_id WHERE f.workflow = ",
            $p,
            " ORDER BY f.job_id"
        );

        /// The dependencies within workflow `$p`.
        pub const FLOW_READ_DEPS: &str = concat!(
            "SELECT d.job_id, d.depends_on, d.run_anyway FROM jobq_deps d ",
            "JOIN jobq_flow_jobs f ON f.job_id = d.job_id WHERE f.workflow = ",
            $p
        );

        /// The task names and outputs of job `$p`'s dependencies.
        pub const FLOW_OUTPUTS: &str = concat!(
            "SELECT f.task, j.output FROM jobq_deps d ",
            "JOIN jobq_flow_jobs f ON f.job_id = d.depends_on ",
            "JOIN jobq_jobs j ON j.id = d.depends_on WHERE d.job_id = ",
            $p
        );
    };
}
pub(crate) use flow_statements;

/// The select list of [`flow_statements`]' dependents (see `FLOW_DEPENDENTS_OF`).
macro_rules! flow_dependents {
    () => {
        concat!(
            "SELECT w.id, w.queue, ",
            "CASE WHEN EXISTS (SELECT 1 FROM jobq_deps x WHERE x.job_id = w.id AND x.run_anyway = 0 ",
            "AND x.outcome IN ('failed', 'cancelled', 'deleted')) THEN 1 ELSE 0 END AS doomed, ",
            "CASE WHEN EXISTS (SELECT 1 FROM jobq_deps x WHERE x.job_id = w.id AND x.outcome IS NULL) ",
            "THEN 0 ELSE 1 END AS ready FROM jobq_jobs w"
        )
    };
}
pub(crate) use flow_dependents;

/// The sweep's first step: records the outcome of every dependency that
/// finished without a release having seen it (its worker died between the
/// settle and the release). The status is read in the statement's own
/// snapshot as the condition is, so it is a final one.
pub(crate) const FLOW_SETTLE_FINISHED: &str = "UPDATE jobq_deps SET outcome = \
     (SELECT j.status FROM jobq_jobs j WHERE j.id = jobq_deps.depends_on) \
     WHERE outcome IS NULL AND EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_deps.depends_on \
     AND j.status IN ('done', 'failed', 'cancelled'))";

/// The sweep's dependencies whose job row is gone (deleted, pruned), at
/// most 500: read in one snapshot, in which a dependency and its job,
/// inserted together, are both or neither (an `UPDATE` that waits on a
/// workflow's insert sees its new rows while its subqueries' snapshot may
/// not have their jobs: MySQL's locking reads).
pub(crate) const FLOW_GONE_PICK: &str = "SELECT DISTINCT d.depends_on AS id FROM jobq_deps d \
     LEFT JOIN jobq_jobs j ON j.id = d.depends_on WHERE d.outcome IS NULL AND j.id IS NULL LIMIT 500";

/// The sweep's second step: `blocked` jobs that a release should have
/// moved (every dependency ended, or one ended in a way they do not run
/// after), at most 500.
pub(crate) const FLOW_STUCK: &str = "SELECT DISTINCT d.job_id AS id FROM jobq_deps d \
     JOIN jobq_jobs w ON w.id = d.job_id WHERE w.status = 'blocked' AND d.outcome IS NOT NULL \
     AND ((d.run_anyway = 0 AND d.outcome IN ('failed', 'cancelled', 'deleted')) \
     OR NOT EXISTS (SELECT 1 FROM jobq_deps x WHERE x.job_id = d.job_id AND x.outcome IS NULL)) LIMIT 500";

/// The statements of batches (`store/batch.rs`) every backend writes alike
/// but for how a list of job ids arrives (`$in`, as in
/// [`flow_statements`]), its placeholders (`$p`, `$p2`, `$p3`, in the order
/// they appear) and its row locks (`$lock`: ` FOR UPDATE`, or nothing where
/// a write transaction has the database to itself).
macro_rules! batch_statements {
    ($in:literal, $p:literal, $p2:literal, $p3:literal, $lock:literal) => {
        /// Stores batch `$p`, open, with `$p2` jobs.
        pub const BATCH_CREATE: &str = concat!(
            "INSERT INTO jobq_batches (id, closed, jobs) VALUES (",
            $p,
            ", 0, ",
            $p2,
            ")"
        );

        /// Counts `$p` more jobs in batch `$p2` if it is open (one row
        /// changed), or nothing (closed, or unknown).
        pub const BATCH_ADD: &str = concat!(
            "UPDATE jobq_batches SET jobs = jobs + ",
            $p,
            " WHERE id = ",
            $p2,
            " AND closed = 0"
        );

        /// Closes batch `$p` if it is open (one row changed).
        pub const BATCH_CLOSE: &str = concat!(
            "UPDATE jobq_batches SET closed = 1 WHERE id = ",
            $p,
            " AND closed = 0"
        );

        /// Batch `$p`: whether it is closed and how many jobs it was given.
        pub const BATCH_READ: &str =
            concat!("SELECT closed, jobs FROM jobq_batches WHERE id = ", $p);

        /// How many of batch `$p`'s jobs have each recorded outcome
        /// (`open` until recorded) and status (NULL once the row is gone).
        pub const BATCH_READ_JOBS: &str = concat!(
            "SELECT m.outcome, j.status, COUNT(*) AS n FROM jobq_batch_jobs m ",
            "LEFT JOIN jobq_jobs j ON j.id = m.job_id WHERE m.batch = ",
            $p,
            " AND m.role = 'job' GROUP BY m.outcome, j.status"
        );

        /// Batch `$p`'s callbacks: id, role, status (NULL once the row is gone).
        pub const BATCH_READ_CALLBACKS: &str = concat!(
            "SELECT m.job_id AS id, m.role, j.status FROM jobq_batch_jobs m ",
            "LEFT JOIN jobq_jobs j ON j.id = m.job_id WHERE m.batch = ",
            $p,
            " AND m.role IN ('finish', 'success', 'failure') ORDER BY m.job_id"
        );

        /// Batch `$p`'s jobs that have not ended.
        pub const BATCH_UNFINISHED: &str = concat!(
            "SELECT m.job_id AS id FROM jobq_batch_jobs m JOIN jobq_jobs j ON j.id = m.job_id ",
            "WHERE m.batch = ",
            $p,
            " AND m.role = 'job' AND j.status IN ('pending', 'processing', 'blocked') ORDER BY m.job_id"
        );

        /// The record's first step: the batch jobs among the ids whose
        /// outcome is not recorded, their rows locked.
        pub const BATCH_LOCK: &str = concat!(
            "SELECT job_id AS id FROM jobq_batch_jobs WHERE role = 'job' AND outcome = 'open' AND job_id ",
            $in,
            $lock
        );

        /// Records the outcome of the jobs among the ids (locked, open)
        /// that have ended: their final status, or `deleted` for one whose
        /// row is gone.
        pub const BATCH_RECORD: &str = concat!(
            "UPDATE jobq_batch_jobs SET outcome = COALESCE((SELECT j.status FROM jobq_jobs j ",
            "WHERE j.id = jobq_batch_jobs.job_id), 'deleted') WHERE outcome = 'open' AND job_id ",
            $in,
            " AND NOT EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_batch_jobs.job_id ",
            "AND j.status NOT IN ('done', 'failed', 'cancelled'))"
        );

        /// The outcomes the record wrote: batch and outcome of each of the
        /// ids (locked: only the record changed them) no longer `open`.
        pub const BATCH_RECORDED: &str = concat!(
            "SELECT batch, outcome FROM jobq_batch_jobs WHERE outcome <> 'open' AND job_id ",
            $in
        );

        /// Counts `$p` more ended jobs, `$p2` of them not done, in batch `$p3`.
        pub const BATCH_COUNT: &str = concat!(
            "UPDATE jobq_batches SET ended = ended + ",
            $p,
            ", failed = failed + ",
            $p2,
            " WHERE id = ",
            $p3
        );

        /// The `blocked` callbacks of the batches of the jobs the ids, with
        /// their batch's state (see `batch_callbacks!`): the jobs' batches
        /// by their primary key, then those batches' callbacks by `(batch,
        /// role, …)`, whatever the batches' sizes.
        pub const BATCH_CALLBACKS_OF: &str = concat!(
            $crate::store::sql::batch_callbacks!(),
            " AND c.batch IN (SELECT m.batch FROM jobq_batch_jobs m WHERE m.job_id ",
            $in,
            ")"
        );

        /// [`BATCH_CALLBACKS_OF`] for the `blocked` callbacks the ids themselves.
        pub const BATCH_EVALUATE: &str = concat!(
            $crate::store::sql::batch_callbacks!(),
            " AND c.job_id ",
            $in
        );

        /// [`BATCH_CALLBACKS_OF`] for batch `$p`.
        pub const BATCH_CALLBACKS_IN: &str = concat!(
            $crate::store::sql::batch_callbacks!(),
            " AND c.batch = ",
            $p
        );

        /// Forgets the rows of batch `$p` (its jobs' rows are gone).
        pub const BATCH_FORGET_JOBS: &str =
            concat!("DELETE FROM jobq_batch_jobs WHERE batch = ", $p);

        /// Forgets closed batch `$p`.
        pub const BATCH_FORGET: &str =
            concat!("DELETE FROM jobq_batches WHERE closed = 1 AND id = ", $p);
    };
}
pub(crate) use batch_statements;

/// The select list of [`batch_statements`]' callbacks (`c`): each `blocked` callback
/// (id, queue, role) with whether its batch is closed, has a job whose
/// outcome is not recorded (`open`: fewer ended than it was given), and
/// has one that ended failed, cancelled or deleted (`failed`) — read from
/// the batch's row, whatever its size. Roles are named (`IN`, not `<>`) so
/// that the index `(batch, role, …)` serves them.
macro_rules! batch_callbacks {
    () => {
        concat!(
            "SELECT c.job_id AS id, w.queue, c.role, b.closed, ",
            "CASE WHEN b.ended < b.jobs THEN 1 ELSE 0 END AS open, ",
            "CASE WHEN b.failed > 0 THEN 1 ELSE 0 END AS failed FROM jobq_batch_jobs c ",
            "JOIN jobq_jobs w ON w.id = c.job_id JOIN jobq_batches b ON b.id = c.batch ",
            "WHERE w.status = 'blocked' AND c.role IN ('finish', 'success', 'failure')"
        )
    };
}
pub(crate) use batch_callbacks;

/// The batch sweep's first step: batch jobs that ended (or whose row is
/// gone) with no outcome recorded — their worker died between the settle
/// and the release — at most 500, read in one snapshot (a job and its batch
/// row, inserted together, are both or neither), to record.
pub(crate) const BATCH_ENDED_PICK: &str = "SELECT m.job_id AS id FROM jobq_batch_jobs m \
     LEFT JOIN jobq_jobs j ON j.id = m.job_id WHERE m.outcome = 'open' AND m.role = 'job' \
     AND (j.id IS NULL OR j.status IN ('done', 'failed', 'cancelled')) LIMIT 500";

/// The batch sweep's second step: `blocked` callbacks a release should
/// have moved (their batch has a failed job, or is closed with every job
/// ended), at most 500.
pub(crate) const BATCH_STUCK: &str = "SELECT c.job_id AS id FROM jobq_batch_jobs c \
     JOIN jobq_jobs w ON w.id = c.job_id JOIN jobq_batches b ON b.id = c.batch \
     WHERE w.status = 'blocked' AND c.role IN ('finish', 'success', 'failure') \
     AND (b.failed > 0 OR (b.closed = 1 AND b.ended >= b.jobs)) LIMIT 500";

/// Closed batches none of whose jobs (callbacks included) has a row left,
/// at most 100: what the sweep forgets.
pub(crate) const BATCH_FORGET_PICK: &str = "SELECT b.id FROM jobq_batches b WHERE b.closed = 1 \
     AND NOT EXISTS (SELECT 1 FROM jobq_batch_jobs m JOIN jobq_jobs j ON j.id = m.job_id \
     WHERE m.batch = b.id) LIMIT 100";
