//! Raw SQL on whichever backend a [`Jobq`] uses, for tests that write rows
//! jobq would never write (a payload that is not JSON) or keep their own
//! tables (the chaos harness's side effects).
//!
//! SQL is written with `?` placeholders; they become `$1, $2, …` on PostgreSQL.

use jobq_runtime::Jobq;
use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, FromRow, MySqlPool, PgPool, SqlitePool};

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

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_numbered_for_postgres() {
        assert_eq!(super::numbered("SELECT ? + ?, ?"), "SELECT $1 + $2, $3");
    }
}
