-- jobq: the unique index of idempotency keys holds only the rows that have
-- one. The column's `UNIQUE` constraint gave every row an entry (NULL for a
-- job without a key, which most are), a B-tree write at every enqueue that
-- no statement reads; a partial index, as on PostgreSQL, is written by keyed
-- enqueues only. An upsert names the index's condition
-- (`ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL`), and a
-- key lookup or a key-prefix range implies it, so both still read it.
-- SQLite drops a column constraint only by rebuilding the table: the rows
-- are copied with their ids, and the AUTOINCREMENT counter is carried over,
-- so no id is handed out twice (the counter may be past the last row, whose
-- job was deleted). jobq migrates inside one `BEGIN IMMEDIATE` transaction:
-- the rebuild applies whole or not at all, and it copies the table once
-- (about 1 s per million rows).
CREATE TABLE jobq_jobs_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue           TEXT    NOT NULL,
    job_name        TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled')),
    priority        INTEGER NOT NULL DEFAULT 0,
    run_at          INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    lease_token     INTEGER NULL,
    claimed_by      TEXT    NULL,
    claimed_at      INTEGER NULL,
    idempotency_key TEXT    NULL,
    dedupe_hits     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NULL,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER NULL
);
INSERT INTO jobq_jobs_rebuilt
    (id, queue, job_name, payload, status, priority, run_at, attempts, max_attempts, lease_token,
     claimed_by, claimed_at, idempotency_key, dedupe_hits, last_error, created_at, finished_at)
SELECT id, queue, job_name, payload, status, priority, run_at, attempts, max_attempts, lease_token,
       claimed_by, claimed_at, idempotency_key, dedupe_hits, last_error, created_at, finished_at
FROM jobq_jobs;
DELETE FROM sqlite_sequence WHERE name = 'jobq_jobs_rebuilt';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'jobq_jobs_rebuilt', seq FROM sqlite_sequence WHERE name = 'jobq_jobs';
DROP TABLE jobq_jobs;
ALTER TABLE jobq_jobs_rebuilt RENAME TO jobq_jobs;
CREATE UNIQUE INDEX jobq_jobs_idempotency_key
    ON jobq_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobq_jobs_claim ON jobq_jobs (queue, status, priority, run_at, id);
CREATE INDEX jobq_jobs_finished ON jobq_jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobq_jobs_job_name ON jobq_jobs (job_name);
