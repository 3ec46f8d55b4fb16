-- jobq: a job's checkpoint (`JobContext::checkpoint`: the JSON an attempt
-- saved last, read by the next attempt with `last_checkpoint`) and its
-- progress (`JobContext::progress`: `{"done":…,"total":…,"note":…}`, as the
-- running attempt reported it last). Each is written by one fenced UPDATE
-- of the attempt that holds the row, never by the claim or the settle:
-- jobs that use neither write nothing here. MEDIUMTEXT: a checkpoint is at
-- most 1 MiB (`MAX_CHECKPOINT_BYTES`). Added only if missing, as in
-- 20261209000001.
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN checkpoint MEDIUMTEXT NULL, ADD COLUMN progress VARCHAR(1024) NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'checkpoint'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
