-- jobq: a database migrated by a jobq of 2026-12-04 has an index by
-- `created_at`, written at every enqueue (it cost enqueues about 5 %);
-- enqueue-time filters now read a range of the primary key (ids are handed
-- out in enqueue order), so it goes. MySQL 8 has no `DROP INDEX IF EXISTS`:
-- the ALTER runs only if the index is there.
SET @jobq_ddl = (
    SELECT IF(SUM(INDEX_NAME = 'jobq_jobs_created') > 0,
              'ALTER TABLE jobq_jobs DROP INDEX jobq_jobs_created',
              'DO 0')
    FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
