-- jobq: the waiters of worker processes (MySQL/MariaDB have no LISTEN). A
-- worker keeps one connection in a statement that returns when one of its
-- queues has a due job, or sleeps (`SLEEP`) until the next is due; a
-- process that enqueues interrupts it with `KILL QUERY`, which needs no
-- privilege for a connection of the same user. Connection ids are a
-- server's own and start over when it restarts: a waiter is recorded with
-- its server (`node`: host and port) and that server's start (`booted`, in
-- seconds since the epoch), and a process kills only the waiters of the
-- server it is connected to, started when it saw it start. Rows are
-- refreshed every minute while their waiter lives and deleted when it
-- stops; rows not refreshed for ten minutes are deleted by the next waiter
-- that registers.
CREATE TABLE IF NOT EXISTS jobq_waiters (
    node      VARCHAR(255)   NOT NULL,
    conn      BIGINT         NOT NULL,
    booted    BIGINT         NOT NULL,
    user_name VARCHAR(255)   NOT NULL,
    queues    MEDIUMTEXT     NOT NULL,
    seen_at   DATETIME(6)    NOT NULL,
    PRIMARY KEY (node, conn)
) ENGINE = InnoDB;
