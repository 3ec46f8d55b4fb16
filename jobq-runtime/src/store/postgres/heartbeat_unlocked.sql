-- A heartbeat that never waits on a row lock: rows another transaction
-- holds are skipped (and so not returned).
WITH free AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
        ON j.id = f.id AND j.lease_token = f.token
       FOR UPDATE OF j SKIP LOCKED
)
UPDATE jobq_jobs AS j
   SET run_at = now() + $3 * interval '1 microsecond'
 WHERE j.id = ANY (ARRAY(SELECT id FROM free))
RETURNING j.id, j.lease_token
