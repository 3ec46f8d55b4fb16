-- jobq: each job's attempt history; see the MySQL migration of the same
-- name. jsonb, NULL until a first entry; adding a nullable column with no
-- default rewrites nothing.
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS history jsonb;
