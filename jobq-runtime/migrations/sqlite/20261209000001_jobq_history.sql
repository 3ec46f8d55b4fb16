-- jobq: each job's attempt history; see the MySQL migration of the same
-- name. JSON text, NULL until a first entry (inside jobq's one migration
-- transaction).
ALTER TABLE jobq_jobs ADD COLUMN history TEXT NULL;
