//! The SQLite store's own tests: each operation on a real file.

use super::*;
use crate::store::contract::{ClaimRequest, Target};

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
    }
}

async fn claim_one(store: &SqliteStore, queue: &str, lease: Duration, worker: &str) -> ClaimedJob {
    let mut claimed = store.claim(ask(queue, 1, lease, worker)).await.unwrap();
    assert_eq!(claimed.len(), 1, "expected one claimable job in `{queue}`");
    claimed.pop().unwrap()
}

/// Reaps `queue` until it returns `expected` jobs (a lease of zero expires
/// one microsecond after the claim), for at most 5 s.
async fn reap_until(store: &SqliteStore, queue: &str, expected: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reaped = store.reap(queue, 500).await.unwrap();
        if reaped == expected {
            return;
        }
        assert_eq!(reaped, 0, "reaped an unexpected number of jobs");
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing to reap in `{queue}`"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn info(store: &SqliteStore, id: i64) -> JobInfo {
    store.job(id).await.unwrap().expect("the job exists")
}

#[tokio::test]
async fn a_stale_fence_cannot_settle_a_reclaimed_job() {
    let (_dir, store) = store().await;
    let id = store.enqueue(&job("q")).await.unwrap().id;

    let stale = claim_one(&store, "q", Duration::ZERO, "w1").await;
    reap_until(&store, "q", 1).await;
    let fresh = claim_one(&store, "q", Duration::from_secs(30), "w2").await;
    assert_eq!((stale.id, fresh.id), (id, id));
    assert_eq!((stale.attempt, fresh.attempt), (1, 2));
    assert_ne!(stale.token, fresh.token);

    assert_eq!(store.complete(&[stale.fence()]).await.unwrap(), 0);
    let stale_failure = Transition {
        fence: stale.fence(),
        target: Target::Failed,
        delay: Duration::ZERO,
        refund_attempt: false,
        error: Some("stale".into()),
    };
    assert!(!store.transition(&stale_failure).await.unwrap());
    let lost = store
        .heartbeat(&[stale.fence(), fresh.fence()], Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(lost, vec![stale.fence()]);
    assert_eq!(info(&store, id).await.status, crate::JobStatus::Processing);

    assert_eq!(store.complete(&[fresh.fence()]).await.unwrap(), 1);
    let done = info(&store, id).await;
    assert_eq!(done.status, crate::JobStatus::Done);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.claimed_by.as_deref(), Some("w2"));
    assert!(done.finished_at.is_some());
    let error = done.last_error.unwrap();
    assert!(
        error.starts_with("lease expired during attempt 1: worker w1 stopped renewing it"),
        "{error}"
    );
}

#[tokio::test]
async fn claims_take_priority_then_run_at_then_id() {
    let (_dir, store) = store().await;
    let now = Utc::now();
    let at = |secs_ago: i64, priority: i16| NewJob {
        priority,
        run_at: RunAt::At(now - chrono::Duration::seconds(secs_ago)),
        ..job("q")
    };
    let late_low = store.enqueue(&at(1, 5)).await.unwrap().id;
    let late = store.enqueue(&at(1, 0)).await.unwrap().id;
    let early_a = store.enqueue(&at(2, 0)).await.unwrap().id;
    let early_b = store.enqueue(&at(2, 0)).await.unwrap().id;
    let urgent_but_delayed = NewJob {
        priority: -10,
        run_at: RunAt::After(Duration::from_secs(3600)),
        ..job("q")
    };
    store.enqueue(&urgent_but_delayed).await.unwrap();

    let mut order = Vec::new();
    while let Some(claimed) = store
        .claim(ask("q", 1, Duration::from_secs(30), "w"))
        .await
        .unwrap()
        .pop()
    {
        order.push(claimed.id);
    }
    assert_eq!(order, vec![early_a, early_b, late, late_low]);
}

#[tokio::test]
async fn a_batch_claim_takes_the_first_jobs_in_claim_order() {
    let (_dir, store) = store().await;
    let now = Utc::now();
    let mut ids = Vec::new();
    for (secs_ago, priority) in [(1, 5), (1, 0), (2, 0), (3, 1)] {
        let row = NewJob {
            priority,
            run_at: RunAt::At(now - chrono::Duration::seconds(secs_ago)),
            ..job("q")
        };
        ids.push(store.enqueue(&row).await.unwrap().id);
    }
    let claimed = store
        .claim(ask("q", 3, Duration::from_secs(30), "w"))
        .await
        .unwrap();
    let claimed: Vec<i64> = claimed.iter().map(|c| c.id).collect();
    // (priority, run_at, id): the two priority-0 jobs, the earlier
    // run_at first, then the priority-1 one.
    assert_eq!(claimed, vec![ids[2], ids[1], ids[3]]);
}

#[tokio::test]
async fn a_job_is_not_claimed_before_its_run_at() {
    let (_dir, store) = store().await;
    let delayed = NewJob {
        run_at: RunAt::After(Duration::from_secs(3600)),
        ..job("q")
    };
    let scheduled = NewJob {
        run_at: RunAt::At(Utc::now() + chrono::Duration::hours(1)),
        ..job("q")
    };
    let delayed_id = store.enqueue(&delayed).await.unwrap().id;
    store.enqueue(&scheduled).await.unwrap();
    assert!(
        store
            .claim(ask("q", 10, Duration::from_secs(30), "w"))
            .await
            .unwrap()
            .is_empty()
    );

    let run_at = info(&store, delayed_id).await.run_at;
    let expected = Utc::now() + chrono::Duration::hours(1);
    assert!((run_at - expected).num_seconds().abs() < 60, "{run_at}");

    let past = NewJob {
        run_at: RunAt::At(Utc::now() - chrono::Duration::minutes(1)),
        ..job("q")
    };
    let past_id = store.enqueue(&past).await.unwrap().id;
    let claimed = store
        .claim(ask("q", 10, Duration::from_secs(30), "w"))
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![past_id]
    );
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
async fn a_transition_can_refund_the_attempt_and_keep_the_last_error() {
    let (_dir, store) = store().await;
    let id = store.enqueue(&job("q")).await.unwrap().id;
    let first = claim_one(&store, "q", Duration::from_secs(30), "w").await;
    let retry = Transition {
        fence: first.fence(),
        target: Target::Pending,
        delay: Duration::ZERO,
        refund_attempt: false,
        error: Some("first failure".into()),
    };
    assert!(store.transition(&retry).await.unwrap());
    let after_retry = info(&store, id).await;
    assert_eq!(after_retry.status, crate::JobStatus::Pending);
    assert_eq!(after_retry.attempts, 1);
    assert_eq!(after_retry.last_error.as_deref(), Some("first failure"));
    assert_eq!(after_retry.finished_at, None);

    let second = claim_one(&store, "q", Duration::from_secs(30), "w").await;
    assert_eq!(second.attempt, 2);
    let snooze = Transition {
        fence: second.fence(),
        target: Target::Pending,
        delay: Duration::from_secs(3600),
        refund_attempt: true,
        error: None,
    };
    assert!(store.transition(&snooze).await.unwrap());
    let snoozed = info(&store, id).await;
    assert_eq!(snoozed.status, crate::JobStatus::Pending);
    assert_eq!(snoozed.attempts, 1);
    assert_eq!(snoozed.last_error.as_deref(), Some("first failure"));
    assert!(snoozed.run_at > Utc::now() + chrono::Duration::minutes(59));
    assert!(
        store
            .claim(ask("q", 1, Duration::from_secs(30), "w"))
            .await
            .unwrap()
            .is_empty()
    );
    // A settle of an already-settled claim changes nothing.
    assert!(!store.transition(&snooze).await.unwrap());
}

#[tokio::test]
async fn a_failing_transition_sets_finished_at() {
    let (_dir, store) = store().await;
    let id = store.enqueue(&job("q")).await.unwrap().id;
    let claimed = claim_one(&store, "q", Duration::from_secs(30), "w").await;
    let fail = Transition {
        fence: claimed.fence(),
        target: Target::Failed,
        delay: Duration::ZERO,
        refund_attempt: false,
        error: Some("no such user".into()),
    };
    assert!(store.transition(&fail).await.unwrap());
    let failed = info(&store, id).await;
    assert_eq!(failed.status, crate::JobStatus::Failed);
    assert_eq!(failed.last_error.as_deref(), Some("no such user"));
    assert!(failed.finished_at.is_some());
}

#[tokio::test]
async fn the_reaper_fails_a_job_whose_last_attempt_expired() {
    let (_dir, store) = store().await;
    let last_try = NewJob {
        max_attempts: 1,
        ..job("q")
    };
    let id = store.enqueue(&last_try).await.unwrap().id;
    claim_one(&store, "q", Duration::ZERO, "w1").await;
    reap_until(&store, "q", 1).await;
    let failed = info(&store, id).await;
    assert_eq!(failed.status, crate::JobStatus::Failed);
    assert!(failed.finished_at.is_some());
    assert!(
        failed
            .last_error
            .unwrap()
            .contains("lease expired during attempt 1")
    );
}

#[tokio::test]
async fn a_heartbeat_extends_the_lease_of_held_jobs() {
    let (_dir, store) = store().await;
    let id = store.enqueue(&job("q")).await.unwrap().id;
    let claimed = claim_one(&store, "q", Duration::ZERO, "w").await;
    let lost = store
        .heartbeat(&[claimed.fence()], Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(lost.is_empty());
    assert_eq!(store.reap("q", 500).await.unwrap(), 0);
    assert!(info(&store, id).await.run_at > Utc::now() + chrono::Duration::minutes(59));
}

#[tokio::test]
async fn a_cancelled_job_loses_its_lease_and_can_be_retried() {
    let (_dir, store) = store().await;
    let id = store.enqueue(&job("q")).await.unwrap().id;
    let claimed = claim_one(&store, "q", Duration::from_secs(30), "w").await;
    let first = store.cancel(id).await.unwrap();
    assert_eq!(first.changed, 1);
    assert_eq!(first.held, [claimed.fence()], "the claim it ended");
    assert_eq!(store.cancel(id).await.unwrap().changed, 0);
    let cancelled = info(&store, id).await;
    assert_eq!(cancelled.status, crate::JobStatus::Cancelled);
    assert!(cancelled.finished_at.is_some());
    let lost = store
        .heartbeat(&[claimed.fence()], Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(lost, vec![claimed.fence()]);
    assert_eq!(store.complete(&[claimed.fence()]).await.unwrap(), 0);

    assert!(store.retry(id).await.unwrap());
    assert!(!store.retry(id).await.unwrap());
    let retried = info(&store, id).await;
    assert_eq!(retried.status, crate::JobStatus::Pending);
    assert_eq!(retried.finished_at, None);
    assert!(retried.max_attempts > retried.attempts);
    assert_eq!(
        claim_one(&store, "q", Duration::from_secs(30), "w")
            .await
            .attempt,
        2
    );
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
