-- jobq: batches (`Jobq::enqueue_batch`). `jobq_batches` has a row per
-- batch: whether it is closed to additions, how many jobs were added (an
-- add and a close write the row, so they serialize), and how many of them
-- have ended and not succeeded, counted by the transaction that records
-- each job's outcome (so whether a batch has a job open, or one that
-- failed, is read from its row, whatever its size). `jobq_batch_jobs`
-- has a row per job of a batch (`role` 'job') and per callback (`role`
-- 'finish', 'success' or 'failure'); a callback is a job stored `blocked`
-- with the batch and made `pending` (once: guarded by its status) or
-- cancelled by the release that follows the settle of a batch's job.
-- `outcome` is a job's final status once a release has recorded it
-- (`open` until then); `(outcome, job_id)` serves the sweep's look for
-- outcomes not recorded yet.
CREATE TABLE IF NOT EXISTS jobq_batches (
    id     VARCHAR(100) COLLATE utf8mb4_bin NOT NULL,
    closed SMALLINT     NOT NULL DEFAULT 0,
    jobs   BIGINT       NOT NULL DEFAULT 0,
    ended  BIGINT       NOT NULL DEFAULT 0,
    failed BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS jobq_batch_jobs (
    job_id  BIGINT       NOT NULL,
    batch   VARCHAR(100) COLLATE utf8mb4_bin NOT NULL,
    role    VARCHAR(16)  NOT NULL,
    outcome VARCHAR(16)  NOT NULL DEFAULT 'open',
    PRIMARY KEY (job_id),
    KEY jobq_batch_jobs_batch (batch, role, outcome, job_id),
    KEY jobq_batch_jobs_open (outcome, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
