//! Raw SQL on whichever backend a [`Jobq`] uses, for tests that write rows
//! jobq would never write (a payload that is not JSON), keep their own
//! tables (the chaos harness's side effects) or hold rows in a transaction
//! left open ([`Tx`], the contract suite's).
//!
//! SQL is written with `?` placeholders; they become `$1, $2, …` on PostgreSQL.

use jobq_runtime::Jobq;
use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, FromRow, MySqlPool, PgPool, Row as _, SqlitePool, Transaction};

/// One bind parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// SQL `NULL`.
    Null,
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}

/// The pool of a [`Jobq`], whatever its backend.
#[derive(Debug, Clone)]
pub enum Db {
    /// MySQL/MariaDB.
    MySql(MySqlPool),
    /// PostgreSQL.
    Postgres(PgPool),
    /// SQLite.
    Sqlite(SqlitePool),
}

/// `?` placeholders as PostgreSQL's `$n`.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut query = $query;
        for arg in $args {
            query = match arg {
                Arg::Int(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.as_str()),
                Arg::Null => query.bind(None::<i64>),
            };
        }
        query
    }};
}

impl Db {
    /// The pool `jobq` stores its jobs in.
    pub fn of(jobq: &Jobq) -> Self {
        if let Some(pool) = jobq.mysql_pool() {
            Self::MySql(pool.clone())
        } else if let Some(pool) = jobq.pg_pool() {
            Self::Postgres(pool.clone())
        } else {
            Self::Sqlite(jobq.sqlite_pool().expect("a jobq has one pool").clone())
        }
    }

    /// Runs one statement; returns the rows it affected.
    pub async fn execute(&self, sql: &str, args: &[Arg]) -> sqlx::Result<u64> {
        Ok(match self {
            Self::MySql(pool) => bind_args!(sqlx::query(sql), args)
                .execute(pool)
                .await?
                .rows_affected(),
            Self::Postgres(pool) => {
                let sql = numbered(sql);
                bind_args!(sqlx::query(&sql), args)
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            Self::Sqlite(pool) => bind_args!(sqlx::query(sql), args)
                .execute(pool)
                .await?
                .rows_affected(),
        })
    }

    /// Runs one query; returns its rows as `T` (a tuple, usually).
    pub async fn fetch_all<T>(&self, sql: &str, args: &[Arg]) -> sqlx::Result<Vec<T>>
    where
        T: for<'r> FromRow<'r, MySqlRow>
            + for<'r> FromRow<'r, PgRow>
            + for<'r> FromRow<'r, SqliteRow>
            + Send
            + Unpin,
    {
        match self {
            Self::MySql(pool) => {
                bind_args!(sqlx::query_as::<sqlx::MySql, T>(sql), args)
                    .fetch_all(pool)
                    .await
            }
            Self::Postgres(pool) => {
                let sql = numbered(sql);
                bind_args!(sqlx::query_as::<sqlx::Postgres, T>(&sql), args)
                    .fetch_all(pool)
                    .await
            }
            Self::Sqlite(pool) => {
                bind_args!(sqlx::query_as::<sqlx::Sqlite, T>(sql), args)
                    .fetch_all(pool)
                    .await
            }
        }
    }

    /// The one number a `SELECT COUNT(*) …` answers.
    pub async fn count(&self, sql: &str, args: &[Arg]) -> sqlx::Result<i64> {
        let rows: Vec<(i64,)> = self.fetch_all(sql, args).await?;
        Ok(rows.first().map_or(0, |row| row.0))
    }

    /// Which of three spellings of a statement this backend takes.
    pub fn pick<'a>(&self, mysql: &'a str, postgres: &'a str, sqlite: &'a str) -> &'a str {
        match self {
            Self::MySql(_) => mysql,
            Self::Postgres(_) => postgres,
            Self::Sqlite(_) => sqlite,
        }
    }

    /// The backend's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::MySql(_) => <sqlx::MySql as Database>::NAME,
            Self::Postgres(_) => <sqlx::Postgres as Database>::NAME,
            Self::Sqlite(_) => <sqlx::Sqlite as Database>::NAME,
        }
    }
}

impl Db {
    /// Begins a transaction of the application's own on this pool (on
    /// Galera, on the node the handle's statements run on).
    pub async fn begin(&self) -> sqlx::Result<Tx> {
        Ok(match self {
            Self::MySql(pool) => Tx::MySql(pool.begin().await?),
            Self::Postgres(pool) => Tx::Postgres(pool.begin().await?),
            Self::Sqlite(pool) => Tx::Sqlite(pool.begin().await?),
        })
    }
}

/// A transaction left open that holds rows of `jobq_jobs` the way a claim
/// in progress or a stuck write does (see [`Db::begin`]).
#[derive(Debug)]
pub enum Tx {
    /// MySQL/MariaDB.
    MySql(Transaction<'static, sqlx::MySql>),
    /// PostgreSQL.
    Postgres(Transaction<'static, sqlx::Postgres>),
    /// SQLite.
    Sqlite(Transaction<'static, sqlx::Sqlite>),
}

impl Tx {
    /// Runs the first half of the backend's own claim of up to `limit`
    /// rows of `queue`, as the store runs it, and keeps the transaction
    /// open: MySQL/MariaDB's locking `SELECT … FOR UPDATE SKIP LOCKED`,
    /// PostgreSQL's whole claim statement (its rows locked, their update
    /// uncommitted). SQLite has no row locks (a write locks the whole
    /// database, and every other write waits for it): there it only reads
    /// the rows a claim would pick, in a read transaction, which in WAL
    /// mode makes no write wait. Returns the ids it picked, ascending.
    pub async fn claim(&mut self, queue: &str, limit: u32) -> sqlx::Result<Vec<i64>> {
        use jobq_runtime::__private::sql;
        let mut ids: Vec<i64> = match self {
            Self::MySql(tx) => sqlx::query(sql::mysql::CLAIM_SELECT)
                .bind(queue)
                .bind(limit)
                .fetch_all(&mut **tx)
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect(),
            Self::Postgres(tx) => sqlx::query(sql::postgres::CLAIM)
                .bind(queue)
                .bind(i64::from(limit))
                .bind(1i64)
                .bind(30_000_000i64)
                .bind("holder")
                .fetch_all(&mut **tx)
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect(),
            Self::Sqlite(tx) => {
                sqlx::query_scalar(
                    "SELECT id FROM jobq_jobs WHERE queue = ?1 AND status = 'pending' \
                     ORDER BY priority, run_at, id LIMIT ?2",
                )
                .bind(queue)
                .bind(limit)
                .fetch_all(&mut **tx)
                .await?
            }
        };
        ids.sort_unstable();
        Ok(ids)
    }

    /// Locks rows `ids` (`SELECT … FOR UPDATE`), as a stuck settle or a
    /// caller's duplicate enqueue of a key would; on SQLite, which has no
    /// row locks, reads them (see [`claim`](Self::claim)). How many it found.
    pub async fn lock(&mut self, ids: &[i64]) -> sqlx::Result<usize> {
        let list = ids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT id FROM jobq_jobs WHERE id IN ({list}) ORDER BY id");
        let locking = format!("{sql} FOR UPDATE");
        Ok(match self {
            Self::MySql(tx) => sqlx::query(&locking).fetch_all(&mut **tx).await?.len(),
            Self::Postgres(tx) => sqlx::query(&locking).fetch_all(&mut **tx).await?.len(),
            Self::Sqlite(tx) => sqlx::query(&sql).fetch_all(&mut **tx).await?.len(),
        })
    }

    /// Locks queue `queue`'s rate row (`SELECT … FOR UPDATE`), as a
    /// rate-limited claim in progress does; on SQLite, which has no row
    /// locks, reads it (see [`claim`](Self::claim)). How many rows it found.
    pub async fn lock_rate(&mut self, queue: &str) -> sqlx::Result<usize> {
        Ok(match self {
            Self::MySql(tx) => {
                sqlx::query("SELECT queue FROM jobq_rates WHERE queue = ? FOR UPDATE")
                    .bind(queue)
                    .fetch_all(&mut **tx)
                    .await?
                    .len()
            }
            Self::Postgres(tx) => {
                sqlx::query("SELECT queue FROM jobq_rates WHERE queue = $1 FOR UPDATE")
                    .bind(queue)
                    .fetch_all(&mut **tx)
                    .await?
                    .len()
            }
            Self::Sqlite(tx) => sqlx::query("SELECT queue FROM jobq_rates WHERE queue = ?1")
                .bind(queue)
                .fetch_all(&mut **tx)
                .await?
                .len(),
        })
    }

    /// Ends the transaction, releasing what it held.
    pub async fn rollback(self) -> sqlx::Result<()> {
        match self {
            Self::MySql(tx) => tx.rollback().await,
            Self::Postgres(tx) => tx.rollback().await,
            Self::Sqlite(tx) => tx.rollback().await,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_numbered_for_postgres() {
        assert_eq!(super::numbered("SELECT ? + ?, ?"), "SELECT $1 + $2, $3");
    }
}
