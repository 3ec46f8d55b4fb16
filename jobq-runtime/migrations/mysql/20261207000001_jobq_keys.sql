-- jobq: per-key concurrency (`#[job(concurrency_key = "…", concurrency = N)]`,
-- `Enqueue::concurrency_key`). A job with a concurrency key keeps it in
-- `concurrency_key`. At most N jobs of a key are *holders* (`pending` or
-- `processing`, a job waiting to retry included); the others wait as
-- `blocked`, outside the claim index's `pending` range, so the claim is
-- the unlimited one and a key with thousands of waiting jobs costs the
-- other keys nothing. `jobq_keys` holds one row per key with jobs: its
-- limit (the last enqueue's) and the lock every change of who holds the key
-- takes. `jobq_key_jobs` lists the key's jobs in enqueue order, so a key's
-- holders and its next blocked jobs are read from the front of its range
-- without any index on `jobq_jobs` (whose unkeyed rows pay nothing).
-- An enqueue locks the key's row, counts its holders and inserts its job
-- `pending` if there is room and nothing waits, else `blocked`. A release
-- (after a holder's settle, and by a periodic sweep of every key) locks the
-- row, counts the holders again and unblocks the oldest blocked jobs up to
-- the limit: nothing hands a place back, so a lost or repeated release can
-- neither leak a place nor hand one out twice.
ALTER TABLE jobq_jobs MODIFY status
    ENUM('pending', 'processing', 'done', 'failed', 'cancelled', 'blocked') NOT NULL DEFAULT 'pending';
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN concurrency_key VARBINARY(1020) NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'concurrency_key'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
-- The job's limit, with its key: a job retried after its key's row was
-- deleted (its key had no other job) makes the row again with it.
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN concurrency_limit INT NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'concurrency_limit'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
CREATE TABLE IF NOT EXISTS jobq_keys (
    ckey        VARBINARY(1020) NOT NULL,
    max_running INT             NOT NULL,
    PRIMARY KEY (ckey)
) ENGINE = InnoDB;
CREATE TABLE IF NOT EXISTS jobq_key_jobs (
    ckey   VARBINARY(1020) NOT NULL,
    job_id BIGINT          NOT NULL,
    PRIMARY KEY (ckey, job_id)
) ENGINE = InnoDB;
