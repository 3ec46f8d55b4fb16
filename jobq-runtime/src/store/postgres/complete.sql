UPDATE jobq_jobs AS j
   SET status = 'done', finished_at = now(), run_at = now(), lease_token = NULL
  FROM UNNEST($1::bigint[], $2::bigint[]) AS f(id, token)
 WHERE j.id = f.id AND j.lease_token = f.token
