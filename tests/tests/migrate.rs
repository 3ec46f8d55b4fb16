//! `Jobq::migrate` keeps its versions in `jobq_migrations`, so it lives beside
//! the application's own sqlx migrations in the same database.

use jobq_runtime::Jobq;
use jobq_tests::TestDb;
use jobq_tests::sql::Db;

#[tokio::test]
async fn jobq_and_the_applications_sqlx_migrations_coexist() {
    let db = TestDb::sqlite().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("1_app_users.sql"),
        "CREATE TABLE app_users (id INTEGER PRIMARY KEY, name TEXT NOT NULL);",
    )
    .unwrap();
    let app = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();

    let jobq = Jobq::connect(db.url()).await.unwrap();
    let pool = jobq.sqlite_pool().unwrap().clone();
    app.run(&pool).await.unwrap();
    jobq.migrate().await.unwrap();
    // Both run again, in either order, without tripping over the other's versions.
    app.run(&pool).await.unwrap();
    jobq.migrate().await.unwrap();

    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM jobq_migrations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        versions,
        [
            20_261_129_000_001,
            20_261_130_000_001,
            20_261_201_170_001,
            20_261_204_000_001,
            20_261_204_000_002,
            20_261_204_120_001,
            20_261_204_120_002,
            20_261_205_000_001,
            20_261_206_000_001,
            20_261_206_000_002,
            20_261_207_000_001,
            20_261_207_000_002,
            20_261_209_000_001,
            20_261_209_000_002,
            20_261_209_000_003,
            20_261_210_000_001,
            20_261_211_000_001,
            20_261_212_000_001,
            20_261_213_000_001,
        ]
    );
    let app_versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(app_versions, [1]);
}

/// Six handles (each with a pool of its own, as six processes would have)
/// migrate one new, empty database at once: every call succeeds, and each
/// version is recorded exactly once.
async fn many_handles_migrate_a_new_database_at_once(db: TestDb) {
    let scratch = db.scratch("jobq_migrate_race").await;
    let mut handles = Vec::new();
    for _ in 0..6 {
        handles.push(Jobq::connect_with(scratch.url(), 1).await.unwrap());
    }
    let runs = handles.iter().map(Jobq::migrate);
    for result in futures_util::future::join_all(runs).await {
        result.expect("a concurrent migrate failed");
    }

    let recorded: Vec<(i64, i64)> = Db::of(&handles[0])
        .fetch_all(
            "SELECT version, COUNT(*) FROM jobq_migrations GROUP BY version ORDER BY version",
            &[],
        )
        .await
        .unwrap();
    assert!(!recorded.is_empty(), "no migration recorded");
    for (version, times) in &recorded {
        assert_eq!(*times, 1, "version {version} recorded {times} times");
    }
    // Nothing is left to apply: the recorded versions are the embedded ones.
    let report = handles[0].doctor().await.unwrap();
    let migrations = report.check("migrations").expect("a migrations check");
    assert_eq!(
        migrations.status,
        jobq_runtime::CheckStatus::Ok,
        "{migrations:#?}"
    );
}

/// A database migrated by the jobq of 2026-12-04 has an index by enqueue
/// time, written at every enqueue and read by no statement now (a time
/// filter reads a range of ids): migrating drops it, and migrating again
/// with it already gone changes nothing.
async fn the_enqueue_time_index_of_an_earlier_jobq_is_dropped(db: TestDb) {
    let scratch = db.scratch("jobq_migrate_created").await;
    let jobq = scratch.jobq(2).await;
    jobq.migrate().await.unwrap();
    let sql = Db::of(&jobq);
    let (create, has) = match sql {
        Db::Postgres(_) => return, // it never had one
        Db::MySql(_) => (
            "ALTER TABLE jobq_jobs ADD INDEX jobq_jobs_created (created_at)",
            "SELECT COUNT(*) FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'jobq_jobs' AND INDEX_NAME = 'jobq_jobs_created'",
        ),
        Db::Sqlite(_) => (
            "CREATE INDEX jobq_jobs_created ON jobq_jobs (created_at)",
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'jobq_jobs_created'",
        ),
    };
    let forget = "DELETE FROM jobq_migrations WHERE version = 20261204120001";
    let indexes = async || sql.fetch_all::<(i64,)>(has, &[]).await.unwrap()[0].0;
    sql.execute(create, &[]).await.unwrap();
    sql.execute(forget, &[]).await.unwrap();
    assert_eq!(indexes().await, 1, "the earlier jobq's table");
    jobq.migrate().await.unwrap();
    assert_eq!(indexes().await, 0, "dropped");
    sql.execute(forget, &[]).await.unwrap();
    jobq.migrate()
        .await
        .expect("the migration again, the index gone");
    assert_eq!(indexes().await, 0);
}

jobq_tests::on_every_backend!(
    many_handles_migrate_a_new_database_at_once,
    the_enqueue_time_index_of_an_earlier_jobq_is_dropped
);

/// SQLite: a table migrated before the key index was partial (every row an
/// entry of the column's `UNIQUE` index) is rebuilt with the partial index:
/// every row kept with its id, the AUTOINCREMENT counter carried over (an id
/// of a deleted job is not handed out again), keys still deduplicated.
#[tokio::test]
async fn sqlite_s_key_index_becomes_partial_keeping_every_row_and_the_id_counter() {
    let db = TestDb::sqlite().unwrap();
    let jobq = Jobq::connect(db.url()).await.unwrap();
    jobq.migrate().await.unwrap();
    let pool = jobq.sqlite_pool().unwrap().clone();
    let run = async |sql: &str| {
        sqlx::raw_sql(sql).execute(&pool).await.unwrap();
    };
    // The earlier shape, with rows: ids 1-3, the newest (4) deleted.
    let earlier = include_str!("../../jobq-runtime/migrations/sqlite/20261129000001_jobq_jobs.sql");
    run("DROP TABLE jobq_jobs").await;
    run(earlier).await;
    run("INSERT INTO jobq_jobs (queue, job_name, payload, run_at, max_attempts, idempotency_key, created_at) VALUES \
         ('q', 'a', '{}', 1, 3, 'k1', 1), ('q', 'a', '{}', 2, 3, NULL, 2), ('q', 'b', '{}', 3, 3, NULL, 3), \
         ('q', 'b', '{}', 4, 3, 'k4', 4)")
        .await;
    run("DELETE FROM jobq_jobs WHERE id = 4").await;
    run("DELETE FROM jobq_migrations WHERE version = 20261204120002").await;
    let indexes = async || -> Vec<(String, Option<String>)> {
        sqlx::query_as(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobq_jobs' ORDER BY name",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    assert!(
        indexes()
            .await
            .iter()
            .any(|(name, _)| name.starts_with("sqlite_autoindex_jobq_jobs")),
        "the earlier shape: {:?}",
        indexes().await
    );

    jobq.migrate().await.unwrap();

    let after = indexes().await;
    let names: Vec<&str> = after.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "jobq_jobs_claim",
            "jobq_jobs_finished",
            "jobq_jobs_idempotency_key",
            "jobq_jobs_job_name"
        ]
    );
    let key_index = after[2].1.as_deref().unwrap();
    assert!(
        key_index.contains("WHERE idempotency_key IS NOT NULL"),
        "{key_index}"
    );
    let rows: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT id, idempotency_key FROM jobq_jobs ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(rows, [(1, Some("k1".into())), (2, None), (3, None)]);
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Probe {}
    impl jobq_runtime::Job for Probe {
        const NAME: &'static str = "migrate_probe";
    }
    let options = |key: Option<&str>| {
        let options = jobq_runtime::Enqueue::new().queue("q");
        match key {
            Some(key) => options.idempotency_key(key),
            None => options,
        }
    };
    let fresh = jobq.enqueue_with(Probe {}, options(None)).await.unwrap();
    assert_eq!(fresh.id, 5, "past the deleted job's id");
    let again = jobq
        .enqueue_with(Probe {}, options(Some("k1")))
        .await
        .unwrap();
    assert_eq!(again.id, 1, "the key still taken");
    assert!(again.duplicate);
}
