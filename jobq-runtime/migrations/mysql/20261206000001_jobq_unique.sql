-- jobq: unique jobs by state and period (`Unique`). `jobq_unique` holds
-- one row per unique key: the job that took it last (`job_id`, 0 while the
-- enqueue that made the row has not inserted its job), the states in which
-- that job keeps the key (one bit per status: pending 1, processing 2,
-- done 4, failed 8, cancelled 16) and the end of its period (NULL: none).
-- The key is held while that job exists, is in one of those states and
-- the period has not passed: nothing hands a key back (a settle, cancel,
-- reap or prune frees it by moving or deleting the job's row). An enqueue
-- of a unique job locks the key's row (INSERT … ON DUPLICATE KEY UPDATE),
-- reads its holder with a locking read, and either returns the holder or
-- inserts its job and writes itself into the row, in one transaction: the
-- primary key serializes concurrent enqueues of one key (on Galera, at
-- certification). The job keeps its key in `unique_key` (`idempotency_key`
-- stays NULL: that column's unique index would hold the key for as long
-- as the row exists). No index but the key: read by key only.
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN unique_key VARBINARY(1020) NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'unique_key'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
CREATE TABLE IF NOT EXISTS jobq_unique (
    ukey       VARBINARY(1020) NOT NULL,
    job_id     BIGINT          NOT NULL,
    states     SMALLINT        NOT NULL,
    held_until DATETIME(6)     NULL,
    PRIMARY KEY (ukey)
) ENGINE = InnoDB;
