//! Databases of one test's own, dropped when the test ends.

use jobq_runtime::{Backend, Jobq};
use sqlx::{Connection, Executor};

use crate::TestDb;

/// An empty database of one test's own on the server of a [`TestDb`]
/// (MySQL/MariaDB, PostgreSQL), or a fresh SQLite file; the database is
/// dropped when this is, also when the test panics.
#[derive(Debug)]
pub struct ScratchDb {
    url: String,
    /// The server's database (the admin connection for `DROP DATABASE`)
    /// and this one's name; `None` for SQLite, whose directory goes.
    server: Option<(Backend, String, String)>,
    _file: Option<TestDb>,
}

/// `url` with its database path replaced by `name` (the query kept).
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let host_start = base.find("://").map_or(0, |i| i + 3);
    let head = match base[host_start..].find('/') {
        Some(i) => &base[..host_start + i],
        None => base,
    };
    format!("{head}/{name}{query}")
}

/// Drops the database `name` on the server of `admin_url`; reports a
/// failure on stderr (a drop that panicked would abort the test run).
pub async fn drop_database(backend: Backend, admin_url: &str, name: &str) {
    let sql = match backend {
        // PostgreSQL: a handle's listener may still be connected.
        Backend::Postgres => format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        _ => format!("DROP DATABASE IF EXISTS {name}"),
    };
    let result = match backend {
        // A test that failed holding a transaction on it: not wait forever
        // on the metadata lock (the server's default is a year).
        Backend::MySql => match sqlx::MySqlConnection::connect(admin_url).await {
            Ok(mut admin) => match admin.execute("SET SESSION lock_wait_timeout = 10").await {
                Ok(_) => admin.execute(sql.as_str()).await.map(drop),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        },
        _ => match sqlx::PgConnection::connect(admin_url).await {
            Ok(mut admin) => admin.execute(sql.as_str()).await.map(drop),
            Err(error) => Err(error),
        },
    };
    if let Err(error) = result {
        eprintln!("could not drop the scratch database {name}: {error}");
    }
}

impl TestDb {
    /// A new empty database named `{prefix}_{random}` on this server (a
    /// fresh file on SQLite), dropped with the returned value.
    pub async fn scratch(&self, prefix: &str) -> ScratchDb {
        let name = format!("{prefix}_{:08x}", rand::random::<u32>());
        let backend = self.backend();
        let create = format!("CREATE DATABASE {name}");
        match backend {
            Backend::MySql => {
                let mut admin = sqlx::MySqlConnection::connect(self.url()).await.unwrap();
                admin.execute(create.as_str()).await.unwrap();
            }
            Backend::Postgres => {
                let mut admin = sqlx::PgConnection::connect(self.url()).await.unwrap();
                admin.execute(create.as_str()).await.unwrap();
            }
            _ => {
                let file = TestDb::sqlite().unwrap();
                return ScratchDb {
                    url: file.url().to_owned(),
                    server: None,
                    _file: Some(file),
                };
            }
        }
        ScratchDb {
            url: with_database(self.url(), &name),
            server: Some((backend, self.url().to_owned(), name)),
            _file: None,
        }
    }
}

impl ScratchDb {
    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A handle of `max_connections`, not migrated.
    pub async fn jobq(&self, max_connections: u32) -> Jobq {
        Jobq::connect_with(&self.url, max_connections)
            .await
            .expect("connect")
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        let Some((backend, admin_url, name)) = self.server.take() else {
            return;
        };
        // Drop runs inside a test's runtime, which cannot be blocked on:
        // the statement runs on a thread and runtime of its own.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(drop_database(backend, &admin_url, &name));
        })
        .join();
        if dropped.is_err() {
            eprintln!("dropping a scratch database panicked");
        }
    }
}
