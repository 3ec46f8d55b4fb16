-- jobq: a job's metadata and tags, and the tags' index table; see the
-- MySQL migration of the same name. text, as the output (the JSON as
-- written). One index table on every backend rather than a text[] column
-- with a GIN index here: one filter, one write path, one plan to test.
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS metadata text;
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS tags text;
CREATE TABLE IF NOT EXISTS jobq_job_tags (
    job_id bigint NOT NULL REFERENCES jobq_jobs (id) ON DELETE CASCADE,
    tag    text   NOT NULL,
    PRIMARY KEY (job_id, tag)
);
CREATE INDEX IF NOT EXISTS jobq_job_tags_tag ON jobq_job_tags (tag, job_id);
