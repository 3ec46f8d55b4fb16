//! Connections jobq used a moment ago, kept out of the pool for its next statement.
//!
//! sqlx 0.8 pings every connection handed back to a pool (in a spawned task,
//! to flush what a cancelled statement may have left behind) and, by default,
//! again before handing it out: two extra round trips around each one-statement
//! enqueue, claim or settle, which on a small machine cost the database as
//! much as the statement. The stash keeps connections whose last statement
//! succeeded for up to [`FRESH`] and hands them straight to jobq's next
//! operation, without touching the pool. Anything else goes back through the
//! pool and its checks: a connection whose statement failed or was cancelled
//! (dropped without [`Stashed::done`] seeing success), one left unused for
//! [`FRESH`], and every stashed one as soon as the pool has no connection
//! left to give (checked on each return and every [`TICK`]), so that nobody
//! else sharing the pool, jobq's own inspection calls included, waits on a
//! connection sitting idle in the stash. Connections taken from the pool
//! after idling are pinged first ([`super::ping_if_idle`]).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool};

/// How long a stashed connection stays out of the pool unused.
const FRESH: Duration = Duration::from_secs(1);

/// How often the stash looks for stale connections and for an exhausted pool.
const TICK: Duration = Duration::from_millis(50);

/// A pool with a stash of recently used connections in front of it.
#[derive(Debug)]
pub(crate) struct Stash<DB: Database> {
    inner: Arc<Inner<DB>>,
}

impl<DB: Database> Clone for Stash<DB> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct Inner<DB: Database> {
    pool: Pool<DB>,
    /// Oldest first; each with the moment its last statement finished.
    idle: Mutex<Vec<(PoolConnection<DB>, Instant)>>,
    /// Most connections kept: the pool's size, less one left for others.
    cap: usize,
}

impl<DB: Database> Inner<DB> {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(PoolConnection<DB>, Instant)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands back to the pool the connections unused for [`FRESH`], or all
    /// of them if the pool has none left to give.
    fn expire(&self, now: Instant) {
        let exhausted = self.pool_exhausted();
        let stale: Vec<_> = {
            let mut idle = self.idle();
            let fresh_from = if exhausted {
                idle.len()
            } else {
                idle.partition_point(|(_, at)| now.duration_since(*at) >= FRESH)
            };
            idle.drain(..fresh_from).collect()
        };
        drop(stale);
    }

    /// Every connection the pool may open is open and checked out (stashed
    /// ones included): an `acquire` now would wait.
    fn pool_exhausted(&self) -> bool {
        self.pool.num_idle() == 0 && self.pool.size() >= self.pool.options().get_max_connections()
    }
}

impl<DB: Database> Stash<DB> {
    /// A stash in front of `pool`. Inside a tokio runtime it also starts a
    /// task that returns unused connections to the pool (every [`TICK`]);
    /// the task ends with the last clone of the stash.
    pub(crate) fn new(pool: Pool<DB>) -> Self {
        let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(usize::MAX);
        let inner = Arc::new(Inner {
            pool,
            idle: Mutex::new(Vec::new()),
            cap: max.saturating_sub(1),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(expire_loop(Arc::downgrade(&inner)));
        }
        Self { inner }
    }

    /// The most recently used stashed connection, or one from the pool.
    pub(crate) async fn get(&self) -> Result<Stashed<DB>, sqlx::Error> {
        let now = Instant::now();
        let found = {
            let mut idle = self.inner.idle();
            match idle.pop() {
                Some((conn, at)) if now.duration_since(at) < FRESH => Some(conn),
                Some(stale) => {
                    // The newest is stale, so all are.
                    idle.push(stale);
                    None
                }
                None => None,
            }
        };
        let conn = match found {
            Some(conn) => conn,
            None => {
                self.inner.expire(now);
                self.inner.pool.acquire().await?
            }
        };
        Ok(Stashed {
            conn: Some(conn),
            inner: Arc::clone(&self.inner),
        })
    }
}

async fn expire_loop<DB: Database>(inner: Weak<Inner<DB>>) {
    loop {
        tokio::time::sleep(TICK).await;
        match inner.upgrade() {
            Some(inner) => inner.expire(Instant::now()),
            None => return,
        }
    }
}

/// A connection out of the stash or pool. [`done`](Self::done) with a
/// success puts it back in the stash; any other end returns it to the pool.
#[derive(Debug)]
pub(crate) struct Stashed<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    inner: Arc<Inner<DB>>,
}

impl<DB: Database> Stashed<DB> {
    /// Passes `result` through; on success the connection is stashed for
    /// jobq's next statement, on failure it goes back to the pool (which
    /// checks it, and discards it if it is broken).
    pub(crate) fn done<T, E>(mut self, result: Result<T, E>) -> Result<T, E> {
        if result.is_ok()
            && !self.inner.pool_exhausted()
            && let Some(conn) = self.conn.take()
        {
            let mut idle = self.inner.idle();
            if idle.len() < self.inner.cap {
                idle.push((conn, Instant::now()));
            } else {
                drop(idle);
                drop(conn);
            }
        }
        result
    }
}

impl<DB: Database> Deref for Stashed<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        self.conn.as_ref().expect("connection taken only by done")
    }
}

impl<DB: Database> DerefMut for Stashed<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn.as_mut().expect("connection taken only by done")
    }
}
