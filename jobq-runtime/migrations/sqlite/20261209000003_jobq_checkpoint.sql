-- jobq: a job's checkpoint and progress; see the MySQL migration of the
-- same name.
ALTER TABLE jobq_jobs ADD COLUMN checkpoint TEXT NULL;
ALTER TABLE jobq_jobs ADD COLUMN progress TEXT NULL;
