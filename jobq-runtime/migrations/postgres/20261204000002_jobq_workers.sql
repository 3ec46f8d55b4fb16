-- jobq: one row per running `Worker` (a process may run several), written
-- when it starts, refreshed every presence interval (`last_seen`,
-- `expires_at`, `running`), deleted when it shuts down cleanly. A row whose
-- `expires_at` has passed is a worker that stopped refreshing (killed,
-- frozen, cut off): readers ignore it and any worker deletes it. `queues`
-- (served queues and concurrency) and `jobs` (the job kinds it can run and
-- their defaults) are JSON text, written at registration only. Times are
-- the server's now(). A handful of rows: no index but the key.
CREATE TABLE IF NOT EXISTS jobq_workers (
    id         bigint      PRIMARY KEY,
    worker_id  text        NOT NULL,
    host       text        NOT NULL,
    pid        bigint      NOT NULL,
    version    text        NOT NULL,
    queues     text        NOT NULL,
    jobs       text        NOT NULL,
    running    bigint      NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
