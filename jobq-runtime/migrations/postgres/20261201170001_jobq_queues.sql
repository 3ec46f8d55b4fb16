-- jobq: one row per queue that has been paused (`Jobq::pause`); `paused_at`
-- is set while it is paused and NULL once resumed. Workers read the paused
-- ones once per poll interval, so a pause holds in every process and across
-- restarts.
CREATE TABLE IF NOT EXISTS jobq_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz
);
