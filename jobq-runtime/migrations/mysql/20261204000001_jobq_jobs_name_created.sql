-- jobq: indexes for the filters of `Jobq::list`, `count_where` and the bulk
-- actions by job name and by enqueue time, which otherwise read the whole
-- table (a list page filtered by job name on 300,000 rows: 0.5 s against
-- 3-5 ms for an indexed page). Each entry is (column, id): a page of one job
-- name comes in id order straight from the index, a count is a range of it.
-- Neither column is ever updated (claims, heartbeats and settles change
-- `status`, `run_at` and the lease columns), so these are written by
-- enqueues only and no claim or settle UPDATE touches them.
-- MySQL 8 has no `ADD INDEX IF NOT EXISTS`: the ALTER adds only the indexes
-- missing, so the migration can run again harmlessly (two Galera nodes may
-- run it at once). InnoDB builds them online (ALGORITHM=INPLACE, LOCK=NONE):
-- enqueues and claims go on while it does; it takes about as long as a scan
-- of the table.
SET @jobq_ddl = (
    SELECT CASE
        WHEN SUM(INDEX_NAME = 'jobq_jobs_job_name') = 0 AND SUM(INDEX_NAME = 'jobq_jobs_created') = 0
            THEN 'ALTER TABLE jobq_jobs ADD INDEX jobq_jobs_job_name (job_name), ADD INDEX jobq_jobs_created (created_at)'
        WHEN SUM(INDEX_NAME = 'jobq_jobs_job_name') = 0
            THEN 'ALTER TABLE jobq_jobs ADD INDEX jobq_jobs_job_name (job_name)'
        WHEN SUM(INDEX_NAME = 'jobq_jobs_created') = 0
            THEN 'ALTER TABLE jobq_jobs ADD INDEX jobq_jobs_created (created_at)'
        ELSE 'DO 0'
    END
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
