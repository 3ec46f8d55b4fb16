-- jobq: batches; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_batches (
    id     TEXT    PRIMARY KEY,
    closed INTEGER NOT NULL DEFAULT 0,
    jobs   INTEGER NOT NULL DEFAULT 0,
    ended  INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS jobq_batch_jobs (
    job_id  INTEGER PRIMARY KEY,
    batch   TEXT    NOT NULL,
    role    TEXT    NOT NULL,
    outcome TEXT    NOT NULL DEFAULT 'open'
);
CREATE INDEX IF NOT EXISTS jobq_batch_jobs_batch ON jobq_batch_jobs (batch, role, outcome, job_id);
CREATE INDEX IF NOT EXISTS jobq_batch_jobs_open ON jobq_batch_jobs (outcome, job_id);
