-- jobq: an index for the filters of `Jobq::list`, `count_where` and the bulk
-- actions by job name, which otherwise read the whole table. Each entry is
-- (job_name, rowid): a page of one job name comes in id order straight from
-- the index, a count is a range of it, and an enqueue-time window (a range
-- of ids) narrows it. The column is never updated, so it is written by
-- enqueues only (SQLite changes an index only when an UPDATE changes one of
-- its columns). Enqueue-time filters read a range of the primary key: no
-- index by `created_at`.
CREATE INDEX IF NOT EXISTS jobq_jobs_job_name ON jobq_jobs (job_name);
