-- jobq: a job's metadata and tags, and the tags' index table; see the
-- MySQL migration of the same name. The foreign key cascades while
-- `PRAGMA foreign_keys` is on (sqlx's default, and jobq's connections'); a
-- pool without it leaves a pruned job's tag rows behind, which no listing
-- shows (the filter reads them joined to their jobs). A later migration
-- that rebuilds `jobq_jobs` must turn foreign keys off first, or dropping
-- the old table deletes every tag row.
ALTER TABLE jobq_jobs ADD COLUMN metadata TEXT NULL;
ALTER TABLE jobq_jobs ADD COLUMN tags TEXT NULL;
CREATE TABLE IF NOT EXISTS jobq_job_tags (
    job_id INTEGER NOT NULL REFERENCES jobq_jobs (id) ON DELETE CASCADE,
    tag    TEXT    NOT NULL,
    PRIMARY KEY (job_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobq_job_tags_tag ON jobq_job_tags (tag, job_id);
