-- jobq: the jobs table (PostgreSQL 13+).
--
-- `run_at` is the not-before time of a pending row and the lease deadline of a
-- processing row. Two partial indexes hold only the rows their query looks
-- for: `jobq_jobs_claim` the pending rows in claim order (it serves the
-- claim's ORDER BY, so a claim reads and locks only the rows it returns),
-- `jobq_jobs_lease` the processing rows by deadline (the reaper). Finished
-- rows are in neither, so these stay small however much history is kept.
-- `status` must stay a literal in the claim and reaper SQL, never a bind
-- parameter, or a generic plan cannot prove the partial index applies.
--
-- `payload` is `text`, not `jsonb`: jobq stores and hands back the exact JSON
-- bytes serde wrote, and never queries inside them, so jsonb would only add a
-- parse on every insert and a re-serialization on every claim (and reorder
-- keys). Cast `payload::jsonb` when inspecting by hand.
--
-- Vacuum: every claim, heartbeat and settle changes `status` or `run_at`,
-- which the partial indexes cover, so none of these updates is HOT: each
-- leaves a dead tuple and new index entries. `fillfactor = 80` keeps room on
-- each page so the new version usually lands beside the old one; autovacuum
-- runs at 1 % dead rows instead of the default 20 %, because a busy queue
-- makes dead rows faster than a big table's default threshold is reached.
-- Delete or archive finished rows (`status IN ('done', 'failed',
-- 'cancelled')`, by `finished_at`) so the table does not grow without bound.
CREATE TABLE IF NOT EXISTS jobq_jobs (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue           text        NOT NULL,
    job_name        text        NOT NULL,
    payload         text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled')),
    priority        smallint    NOT NULL DEFAULT 0,
    run_at          timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL CHECK (max_attempts >= 1),
    lease_token     bigint,
    claimed_by      text,
    claimed_at      timestamptz,
    idempotency_key text,
    dedupe_hits     integer     NOT NULL DEFAULT 0,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);

-- UNIQUE on the keyed rows only: rows without a key (most of them) then add
-- no entry to this index at each of their non-HOT updates. `ON CONFLICT
-- (idempotency_key) WHERE idempotency_key IS NOT NULL` infers it.
CREATE UNIQUE INDEX IF NOT EXISTS jobq_jobs_idempotency_key
    ON jobq_jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS jobq_jobs_claim
    ON jobq_jobs (queue, priority, run_at, id) WHERE status = 'pending';

CREATE INDEX IF NOT EXISTS jobq_jobs_lease
    ON jobq_jobs (queue, run_at) WHERE status = 'processing';
