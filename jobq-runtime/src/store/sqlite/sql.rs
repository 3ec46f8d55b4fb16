//! Every statement the SQLite store runs (see the facts in the store's module docs).

/// How jobq's multi-statement transactions begin: with the write lock.
pub const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";

/// `?1` queue … `?8` created_at. A duplicate key bumps `dedupe_hits` and
/// returns the existing row, so `dedupe_hits > 0` means "duplicate".
pub const INSERT: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (idempotency_key) DO UPDATE SET dedupe_hits = dedupe_hits + 1 \
     RETURNING id, dedupe_hits";

/// [`INSERT`] for a job without a key, with the same parameters (`?7`, the
/// key, unused).
pub const INSERT_KEYLESS: &str = "INSERT INTO jobq_jobs \
     (queue, job_name, payload, priority, run_at, max_attempts, created_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8)";

/// `?1` queue, `?2` now, `?3` limit: the claim's rows, in claim order, with
/// the `run_at` they were due at (in the index: the read stays covering).
pub const PICK: &str = "SELECT id, run_at FROM jobq_jobs \
     WHERE queue = ?1 AND status = 'pending' AND run_at <= ?2 \
     ORDER BY priority, run_at, id LIMIT ?3";

/// `?1` the claim's token base (each row's token is base + id, see
/// `new_token_base`), `?2` now, `?3` lease deadline, `?4` worker,
/// `?5` the picked ids as a JSON array (one statement text for any batch
/// size). The text columns come back as bytes: SQLite holds whatever another
/// program wrote (a BLOB, text that is not UTF-8), and one such row must fail
/// on its own, not fail every claim of its queue (see `ClaimedJob::from_bytes`).
pub const CLAIM: &str = "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, \
     lease_token = ?1 + id, run_at = ?3, claimed_by = ?4, claimed_at = ?2 \
     WHERE id IN (SELECT value FROM json_each(?5)) \
     RETURNING id, CAST(job_name AS BLOB), CAST(payload AS BLOB), attempts, max_attempts, \
     CAST(idempotency_key AS BLOB)";

/// `?1` status, `?2` new run_at, `?3` refunded attempts, `?4` error, `?5` now,
/// `?6` id, `?7` token. SQLite's SET sees the old row, hence `?1` in `finished_at`.
pub const TRANSITION: &str = "UPDATE jobq_jobs SET status = ?1, run_at = ?2, attempts = attempts - ?3, \
     last_error = COALESCE(?4, last_error), \
     finished_at = CASE WHEN ?1 = 'failed' THEN ?5 ELSE NULL END, \
     lease_token = NULL \
     WHERE id = ?6 AND lease_token = ?7 AND status = 'processing'";

/// `?1` now, `?2` queue, `?3` limit. A single statement: with one writer at a
/// time there is no lock order to get wrong (unlike InnoDB).
/// An orphan keeps its place in line: `run_at` goes back to when it was enqueued.
pub const REAP: &str = "UPDATE jobq_jobs SET \
     last_error = 'lease expired during attempt ' || attempts || ': worker ' || COALESCE(claimed_by, '?') \
         || ' stopped renewing it (crashed, killed or stalled)', \
     finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END, \
     status = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END, \
     run_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE created_at END, lease_token = NULL \
     WHERE id IN (SELECT id FROM jobq_jobs \
                  WHERE queue = ?2 AND status = 'processing' AND run_at < ?1 \
                  ORDER BY priority, run_at, id LIMIT ?3)";

/// Text columns as bytes, decoded lossily: any row can be inspected.
pub const JOB: &str = "SELECT id, CAST(queue AS BLOB) AS queue, CAST(job_name AS BLOB) AS job_name, \
     CAST(payload AS BLOB) AS payload, status, priority, attempts, max_attempts, run_at, \
     CAST(idempotency_key AS BLOB) AS idempotency_key, CAST(last_error AS BLOB) AS last_error, \
     CAST(claimed_by AS BLOB) AS claimed_by, claimed_at, created_at, finished_at \
     FROM jobq_jobs WHERE id = ?1";

/// Finished rows of two statuses, oldest first, through `jobq_jobs_finished`.
pub const PRUNE: &str = "DELETE FROM jobq_jobs WHERE id IN ( \
     SELECT id FROM jobq_jobs WHERE finished_at < ?1 AND status IN (?2, ?3) \
     ORDER BY finished_at LIMIT ?4) \
     AND status IN (?2, ?3)";

/// `?1` now, `?2` id: cancels a `pending` or `processing` row.
pub const CANCEL: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = ?1, run_at = ?1, lease_token = NULL \
     WHERE id = ?2 AND status IN ('pending', 'processing')";

/// `?1` now, `?2` id: sends a `failed` or `cancelled` row back to `pending`.
pub const RETRY: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = ?1, finished_at = NULL, \
     max_attempts = MAX(max_attempts, attempts + 1) \
     WHERE id = ?2 AND status IN ('failed', 'cancelled')";

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
