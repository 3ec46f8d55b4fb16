UPDATE jobq_jobs AS j
   SET run_at = now() + $3 * interval '1 microsecond'
  FROM UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
 WHERE j.id = f.id AND j.lease_token = f.token
RETURNING j.id, j.lease_token
