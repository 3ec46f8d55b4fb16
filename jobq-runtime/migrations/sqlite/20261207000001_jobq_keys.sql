-- jobq: per-key concurrency; see the MySQL migration of the same name.
-- `status` gains `blocked`: SQLite changes a CHECK constraint only by
-- rebuilding the table, done as in 20261204120002 (ids and the
-- AUTOINCREMENT counter carried over, inside jobq's one migration
-- transaction), with the new `concurrency_key` and `concurrency_limit`
-- columns in place.
CREATE TABLE jobq_jobs_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    queue           TEXT    NOT NULL,
    job_name        TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled', 'blocked')),
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
    finished_at     INTEGER NULL,
    unique_key      TEXT    NULL,
    concurrency_key TEXT    NULL,
    concurrency_limit INTEGER NULL
);
INSERT INTO jobq_jobs_rebuilt
    (id, queue, job_name, payload, status, priority, run_at, attempts, max_attempts, lease_token,
     claimed_by, claimed_at, idempotency_key, dedupe_hits, last_error, created_at, finished_at,
     unique_key)
SELECT id, queue, job_name, payload, status, priority, run_at, attempts, max_attempts, lease_token,
       claimed_by, claimed_at, idempotency_key, dedupe_hits, last_error, created_at, finished_at,
       unique_key
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
CREATE TABLE IF NOT EXISTS jobq_keys (
    ckey        TEXT    NOT NULL PRIMARY KEY,
    max_running INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS jobq_key_jobs (
    ckey   TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (ckey, job_id)
);
