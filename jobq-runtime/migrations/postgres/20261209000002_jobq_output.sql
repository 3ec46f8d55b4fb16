-- jobq: a job's output; see the MySQL migration of the same name. text,
-- not jsonb: the JSON comes back as the handler's serializer wrote it (its
-- key order), and jsonb refuses the escaped NUL (\u0000) a string may hold.
ALTER TABLE jobq_jobs ADD COLUMN IF NOT EXISTS output text;
