-- jobq: periodic jobs' progress (`WorkerBuilder::cron_catch_up`): per
-- schedule (named after its job), the last tick enqueued — every tick up to
-- `last_tick` (µs since the epoch) is settled, none is owed. A worker that
-- starts with a catch-up window enqueues the ticks after it that passed
-- while no worker ran. One row per schedule.
CREATE TABLE IF NOT EXISTS jobq_schedules (
    name       TEXT    PRIMARY KEY,
    last_tick  INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
