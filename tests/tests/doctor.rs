//! `Jobq::doctor`: every check passes on a database set up as jobq sets it
//! up, and each one fails (or warns) where it should: a session at
//! REPEATABLE READ, a missing index, a skewed clock, migrations behind or
//! ahead, a table that is not InnoDB, a transaction waiting on a row lock.
//!
//! Each test that changes a schema works in a database of its own
//! (`jobq_doctor_*_<random>` on MariaDB and PostgreSQL, dropped at the
//! test's end, a fresh file on SQLite), so
//! that other tests' migrations and lock waits in the shared `test`
//! databases cannot change what it finds. Server settings are never
//! changed: session settings and these databases only.

use std::time::Duration;

use jobq_runtime::{Backend, Check, CheckStatus, DoctorReport, Enqueue, Jobq, job};
use jobq_tests::sql::Db;
use jobq_tests::{ScratchDb, ScratchUser, TestDb, assert_contains, eventually, unique_queue};
use sqlx::{Connection, Executor};

#[job(name = "doctor_probe")]
async fn probe(n: u64) {
    let _ = n;
}

/// `doctor` as an application's own user: every privilege on its database
/// and none beyond (no PROCESS, which reading other sessions' transactions
/// and lock waits needs): nothing fails, the isolation of jobq's sessions
/// is read without any privilege, and the lock-wait check warns, naming the
/// grant it would need. Before the fix `isolation` and `lock_waits` failed
/// ("Access denied; you need (at least one of) the PROCESS privilege(s)")
/// and `jobq doctor` exited 1 on a healthy server.
#[tokio::test]
async fn doctor_passes_for_a_user_with_privileges_on_its_database_only() {
    let Some(db) = TestDb::mysql() else { return };
    let own = own_database(&db, "jobq_doctor_user").await;
    own.migrated().await;
    let user = ScratchUser::on_database_of(&own.url, "jobq_doctor").await;
    let jobq = Jobq::connect_with(user.url(), 2).await.unwrap();
    let report = jobq.doctor().await.unwrap();
    for name in expected_checks(db.backend()) {
        if name != "lock_waits" {
            assert_check(&report, name, CheckStatus::Ok, &[]);
        }
    }
    let grant = format!("GRANT PROCESS ON *.* TO '{}'@'%'", user.name());
    assert_check(&report, "lock_waits", CheckStatus::Warn, &[&grant]);
    assert_contains(
        &check(&report, "lock_waits").found,
        &["not visible", "PROCESS"],
    );
    assert_eq!(report.worst(), CheckStatus::Warn, "{report:#?}");
}

/// A database of one test's own (`{name}_{random}`) on the server of `db`
/// (MySQL/PostgreSQL), or a fresh SQLite file; dropped at the test's end.
struct OwnDb {
    url: String,
    _scratch: ScratchDb,
}

async fn own_database(db: &TestDb, name: &str) -> OwnDb {
    let scratch = db.scratch(name).await;
    OwnDb {
        url: scratch.url().to_owned(),
        _scratch: scratch,
    }
}

impl OwnDb {
    async fn jobq(&self) -> Jobq {
        Jobq::connect_with(&self.url, 2).await.unwrap()
    }

    async fn migrated(&self) -> Jobq {
        let jobq = self.jobq().await;
        jobq.migrate().await.unwrap();
        jobq
    }
}

/// The check `name`; panics with the whole report if it did not run.
#[track_caller]
fn check<'r>(report: &'r DoctorReport, name: &str) -> &'r Check {
    report
        .check(name)
        .unwrap_or_else(|| panic!("no check {name} in {report:#?}"))
}

/// The check `name`, asserted to have `status` and advice containing each of `advice`.
#[track_caller]
fn assert_check(report: &DoctorReport, name: &str, status: CheckStatus, advice: &[&str]) {
    let found = check(report, name);
    assert_eq!(found.status, status, "{found:#?}");
    if status == CheckStatus::Ok {
        assert!(found.advice.is_none(), "{found:#?}");
    } else {
        let text = found
            .advice
            .as_deref()
            .expect("advice on a check that did not pass");
        assert_contains(text, advice);
    }
}

/// The checks every backend runs, and those only some do.
fn expected_checks(backend: Backend) -> Vec<&'static str> {
    let mut names = vec!["server_version", "isolation", "migrations", "clock_skew"];
    names.extend(["plan_claim", "plan_reap", "plan_prune"]);
    match backend {
        Backend::MySql => names.extend([
            "storage_engine",
            "binlog_format",
            "plan_claim_after",
            "plan_prune_queues",
            "plan_prune_next_priority",
            "lock_waits",
            "wakeups",
        ]),
        Backend::Sqlite => names.push("journal_mode"),
        _ => {}
    }
    names
}

/// On MySQL/MariaDB the doctor reads as the server's own account here
/// (`JOBQ_MYSQL_ADMIN_URL`): `lock_waits` needs the PROCESS privilege the
/// tests' user does not have (what it reports without it:
/// `doctor_passes_for_a_user_with_privileges_on_its_database_only`).
async fn every_check_passes_on_a_migrated_database(db: TestDb) {
    let own = own_database(&db, "jobq_doctor_ok").await;
    let jobq = own.migrated().await;
    let jobq = match db.backend() {
        Backend::MySql => {
            let admin = jobq_tests::scratch::mysql_admin_url(&own.url);
            Jobq::connect_with(&admin, 2).await.unwrap()
        }
        _ => jobq,
    };
    let report = jobq.doctor().await.unwrap();
    for name in expected_checks(db.backend()) {
        assert_check(&report, name, CheckStatus::Ok, &[]);
    }
    assert_eq!(report.worst(), CheckStatus::Ok, "{report:#?}");
    assert_contains(&check(&report, "plan_claim").found, &["jobq_jobs_claim"]);
}

async fn an_unmigrated_database_fails_the_migrations_check_and_the_report_goes_on(db: TestDb) {
    let own = own_database(&db, "jobq_doctor_unmigrated").await;
    let report = own.jobq().await.doctor().await.unwrap();
    assert_check(&report, "migrations", CheckStatus::Fail, &["jobq migrate"]);
    assert_contains(&check(&report, "migrations").found, &["not migrated"]);
    // Without the table the plans cannot be read: each says so and fails.
    assert_check(&report, "plan_claim", CheckStatus::Fail, &["migrate"]);
    assert_contains(&check(&report, "plan_claim").found, &["could not check"]);
    assert_check(&report, "server_version", CheckStatus::Ok, &[]);
}

async fn a_missing_migration_fails_the_migrations_check(db: TestDb) {
    let own = own_database(&db, "jobq_doctor_behind").await;
    let jobq = own.migrated().await;
    let newest: Vec<(i64,)> = Db::of(&jobq)
        .fetch_all("SELECT MAX(version) FROM jobq_migrations", &[])
        .await
        .unwrap();
    Db::of(&jobq)
        .execute(
            "DELETE FROM jobq_migrations WHERE version = ?",
            &[newest[0].0.into()],
        )
        .await
        .unwrap();
    let report = jobq.doctor().await.unwrap();
    assert_check(&report, "migrations", CheckStatus::Fail, &["jobq migrate"]);
    assert_contains(
        &check(&report, "migrations").found,
        &["missing", &newest[0].0.to_string()],
    );
}

async fn a_migration_this_jobq_does_not_know_warns_of_a_newer_schema(db: TestDb) {
    let own = own_database(&db, "jobq_doctor_ahead").await;
    let jobq = own.migrated().await;
    let pool = Db::of(&jobq);
    let insert = pool.pick(
        "INSERT INTO jobq_migrations (version, description, applied_at) VALUES (?, 'from_the_future', UTC_TIMESTAMP(6))",
        "INSERT INTO jobq_migrations (version, description) VALUES (?, 'from_the_future')",
        "INSERT INTO jobq_migrations (version, description, applied_at) VALUES (?, 'from_the_future', 0)",
    );
    pool.execute(insert, &[29_991_231_000_001i64.into()])
        .await
        .unwrap();
    let report = jobq.doctor().await.unwrap();
    assert_check(&report, "migrations", CheckStatus::Warn, &["upgrade"]);
    assert_contains(&check(&report, "migrations").found, &["29991231000001"]);
}

async fn a_missing_claim_index_fails_the_claim_plan_with_advice(db: TestDb) {
    let own = own_database(&db, "jobq_doctor_idx").await;
    let jobq = own.migrated().await;
    let pool = Db::of(&jobq);
    let drop = pool.pick(
        "DROP INDEX jobq_jobs_claim ON jobq_jobs",
        "DROP INDEX jobq_jobs_claim",
        "DROP INDEX jobq_jobs_claim",
    );
    pool.execute(drop, &[]).await.unwrap();
    let report = jobq.doctor().await.unwrap();
    assert_check(&report, "plan_claim", CheckStatus::Fail, &["jobq migrate"]);
    assert_eq!(report.worst(), CheckStatus::Fail);
    // The migrations table still lists every migration: only the plan tells.
    assert_check(&report, "migrations", CheckStatus::Ok, &[]);
}

/// MySQL/MariaDB: `SET SESSION timestamp` moves `UTC_TIMESTAMP()` of that
/// session, so the database's clock really reads an hour ahead. PostgreSQL
/// has no such session setting: there the host's clock is the one set off,
/// through the doctor's hidden test knob. SQLite has one clock, whatever
/// the host's reads.
async fn a_skewed_clock_fails_the_clock_check(db: TestDb) {
    let report = match db.backend() {
        Backend::MySql => {
            let pool = sqlx::mysql::MySqlPoolOptions::new()
                .max_connections(2)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute("SET SESSION timestamp = UNIX_TIMESTAMP() + 3600")
                            .await?;
                        Ok(())
                    })
                })
                .connect(db.url())
                .await
                .unwrap();
            let jobq = Jobq::from_mysql_pool(pool).await.unwrap();
            jobq.doctor().await.unwrap()
        }
        _ => {
            let jobq = db.jobq().await;
            jobq.doctor_with_host_clock_offset(chrono::TimeDelta::hours(-1))
                .await
                .unwrap()
        }
    };
    if db.backend() == Backend::Sqlite {
        assert_check(&report, "clock_skew", CheckStatus::Ok, &[]);
        assert_contains(&check(&report, "clock_skew").found, &["one clock"]);
    } else {
        assert_check(&report, "clock_skew", CheckStatus::Fail, &["NTP"]);
        assert_contains(&check(&report, "clock_skew").found, &["ahead of"]);
    }
}

jobq_tests::on_every_backend!(
    every_check_passes_on_a_migrated_database,
    an_unmigrated_database_fails_the_migrations_check_and_the_report_goes_on,
    a_missing_migration_fails_the_migrations_check,
    a_migration_this_jobq_does_not_know_warns_of_a_newer_schema,
    a_missing_claim_index_fails_the_claim_plan_with_advice,
    a_skewed_clock_fails_the_clock_check,
);

/// A pool whose sessions default to REPEATABLE READ, handed in.
async fn mysql_pool_at_repeatable_read(url: &str) -> sqlx::MySqlPool {
    sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    .await?;
                Ok(())
            })
        })
        .connect(url)
        .await
        .unwrap()
}

/// jobq's own transactions still run at READ COMMITTED (it sets that per
/// transaction, and the check reads what InnoDB reports for one); its
/// single statements do not, and the check says what that costs.
#[tokio::test]
async fn a_mysql_pool_at_repeatable_read_warns_that_jobqs_single_statements_take_gap_locks() {
    let Some(db) = TestDb::mysql() else { return };
    let own = own_database(&db, "jobq_doctor_rr").await;
    own.migrated().await;
    let pool = mysql_pool_at_repeatable_read(&own.url).await;
    let report = Jobq::from_mysql_pool(pool)
        .await
        .unwrap()
        .doctor()
        .await
        .unwrap();
    assert_check(
        &report,
        "isolation",
        CheckStatus::Warn,
        &["gap locks", "READ COMMITTED", "after_connect"],
    );
    assert_contains(
        &check(&report, "isolation").found,
        // "run at" when InnoDB's transaction list showed the doctor's own
        // transaction, "set" when it lagged (other tests read it too).
        &[
            "session default REPEATABLE READ",
            "jobq's transactions",
            "READ COMMITTED",
        ],
    );
    // Jobq::connect sets READ COMMITTED for the session.
    let report = own.jobq().await.doctor().await.unwrap();
    assert_check(&report, "isolation", CheckStatus::Ok, &[]);
}

/// On PostgreSQL every jobq statement is its own transaction at the
/// session's level; above READ COMMITTED claims fail with serialization
/// errors whenever another claim took a candidate row first.
#[tokio::test]
async fn a_postgres_pool_at_repeatable_read_fails_the_isolation_check() {
    let Some(db) = TestDb::postgres() else { return };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute(
                    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                )
                .await?;
                Ok(())
            })
        })
        .connect(db.url())
        .await
        .unwrap();
    let report = Jobq::from_pg_pool(pool)
        .await
        .unwrap()
        .doctor()
        .await
        .unwrap();
    assert_check(
        &report,
        "isolation",
        CheckStatus::Fail,
        &["READ COMMITTED", "after_connect"],
    );
    assert_contains(
        &check(&report, "isolation").found,
        &["repeatable read", "40001"],
    );
}

#[tokio::test]
async fn the_binlog_check_says_whether_the_binary_log_is_on_and_its_format() {
    let Some(db) = TestDb::mysql() else { return };
    let jobq = db.jobq().await;
    let (log_bin, format): (i64, String) =
        sqlx::query_as("SELECT CAST(@@log_bin AS SIGNED), CAST(@@SESSION.binlog_format AS CHAR)")
            .fetch_one(jobq.mysql_pool().unwrap())
            .await
            .unwrap();
    let report = jobq.doctor().await.unwrap();
    let binlog = check(&report, "binlog_format");
    if log_bin == 0 {
        assert_eq!(binlog.status, CheckStatus::Ok, "{binlog:#?}");
        assert_contains(&binlog.found, &["binary log off", &format]);
    } else {
        let expected = if format == "STATEMENT" {
            CheckStatus::Fail
        } else {
            CheckStatus::Ok
        };
        assert_eq!(binlog.status, expected, "{binlog:#?}");
    }
}

#[tokio::test]
async fn a_jobq_jobs_table_that_is_not_innodb_fails_the_storage_engine_check() {
    let Some(db) = TestDb::mysql() else { return };
    let own = own_database(&db, "jobq_doctor_engine").await;
    let jobq = own.migrated().await;
    // MariaDB changes the engine of a table only once no foreign key
    // refers to it (the tags' index does).
    sqlx::raw_sql(
        "ALTER TABLE jobq_job_tags DROP FOREIGN KEY jobq_job_tags_job; \
         ALTER TABLE jobq_jobs ENGINE = MyISAM",
    )
    .execute(jobq.mysql_pool().unwrap())
    .await
    .unwrap();
    let report = jobq.doctor().await.unwrap();
    assert_check(
        &report,
        "storage_engine",
        CheckStatus::Fail,
        &["ENGINE = InnoDB"],
    );
    assert_contains(&check(&report, "storage_engine").found, &["MyISAM"]);
}

/// One session holds a row lock; another waits on it: the doctor reports
/// the wait once it has lasted, and nothing once the holder lets go. The
/// doctor reads as the server's own account (`JOBQ_MYSQL_ADMIN_URL`):
/// other sessions' lock waits need the PROCESS privilege.
#[tokio::test]
async fn a_transaction_waiting_on_a_jobq_jobs_row_lock_is_reported() {
    let Some(db) = TestDb::mysql() else { return };
    let own = own_database(&db, "jobq_doctor_locks").await;
    own.migrated().await;
    let admin = jobq_tests::scratch::mysql_admin_url(&own.url);
    let jobq = Jobq::connect_with(&admin, 2).await.unwrap();
    let id = jobq
        .enqueue_with(Probe::new(1), Enqueue::new().queue(unique_queue("locks")))
        .await
        .unwrap()
        .id;
    let mut holder = sqlx::MySqlConnection::connect(&own.url).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("SELECT id FROM jobq_jobs WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let url = own.url.clone();
    let waiter = tokio::spawn(async move {
        let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
        conn.execute("SET SESSION innodb_lock_wait_timeout = 30")
            .await
            .unwrap();
        sqlx::query("UPDATE jobq_jobs SET priority = 1 WHERE id = ?")
            .bind(id)
            .execute(&mut conn)
            .await
            .unwrap();
    });
    let reported = |status: CheckStatus, deadline: Duration| {
        let jobq = jobq.clone();
        async move {
            let last = std::sync::Mutex::new(String::new());
            let reached = eventually(deadline, || async {
                // InnoDB refreshes its lock views (INNODB_TRX, INNODB_LOCKS…)
                // only when they were not read for 0.1 s: polled faster,
                // they would show the same moment for ever.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let report = jobq.doctor().await.unwrap();
                let waits = check(&report, "lock_waits");
                *last.lock().unwrap() = waits.found.clone();
                waits.status == status
            })
            .await;
            assert!(
                reached,
                "lock_waits never {status:?}; last found: {}",
                last.lock().unwrap()
            );
            last.into_inner().unwrap()
        }
    };
    let found = reported(CheckStatus::Warn, Duration::from_secs(30)).await;
    assert_contains(&found, &["1 transactions wait on jobq_jobs row locks"]);
    tx.rollback().await.unwrap();
    waiter.await.unwrap();
    reported(CheckStatus::Ok, Duration::from_secs(10)).await;
}

/// SQLite plans a statement with the schema its connection last read: an
/// `EXPLAIN QUERY PLAN` on a connection that has read nothing since another
/// connection dropped an index still shows the index, and a cached one
/// shows it for as long as it stays cached. Here every connection of the
/// handle's pool has read the schema and run the doctor's plans before the
/// index goes (through a connection of the test's own), so whichever
/// connection the doctor gets is one that has not seen the drop. (It was a
/// 1-in-35 flake of `a_missing_claim_index_fails_the_claim_plan_with_advice`,
/// whose index went through one of the pool's two connections.)
#[tokio::test]
async fn sqlite_doctor_sees_an_index_another_connection_dropped() {
    let Some(db) = TestDb::sqlite() else { return };
    let own = own_database(&db, "jobq_doctor_idx_other").await;
    let jobq = own.migrated().await;
    let pool = jobq.sqlite_pool().expect("a SQLite handle").clone();
    for _ in 0..3 {
        // Both connections at once, so that both read the schema.
        let mut a = pool.acquire().await.unwrap();
        let mut b = pool.acquire().await.unwrap();
        for conn in [&mut a, &mut b] {
            sqlx::query("SELECT COUNT(*) FROM jobq_jobs")
                .fetch_all(&mut **conn)
                .await
                .unwrap();
        }
        drop((a, b));
        let report = jobq.doctor().await.unwrap();
        assert_check(&report, "plan_claim", CheckStatus::Ok, &[]);
    }
    let mut other = sqlx::SqliteConnection::connect(&own.url).await.unwrap();
    other.execute("DROP INDEX jobq_jobs_claim").await.unwrap();
    for _ in 0..3 {
        let report = jobq.doctor().await.unwrap();
        assert_check(&report, "plan_claim", CheckStatus::Fail, &["jobq migrate"]);
    }
}
