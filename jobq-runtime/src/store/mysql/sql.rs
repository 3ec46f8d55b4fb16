//! Every statement the MySQL/MariaDB store runs (see the facts in
//! the store's module docs). IN-lists are built here, from constant pieces, by the
//! functions at the end; nothing else in the store holds SQL text.

use crate::store::contract::RowLocks;
use crate::store::filter::{BULK_PAGE, Filtered, Hints, KeyPieces, Pieces};
use crate::store::migrate::{Migration, migrations};
use crate::store::sql::row_locks;

/// Every jobq transaction starts with this: READ COMMITTED for the one
/// transaction, whatever the session default (for pools the caller built).
pub const BEGIN_RC: &str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";

/// Session settings for connections jobq opens itself. On MariaDB (the
/// `/*M!…*/` part, which MySQL skips) a transaction left idle for
/// [`IDLE_TRANSACTION_SECONDS`] has its connection closed by the server
/// and is rolled back: a claim whose host was cut off between its locking
/// `SELECT` and its `UPDATE` would otherwise keep its rows locked, pending
/// and skipped by every other claim, until the server noticed the dead
/// client (TCP keepalive, hours). jobq's own transactions never wait
/// between their statements.
pub const SESSION_SETUP: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
     SET SESSION innodb_lock_wait_timeout = 5 /*M!100300 , SESSION idle_transaction_timeout = 10 */";

/// `idle_transaction_timeout` in [`SESSION_SETUP`] (MariaDB).
pub const IDLE_TRANSACTION_SECONDS: u64 = 10;

/// The head of every INSERT; rows of [`INSERT_ROW`] or [`INSERT_ROW_NOW`] follow.
pub const INSERT_COLUMNS: &str = "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at) VALUES ";
/// One row's values: `run_at` is an absolute time or a delay (see `run_at_binds`).
pub const INSERT_ROW: &str =
    "(?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), ?, ?, UTC_TIMESTAMP(6))";
/// A row due now and without a key: five parameters instead of eight
/// (the common batch; fewer values for the server to receive and bind).
pub const INSERT_ROW_NOW: &str = "(?, ?, ?, ?, UTC_TIMESTAMP(6), ?, NULL, UTC_TIMESTAMP(6))";
/// Counts a duplicate enqueue of a key: the column must change (see the
/// module docs) and stay in its `INT` range, so it wraps from 2³¹ − 1 to 1
/// (never back to 0, which reads as "not a duplicate" on MariaDB's RETURNING).
macro_rules! bump_hits {
    () => {
        "dedupe_hits = IF(dedupe_hits >= 2147483647, 1, dedupe_hits + 1)"
    };
}
/// The tail of a keyed single-row INSERT: a repeat of the key hits the existing row.
pub const ON_DUPLICATE: &str = concat!(
    " ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), ",
    bump_hits!()
);

/// A unique job's first statement: makes its key's row in `jobq_unique`
/// (no job yet) or, if the row exists, locks it (an exclusive lock, which
/// a duplicate-key INSERT … ON DUPLICATE KEY UPDATE takes) until the
/// enqueue's transaction ends: enqueues of one key take turns.
pub const UNIQUE_TAKE: &str = "INSERT INTO jobq_unique (ukey, job_id, states) VALUES (?, 0, 0) \
     ON DUPLICATE KEY UPDATE job_id = job_id";

/// The key's row and its holder's status bit (see `UniqueRow`), read with
/// a locking read: the newest committed versions, also in a caller's
/// REPEATABLE READ transaction, whose snapshot could predate the holder.
pub const UNIQUE_HOLDER: &str = "SELECT u.job_id, CAST(u.states AS SIGNED), \
     CAST(u.held_until IS NULL OR u.held_until > UTC_TIMESTAMP(6) AS SIGNED), \
     CAST(CASE j.status WHEN 'pending' THEN 1 WHEN 'blocked' THEN 1 WHEN 'processing' THEN 2 WHEN 'done' THEN 4 \
       WHEN 'failed' THEN 8 WHEN 'cancelled' THEN 16 ELSE 0 END AS SIGNED) \
     FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id \
     WHERE u.ukey = ? LOCK IN SHARE MODE";

/// A page of `jobq_unique` after key `?`, `?` rows, in key order: each
/// key, its holder and whether the holder's row is gone (1).
pub const UNIQUE_SCAN: &str = "SELECT u.ukey, u.job_id, CAST(j.id IS NULL AS SIGNED) \
     FROM jobq_unique u LEFT JOIN jobq_jobs j ON j.id = u.job_id \
     WHERE u.ukey > ? ORDER BY u.ukey LIMIT ?";

/// Deletes key `?`'s row if it still names holder `?`.
pub const UNIQUE_FORGET: &str = "DELETE FROM jobq_unique WHERE ukey = ? AND job_id = ?";

/// A unique job's row: [`INSERT_ROW`]'s values, the key into `unique_key`.
pub const INSERT_UNIQUE: &str = concat!(
    "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, unique_key, created_at) VALUES ",
    "(?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), ?, ?, UTC_TIMESTAMP(6))"
);

/// Writes the new holder into its key's row: `?` key, job id, states,
/// period in µs (NULL: none).
pub const UNIQUE_HOLD: &str = "UPDATE jobq_unique SET job_id = ?, states = ?, \
     held_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE ukey = ?";

/// A keyed enqueue's first statement: makes its key's row in `jobq_keys`
/// or locks it (see [`UNIQUE_TAKE`]) until the enqueue's transaction
/// ends, and sets the key's limit to the job's (`?` key, limit, limit
/// again: `VALUES()` in this clause is deprecated on MySQL 8).
pub const KEY_TAKE: &str = "INSERT INTO jobq_keys (ckey, max_running) VALUES (?, ?) \
     ON DUPLICATE KEY UPDATE max_running = ?";

/// The front of key `?`'s job list, `?` members, with each job's status
/// (NULL: its row is gone), by a locking read: the newest committed
/// rows, also in a caller's REPEATABLE READ transaction.
pub const KEY_FRONT: &str = "SELECT k.job_id, CAST(j.status AS CHAR) \
     FROM jobq_key_jobs k LEFT JOIN jobq_jobs j ON j.id = k.job_id \
     WHERE k.ckey = ? ORDER BY k.job_id LIMIT ? LOCK IN SHARE MODE";

/// A keyed job's row: [`INSERT_ROW`]'s values, then its status
/// (`pending` or `blocked`), its concurrency key and its limit.
pub const INSERT_KEYED: &str = concat!(
    "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at, status, concurrency_key, concurrency_limit) VALUES ",
    "(?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), ?, ?, UTC_TIMESTAMP(6), ?, ?, ?)"
);

/// [`INSERT_KEYED`] with an idempotency key: a repeat hits the existing row.
pub const INSERT_KEYED_DEDUPE: &str = concat!(
    "INSERT INTO jobq_jobs (queue, job_name, payload, priority, run_at, max_attempts, idempotency_key, created_at, status, concurrency_key, concurrency_limit) VALUES ",
    "(?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND), ?, ?, UTC_TIMESTAMP(6), ?, ?, ?)",
    " ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), ",
    bump_hits!()
);

/// Lists job `?` in key `?`'s jobs (once).
pub const KEY_JOIN: &str = "INSERT IGNORE INTO jobq_key_jobs (ckey, job_id) VALUES (?, ?)";

/// Up to `?` keys after `?`, in order: a page of the sweep.
pub const KEY_PAGE: &str = "SELECT ckey FROM jobq_keys WHERE ckey > ? ORDER BY ckey LIMIT ?";

/// The claim's columns: the row's, then its key (idempotency or unique),
/// concurrency key, metadata and tags as one JSON array, `NULL` when all
/// four are (most jobs): a MySQL result set carries every column's
/// definition at every execution, which the client decodes, so four
/// rarely-set columns cost each claim more than one does. The keys are
/// binary strings (compared byte for byte) holding UTF-8, converted to
/// text for the array: beside a binary argument MariaDB makes the whole
/// array binary and garbles the text ones, and MySQL 8 refuses it.
macro_rules! claim_columns {
    () => {
        "SELECT id, job_name, payload, attempts, max_attempts, priority, run_at, \
         IF(idempotency_key IS NULL AND unique_key IS NULL AND concurrency_key IS NULL \
            AND metadata IS NULL AND tags IS NULL, NULL, \
            CAST(JSON_ARRAY(CONVERT(COALESCE(idempotency_key, unique_key) USING utf8mb4), \
                            CONVERT(concurrency_key USING utf8mb4), metadata, tags) AS CHAR)) \
         FROM jobq_jobs "
    };
}

/// The claim's locking read.
pub const CLAIM_SELECT: &str = concat!(
    claim_columns!(),
    "WHERE queue = ? AND status = 'pending' AND run_at <= UTC_TIMESTAMP(6) \
     ORDER BY priority, run_at, id \
     LIMIT ? FOR UPDATE SKIP LOCKED"
);

/// [`CLAIM_SELECT`] from a position in the claim order on: the rows after
/// `(priority, run_at, id)` = `(?, ?, ?)`.
///
/// A claim moves its rows' entries in the claim index from `pending` to
/// `processing`; the old entries stay, delete-marked, until purge removes
/// them, and a claim from the start of `pending` reads each of them (and its
/// clustered row) before reaching a live one. Draining a deep backlog, purge
/// runs behind by thousands of rows, which cost about 0.5 µs each on every
/// claim (a claim took 27 ms behind 51,000 of them; this one 0.06 ms).
/// Written this way (status inside each branch of the OR, the index forced)
/// the optimizer makes it one range scan over the whole index key starting
/// at that position; with `status = 'pending'` outside the OR it chose a
/// scan of all of `pending` instead.
pub const CLAIM_SELECT_AFTER: &str = concat!(
    claim_columns!(),
    "FORCE INDEX (jobq_jobs_claim) \
     WHERE queue = ? AND run_at <= UTC_TIMESTAMP(6) \
       AND ((status = 'pending' AND priority > ?) \
         OR (status = 'pending' AND priority = ? AND run_at > ?) \
         OR (status = 'pending' AND priority = ? AND run_at = ? AND id > ?)) \
     ORDER BY priority, run_at, id \
     LIMIT ? FOR UPDATE SKIP LOCKED"
);

/// `history` with one more entry (an expression): the attempt (its number, worker and
/// start from the row as the claim left it), when it ended, `outcome` and
/// `error`; the oldest entry goes once it holds [`HISTORY_CAP`] entries
/// (25). First in a statement's `SET`: MySQL assigns left to right, and
/// the entry reads `attempts` and `claimed_by` before the rest changes
/// them. A value that is not JSON (written by hand) starts over.
///
/// [`HISTORY_CAP`]: crate::HISTORY_CAP
macro_rules! history_append {
    ($outcome:expr, $error:expr) => {
        concat!(
            "JSON_ARRAY_APPEND(IF(JSON_LENGTH(IF(JSON_VALID(history), history, '[]')) >= 25, \
             JSON_REMOVE(history, '$[0]'), IF(JSON_VALID(history), history, '[]')), '$', \
             JSON_OBJECT('attempt', attempts, 'worker', claimed_by, \
             'started_us', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', claimed_at), \
             'ended_us', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)), \
             'outcome', ",
            $outcome,
            ", 'error', ",
            $error,
            "))"
        )
    };
}

/// `finished_at` is computed from the target status bound again, not from
/// the `status` column this statement assigns (see the module docs). The
/// first `?` is the history entry's outcome (`NULL`: no entry), then its
/// outcome and message again.
pub const TRANSITION: &str = concat!(
    "UPDATE jobq_jobs SET history = IF(? IS NULL, history, ",
    history_append!("?", "?"),
    "), status = ?, \
     run_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, \
     attempts = attempts - ?, \
     last_error = COALESCE(?, last_error), \
     finished_at = IF(? = 'failed', UTC_TIMESTAMP(6), NULL), \
     lease_token = NULL \
     WHERE id = ? AND lease_token = ? AND status = 'processing'"
);

/// Finished rows of one queue, status and priority, oldest first: a range of
/// the claim index, where a finished row's `run_at` is when it finished.
///
/// No index on `finished_at`: every settle would move an entry in it (from
/// the NULLs to its time), and that cost a worker's drain 20–25 % of its
/// jobs/s (interleaved runs: 32.5k and 38.1k with it against 46.7k and
/// 47.1k without). The claim index moves at settle anyway.
pub const PRUNE: &str = "DELETE FROM jobq_jobs \
     WHERE queue = ? AND status = ? AND priority = ? \
       AND run_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND \
     ORDER BY run_at LIMIT ?";

/// The queues with rows: a loose scan of the claim index's first column.
pub const PRUNE_QUEUES: &str = "SELECT DISTINCT queue FROM jobq_jobs";

/// The next priority after `?` among one queue's rows of one status: one
/// descent of the claim index (a `DISTINCT` would read every entry).
pub const PRUNE_NEXT_PRIORITY: &str =
    "SELECT MIN(priority) FROM jobq_jobs WHERE queue = ? AND status = ? AND priority > ?";

/// The reaper's candidates: a queue's `processing` rows whose lease has
/// expired, in claim order, read **without locks** (a consistent read).
/// A locking read here would keep an exclusive lock on every `processing`
/// entry it scanned, matching or not (InnoDB keeps them at READ COMMITTED
/// too), so a reaper whose transaction stalls (its host cut off, its
/// process frozen) would hold every live row of the queue and make the
/// settles and heartbeats of healthy workers wait until their leases ran
/// out. The candidates are then locked by primary key ([`reap_lock`]).
pub const REAP_SELECT: &str = "SELECT id FROM jobq_jobs \
     WHERE queue = ? AND status = 'processing' AND run_at < UTC_TIMESTAMP(6) \
     ORDER BY priority, run_at, id \
     LIMIT ?";

/// Every column `Jobq::job` reports.
macro_rules! job_columns {
    () => {
        "SELECT id, queue, job_name, payload, status, priority, attempts, max_attempts, \
         run_at, COALESCE(idempotency_key, unique_key) AS idempotency_key, last_error, claimed_by, \
         claimed_at, created_at, finished_at, history, output, progress, metadata, tags \
         FROM jobq_jobs"
    };
    (list) => {
        "SELECT id, queue, job_name, payload, status, priority, attempts, max_attempts, \
         run_at, COALESCE(idempotency_key, unique_key) AS idempotency_key, last_error, claimed_by, \
         claimed_at, created_at, finished_at, NULL AS history, NULL AS output, progress, \
         NULL AS metadata, tags \
         FROM jobq_jobs"
    };
}

/// A job's metadata and tags (JSON texts, `?` id last), written in the
/// transaction that inserted it (see [`TAGS_INSERT`]).
pub const ATTACH: &str = "UPDATE jobq_jobs SET metadata = ?, tags = ? WHERE id = ?";

/// A job's rows in the tags' index: one per element of its tags (the JSON
/// array [`ATTACH`] stored), by `JSON_TABLE` (MariaDB 10.6, MySQL 8.0).
pub const TAGS_INSERT: &str = "INSERT INTO jobq_job_tags (job_id, tag) \
     SELECT ?, t.tag FROM JSON_TABLE(?, '$[*]' COLUMNS (tag VARCHAR(100) PATH '$')) AS t";

/// One row, every column `Jobq::job` reports.
pub const JOB: &str = concat!(job_columns!(), " WHERE id = ?");

/// `RETURNING` for a multi-row INSERT on MariaDB: duplicates come back too.
pub const INSERT_RETURNING: &str = concat!(
    " ON DUPLICATE KEY UPDATE ",
    bump_hits!(),
    " RETURNING id, dedupe_hits"
);

/// What `MySqlStore::from_pool` reads about the server once.
pub const SERVER_SETTINGS: &str = "SELECT VERSION(), @@max_allowed_packet, \
                 CAST(@@innodb_autoinc_lock_mode AS SIGNED), CAST(@@auto_increment_increment AS SIGNED)";

/// Whether the server is a Galera node (`wsrep_on` = `ON`; no row on MySQL):
/// read when a connect list checks a node.
pub const NODE_WSREP_ON: &str = "SHOW VARIABLES LIKE 'wsrep_on'";

/// Whether a Galera node takes statements (`wsrep_ready` = `ON`).
pub const NODE_WSREP_READY: &str = "SHOW GLOBAL STATUS LIKE 'wsrep_ready'";

/// The migration lock, waited on for up to 120 s.
pub const MIGRATE_LOCK: &str = "SELECT GET_LOCK('jobq_migrate', 120)";

/// Releases [`MIGRATE_LOCK`].
pub const MIGRATE_UNLOCK: &str = "SELECT RELEASE_LOCK('jobq_migrate')";

/// jobq's own migration table.
pub const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS jobq_migrations (version BIGINT NOT NULL PRIMARY KEY, \
         description VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL) ENGINE = InnoDB";

/// The versions applied so far.
pub const MIGRATIONS_APPLIED: &str = "SELECT version FROM jobq_migrations";

/// Records one applied migration; a version another process recorded
/// meanwhile stays as it is (on Galera `GET_LOCK` is per node, so two nodes
/// may apply a migration at once: every MySQL migration can run again).
pub const MIGRATION_RECORD: &str = "INSERT INTO jobq_migrations (version, description, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6)) \
     ON DUPLICATE KEY UPDATE version = version";

/// Whether the server is a node of a Galera cluster (MariaDB only: MySQL
/// has no `wsrep_on`).
pub const GALERA: &str = "SELECT CAST(@@wsrep_on AND @@wsrep_provider <> 'none' AS SIGNED)";

/// The head of a read that must see every transaction the cluster
/// committed before it began (Galera applies other nodes' writes a moment
/// after they commit): the node waits until it has applied them.
pub const SYNC_WAIT: &str = "SET STATEMENT wsrep_sync_wait = 1 FOR ";

/// [`BEGIN_RC`] on a Galera node, for a transaction whose decisions read
/// rows other nodes write: it begins once the node has applied every
/// transaction the cluster committed before it. MariaDB holds
/// `START TRANSACTION` for `wsrep_sync_wait`, but no statement inside a
/// transaction: [`SYNC_WAIT`] on a read there reads the node as it is.
pub const BEGIN_RC_CAUSAL: &str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; \
     SET STATEMENT wsrep_sync_wait = 1 FOR START TRANSACTION";

/// `sql`, a read, with [`SYNC_WAIT`] ahead of it (outside a transaction:
/// see [`BEGIN_RC_CAUSAL`]).
pub fn synced(sql: &str) -> String {
    format!("{SYNC_WAIT}{sql}")
}

/// Saves held job ?'s (token ?) checkpoint ? (JSON).
pub const CHECKPOINT_SAVE: &str = "UPDATE jobq_jobs SET checkpoint = ? \
     WHERE id = ? AND lease_token = ? AND status = 'processing'";

/// Job ?'s checkpoint.
pub const CHECKPOINT_LOAD: &str = "SELECT checkpoint FROM jobq_jobs WHERE id = ?";

/// Records held job ?'s (token ?) progress ? (JSON).
pub const PROGRESS_SAVE: &str = "UPDATE jobq_jobs SET progress = ? \
     WHERE id = ? AND lease_token = ? AND status = 'processing'";

/// Marks one held job `done` with its handler's output (`?`, JSON).
pub const COMPLETE_OUTPUT: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = UTC_TIMESTAMP(6), \
     run_at = UTC_TIMESTAMP(6), lease_token = NULL, output = ? \
     WHERE id = ? AND lease_token = ? AND status = 'processing'";

/// The `SET` of a batch settle, fenced by `fenced_update`.
pub const COMPLETE_SET: &str = "UPDATE jobq_jobs SET status = 'done', finished_at = UTC_TIMESTAMP(6), run_at = UTC_TIMESTAMP(6), lease_token = NULL";

/// The `SET` of the renewal that waits on another transaction's row lock
/// (the heartbeat's renewal of a locked row, `extend_lease`), fenced by
/// `fenced_update`; `?` the lease in µs. The lease runs from when the row
/// is written, after any lock wait — `UTC_TIMESTAMP(6)` is when the
/// statement began, and a renewal that waited longer than a lease would
/// write a lease already over, for a reaper to take at once: the time
/// since the statement began (`SYSDATE(6)` − `NOW(6)`, both in the
/// session's zone) is added. (A server run with `--sysdate-is-now` makes
/// that zero.)
pub const HEARTBEAT_SET: &str = "UPDATE jobq_jobs SET run_at = UTC_TIMESTAMP(6) \
     + INTERVAL (TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6)) + ?) MICROSECOND";

/// What a cancel sets.
macro_rules! cancel_set {
    () => {
        "UPDATE jobq_jobs SET status = 'cancelled', finished_at = UTC_TIMESTAMP(6), run_at = UTC_TIMESTAMP(6), lease_token = NULL"
    };
}

/// What a retry sets: `pending`, runnable now, with at least one more attempt.
macro_rules! retry_set {
    () => {
        "UPDATE jobq_jobs SET status = IF(concurrency_key IS NULL, 'pending', 'blocked'), \
         run_at = UTC_TIMESTAMP(6), finished_at = NULL, \
         max_attempts = GREATEST(max_attempts, attempts + 1)"
    };
}

/// Locks one `pending` or `processing` row to cancel, reading the lease
/// token it has (the attempt a worker of this process is told to stop):
/// MariaDB has no `UPDATE … RETURNING`.
pub const CANCEL_PICK: &str = "SELECT id, lease_token FROM jobq_jobs \
     WHERE id = ? AND status IN ('pending', 'processing', 'blocked') FOR UPDATE";

/// Sends a `failed` or `cancelled` row back to `pending` (`blocked` if
/// it has a concurrency key: the release that follows unblocks it if its
/// key has room) with one more attempt.
pub const RETRY: &str = concat!(
    retry_set!(),
    " WHERE id = ? AND status IN ('failed', 'cancelled')"
);

/// The filtered statements of listing and bulk actions (see `store/filter.rs`).
///
/// Index use: a filter on the queue (and status) is a range of the claim
/// index `(queue, status, priority, run_at, id)`; within it rows are in
/// priority and run_at order, not id order, so a page of such a filter
/// reads every matching entry of the range and sorts them (a filesort of
/// the matching rows only, never of the table); with one status the index
/// is forced, as the optimizer may prefer to walk the primary key. Without a queue, a list
/// walks the primary key in id order and stops once its page is full;
/// a key prefix is a range of the unique key index; a job name is a range
/// of `jobq_jobs_job_name` `(job_name, id)`, in id order, and an enqueue
/// time a range of the primary key (see `filter::Window`; with a job name,
/// of `(job_name, id)`). A filter with a
/// job name, and every count and bulk read of a filter an index serves, is held
/// to these secondary indexes (see `Hints`; the optimizer picks among them
/// for a filter on several). A bulk action reads the ids it acts on
/// without locks, in pages in id order (`ids`), then locks each batch of
/// them by primary key, skipping locked rows ([`bulk_pick`]).
pub(crate) const FILTERED: Filtered = Filtered {
    pieces: Pieces::new(
        "?",
        false,
        KeyPieces::Range {
            from: " AND idempotency_key >= ",
            before: " AND idempotency_key < ",
        },
    ),
    list: job_columns!(list),
    count: "SELECT COUNT(*) FROM jobq_jobs",
    ids: "SELECT id FROM jobq_jobs",
    window: crate::store::sql::WINDOW,
    // Left to itself, the optimizer walks the primary key for a page of
    // `pending` rows of a queue whose ids lie behind a million finished
    // ones (2.6 s in the plan test), and scans the table for a count of one queue's
    // failed jobs of one job name (0.6 s); the indexes read only them.
    hints: Some(Hints {
        claim: " FORCE INDEX (jobq_jobs_claim)",
        secondary: " FORCE INDEX (jobq_jobs_claim, jobq_jobs_job_name, jobq_jobs_idempotency_key)",
    }),
    ids_page: BULK_PAGE,
};

/// Locks the rows of `ids` ids of a bulk action's batch that still meet
/// `guard` (a condition of [`FILTERED`]'s pieces), skipping rows another
/// transaction holds or waiting for them as `locks` says, and reads the
/// lease token each has: primary-key lookups, so the batch locks no row it
/// does not change (its transactions read committed: a row that no longer
/// meets `guard` is let go as it is read).
pub(crate) fn bulk_pick(ids: usize, guard: &str, locks: RowLocks) -> String {
    format!(
        "SELECT id, lease_token FROM jobq_jobs WHERE id IN ({}){guard}{}",
        placeholders(ids),
        row_locks(locks)
    )
}

/// Cancels `ids` rows locked by [`CANCEL_PICK`] or [`bulk_pick`],
/// with the guard of a single cancel.
pub(crate) fn cancel_ids(ids: usize) -> String {
    format!(
        "{} WHERE status IN ('pending', 'processing', 'blocked') AND id IN ({})",
        cancel_set!(),
        placeholders(ids)
    )
}

/// Retries `ids` rows locked by [`bulk_pick`], with the guard of a
/// single retry.
pub(crate) fn retry_ids(ids: usize) -> String {
    format!(
        "{} WHERE status IN ('failed', 'cancelled') AND id IN ({})",
        retry_set!(),
        placeholders(ids)
    )
}

/// Rows of one queue per status. An ENUM with a binary collation is
/// reported as BINARY: the status is read as text.
pub const COUNTS: &str =
    "SELECT CAST(status AS CHAR), COUNT(*) FROM jobq_jobs WHERE queue = ? GROUP BY status";

/// The database's clock, the moment a `stats` call reads its figures at.
pub const CLOCK: &str = "SELECT UTC_TIMESTAMP(6)";

/// The live rows of one queue (`?` now, now, queue): per status, all rows,
/// those due (`run_at <= now`), those expired (`run_at < now`) and the
/// earliest `run_at`. Two ranges of the claim index, read from the index
/// alone.
pub const STATS_LIVE: &str = "SELECT CAST(status AS CHAR), COUNT(*), \
     CAST(SUM(run_at <= ?) AS SIGNED), CAST(SUM(run_at < ?) AS SIGNED), MIN(run_at) \
     FROM jobq_jobs WHERE queue = ? AND status IN ('pending', 'processing', 'blocked') GROUP BY status";

/// One queue's `done`, `failed` and `cancelled` rows, each counted up to a
/// cap (`?` queue, cap, three times): at most cap entries of one range of
/// the claim index each.
pub const STATS_FINISHED: &str = "SELECT \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ? AND status = 'done' LIMIT ?) AS d), \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ? AND status = 'failed' LIMIT ?) AS f), \
     (SELECT COUNT(*) FROM (SELECT 1 FROM jobq_jobs WHERE queue = ? AND status = 'cancelled' LIMIT ?) AS c)";

/// The next priority after `?` among one queue's rows of one status: one
/// descent of the claim index (a `DISTINCT` would read every entry).
/// Shared by prune and `stats`.
pub const NEXT_PRIORITY: &str = PRUNE_NEXT_PRIORITY;

/// The queues with rows: a loose scan of the claim index's first column.
/// Shared by prune and `stats`.
pub const QUEUES: &str = PRUNE_QUEUES;

/// Makes sure `?` has its row in `jobq_queues` (a no-op if it has).
pub const QUEUE_ROW: &str =
    "INSERT INTO jobq_queues (queue) VALUES (?) ON DUPLICATE KEY UPDATE queue = queue";

/// Pauses `?`; matches (and so counts) its row only if it was not paused.
pub const PAUSE: &str =
    "UPDATE jobq_queues SET paused_at = UTC_TIMESTAMP(6) WHERE queue = ? AND paused_at IS NULL";

/// Resumes `?`; matches its row only if it was paused.
pub const RESUME: &str =
    "UPDATE jobq_queues SET paused_at = NULL WHERE queue = ? AND paused_at IS NOT NULL";

/// `jobq_runtime::testing`'s drain with scheduled jobs: every pending job of
/// queue `?` not due yet becomes due now.
#[cfg(feature = "testing")]
pub const MAKE_DUE: &str = "UPDATE jobq_jobs SET run_at = UTC_TIMESTAMP(6) \
     WHERE queue = ? AND status = 'pending' AND run_at > UTC_TIMESTAMP(6)";

/// The queues paused, limited or rate limited now, as `(queue, paused,
/// limit, starts, period_us, burst, tat_us)` (three small tables: a queue
/// may come three times, see `policy::controls`).
pub const CONTROLS: &str = "SELECT queue, CAST(1 AS SIGNED), CAST(NULL AS SIGNED), \
     CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), CAST(NULL AS SIGNED) \
     FROM jobq_queues WHERE paused_at IS NOT NULL \
     UNION ALL SELECT queue, CAST(0 AS SIGNED), CAST(max_running AS SIGNED), \
     CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), CAST(NULL AS SIGNED), CAST(NULL AS SIGNED) \
     FROM jobq_limits \
     UNION ALL SELECT queue, CAST(0 AS SIGNED), CAST(NULL AS SIGNED), \
     CAST(starts AS SIGNED), period_us, CAST(burst AS SIGNED), tat_us FROM jobq_rates";

// ---------------------------------------------------------------------------
// Rates per concurrency key (`jobq_key_rates`; see `policy::key_starts`).

/// Key `?`'s rate row, locked (takers of one key take turns), with the
/// database's clock: `(starts, period_us, burst, tat_us, now_us)`.
pub const KEY_RATE_LOCK: &str = "SELECT CAST(starts AS SIGNED), period_us, CAST(burst AS SIGNED), tat_us, \
     TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
     FROM jobq_key_rates WHERE ckey = ? FOR UPDATE";

/// Moves key `?2`'s theoretical arrival time to `?1`.
pub const KEY_RATE_ADVANCE: &str = "UPDATE jobq_key_rates SET tat_us = ? WHERE ckey = ?";

/// Stamps `ids` claimed rows with the moment their key's rate let them
/// start (`?` µs since the epoch, the clock the rate read).
pub(crate) fn key_started(ids: usize) -> String {
    format!(
        "UPDATE jobq_jobs SET claimed_at = TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00') \
         WHERE status = 'processing' AND id IN ({})",
        placeholders(ids)
    )
}

/// Sets key `?`'s rate to `?` starts per `?` µs, burst `?` (as [`RATE_SET`]).
pub const KEY_RATE_SET: &str = "INSERT INTO jobq_key_rates (ckey, starts, period_us, burst, tat_us, updated_at) \
     VALUES (?, ?, ?, ?, 0, UTC_TIMESTAMP(6)) \
     ON DUPLICATE KEY UPDATE starts = VALUES(starts), period_us = VALUES(period_us), \
     burst = VALUES(burst), updated_at = VALUES(updated_at)";

/// Removes key `?`'s rate.
pub const KEY_RATE_REMOVE: &str = "DELETE FROM jobq_key_rates WHERE ckey = ?";

/// Every key's rate: `(key, starts, period_us, burst)`.
pub const KEY_RATES: &str = "SELECT ckey, CAST(starts AS SIGNED), period_us, CAST(burst AS SIGNED) \
     FROM jobq_key_rates ORDER BY ckey";

// ---------------------------------------------------------------------------
// Rate limits (`jobq_rates`; see `policy::Gcra`).

/// A rate-limited claim's read of queue `?`'s rate row, locked unless
/// another claim holds it (then no row): `(starts, period_us, burst,
/// tat_us, now_us)`, now by the database's clock in microseconds since the
/// Unix epoch (`TIMESTAMPDIFF` of two `DATETIME`s: no time zone applies).
pub const RATE_LOCK: &str = "SELECT CAST(starts AS SIGNED), period_us, CAST(burst AS SIGNED), tat_us, \
     TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) \
     FROM jobq_rates WHERE queue = ? FOR UPDATE SKIP LOCKED";

/// Moves queue `?2`'s theoretical arrival time to `?1` (the claim holds the row).
pub const RATE_ADVANCE: &str = "UPDATE jobq_rates SET tat_us = ? WHERE queue = ?";

/// Sets queue `?`'s rate to `?` starts per `?` µs, burst `?`; a new row's
/// theoretical arrival time is 0, a changed row keeps its own.
pub const RATE_SET: &str = "INSERT INTO jobq_rates (queue, starts, period_us, burst, tat_us, updated_at) \
     VALUES (?, ?, ?, ?, 0, UTC_TIMESTAMP(6)) \
     ON DUPLICATE KEY UPDATE starts = VALUES(starts), period_us = VALUES(period_us), \
     burst = VALUES(burst), updated_at = VALUES(updated_at)";

/// Removes queue `?`'s rate.
pub const RATE_REMOVE: &str = "DELETE FROM jobq_rates WHERE queue = ?";

// ---------------------------------------------------------------------------
// Global concurrency limits (`jobq_limits`, `jobq_slots`; see `policy::SlotPlan`).

/// A limited claim's first statement: the slot rows of queue `?` no other
/// claim has locked, locked, with the attempt each holds last.
pub const SLOTS_LOCK: &str = "SELECT slot, job_id, lease_token FROM jobq_slots \
     WHERE queue = ? ORDER BY slot FOR UPDATE SKIP LOCKED";

/// Deletes queue `?`'s slot row `?` (above its limit, its holder gone).
pub const SLOT_RETIRE: &str = "DELETE FROM jobq_slots WHERE queue = ? AND slot = ?";

/// Drops queue `?`'s slot rows from number `?` up whose holders no longer
/// hold their rows (a lowered limit: a job running keeps its row, and
/// counts against the new limit, until it finishes).
pub const SLOTS_TRIM_IDLE: &str = "DELETE FROM jobq_slots WHERE queue = ? AND slot >= ? \
     AND NOT EXISTS (SELECT 1 FROM jobq_jobs j WHERE j.id = jobq_slots.job_id \
       AND j.lease_token = jobq_slots.lease_token AND j.status = 'processing')";

/// Whether queue `?` has a due job (a limited claim with no free slot).
pub const DUE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM jobq_jobs \
     WHERE queue = ? AND status = 'pending' AND run_at <= UTC_TIMESTAMP(6))";

/// Sets queue `?`'s limit to `?`.
pub const LIMIT_SET: &str = "INSERT INTO jobq_limits (queue, max_running, updated_at) \
     VALUES (?, ?, UTC_TIMESTAMP(6)) \
     ON DUPLICATE KEY UPDATE max_running = VALUES(max_running), updated_at = VALUES(updated_at)";

/// Removes queue `?`'s limit.
pub const LIMIT_REMOVE: &str = "DELETE FROM jobq_limits WHERE queue = ?";

/// Drops queue `?`'s slots from number `?` up.
pub const SLOTS_TRIM: &str = "DELETE FROM jobq_slots WHERE queue = ? AND slot >= ?";

/// A limited claim's read after locking its slots (see `policy::slots_read`):
/// queue `?`'s limit and slot-row count (`?` the queue twice), and of the
/// attempts written in its slots (`id IN (…)`, `ids` of them; none:
/// `NULL`), the `(id, lease_token)` of the rows still held: `processing`
/// (an expired lease still holds its slot until the reaper moves the row:
/// its worker may yet renew it). One round trip.
pub(crate) fn slots_read(ids: usize) -> String {
    let list = if ids == 0 {
        "NULL".to_owned()
    } else {
        placeholders(ids)
    };
    format!(
        "SELECT l.max_running, (SELECT COUNT(*) FROM jobq_slots WHERE queue = ?), j.id, j.lease_token \
         FROM (SELECT 1 AS one) x LEFT JOIN jobq_limits l ON l.queue = ? \
         LEFT JOIN jobq_jobs j ON j.id IN ({list}) AND j.status = 'processing'"
    )
}

/// Writes `(queue, slot, job_id, lease_token)` for `slots` slot rows.
pub(crate) fn slots_assign(slots: usize) -> String {
    format!(
        "INSERT INTO jobq_slots (queue, slot, job_id, lease_token) VALUES {} \
         ON DUPLICATE KEY UPDATE job_id = VALUES(job_id), lease_token = VALUES(lease_token)",
        vec!["(?, ?, ?, ?)"; slots].join(", ")
    )
}

/// Makes `(queue, slot)` rows for `slots` slots (those there already stay as they are).
pub(crate) fn slots_fill(slots: usize) -> String {
    format!(
        "INSERT INTO jobq_slots (queue, slot) VALUES {} ON DUPLICATE KEY UPDATE slot = slot",
        vec!["(?, ?)"; slots].join(", ")
    )
}

/// One queue's `done` and `failed` rows finished since `?` (the first
/// bind), by minute since then: the claim index's ranges of
/// `(queue, status, priority, run_at >= ?)` for each status and each of the
/// `priorities` (a finished row's `run_at` is when it finished). Binds: since,
/// queue, the priorities, since. Grouped by position: the same expression
/// with its own `?` would not be taken as the one selected under
/// `ONLY_FULL_GROUP_BY`.
pub fn stats_per_minute(priorities: usize) -> String {
    format!(
        "SELECT CAST(status AS CHAR), TIMESTAMPDIFF(MINUTE, ?, run_at), COUNT(*) FROM jobq_jobs \
             WHERE queue = ? AND status IN ('done', 'failed') AND priority IN ({}) AND run_at >= ? \
             GROUP BY 1, 2 ORDER BY NULL",
        placeholders(priorities)
    )
}

/// The claim's UPDATE of `ids` locked rows (each row's token is `? + id`).
pub(crate) fn claim_update(ids: usize) -> String {
    format!(
        "UPDATE jobq_jobs SET status = 'processing', attempts = attempts + 1, lease_token = ? + id, \
             run_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, claimed_by = ?, claimed_at = UTC_TIMESTAMP(6) \
             WHERE id IN ({})",
        placeholders(ids)
    )
}

/// Locks the rows of `keys` keys, in key order (every release locks in
/// that order: two releases never wait on each other in a cycle), with
/// their limits.
pub(crate) fn keys_lock(keys: usize) -> String {
    format!(
        "SELECT ckey, max_running FROM jobq_keys WHERE ckey IN ({}) ORDER BY ckey FOR UPDATE",
        placeholders(keys)
    )
}

/// The fronts of `keys` keys' job lists, the first `?` members of each:
/// `(key, job id, status)`. The members are numbered within their key
/// from the primary key alone, and only the front's rows are joined to
/// their jobs. Read after the keys' rows are locked, in READ COMMITTED:
/// the newest committed rows.
pub(crate) fn key_fronts(keys: usize) -> String {
    format!(
        "SELECT f.ckey, f.job_id, CAST(j.status AS CHAR) \
         FROM (SELECT ckey, job_id, ROW_NUMBER() OVER (PARTITION BY ckey ORDER BY job_id) AS n \
               FROM jobq_key_jobs WHERE ckey IN ({})) AS f \
         LEFT JOIN jobq_jobs j ON j.id = f.job_id WHERE f.n <= ?",
        placeholders(keys)
    )
}

/// Forgets `members` `(key, job id)` pairs of `jobq_key_jobs`.
pub(crate) fn key_forget(members: usize) -> String {
    format!(
        "DELETE FROM jobq_key_jobs WHERE (ckey, job_id) IN ({})",
        vec!["(?, ?)"; members].join(", ")
    )
}

/// Makes `ids` jobs `pending` if they are still `blocked`.
pub(crate) fn key_unblock(ids: usize) -> String {
    format!(
        "UPDATE jobq_jobs SET status = 'pending' WHERE status = 'blocked' AND id IN ({})",
        placeholders(ids)
    )
}

/// Deletes the rows of `keys` keys that list no job.
pub(crate) fn keys_drop(keys: usize) -> String {
    format!(
        "DELETE FROM jobq_keys WHERE ckey IN ({}) \
         AND NOT EXISTS (SELECT 1 FROM jobq_key_jobs k WHERE k.ckey = jobq_keys.ckey)",
        placeholders(keys)
    )
}

/// The distinct concurrency keys of `ids` rows.
pub(crate) fn keys_of(ids: usize) -> String {
    format!(
        "SELECT DISTINCT concurrency_key FROM jobq_jobs WHERE id IN ({}) AND concurrency_key IS NOT NULL",
        placeholders(ids)
    )
}

/// Makes the key rows of `ids` rows that have a concurrency key, with the
/// row's limit, where they are missing, and share-locks those that exist
/// (InnoDB's lock on a duplicate key), so that no release deletes one
/// before the job is listed again by [`keys_rejoin`].
pub(crate) fn keys_remake(ids: usize) -> String {
    format!(
        "INSERT IGNORE INTO jobq_keys (ckey, max_running) \
         SELECT concurrency_key, COALESCE(concurrency_limit, 1) FROM jobq_jobs \
         WHERE id IN ({}) AND concurrency_key IS NOT NULL",
        placeholders(ids)
    )
}

/// Lists `ids` rows that have a concurrency key in their keys again.
pub(crate) fn keys_rejoin(ids: usize) -> String {
    format!(
        "INSERT IGNORE INTO jobq_key_jobs (ckey, job_id) \
         SELECT concurrency_key, id FROM jobq_jobs WHERE id IN ({}) AND concurrency_key IS NOT NULL",
        placeholders(ids)
    )
}

/// `<set> WHERE status = 'processing' AND id IN (…) AND lease_token IN (…)`.
pub(crate) fn fenced_update(set: &str, ids: usize, tokens: usize) -> String {
    format!(
        "{set} WHERE status = 'processing' AND id IN ({}) AND lease_token IN ({})",
        placeholders(ids),
        placeholders(tokens)
    )
}

/// The held rows among `ids` × `tokens` no other transaction has locked,
/// each with its token (two claims of one job — a lost attempt and the new
/// one — are told apart by it).
pub(crate) fn heartbeat_unlocked_select(ids: usize, tokens: usize) -> String {
    format!(
        "SELECT id, lease_token FROM jobq_jobs WHERE status = 'processing' AND id IN ({}) AND lease_token IN ({}) \
             FOR UPDATE SKIP LOCKED",
        placeholders(ids),
        placeholders(tokens)
    )
}

/// Renews the leases of `ids` rows (locked by `heartbeat_unlocked_select`).
pub(crate) fn heartbeat_unlocked_update(ids: usize) -> String {
    format!(
        "UPDATE jobq_jobs SET run_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id IN ({})",
        placeholders(ids)
    )
}

/// The `processing` rows among `ids`, with their tokens.
pub(crate) fn held(ids: usize) -> String {
    format!(
        "SELECT id, lease_token FROM jobq_jobs WHERE status = 'processing' AND id IN ({})",
        placeholders(ids)
    )
}

/// What a reaped attempt's `last_error` and history entry say.
macro_rules! lease_expired {
    () => {
        "CONCAT('lease expired during attempt ', attempts, ': worker ', COALESCE(claimed_by, '?'), \
         ' stopped renewing it (crashed, killed or stalled)')"
    };
}

/// Returns `ids` (locked by [`reap_lock`]) to `pending`, or `failed` when
/// their attempts are used up. An orphan keeps its place in
/// line: `run_at` goes back to when the job was enqueued, not to the back of
/// a backlog, so it runs again about one lease after the crash even when the
/// queue is deep.
pub(crate) fn reap_update(ids: usize) -> String {
    format!(
        concat!(
            "UPDATE jobq_jobs SET history = ",
            history_append!("'lease expired'", lease_expired!()),
            ", last_error = ",
            lease_expired!(),
            ", \
             finished_at = IF(attempts >= max_attempts, UTC_TIMESTAMP(6), NULL), \
             status = IF(attempts >= max_attempts, 'failed', 'pending'), \
             run_at = IF(attempts >= max_attempts, UTC_TIMESTAMP(6), created_at), lease_token = NULL \
             WHERE id IN ({}) AND status = 'processing'"
        ),
        placeholders(ids)
    )
}

/// Locks those of `ids` ([`REAP_SELECT`]'s candidates) that are still
/// expired, skipping rows another transaction holds (a settle waiting on a
/// caller's lock, another reaper): primary-key lookups, so a reaper that
/// stalls holds these rows and no live row of the queue.
pub fn reap_lock(ids: usize) -> String {
    format!(
        "SELECT id FROM jobq_jobs WHERE id IN ({}) \
         AND status = 'processing' AND run_at < UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED",
        placeholders(ids)
    )
}

/// `INSERT … VALUES` with `rows` × [`INSERT_ROW`], then `tail`.
pub(crate) fn insert_rows(rows: usize, tail: &str) -> String {
    rows_of(INSERT_ROW, rows, tail)
}

/// `INSERT … VALUES` with `rows` × `row`, then `tail`.
pub(crate) fn rows_of(row: &str, rows: usize, tail: &str) -> String {
    let mut sql = String::from(INSERT_COLUMNS);
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(row);
    }
    sql.push_str(tail);
    sql
}

/// `?, ?, ?` with `n` placeholders.
fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

// ---------------------------------------------------------------------------
// `Jobq::doctor` (see `doctor.rs`): reads only.

/// `EXPLAIN` of one of jobq's statements.
pub(crate) fn explain(sql: &str) -> String {
    format!("EXPLAIN {sql}")
}

/// The server's version string and whether the binary log is on, with its
/// format for this session.
pub const DOCTOR_SERVER: &str =
    "SELECT VERSION(), CAST(@@log_bin AS SIGNED), CAST(@@SESSION.binlog_format AS CHAR)";

/// A Galera node's state: cluster status, cluster size, local state, ready.
pub const DOCTOR_GALERA_STATUS: &str = "SELECT \
     CAST(MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_STATUS', VARIABLE_VALUE, NULL)) AS CHAR), \
     CAST(MAX(IF(VARIABLE_NAME = 'WSREP_CLUSTER_SIZE', VARIABLE_VALUE, NULL)) AS CHAR), \
     CAST(MAX(IF(VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT', VARIABLE_VALUE, NULL)) AS CHAR), \
     CAST(MAX(IF(VARIABLE_NAME = 'WSREP_READY', VARIABLE_VALUE, NULL)) AS CHAR) \
     FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN \
     ('WSREP_CLUSTER_STATUS', 'WSREP_CLUSTER_SIZE', 'WSREP_LOCAL_STATE_COMMENT', 'WSREP_READY')";

/// A Galera node's settings: the server's default `wsrep_sync_wait` and
/// the provider's options (`evs.suspect_timeout` among them).
pub const DOCTOR_GALERA_SETTINGS: &str = "SELECT CAST(@@GLOBAL.wsrep_sync_wait AS SIGNED), CAST(@@GLOBAL.wsrep_provider_options AS CHAR)";

/// The session's isolation level on MariaDB (which has no `transaction_isolation` before 11.1).
pub const DOCTOR_SESSION_ISOLATION_MARIADB: &str = "SELECT CAST(@@SESSION.tx_isolation AS CHAR)";

/// The session's isolation level on MySQL 8 (which removed `tx_isolation`).
pub const DOCTOR_SESSION_ISOLATION_MYSQL: &str =
    "SELECT CAST(@@SESSION.transaction_isolation AS CHAR)";

/// A read that makes the open transaction an InnoDB one (listed in `INNODB_TRX`).
pub const DOCTOR_TOUCH: &str = "SELECT COUNT(*) FROM jobq_jobs WHERE id = 0";

/// The isolation level of this connection's open InnoDB transaction, with
/// the statement `INNODB_TRX` saw it run: `INNODB_TRX` is a snapshot
/// refreshed at most every 0.1 s, so a row whose `trx_query` is not this
/// very statement is an earlier transaction of the connection.
pub const DOCTOR_TRX_ISOLATION: &str = "SELECT CAST(trx_isolation_level AS CHAR), CAST(trx_query AS CHAR) FROM information_schema.INNODB_TRX \
     WHERE trx_mysql_thread_id = CONNECTION_ID()";

/// `jobq_jobs`'s storage engine, if the table exists.
pub const DOCTOR_ENGINE: &str = "SELECT CAST(ENGINE AS CHAR) FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs'";

/// Whether `jobq_migrations` exists, then what it records.
pub const DOCTOR_MIGRATIONS: [&str; 2] = [
    "SELECT COUNT(*) FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_migrations'",
    MIGRATIONS_APPLIED,
];

/// The database's clock.
pub const DOCTOR_NOW: &str = "SELECT UTC_TIMESTAMP(6)";

/// Whether MariaDB still has the lock tables of `information_schema`
/// (`INNODB_LOCK_WAITS`, removed from MySQL 8).
pub const DOCTOR_HAS_INNODB_LOCK_WAITS: &str = "SELECT COUNT(*) FROM information_schema.TABLES \
     WHERE TABLE_SCHEMA = 'information_schema' AND TABLE_NAME = 'INNODB_LOCK_WAITS'";

/// MariaDB: transactions waiting on a lock of this database's `jobq_jobs`,
/// and the longest wait in seconds.
pub const DOCTOR_LOCK_WAITS_MARIADB: &str = "SELECT COUNT(*), CAST(COALESCE(MAX(TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW())), 0) AS SIGNED) \
     FROM information_schema.INNODB_LOCK_WAITS w \
     JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
     JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id \
     WHERE l.lock_table = CONCAT('`', DATABASE(), '`.`jobq_jobs`')";

/// The account the server took this session for (`name@host`), named in
/// the grant `lock_waits` advises when it lacks one.
pub const DOCTOR_CURRENT_USER: &str = "SELECT CAST(CURRENT_USER() AS CHAR)";

/// Whether `performance_schema` is on (MySQL 8 reports lock waits there).
pub const DOCTOR_PERFORMANCE_SCHEMA: &str = "SELECT CAST(@@performance_schema AS SIGNED)";

/// MySQL 8: as [`DOCTOR_LOCK_WAITS_MARIADB`], from `performance_schema`.
/// Not run here (MySQL 8 cannot be installed on the machine jobq is
/// developed on): written from the MySQL 8.0 reference, `data_lock_waits`
/// joined to the waiting lock's `data_locks` row and its `INNODB_TRX` row.
pub const DOCTOR_LOCK_WAITS_MYSQL: &str = "SELECT COUNT(*), CAST(COALESCE(MAX(TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW())), 0) AS SIGNED) \
     FROM performance_schema.data_lock_waits w \
     JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID \
     JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID \
     WHERE l.OBJECT_SCHEMA = DATABASE() AND l.OBJECT_NAME = 'jobq_jobs'";

/// Registers a running worker (`jobq_workers`, one row per `Worker`): `?`
/// id, worker id, host, pid, version, queues (JSON), jobs (JSON), running,
/// then the row's time to live in microseconds. Started and seen now.
pub const WORKER_REGISTER: &str = "INSERT INTO jobq_workers \
     (id, worker_id, host, pid, version, queues, jobs, running, started_at, last_seen, expires_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), \
     UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";

/// A worker's periodic refresh: `?` running, time to live in microseconds,
/// id. Matches nothing if its row was deleted as expired (it registers again).
pub const WORKER_REFRESH: &str = "UPDATE jobq_workers SET running = ?, \
     last_seen = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND \
     WHERE id = ?";

/// A worker's row, at its clean shutdown: `?` id.
pub const WORKER_UNREGISTER: &str = "DELETE FROM jobq_workers WHERE id = ?";

/// The rows of workers that stopped refreshing (killed, frozen, cut off),
/// deleted by any worker: no leader.
pub const WORKERS_PRUNE: &str = "DELETE FROM jobq_workers WHERE expires_at < UTC_TIMESTAMP(6)";

/// The live workers, oldest first.
pub const WORKERS_LIVE: &str = "SELECT worker_id, host, pid, version, queues, jobs, running, \
     started_at, last_seen, expires_at \
     FROM jobq_workers WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY started_at, id";

/// `jobq_runtime::testing::TestJobq::isolated`: a database of a test's own
/// (`name` is made by jobq: letters, digits and `_`).
#[cfg(feature = "testing")]
pub fn create_database(name: &str) -> String {
    format!("CREATE DATABASE `{name}`")
}

/// Drops what [`create_database`] made.
#[cfg(feature = "testing")]
pub fn drop_database(name: &str) -> String {
    format!("DROP DATABASE IF EXISTS `{name}`")
}

/// A test's drop does not wait on a metadata lock a failed test left
/// behind for the server's default (a year).
#[cfg(feature = "testing")]
pub const SHORT_LOCK_WAIT: &str = "SET SESSION lock_wait_timeout = 10";

// Wake-ups across processes (`wake.rs`).

/// Identifies a server and the connection's place on it.
pub const WAKE_IDENTITY: &str = "SELECT CONNECTION_ID(), CONCAT(@@hostname, ':', @@port), \
     UNIX_TIMESTAMP(), SUBSTRING_INDEX(USER(), '@', 1)";

/// The server's uptime in seconds (`SHOW` works for every user, on MySQL
/// 8 and MariaDB alike).
pub const WAKE_UPTIME: &str = "SHOW GLOBAL STATUS LIKE 'Uptime'";

/// The waiter's session: no statement time limit on MariaDB (a server
/// default would end every sleep early; MySQL's `max_execution_time` is
/// lifted by the statements' own hint).
pub const WAKE_WAITER_SESSION: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; \
     SET @jobq_session = 'waiter' /*M!100108 , SESSION max_statement_time = 0 */";

/// The ringer's session: its reads see every commit.
pub const WAKE_RINGER_SESSION: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// Records (or refreshes) a waiter.
pub const WAKE_REGISTER: &str = "INSERT INTO jobq_waiters (node, conn, booted, user_name, queues, seen_at) \
     VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE booted = VALUES(booted), \
     user_name = VALUES(user_name), queues = VALUES(queues), seen_at = VALUES(seen_at)";

/// Forgets waiters gone without a word (a crash, a lost server).
pub const WAKE_FORGET_STALE: &str =
    "DELETE FROM jobq_waiters WHERE seen_at < UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE";

/// Forgets one waiter.
pub const WAKE_FORGET: &str = "DELETE FROM jobq_waiters WHERE node = ? AND conn = ?";

/// The waiters a ringer may reach.
pub const WAKE_WAITERS: &str = "SELECT node, conn, booted, user_name, queues FROM jobq_waiters \
     WHERE seen_at > UTC_TIMESTAMP(6) - INTERVAL 3 MINUTE";

/// The controls' waiter's statement.
pub const WAKE_CONTROL_WAIT: &str =
    "SELECT /*+ MAX_EXECUTION_TIME(3600000) */ /* jobq-wait control */ SLEEP(60)";

/// The self-test's statement, interrupted by the waiter's own kill.
pub const WAKE_PROBE: &str =
    "SELECT /*+ MAX_EXECUTION_TIME(3600000) */ /* jobq-wait probe */ SLEEP(10)";

/// Whether the connection with this id runs the self-test's statement
/// (a user sees its own connections without the PROCESS privilege).
pub const WAKE_PROBE_RUNNING: &str = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
     WHERE ID = ? AND INFO LIKE '%jobq-wait probe%'";

/// The waiter's statement for `n` queues (an IN-list of `n` placeholders,
/// twice, after the sleep's two parameters: the longest sleep in seconds,
/// twice).
///
/// The innermost query is a loose index scan of the claim index (one
/// entry per queue, status and priority, however many rows wait), the
/// earliest `run_at` of each; a job due now makes the sleep 0. The
/// statement returns how long it slept, then which queues have a job due
/// as bit masks over their places in the list (bit `k` of column `1 + c`
/// is queue `64c + k`), [`wake_wait_columns`] of them, then as many masks
/// of the queues with a `processing` row whose lease has expired (for
/// the reaper; they do not shorten the sleep), then
/// [`CONTROLS_FINGERPRINT`]: the waiter tells the worker's pause loop when
/// it changes. Masks and fingerprint are as of the statement's start.
///
/// No `GROUP_CONCAT`: MariaDB keeps its values in an on-disk (Aria)
/// temporary table, a file created and deleted by every wait, and a kill
/// that lands while it is deleted fails the statement with error 6 ("Error
/// on delete of '/tmp/#sql-temptable…'") instead of 1317 — a wake-up
/// turned into a reconnect. Masks are plain aggregates.
pub fn wake_wait_sql(n: usize) -> String {
    let marks = vec!["?"; n].join(", ");
    let masks = |status: &str| -> Vec<String> {
        (0..wake_wait_columns(n))
            .map(|c| {
                let low = 64 * c;
                format!(
                    "BIT_OR(IF(g.status = '{status}' AND g.wait_us <= 0 AND g.pos > {low} AND g.pos <= {high}, \
                     1 << (g.pos - {first}), 0))",
                    high = low + 64,
                    first = low + 1
                )
            })
            .collect()
    };
    format!(
        "SELECT /*+ MAX_EXECUTION_TIME(3600000) */ /* jobq-wait */ \
         SLEEP(IF(MIN(IF(g.status = 'pending', g.wait_us, NULL)) <= 0, 0, \
         LEAST(?, COALESCE(MIN(IF(g.status = 'pending', g.wait_us, NULL)) / 1000000, ?)))), {}, {}, \
         {CONTROLS_FINGERPRINT} \
         FROM (SELECT FIELD(queue, {marks}) AS pos, status, \
         TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(run_at)) AS wait_us \
         FROM jobq_jobs WHERE queue IN ({marks}) AND status IN ('pending', 'processing') \
         GROUP BY queue, status, priority) g",
        masks("pending").join(", "),
        masks("processing").join(", ")
    )
}

/// A fingerprint of everything the pause loop reads ([`CONTROLS`] and
/// [`KEY_RATES`]: pauses, limits, rates and the keys' rates, not a rate's
/// moving arrival time): per table its rows and a sum of their checksums,
/// so that a row added, removed or changed changes it.
pub const CONTROLS_FINGERPRINT: &str = "CONCAT_WS('/', \
     (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',', queue, paused_at))), 0)) FROM jobq_queues), \
     (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',', queue, max_running))), 0)) FROM jobq_limits), \
     (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',', queue, starts, period_us, burst))), 0)) FROM jobq_rates), \
     (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(CRC32(CONCAT_WS(',', ckey, starts, period_us, burst))), 0)) FROM jobq_key_rates))";

/// How many due masks [`wake_wait_sql`] returns for `n` queues.
pub fn wake_wait_columns(n: usize) -> usize {
    n.div_ceil(64).max(1)
}

/// Records the second `?` as schedule `?`'s last tick enqueued, unless a
/// later one is.
pub const TICK_RECORD: &str = "INSERT INTO jobq_schedules (name, last_tick, updated_at) \
     VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE \
     last_tick = GREATEST(COALESCE(last_tick, VALUES(last_tick)), VALUES(last_tick)), \
     updated_at = VALUES(updated_at)";

/// Schedule `?`'s last tick enqueued.
pub const TICK_LAST: &str = "SELECT last_tick FROM jobq_schedules WHERE name = ?";

/// Stores schedule `?` (job, payload, cron, zone, queue, priority), keeping
/// its last tick and pause.
pub const SCHEDULE_PUT: &str = "INSERT INTO jobq_schedules \
     (name, job_name, payload, schedule, time_zone, queue, priority, updated_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE \
     job_name = VALUES(job_name), payload = VALUES(payload), schedule = VALUES(schedule), \
     time_zone = VALUES(time_zone), queue = VALUES(queue), priority = VALUES(priority), \
     updated_at = VALUES(updated_at)";

/// Pauses (the first `?` true) or resumes stored schedule `?`.
pub const SCHEDULE_PAUSE: &str = "UPDATE jobq_schedules \
     SET paused_at = IF(?, COALESCE(paused_at, UTC_TIMESTAMP(6)), NULL), updated_at = UTC_TIMESTAMP(6) \
     WHERE name = ? AND job_name IS NOT NULL";

/// Removes stored schedule `?`.
pub const SCHEDULE_REMOVE: &str =
    "DELETE FROM jobq_schedules WHERE name = ? AND job_name IS NOT NULL";

/// The read of the stored schedules, in no order.
macro_rules! stored_schedules {
    () => {
        "SELECT CAST(name AS CHAR), CAST(job_name AS CHAR), payload, \
         schedule, time_zone, CAST(queue AS CHAR), priority, paused_at, last_tick, updated_at \
         FROM jobq_schedules WHERE job_name IS NOT NULL"
    };
}
/// The schedules kept in the database, by name (the names read as text:
/// their binary collation, which keeps `Daily` apart from `daily`, makes
/// the driver see bytes).
pub const SCHEDULES_STORED: &str = concat!(stored_schedules!(), " ORDER BY name");

/// Stored schedule `?`, as [`SCHEDULES_STORED`] reads it.
pub const SCHEDULE_STORED: &str = concat!(stored_schedules!(), " AND name = ?");

/// The embedded migrations (`jobq-runtime/migrations/mysql/`), in order.
pub(crate) const MIGRATIONS: &[Migration] = migrations!("mysql":
    20261129000001 "jobq_jobs",
    20261201000001 "jobq_jobs_bytes",
    20261201170001 "jobq_queues",
    20261204000001 "jobq_jobs_job_name",
    20261204000002 "jobq_workers",
    20261204120001 "jobq_jobs_no_created_index",
    20261205000001 "jobq_limits",
    20261206000001 "jobq_unique",
    20261206000002 "jobq_rates",
    20261207000001 "jobq_keys",
    20261207000002 "jobq_key_rates",
    20261208000001 "jobq_waiters",
    20261209000001 "jobq_history",
    20261209000002 "jobq_output",
    20261209000003 "jobq_checkpoint",
    20261210000001 "jobq_tags",
    20261211000001 "jobq_schedules",
    20261212000001 "jobq_workflows",
    20261213000001 "jobq_batches",
);

// A list of ids is an IN-list of placeholders (`{ids}`, made for each
// length by `flow_sql`): MariaDB runs an `UPDATE … WHERE id IN (SELECT …
// FROM JSON_TABLE(…))` as a dependent subquery over the whole table.
crate::store::sql::flow_statements!("IN ({ids})", "?");

crate::store::sql::batch_statements!("IN ({ids})", "?", "?", "?", " FOR UPDATE");

/// Records the jobs of a batch: `?` a JSON array of `[job_id, batch, role]`.
pub const BATCH_JOBS_INSERT: &str = "INSERT INTO jobq_batch_jobs (job_id, batch, role) \
     SELECT t.job_id, t.batch, t.role FROM JSON_TABLE(?, '$[*]' COLUMNS (\
     job_id BIGINT PATH '$[0]', batch VARCHAR(100) PATH '$[1]', role VARCHAR(16) PATH '$[2]')) AS t";

/// Names the jobs of a workflow: `?` a JSON array of `[job_id, workflow, task]`.
pub const FLOW_JOBS_INSERT: &str = "INSERT INTO jobq_flow_jobs (job_id, workflow, task) \
     SELECT t.job_id, t.workflow, t.task FROM JSON_TABLE(?, '$[*]' COLUMNS (\
     job_id BIGINT PATH '$[0]', workflow VARCHAR(100) PATH '$[1]', task VARCHAR(100) PATH '$[2]')) AS t";

/// Records dependencies: `?` a JSON array of `[job_id, depends_on, run_anyway]`.
pub const FLOW_EDGES_INSERT: &str = "INSERT INTO jobq_deps (job_id, depends_on, run_anyway) \
     SELECT t.job_id, t.depends_on, t.run_anyway FROM JSON_TABLE(?, '$[*]' COLUMNS (\
     job_id BIGINT PATH '$[0]', depends_on BIGINT PATH '$[1]', run_anyway SMALLINT PATH '$[2]')) AS t";

/// Makes the `blocked` jobs `{ids}` `pending`, due now at the
/// earliest (their queue wait counts from here).
pub const FLOW_UNBLOCK: &str = "UPDATE jobq_jobs SET status = 'pending', run_at = GREATEST(run_at, UTC_TIMESTAMP(6)) \
     WHERE status = 'blocked' AND id IN ({ids})";

/// Cancels the `blocked` jobs `{ids}` with `last_error` `?`.
pub const FLOW_CANCEL: &str = "UPDATE jobq_jobs SET status = 'cancelled', finished_at = UTC_TIMESTAMP(6), \
     run_at = UTC_TIMESTAMP(6), lease_token = NULL, last_error = ? \
     WHERE status = 'blocked' AND id IN ({ids})";
