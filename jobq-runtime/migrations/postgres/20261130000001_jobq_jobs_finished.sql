-- jobq: finished rows in the order they finished, so pruning reads only the
-- rows it deletes. Rows that are not finished have no entry.
CREATE INDEX IF NOT EXISTS jobq_jobs_finished
    ON jobq_jobs (finished_at) WHERE finished_at IS NOT NULL;
