-- Locks the fenced rows in id order, as the settle does (see complete.sql).
WITH fenced AS (
    SELECT j.id
      FROM jobq_jobs AS j
      JOIN UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
        ON j.id = f.id AND j.lease_token = f.token
     ORDER BY j.id
       FOR UPDATE OF j
)
UPDATE jobq_jobs AS j
   SET run_at = now() + $3 * interval '1 microsecond'
  FROM fenced
 WHERE j.id = fenced.id
RETURNING j.id, j.lease_token
