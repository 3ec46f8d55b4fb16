//! `Jobq::migrate` keeps its versions in `jobq_migrations`, so it lives beside
//! the application's own sqlx migrations in the same database.

use jobq_runtime::Jobq;
use jobq_tests::TestDb;

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
            20_261_204_000_002
        ]
    );
    let app_versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(app_versions, [1]);
}
