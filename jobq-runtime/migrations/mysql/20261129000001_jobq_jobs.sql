-- jobq: the jobs table (MySQL 8.0.1+ / MariaDB 10.6+).
-- One secondary index serves both the claim and the reaper: `run_at` is the
-- not-before time of a pending row and the lease deadline of a processing row.
CREATE TABLE IF NOT EXISTS jobq_jobs (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    queue           VARCHAR(128) NOT NULL,
    job_name        VARCHAR(255) NOT NULL,
    payload         LONGTEXT     NOT NULL,
    status          ENUM('pending', 'processing', 'done', 'failed', 'cancelled') NOT NULL DEFAULT 'pending',
    priority        SMALLINT     NOT NULL DEFAULT 0,
    run_at          DATETIME(6)  NOT NULL,
    attempts        INT          NOT NULL DEFAULT 0,
    max_attempts    INT          NOT NULL,
    lease_token     BIGINT       NULL,
    claimed_by      VARCHAR(255) NULL,
    claimed_at      DATETIME(6)  NULL,
    idempotency_key VARCHAR(255) NULL,
    dedupe_hits     INT          NOT NULL DEFAULT 0,
    last_error      TEXT         NULL,
    created_at      DATETIME(6)  NOT NULL,
    finished_at     DATETIME(6)  NULL,
    PRIMARY KEY (id),
    UNIQUE KEY jobq_jobs_idempotency_key (idempotency_key),
    KEY jobq_jobs_claim (queue, status, priority, run_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
