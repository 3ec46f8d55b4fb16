-- jobq: the jobs table (SQLite 3.35+).
-- Times are INTEGER unix microseconds from the application's clock: an
-- embedded queue has one clock. One secondary index serves both the claim and
-- the reaper: `run_at` is the not-before time of a pending row and the lease
-- deadline of a processing row.
-- AUTOINCREMENT: a job id is never handed out twice, even after the newest
-- rows were deleted (ids are returned to callers and may be stored by them).
CREATE TABLE IF NOT EXISTS jobq_jobs (
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
    idempotency_key TEXT    NULL UNIQUE,
    dedupe_hits     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NULL,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER NULL
);

CREATE INDEX IF NOT EXISTS jobq_jobs_claim ON jobq_jobs (queue, status, priority, run_at, id);
