-- jobq: a job's output (`JobInfo::output`, `Jobq::output`): the JSON its
-- handler returned, written by the statement that marks the job `done`
-- (jobs that return nothing keep the batched completion and write
-- nothing here); deleted with the row. At most 1 MiB
-- (`MAX_OUTPUT_BYTES`): MEDIUMTEXT. Added only if missing, as in
-- 20261209000001.
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN output MEDIUMTEXT NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'output'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
