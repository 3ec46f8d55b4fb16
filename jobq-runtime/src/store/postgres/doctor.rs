//! `Jobq::doctor` on PostgreSQL: the server's version, the isolation level
//! jobq's statements run at, migrations, the clock, and the plans of the
//! claim, reaper and prune statements.

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, Postgres};
use sqlx::{Connection, Executor, Row};

use super::PgStore;
use super::sql::*;
use crate::error::Result;
use crate::metrics::statement;
use crate::ops::Check;
use crate::store::doctor::{
    self, HostClock, PlanRule, VersionNeeds, clock_check, guarded, names, plan_check, version_check,
};

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// A queue no one uses, bound where the statements take one.
const PROBE_QUEUE: &str = "jobq-doctor-probe";

const MIGRATE_ADVICE: &str =
    "run `jobq migrate`: it creates the index (if it exists, run ANALYZE jobq_jobs)";

/// Claim, reaper and prune plans: each partial index serves its statement
/// in order, without a sort or a scan of the table (read with scans and
/// sorts made the last resort, see [`DOCTOR_PLAN_SETTINGS`]).
const PLANS: [PlanRule; 3] = [
    PlanRule {
        name: "plan_claim",
        statement: "claim (CLAIM)",
        needs_any: &["Index Scan using jobq_jobs_claim on jobq_jobs"],
        forbids: &["Seq Scan on jobq_jobs", "Sort"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_reap",
        statement: "reaper (REAP_SEEN)",
        needs_any: &["Index Scan using jobq_jobs_lease on jobq_jobs"],
        forbids: &["Seq Scan on jobq_jobs", "Sort"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_prune",
        statement: "prune (PRUNE)",
        needs_any: &["jobq_jobs_finished_by_queue"],
        forbids: &["Seq Scan on jobq_jobs"],
        advice: MIGRATE_ADVICE,
    },
];

impl PgStore {
    /// Every check, in report order (see `BackendStore::doctor`).
    pub(super) async fn run_doctor(&self, clock: HostClock) -> Result<Vec<Check>> {
        // A server that does not answer this within the statement deadline
        // fails the whole report; each check after it has a deadline of its own.
        let (version, _number): (String, i32) = self
            .run(statement::DOCTOR, async |conn| {
                sqlx::query_as(DOCTOR_SERVER).fetch_one(conn).await
            })
            .await?;
        let needs = VersionNeeds {
            product: "PostgreSQL",
            min: (13, 0, 0),
            uses: "SKIP LOCKED, RETURNING, MATERIALIZED CTEs",
        };
        let mut checks = vec![
            version_check(&version, &needs),
            guarded(names::ISOLATION, self.deadline, self.isolation()).await,
            doctor::migrations(&self.conns, self.deadline, DOCTOR_MIGRATIONS, MIGRATIONS).await,
            guarded(names::CLOCK_SKEW, self.deadline, self.clock_skew(clock)).await,
        ];
        for (rule, sql) in PLANS.iter().zip([CLAIM, REAP_SEEN, PRUNE]) {
            checks.push(guarded(rule.name, self.deadline, self.plan(rule, sql)).await);
        }
        Ok(checks)
    }

    async fn isolation(&self) -> Result<Check> {
        let level: String = self.conns.scalar(DOCTOR_ISOLATION).await?;
        Ok(isolation_check(&level))
    }

    async fn clock_skew(&self, clock: HostClock) -> Result<Check> {
        let mut conn = self.conns.get().await?;
        let before = clock.now();
        let db = sqlx::query_scalar(DOCTOR_NOW).fetch_one(&mut *conn).await;
        let after = clock.now();
        let db: DateTime<Utc> = conn.done(db)?;
        Ok(clock_check(db, before, after))
    }

    /// The EXPLAIN of one statement in a transaction that is rolled back.
    async fn plan(&self, rule: &PlanRule, sql: &'static str) -> Result<Check> {
        let text = explain(sql);
        let lines = self
            .conns
            .run(async |conn| {
                let mut tx = conn.begin().await?;
                tx.execute(DOCTOR_PLAN_SETTINGS).await?;
                let rows = bind_probe(sql, sqlx::query(&text))
                    .fetch_all(&mut *tx)
                    .await?;
                let lines = rows
                    .iter()
                    .map(|row| row.try_get::<String, _>(0).map(|line| plan_node(&line)))
                    .collect::<Result<Vec<_>, _>>()?;
                tx.rollback().await?;
                Ok(lines)
            })
            .await?;
        Ok(plan_check(rule, &lines.join("\n")))
    }
}

/// One line of a text plan without its costs and arrow:
/// `Index Scan using jobq_jobs_claim on jobq_jobs`.
fn plan_node(line: &str) -> String {
    let node = line.split("  (cost=").next().unwrap_or(line);
    node.trim().trim_start_matches("->").trim().to_owned()
}

/// `query` (the EXPLAIN of `sql`) with values a real call would bind.
fn bind_probe<'q>(sql: &str, query: Query<'q>) -> Query<'q> {
    if sql == CLAIM {
        query
            .bind(PROBE_QUEUE)
            .bind(10i64)
            .bind(0i64)
            .bind(30_000_000i64)
            .bind("jobq-doctor")
    } else if sql == REAP_SEEN {
        query.bind(PROBE_QUEUE).bind(10i64)
    } else {
        query
            .bind(PROBE_QUEUE)
            .bind("done")
            .bind(86_400_000_000i64)
            .bind(1000i64)
    }
}

/// Each jobq statement on PostgreSQL is its own transaction at the
/// session's default level. Above READ COMMITTED, a claim whose candidate
/// row another claim took after its snapshot fails with a serialization
/// error instead of moving on: busy queues then retry most claims.
fn isolation_check(level: &str) -> Check {
    let name = names::ISOLATION;
    match level {
        "read committed" => Check::ok(
            name,
            "read committed: each jobq statement is its own transaction at the session default",
        ),
        "read uncommitted" => Check::ok(
            name,
            "read uncommitted, which PostgreSQL runs as read committed",
        ),
        other => Check::fail(
            name,
            format!(
                "{other}: jobq's claims fail with serialization errors (40001) whenever another claim took a row first, and are retried"
            ),
            "run SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED in the pool's after_connect (or give jobq a pool of its own)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::CheckStatus;

    #[test]
    fn sessions_above_read_committed_fail() {
        assert_eq!(isolation_check("read committed").status, CheckStatus::Ok);
        assert_eq!(isolation_check("repeatable read").status, CheckStatus::Fail);
        assert_eq!(isolation_check("serializable").status, CheckStatus::Fail);
    }
}
