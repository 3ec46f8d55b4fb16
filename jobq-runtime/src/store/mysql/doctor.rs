//! `Jobq::doctor` on MySQL/MariaDB: what the server is, how jobq's
//! sessions and transactions are isolated, the table's engine, the binary
//! log, migrations, the clock, the plans of the claim, reaper and prune
//! statements, and who waits on `jobq_jobs`'s row locks now.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::mysql::{MySql, MySqlArguments, MySqlRow};
use sqlx::{Connection, MySqlConnection};

use super::sql::*;
use super::{MySqlStore, Text, opt_text};
use crate::error::{Error, Result};
use crate::metrics::statement;
use crate::ops::Check;
use crate::store::doctor::{
    self, DoctorOptions, PlanRule, VersionNeeds, clock_check, guarded, names, plan_check,
    version_check,
};

type Query<'q> = sqlx::query::Query<'q, MySql, MySqlArguments>;

/// A queue no one uses: the plans are read for selective values, as a
/// queue's rows are a small part of a big table (with a queue holding
/// nearly every row, the optimizer may rightly prefer a scan).
const PROBE_QUEUE: &str = "jobq-doctor-probe";

/// A wait on a row lock this long is worth a look.
const LONG_WAIT_SECS: i64 = 2;

const MIGRATE_ADVICE: &str = "run `jobq migrate`: it creates the index (if it exists, run ANALYZE TABLE jobq_jobs so the optimizer sees it)";

/// Claim, reaper and prune plans: the claim index serves each, without a
/// filesort where order decides which rows are locked (a filesort locks
/// every candidate). The prune's DELETE is a range of the claim index; its
/// filesort sorts only that range (MariaDB's DELETE never reads in index
/// order), as the test suite accepts.
const PLANS: [PlanRule; 6] = [
    PlanRule {
        name: "plan_claim",
        statement: "claim (CLAIM_SELECT)",
        needs_any: &["key=jobq_jobs_claim"],
        forbids: &["filesort", "type=ALL"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_claim_after",
        statement: "claim going on (CLAIM_SELECT_AFTER)",
        needs_any: &["key=jobq_jobs_claim"],
        forbids: &["filesort", "type=ALL"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_reap",
        statement: "reaper (REAP_SELECT)",
        needs_any: &["key=jobq_jobs_claim"],
        forbids: &["filesort", "type=ALL"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_prune",
        statement: "prune (PRUNE)",
        needs_any: &["type=range key=jobq_jobs_claim"],
        forbids: &["type=ALL"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_prune_queues",
        statement: "prune's queues (PRUNE_QUEUES)",
        // A loose scan of the claim index; or a scan of that index alone,
        // which the optimizer rightly prefers when nearly every row is a
        // queue of its own (a small table of many queues: it failed the
        // doctor of the CLI's tests, whose every test has a queue).
        needs_any: &["Using index for group-by", "type=index key=jobq_jobs_claim"],
        forbids: &["type=ALL"],
        advice: MIGRATE_ADVICE,
    },
    PlanRule {
        name: "plan_prune_next_priority",
        statement: "prune's priorities (PRUNE_NEXT_PRIORITY)",
        needs_any: &[
            "optimized away",
            "No matching min/max row",
            "key=jobq_jobs_claim",
        ],
        forbids: &["type=ALL"],
        advice: MIGRATE_ADVICE,
    },
];

impl MySqlStore {
    /// Every check, in report order (see `BackendStore::doctor`).
    pub(super) async fn run_doctor(&self, options: DoctorOptions) -> Result<Vec<Check>> {
        // A server that does not answer this within the statement deadline
        // fails the whole report; each check after it has a deadline of its own.
        let (version, log_bin, binlog_format): (String, i64, Option<String>) = self
            .run(statement::DOCTOR, async |conn| {
                sqlx::query_as(DOCTOR_SERVER).fetch_one(conn).await
            })
            .await?;
        let mut checks = vec![
            self.version(&version),
            guarded(names::ISOLATION, self.deadline, self.isolation()).await,
            guarded(names::STORAGE_ENGINE, self.deadline, self.engine()).await,
            binlog_check(
                log_bin != 0,
                binlog_format.as_deref().unwrap_or(""),
                self.galera,
            ),
            doctor::migrations(&self.conns, self.deadline, DOCTOR_MIGRATIONS, MIGRATIONS).await,
            guarded(
                names::CLOCK_SKEW,
                self.deadline,
                self.clock_skew(options.clock),
            )
            .await,
        ];
        if self.galera {
            checks.push(guarded(names::GALERA_CLUSTER, self.deadline, self.galera_cluster()).await);
            checks.push(
                guarded(names::GALERA_SYNC_WAIT, self.deadline, async {
                    Ok(sync_wait_check(self.galera_settings().await?.0))
                })
                .await,
            );
            checks.push(
                guarded(names::GALERA_LEASE, self.deadline, async {
                    Ok(lease_check(options.lease, &self.galera_settings().await?.1))
                })
                .await,
            );
        }
        for (rule, sql) in PLANS.iter().zip(plan_statements()) {
            checks.push(guarded(rule.name, self.deadline, self.plan(rule, sql)).await);
        }
        checks.push(guarded(names::LOCK_WAITS, self.deadline, self.lock_waits()).await);
        checks.push(
            guarded(
                names::WAKEUPS,
                self.deadline.max(super::wake::PROBE_SLEEP * 2),
                super::wake::check(&self.pool),
            )
            .await,
        );
        Ok(checks)
    }

    fn version(&self, version: &str) -> Check {
        let needs = if self.mariadb {
            VersionNeeds {
                product: "MariaDB",
                min: (10, 6, 0),
                uses: "SKIP LOCKED (10.6) and INSERT … RETURNING (10.5)",
            }
        } else {
            VersionNeeds {
                product: "MySQL",
                min: (8, 0, 1),
                uses: "SKIP LOCKED (8.0.1); batch ids from LAST_INSERT_ID (no RETURNING)",
            }
        };
        version_check(version, &needs)
    }

    /// The session default of a pooled connection, and the level a jobq
    /// transaction (`BEGIN_RC`) really runs at, as InnoDB reports it.
    async fn isolation(&self) -> Result<Check> {
        let mut conn = self.conns.get().await?;
        let session_sql = if self.mariadb {
            DOCTOR_SESSION_ISOLATION_MARIADB
        } else {
            DOCTOR_SESSION_ISOLATION_MYSQL
        };
        let session: String = sqlx::query_scalar(session_sql)
            .fetch_one(&mut *conn)
            .await?;
        let transaction = transaction_isolation(&mut conn).await;
        let transaction = conn.done(transaction)?;
        Ok(isolation_check(&session, &transaction))
    }

    async fn engine(&self) -> Result<Check> {
        let engine: Option<String> = self
            .conns
            .run(async |conn| sqlx::query_scalar(DOCTOR_ENGINE).fetch_optional(conn).await)
            .await?;
        Ok(engine_check(engine.as_deref()))
    }

    async fn galera_cluster(&self) -> Result<Check> {
        type Status = (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let (status, size, state, ready): Status = self
            .conns
            .run(async |conn| sqlx::query_as(DOCTOR_GALERA_STATUS).fetch_one(conn).await)
            .await?;
        Ok(cluster_check(
            status.as_deref().unwrap_or("unknown"),
            size.and_then(|s| s.parse().ok()).unwrap_or(0),
            state.as_deref().unwrap_or("unknown"),
            ready.as_deref() == Some("ON"),
        ))
    }

    /// The server's default `wsrep_sync_wait` and `wsrep_provider_options`.
    async fn galera_settings(&self) -> Result<(i64, String)> {
        Ok(self
            .conns
            .run(async |conn| sqlx::query_as(DOCTOR_GALERA_SETTINGS).fetch_one(conn).await)
            .await?)
    }

    async fn clock_skew(&self, clock: crate::store::doctor::HostClock) -> Result<Check> {
        let mut conn = self.conns.get().await?;
        let before = clock.now();
        let db = sqlx::query_scalar(DOCTOR_NOW).fetch_one(&mut *conn).await;
        let after = clock.now();
        let db: NaiveDateTime = conn.done(db)?;
        Ok(clock_check(db.and_utc(), before, after))
    }

    /// The EXPLAIN of one statement, each row as `type=… key=… extra=…`.
    async fn plan(&self, rule: &PlanRule, sql: &'static str) -> Result<Check> {
        let text = explain(sql);
        let rows = self
            .conns
            .run(async |conn| bind_probe(sql, sqlx::query(&text)).fetch_all(conn).await)
            .await?;
        let lines = rows.iter().map(plan_line).collect::<Result<Vec<_>>>()?;
        Ok(plan_check(rule, &lines.join("\n")))
    }

    /// MariaDB lists lock waits in `information_schema` (it has no
    /// `data_lock_waits`); MySQL 8 removed those tables for
    /// `performance_schema.data_lock_waits`, read when `performance_schema`
    /// is on. The MySQL 8 path is written from its reference and not run
    /// here: MySQL 8 cannot be installed on the machine jobq is built on.
    /// InnoDB refreshes these views only once they went unread for 0.1 s,
    /// so a doctor run right after another may see the same moment.
    ///
    /// Those views need the PROCESS privilege (MySQL 8's also SELECT on
    /// `performance_schema`): a user without it gets a warning naming the
    /// grant, as jobq itself needs neither.
    async fn lock_waits(&self) -> Result<Check> {
        match self.read_lock_waits().await {
            Err(Error::Database(error)) if lacks_privilege(&error) => {
                let Text(user) = self
                    .conns
                    .run(async |conn| {
                        sqlx::query_scalar::<_, Text>(DOCTOR_CURRENT_USER)
                            .fetch_one(conn)
                            .await
                    })
                    .await?;
                Ok(no_lock_waits_privilege(&user, &error))
            }
            result => result,
        }
    }

    async fn read_lock_waits(&self) -> Result<Check> {
        let has_innodb_tables: i64 = self.conns.scalar(DOCTOR_HAS_INNODB_LOCK_WAITS).await?;
        let (sql, source) = if has_innodb_tables > 0 {
            (
                DOCTOR_LOCK_WAITS_MARIADB,
                "information_schema.INNODB_LOCK_WAITS",
            )
        } else {
            let on: i64 = self.conns.scalar(DOCTOR_PERFORMANCE_SCHEMA).await?;
            if on == 0 {
                return Ok(Check::ok(
                    names::LOCK_WAITS,
                    "not visible: performance_schema is off (turn it on to see lock waits here)",
                ));
            }
            (
                DOCTOR_LOCK_WAITS_MYSQL,
                "performance_schema.data_lock_waits",
            )
        };
        let (waits, longest): (i64, i64) = self
            .conns
            .run(async |conn| sqlx::query_as(sql).fetch_one(conn).await)
            .await?;
        Ok(lock_waits_check(waits, longest, source))
    }
}

/// The statements [`PLANS`] checks, in its order.
fn plan_statements() -> [&'static str; 6] {
    [
        CLAIM_SELECT,
        CLAIM_SELECT_AFTER,
        REAP_SELECT,
        PRUNE,
        PRUNE_QUEUES,
        PRUNE_NEXT_PRIORITY,
    ]
}

/// `query` (the EXPLAIN of `sql`) with values a real call would bind, for [`PROBE_QUEUE`].
fn bind_probe<'q>(sql: &str, query: Query<'q>) -> Query<'q> {
    let epoch = chrono::DateTime::UNIX_EPOCH.naive_utc();
    if sql == CLAIM_SELECT || sql == REAP_SELECT {
        query.bind(PROBE_QUEUE).bind(10u32)
    } else if sql == CLAIM_SELECT_AFTER {
        query
            .bind(PROBE_QUEUE)
            .bind(0i16)
            .bind(0i16)
            .bind(epoch)
            .bind(0i16)
            .bind(epoch)
            .bind(0i64)
            .bind(10u32)
    } else if sql == PRUNE {
        query
            .bind(PROBE_QUEUE)
            .bind("done")
            .bind(0i16)
            .bind(86_400_000_000i64)
            .bind(1000u32)
    } else if sql == PRUNE_NEXT_PRIORITY {
        query.bind(PROBE_QUEUE).bind("done").bind(-32_769i32)
    } else {
        query
    }
}

/// One EXPLAIN row as `type=… key=… key_len=… extra=…` (MariaDB reports
/// these columns as binary strings).
fn plan_line(row: &MySqlRow) -> Result<String> {
    let column = |name: &str| -> Result<String> { Ok(opt_text(row, name)?.unwrap_or_default()) };
    Ok(format!(
        "type={} key={} key_len={} extra={}",
        column("type")?,
        column("key")?,
        column("key_len")?,
        column("Extra")?
    ))
}

/// What InnoDB reports of a transaction begun as jobq begins its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TransactionLevel {
    /// Its isolation level (`READ COMMITTED`).
    Read(String),
    /// `INNODB_TRX` did not list it in time (a snapshot lags up to 0.1 s).
    NotListed,
    /// Reading `INNODB_TRX` needs the PROCESS privilege, which this user
    /// lacks (the server refuses the read).
    NoPrivilege,
}

/// The isolation level InnoDB reports for a transaction begun as jobq
/// begins its own (`BEGIN_RC`). Rolled back.
async fn transaction_isolation(conn: &mut MySqlConnection) -> Result<TransactionLevel> {
    let mut tx = conn.begin_with(BEGIN_RC).await?;
    sqlx::query_scalar::<_, i64>(DOCTOR_TOUCH)
        .fetch_one(&mut *tx)
        .await?;
    // A snapshot taken before this statement ran shows an earlier
    // transaction of the connection (the migration's, at another level):
    // read again once the snapshot has aged out.
    let mut level = TransactionLevel::NotListed;
    for _ in 0..TRX_SNAPSHOT_READS {
        let row: Option<(Text, Option<Text>)> = match sqlx::query_as(DOCTOR_TRX_ISOLATION)
            .fetch_optional(&mut *tx)
            .await
        {
            Ok(row) => row,
            Err(error) if lacks_privilege(&error) => {
                level = TransactionLevel::NoPrivilege;
                break;
            }
            Err(error) => return Err(error.into()),
        };
        if let Some((found, query)) = row
            && query.is_some_and(|q| q.0 == DOCTOR_TRX_ISOLATION)
        {
            level = TransactionLevel::Read(found.0);
            break;
        }
        tokio::time::sleep(TRX_SNAPSHOT_AGE).await;
    }
    tx.rollback().await?;
    Ok(level)
}

/// Whether the server refused a read for a privilege this user lacks:
/// 1227 (a global privilege such as PROCESS), 1142 (a table's, such as
/// `performance_schema`'s), 1044 (a database's).
fn lacks_privilege(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .is_some_and(|e| matches!(e.number(), 1227 | 1142 | 1044))
}

/// How often `INNODB_TRX` is read for the open transaction, and how long
/// its snapshot lives (0.1 s in InnoDB, plus a margin).
const TRX_SNAPSHOT_READS: usize = 4;
const TRX_SNAPSHOT_AGE: std::time::Duration = std::time::Duration::from_millis(120);

/// `session` as `@@tx_isolation` spells it (`REPEATABLE-READ`), and
/// `transaction` as `INNODB_TRX` does (`REPEATABLE READ`). The session's
/// level needs no privilege to read; confirming a transaction's needs
/// PROCESS, and without it the check goes by the session's (jobq sets READ
/// COMMITTED for each of its transactions itself).
fn isolation_check(session: &str, transaction: &TransactionLevel) -> Check {
    let name = names::ISOLATION;
    let normal = |level: &str| level.to_ascii_uppercase().replace('-', " ");
    let session = normal(session);
    let txn = match transaction {
        TransactionLevel::Read(level) if normal(level) != "READ COMMITTED" => {
            let level = normal(level);
            return Check::fail(
                name,
                format!(
                    "jobq's transactions run at {level}, not READ COMMITTED (session default {session})"
                ),
                "something overrides SET TRANSACTION ISOLATION LEVEL READ COMMITTED on this server (a proxy?): claims at this level take gap locks that block enqueues and deadlock",
            );
        }
        TransactionLevel::Read(_) => "jobq's transactions run at READ COMMITTED",
        TransactionLevel::NotListed => {
            "jobq's transactions set READ COMMITTED (not confirmed: INNODB_TRX did not list the transaction; it lags up to 0.1 s behind, more while others read it)"
        }
        TransactionLevel::NoPrivilege => {
            "jobq's transactions set READ COMMITTED (confirming it in INNODB_TRX needs the PROCESS privilege, which this user does not have and jobq does not need)"
        }
    };
    match session.as_str() {
        "READ COMMITTED" => Check::ok(name, format!("session default READ COMMITTED; {txn}")),
        "REPEATABLE READ" | "SERIALIZABLE" => Check::warn(
            name,
            format!(
                "session default {session}; {txn}, but its single statements (enqueue, settle, prune) run at {session}"
            ),
            "at that level those statements take gap locks that block enqueues and can deadlock (jobq retries): run SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED in the pool's after_connect (Jobq::connect does)",
        ),
        _ => Check::warn(
            name,
            format!("session default {session}; {txn}"),
            "inspection reads (job, counts) can see uncommitted rows at this level: set READ COMMITTED in the pool's after_connect",
        ),
    }
}

fn engine_check(engine: Option<&str>) -> Check {
    let name = names::STORAGE_ENGINE;
    match engine {
        None => Check::fail(
            name,
            "no jobq_jobs table in this database",
            "run `jobq migrate` (or Jobq::migrate)",
        ),
        Some(engine) if engine.eq_ignore_ascii_case("InnoDB") => {
            Check::ok(name, "jobq_jobs is InnoDB")
        }
        Some(engine) => Check::fail(
            name,
            format!("jobq_jobs is {engine}: no row locks, so no SKIP LOCKED and no transactions"),
            "ALTER TABLE jobq_jobs ENGINE = InnoDB",
        ),
    }
}

/// `SELECT … FOR UPDATE SKIP LOCKED` is unsafe for statement-based
/// replication (which rows it took depends on timing): MySQL and MariaDB
/// log it row-based under MIXED, and refuse or warn under STATEMENT.
/// Galera replicates row events whether the binary log is on or not, and
/// only those: it needs ROW.
fn binlog_check(log_bin: bool, format: &str, galera: bool) -> Check {
    let name = names::BINLOG_FORMAT;
    let format = format.to_ascii_uppercase();
    if galera {
        return if format == "ROW" {
            Check::ok(name, "Galera node, binlog_format ROW")
        } else {
            Check::fail(
                name,
                format!("Galera node, binlog_format {format}: Galera replicates row events only"),
                "set binlog_format = ROW on every node",
            )
        };
    }
    if !log_bin {
        return Check::ok(
            name,
            format!("binary log off (binlog_format {format} would apply if it were on)"),
        );
    }
    match format.as_str() {
        "ROW" | "MIXED" => Check::ok(name, format!("binary log on, binlog_format {format}")),
        _ => Check::fail(
            name,
            format!(
                "binary log on, binlog_format {format}: the claim's SKIP LOCKED and LIMIT are unsafe for statement-based replication"
            ),
            "set binlog_format = ROW (or MIXED) on the server and in jobq's sessions",
        ),
    }
}

/// A node jobq can use is in a Primary component, ready and Synced; a
/// cluster of two loses its quorum with either node.
fn cluster_check(status: &str, size: u32, state: &str, ready: bool) -> Check {
    let name = names::GALERA_CLUSTER;
    let found = format!("cluster {status}, {size} nodes, this node {state}");
    if !status.eq_ignore_ascii_case("Primary") || !ready {
        Check::fail(
            name,
            format!("{found}, wsrep_ready {}", if ready { "ON" } else { "OFF" }),
            "this node is not in the cluster's primary component: it refuses jobq's statements (error 1047); point jobq at a node of the primary component",
        )
    } else if !state.eq_ignore_ascii_case("Synced") {
        Check::warn(
            name,
            found,
            "the node is catching up or serving a state transfer: it may lag or stall commits until it is Synced",
        )
    } else if size == 2 {
        Check::warn(
            name,
            found,
            "with two nodes, losing either leaves no quorum and stops both: run three (or add garbd as a third vote)",
        )
    } else {
        Check::ok(name, found)
    }
}

/// jobq's reads that promise read-your-writes set `wsrep_sync_wait = 1`
/// themselves; a server default that makes every statement wait slows
/// the claims too.
fn sync_wait_check(sync_wait: i64) -> Check {
    let name = names::GALERA_SYNC_WAIT;
    if sync_wait == 0 {
        Check::ok(
            name,
            "wsrep_sync_wait = 0 by default; jobq's job, list, counts and stats reads set 1 for themselves (read-your-writes across nodes)",
        )
    } else {
        Check::warn(
            name,
            format!(
                "wsrep_sync_wait = {sync_wait} by default: every read and write of jobq's waits for the node to catch up, claims included"
            ),
            "jobq needs no server default (its reads that promise read-your-writes set it themselves): leave wsrep_sync_wait = 0 unless the application needs it",
        )
    }
}

/// The lease jobq needs on Galera: a node lost without a goodbye freezes
/// every commit of the cluster until the others evict it, up to
/// `evs.suspect_timeout` (5 s by default) plus a view change. A worker
/// renews its leases every lease / 3, so a lease survives a freeze shorter
/// than two thirds of it: below 1.5 × the timeout a node's loss makes
/// healthy workers' jobs expire and run twice (measured: 3 s leases, 5 s
/// timeout); jobq advises at least 3 × the timeout.
fn lease_check(lease: Duration, provider_options: &str) -> Check {
    let name = names::GALERA_LEASE;
    let Some(suspect) = suspect_timeout(provider_options) else {
        return Check::warn(
            name,
            "evs.suspect_timeout not found in wsrep_provider_options",
            "keep the workers' lease at least 3 × evs.suspect_timeout (15 s with the default 5 s)",
        );
    };
    let advised = suspect * 3;
    let found = format!(
        "workers' lease {:?}, evs.suspect_timeout {:?} (a lost node freezes commits that long)",
        lease, suspect
    );
    let advice = format!(
        "set WorkerBuilder::lease to at least {advised:?} (3 × evs.suspect_timeout), and run doctor with that lease (`jobq doctor --lease`)"
    );
    if lease.as_secs_f64() < suspect.as_secs_f64() * 1.5 {
        Check::fail(
            name,
            format!(
                "{found}: a node's loss outlasts the lease, so running jobs are reaped and run twice"
            ),
            advice,
        )
    } else if lease < advised {
        Check::warn(name, format!("{found}: little margin"), advice)
    } else {
        Check::ok(name, found)
    }
}

/// `evs.suspect_timeout` from `wsrep_provider_options`
/// (`…; evs.suspect_timeout = PT5S; …`), an ISO 8601 duration.
fn suspect_timeout(provider_options: &str) -> Option<Duration> {
    let value = provider_options.split(';').find_map(|option| {
        let (key, value) = option.split_once('=')?;
        (key.trim() == "evs.suspect_timeout").then(|| value.trim())
    })?;
    iso8601_duration(value)
}

/// `PT5S`, `PT1.5S`, `PT1M30S`, `PT2H`: the forms Galera prints.
fn iso8601_duration(text: &str) -> Option<Duration> {
    let rest = text.strip_prefix("PT")?;
    let mut total = 0.0;
    let mut number = String::new();
    for c in rest.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'H' | 'M' | 'S' => {
                let n: f64 = number.parse().ok()?;
                number.clear();
                total += n * match c {
                    'H' => 3600.0,
                    'M' => 60.0,
                    _ => 1.0,
                };
            }
            _ => return None,
        }
    }
    number.is_empty().then(|| Duration::from_secs_f64(total))
}

/// The lock waits cannot be read as `user` (`name@host`, as
/// `CURRENT_USER()` reports it): `error` says what the server refused.
fn no_lock_waits_privilege(user: &str, error: &sqlx::Error) -> Check {
    let (name, host) = user.rsplit_once('@').unwrap_or((user, "%"));
    let server = error
        .as_database_error()
        .map_or_else(|| error.to_string(), |e| e.message().to_owned());
    Check::warn(
        names::LOCK_WAITS,
        format!(
            "not visible to this user: {server} (reading other sessions' lock waits needs the PROCESS privilege; jobq itself does not)"
        ),
        format!(
            "to see lock waits here, GRANT PROCESS ON *.* TO '{name}'@'{host}' (MySQL 8 also: GRANT SELECT ON performance_schema.* TO '{name}'@'{host}'), or run `jobq doctor` as a user that has it"
        ),
    )
}

fn lock_waits_check(waits: i64, longest_secs: i64, source: &str) -> Check {
    let name = names::LOCK_WAITS;
    if waits == 0 {
        Check::ok(
            name,
            format!("no transaction waits on jobq_jobs ({source})"),
        )
    } else if longest_secs < LONG_WAIT_SECS {
        Check::ok(
            name,
            format!("{waits} short waits on jobq_jobs, longest {longest_secs} s ({source})"),
        )
    } else {
        Check::warn(
            name,
            format!(
                "{waits} transactions wait on jobq_jobs row locks, longest {longest_secs} s ({source})"
            ),
            "find what holds them (information_schema.INNODB_TRX, oldest trx_started): a long transaction around enqueue_in, or a session at REPEATABLE READ",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::CheckStatus;

    #[test]
    fn statement_based_binlog_fails_and_row_or_mixed_pass() {
        assert_eq!(
            binlog_check(true, "STATEMENT", false).status,
            CheckStatus::Fail
        );
        assert_eq!(binlog_check(true, "ROW", false).status, CheckStatus::Ok);
        assert_eq!(binlog_check(true, "mixed", false).status, CheckStatus::Ok);
        assert_eq!(binlog_check(false, "MIXED", true).status, CheckStatus::Fail);
        assert_eq!(binlog_check(false, "ROW", true).status, CheckStatus::Ok);
        let off = binlog_check(false, "STATEMENT", false);
        assert_eq!(off.status, CheckStatus::Ok);
        assert!(off.found.contains("binary log off"), "{}", off.found);
    }

    #[test]
    fn a_repeatable_read_session_warns_and_a_repeatable_read_transaction_fails() {
        let read = |level: &str| TransactionLevel::Read(level.to_owned());
        let rr = isolation_check("REPEATABLE-READ", &read("READ COMMITTED"));
        assert_eq!(rr.status, CheckStatus::Warn);
        let rc = isolation_check("READ-COMMITTED", &read("READ COMMITTED"));
        assert_eq!(rc.status, CheckStatus::Ok);
        let overridden = isolation_check("READ-COMMITTED", &read("REPEATABLE READ"));
        assert_eq!(overridden.status, CheckStatus::Fail);
    }

    #[test]
    fn without_the_process_privilege_the_sessions_level_decides() {
        let rc = isolation_check("READ-COMMITTED", &TransactionLevel::NoPrivilege);
        assert_eq!(rc.status, CheckStatus::Ok);
        assert!(rc.found.contains("PROCESS"), "{}", rc.found);
        let rr = isolation_check("REPEATABLE-READ", &TransactionLevel::NoPrivilege);
        assert_eq!(rr.status, CheckStatus::Warn);
    }

    #[test]
    fn a_table_that_is_not_innodb_fails() {
        assert_eq!(engine_check(Some("InnoDB")).status, CheckStatus::Ok);
        assert_eq!(engine_check(Some("MyISAM")).status, CheckStatus::Fail);
        assert_eq!(engine_check(None).status, CheckStatus::Fail);
    }

    #[test]
    fn a_lease_below_one_and_a_half_suspect_timeouts_fails_and_below_three_warns() {
        let options = "evs.send_window = 4; evs.suspect_timeout = PT5S; evs.user_send_window = 2";
        assert_eq!(suspect_timeout(options), Some(Duration::from_secs(5)));
        assert_eq!(iso8601_duration("PT1M30S"), Some(Duration::from_secs(90)));
        assert_eq!(
            iso8601_duration("PT1.5S"),
            Some(Duration::from_millis(1500))
        );
        let lease = |s| lease_check(Duration::from_secs(s), options).status;
        assert_eq!(lease(3), CheckStatus::Fail);
        assert_eq!(lease(7), CheckStatus::Fail);
        assert_eq!(lease(10), CheckStatus::Warn);
        assert_eq!(lease(15), CheckStatus::Ok);
        assert_eq!(lease(30), CheckStatus::Ok);
        assert_eq!(
            lease_check(Duration::from_secs(30), "").status,
            CheckStatus::Warn
        );
    }

    #[test]
    fn a_node_outside_the_primary_component_fails_and_two_nodes_warn() {
        assert_eq!(
            cluster_check("Primary", 3, "Synced", true).status,
            CheckStatus::Ok
        );
        assert_eq!(
            cluster_check("Primary", 2, "Synced", true).status,
            CheckStatus::Warn
        );
        assert_eq!(
            cluster_check("Primary", 3, "Donor/Desynced", true).status,
            CheckStatus::Warn
        );
        assert_eq!(
            cluster_check("non-Primary", 1, "Initialized", false).status,
            CheckStatus::Fail
        );
    }

    #[test]
    fn long_lock_waits_warn() {
        assert_eq!(lock_waits_check(0, 0, "x").status, CheckStatus::Ok);
        assert_eq!(lock_waits_check(3, 0, "x").status, CheckStatus::Ok);
        assert_eq!(lock_waits_check(1, 5, "x").status, CheckStatus::Warn);
    }
}
