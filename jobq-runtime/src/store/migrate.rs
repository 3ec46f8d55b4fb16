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

/// `migrations!("mysql": 20261129000001 "jobq_jobs", …)`: the migrations
/// of `jobq-runtime/migrations/mysql/`, each file `{version}_{name}.sql`,
/// in order. Each backend lists its own, as `MIGRATIONS` in its `sql.rs`.
macro_rules! migrations {
    ($dir:literal: $($version:literal $name:literal),* $(,)?) => {
        &[$($crate::store::migrate::Migration {
            version: $version,
            description: $name,
            sql: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"), "/migrations/", $dir, "/", $version, "_", $name, ".sql"
            )),
        }),*]
    };
}

pub(crate) use migrations;

/// The migrations of `all` whose version is not in `applied`, in order.
pub(crate) fn pending<'a>(
    all: &'a [Migration],
    applied: &[i64],
) -> impl Iterator<Item = &'a Migration> {
    all.iter().filter(move |m| !applied.contains(&m.version))
}

/// What of `all` `applied` lacks, as [`Error::MigrationsPending`] names it
/// (`migration 20261204000001 (jobq_jobs_job_name)`, `migrations …`),
/// or `None` when nothing. Versions applied that `all` does not know (a
/// newer jobq migrated the database) are not this jobq's concern.
///
/// [`Error::MigrationsPending`]: crate::Error::MigrationsPending
pub(crate) fn missing(all: &[Migration], applied: &[i64]) -> Option<String> {
    let missing: Vec<String> = pending(all, applied)
        .map(|m| format!("{} ({})", m.version, m.description))
        .collect();
    match missing.as_slice() {
        [] => None,
        [one] => Some(format!("migration {one}")),
        many => Some(format!("migrations {}", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Migration] = &[
        Migration {
            version: 1,
            description: "one",
            sql: "",
        },
        Migration {
            version: 2,
            description: "two",
            sql: "",
        },
    ];

    #[test]
    fn what_is_missing_is_named_by_version_and_description() {
        assert_eq!(missing(ALL, &[1, 2]), None);
        assert_eq!(missing(ALL, &[1, 2, 3]), None, "a newer jobq's version");
        assert_eq!(missing(ALL, &[1]).as_deref(), Some("migration 2 (two)"));
        assert_eq!(
            missing(ALL, &[]).as_deref(),
            Some("migrations 1 (one), 2 (two)")
        );
    }
}
