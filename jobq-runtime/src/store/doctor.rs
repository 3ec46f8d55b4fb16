//! The plumbing every backend's `doctor.rs` shares: check names, the
//! verdicts that do not depend on a dialect (versions, migrations, clock
//! skew, query plans), and running one check without letting its error end
//! the report.
//!
//! Each backend's [`BackendStore::doctor`](super::BackendStore::doctor)
//! reads what its server reports (SQL in its `sql.rs`) and turns it into
//! [`Check`]s with these helpers; what a finding *means* for that backend
//! stays in its folder.

// Some checks, names and clock helpers serve some backends only.
#![cfg_attr(
    not(all(feature = "mysql", feature = "postgres", feature = "sqlite")),
    allow(dead_code)
)]

use std::future::Future;

use chrono::{DateTime, TimeDelta, Utc};

use super::migrate::Migration;
use super::stash::Stash;
use crate::error::Result;
use crate::ops::{Check, CheckStatus};

/// The check names, stable for scripts (`jobq doctor --json`).
pub(crate) mod names {
    /// Server kind and version, and what of it jobq uses.
    pub(crate) const SERVER_VERSION: &str = "server_version";
    /// The isolation level jobq's statements and transactions run at.
    pub(crate) const ISOLATION: &str = "isolation";
    /// `jobq_jobs`'s storage engine (MySQL/MariaDB).
    pub(crate) const STORAGE_ENGINE: &str = "storage_engine";
    /// The binary log's format (MySQL/MariaDB).
    pub(crate) const BINLOG_FORMAT: &str = "binlog_format";
    /// The journal mode (SQLite).
    pub(crate) const JOURNAL_MODE: &str = "journal_mode";
    /// Migrations applied against those this build embeds.
    pub(crate) const MIGRATIONS: &str = "migrations";
    /// This host's clock against the database's.
    pub(crate) const CLOCK_SKEW: &str = "clock_skew";
    /// Transactions waiting on row locks of `jobq_jobs` now (MySQL/MariaDB).
    pub(crate) const LOCK_WAITS: &str = "lock_waits";
    /// Whether an enqueue here wakes the workers waiting in other processes
    /// (MySQL/MariaDB: `KILL QUERY` of their waiters).
    pub(crate) const WAKEUPS: &str = "wakeups";
    /// A Galera node: the cluster's status and size, and this node's state.
    pub(crate) const GALERA_CLUSTER: &str = "galera_cluster";
    /// A Galera node's default `wsrep_sync_wait` (jobq's reads set their own).
    pub(crate) const GALERA_SYNC_WAIT: &str = "galera_sync_wait";
    /// The workers' lease against Galera's `evs.suspect_timeout`.
    pub(crate) const GALERA_LEASE: &str = "galera_lease";
}

impl Check {
    /// A check that passed.
    pub(crate) fn ok(name: &str, found: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Ok, found.into(), None)
    }

    /// A check that works, but is worth a look.
    pub(crate) fn warn(name: &str, found: impl Into<String>, advice: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Warn, found.into(), Some(advice.into()))
    }

    /// A check jobq will not work right with.
    pub(crate) fn fail(name: &str, found: impl Into<String>, advice: impl Into<String>) -> Self {
        Self::new(name, CheckStatus::Fail, found.into(), Some(advice.into()))
    }

    fn new(name: &str, status: CheckStatus, found: String, advice: Option<String>) -> Self {
        Self {
            name: name.to_owned(),
            status,
            found,
            advice,
        }
    }
}

/// Runs one check within `deadline` (the statement deadline: a check reads
/// a few facts); an error reading what it needs (a missing table, a
/// privilege the user lacks, no answer in time) makes it a `fail` saying
/// so, and the report goes on with the next check.
pub(crate) async fn guarded<F>(name: &str, deadline: std::time::Duration, check: F) -> Check
where
    F: Future<Output = Result<Check>>,
{
    let check = async {
        match tokio::time::timeout(deadline, check).await {
            Ok(result) => result,
            Err(_elapsed) => Err(crate::Error::StatementTimeout {
                statement: crate::metrics::statement::DOCTOR,
                timeout: deadline,
            }),
        }
    };
    match check.await {
        Ok(check) => check,
        Err(error) => Check::fail(
            name,
            format!("could not check: {}", jobq_core::error_chain(&error)),
            "fix what the error says (run `jobq migrate` if jobq_jobs or jobq_migrations is missing; grant the privilege if one is named)",
        ),
    }
}

/// The leading `major.minor.patch` of a version string (`10.11.19-MariaDB…`,
/// `15.4 (Debian …)`, `3.46.0`); missing parts are 0.
pub(crate) fn parse_version(version: &str) -> Option<(u32, u32, u32)> {
    let head: String = version
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = head.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next().flatten()?;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// What a server must be for jobq, for [`version_check`].
pub(crate) struct VersionNeeds {
    /// The product, as shown (`MariaDB`, `PostgreSQL`, …).
    pub(crate) product: &'static str,
    /// The oldest version jobq supports.
    pub(crate) min: (u32, u32, u32),
    /// What jobq uses that this version brings.
    pub(crate) uses: &'static str,
}

/// `ok` when `version` is at least `needs.min`, else `fail`.
pub(crate) fn version_check(version: &str, needs: &VersionNeeds) -> Check {
    let (major, minor, patch) = needs.min;
    let min = format!("{major}.{minor}.{patch}");
    match parse_version(version) {
        Some(found) if found >= needs.min => Check::ok(
            names::SERVER_VERSION,
            format!("{} {version}: has {}", needs.product, needs.uses),
        ),
        Some(_) => Check::fail(
            names::SERVER_VERSION,
            format!(
                "{} {version} is older than {min}, which brings {}",
                needs.product, needs.uses
            ),
            format!("upgrade to {} {min} or newer", needs.product),
        ),
        None => Check::warn(
            names::SERVER_VERSION,
            format!(
                "{} reports version `{version}`, which jobq cannot read",
                needs.product
            ),
            format!("make sure it is {} {min} or newer", needs.product),
        ),
    }
}

/// The migrations check ([`guarded`] within `deadline`) on one of jobq's
/// connections: whether `jobq_migrations` exists (`table`, a count of the
/// tables of that name jobq's session sees), then the versions it records
/// (`applied`), against the `embedded` migrations ([`migrations_check`]).
/// Each backend gives only its two statements.
pub(crate) async fn migrations<DB>(
    conns: &Stash<DB>,
    deadline: std::time::Duration,
    [table, applied]: [&'static str; 2],
    embedded: &[Migration],
) -> Check
where
    DB: sqlx::Database,
    (i64,): for<'r> sqlx::FromRow<'r, DB::Row>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
{
    let check = async {
        let exists: i64 = conns.scalar(table).await?;
        let applied: Option<Vec<i64>> = if exists > 0 {
            Some(
                conns
                    .run(async |conn| sqlx::query_scalar(applied).fetch_all(conn).await)
                    .await?,
            )
        } else {
            None
        };
        Ok(migrations_check(embedded, applied.as_deref()))
    };
    guarded(names::MIGRATIONS, deadline, check).await
}

/// Applied migrations (`None`: no `jobq_migrations` table) against the
/// embedded ones: behind is a `fail` (jobq's SQL needs the schema it was
/// built for), ahead a `warn` (a newer jobq migrated this database).
pub(crate) fn migrations_check(embedded: &[Migration], applied: Option<&[i64]>) -> Check {
    let name = names::MIGRATIONS;
    let Some(applied) = applied else {
        return Check::fail(
            name,
            format!(
                "not migrated: no jobq_migrations table (this jobq embeds {} migrations)",
                embedded.len()
            ),
            "run `jobq migrate` (or Jobq::migrate) against this database",
        );
    };
    let missing: Vec<String> = super::migrate::pending(embedded, applied)
        .map(|m| format!("{}_{}", m.version, m.description))
        .collect();
    let unknown: Vec<String> = applied
        .iter()
        .filter(|v| !embedded.iter().any(|m| m.version == **v))
        .map(i64::to_string)
        .collect();
    if !missing.is_empty() {
        Check::fail(
            name,
            format!(
                "{} of {} migrations applied; missing {}",
                embedded.len() - missing.len(),
                embedded.len(),
                missing.join(", ")
            ),
            "run `jobq migrate` (or Jobq::migrate) against this database",
        )
    } else if !unknown.is_empty() {
        Check::warn(
            name,
            format!(
                "all {} migrations applied, and {} this jobq does not know: {}",
                embedded.len(),
                unknown.len(),
                unknown.join(", ")
            ),
            "a newer jobq migrated this database: upgrade this program's jobq to match",
        )
    } else {
        Check::ok(name, format!("all {} migrations applied", embedded.len()))
    }
}

/// Skew above this is worth a look.
const SKEW_WARN: TimeDelta = TimeDelta::seconds(1);
/// Skew above this makes jobs scheduled for a time run visibly early or late.
const SKEW_FAIL: TimeDelta = TimeDelta::seconds(60);

/// What a doctor run is told besides what it reads from the server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DoctorOptions {
    /// This host's clock.
    pub(crate) clock: HostClock,
    /// The workers' lease, judged against how long the database can stall
    /// commits (Galera's `evs.suspect_timeout`).
    pub(crate) lease: std::time::Duration,
}

impl Default for DoctorOptions {
    /// The system clock, and the workers' default lease (30 s).
    fn default() -> Self {
        Self {
            clock: HostClock::default(),
            lease: crate::options::DEFAULT_LEASE,
        }
    }
}

/// This host's clock, as the doctor reads it: the system clock, plus an
/// offset tests set to simulate a skewed host
/// (`jobq_runtime::__private::doctor_with_host_clock_offset`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HostClock {
    pub(crate) offset: TimeDelta,
}

impl HostClock {
    /// Now, by this host.
    pub(crate) fn now(self) -> DateTime<Utc> {
        Utc::now() + self.offset
    }
}

/// The database clock read at `db`, between `before` and `after` by this
/// host's clock. Leases and due times are the database's clock, so skew
/// moves only what the application times itself: `RunAt::At` instants and
/// cron ticks.
pub(crate) fn clock_check(db: DateTime<Utc>, before: DateTime<Utc>, after: DateTime<Utc>) -> Check {
    let name = names::CLOCK_SKEW;
    let midpoint = before + (after - before) / 2;
    let skew = db - midpoint;
    let margin = (after - before) / 2;
    let secs = |d: TimeDelta| d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
    let direction = if skew >= TimeDelta::zero() {
        "ahead of"
    } else {
        "behind"
    };
    let found = format!(
        "database clock {:.3} s {direction} this host's (± {:.3} s)",
        secs(skew.abs()),
        secs(margin)
    );
    let beyond = skew.abs() - margin;
    if beyond > SKEW_FAIL {
        Check::fail(
            name,
            found,
            "sync both clocks with NTP: jobs enqueued for a time (Enqueue::run_at, cron ticks) run that much early or late",
        )
    } else if beyond > SKEW_WARN {
        Check::warn(
            name,
            found,
            "sync both clocks with NTP: jobs enqueued for a time run slightly early or late",
        )
    } else {
        Check::ok(name, found)
    }
}

/// What the plan of one of jobq's statements must show.
pub(crate) struct PlanRule {
    /// The check's name (`plan_claim`, …).
    pub(crate) name: &'static str,
    /// The statement, as the report names it.
    pub(crate) statement: &'static str,
    /// The plan must contain one of these (the index that serves it).
    pub(crate) needs_any: &'static [&'static str],
    /// The plan must contain none of these (a sort, a full scan).
    pub(crate) forbids: &'static [&'static str],
    /// What to do when it does not.
    pub(crate) advice: &'static str,
}

/// `ok` when `plan` (its lines as the backend reports them) shows what
/// `rule` needs and nothing it forbids. What the check found quotes the
/// lines that decided it: the serving line when it passes; when it fails,
/// every line naming a needle, a scan or a sort.
pub(crate) fn plan_check(rule: &PlanRule, plan: &str) -> Check {
    let lines: Vec<&str> = plan
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let has = |line: &str, needles: &[&str]| needles.iter().any(|n| line.contains(n));
    let served = lines.iter().any(|l| has(l, rule.needs_any));
    let bad: Vec<&str> = rule
        .forbids
        .iter()
        .copied()
        .filter(|needle| plan.contains(needle))
        .collect();
    if served && bad.is_empty() {
        let quoted: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| has(l, rule.needs_any))
            .collect();
        return Check::ok(
            rule.name,
            format!("{}: {}", rule.statement, quoted.join(" | ")),
        );
    }
    let quoted: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            has(l, rule.needs_any) || has(l, rule.forbids) || has(l, &["Scan", "SCAN", "type="])
        })
        .collect();
    let why = if served {
        format!("has {}", bad.join(", "))
    } else {
        format!("is not served by {}", rule.needs_any[0])
    };
    Check::fail(
        rule.name,
        format!("{} {why}: {}", rule.statement, quoted.join(" | ")),
        rule.advice,
    )
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};

    use super::*;

    #[test]
    fn versions_are_read_from_what_servers_report() {
        assert_eq!(
            parse_version("10.11.19-MariaDB-0+deb12u1"),
            Some((10, 11, 19))
        );
        assert_eq!(parse_version("15.4 (Debian 15.4-1)"), Some((15, 4, 0)));
        assert_eq!(parse_version("8.0.36"), Some((8, 0, 36)));
        assert_eq!(parse_version("beta"), None);
    }

    #[test]
    fn an_old_server_fails_the_version_check() {
        let needs = VersionNeeds {
            product: "MariaDB",
            min: (10, 6, 0),
            uses: "SKIP LOCKED",
        };
        assert_eq!(
            version_check("10.5.9-MariaDB", &needs).status,
            CheckStatus::Fail
        );
        assert_eq!(
            version_check("10.6.0-MariaDB", &needs).status,
            CheckStatus::Ok
        );
    }

    #[test]
    fn skew_beyond_the_read_margin_warns_then_fails() {
        let at = Utc::now();
        let around = |skew: TimeDelta| clock_check(at + skew, at, at).status;
        assert_eq!(around(TimeDelta::milliseconds(20)), CheckStatus::Ok);
        assert_eq!(around(TimeDelta::seconds(-5)), CheckStatus::Warn);
        assert_eq!(around(TimeDelta::hours(1)), CheckStatus::Fail);
        // A slow read widens the margin instead of reading as skew.
        let slow = clock_check(at + TimeDelta::seconds(2), at, at + TimeDelta::seconds(4));
        assert_eq!(slow.status, CheckStatus::Ok, "{}", slow.found);
    }

    #[test]
    fn migrations_behind_fail_and_ahead_warn() {
        const EMBEDDED: &[Migration] = &[
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
        let check = |applied: Option<&[i64]>| migrations_check(EMBEDDED, applied);
        assert_eq!(check(Some(&[1, 2])).status, CheckStatus::Ok);
        let behind = check(Some(&[1]));
        assert_eq!(behind.status, CheckStatus::Fail);
        assert!(behind.found.contains("missing 2_two"), "{}", behind.found);
        assert_eq!(check(Some(&[1, 2, 3])).status, CheckStatus::Warn);
        assert_eq!(check(Some(&[1, 3])).status, CheckStatus::Fail);
        assert_eq!(check(None).status, CheckStatus::Fail);
    }

    #[test]
    fn a_plan_without_the_index_or_with_a_sort_fails() {
        let rule = PlanRule {
            name: "plan_claim",
            statement: "claim",
            needs_any: &["jobq_jobs_claim"],
            forbids: &["filesort"],
            advice: "run migrate",
        };
        assert_eq!(
            plan_check(&rule, "key=jobq_jobs_claim").status,
            CheckStatus::Ok
        );
        let sorted = plan_check(&rule, "key=jobq_jobs_claim extra=Using filesort");
        assert_eq!(sorted.status, CheckStatus::Fail);
        assert!(sorted.found.contains("has filesort"), "{}", sorted.found);
        assert_eq!(plan_check(&rule, "type=ALL").status, CheckStatus::Fail);
    }
}
