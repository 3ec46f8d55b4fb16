-- jobq: rates per concurrency key; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_key_rates (
    ckey       TEXT    NOT NULL PRIMARY KEY,
    starts     INTEGER NOT NULL,
    period_us  INTEGER NOT NULL,
    burst      INTEGER NOT NULL,
    tat_us     INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
