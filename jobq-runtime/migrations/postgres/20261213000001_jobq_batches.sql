-- jobq: batches; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_batches (
    id     text     PRIMARY KEY,
    closed smallint NOT NULL DEFAULT 0,
    jobs   bigint   NOT NULL DEFAULT 0,
    ended  bigint   NOT NULL DEFAULT 0,
    failed bigint   NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS jobq_batch_jobs (
    job_id  bigint PRIMARY KEY,
    batch   text   NOT NULL,
    role    text   NOT NULL,
    outcome text   NOT NULL DEFAULT 'open'
);
CREATE INDEX IF NOT EXISTS jobq_batch_jobs_batch ON jobq_batch_jobs (batch, role, outcome, job_id);
CREATE INDEX IF NOT EXISTS jobq_batch_jobs_open ON jobq_batch_jobs (outcome, job_id);
