-- jobq: finished rows by queue and status, in the order they finished,
-- replacing `jobq_jobs_finished (finished_at)`. `Jobq::stats` counts a
-- queue's finished rows and its last hour's throughput from ranges of it;
-- prune deletes oldest first queue by queue and status (the queues found
-- with a skip scan of this same index). Rows that are not finished have no
-- entry, as before: a settle writes one entry here, as it did in the index
-- this one replaces, so the hot path writes no more index entries.
-- Created before the old one is dropped, so prune is never left without one.
CREATE INDEX IF NOT EXISTS jobq_jobs_finished_by_queue
    ON jobq_jobs (queue, status, finished_at) WHERE finished_at IS NOT NULL;
DROP INDEX IF EXISTS jobq_jobs_finished;
