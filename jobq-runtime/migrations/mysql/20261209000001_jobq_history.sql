-- jobq: each job's attempt history (`JobInfo::history`): a JSON array of
-- its attempts that ended other than in success — their number, worker,
-- start and end, outcome (`error`, `panic`, `timeout`, `snooze`,
-- `lease expired`) and message, the latest 25. Written by the statement
-- that settles the failed attempt or reaps it (nothing more on the success
-- path: a successful attempt is the row's own `claimed_by`, `claimed_at`
-- and `finished_at`); deleted with the row. MEDIUMTEXT: 25 entries of up
-- to 2,000 bytes of message each pass TEXT's 64 KiB. NULL until a first
-- entry. An instant ADD COLUMN on MariaDB 10.3+ and MySQL 8.0.12+ (no
-- copy of the table); it runs only if the column is missing, so the
-- migration can run again harmlessly (MySQL 8 has no `ADD COLUMN IF NOT
-- EXISTS`).
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN history MEDIUMTEXT NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'history'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
