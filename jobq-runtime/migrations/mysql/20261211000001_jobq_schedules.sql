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
    name       VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    last_tick  DATETIME(6)  NULL,
    job_name   VARCHAR(255) COLLATE utf8mb4_bin NULL,
    payload    MEDIUMTEXT   NULL,
    schedule   VARCHAR(255) NULL,
    time_zone  VARCHAR(64)  NULL,
    queue      VARCHAR(128) COLLATE utf8mb4_bin NULL,
    priority   SMALLINT     NULL,
    paused_at  DATETIME(6)  NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
