-- jobq: indexes for the filters of `Jobq::list`, `count_where` and the bulk
-- actions by job name and by enqueue time, which otherwise read the whole
-- table. Each entry is (column, rowid): a page of one job name comes in id
-- order straight from the index, a count is a range of it. Neither column is
-- ever updated, so these are written by enqueues only (SQLite changes an
-- index only when an UPDATE changes one of its columns).
CREATE INDEX IF NOT EXISTS jobq_jobs_job_name ON jobq_jobs (job_name);
CREATE INDEX IF NOT EXISTS jobq_jobs_created ON jobq_jobs (created_at);
