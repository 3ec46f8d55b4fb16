-- jobq: periodic jobs kept in the database. One row per schedule, keyed by
-- its name (the prefix of its ticks' keys, `cron:{name}:{tick}`):
-- - a schedule declared in code (`WorkerBuilder::cron`) has a row only if a
--   worker catches up (`cron_catch_up`), holding its progress alone:
--   `last_tick`, the last tick enqueued (every tick up to it is settled);
-- - a schedule kept here (`Jobq::put_schedule`) has its job, payload, cron
--   expression, time zone and enqueue options (`job_name` is set), and
--   `paused_at` while paused. Every worker reads these rows (at start, when
--   a change is announced, and every minute) and enqueues their ticks.
CREATE TABLE IF NOT EXISTS jobq_schedules (
    name       text        PRIMARY KEY,
    last_tick  timestamptz,
    job_name   text,
    payload    text,
    schedule   text,
    time_zone  text,
    queue      text,
    priority   smallint,
    paused_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
