-- jobq: periodic jobs' progress (`WorkerBuilder::cron_catch_up`): per
-- schedule (named after its job), the last tick enqueued — every tick up to
-- `last_tick` is settled, none is owed. A worker that starts with a catch-up
-- window enqueues the ticks after it that passed while no worker ran. One
-- row per schedule, written once per tick by the workers that catch up.
CREATE TABLE IF NOT EXISTS jobq_schedules (
    name       VARBINARY(800) NOT NULL,
    last_tick  DATETIME(6)    NOT NULL,
    updated_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB;
