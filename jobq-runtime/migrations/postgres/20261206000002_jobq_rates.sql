-- jobq: queue rate limits (GCRA). `jobq_rates` holds a queue's rate
-- (`Jobq::set_queue_rate`): at most `starts` job starts per `period_us`
-- microseconds, at most `burst` of them at once after an idle spell. `tat_us`
-- is the rate's theoretical arrival time in microseconds since the Unix
-- epoch of the database's clock (the application's on SQLite): the starts
-- already granted are paid for up to there, one emission interval
-- (period / starts) each. A claim of a rate-limited queue locks the row
-- without waiting (another claim holding it takes nothing), reads how many
-- starts the rate allows now (`policy::Gcra`), claims at most that many and
-- moves `tat_us` on by what it claimed, in its own transaction: a claim that
-- fails or rolls back spends nothing. One row per rate-limited queue: no
-- index but the key.
CREATE TABLE IF NOT EXISTS jobq_rates (
    queue      text        PRIMARY KEY,
    starts     integer     NOT NULL,
    period_us  bigint      NOT NULL,
    burst      integer     NOT NULL,
    tat_us     bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);
