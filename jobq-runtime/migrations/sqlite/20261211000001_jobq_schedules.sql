-- jobq: periodic jobs kept in the database (times in µs since the epoch).
-- One row per schedule, keyed by its name (the prefix of its ticks' keys,
-- `cron:{name}:{tick}`):
-- - a schedule declared in code (`WorkerBuilder::cron`) has a row only if a
--   worker catches up (`cron_catch_up`), holding its progress alone:
--   `last_tick`, the last tick enqueued (every tick up to it is settled);
-- - a schedule kept here (`Jobq::put_schedule`) has its job, payload, cron
--   expression, time zone and enqueue options (`job_name` is set), and
--   `paused_at` while paused. Every worker reads these rows (at start, when
--   a change is announced, and every minute) and enqueues their ticks.
CREATE TABLE IF NOT EXISTS jobq_schedules (
    name       TEXT    PRIMARY KEY,
    last_tick  INTEGER,
    job_name   TEXT,
    payload    TEXT,
    schedule   TEXT,
    time_zone  TEXT,
    queue      TEXT,
    priority   INTEGER,
    paused_at  INTEGER,
    updated_at INTEGER NOT NULL
);
