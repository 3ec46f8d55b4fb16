-- jobq: one row per running `Worker` (a process may run several), written
-- when it starts, refreshed every presence interval (`last_seen`,
-- `expires_at`, `running`), deleted when it shuts down cleanly. A row whose
-- `expires_at` has passed is a worker that stopped refreshing (killed,
-- frozen, cut off): readers ignore it and any worker deletes it. `queues`
-- (served queues and concurrency) and `jobs` (the job kinds it can run and
-- their defaults) are JSON, written at registration only. Times are the
-- server's UTC_TIMESTAMP(6). A handful of rows: no index but the key.
CREATE TABLE IF NOT EXISTS jobq_workers (
    id         BIGINT       NOT NULL,
    worker_id  VARCHAR(255) NOT NULL,
    host       VARCHAR(255) NOT NULL,
    pid        BIGINT       NOT NULL,
    version    VARCHAR(64)  NOT NULL,
    queues     MEDIUMTEXT   NOT NULL,
    jobs       MEDIUMTEXT   NOT NULL,
    running    BIGINT       NOT NULL,
    started_at DATETIME(6)  NOT NULL,
    last_seen  DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
