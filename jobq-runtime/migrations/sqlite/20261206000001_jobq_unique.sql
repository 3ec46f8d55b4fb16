-- jobq: unique jobs by state and period (`Unique`). `jobq_unique` holds
-- one row per unique key: the job that took it last (`job_id`, 0 while the
-- enqueue that made the row has not inserted its job), the states in which
-- that job keeps the key (one bit per status: pending 1, processing 2,
-- done 4, failed 8, cancelled 16) and the end of its period in unix µs
-- (NULL: none). The key is held while that job exists, is in one of those
-- states and the period has not passed: nothing hands a key back (a
-- settle, cancel, reap or prune frees it by moving or deleting the job's
-- row). An enqueue of a unique job makes the key's row if it is missing,
-- reads its holder, and either returns the holder or inserts its job and
-- writes itself into the row, in one write transaction. The job keeps its
-- key in `unique_key` (`idempotency_key` stays NULL: its unique index would
-- hold the key for as long as the row exists).
ALTER TABLE jobq_jobs ADD COLUMN unique_key TEXT NULL;
CREATE TABLE IF NOT EXISTS jobq_unique (
    ukey       TEXT    NOT NULL PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    states     INTEGER NOT NULL,
    held_until INTEGER NULL
);
