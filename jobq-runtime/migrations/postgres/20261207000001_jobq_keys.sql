-- jobq: per-key concurrency; see the MySQL migration of the same name.
-- A `blocked` job is outside the claim index (partial on `pending`).
ALTER TABLE jobq_jobs DROP CONSTRAINT IF EXISTS jobq_jobs_status_check;
ALTER TABLE jobq_jobs ADD CONSTRAINT jobq_jobs_status_check
    CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled', 'blocked'));
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS concurrency_key text;
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS concurrency_limit integer;
-- `stats` counts a queue's blocked jobs from this partial index: written
-- only as jobs enter and leave `blocked`.
CREATE INDEX IF NOT EXISTS jobq_jobs_blocked ON jobq_jobs (queue, id) WHERE status = 'blocked';
CREATE TABLE IF NOT EXISTS jobq_keys (
    ckey        text    PRIMARY KEY,
    max_running integer NOT NULL
);
CREATE TABLE IF NOT EXISTS jobq_key_jobs (
    ckey   text   NOT NULL,
    job_id bigint NOT NULL,
    PRIMARY KEY (ckey, job_id)
);
