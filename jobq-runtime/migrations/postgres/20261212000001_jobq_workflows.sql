-- jobq: workflows; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_flow_jobs (
    job_id   bigint PRIMARY KEY,
    workflow text   NOT NULL,
    task     text   NOT NULL
);
CREATE INDEX IF NOT EXISTS jobq_flow_jobs_workflow ON jobq_flow_jobs (workflow, task);

CREATE TABLE IF NOT EXISTS jobq_deps (
    job_id     bigint   NOT NULL,
    depends_on bigint   NOT NULL,
    run_anyway smallint NOT NULL DEFAULT 0,
    outcome    text,
    PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX IF NOT EXISTS jobq_deps_job ON jobq_deps (job_id, outcome);
CREATE INDEX IF NOT EXISTS jobq_deps_open ON jobq_deps (outcome, job_id);
