-- jobq: a job's metadata (`Enqueue::metadata`: a JSON object, at most
-- 64 KiB, `MAX_METADATA_BYTES`) and tags (`Enqueue::tags`,
-- `#[job(tags = [...])]`: a JSON array of at most 16 strings of 1 to 100
-- bytes), kept on the row and read with it (the claim hands them to the
-- handler's context). A job without either writes nothing more than before:
-- both are written, with the tags' index rows below, by the enqueue of a
-- job that has them, in the transaction that inserts it.
--
-- `jobq_job_tags` is the tags' index: one row per job and tag, read by a
-- listing's tag filter through `(tag, job_id)`. MariaDB has no index over
-- the elements of a JSON array (MySQL 8's multi-valued indexes are not in
-- MariaDB), so the index is a table, the same on every backend. Its rows go
-- with their job (the foreign key cascades the prune's deletes). Added only
-- if missing, as in 20261209000001.
SET @jobq_ddl = (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE jobq_jobs ADD COLUMN metadata MEDIUMTEXT NULL, ADD COLUMN tags TEXT NULL',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND COLUMN_NAME = 'metadata'
);
PREPARE jobq_ddl FROM @jobq_ddl;
EXECUTE jobq_ddl;
DEALLOCATE PREPARE jobq_ddl;
CREATE TABLE IF NOT EXISTS jobq_job_tags (
    job_id BIGINT       NOT NULL,
    tag    VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    PRIMARY KEY (job_id, tag),
    KEY jobq_job_tags_tag (tag, job_id),
    CONSTRAINT jobq_job_tags_job FOREIGN KEY (job_id) REFERENCES jobq_jobs (id) ON DELETE CASCADE
) ENGINE = InnoDB;
