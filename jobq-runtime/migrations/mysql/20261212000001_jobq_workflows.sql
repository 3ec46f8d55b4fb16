-- jobq: workflows (`Jobq::enqueue_workflow`). `jobq_flow_jobs` names each
-- job of a workflow (its workflow and task name); `jobq_deps` has one row
-- per dependency: `job_id` runs only once `depends_on` succeeded (or, with
-- `run_anyway`, finished however). A job with dependencies is stored
-- `blocked` and made `pending` by the release that follows the settle of
-- its last dependency; `outcome` is the dependency's final status once a
-- release has seen it (NULL while it may still run), so whether a
-- dependent is ready is one index lookup however many dependencies it has
-- (by either index: `(job_id, outcome)` or `(outcome, job_id)`, which the
-- sweep reads for the outcomes not recorded yet).
CREATE TABLE IF NOT EXISTS jobq_flow_jobs (
    job_id   BIGINT       NOT NULL,
    workflow VARCHAR(100) COLLATE utf8mb4_bin NOT NULL,
    task     VARCHAR(100) COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (job_id),
    KEY jobq_flow_jobs_workflow (workflow, task)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS jobq_deps (
    job_id     BIGINT      NOT NULL,
    depends_on BIGINT      NOT NULL,
    run_anyway SMALLINT    NOT NULL DEFAULT 0,
    outcome    VARCHAR(16) NULL,
    PRIMARY KEY (depends_on, job_id),
    KEY jobq_deps_job (job_id, outcome),
    KEY jobq_deps_open (outcome, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
