-- jobq: finished rows in the order they finished, so pruning reads only the
-- rows it deletes. A claim leaves `finished_at` NULL (the entry stays put);
-- only the settle that finishes a row moves its entry.
CREATE INDEX jobq_jobs_finished ON jobq_jobs (finished_at);
