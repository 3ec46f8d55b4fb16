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

/// A URL's database, and the URL with another (as `TestJobq::isolated` names
/// its databases).
pub use jobq_runtime::testing::{database_of, with_database};

/// The name of a database of a test's own on the server of `url`:
/// `{url's database}_{name}`. `scripts/test.sh` runs the tests as a user
/// with privileges only on the databases whose names start with the run's
/// database (`jobq_run_<time>_<pid>`), as an application's user has on its
/// own; a test makes and drops databases under that name.
pub fn scoped(url: &str, name: &str) -> String {
    format!("{}_{name}", database_of(url))
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
    /// A new empty database named `{database}_{prefix}_{random}` on this
    /// server (see [`scoped`]; a fresh file on SQLite), dropped with the
    /// returned value.
    pub async fn scratch(&self, prefix: &str) -> ScratchDb {
        let name = scoped(
            self.url(),
            &format!("{prefix}_{:08x}", rand::random::<u32>()),
        );
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

/// The URL of `url`'s server as an account that may do more than the
/// tests' own user (create users, read other sessions' transactions), on
/// `url`'s database: `JOBQ_MYSQL_ADMIN_URL` (`scripts/test.sh` sets it to
/// the server's own account, which it runs the tests without) with the
/// database of `url`, or `url` itself when unset (the tests' user is then
/// the server's own account). For the few tests that need it, and say so.
pub fn mysql_admin_url(url: &str) -> String {
    match std::env::var("JOBQ_MYSQL_ADMIN_URL") {
        Ok(admin) if !admin.is_empty() => with_database(&admin, database_of(url)),
        _ => url.to_owned(),
    }
}

/// A MySQL/MariaDB user of one test's own with every privilege on one
/// database and none beyond (an application's own user), made through
/// [`mysql_admin_url`]; dropped when this is, also when the test panics.
#[derive(Debug)]
pub struct ScratchUser {
    url: String,
    admin_url: String,
    user: String,
}

impl ScratchUser {
    /// A new user `{prefix}_{random}`@`%` with a random password and every
    /// privilege on the database of `url` only.
    pub async fn on_database_of(url: &str, prefix: &str) -> Self {
        let admin_url = mysql_admin_url(url);
        let user = format!("{prefix}_{:08x}", rand::random::<u32>());
        let password = format!("{:032x}", rand::random::<u128>());
        // `_` is a wildcard in a database grant.
        let database = database_of(url).replace('_', "\\_");
        let mut admin = sqlx::MySqlConnection::connect(&admin_url).await.unwrap();
        admin
            .execute(
                format!(
                    "CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'; \
                     GRANT ALL PRIVILEGES ON `{database}`.* TO '{user}'@'%'"
                )
                .as_str(),
            )
            .await
            .unwrap();
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let host_db = rest.rsplit_once('@').map_or(rest, |(_, host_db)| host_db);
        Self {
            url: format!("{scheme}://{user}:{password}@{host_db}"),
            admin_url,
            user,
        }
    }

    /// The URL of the database as this user.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The user's name.
    pub fn name(&self) -> &str {
        &self.user
    }
}

impl Drop for ScratchUser {
    fn drop(&mut self) {
        let (admin_url, user) = (self.admin_url.clone(), self.user.clone());
        // As ScratchDb's drop: a thread and runtime of its own.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(async {
                    let sql = format!("DROP USER IF EXISTS '{user}'@'%'");
                    let result = match sqlx::MySqlConnection::connect(&admin_url).await {
                        Ok(mut admin) => admin.execute(sql.as_str()).await.map(drop),
                        Err(error) => Err(error),
                    };
                    if let Err(error) = result {
                        eprintln!("could not drop the scratch user {user}: {error}");
                    }
                });
        })
        .join();
        if dropped.is_err() {
            eprintln!("dropping a scratch user panicked");
        }
    }
}
