-- jobq: rates per concurrency key (`Jobq::set_key_rate`), e.g. per payment
-- provider or per tenant: at most `starts` starts of the key's jobs per
-- `period_us`, at most `burst` at once, counted as `jobq_rates` counts a
-- queue's (GCRA, `tat_us` its theoretical arrival time). A worker that
-- claims jobs of a key with a rate takes starts from the key's row (locked
-- for the moment it takes them) and sends the jobs the rate has no start
-- for back to `pending`, each to the start the rate gives it, its attempt
-- not counted. One row per rated key: no index but the key.
CREATE TABLE IF NOT EXISTS jobq_key_rates (
    ckey       VARBINARY(1020) NOT NULL,
    starts     INT             NOT NULL,
    period_us  BIGINT          NOT NULL,
    burst      INT             NOT NULL,
    tat_us     BIGINT          NOT NULL,
    updated_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (ckey)
) ENGINE = InnoDB;
