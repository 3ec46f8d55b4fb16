-- jobq: global concurrency limits. `jobq_limits` holds a queue's limit
-- (`Jobq::set_queue_limit`); workers read it with the pauses, once per poll
-- interval. `jobq_slots` holds one row per unit of a limit, numbered
-- 0..limit: a limited claim locks the slots no other claim holds, writes
-- each job it claims (`job_id`, `lease_token`: the attempt's fence) into a
-- free one, and commits with the claim. A slot is free when its holder no
-- longer holds its row (`processing` under that token, lease not expired),
-- so nothing hands a slot back: a settle, a cancel, the reaper or a crash
-- frees it by moving the job's row. Both tables are small: no index but
-- the key.
CREATE TABLE IF NOT EXISTS jobq_limits (
    queue       text        PRIMARY KEY,
    max_running integer     NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS jobq_slots (
    queue       text    NOT NULL,
    slot        integer NOT NULL,
    job_id      bigint,
    lease_token bigint,
    PRIMARY KEY (queue, slot)
);
