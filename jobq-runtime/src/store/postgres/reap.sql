-- An orphan keeps its place in line: run_at goes back to when it was
-- enqueued, not behind a backlog of jobs enqueued since. A failed row's
-- run_at is when it failed, as for every finished row.
WITH expired AS (
    SELECT id FROM jobq_jobs
     WHERE queue = $1 AND status = 'processing' AND run_at < now()
     ORDER BY run_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE jobq_jobs AS j
   SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
       finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
       last_error = 'lease expired during attempt ' || j.attempts || ': worker '
           || COALESCE(j.claimed_by, '?') || ' stopped renewing it (crashed, killed or stalled)',
       run_at = CASE WHEN j.attempts >= j.max_attempts THEN now() ELSE j.created_at END,
       lease_token = NULL
 WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
