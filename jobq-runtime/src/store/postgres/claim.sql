WITH picked AS (
    SELECT id, priority, run_at FROM jobq_jobs
     WHERE queue = $1 AND status = 'pending' AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE jobq_jobs AS j
       SET status = 'processing',
           attempts = j.attempts + 1,
           -- each row's own token: the claim's random base + the id
           lease_token = $3 + j.id,
           run_at = now() + $4 * interval '1 microsecond',
           claimed_by = $5,
           claimed_at = now()
     WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.job_name, j.payload, j.attempts, j.max_attempts, j.idempotency_key
), no_flush AS (
    -- This statement's transaction commits without waiting for its WAL
    -- flush: a claim lost in a server crash leaves its jobs pending, to be
    -- claimed again (at-least-once, as after a worker crash); the settle's
    -- own flush makes the claim durable along with it.
    SELECT set_config('synchronous_commit', 'off', true)
)
-- RETURNING comes in no particular order and the claim overwrote run_at:
-- the picked order's keys come along, for the caller to sort by.
SELECT c.id, c.job_name, c.payload, c.attempts, c.max_attempts, c.idempotency_key,
       p.priority, p.run_at
  FROM claimed AS c JOIN picked AS p USING (id) CROSS JOIN no_flush
