//! The one list of backends: every backend jobq has, compiled in or not,
//! with what the rest of the crate must know of it. Each place that has a
//! variant, an arm or an item per backend is made from this list by a macro
//! of its own (a callback of [`list!`]):
//!
//! - `types.rs`: [`Backend`](crate::Backend), its name, feature and URL schemes;
//! - `connection.rs`: [`AnyConnection`](crate::AnyConnection);
//! - `store/mod.rs`: the `Store` enum, its dispatch, `connect` and `enqueue_in`;
//! - `pools.rs`: `Jobq::from_…_pool` and `Jobq::…_pool`, with their docs;
//! - `lib.rs`: `__private::sql` and the error of a build with no backend.
//!
//! It is the lowest layer and imports nothing: the value types below the
//! store use it as the client above it does. The names in it are resolved
//! where a callback uses them (`mysql::MySqlStore` is
//! `crate::store::mysql::MySqlStore`, `MySqlPool` is `sqlx::MySqlPool`).
//! How to add a backend: `store/mod.rs`'s module docs.

/// Calls `$callback! { (args) entries }`: `list!(callback)` with no
/// arguments (`()`), `list!(callback(a, b))` with `(a, b)`, which the
/// callback can use in what it makes. Each entry, in the order of
/// [`Backend`](crate::Backend)'s variants:
///
/// ```text
/// Variant("feature") module::Store {
///     /// The docs of its `Backend` variant.
///     name: "its human name",
///     schemes: ["scheme", …],
///     sqlx: (SqlxPool, SqlxConnection),
///     /// The docs of `Jobq::from_…_pool`.
///     from_pool: from_…_pool,
///     /// The docs of `Jobq::…_pool`.
///     pool: …_pool = store_method,
/// }
/// ```
///
/// - `Variant`: its variant in `Backend`, `Store` and `AnyConnection`;
/// - `"feature"`: its Cargo feature, the one that enables its sqlx driver;
/// - `module::Store`: its folder under `store/` and the store there that
///   implements `BackendStore`;
/// - `name` and `schemes`: [`Backend::name`](crate::Backend::name) and the
///   URL schemes that name it (`scheme:…`);
/// - `sqlx`: the sqlx pool its `from_…_pool` takes and the connection
///   `enqueue_in` writes through;
/// - `from_pool` and `pool`: its constructor and accessor on `Jobq`; the
///   accessor returns the store's `store_method()`.
///
/// A callback that needs only the first line of each entry takes the rest
/// as one token tree:
/// `(() $($variant:ident($feature:literal) $module:ident::$store:ident $rest:tt)*)`.
macro_rules! list {
    ($callback:ident $(($($args:tt)*))?) => {
        $callback! {
            ($($($args)*)?)

            MySql("mysql") mysql::MySqlStore {
                /// MySQL 8.0.1+ or MariaDB 10.6+.
                name: "MySQL/MariaDB",
                schemes: ["mysql", "mariadb"],
                sqlx: (MySqlPool, MySqlConnection),
                /// Uses an existing MySQL/MariaDB pool — the application's own, shared
                /// with jobq — whose sessions jobq leaves as they are.
                ///
                /// jobq's transactions still run at READ COMMITTED (set per
                /// transaction). What [`connect`](Self::connect) sets on the sessions
                /// of the pool it builds for jobq alone does not apply here: jobq's
                /// single statements run at the session's isolation (`jobq doctor`
                /// warns at REPEATABLE READ), wait for row locks as long as the
                /// session's `innodb_lock_wait_timeout` says (50 s by default), and
                /// a claim cut off between its statements is not rolled back by
                /// MariaDB's `idle_transaction_timeout` but when the server notices
                /// the connection is gone.
                from_pool: from_mysql_pool,
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
                pool: mysql_pool = app_pool,
            }

            Sqlite("sqlite") sqlite::SqliteStore {
                /// SQLite 3.35+ (a local file or memory).
                name: "SQLite",
                schemes: ["sqlite"],
                sqlx: (SqlitePool, SqliteConnection),
                /// Uses an existing SQLite pool (it should have WAL and a busy timeout).
                from_pool: from_sqlite_pool,
                /// The SQLite pool, if this handle is on SQLite.
                pool: sqlite_pool = pool,
            }

            Postgres("postgres") postgres::PgStore {
                /// PostgreSQL 13+.
                name: "PostgreSQL",
                schemes: ["postgres", "postgresql"],
                sqlx: (PgPool, PgConnection),
                /// Uses an existing PostgreSQL pool.
                from_pool: from_pg_pool,
                /// The PostgreSQL pool, if this handle is on PostgreSQL.
                pool: pg_pool = pool,
            }
        }
    };
}

pub(crate) use list;
