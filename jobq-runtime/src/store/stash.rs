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
//!
//! A stash may follow a [`Retire`] mark (the MySQL connect list's, when the
//! pool moves to another node): connections it took from the pool before the
//! mark are not stashed again, so jobq's statements leave the old node at
//! once rather than when a connection happens to idle.
//!
//! A connection whose statement was cut short — past its deadline
//! ([`super::within`]), or its future dropped — is closed, not handed back
//! (on the server backends, see [`Stash::new`]). Handing it back would
//! have sqlx ping it first, with no time limit: on a server that stopped
//! answering that ping waits forever in a task of its own, holding one of
//! the pool's connections, and a few of those leave the pool nothing to
//! open new connections with (to a connect list's next node, say). Closing
//! drops the socket without a word to the server (which rolls back what
//! was left open when it notices) and lets the pool open a replacement.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool};

/// How long a stashed connection stays out of the pool unused.
const FRESH: Duration = Duration::from_secs(1);

/// How often the stash looks for stale connections and for an exhausted pool.
const TICK: Duration = Duration::from_millis(50);

/// A moment after which connections opened (or taken from the pool) before
/// it are retired: given back to the pool's checks, which close them.
#[derive(Debug, Default)]
pub(crate) struct Retire {
    /// Nanoseconds from [`origin`] to the mark, plus one; 0 for no mark.
    at: AtomicU64,
}

/// The instant [`Retire`] marks count from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Retire {
    /// Retires every connection opened or taken from the pool until now.
    /// (Marked by the MySQL connect list only.)
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) fn mark_now(&self) {
        let since = u64::try_from(origin().elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.at.store(since.saturating_add(1), Ordering::Relaxed);
    }

    /// Whether a connection taken from the pool at `at` is retired.
    pub(crate) fn retires(&self, at: Instant) -> bool {
        match self.at.load(Ordering::Relaxed) {
            0 => false,
            mark => {
                let at = u64::try_from(at.saturating_duration_since(origin()).as_nanos())
                    .unwrap_or(u64::MAX);
                at < mark
            }
        }
    }

    /// Whether a connection opened `age` ago is retired.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) fn retires_age(&self, age: Duration) -> bool {
        let now = Instant::now();
        self.retires(now.checked_sub(age).unwrap_or_else(origin))
    }
}

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
    idle: Mutex<Vec<(PoolConnection<DB>, Instant, Instant)>>,
    /// Most connections kept: the pool's size, less one left for others.
    cap: usize,
    /// Connections taken from the pool before its mark are not stashed.
    retire: Option<Arc<Retire>>,
    /// A connection whose statement was cut short is closed rather than
    /// given back (see the module docs).
    close_cut: bool,
}

impl<DB: Database> Inner<DB> {
    /// Each stashed connection with when its last statement finished and
    /// when it was taken from the pool.
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(PoolConnection<DB>, Instant, Instant)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a connection taken from the pool at `taken` is retired.
    fn retired(&self, taken: Instant) -> bool {
        self.retire.as_ref().is_some_and(|r| r.retires(taken))
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
                idle.partition_point(|(_, at, _)| now.duration_since(*at) >= FRESH)
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
    ///
    /// With `close_cut`, a connection whose statement was cut short is
    /// closed (see the module docs): for the server backends. Not for
    /// SQLite, whose statement runs on to its end on the connection's own
    /// thread anyway (a busy wait ends at the busy timeout) and whose
    /// in-memory database lives only as long as its one connection.
    pub(crate) fn new(pool: Pool<DB>, close_cut: bool) -> Self {
        Self::retiring(pool, None, close_cut)
    }

    /// [`new`](Self::new), following `retire`'s mark if there is one.
    pub(crate) fn retiring(pool: Pool<DB>, retire: Option<Arc<Retire>>, close_cut: bool) -> Self {
        let max = usize::try_from(pool.options().get_max_connections()).unwrap_or(usize::MAX);
        let inner = Arc::new(Inner {
            pool,
            idle: Mutex::new(Vec::new()),
            cap: max.saturating_sub(1),
            retire,
            close_cut,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(expire_loop(Arc::downgrade(&inner)));
        }
        Self { inner }
    }

    /// Runs `work` on a connection of the stash: [`get`](Self::get), then
    /// [`Stashed::done`] with its result.
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, sqlx::Error>
    where
        F: AsyncFnOnce(&mut DB::Connection) -> Result<T, sqlx::Error>,
    {
        let mut conn = self.get().await?;
        let result = work(&mut conn).await;
        conn.done(result)
    }

    /// One statement of jobq's, as the server backends run their simple
    /// writes, on a connection of the stash; how many rows it changed.
    #[cfg_attr(not(any(feature = "mysql", feature = "postgres")), allow(dead_code))]
    pub(crate) async fn execute<'q, A>(
        &self,
        query: sqlx::query::Query<'q, DB, A>,
    ) -> Result<u64, sqlx::Error>
    where
        A: sqlx::IntoArguments<'q, DB> + 'q,
        DB::QueryResult: Affected,
        for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    {
        self.run(async |conn| query.execute(conn).await.map(|r| r.affected()))
            .await
    }

    /// The one value `sql` (a statement without parameters) returns, read
    /// on a connection of the stash.
    pub(crate) async fn scalar<T>(&self, sql: &'static str) -> Result<T, sqlx::Error>
    where
        T: Send + Unpin,
        (T,): for<'r> sqlx::FromRow<'r, DB::Row>,
        for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
        for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    {
        self.run(async |conn| sqlx::query_scalar(sql).fetch_one(conn).await)
            .await
    }

    /// The most recently used stashed connection, or one from the pool.
    pub(crate) async fn get(&self) -> Result<Stashed<DB>, sqlx::Error> {
        let now = Instant::now();
        let mut retired = Vec::new();
        let found = {
            let mut idle = self.inner.idle();
            loop {
                match idle.pop() {
                    Some(entry) if self.inner.retired(entry.2) => retired.push(entry),
                    Some((conn, at, taken)) if now.duration_since(at) < FRESH => {
                        break Some((conn, taken));
                    }
                    Some(stale) => {
                        // The newest is stale, so all are.
                        idle.push(stale);
                        break None;
                    }
                    None => break None,
                }
            }
        };
        drop(retired);
        let (conn, taken) = match found {
            Some(found) => found,
            None => {
                self.inner.expire(now);
                (self.inner.pool.acquire().await?, Instant::now())
            }
        };
        Ok(Stashed {
            conn: Some(conn),
            taken,
            inner: Arc::clone(&self.inner),
            finished: false,
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
/// success puts it back in the stash, with a failure (or
/// [`give_back`](Self::give_back)) returns it to the pool; dropped without
/// either — its statement cut short — it is closed on a stash made to
/// (see [`Stash::new`]), else returned to the pool.
#[derive(Debug)]
pub(crate) struct Stashed<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    /// When it was taken from the pool.
    taken: Instant,
    inner: Arc<Inner<DB>>,
    /// `done` or `give_back` saw it: its last statement ended.
    finished: bool,
}

impl<DB: Database> Drop for Stashed<DB> {
    fn drop(&mut self) {
        if !self.finished
            && self.inner.close_cut
            && let Some(conn) = self.conn.take()
        {
            // Out of the pool's count at once (it may open another), and
            // the socket closed as the connection drops.
            drop(conn.detach());
        }
    }
}

impl<DB: Database> Stashed<DB> {
    /// Returns it to the pool, whose checks discard it if it is broken:
    /// its statements ended, but not as jobq's next one should find it.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(crate) fn give_back(mut self) {
        self.finished = true;
    }

    /// Passes `result` through; on success the connection is stashed for
    /// jobq's next statement, on failure it goes back to the pool (which
    /// checks it, and discards it if it is broken).
    pub(crate) fn done<T, E>(mut self, result: Result<T, E>) -> Result<T, E> {
        self.finished = true;
        if result.is_ok()
            && !self.inner.pool_exhausted()
            && !self.inner.retired(self.taken)
            && let Some(conn) = self.conn.take()
        {
            let mut idle = self.inner.idle();
            if idle.len() < self.inner.cap {
                idle.push((conn, Instant::now(), self.taken));
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

/// A connection taken from a pool outside any stash (the PostgreSQL
/// notifier's own, say) that is closed rather than handed back if dropped
/// before [`Closing::done`] — its statement cut short (see the module docs).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct Closing<DB: Database>(Option<PoolConnection<DB>>);

#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
impl<DB: Database> Closing<DB> {
    /// Runs `work` on a connection of `pool`, taken and given back around
    /// it; if the whole is dropped before it ends (its deadline passed),
    /// the connection is closed.
    pub(crate) async fn run<T, F>(pool: &Pool<DB>, work: F) -> Result<T, sqlx::Error>
    where
        F: AsyncFnOnce(&mut DB::Connection) -> Result<T, sqlx::Error>,
    {
        let mut conn = Self(Some(pool.acquire().await?));
        let result = match conn.0.as_mut() {
            Some(raw) => work(raw).await,
            None => unreachable!("taken only by done and drop"),
        };
        conn.done();
        result
    }

    /// Gives it back to its pool.
    fn done(mut self) {
        drop(self.0.take());
    }
}

impl<DB: Database> Drop for Closing<DB> {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(conn.detach());
        }
    }
}

/// The rows a statement changed, whatever its backend.
pub(crate) trait Affected {
    fn affected(&self) -> u64;
}

#[cfg(feature = "mysql")]
impl Affected for sqlx::mysql::MySqlQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "postgres")]
impl Affected for sqlx::postgres::PgQueryResult {
    fn affected(&self) -> u64 {
        self.rows_affected()
    }
}
