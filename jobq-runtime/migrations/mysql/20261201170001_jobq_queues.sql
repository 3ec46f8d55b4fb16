-- jobq: one row per queue that has been paused (`Jobq::pause`); `paused_at`
-- is set while it is paused and NULL once resumed. Workers read the paused
-- ones once per poll interval, so a pause holds in every process and across
-- restarts. `queue` is the same type as `jobq_jobs.queue` (bytes, no padding).
CREATE TABLE IF NOT EXISTS jobq_queues (
    queue     VARBINARY(128) NOT NULL,
    paused_at DATETIME(6)    NULL,
    PRIMARY KEY (queue)
) ENGINE = InnoDB;
