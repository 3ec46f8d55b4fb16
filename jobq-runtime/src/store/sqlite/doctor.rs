//! `Jobq::doctor` on SQLite: the library's version, the journal mode,
//! migrations, and the plans of the claim, reaper and prune statements.
//! Isolation and clock skew hold by construction (one writer at a time;
//! one clock), and say so.

use sqlx::Row;

use super::SqliteStore;
use super::sql::*;
use crate::error::Result;
use crate::metrics::statement;
use crate::ops::Check;
use crate::store::doctor::{
    self, PlanRule, VersionNeeds, guarded, names, plan_check, version_check,
};

const MIGRATE_ADVICE: &str =
    "run `jobq migrate`: it creates the index (if it exists, run ANALYZE so the planner sees it)";

/// Claim, reaper and prune plans: searched through their index, no full
/// scan of `jobq_jobs` and no temporary B-tree for the ORDER BY.
const PLANS: [PlanRule; 3] = [
    PlanRule {
        name: "plan_claim",
        statement: "claim (PICK)",
        needs_any: &["INDEX jobq_jobs_claim (queue=? AND status=?)"],
        forbids: &["SCAN jobq_jobs", "TEMP B-TREE"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_reap",
        statement: "reaper (REAP)",
        needs_any: &["INDEX jobq_jobs_claim (queue=? AND status=?)"],
        forbids: &["SCAN jobq_jobs", "TEMP B-TREE"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_prune",
        statement: "prune (PRUNE)",
        needs_any: &["jobq_jobs_finished"],
        forbids: &["SCAN jobq_jobs"],
        advice: MIGRATE_ADVICE,
    },
];

impl SqliteStore {
    /// Every check, in report order (see `BackendStore::doctor`).
    pub(super) async fn run_doctor(&self) -> Result<Vec<Check>> {
        let version: String = self
            .run(statement::DOCTOR, async |conn| {
                sqlx::query_scalar(VERSION).fetch_one(conn).await
            })
            .await?;
        let (major, minor) = super::MIN_VERSION;
        let needs = VersionNeeds {
            product: "SQLite",
            min: (major, minor, 0),
            uses: NEEDS,
        };
        let mut checks = vec![
            version_check(&version, &needs),
            Check::ok(
                names::ISOLATION,
                "serializable: one writer at a time, multi-statement writes BEGIN IMMEDIATE",
            ),
            guarded(names::JOURNAL_MODE, self.deadline, self.journal_mode()).await,
            doctor::migrations(&self.conns, self.deadline, DOCTOR_MIGRATIONS, MIGRATIONS).await,
            Check::ok(names::CLOCK_SKEW, "one clock: SQLite times are this host's"),
        ];
        for (rule, sql) in PLANS.iter().zip([PICK, REAP, PRUNE]) {
            checks.push(guarded(rule.name, self.deadline, self.plan(rule, sql)).await);
        }
        Ok(checks)
    }

    async fn journal_mode(&self) -> Result<Check> {
        let mode: String = self.conns.scalar(DOCTOR_JOURNAL_MODE).await?;
        Ok(journal_mode_check(&mode))
    }

    /// The `detail` lines of `EXPLAIN QUERY PLAN` (parameters unbound: the
    /// plan does not depend on their values).
    ///
    /// SQLite plans with the schema the connection last read, and an
    /// `EXPLAIN` reads no table, so it does not notice that another
    /// connection changed the schema: a pooled connection that has not read
    /// since an index was dropped elsewhere still plans with the index. So
    /// the plan runs on one connection right after a read of the schema
    /// table (which reloads a changed schema), and is not cached (a cached
    /// `EXPLAIN` keeps the plan it was prepared with).
    async fn plan(&self, rule: &PlanRule, sql: &'static str) -> Result<Check> {
        let mut conn = self.pool.acquire().await?;
        sqlx::query(DOCTOR_MIGRATIONS_TABLE)
            .persistent(false)
            .fetch_all(&mut *conn)
            .await?;
        let rows = sqlx::query(&explain_query_plan(sql))
            .persistent(false)
            .fetch_all(&mut *conn)
            .await?;
        let lines = rows
            .iter()
            .map(|row| row.try_get::<String, _>("detail"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(plan_check(rule, &lines.join("\n")))
    }
}

/// WAL lets readers (inspection, the CLI) run beside the writer; an
/// in-memory database has one connection and no journal to speak of.
fn journal_mode_check(mode: &str) -> Check {
    let name = names::JOURNAL_MODE;
    match mode.to_ascii_lowercase().as_str() {
        "wal" => Check::ok(name, "wal"),
        "memory" => Check::ok(name, "memory (an in-memory database)"),
        other => Check::warn(
            name,
            format!("{other}: readers and the writer block each other"),
            "open the database with journal_mode=WAL (Jobq::connect does for a file)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::CheckStatus;

    #[test]
    fn a_rollback_journal_warns() {
        assert_eq!(journal_mode_check("wal").status, CheckStatus::Ok);
        assert_eq!(journal_mode_check("delete").status, CheckStatus::Warn);
    }
}
