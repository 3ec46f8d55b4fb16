-- jobq: one row per running `Worker` (a process may run several), written
-- when it starts, refreshed every presence interval (`last_seen`,
-- `expires_at`, `running`), deleted when it shuts down cleanly. A row whose
-- `expires_at` has passed is a worker that stopped refreshing (killed,
-- frozen, cut off): readers ignore it and any worker deletes it. `queues`
-- (served queues and concurrency) and `jobs` (the job kinds it can run and
-- their defaults) are JSON text, written at registration only. Times are
-- unix microseconds by the application's clock, as everywhere on SQLite.
CREATE TABLE IF NOT EXISTS jobq_workers (
    id         INTEGER NOT NULL PRIMARY KEY,
    worker_id  TEXT    NOT NULL,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT    NOT NULL,
    queues     TEXT    NOT NULL,
    jobs       TEXT    NOT NULL,
    running    INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
