-- jobq: workflows; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_flow_jobs (
    job_id   INTEGER PRIMARY KEY,
    workflow TEXT    NOT NULL,
    task     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS jobq_flow_jobs_workflow ON jobq_flow_jobs (workflow, task);

CREATE TABLE IF NOT EXISTS jobq_deps (
    job_id     INTEGER NOT NULL,
    depends_on INTEGER NOT NULL,
    run_anyway INTEGER NOT NULL DEFAULT 0,
    outcome    TEXT,
    PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX IF NOT EXISTS jobq_deps_job ON jobq_deps (job_id, outcome);
CREATE INDEX IF NOT EXISTS jobq_deps_open ON jobq_deps (outcome, job_id);
