-- jobq: global concurrency limits. `jobq_limits` holds a queue's limit
-- (`Jobq::set_queue_limit`); workers read it with the pauses, once per poll
-- interval. `jobq_slots` holds one row per unit of a limit, numbered
-- 0..limit: a limited claim (under the database's one write lock) writes
-- each job it claims (`job_id`, `lease_token`: the attempt's fence) into a
-- free slot. A slot is free when its holder no longer holds its row
-- (`processing` under that token, lease not expired), so nothing hands a
-- slot back: a settle, a cancel, the reaper or a crash frees it by moving
-- the job's row. Times are unix microseconds.
CREATE TABLE IF NOT EXISTS jobq_limits (
    queue       TEXT    NOT NULL PRIMARY KEY,
    max_running INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS jobq_slots (
    queue       TEXT    NOT NULL,
    slot        INTEGER NOT NULL,
    job_id      INTEGER NULL,
    lease_token INTEGER NULL,
    PRIMARY KEY (queue, slot)
);
