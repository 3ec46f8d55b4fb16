//! Every statement the PostgreSQL store runs (see the facts in the store's module docs).

use crate::store::contract::RowLocks;
use crate::store::filter::{Filtered, KeyPieces, Pieces};
use crate::store::migrate::{Migration, migrations};
use crate::store::sql::row_locks;

/// What follows the picked rows of a cancel: the UPDATE by primary key
/// (`= ANY (ARRAY(…))`, as the claim, for the reason in the module docs)
/// with the guard of a single cancel, and the picked rows it changed.
macro_rules! cancel_tail {
    () => {
        "), changed AS (
    UPDATE jobq_jobs
       SET status = 'cancelled', finished_at = now(), run_at = now(), lease_token = NULL
     WHERE id = ANY (ARRAY(SELECT id FROM picked)) AND status IN ('pending', 'processing', 'blocked')
    RETURNING id
)
SELECT picked.id, picked.lease_token FROM picked JOIN changed USING (id)"
    };
}

/// What a retry sets: `pending`, runnable now, with at least one more attempt.
macro_rules! retry_set {
    () => {
        "UPDATE jobq_jobs SET status = CASE WHEN concurrency_key IS NULL THEN 'pending' ELSE 'blocked' END,
       run_at = now(), finished_at = NULL,
       max_attempts = GREATEST(max_attempts, attempts + 1)"
    };
}

/// Every column `Jobq::job` reports.
macro_rules! job_columns {
    () => {
        "SELECT id, queue, job_name, payload, status, priority, attempts, max_attempts,
       run_at, COALESCE(idempotency_key, unique_key) AS idempotency_key, last_error, claimed_by,
       claimed_at, created_at, finished_at, history::text AS history, output, progress,
       metadata, tags
  FROM jobq_jobs"
    };
    (list) => {
        "SELECT id, queue, job_name, payload, status, priority, attempts, max_attempts,
       run_at, COALESCE(idempotency_key, unique_key) AS idempotency_key, last_error, claimed_by,
       claimed_at, created_at, finished_at, NULL::text AS history, NULL::text AS output, progress,
       NULL::text AS metadata, tags
  FROM jobq_jobs"
    };
}

/// How long jobq's own transactions may sit idle between two statements
/// before the server ends the session and rolls them back (see
/// [`BEGIN_BOUNDED`]).
pub const IDLE_TRANSACTION_SECONDS: u64 = 10;

/// The `BEGIN` of every transaction of jobq's own: a transaction left idle
/// for [`IDLE_TRANSACTION_SECONDS`] (its host cut off, its process frozen
/// between two statements) has its session ended by the server and is
/// rolled back, instead of holding its row locks until the server notices
/// the dead client (TCP keepalive: hours). A limited claim cut off after
/// locking its queue's slots would otherwise keep every other worker from
/// claiming in that queue. `SET LOCAL`: it ends with the transaction, so an
/// application's own transactions on a shared pool keep the server's
/// setting. Sent with the `BEGIN`, in one round trip.
pub const BEGIN_BOUNDED: &str = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = '10s'";

/// A job's metadata and tags (JSON texts, `$3` its id), written in the
/// transaction that inserted it (see [`TAGS_INSERT`]).
pub const ATTACH: &str = "UPDATE jobq_jobs SET metadata = $1, tags = $2 WHERE id = $3";

/// A job's rows in the tags' index: one per element of its tags (the JSON
/// array [`ATTACH`] stored).
pub const TAGS_INSERT: &str = "INSERT INTO jobq_job_tags (job_id, tag) \
     SELECT $1, jsonb_array_elements_text($2::jsonb)";

/// A unique job's first statement: makes its key's row in `jobq_unique`
/// (no job yet) or locks the existing one (`DO UPDATE` locks it; in a
/// caller's REPEATABLE READ transaction a row changed since its snapshot
/// fails with a serialization error rather than being read stale) until
/// the enqueue's transaction ends: enqueues of one key take turns.
pub const UNIQUE_TAKE: &str = "INSERT INTO jobq_unique (ukey, job_id, states) VALUES ($1, 0, 0)
    ON CONFLICT (ukey) DO UPDATE SET job_id = jobq_unique.job_id";

/// A keyed enqueue's first statement: makes its key's row or locks it
/// until the enqueue's transaction ends, with the job's limit (`$1` key,
/// `$2` limit).
pub const KEY_TAKE: &str = "INSERT INTO jobq_keys (ckey, max_running) VALUES ($1, $2)
    ON CONFLICT (ckey) DO UPDATE SET max_running = EXCLUDED.max_running";

/// The front of key `$1`'s job list, `$2` members, with each job's status
/// (NULL: its row is gone); read after [`KEY_TAKE`] locked the key, in a
/// statement of its own: READ COMMITTED sees every change committed before.
pub const KEY_FRONT: &str = "SELECT k.job_id, j.status
  FROM jobq_key_jobs k LEFT JOIN jobq_jobs j ON j.id = k.job_id
 WHERE k.ckey = $1 ORDER BY k.job_id LIMIT $2";

/// A keyed job's row (`$9` its status, `$10` its key, `$12` its limit),
/// with its NOTIFY if `$11` and it is `pending`; a repeat of its
/// idempotency key hits the existing row.
pub const INSERT_KEYED: &str = "WITH ins AS (
    INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at, status, concurrency_key, concurrency_limit)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp(), $9, $10, $12)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, dedupe_hits, queue, status
)
SELECT id, dedupe_hits, CASE WHEN $11 AND status = 'pending' THEN pg_notify('jobq', queue)::text END FROM ins";

/// Lists job `$2` in key `$1`'s jobs (once).
pub const KEY_JOIN: &str =
    "INSERT INTO jobq_key_jobs (ckey, job_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";

/// Locks the rows of keys `$1`, in key order (every release locks in that
/// order), with their limits.
pub const KEYS_LOCK: &str =
    "SELECT ckey, max_running FROM jobq_keys WHERE ckey = ANY($1) ORDER BY ckey FOR UPDATE";

/// The fronts of keys `$1` (`$2` members each): `(key, job id, status)`.
pub const KEY_FRONTS: &str = "SELECT f.ckey, f.job_id, f.status
  FROM unnest($1::text[], $2::bigint[]) AS q(ckey, n)
 CROSS JOIN LATERAL (
    SELECT k.ckey, k.job_id, j.status
      FROM jobq_key_jobs k LEFT JOIN jobq_jobs j ON j.id = k.job_id
     WHERE k.ckey = q.ckey ORDER BY k.job_id LIMIT q.n) AS f";

/// Forgets the `(key, job id)` members `($1[i], $2[i])`.
pub const KEY_FORGET: &str = "DELETE FROM jobq_key_jobs k
 USING unnest($1::text[], $2::bigint[]) AS f(ckey, job_id)
 WHERE k.ckey = f.ckey AND k.job_id = f.job_id";

/// Makes jobs `$1` `pending` if still `blocked`, with one NOTIFY per queue.
pub const KEY_UNBLOCK: &str = "WITH u AS (
    UPDATE jobq_jobs SET status = 'pending' WHERE id = ANY($1) AND status = 'blocked' RETURNING queue
)
SELECT pg_notify('jobq', q)::text FROM (SELECT DISTINCT queue AS q FROM u) AS d";

/// Deletes the rows of keys `$1` that list no job.
pub const KEYS_DROP: &str = "DELETE FROM jobq_keys WHERE ckey = ANY($1)
   AND NOT EXISTS (SELECT 1 FROM jobq_key_jobs k WHERE k.ckey = jobq_keys.ckey)";

/// The distinct concurrency keys of rows `$1`.
pub const KEYS_OF: &str = "SELECT DISTINCT concurrency_key FROM jobq_jobs
 WHERE id = ANY($1) AND concurrency_key IS NOT NULL";

/// Makes the key rows of rows `$1` that have a concurrency key, with the
/// row's limit, where they are missing, and locks those that exist (a
/// `DO NOTHING` would not: a release could delete the row after this
/// statement and before the job is listed), before [`KEYS_REJOIN`].
pub const KEYS_REMAKE: &str = "INSERT INTO jobq_keys (ckey, max_running)
SELECT DISTINCT ON (concurrency_key) concurrency_key, COALESCE(concurrency_limit, 1) FROM jobq_jobs
 WHERE id = ANY($1) AND concurrency_key IS NOT NULL
ON CONFLICT (ckey) DO UPDATE SET max_running = jobq_keys.max_running";

/// Lists rows `$1` that have a concurrency key in their keys again.
pub const KEYS_REJOIN: &str = "INSERT INTO jobq_key_jobs (ckey, job_id)
SELECT concurrency_key, id FROM jobq_jobs WHERE id = ANY($1) AND concurrency_key IS NOT NULL
ON CONFLICT DO NOTHING";

/// Up to `$2` keys after `$1`, in order: a page of the sweep.
pub const KEY_PAGE: &str = "SELECT ckey FROM jobq_keys WHERE ckey > $1 ORDER BY ckey LIMIT $2";

/// The key's row and its holder's status bit (see `UniqueRow`).
pub const UNIQUE_HOLDER: &str = "SELECT u.job_id, u.states::bigint,
       (u.held_until IS NULL OR u.held_until > statement_timestamp()),
       (CASE j.status WHEN 'pending' THEN 1 WHEN 'blocked' THEN 1 WHEN 'processing' THEN 2 WHEN 'done' THEN 4
          WHEN 'failed' THEN 8 WHEN 'cancelled' THEN 16 ELSE 0 END)::bigint
  FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id
 WHERE u.ukey = $1";

/// A page of `jobq_unique` after key `$1`, `$2` rows, in key order: each
/// key, its holder and whether the holder's row is gone.
pub const UNIQUE_SCAN: &str = "SELECT u.ukey, u.job_id, j.id IS NULL
  FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id
 WHERE u.ukey > $1 ORDER BY u.ukey LIMIT $2";

/// Deletes key `$1`'s row if it still names holder `$2`.
pub const UNIQUE_FORGET: &str = "DELETE FROM jobq_unique WHERE ukey = $1 AND job_id = $2";

/// A unique job's row, its key in `unique_key`; `$9`: whether to NOTIFY
/// (an enqueue in the caller's transaction: sent when that commits).
pub const INSERT_UNIQUE: &str = "WITH ins AS (
    INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, unique_key, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp())
    RETURNING id, queue
)
SELECT id, CASE WHEN $9 THEN pg_notify('jobq', queue)::text END FROM ins";

/// Writes the new holder into its key's row: `$1` key, `$2` job id, `$3`
/// states, `$4` period in µs (NULL: none).
pub const UNIQUE_HOLD: &str = "UPDATE jobq_unique SET job_id = $2, states = $3,
       held_until = statement_timestamp() + $4 * interval '1 microsecond'
 WHERE ukey = $1";

/// One row; `ON CONFLICT` returns the existing row for a known key, and
/// `dedupe_hits > 0` tells a duplicate from a new row (the count wraps from
/// 2³¹ − 1 to 1, never to 0 and never out of its `integer`'s range). Enqueues on jobq's
/// pool announce the queue through the `Notifier` after the commit.
pub const INSERT_QUIET: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp())
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, dedupe_hits";

/// [`INSERT_QUIET`] for a job without an idempotency key: nothing can
/// conflict, and a plain INSERT skips the speculative insertion that
/// `ON CONFLICT` costs on every row.
pub const INSERT_QUIET_KEYLESS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, statement_timestamp())
    RETURNING id, 0";

/// [`INSERT_QUIET`] plus its NOTIFY, for an enqueue inside the caller's
/// transaction: the wake-up goes out when that transaction commits, never
/// for a rolled-back row.
pub const INSERT: &str = "WITH ins AS (
    INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    VALUES ($1, $2, $3, $4, COALESCE($5, statement_timestamp() + $6 * interval '1 microsecond'), $7, $8, statement_timestamp())
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, dedupe_hits, queue
)
SELECT id, dedupe_hits, pg_notify('jobq', queue)::text FROM ins";

/// [`INSERT_MANY`] for a batch without idempotency keys (the common case):
/// nothing can conflict, so a plain `INSERT … SELECT` in ordinal order. The
/// identity default is drawn row by row as the sorted rows are inserted, so
/// the ids ascend in input order (a sequence only ever hands one session
/// increasing values): the caller sorts the returned ids and pairs them with
/// the input, whatever order RETURNING sends them in. The rows have
/// [`INSERT_MANY`]'s shape, `(0, id, 0)`.
pub const INSERT_MANY_KEYLESS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    SELECT queue, job_name, payload, priority,
           COALESCE(at, statement_timestamp() + delay_us * interval '1 microsecond'),
           max_attempts, statement_timestamp()
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::bigint[], $7::int[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, at, delay_us, max_attempts, ord)
     ORDER BY ord
    RETURNING 0::bigint, id, 0";

/// [`INSERT_MANY_KEYLESS`] for rows that are all due now: two arrays fewer
/// to send and unpack.
pub const INSERT_MANY_NOW: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, created_at)
    SELECT queue, job_name, payload, priority, statement_timestamp(), max_attempts, statement_timestamp()
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::int[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, max_attempts, ord)
     ORDER BY ord
    RETURNING 0::bigint, id, 0";

/// Many rows from parallel arrays: one statement text for every batch size.
///
/// RETURNING can only name the table's columns, so each input row gets its
/// id from the identity sequence up front (`input`); a new row comes back
/// with that id, a duplicate with its key, and the final SELECT maps both
/// back to the input's ordinal. Keys are distinct within a batch (the caller
/// folds repeats), as `ON CONFLICT DO UPDATE` cannot touch a row twice.
pub const INSERT_MANY: &str = "WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('jobq_jobs', 'id')) AS id, t.*
      FROM UNNEST($1::text[], $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::bigint[], $7::int[], $8::text[])
           WITH ORDINALITY AS t(queue, job_name, payload, priority, at, delay_us, max_attempts, idempotency_key, ord)
), ins AS (
    INSERT INTO jobq_jobs (id, queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, queue, job_name, payload, priority,
           COALESCE(at, statement_timestamp() + delay_us * interval '1 microsecond'),
           max_attempts, idempotency_key, statement_timestamp()
      FROM input ORDER BY ord
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
    DO UPDATE SET dedupe_hits = CASE WHEN jobq_jobs.dedupe_hits >= 2147483647 THEN 1 ELSE jobq_jobs.dedupe_hits + 1 END
    RETURNING id, idempotency_key, dedupe_hits
)
SELECT input.ord, COALESCE(by_key.id, by_id.id), COALESCE(by_key.dedupe_hits, by_id.dedupe_hits)
  FROM input
  LEFT JOIN ins AS by_key ON by_key.idempotency_key = input.idempotency_key
  LEFT JOIN ins AS by_id ON by_id.id = input.id
 ORDER BY input.ord";

/// Claims up to `$2` due rows of queue `$1` in claim order, in one statement.
pub const CLAIM: &str = r#"WITH picked AS (
    SELECT id, priority, run_at FROM jobq_jobs
     WHERE queue = $1 AND status = 'pending' AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobq_jobs AS j
       SET status = 'processing',
           attempts = j.attempts + 1,
           -- each row's own token: the claim's random base + the id
           lease_token = $3 + j.id,
           run_at = now() + $4 * interval '1 microsecond',
           claimed_by = $5,
           claimed_at = now()
     WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.job_name, j.payload, j.attempts, j.max_attempts,
              COALESCE(j.idempotency_key, j.unique_key) AS idempotency_key, j.concurrency_key,
              j.metadata, j.tags
), no_flush AS (
    -- This statement's transaction commits without waiting for its WAL
    -- flush: a claim lost in a server crash leaves its jobs pending, to be
    -- claimed again (at-least-once, as after a worker crash); the settle's
    -- own flush makes the claim durable along with it.
    SELECT set_config('synchronous_commit', 'off', true)
)
-- RETURNING comes in no particular order and the claim overwrote run_at:
-- the picked order's keys come along, for the caller to sort by.
SELECT c.id, c.job_name, c.payload, c.attempts, c.max_attempts, c.idempotency_key,
       p.priority, p.run_at, c.concurrency_key, c.metadata, c.tags
  FROM claimed AS c JOIN picked AS p USING (id) CROSS JOIN no_flush
"#;

/// `history` with one more entry (an expression over the row `$row`): the
/// attempt (its number, worker and start as the claim left them), when it
/// ended (the transaction's `now()`, as `finished_at`), `$outcome` and
/// `$error`; the oldest entry goes once it holds
/// [`HISTORY_CAP`](crate::HISTORY_CAP) entries (25).
macro_rules! history_append {
    ($row:literal, $outcome:literal, $error:literal) => {
        concat!(
            "(CASE WHEN jsonb_array_length(COALESCE(",
            $row,
            ".history, '[]'::jsonb)) >= 25 \
             THEN ",
            $row,
            ".history - 0 ELSE COALESCE(",
            $row,
            ".history, '[]'::jsonb) END) \
             || jsonb_build_array(jsonb_build_object('attempt', ",
            $row,
            ".attempts, \
             'worker', ",
            $row,
            ".claimed_by, \
             'started_us', (extract(epoch FROM ",
            $row,
            ".claimed_at) * 1000000)::bigint, \
             'ended_us', (extract(epoch FROM now()) * 1000000)::bigint, \
             'outcome', ",
            $outcome,
            ", 'error', ",
            $error,
            "))"
        )
    };
}

/// Up to `$2` expired rows of queue `$1`, each with its row version
/// (`xmin`): the reaper's first look, [`REAP`] its second.
pub const REAP_SEEN: &str = "SELECT id, xmin::text FROM jobq_jobs \
     WHERE queue = $1 AND status = 'processing' AND run_at < now() \
     ORDER BY run_at LIMIT $2";

/// Returns to `pending` (or `failed`) the rows `$1` whose versions are
/// still `$2` ([`REAP_SEEN`]'s, a moment before) and still expired.
pub const REAP: &str = concat!(
    r#"-- Only a row nobody wrote since the first look: a transaction that held
-- the row (so that its worker's renewal waited) and wrote it leaves a new
-- version, which the waiting renewal locks only once it is woken after that
-- commit; a reaper taking that version first would reap a running attempt.
-- An orphan keeps its place in line: run_at goes back to when it was
-- enqueued, not behind a backlog of jobs enqueued since. A failed row's
-- run_at is when it failed, as for every finished row.
WITH expired AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::text[]) AS seen(id, version)
        ON j.id = seen.id AND j.xmin = seen.version::xid
     WHERE j.status = 'processing' AND j.run_at < now()
       FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobq_jobs AS j
   SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
       finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
       last_error = 'lease expired during attempt ' || j.attempts || ': worker '
           || COALESCE(j.claimed_by, '?') || ' stopped renewing it (crashed, killed or stalled)',
       run_at = CASE WHEN j.attempts >= j.max_attempts THEN now() ELSE j.created_at END,
       lease_token = NULL,
       history = "#,
    history_append!(
        "j",
        "'lease expired'",
        "'lease expired during attempt ' || j.attempts || ': worker ' \
         || COALESCE(j.claimed_by, '?') || ' stopped renewing it (crashed, killed or stalled)'"
    ),
    r#"
 WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
"#
);

// Settles and heartbeats find their rows by primary key from the fence
// list, matching the token alone: a token is non-null only while its claim
// holds the row (every way out of `processing` clears it), so it fences as
// `status = 'processing'` would. Leaving the status test out leaves the
// planner no partial index to scan instead of the primary key: with stale
// statistics it took `jobq_jobs_lease` (every processing row) and looped
// over the fence list for each, 1.5 s per 1,000 settles during a fast drain.
/// Saves held job $2's (token $3) checkpoint $1 (JSON).
pub const CHECKPOINT_SAVE: &str = "UPDATE jobq_jobs SET checkpoint = $1 \
     WHERE id = $2 AND lease_token = $3 AND status = 'processing'";

/// Job $1's checkpoint.
pub const CHECKPOINT_LOAD: &str = "SELECT checkpoint FROM jobq_jobs WHERE id = $1";

/// Records held job $2's (token $3) progress $1 (JSON).
pub const PROGRESS_SAVE: &str = "UPDATE jobq_jobs SET progress = $1 \
     WHERE id = $2 AND lease_token = $3 AND status = 'processing'";

/// Marks held job `$2` (token `$3`) `done` with its handler's output `$1`.
pub const COMPLETE_OUTPUT: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = now(), run_at = now(), \
     lease_token = NULL, output = $1 WHERE id = $2 AND lease_token = $3 AND status = 'processing'";

/// Marks the fenced rows `done`.
pub const COMPLETE: &str = r#"UPDATE jobq_jobs AS j
   SET status = 'done', finished_at = now(), run_at = now(), lease_token = NULL
  FROM UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
 WHERE j.id = f.id AND j.lease_token = f.token
"#;

/// The renewal that waits on another transaction's row lock (the
/// heartbeat's renewal of a locked row, `extend_lease`). Returns the fences
/// it still held, so the lost ones are known exactly.
pub const HEARTBEAT: &str = r#"-- Locks first, then renews: the lease runs from when the row is written
-- (clock_timestamp(), after any wait), not from when the statement began
-- (now()). A plain UPDATE computes its new row before it waits on a lock
-- that is only held (not written), so a renewal that waited longer than a
-- lease would write a lease already over, for a reaper to take at once.
WITH held AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
        ON j.id = f.id AND j.lease_token = f.token
       FOR UPDATE OF j
)
UPDATE jobq_jobs AS j
   SET run_at = clock_timestamp() + $3 * interval '1 microsecond'
 WHERE j.id = ANY (ARRAY(SELECT id FROM held))
RETURNING j.id, j.lease_token
"#;

/// The heartbeat of rows a stuck settle is writing: skips the locked ones.
pub const HEARTBEAT_UNLOCKED: &str = r#"-- A heartbeat that never waits on a row lock: rows another transaction
-- holds are skipped (and so not returned).
WITH free AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
        ON j.id = f.id AND j.lease_token = f.token
       FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobq_jobs AS j
   SET run_at = now() + $3 * interval '1 microsecond'
 WHERE j.id = ANY (ARRAY(SELECT id FROM free))
RETURNING j.id, j.lease_token
"#;

/// PostgreSQL evaluates every SET expression on the old row, so
/// `finished_at` looks at the new status through `$1`.
/// `$7` the history entry's outcome (`NULL`: no entry), `$8` its message.
pub const TRANSITION: &str = concat!(
    "UPDATE jobq_jobs SET status = $1,
       run_at = now() + $2 * interval '1 microsecond',
       attempts = attempts - $3,
       last_error = COALESCE($4, last_error),
       finished_at = CASE WHEN $1 = 'failed' THEN now() END,
       lease_token = NULL,
       history = CASE WHEN $7::text IS NULL THEN history ELSE ",
    history_append!("jobq_jobs", "$7::text", "$8::text"),
    " END
 WHERE id = $5 AND lease_token = $6 AND status = 'processing'"
);

/// Finished rows of queue `$1` in status `$2`, oldest first, through
/// `jobq_jobs_finished_by_queue` (`finished_at < …` implies its
/// `finished_at IS NOT NULL`); the outer `status` test holds against a
/// concurrent `retry` (PostgreSQL re-checks it on the row's newest version).
pub const PRUNE: &str = "DELETE FROM jobq_jobs WHERE id IN (
    SELECT id FROM jobq_jobs
     WHERE queue = $1 AND status = $2 AND finished_at < now() - $3 * interval '1 microsecond'
     ORDER BY finished_at LIMIT $4)
   AND status = $2";

/// The queues with finished rows, for prune: a skip scan of
/// `jobq_jobs_finished_by_queue`, one index descent per queue.
pub const PRUNE_QUEUES: &str = "WITH RECURSIVE finished(queue) AS (
    (SELECT queue FROM jobq_jobs WHERE finished_at IS NOT NULL ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobq_jobs AS j
             WHERE j.finished_at IS NOT NULL AND j.queue > f.queue ORDER BY j.queue LIMIT 1)
      FROM finished AS f WHERE f.queue IS NOT NULL
)
SELECT queue FROM finished WHERE queue IS NOT NULL";

/// The database's clock, the moment a `stats` call reads its figures at.
pub const CLOCK: &str = "SELECT statement_timestamp()";

/// Every queue with a row: a skip scan (one index descent per queue) of
/// each partial index that starts with `queue`: `jobq_jobs_claim` (pending),
/// `jobq_jobs_lease` (processing), `jobq_jobs_finished_by_queue` (finished).
pub const QUEUES: &str = "WITH RECURSIVE pending(queue) AS (
    (SELECT queue FROM jobq_jobs WHERE status = 'pending' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobq_jobs AS j
             WHERE j.status = 'pending' AND j.queue > p.queue ORDER BY j.queue LIMIT 1)
      FROM pending AS p WHERE p.queue IS NOT NULL
), processing(queue) AS (
    (SELECT queue FROM jobq_jobs WHERE status = 'processing' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobq_jobs AS j
             WHERE j.status = 'processing' AND j.queue > p.queue ORDER BY j.queue LIMIT 1)
      FROM processing AS p WHERE p.queue IS NOT NULL
), finished(queue) AS (
    (SELECT queue FROM jobq_jobs WHERE finished_at IS NOT NULL ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM jobq_jobs AS j
             WHERE j.finished_at IS NOT NULL AND j.queue > f.queue ORDER BY j.queue LIMIT 1)
      FROM finished AS f WHERE f.queue IS NOT NULL
)
SELECT queue FROM pending WHERE queue IS NOT NULL
UNION SELECT queue FROM processing WHERE queue IS NOT NULL
UNION SELECT queue FROM finished WHERE queue IS NOT NULL";

/// The live rows of queue `$1` at `$2`: per status, all rows, those due
/// (`run_at <= $2`), those expired (`run_at < $2`) and the earliest
/// `run_at`. Each status a literal, so each half reads its own partial
/// index (`jobq_jobs_claim`, `jobq_jobs_lease`) and nothing else.
pub const STATS_LIVE: &str =
    "SELECT 'pending'::text, count(*), count(*) FILTER (WHERE run_at <= $2),
       count(*) FILTER (WHERE run_at < $2), min(run_at)
  FROM jobq_jobs WHERE queue = $1 AND status = 'pending'
UNION ALL
SELECT 'processing'::text, count(*), count(*) FILTER (WHERE run_at <= $2),
       count(*) FILTER (WHERE run_at < $2), min(run_at)
  FROM jobq_jobs WHERE queue = $1 AND status = 'processing'
UNION ALL
SELECT 'blocked'::text, count(*), 0, 0, NULL::timestamptz
  FROM jobq_jobs WHERE queue = $1 AND status = 'blocked'";

/// Queue `$1`'s `done`, `failed` and `cancelled` rows, each counted up to
/// `$2`: at most `$2` entries of one range of `jobq_jobs_finished_by_queue`
/// each (`finished_at IS NOT NULL` names its predicate).
pub const STATS_FINISHED: &str = "SELECT
    (SELECT count(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = $1 AND status = 'done'
                            AND finished_at IS NOT NULL LIMIT $2) AS d),
    (SELECT count(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = $1 AND status = 'failed'
                            AND finished_at IS NOT NULL LIMIT $2) AS f),
    (SELECT count(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = $1 AND status = 'cancelled'
                            AND finished_at IS NOT NULL LIMIT $2) AS c)";

/// Queue `$1`'s `done` and `failed` rows finished since `$2`, by minute
/// since then: two ranges of `jobq_jobs_finished_by_queue`.
pub const STATS_PER_MINUTE: &str =
    "SELECT status, floor(extract(epoch FROM finished_at - $2) / 60)::bigint, count(*)
  FROM jobq_jobs
 WHERE queue = $1 AND status IN ('done', 'failed') AND finished_at >= $2
 GROUP BY 1, 2";

/// Makes sure `$1` has its row in `jobq_queues` (a no-op if it has).
pub const QUEUE_ROW: &str =
    "INSERT INTO jobq_queues (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING";

/// Pauses `$1`; matches its row only if it was not paused.
pub const PAUSE: &str =
    "UPDATE jobq_queues SET paused_at = now() WHERE queue = $1 AND paused_at IS NULL";

/// Resumes `$1`; matches its row only if it was paused.
pub const RESUME: &str =
    "UPDATE jobq_queues SET paused_at = NULL WHERE queue = $1 AND paused_at IS NOT NULL";

/// `jobq_runtime::testing`'s drain with scheduled jobs: every pending job of
/// queue `$1` not due yet becomes due now.
#[cfg(feature = "testing")]
pub const MAKE_DUE: &str = "UPDATE jobq_jobs SET run_at = now() \
     WHERE queue = $1 AND status = 'pending' AND run_at > now()";

/// The queues paused, limited or rate limited now, as `(queue, paused,
/// limit, starts, period_us, burst, tat_us)` (three small tables: a queue
/// may come three times, see `policy::controls`).
pub const CONTROLS: &str = "SELECT queue, true, NULL::int8, NULL::int8, NULL::int8, NULL::int8, NULL::int8 \
     FROM jobq_queues WHERE paused_at IS NOT NULL \
     UNION ALL SELECT queue, false, max_running::int8, NULL::int8, NULL::int8, NULL::int8, NULL::int8 \
     FROM jobq_limits \
     UNION ALL SELECT queue, false, NULL::int8, starts::int8, period_us, burst::int8, tat_us \
     FROM jobq_rates";

// ---------------------------------------------------------------------------
// Rate limits (`jobq_rates`; see `policy::Gcra`).

/// A rate-limited claim's read of queue `$1`'s rate row, locked unless
/// another claim holds it (then no row): `(starts, period_us, burst,
/// tat_us, now_us)`, now the transaction's `now()` — the time the claim
/// writes as `claimed_at` — in microseconds since the Unix epoch.
pub const RATE_LOCK: &str = "SELECT starts::int8, period_us, burst::int8, tat_us, \
     (extract(epoch FROM now()) * 1000000)::int8 \
     FROM jobq_rates WHERE queue = $1 FOR UPDATE SKIP LOCKED";

/// Moves queue `$2`'s theoretical arrival time to `$1` (the claim holds the row).
pub const RATE_ADVANCE: &str = "UPDATE jobq_rates SET tat_us = $1 WHERE queue = $2";

/// Sets queue `$1`'s rate to `$2` starts per `$3` µs, burst `$4`; a new
/// row's theoretical arrival time is 0, a changed row keeps its own.
pub const RATE_SET: &str = "INSERT INTO jobq_rates (queue, starts, period_us, burst, tat_us, updated_at) \
     VALUES ($1, $2, $3, $4, 0, now()) \
     ON CONFLICT (queue) DO UPDATE SET starts = EXCLUDED.starts, period_us = EXCLUDED.period_us, \
     burst = EXCLUDED.burst, updated_at = EXCLUDED.updated_at";

/// Removes queue `$1`'s rate.
pub const RATE_REMOVE: &str = "DELETE FROM jobq_rates WHERE queue = $1";

/// Key `$1`'s rate row, locked (takers of one key take turns), with the
/// database's clock: `(starts, period_us, burst, tat_us, now_us)`.
pub const KEY_RATE_LOCK: &str = "SELECT starts::int8, period_us, burst::int8, tat_us, \
     (extract(epoch FROM now()) * 1000000)::int8 \
     FROM jobq_key_rates WHERE ckey = $1 FOR UPDATE";

/// Moves key `$2`'s theoretical arrival time to `$1`.
pub const KEY_RATE_ADVANCE: &str = "UPDATE jobq_key_rates SET tat_us = $1 WHERE ckey = $2";

/// Stamps claimed rows `$2` with the moment their key's rate let them
/// start (`$1` µs since the epoch, the clock the rate read).
pub const KEY_STARTED: &str = "UPDATE jobq_jobs SET claimed_at = to_timestamp($1::float8 / 1000000) \
     WHERE status = 'processing' AND id = ANY($2)";

/// Sets key `$1`'s rate to `$2` starts per `$3` µs, burst `$4`.
pub const KEY_RATE_SET: &str = "INSERT INTO jobq_key_rates (ckey, starts, period_us, burst, tat_us, updated_at) \
     VALUES ($1, $2, $3, $4, 0, now()) \
     ON CONFLICT (ckey) DO UPDATE SET starts = EXCLUDED.starts, period_us = EXCLUDED.period_us, \
     burst = EXCLUDED.burst, updated_at = EXCLUDED.updated_at";

/// Removes key `$1`'s rate.
pub const KEY_RATE_REMOVE: &str = "DELETE FROM jobq_key_rates WHERE ckey = $1";

/// Every key's rate: `(key, starts, period_us, burst)`.
pub const KEY_RATES: &str =
    "SELECT ckey, starts::int8, period_us, burst::int8 FROM jobq_key_rates ORDER BY ckey";

// ---------------------------------------------------------------------------
// Global concurrency limits (`jobq_limits`, `jobq_slots`; see `policy::SlotPlan`).

/// A limited claim's first statement: the slot rows of queue `$1` no other
/// claim has locked, locked, with the attempt each holds last.
pub const SLOTS_LOCK: &str = "SELECT slot, job_id, lease_token FROM jobq_slots \
     WHERE queue = $1 ORDER BY slot FOR UPDATE SKIP LOCKED";

/// A limited claim's read after locking its slots (see `policy::slots_read`):
/// queue `$1`'s limit and slot-row count, and of the attempts written in
/// its slots (ids `$2`), the `(id, lease_token)` of the rows still held:
/// `processing` (an expired lease still holds its slot until the reaper
/// moves the row: its worker may yet renew it). One round trip.
pub const SLOTS_READ: &str = "SELECT l.max_running::bigint, (SELECT COUNT(*) FROM jobq_slots WHERE queue = $1), \
     j.id, j.lease_token \
     FROM (SELECT 1) x LEFT JOIN jobq_limits l ON l.queue = $1 \
     LEFT JOIN jobq_jobs j ON j.id = ANY($2) AND j.status = 'processing'";

/// Deletes queue `$1`'s slot rows `$2` (above its limit, their holders gone).
pub const SLOTS_RETIRE: &str = "DELETE FROM jobq_slots WHERE queue = $1 AND slot = ANY($2)";

/// Drops queue `$1`'s slot rows from number `$2` up whose holders no longer
/// hold their rows (a lowered limit: a job running keeps its row, and
/// counts against the new limit, until it finishes).
pub const SLOTS_TRIM_IDLE: &str = "DELETE FROM jobq_slots s WHERE s.queue = $1 AND s.slot >= $2 \
     AND NOT EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = s.job_id \
       AND j.lease_token = s.lease_token AND j.status = 'processing')";

/// Whether queue `$1` has a due job (a limited claim with no free slot).
pub const DUE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM jobq_jobs \
     WHERE queue = $1 AND status = 'pending' AND run_at <= now())";

/// Writes each `(slot, job_id, lease_token)` of the arrays `$2`, `$3`, `$4`
/// into queue `$1`'s slot rows.
pub const SLOTS_ASSIGN: &str = "UPDATE jobq_slots AS s SET job_id = v.job_id, lease_token = v.token \
     FROM unnest($2::int4[], $3::int8[], $4::int8[]) AS v(slot, job_id, token) \
     WHERE s.queue = $1 AND s.slot = v.slot";

/// Sets queue `$1`'s limit to `$2`.
pub const LIMIT_SET: &str = "INSERT INTO jobq_limits (queue, max_running, updated_at) \
     VALUES ($1, $2, now()) \
     ON CONFLICT (queue) DO UPDATE SET max_running = EXCLUDED.max_running, updated_at = EXCLUDED.updated_at";

/// Removes queue `$1`'s limit.
pub const LIMIT_REMOVE: &str = "DELETE FROM jobq_limits WHERE queue = $1";

/// Makes queue `$1`'s slot rows `0..$2` (those there already stay as they are).
pub const SLOTS_FILL: &str = "INSERT INTO jobq_slots (queue, slot) \
     SELECT $1, g FROM generate_series(0, $2 - 1) AS g ON CONFLICT DO NOTHING";

/// Drops queue `$1`'s slots from number `$2` up.
pub const SLOTS_TRIM: &str = "DELETE FROM jobq_slots WHERE queue = $1 AND slot >= $2";

/// Cancels a `pending` or `processing` row; returns its id and the lease
/// token it had (the attempt a worker of this process is told to stop).
pub const CANCEL: &str = concat!(
    "WITH picked AS (SELECT id, lease_token FROM jobq_jobs WHERE id = $1 AND status IN ('pending', 'processing', 'blocked') FOR UPDATE",
    cancel_tail!()
);

/// Sends a `failed` or `cancelled` row back to `pending` with one more attempt.
pub const RETRY: &str = concat!(
    retry_set!(),
    " WHERE id = $1 AND status IN ('failed', 'cancelled')"
);

/// The filtered statements of listing and bulk actions (see `store/filter.rs`).
///
/// Index use: a status of `pending` or `processing` (a literal, never a
/// parameter) with a queue is served by the partial claim or lease index,
/// whose rows are in claim or deadline order, not id order: a page reads
/// every matching entry and sorts them (the matching rows only). Every
/// other list walks the primary key in id order and stops once its page
/// is full, reading rows that do not match on the way: finished rows have
/// no index by queue (one would be written at every settle). A key prefix
/// is matched with `starts_with`, byte for byte but without an index: the
/// unique key index is in the database's collation, whose order is not
/// byte order. No index by job name or enqueue time either: none of jobq's
/// updates of a row is HOT (they change columns of the partial indexes), so
/// every index gets an entry at each claim, heartbeat and settle; a page of
/// such a filter walks the primary key until it is full, and a count of it
/// reads the table. A bulk action reads the ids it acts on without locks, in
/// pages in id order (`ids`), then changes each batch of them by primary
/// key, skipping locked rows ([`bulk_retry`], [`bulk_cancel`]).
pub(crate) const FILTERED: Filtered = Filtered {
    pieces: Pieces {
        // Two arms, each of which proves one partial index's predicate.
        cancellable: " AND (status = 'pending' OR status = 'processing')",
        ..Pieces::new(
            "$",
            true,
            KeyPieces::Call {
                open: " AND starts_with(idempotency_key, ",
                close: ")",
            },
        )
    },
    list: job_columns!(list),
    count: "SELECT COUNT(*) FROM jobq_jobs",
    ids: "SELECT id FROM jobq_jobs",
    window: crate::store::sql::WINDOW,
    hints: None,
    ids_page: 1_000,
};

/// `$1` the ids of a bulk retry's batch: retries those whose rows still
/// meet `guard` (a condition of [`FILTERED`]'s pieces), skipping rows
/// another transaction holds or waiting for them as `locks` says; returns
/// their ids.
pub(crate) fn bulk_retry(guard: &str, locks: RowLocks) -> String {
    format!(
        "WITH picked AS (SELECT id FROM jobq_jobs WHERE id = ANY ($1){guard}{})\n{} \
         WHERE id = ANY (ARRAY(SELECT id FROM picked)) AND status IN ('failed', 'cancelled')\nRETURNING id",
        row_locks(locks),
        retry_set!()
    )
}

/// `$1` the ids of a bulk cancel's batch: cancels those whose rows still
/// meet `guard`, as [`bulk_retry`]; returns each one's id and the lease
/// token it had.
pub(crate) fn bulk_cancel(guard: &str, locks: RowLocks) -> String {
    format!(
        "WITH picked AS (SELECT id, lease_token FROM jobq_jobs WHERE id = ANY ($1){guard}{}{}",
        row_locks(locks),
        cancel_tail!()
    )
}

/// One row, every column `Jobq::job` reports.
pub const JOB: &str = concat!(job_columns!(), " WHERE id = $1");

/// The notifier's announcement of the queues enqueued to.
pub const NOTIFY: &str = "SELECT pg_notify('jobq', q) FROM UNNEST($1::text[]) AS q";

/// The notifier's session: its NOTIFYs need not wait for a WAL flush.
pub const NOTIFIER_SESSION: &str = "SET synchronous_commit = off";

/// The migration lock (0x6a6f6271 = "jobq"), held until the transaction ends.
pub const MIGRATE_LOCK: &str = "SELECT pg_advisory_xact_lock(1785684593)";

/// jobq's own migration table.
pub const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS jobq_migrations (version bigint PRIMARY KEY, \
             description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())";

/// The versions applied so far.
pub const MIGRATIONS_APPLIED: &str = "SELECT version FROM jobq_migrations";

/// Records one applied migration.
pub const MIGRATION_RECORD: &str =
    "INSERT INTO jobq_migrations (version, description) VALUES ($1, $2)";

/// Rows of one queue per status.
pub const COUNTS: &str = "SELECT status, COUNT(*) FROM jobq_jobs WHERE queue = $1 GROUP BY status";

// ---------------------------------------------------------------------------
// `Jobq::doctor` (see `doctor.rs`): reads only.

/// `EXPLAIN` of one of jobq's statements.
pub(crate) fn explain(sql: &str) -> String {
    format!("EXPLAIN {sql}")
}

/// The server's version, as text and as a number (`150004`).
pub const DOCTOR_SERVER: &str =
    "SELECT current_setting('server_version'), current_setting('server_version_num')::int";

/// The isolation level a new transaction of this session gets: every jobq
/// statement is its own transaction at this level.
pub const DOCTOR_ISOLATION: &str = "SELECT current_setting('transaction_isolation')";

/// Whether `jobq_migrations` exists (on the search path: 1 if it does, 0
/// if not), then what it records.
pub const DOCTOR_MIGRATIONS: [&str; 2] = [
    "SELECT count(to_regclass('jobq_migrations'))",
    MIGRATIONS_APPLIED,
];

/// The database's clock now (not the transaction's start).
pub const DOCTOR_NOW: &str = "SELECT clock_timestamp()";

/// For the plan checks, in a transaction that is rolled back: on a small
/// table the planner rightly prefers a scan and a sort, so plans are read
/// with both made the last resort, to show whether the index *can* serve
/// the statement in its order (a missing index still shows as a scan).
pub const DOCTOR_PLAN_SETTINGS: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off";

/// Registers a running worker (`jobq_workers`, one row per `Worker`): `$1`
/// id, `$2` worker id, `$3` host, `$4` pid, `$5` version, `$6` queues
/// (JSON), `$7` jobs (JSON), `$8` running, `$9` the row's time to live in
/// microseconds. Started and seen now.
pub const WORKER_REGISTER: &str = "INSERT INTO jobq_workers \
     (id, worker_id, host, pid, version, queues, jobs, running, started_at, last_seen, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now(), now() + $9 * interval '1 microsecond')";

/// A worker's periodic refresh: `$1` running, `$2` time to live in
/// microseconds, `$3` id. Matches nothing if its row was deleted as expired
/// (it registers again).
pub const WORKER_REFRESH: &str = "UPDATE jobq_workers SET running = $1, last_seen = now(), \
     expires_at = now() + $2 * interval '1 microsecond' WHERE id = $3";

/// A worker's row, at its clean shutdown: `$1` id.
pub const WORKER_UNREGISTER: &str = "DELETE FROM jobq_workers WHERE id = $1";

/// The rows of workers that stopped refreshing (killed, frozen, cut off),
/// deleted by any worker: no leader.
pub const WORKERS_PRUNE: &str = "DELETE FROM jobq_workers WHERE expires_at < now()";

/// The live workers, oldest first.
pub const WORKERS_LIVE: &str = "SELECT worker_id, host, pid, version, queues, jobs, running, \
     started_at, last_seen, expires_at \
     FROM jobq_workers WHERE expires_at > now() ORDER BY started_at, id";

/// `jobq_runtime::testing::TestJobq::isolated`: a database of a test's own
/// (`name` is made by jobq: letters, digits and `_`).
#[cfg(feature = "testing")]
pub fn create_database(name: &str) -> String {
    format!("CREATE DATABASE \"{name}\"")
}

/// Drops what [`create_database`] made, also while a handle's listener is
/// still connected to it.
#[cfg(feature = "testing")]
pub fn drop_database(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")
}

/// The watcher's look at queues `$1` (see `store::look`): per queue, µs
/// from now to its earliest `pending` row's `run_at` and to its earliest
/// `processing` row's (a lease's end), each one descent of a partial
/// index (`jobq_jobs_claim` read for its queue's pending rows, as an
/// idle claim reads them, and `jobq_jobs_lease`).
pub const LOOK: &str = "SELECT q.queue, \
     (SELECT CAST(EXTRACT(EPOCH FROM (MIN(j.run_at) - now())) * 1000000 AS bigint) \
        FROM jobq_jobs j WHERE j.queue = q.queue AND j.status = 'pending'), \
     (SELECT CAST(EXTRACT(EPOCH FROM (MIN(j.run_at) - now())) * 1000000 AS bigint) \
        FROM jobq_jobs j WHERE j.queue = q.queue AND j.status = 'processing') \
     FROM unnest($1::text[]) AS q(queue)";

/// Records `$2` as schedule `$1`'s last tick enqueued, unless a later one is.
pub const TICK_RECORD: &str = "INSERT INTO jobq_schedules (name, last_tick, updated_at) \
     VALUES ($1, $2, now()) ON CONFLICT (name) DO UPDATE \
     SET last_tick = GREATEST(jobq_schedules.last_tick, EXCLUDED.last_tick), updated_at = now()";

/// Schedule `$1`'s last tick enqueued.
pub const TICK_LAST: &str = "SELECT last_tick FROM jobq_schedules WHERE name = $1";

/// Stores schedule `$1` (job `$2`, payload `$3`, cron `$4`, zone `$5`,
/// queue `$6`, priority `$7`), keeping its last tick and pause.
pub const SCHEDULE_PUT: &str = "INSERT INTO jobq_schedules \
     (name, job_name, payload, schedule, time_zone, queue, priority, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, now()) ON CONFLICT (name) DO UPDATE \
     SET job_name = EXCLUDED.job_name, payload = EXCLUDED.payload, schedule = EXCLUDED.schedule, \
     time_zone = EXCLUDED.time_zone, queue = EXCLUDED.queue, priority = EXCLUDED.priority, \
     updated_at = now()";

/// Pauses (`$2` true) or resumes stored schedule `$1`.
pub const SCHEDULE_PAUSE: &str = "UPDATE jobq_schedules \
     SET paused_at = CASE WHEN $2 THEN COALESCE(paused_at, now()) END, updated_at = now() \
     WHERE name = $1 AND job_name IS NOT NULL";

/// Removes stored schedule `$1`.
pub const SCHEDULE_REMOVE: &str =
    "DELETE FROM jobq_schedules WHERE name = $1 AND job_name IS NOT NULL";

/// The schedules kept in the database, by name.
pub const SCHEDULES_STORED: &str =
    concat!(crate::store::sql::stored_schedules!(), " ORDER BY name");

/// Stored schedule `$1`, as [`SCHEDULES_STORED`] reads it.
pub const SCHEDULE_STORED: &str = concat!(crate::store::sql::stored_schedules!(), " AND name = $1");

/// The embedded migrations (`jobq-runtime/migrations/postgres/`), in order.
pub(crate) const MIGRATIONS: &[Migration] = migrations!("postgres":
    20261129000001 "jobq_jobs",
    20261130000001 "jobq_jobs_finished",
    20261201170001 "jobq_queues",
    20261201170002 "jobq_jobs_finished_by_queue",
    20261204000002 "jobq_workers",
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

// A list of ids is `= ANY` of an array made from the JSON array bound as
// text: an index condition, a point lookup per id. As `IN (SELECT …)` it
// was a semi-join the planner could drive from the other side: for
// `outcome IS NULL AND job_id IN (…)` it scanned every open row of the
// `(outcome, job_id)` index and filtered them (a batch of 10,000 drained
// at 870 jobs/s, its settles' releases taking 1 to 7 s each).
crate::store::sql::flow_statements!(
    "= ANY(ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::bigint))",
    "$1"
);

crate::store::sql::batch_statements!(
    "= ANY(ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::bigint))",
    "$1",
    "$2",
    "$3",
    " FOR UPDATE"
);

/// Records the jobs of a batch: `$1` a JSON array of `[job_id, batch, role]`.
pub const BATCH_JOBS_INSERT: &str = "INSERT INTO jobq_batch_jobs (job_id, batch, role) \
     SELECT (e->>0)::bigint, e->>1, e->>2 FROM jsonb_array_elements($1::jsonb) AS e";

/// Names the jobs of a workflow: `$1` a JSON array of `[job_id, workflow, task]`.
pub const FLOW_JOBS_INSERT: &str = "INSERT INTO jobq_flow_jobs (job_id, workflow, task) \
     SELECT (e->>0)::bigint, e->>1, e->>2 FROM jsonb_array_elements($1::jsonb) AS e";

/// Records dependencies: `$1` a JSON array of `[job_id, depends_on, run_anyway]`.
pub const FLOW_EDGES_INSERT: &str = "INSERT INTO jobq_deps (job_id, depends_on, run_anyway) \
     SELECT (e->>0)::bigint, (e->>1)::bigint, (e->>2)::smallint FROM jsonb_array_elements($1::jsonb) AS e";

/// Makes the `blocked` jobs `$1` (a JSON array) `pending`, due now at the
/// earliest (their queue wait counts from here).
pub const FLOW_UNBLOCK: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = GREATEST(run_at, now()) \
     WHERE status = 'blocked' AND id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)";

/// Cancels the `blocked` jobs `$2` (a JSON array) with `last_error` `$1`.
pub const FLOW_CANCEL: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = now(), \
     run_at = now(), lease_token = NULL, last_error = $1 \
     WHERE status = 'blocked' AND id IN (SELECT jsonb_array_elements_text($2::jsonb)::bigint)";
