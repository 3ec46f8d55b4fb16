-- jobq: rates per concurrency key; see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS jobq_key_rates (
    ckey       text        PRIMARY KEY,
    starts     integer     NOT NULL,
    period_us  bigint      NOT NULL,
    burst      integer     NOT NULL,
    tat_us     bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);
