//! The SQLite store's own tests, of what only SQLite does: its plans under
//! small-table statistics, an in-memory database shared by the pool, a new
//! file connected and migrated from many connections at once, its URLs and
//! versions. What every backend's store promises (claims, settles,
//! heartbeats, reaps, cancels…) is in the contract suite
//! (`tests/tests/contract/`), run on every backend.

use super::*;
use crate::store::contract::ClaimRequest;

/// A claim of up to `limit` jobs of `queue`.
fn ask<'a>(queue: &'a str, limit: u32, lease: Duration, worker: &'a str) -> ClaimRequest<'a> {
    ClaimRequest {
        queue,
        limit,
        lease,
        worker,
    }
}

/// A migrated store on a fresh file; keep the directory alive.
async fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
    let store = SqliteStore::connect(&url, &crate::ConnectOptions::new().max_connections(4))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (dir, store)
}

fn job(queue: &str) -> NewJob {
    NewJob {
        queue: queue.to_owned(),
        job_name: "probe".to_owned(),
        payload: "{}".to_owned(),
        priority: 0,
        max_attempts: 3,
        run_at: RunAt::Now,
        idempotency_key: None,
        unique: None,
        concurrency: None,
        metadata: None,
        tags: Vec::new(),
    }
}

#[tokio::test]
async fn the_claim_and_the_reaper_use_the_index_without_sorting() {
    let (_dir, store) = store().await;
    for sql in [PICK, REAP] {
        let plan: Vec<String> = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
            .fetch_all(store.pool())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect();
        let plan = plan.join("\n");
        assert!(
            plan.contains("INDEX jobq_jobs_claim (queue=? AND status=?)"),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

/// With the statistics of a 1,000-row table, SQLite plans a literal
/// IN-list of 256 ids as a full scan, and a connection keeps that plan
/// while the table grows (a million finished rows: 200 ms per settle).
/// The claim, settle and heartbeat read their ids from `json_each` and
/// look every row up by primary key under the same statistics.
#[tokio::test]
async fn settles_and_heartbeats_look_rows_up_by_primary_key_under_small_table_statistics() {
    let (_dir, store) = store().await;
    store.enqueue_many(&vec![job("q"); 1000]).await.unwrap();
    let mut conn = store.pool().acquire().await.unwrap();
    conn.execute("ANALYZE").await.unwrap();
    async fn plan(conn: &mut SqliteConnection, sql: &str) -> String {
        let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
            .fetch_all(conn)
            .await
            .unwrap();
        rows.iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect::<Vec<_>>()
            .join("\n")
    }
    let literal = format!(
        "UPDATE jobq_jobs SET finished_at = 1 WHERE status = 'processing' AND id IN ({})",
        vec!["?"; 256].join(", ")
    );
    let scan = plan(&mut conn, &literal).await;
    assert!(
        scan.contains("SCAN jobq_jobs"),
        "statistics not small: {scan}"
    );
    for sql in [COMPLETE, HEARTBEAT, CLAIM] {
        let plan = plan(&mut conn, sql).await;
        assert!(
            plan.contains("SEARCH jobq_jobs USING INTEGER PRIMARY KEY (rowid=?)")
                && !plan.contains("SCAN jobq_jobs"),
            "{sql}\n{plan}"
        );
    }
}

#[tokio::test]
async fn an_in_memory_database_is_one_database_for_the_whole_pool() {
    let store = SqliteStore::connect(
        "sqlite::memory:",
        &crate::ConnectOptions::new().max_connections(8),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.spawn(async move { store.enqueue(&job("q")).await.unwrap().id });
    }
    let ids = tasks.join_all().await;
    for id in ids {
        assert!(store.job(id).await.unwrap().is_some());
    }
    let claimed = store
        .claim(ask("q", 100, Duration::from_secs(30), "w"))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 8);
}

#[tokio::test]
async fn concurrent_connects_and_migrations_of_a_new_file_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("new.db").display());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let url = url.clone();
        tasks.spawn(async move {
            let store =
                SqliteStore::connect(&url, &crate::ConnectOptions::new().max_connections(2))
                    .await?;
            store.migrate().await?;
            store.enqueue(&job("q")).await
        });
    }
    for result in tasks.join_all().await {
        result.unwrap();
    }
    let store = SqliteStore::connect(&url, &crate::ConnectOptions::new().max_connections(1))
        .await
        .unwrap();
    let migrations: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobq_migrations")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        migrations,
        i64::try_from(MIGRATIONS.len()).unwrap(),
        "each migration applied once"
    );
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn in_memory_urls_are_recognised() {
    assert!(is_memory("sqlite::memory:"));
    assert!(is_memory("sqlite://:memory:"));
    assert!(is_memory("sqlite://shared?mode=memory"));
    assert!(!is_memory("sqlite://jobs.db"));
    assert!(!is_memory("sqlite:///tmp/memory.db?mode=rwc"));
}

#[test]
fn versions_compare_by_major_then_minor() {
    assert!(version_at_least("3.46.0", (3, 35)));
    assert!(version_at_least("3.35.5", (3, 35)));
    assert!(!version_at_least("3.34.1", (3, 35)));
    assert!(version_at_least("4.0.0", (3, 35)));
}

/// The plain claim picks, then claims in a second statement (no
/// transaction around them): a row another process claimed in between, or
/// that went back to `pending` for later, is left out by the claim's guard
/// rather than claimed twice. Here the rows are picked, then changed
/// behind the claim's back, then the claim statement runs on the pick.
#[tokio::test]
async fn a_row_claimed_or_rescheduled_since_the_pick_is_not_claimed() {
    let (_dir, store) = store().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(store.enqueue(&job("guard")).await.unwrap().id);
    }
    let now = now_micros();
    let picked: Vec<(i64, i64)> = sqlx::query_as(PICK)
        .bind("guard")
        .bind(now)
        .bind(10)
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(picked.len(), 3);
    // Another process claims the first; the second is rescheduled an hour out.
    let other = store
        .claim(ask("guard", 1, Duration::from_secs(30), "other"))
        .await
        .unwrap();
    assert_eq!(other.iter().map(|j| j.id).collect::<Vec<_>>(), [ids[0]]);
    sqlx::query("UPDATE jobq_jobs SET run_at = run_at + 3600000000 WHERE id = ?1")
        .bind(ids[1])
        .execute(store.pool())
        .await
        .unwrap();
    let rows: Vec<ClaimRow> = sqlx::query_as(CLAIM)
        .bind(new_token_base())
        .bind(now)
        .bind(now + 30_000_000)
        .bind("late")
        .bind(json_list(&ids))
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [ids[2]]);
    let first = store.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(first.claimed_by.as_deref(), Some("other"));
    assert_eq!(first.attempts, 1, "claimed once");
}
