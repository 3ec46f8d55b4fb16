-- Locks the fenced rows in id order before updating them: a heartbeat
-- renewing the same rows locks them in the same order, so the two wait for
-- each other for a moment instead of deadlocking, which PostgreSQL detects
-- only after deadlock_timeout (1 s) — a second's stall of the worker.
WITH fenced AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
        ON j.id = f.id AND j.lease_token = f.token
     ORDER BY j.id
       FOR UPDATE OF j
)
UPDATE jobq_jobs AS j
   SET status = 'done', finished_at = now(), run_at = now(), lease_token = NULL
  FROM fenced
 WHERE j.id = fenced.id
