-- jobq: a job's output; see the MySQL migration of the same name.
ALTER TABLE jobq_jobs ADD COLUMN output TEXT NULL;
