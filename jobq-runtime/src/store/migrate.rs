//! jobq's own schema migrations, tracked in `jobq_migrations`.
//!
//! Not sqlx's migrator: it records versions in `_sqlx_migrations`, the table
//! the *application's* sqlx migrations use too, and each migrator then fails
//! on the other's versions ("previously applied but missing"). jobq lives in
//! the service's own database, so it keeps its versions to itself.
//!
//! Each backend applies the pending migrations under a lock (`GET_LOCK` on
//! MySQL, an advisory transaction lock on PostgreSQL, `BEGIN IMMEDIATE` on
//! SQLite), so many processes may migrate at once: one applies, the others
//! find everything applied.

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
}

macro_rules! migrations {
    ($dir:literal: $($version:literal $name:literal),* $(,)?) => {
        &[$(Migration {
            version: $version,
            description: $name,
            sql: include_str!(concat!("../../migrations/", $dir, "/", $version, "_", $name, ".sql")),
        }),*]
    };
}

#[cfg(feature = "mysql")]
pub(crate) const MYSQL: &[Migration] = migrations!("mysql":
    20261129000001 "jobq_jobs",
    20261201000001 "jobq_jobs_bytes",
    20261201170001 "jobq_queues",
);
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &[Migration] = migrations!("sqlite":
    20261129000001 "jobq_jobs",
    20261130000001 "jobq_jobs_finished",
    20261201170001 "jobq_queues",
);
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &[Migration] = migrations!("postgres":
    20261129000001 "jobq_jobs",
    20261130000001 "jobq_jobs_finished",
    20261201170001 "jobq_queues",
    20261201170002 "jobq_jobs_finished_by_queue",
);

/// The migrations of `all` whose version is not in `applied`, in order.
pub(crate) fn pending<'a>(
    all: &'a [Migration],
    applied: &[i64],
) -> impl Iterator<Item = &'a Migration> {
    all.iter().filter(move |m| !applied.contains(&m.version))
}
