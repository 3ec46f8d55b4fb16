//! Each backend's constructors and pool accessors on [`Jobq`]: the one
//! place above the client where a backend is named (the backends below
//! never import the client).

#[cfg(feature = "mysql")]
use sqlx::MySqlPool;
#[cfg(feature = "postgres")]
use sqlx::PgPool;
#[cfg(feature = "sqlite")]
use sqlx::SqlitePool;

use crate::error::Result;
use crate::handle::Jobq;
#[cfg(feature = "mysql")]
use crate::store::MySqlStore;
#[cfg(feature = "postgres")]
use crate::store::PgStore;
#[cfg(feature = "sqlite")]
use crate::store::SqliteStore;
#[allow(unused_imports)]
use crate::store::{BackendStore, Store};

#[cfg(feature = "mysql")]
impl Jobq {
    /// Uses an existing MySQL/MariaDB pool — the application's own, shared
    /// with jobq — whose sessions jobq leaves as they are.
    ///
    /// jobq's transactions still run at READ COMMITTED (set per
    /// transaction). What [`connect`](Self::connect) sets on the sessions
    /// of the pool it builds for jobq alone does not apply here: jobq's
    /// single statements run at the session's isolation (`jobq doctor`
    /// warns at REPEATABLE READ), wait for row locks as long as the
    /// session's `innodb_lock_wait_timeout` says (50 s by default), and a claim cut off between its statements is not rolled back by
    /// MariaDB's `idle_transaction_timeout` but when the server notices
    /// the connection is gone.
    pub async fn from_mysql_pool(pool: MySqlPool) -> Result<Self> {
        Ok(Self::new(Store::MySql(MySqlStore::from_pool(pool).await?)))
    }

    /// A pool on this handle's MySQL/MariaDB database for the application's
    /// own statements and transactions (the transaction an
    /// [`enqueue_in`](Self::enqueue_in) joins, say); `None` on another
    /// backend.
    ///
    /// It is not the pool jobq's own statements run on. The pool
    /// [`connect`](Self::connect) builds is jobq's alone: its sessions are
    /// set up for jobq's statements — READ COMMITTED,
    /// `innodb_lock_wait_timeout = 5` and, on MariaDB,
    /// `idle_transaction_timeout = 10`, which ends any transaction that
    /// waits 10 s between two statements — and none of that may reach an
    /// application's transactions. So for a handle made with `connect` this
    /// is a second pool on the same server: the server's session defaults,
    /// as many connections as jobq's
    /// ([`ConnectOptions::max_connections`](crate::ConnectOptions::max_connections)),
    /// none opened until it is used, and with a connect list it follows
    /// jobq's pool from node to node. For a handle made with
    /// [`from_mysql_pool`](Self::from_mysql_pool) it is the pool given,
    /// which jobq shares as it is.
    pub fn mysql_pool(&self) -> Option<&MySqlPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => Some(s.app_pool()),
            _ => None,
        }
    }

    /// The pool jobq's own statements run on, with jobq's session settings
    /// (for jobq's tests; an application uses [`mysql_pool`](Self::mysql_pool)).
    #[doc(hidden)]
    pub fn jobq_mysql_pool(&self) -> Option<&MySqlPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => Some(s.pool()),
            _ => None,
        }
    }
}

#[cfg(feature = "mysql")]
impl Jobq {
    /// With a connect list (`mysql://user@node1:3306,node2:3306/app`), the
    /// `host:port` the pool opens its connections to now: the first node
    /// of the list that was ready, until it is lost. `None` for a URL of one
    /// host, a pool given by the caller, or another backend.
    pub fn current_node(&self) -> Option<String> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::MySql(s) => s.current_node(),
            _ => None,
        }
    }
}

#[cfg(feature = "postgres")]
impl Jobq {
    /// Uses an existing PostgreSQL pool.
    pub async fn from_pg_pool(pool: PgPool) -> Result<Self> {
        Ok(Self::new(Store::Postgres(PgStore::from_pool(pool).await?)))
    }

    /// The PostgreSQL pool, if this handle is on PostgreSQL.
    pub fn pg_pool(&self) -> Option<&PgPool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::Postgres(s) => Some(s.pool()),
            _ => None,
        }
    }
}

#[cfg(feature = "sqlite")]
impl Jobq {
    /// Uses an existing SQLite pool (it should have WAL and a busy timeout).
    pub async fn from_sqlite_pool(pool: SqlitePool) -> Result<Self> {
        Ok(Self::new(Store::Sqlite(
            SqliteStore::from_pool(pool).await?,
        )))
    }

    /// The SQLite pool, if this handle is on SQLite.
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        #[allow(unreachable_patterns)]
        match self.store() {
            Store::Sqlite(s) => Some(s.pool()),
            _ => None,
        }
    }
}
