//! Workers' rows (`jobq_workers`): registered, refreshed, read while they
//! live, deleted at a clean shutdown or, once expired, by any worker.
//!
//! Every worker of every test shares the table, so rows are found by their
//! worker id, and a prune's count is "at least".

use super::*;

/// A row of a worker of this test, with a random key.
fn worker_row(worker_id: &str) -> __store::WorkerRow {
    __store::WorkerRow {
        id: rand::random::<i64>().abs(),
        worker_id: worker_id.to_owned(),
        host: "contract-host".to_owned(),
        pid: 4242,
        version: "0.0.0-contract".to_owned(),
        queues: r#"[{"name":"contract-none","concurrency":2}]"#.to_owned(),
        jobs: "[]".to_owned(),
        running: 1,
    }
}

/// The live row of `worker_id`, if any, and the clock it was read at.
async fn live(
    jobq: &Jobq,
    worker_id: &str,
) -> (chrono::DateTime<chrono::Utc>, Option<__store::LiveWorker>) {
    let (now, rows) = __store::live_workers(jobq).await.unwrap();
    let mut mine: Vec<_> = rows
        .into_iter()
        .filter(|w| w.worker_id == worker_id)
        .collect();
    assert!(mine.len() <= 1, "{mine:?}");
    (now, mine.pop())
}

/// Moves the expiry of worker row `id` an hour into the past.
async fn expire_worker(jobq: &Jobq, id: i64) {
    let db = Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_workers SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE id = ?",
        "UPDATE jobq_workers SET expires_at = now() - interval '1 hour' WHERE id = ?",
        "UPDATE jobq_workers SET expires_at = expires_at - 7200000000 WHERE id = ?",
    );
    assert_eq!(db.execute(sql, &[Arg::Int(id)]).await.unwrap(), 1);
}

/// A registered row is read back as written, expiring its time to live
/// after it was last seen; a refresh updates its running count and
/// expiry, not its start; an unregistered row is gone, and a refresh of
/// it says so.
async fn a_worker_row_lives_from_register_to_unregister(db: TestDb) {
    let jobq = db.jobq().await;
    let worker_id = unique_queue("contract-worker");
    let row = worker_row(&worker_id);
    __store::register_worker(&jobq, &row, Duration::from_secs(60))
        .await
        .unwrap();
    let (now, read) = live(&jobq, &worker_id).await;
    let read = read.expect("a live row");
    assert_eq!(
        (
            &read.host,
            read.pid,
            &read.version,
            &read.queues,
            &read.jobs,
            read.running
        ),
        (&row.host, row.pid, &row.version, &row.queues, &row.jobs, 1)
    );
    assert_eq!(read.started_at, read.last_seen);
    assert_eq!(
        read.expires_at - read.last_seen,
        chrono::TimeDelta::seconds(60)
    );
    assert!(
        read.last_seen <= now && now < read.expires_at,
        "{read:?} at {now}"
    );

    assert!(
        __store::refresh_worker(&jobq, row.id, 3, Duration::from_secs(120))
            .await
            .unwrap()
    );
    let refreshed = live(&jobq, &worker_id).await.1.expect("a live row");
    assert_eq!(
        (refreshed.running, refreshed.started_at),
        (3, read.started_at)
    );
    assert!(refreshed.last_seen >= read.last_seen);
    assert_eq!(
        refreshed.expires_at - refreshed.last_seen,
        chrono::TimeDelta::seconds(120)
    );

    __store::unregister_worker(&jobq, row.id).await.unwrap();
    assert!(live(&jobq, &worker_id).await.1.is_none());
    assert!(
        !__store::refresh_worker(&jobq, row.id, 0, Duration::from_secs(60))
            .await
            .unwrap()
    );
}

/// An expired row is not live, and a prune deletes it (and no live row);
/// its worker then registers again.
async fn an_expired_worker_row_is_not_live_and_is_pruned(db: TestDb) {
    let jobq = db.jobq().await;
    let gone_id = unique_queue("contract-worker-gone");
    let alive_id = unique_queue("contract-worker-alive");
    let (gone, alive) = (worker_row(&gone_id), worker_row(&alive_id));
    for row in [&gone, &alive] {
        __store::register_worker(&jobq, row, Duration::from_secs(60))
            .await
            .unwrap();
    }
    expire_worker(&jobq, gone.id).await;
    assert!(live(&jobq, &gone_id).await.1.is_none(), "expired: not live");
    assert!(__store::prune_workers(&jobq).await.unwrap() >= 1);
    let rows: Vec<(i64,)> = Db::of(&jobq)
        .fetch_all(
            "SELECT id FROM jobq_workers WHERE id = ?",
            &[Arg::Int(gone.id)],
        )
        .await
        .unwrap();
    assert!(rows.is_empty(), "the expired row is deleted");
    assert!(
        live(&jobq, &alive_id).await.1.is_some(),
        "the live row stays"
    );
    assert!(
        !__store::refresh_worker(&jobq, gone.id, 0, Duration::from_secs(60))
            .await
            .unwrap()
    );
    __store::register_worker(&jobq, &gone, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(live(&jobq, &gone_id).await.1.is_some(), "registered again");
    for row in [&gone, &alive] {
        __store::unregister_worker(&jobq, row.id).await.unwrap();
    }
}

contract!(
    a_worker_row_lives_from_register_to_unregister,
    an_expired_worker_row_is_not_live_and_is_pruned,
);
