-- jobq: queue names, job names and idempotency keys compare byte for byte.
-- `utf8mb4_bin` is a PAD SPACE collation: it compared 'key ' equal to 'key',
-- so a key with a trailing space was taken as a duplicate and a worker of
-- queue 'q' ran the jobs of queue 'q '. VARBINARY compares bytes, without
-- padding, on MySQL 8 and MariaDB alike (the NO PAD collations differ by
-- name between them: utf8mb4_0900_bin on MySQL 8.0.17+, utf8mb4_nopad_bin
-- on MariaDB), so one migration serves both. Lengths are in bytes now:
-- queue names are limited to 128 bytes already; keys and job names to 255
-- characters, up to 1,020 bytes of UTF-8.
-- One ALTER: it applies whole or not at all, and running it again after it
-- applied (if recording the version failed) changes nothing. It copies the
-- table once (about 1 s per 100,000 rows on a small machine).
ALTER TABLE jobq_jobs
    MODIFY queue           VARBINARY(128)  NOT NULL,
    MODIFY job_name        VARBINARY(1020) NOT NULL,
    MODIFY idempotency_key VARBINARY(1020) NULL;
