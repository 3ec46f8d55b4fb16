//! Every statement the SQLite store runs (see the facts in the store's module docs).

use crate::store::filter::{BULK_PAGE, Filtered, KeyPieces, Pieces};
use crate::store::migrate::{Migration, migrations};

/// Every column `Jobq::job` reports, text columns as bytes (decoded lossily:
/// any row can be inspected).
macro_rules! job_columns {
    () => {
        "SELECT id, CAST(queue AS BLOB) AS queue, CAST(job_name AS BLOB) AS job_name, \
         CAST(payload AS BLOB) AS payload, status, priority, attempts, max_attempts, run_at, \
         CAST(COALESCE(idempotency_key, unique_key) AS BLOB) AS idempotency_key, \
         CAST(last_error AS BLOB) AS last_error, \
         CAST(claimed_by AS BLOB) AS claimed_by, claimed_at, created_at, finished_at, \
         CAST(history AS BLOB) AS history, CAST(output AS BLOB) AS output, CAST(progress AS BLOB) AS progress, \
         CAST(metadata AS BLOB) AS metadata, CAST(tags AS BLOB) AS tags \
         FROM jobq_jobs"
    };
    (list) => {
        "SELECT id, CAST(queue AS BLOB) AS queue, CAST(job_name AS BLOB) AS job_name, \
         CAST(payload AS BLOB) AS payload, status, priority, attempts, max_attempts, run_at, \
         CAST(COALESCE(idempotency_key, unique_key) AS BLOB) AS idempotency_key, \
         CAST(last_error AS BLOB) AS last_error, \
         CAST(claimed_by AS BLOB) AS claimed_by, claimed_at, created_at, finished_at, \
         NULL AS history, NULL AS output, CAST(progress AS BLOB) AS progress, \
         NULL AS metadata, CAST(tags AS BLOB) AS tags \
         FROM jobq_jobs"
    };
}

/// A job's metadata and tags (JSON texts, `?3` its id), written in the
/// transaction that inserted it (see [`TAGS_INSERT`]).
pub const ATTACH: &str = "UPDATE jobq_jobs SET metadata = ?1, tags = ?2 WHERE id = ?3";

/// A job's rows in the tags' index: one per element of its tags (the JSON
/// array [`ATTACH`] stored).
pub const TAGS_INSERT: &str =
    "INSERT INTO jobq_job_tags (job_id, tag) SELECT ?1, value FROM json_each(?2)";

/// How jobq's multi-statement transactions begin: with the write lock.
pub const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";

/// `?1` queue … `?8` created_at. A duplicate key bumps `dedupe_hits` and
/// returns the existing row, so `dedupe_hits > 0` means "duplicate". The
/// key index is partial (rows with a key only): the conflict target names
/// its condition.
pub const INSERT: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL \
     DO UPDATE SET dedupe_hits = dedupe_hits + 1 \
     RETURNING id, dedupe_hits";

/// [`INSERT`] for a job without a key, with the same parameters (`?7`, the
/// key, unused).
pub const INSERT_KEYLESS: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8)";

/// A unique job's first statement: makes its key's row in `jobq_unique`
/// (no job yet) unless it exists; the enqueue's write transaction keeps
/// other enqueues of the key out until it ends.
pub const UNIQUE_TAKE: &str = "INSERT INTO jobq_unique (ukey, job_id, states) VALUES (?1, 0, 0) \
     ON CONFLICT (ukey) DO NOTHING";

/// A keyed enqueue's first statement (`?1` key, `?2` limit): makes its
/// key's row, or sets its limit (the write lock is held anyway).
pub const KEY_TAKE: &str = "INSERT INTO jobq_keys (ckey, max_running) VALUES (?1, ?2) \
     ON CONFLICT (ckey) DO UPDATE SET max_running = excluded.max_running";

/// The front of key `?1`'s job list, `?2` members, with each job's status
/// (NULL: its row is gone).
pub const KEY_FRONT: &str = "SELECT k.job_id, j.status \
     FROM jobq_key_jobs k LEFT JOIN jobq_jobs j ON j.id = k.job_id \
     WHERE k.ckey = ?1 ORDER BY k.job_id LIMIT ?2";

/// A keyed job's row: [`INSERT`]'s values, `?9` its status, `?10` its
/// key, `?11` its limit.
pub const INSERT_KEYED: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at, status, concurrency_key, concurrency_limit) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL \
     DO UPDATE SET dedupe_hits = dedupe_hits + 1 \
     RETURNING id, dedupe_hits";

/// Lists job `?2` in key `?1`'s jobs (once).
pub const KEY_JOIN: &str = "INSERT OR IGNORE INTO jobq_key_jobs (ckey, job_id) VALUES (?1, ?2)";

/// The rows of keys `?1` (a JSON array), with their limits, in key order.
pub const KEYS_READ: &str = "SELECT ckey, max_running FROM jobq_keys \
     WHERE ckey IN (SELECT value FROM json_each(?1)) ORDER BY ckey";

/// The fronts of keys `?1` (a JSON array), the first `?2` members of
/// each: `(key, job id, status)`, numbered within their key from the
/// primary key alone, only the front's rows joined to their jobs.
pub const KEY_FRONTS: &str = "SELECT f.ckey, f.job_id, j.status \
     FROM (SELECT ckey, job_id, ROW_NUMBER() OVER (PARTITION BY ckey ORDER BY job_id) AS n \
           FROM jobq_key_jobs WHERE ckey IN (SELECT value FROM json_each(?1))) AS f \
     LEFT JOIN jobq_jobs j ON j.id = f.job_id WHERE f.n <= ?2";

/// Forgets the members `?1` (a JSON array of `[key, job id]` pairs).
pub const KEY_FORGET: &str = "DELETE FROM jobq_key_jobs WHERE (ckey, job_id) IN \
     (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))";

/// Makes jobs `?1` (a JSON array) `pending` if still `blocked`.
pub const KEY_UNBLOCK: &str = "UPDATE jobq_jobs SET status = 'pending' \
     WHERE status = 'blocked' AND id IN (SELECT value FROM json_each(?1))";

/// Deletes the rows of keys `?1` (a JSON array) that list no job.
pub const KEYS_DROP: &str = "DELETE FROM jobq_keys WHERE ckey IN (SELECT value FROM json_each(?1)) \
     AND NOT EXISTS (SELECT 1 FROM jobq_key_jobs k WHERE k.ckey = jobq_keys.ckey)";

/// The distinct concurrency keys of rows `?1` (a JSON array).
pub const KEYS_OF: &str = "SELECT DISTINCT concurrency_key FROM jobq_jobs \
     WHERE id IN (SELECT value FROM json_each(?1)) AND concurrency_key IS NOT NULL";

/// Makes the key rows of rows `?1` (a JSON array) that have a concurrency
/// key, with the row's limit, where they are missing (before [`KEYS_REJOIN`]).
pub const KEYS_REMAKE: &str = "INSERT OR IGNORE INTO jobq_keys (ckey, max_running) \
     SELECT concurrency_key, COALESCE(concurrency_limit, 1) FROM jobq_jobs \
     WHERE id IN (SELECT value FROM json_each(?1)) AND concurrency_key IS NOT NULL";

/// Lists rows `?1` (a JSON array) that have a concurrency key in their keys again.
pub const KEYS_REJOIN: &str = "INSERT OR IGNORE INTO jobq_key_jobs (ckey, job_id) \
     SELECT concurrency_key, id FROM jobq_jobs \
     WHERE id IN (SELECT value FROM json_each(?1)) AND concurrency_key IS NOT NULL";

/// Up to `?2` keys after `?1`, in order: a page of the sweep.
pub const KEY_PAGE: &str = "SELECT ckey FROM jobq_keys WHERE ckey > ?1 ORDER BY ckey LIMIT ?2";

/// `?1` key, `?2` now: the key's row and its holder's status bit (see
/// `UniqueRow`).
pub const UNIQUE_HOLDER: &str = "SELECT u.job_id, u.states, \
     (u.held_until IS NULL OR u.held_until > ?2), \
     CASE j.status WHEN 'pending' THEN 1 WHEN 'blocked' THEN 1 WHEN 'processing' THEN 2 WHEN 'done' THEN 4 \
       WHEN 'failed' THEN 8 WHEN 'cancelled' THEN 16 ELSE 0 END \
     FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id WHERE u.ukey = ?1";

/// A page of `jobq_unique` after key `?1`, `?2` rows, in key order: each
/// key, its holder and whether the holder's row is gone.
pub const UNIQUE_SCAN: &str = "SELECT u.ukey, u.job_id, j.id IS NULL \
     FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id \
     WHERE u.ukey > ?1 ORDER BY u.ukey LIMIT ?2";

/// Deletes key `?1`'s row if it still names holder `?2`.
pub const UNIQUE_FORGET: &str = "DELETE FROM jobq_unique WHERE ukey = ?1 AND job_id = ?2";

/// A unique job's row ([`INSERT`]'s parameters), its key in `unique_key`.
pub const INSERT_UNIQUE: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, unique_key, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// Writes the new holder into its key's row: `?1` key, `?2` job id,
/// `?3` states, `?4` end of its period in unix µs (NULL: none).
pub const UNIQUE_HOLD: &str =
    "UPDATE jobq_unique SET job_id = ?2, states = ?3, held_until = ?4 WHERE ukey = ?1";

/// `?1` queue, `?2` now, `?3` limit: the claim's rows, in claim order, with
/// the `run_at` they were due at (in the index: the read stays covering).
pub const PICK: &str = "SELECT id, run_at FROM jobq_jobs \
     WHERE queue = ?1 AND status = 'pending' AND run_at <= ?2 \
     ORDER BY priority, run_at, id LIMIT ?3";

/// `?1` the claim's token base (each row's token is base + id, see
/// `new_token_base`), `?2` now, `?3` lease deadline, `?4` worker,
/// `?5` the picked ids as a JSON array (one statement text for any batch
/// size); of those, only rows still `pending` and due at `?2` (another
/// process may have claimed one since the pick; the unary `+` keeps the
/// planner from reading the guard through the claim index rather than
/// each id by primary key, as it did under small-table statistics). The
/// text columns come back as bytes: SQLite holds whatever another
/// program wrote (a BLOB, text that is not UTF-8), and one such row must fail
/// on its own, not fail every claim of its queue (see `ClaimedJob::from_bytes`).
pub const CLAIM: &str = "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, \
     lease_token = ?1 + id, run_at = ?3, claimed_by = ?4, claimed_at = ?2 \
     WHERE id IN (SELECT value FROM json_each(?5)) AND +status = 'pending' AND +run_at <= ?2 \
     RETURNING id, CAST(job_name AS BLOB), CAST(payload AS BLOB), attempts, max_attempts, \
     CAST(COALESCE(idempotency_key, unique_key) AS BLOB), CAST(concurrency_key AS BLOB), \
     CAST(metadata AS BLOB), CAST(tags AS BLOB)";

/// `?1` status, `?2` new run_at, `?3` refunded attempts, `?4` error, `?5` now,
/// `?6` id, `?7` token. SQLite's SET sees the old row, hence `?1` in `finished_at`.
/// What a reaped attempt's `last_error` and history entry say.
macro_rules! lease_expired {
    () => {
        "'lease expired during attempt ' || attempts || ': worker ' || COALESCE(claimed_by, '?') \
         || ' stopped renewing it (crashed, killed or stalled)'"
    };
}

/// `history` with one more entry (an expression): the attempt (its
/// number, worker and start as the claim left them), when it ended
/// (`$now`), `$outcome` and `$error`; the oldest entry goes once it holds
/// [`HISTORY_CAP`](crate::HISTORY_CAP) entries (25). A
/// value that is not JSON (written by hand) starts over.
macro_rules! history_append {
    ($now:expr, $outcome:expr, $error:expr) => {
        concat!(
            "json_insert(CASE WHEN history IS NULL OR NOT json_valid(history) THEN '[]' \
             WHEN json_array_length(history) >= 25 THEN json_remove(history, '$[0]') \
             ELSE history END, '$[#]', json_object('attempt', attempts, 'worker', claimed_by, \
             'started_us', claimed_at, 'ended_us', ",
            $now,
            ", 'outcome', ",
            $outcome,
            ", 'error', ",
            $error,
            "))"
        )
    };
}

/// `?8` the history entry's outcome (`NULL`: no entry), `?9` its message.
pub const TRANSITION: &str = concat!(
    "UPDATE jobq_jobs SET status = ?1, run_at = ?2, attempts = attempts - ?3, \
     last_error = COALESCE(?4, last_error), \
     finished_at = CASE WHEN ?1 = 'failed' THEN ?5 ELSE NULL END, \
     lease_token = NULL, \
     history = CASE WHEN ?8 IS NULL THEN history ELSE ",
    history_append!("?5", "?8", "?9"),
    " END \
     WHERE id = ?6 AND lease_token = ?7 AND status = 'processing'"
);

/// `?1` now, `?2` queue, `?3` limit. A single statement: with one writer at a
/// time there is no lock order to get wrong (unlike InnoDB).
/// An orphan keeps its place in line: `run_at` goes back to when it was enqueued.
pub const REAP: &str = concat!(
    "UPDATE jobq_jobs SET \
     history = ",
    history_append!("?1", "'lease expired'", lease_expired!()),
    ", last_error = ",
    lease_expired!(),
    ", \
     finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END, \
     status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END, \
     run_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE created_at END, lease_token = NULL \
     WHERE id IN (SELECT id FROM jobq_jobs \
                  WHERE queue = ?2 AND status = 'processing' AND run_at < ?1 \
                  ORDER BY priority, run_at, id LIMIT ?3)"
);

/// One row, every column `Jobq::job` reports.
pub const JOB: &str = concat!(job_columns!(), " WHERE id = ?1");

/// Finished rows of two statuses, oldest first, through `jobq_jobs_finished`.
pub const PRUNE: &str = "DELETE FROM jobq_jobs WHERE id IN ( \
     SELECT id FROM jobq_jobs WHERE finished_at < ?1 AND status IN (?2, ?3) \
     ORDER BY finished_at LIMIT ?4) \
     AND status IN (?2, ?3)";

/// `?1` id: the row a cancel changes, with its lease token (the attempt a
/// worker of this process is told to stop). Read and changed in one
/// `BEGIN IMMEDIATE` transaction: no other write comes between.
pub const CANCEL_PICK: &str = "SELECT id, lease_token FROM jobq_jobs \
     WHERE id = ?1 AND status IN ('pending', 'processing', 'blocked')";

/// `?1` now, `?2` the picked ids as a JSON array: cancels them, with the
/// guard of a single cancel.
pub const CANCEL_IDS: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = ?1, run_at = ?1, lease_token = NULL \
     WHERE status IN ('pending', 'processing', 'blocked') AND id IN (SELECT value FROM json_each(?2))";

/// What a retry sets (`?1` now): `pending`, runnable now, with at least one
/// more attempt.
macro_rules! retry_set {
    () => {
        "UPDATE jobq_jobs SET status = CASE WHEN concurrency_key IS NULL THEN 'pending' ELSE 'blocked' END, \
         run_at = ?1, finished_at = NULL, \
         max_attempts = MAX(max_attempts, attempts + 1)"
    };
}

/// `?1` now, `?2` id: sends a `failed` or `cancelled` row back to `pending`.
pub const RETRY: &str = concat!(
    retry_set!(),
    " WHERE id = ?2 AND status IN ('failed', 'cancelled')"
);

/// The filtered statements of listing and bulk actions (see `store/filter.rs`).
///
/// Index use as on MySQL: a queue (and status) is a range of the claim
/// index `(queue, status, priority, run_at, id)`, in claim order, so a
/// page reads the matching entries and sorts them (a temporary B-tree of
/// the matching rows, not of the table); without a queue a list walks the
/// primary key in id order until its page is full; a key prefix is a
/// range of the unique key index (BINARY collation: byte order); a job
/// name a range of `jobq_jobs_job_name` (in id order), an enqueue time a
/// range of the primary key (see `filter::Window`). A bulk action reads the ids it acts on
/// in pages in id order (`ids`); a batch of them is one statement (retry,
/// [`bulk_retry`]) or one `BEGIN IMMEDIATE` transaction (cancel, which
/// reads the tokens first, [`bulk_cancel_pick`]), by primary key.
pub(crate) const FILTERED: Filtered = Filtered {
    pieces: Pieces::new(
        "?",
        true,
        KeyPieces::Range {
            from: " AND idempotency_key >= ",
            before: " AND idempotency_key < ",
        },
    ),
    list: job_columns!(list),
    count: "SELECT COUNT(*) FROM jobq_jobs",
    ids: "SELECT id FROM jobq_jobs",
    window: crate::store::sql::WINDOW,
    hints: None,
    ids_page: BULK_PAGE,
};

/// `?1` now, `?2` the ids of a bulk retry's batch as a JSON array: retries
/// those whose rows still meet `guard` (a condition of [`FILTERED`]'s
/// pieces); returns their ids.
pub(crate) fn bulk_retry(guard: &str) -> String {
    format!(
        "{} WHERE id IN (SELECT value FROM json_each(?2)){guard} RETURNING id",
        retry_set!()
    )
}

/// `?1` the ids of a bulk cancel's batch as a JSON array: those whose rows
/// still meet `guard`, with their lease tokens (then cancelled by
/// [`CANCEL_IDS`] in the same transaction).
pub(crate) fn bulk_cancel_pick(guard: &str) -> String {
    format!(
        "SELECT id, lease_token FROM jobq_jobs WHERE id IN (SELECT value FROM json_each(?1)){guard}"
    )
}

/// Saves held job ?2's (token ?3) checkpoint ?1 (JSON).
pub const CHECKPOINT_SAVE: &str = "UPDATE jobq_jobs SET checkpoint = ?1 \
     WHERE id = ?2 AND lease_token = ?3 AND status = 'processing'";

/// Job ?1's checkpoint.
pub const CHECKPOINT_LOAD: &str =
    "SELECT CAST(checkpoint AS BLOB) AS checkpoint FROM jobq_jobs WHERE id = ?1";

/// Records held job ?2's (token ?3) progress ?1 (JSON).
pub const PROGRESS_SAVE: &str = "UPDATE jobq_jobs SET progress = ?1 \
     WHERE id = ?2 AND lease_token = ?3 AND status = 'processing'";

/// Marks held job `?3` (token `?4`) `done` at `?1` with its handler's output `?2`.
pub const COMPLETE_OUTPUT: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = ?1, run_at = ?1, \
     lease_token = NULL, output = ?2 WHERE id = ?3 AND lease_token = ?4 AND status = 'processing'";

/// `?1` finished_at.
pub const COMPLETE: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = ?1, run_at = ?1, lease_token = NULL \
     WHERE status = 'processing' AND id IN (SELECT value FROM json_each(?2)) \
     AND lease_token IN (SELECT value FROM json_each(?3))";

/// `?1` the new lease deadline.
pub const HEARTBEAT: &str = "UPDATE jobq_jobs SET run_at = ?1 \
     WHERE status = 'processing' AND id IN (SELECT value FROM json_each(?2)) \
     AND lease_token IN (SELECT value FROM json_each(?3)) \
     RETURNING id, lease_token";

/// The library's version, checked against the minimum.
pub const VERSION: &str = "SELECT sqlite_version()";

/// The statement form an older SQLite lacks (named in the error).
pub const NEEDS: &str = "UPDATE … RETURNING";

/// jobq's own migration table.
pub const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS jobq_migrations (version INTEGER NOT NULL PRIMARY KEY, \
             description TEXT NOT NULL, applied_at INTEGER NOT NULL)";

/// The versions applied so far.
pub const MIGRATIONS_APPLIED: &str = "SELECT version FROM jobq_migrations";

/// Records one applied migration.
pub const MIGRATION_RECORD: &str =
    "INSERT INTO jobq_migrations (version, description, applied_at) VALUES (?, ?, ?)";

/// The head of a multi-row keyless INSERT; its `VALUES` rows are pushed after it.
pub const INSERT_MANY_KEYLESS: &str =
    "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at) ";

/// The checkpointer's statement: copies what it can of the log, waiting for no one.
pub const CHECKPOINT: &str = "PRAGMA wal_checkpoint(PASSIVE)";

/// Rows of one queue per status.
pub const COUNTS: &str = "SELECT status, COUNT(*) FROM jobq_jobs WHERE queue = ? GROUP BY status";

/// Every queue with a row: a skip scan of the claim index's first column
/// (one descent per queue; the claim index holds every row).
pub const QUEUES: &str = "WITH RECURSIVE q(queue) AS ( \
     SELECT MIN(queue) FROM jobq_jobs \
     UNION ALL \
     SELECT (SELECT MIN(queue) FROM jobq_jobs WHERE queue > q.queue) FROM q WHERE q.queue IS NOT NULL) \
     SELECT queue FROM q WHERE queue IS NOT NULL";

/// `?1` queue, `?2` now: the live rows per status, all of them, those due
/// (`run_at <= now`), those expired (`run_at < now`) and the earliest
/// `run_at`. Two ranges of the claim index, read from the index alone.
pub const STATS_LIVE: &str = "SELECT status, COUNT(*), SUM(run_at <= ?2), SUM(run_at < ?2), MIN(run_at) \
     FROM jobq_jobs WHERE queue = ?1 AND status IN ('pending', 'processing', 'blocked') GROUP BY status";

/// `?1` queue, `?2` cap: the `done`, `failed` and `cancelled` rows, each
/// counted up to the cap (at most cap entries of one range of the claim index each).
pub const STATS_FINISHED: &str = "SELECT \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ?1 AND status = 'done' LIMIT ?2)), \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ?1 AND status = 'failed' LIMIT ?2)), \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ?1 AND status = 'cancelled' LIMIT ?2))";

/// `?1` queue, `?2` status: the priorities of its rows, lowest first, one
/// descent of the claim index each.
pub const PRIORITIES: &str = "WITH RECURSIVE p(priority) AS ( \
     SELECT MIN(priority) FROM jobq_jobs WHERE queue = ?1 AND status = ?2 \
     UNION ALL \
     SELECT (SELECT MIN(priority) FROM jobq_jobs WHERE queue = ?1 AND status = ?2 AND priority > p.priority) \
     FROM p WHERE p.priority IS NOT NULL) \
     SELECT priority FROM p WHERE priority IS NOT NULL";

/// `?1` since, `?2` queue, `?3` the priorities as a JSON array: the `done`
/// and `failed` rows finished since `?1`, by minute since then; ranges of
/// the claim index `(queue, status, priority, run_at >= ?1)` (a finished
/// row's `run_at` is when it finished).
pub const STATS_PER_MINUTE: &str = "SELECT status, (run_at - ?1) / 60000000, COUNT(*) FROM jobq_jobs \
     WHERE queue = ?2 AND status IN ('done', 'failed') \
     AND priority IN (SELECT value FROM json_each(?3)) AND run_at >= ?1 \
     GROUP BY 1, 2";

/// `?1` queue: makes sure it has its row in `jobq_queues` (a no-op if it has).
pub const QUEUE_ROW: &str =
    "INSERT INTO jobq_queues (queue) VALUES (?1) ON CONFLICT (queue) DO NOTHING";

/// `?1` now, `?2` queue: pauses it; matches its row only if it was not paused.
pub const PAUSE: &str =
    "UPDATE jobq_queues SET paused_at = ?1 WHERE queue = ?2 AND paused_at IS NULL";

/// `?1` queue: resumes it; matches its row only if it was paused.
pub const RESUME: &str =
    "UPDATE jobq_queues SET paused_at = NULL WHERE queue = ?1 AND paused_at IS NOT NULL";

/// The queues paused, limited or rate limited now, as `(queue, paused,
/// limit, starts, period_us, burst, tat_us)` (three small tables: a queue
/// may come three times, see `policy::controls`).
pub const CONTROLS: &str = "SELECT queue, 1, NULL, NULL, NULL, NULL, NULL FROM jobq_queues \
     WHERE paused_at IS NOT NULL \
     UNION ALL SELECT queue, 0, max_running, NULL, NULL, NULL, NULL FROM jobq_limits \
     UNION ALL SELECT queue, 0, NULL, starts, period_us, burst, tat_us FROM jobq_rates";

// ---------------------------------------------------------------------------
// Rate limits (`jobq_rates`; see `policy::Gcra`).

/// A rate-limited claim's read of queue `?1`'s rate row (under the write
/// lock, which no other claim shares): `(starts, period_us, burst,
/// tat_us, now_us)`, now being `?2`, the application's clock.
pub const RATE_READ: &str = "SELECT starts, period_us, burst, tat_us, ?2 \
     FROM jobq_rates WHERE queue = ?1";

/// Moves queue `?2`'s theoretical arrival time to `?1`.
pub const RATE_ADVANCE: &str = "UPDATE jobq_rates SET tat_us = ?1 WHERE queue = ?2";

/// Sets queue `?1`'s rate to `?2` starts per `?3` µs, burst `?4`, at `?5`;
/// a new row's theoretical arrival time is 0, a changed row keeps its own.
pub const RATE_SET: &str = "INSERT INTO jobq_rates (queue, starts, period_us, burst, tat_us, updated_at) \
     VALUES (?1, ?2, ?3, ?4, 0, ?5) \
     ON CONFLICT (queue) DO UPDATE SET starts = excluded.starts, period_us = excluded.period_us, \
     burst = excluded.burst, updated_at = excluded.updated_at";

/// Removes queue `?1`'s rate.
pub const RATE_REMOVE: &str = "DELETE FROM jobq_rates WHERE queue = ?1";

/// Key `?1`'s rate row (under the write lock), with `?2` now:
/// `(starts, period_us, burst, tat_us, now_us)`.
pub const KEY_RATE_READ: &str = "SELECT starts, period_us, burst, tat_us, ?2 \
     FROM jobq_key_rates WHERE ckey = ?1";

/// Moves key `?2`'s theoretical arrival time to `?1`.
pub const KEY_RATE_ADVANCE: &str = "UPDATE jobq_key_rates SET tat_us = ?1 WHERE ckey = ?2";

/// Stamps claimed rows `?2` (a JSON array) with the moment their key's
/// rate let them start (`?1`, the clock the rate read).
pub const KEY_STARTED: &str = "UPDATE jobq_jobs SET claimed_at = ?1 \
     WHERE status = 'processing' AND id IN (SELECT value FROM json_each(?2))";

/// Sets key `?1`'s rate to `?2` starts per `?3` µs, burst `?4`, at `?5`.
pub const KEY_RATE_SET: &str = "INSERT INTO jobq_key_rates (ckey, starts, period_us, burst, tat_us, updated_at) \
     VALUES (?1, ?2, ?3, ?4, 0, ?5) \
     ON CONFLICT (ckey) DO UPDATE SET starts = excluded.starts, period_us = excluded.period_us, \
     burst = excluded.burst, updated_at = excluded.updated_at";

/// Removes key `?1`'s rate.
pub const KEY_RATE_REMOVE: &str = "DELETE FROM jobq_key_rates WHERE ckey = ?1";

/// Every key's rate: `(key, starts, period_us, burst)`.
pub const KEY_RATES: &str =
    "SELECT ckey, starts, period_us, burst FROM jobq_key_rates ORDER BY ckey";

// ---------------------------------------------------------------------------
// Global concurrency limits (`jobq_limits`, `jobq_slots`; see `policy::SlotPlan`).

/// A limited claim's first statement (under the write lock, which no other
/// claim shares): the slot rows of queue `?1`, with the attempt each holds last.
pub const SLOTS_READ: &str = "SELECT slot, job_id, lease_token FROM jobq_slots \
     WHERE queue = ?1 ORDER BY slot";

/// Of the attempts written in slots (ids: the JSON array `?1`), the
/// `(id, lease_token)` of the rows still held: `processing` (an expired
/// lease still holds its slot until the reaper moves the row: its worker
/// may yet renew it).
pub const SLOT_HOLDERS: &str = "SELECT id, lease_token FROM jobq_jobs \
     WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'processing'";

/// Queue `?1`'s limit and how many slot rows it has (rows above a lowered
/// limit included).
pub const SLOTS_SIZE: &str = "SELECT (SELECT max_running FROM jobq_limits WHERE queue = ?1), \
     (SELECT COUNT(*) FROM jobq_slots WHERE queue = ?1)";

/// Deletes queue `?1`'s slot row `?2` (above its limit, its holder gone).
pub const SLOT_RETIRE: &str = "DELETE FROM jobq_slots WHERE queue = ?1 AND slot = ?2";

/// Drops queue `?1`'s slot rows from number `?2` up whose holders no longer
/// hold their rows (a lowered limit: a job running keeps its row,
/// and counts against the new limit, until it finishes).
pub const SLOTS_TRIM_IDLE: &str = "DELETE FROM jobq_slots WHERE queue = ?1 AND slot >= ?2 \
     AND NOT EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_slots.job_id \
       AND j.lease_token = jobq_slots.lease_token AND j.status = 'processing')";

/// Whether queue `?1` has a job due at `?2` (a limited claim with no free slot).
pub const DUE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM jobq_jobs \
     WHERE queue = ?1 AND status = 'pending' AND run_at <= ?2)";

/// Writes each `[slot, job_id, lease_token]` of the JSON array `?2` into
/// queue `?1`'s slot rows: one statement for the whole claim.
pub const SLOTS_ASSIGN: &str = "INSERT INTO jobq_slots (queue, slot, job_id, lease_token) \
     SELECT ?1, json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') \
     FROM json_each(?2) WHERE true \
     ON CONFLICT (queue, slot) DO UPDATE SET job_id = excluded.job_id, lease_token = excluded.lease_token";

/// Sets queue `?1`'s limit to `?2` at `?3`.
pub const LIMIT_SET: &str = "INSERT INTO jobq_limits (queue, max_running, updated_at) \
     VALUES (?1, ?2, ?3) \
     ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running, updated_at = excluded.updated_at";

/// Removes queue `?1`'s limit.
pub const LIMIT_REMOVE: &str = "DELETE FROM jobq_limits WHERE queue = ?1";

/// Makes queue `?1`'s slot rows `0..?2` (those there already stay as they are).
pub const SLOTS_FILL: &str = "WITH RECURSIVE n(slot) AS \
     (SELECT 0 UNION ALL SELECT slot + 1 FROM n WHERE slot + 1 < ?2) \
     INSERT OR IGNORE INTO jobq_slots (queue, slot) SELECT ?1, slot FROM n";

/// Drops queue `?1`'s slots from number `?2` up.
pub const SLOTS_TRIM: &str = "DELETE FROM jobq_slots WHERE queue = ?1 AND slot >= ?2";

/// `jobq_runtime::testing`'s drain with scheduled jobs: every pending job of
/// queue `?2` not due yet becomes due at `?1` (now).
#[cfg(feature = "testing")]
#[cfg(feature = "testing")]
pub const MAKE_DUE: &str =
    "UPDATE jobq_jobs SET run_at = ?1 WHERE queue = ?2 AND status = 'pending' AND run_at > ?1";

// ---------------------------------------------------------------------------
// `Jobq::doctor` (see `doctor.rs`): reads only.

/// `EXPLAIN QUERY PLAN` of one of jobq's statements.
pub(crate) fn explain_query_plan(sql: &str) -> String {
    format!("EXPLAIN QUERY PLAN {sql}")
}

/// The database's journal mode (`wal`, `memory`, `delete`, …).
pub const DOCTOR_JOURNAL_MODE: &str = "PRAGMA journal_mode";

/// Whether `jobq_migrations` exists, then what it records.
pub const DOCTOR_MIGRATIONS: [&str; 2] = [DOCTOR_MIGRATIONS_TABLE, MIGRATIONS_APPLIED];

/// Whether `jobq_migrations` exists.
pub const DOCTOR_MIGRATIONS_TABLE: &str =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobq_migrations'";

/// Registers a running worker (`jobq_workers`, one row per `Worker`): `?1`
/// id, `?2` worker id, `?3` host, `?4` pid, `?5` version, `?6` queues
/// (JSON), `?7` jobs (JSON), `?8` running, `?9` now, `?10` expiry.
pub const WORKER_REGISTER: &str = "INSERT INTO jobq_workers \
     (id, worker_id, host, pid, version, queues, jobs, running, started_at, last_seen, expires_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10)";

/// A worker's periodic refresh: `?1` running, `?2` now, `?3` expiry, `?4`
/// id. Matches nothing if its row was deleted as expired (it registers again).
pub const WORKER_REFRESH: &str =
    "UPDATE jobq_workers SET running = ?1, last_seen = ?2, expires_at = ?3 WHERE id = ?4";

/// A worker's row, at its clean shutdown: `?1` id.
pub const WORKER_UNREGISTER: &str = "DELETE FROM jobq_workers WHERE id = ?1";

/// The rows of workers that stopped refreshing (killed, frozen, cut off),
/// deleted by any worker: no leader. `?1` now.
pub const WORKERS_PRUNE: &str = "DELETE FROM jobq_workers WHERE expires_at < ?1";

/// The live workers at `?1` (now), oldest first.
pub const WORKERS_LIVE: &str = "SELECT worker_id, host, pid, version, queues, jobs, running, \
     started_at, last_seen, expires_at \
     FROM jobq_workers WHERE expires_at > ?1 ORDER BY started_at, id";

/// The watcher's look at the queues of JSON array `?2` at `?1` (Unix µs;
/// see `store::look`): per queue, µs from then to its earliest `pending`
/// row's `run_at` and to its earliest `processing` row's (a lease's end),
/// from the claim index.
pub const LOOK: &str = "SELECT q.value, \
     (SELECT MIN(j.run_at) - ?1 FROM jobq_jobs j WHERE j.queue = q.value AND j.status = 'pending'), \
     (SELECT MIN(j.run_at) - ?1 FROM jobq_jobs j WHERE j.queue = q.value AND j.status = 'processing') \
     FROM json_each(?2) q";

/// Records `?2` (µs) as schedule `?1`'s last tick enqueued, unless a later
/// one is; `?3` now (µs).
pub const TICK_RECORD: &str = "INSERT INTO jobq_schedules (name, last_tick, updated_at) \
     VALUES (?1, ?2, ?3) ON CONFLICT (name) DO UPDATE \
     SET last_tick = MAX(COALESCE(last_tick, excluded.last_tick), excluded.last_tick), \
     updated_at = excluded.updated_at";

/// Schedule `?1`'s last tick enqueued (µs).
pub const TICK_LAST: &str = "SELECT last_tick FROM jobq_schedules WHERE name = ?1";

/// Stores schedule `?1` (job `?2`, payload `?3`, cron `?4`, zone `?5`,
/// queue `?6`, priority `?7`) at `?8` (now, µs), keeping its last tick and
/// pause.
pub const SCHEDULE_PUT: &str = "INSERT INTO jobq_schedules \
     (name, job_name, payload, schedule, time_zone, queue, priority, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (name) DO UPDATE \
     SET job_name = excluded.job_name, payload = excluded.payload, schedule = excluded.schedule, \
     time_zone = excluded.time_zone, queue = excluded.queue, priority = excluded.priority, \
     updated_at = excluded.updated_at";

/// Pauses (`?2` true) or resumes stored schedule `?1`; `?3` now (µs).
pub const SCHEDULE_PAUSE: &str = "UPDATE jobq_schedules \
     SET paused_at = CASE WHEN ?2 THEN COALESCE(paused_at, ?3) END, updated_at = ?3 \
     WHERE name = ?1 AND job_name IS NOT NULL";

/// Removes stored schedule `?1`.
pub const SCHEDULE_REMOVE: &str =
    "DELETE FROM jobq_schedules WHERE name = ?1 AND job_name IS NOT NULL";

/// The schedules kept in the database, by name.
pub const SCHEDULES_STORED: &str =
    concat!(crate::store::sql::stored_schedules!(), " ORDER BY name");

/// Stored schedule `?1`, as [`SCHEDULES_STORED`] reads it.
pub const SCHEDULE_STORED: &str = concat!(crate::store::sql::stored_schedules!(), " AND name = ?1");

/// The embedded migrations (`jobq-runtime/migrations/sqlite/`), in order.
pub(crate) const MIGRATIONS: &[Migration] = migrations!("sqlite":
    20261129000001 "jobq_jobs",
    20261130000001 "jobq_jobs_finished",
    20261201170001 "jobq_queues",
    20261204000001 "jobq_jobs_job_name",
    20261204000002 "jobq_workers",
    20261204120001 "jobq_jobs_no_created_index",
    20261204120002 "jobq_jobs_partial_key_index",
    20261205000001 "jobq_limits",
    20261206000001 "jobq_unique",
    20261206000002 "jobq_rates",
    20261207000001 "jobq_keys",
    20261207000002 "jobq_key_rates",
    20261209000001 "jobq_history",
    20261209000002 "jobq_output",
    20261209000003 "jobq_checkpoint",
    20261210000001 "jobq_tags",
    20261211000001 "jobq_schedules",
    20261212000001 "jobq_workflows",
    20261213000001 "jobq_batches",
);

crate::store::sql::flow_statements!("IN (SELECT value FROM json_each(?1))", "?1");

crate::store::sql::batch_statements!("IN (SELECT value FROM json_each(?1))", "?1", "?2", "?3", "");

/// Records the jobs of a batch: `?1` a JSON array of `[job_id, batch, role]`.
pub const BATCH_JOBS_INSERT: &str = "INSERT INTO jobq_batch_jobs (job_id, batch, role) \
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?1)";

/// Names the jobs of a workflow: `?1` a JSON array of `[job_id, workflow, task]`.
pub const FLOW_JOBS_INSERT: &str = "INSERT INTO jobq_flow_jobs (job_id, workflow, task) \
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?1)";

/// Records dependencies: `?1` a JSON array of `[job_id, depends_on, run_anyway]`.
pub const FLOW_EDGES_INSERT: &str = "INSERT INTO jobq_deps (job_id, depends_on, run_anyway) \
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?1)";

/// Makes the `blocked` jobs `?2` (a JSON array) `pending`, due at `?1`
/// (now) at the earliest (their queue wait counts from here).
pub const FLOW_UNBLOCK: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = MAX(run_at, ?1) \
     WHERE status = 'blocked' AND id IN (SELECT value FROM json_each(?2))";

/// Cancels the `blocked` jobs `?3` (a JSON array) at `?1` (now) with
/// `last_error` `?2`.
pub const FLOW_CANCEL: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = ?1, \
     run_at = ?1, lease_token = NULL, last_error = ?2 \
     WHERE status = 'blocked' AND id IN (SELECT value FROM json_each(?3))";
