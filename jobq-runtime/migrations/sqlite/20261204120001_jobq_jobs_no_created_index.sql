-- jobq: a database migrated by a jobq of 2026-12-04 has an index by
-- `created_at`, written at every enqueue; enqueue-time filters now read a
-- range of the primary key (ids are handed out in enqueue order), so it goes.
DROP INDEX IF EXISTS jobq_jobs_created;
