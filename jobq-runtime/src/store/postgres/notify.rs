//! [`PgBell`]: the NOTIFYs for enqueues on jobq's own pool, sent after
//! their commits by a [`Ringer`](crate::store::ring::Ringer), coalesced.
//!
//! A `pg_notify` inside the enqueue's own statement would be simpler, but
//! PostgreSQL serializes the commits of notifying transactions (a
//! database-wide lock held until the commit record is flushed), so
//! concurrent enqueues could no longer share a WAL flush: 8 concurrent
//! enqueuers did 513 jobs/s that way, against 2,175 for plain INSERTs. Here
//! the INSERTs commit freely and only the bell takes that lock.
//! (`enqueue_in` still notifies inside the caller's transaction, so its
//! rows are never watched for.)
//!
//! Each NOTIFY is a transaction of its own on the server (it takes a
//! transaction id and the notification queue's lock): with one per 8 ms a
//! single task's stream of single-row enqueues ran about 10 % slower than
//! with none; hence the longer pauses of [`PgBell`]'s rounds (2 ms,
//! doubling to 32 ms during a stream). It sends on a connection of its own
//! with `synchronous_commit = off`: a NOTIFY is not durable anyway, so its
//! commit need not wait for a WAL flush (and holds that lock for
//! microseconds, not a disk write).

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{Executor, PgPool};

use super::sql::{NOTIFIER_SESSION, NOTIFY};
use crate::store::ring::Bell;
use crate::store::stash::Closing;

/// NOTIFYs on a connection of its own (see the module docs).
#[derive(Debug)]
pub(super) struct PgBell {
    /// The store's pool: the options its connection is made with.
    store: PgPool,
    /// One connection, opened on first use with the store pool's options.
    pool: OnceLock<PgPool>,
}

impl PgBell {
    pub(super) fn new(store: PgPool) -> Self {
        Self {
            store,
            pool: OnceLock::new(),
        }
    }

    fn pool(&self) -> &PgPool {
        self.pool.get_or_init(|| {
            PgPoolOptions::new()
                .max_connections(1)
                .test_before_acquire(false)
                .before_acquire(crate::store::policy::ping_if_idle::<sqlx::Postgres>)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        conn.execute(NOTIFIER_SESSION).await?;
                        Ok(())
                    })
                })
                .connect_lazy_with((*self.store.connect_options()).clone())
        })
    }
}

impl Bell for PgBell {
    const PAUSE: Duration = Duration::from_millis(2);
    const MAX_PAUSE: Duration = Duration::from_millis(32);

    /// Never asked: an `enqueue_in` notifies in the caller's transaction.
    async fn visible(&mut self, _ids: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
        Ok(Vec::new())
    }

    /// One NOTIFY per queue, in one statement; a connection the round's
    /// deadline cuts off is closed, not handed back.
    async fn ring(&mut self, queues: &BTreeSet<String>) -> Result<(), sqlx::Error> {
        let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
        Closing::run(self.pool(), async |conn| {
            sqlx::query(NOTIFY).bind(&queues).execute(conn).await
        })
        .await?;
        Ok(())
    }

    fn reset(&mut self) {}
}
