-- jobq: a job's checkpoint and progress; see the MySQL migration of the
-- same name. text, as the output (the JSON as written).
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS checkpoint text;
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS progress text;
