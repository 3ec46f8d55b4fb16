//! Enqueue: one row, a batch (ids in input order, across the statements a
//! batch is split into), and one row on the caller's connection.

use super::*;

/// A new row is `pending` with what it was given, due when it was asked
/// to be: now (its `run_at` is its `created_at`), after a delay (exactly
/// that much later), or at an instant (that instant).
async fn an_enqueued_row_is_pending_with_what_it_was_given(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("enqueue-one");
    let key = format!("key-{queue}");
    let options = Enqueue::new()
        .queue(&queue)
        .priority(-7)
        .max_attempts(5)
        .idempotency_key(key.clone());
    let enqueued = __store::enqueue(&jobq, &row_with(1, options))
        .await
        .unwrap();
    assert!(!enqueued.duplicate);
    let (row, token) = stored(&jobq, enqueued.id).await;
    assert_eq!(row.id, enqueued.id);
    assert_eq!(
        (
            row.queue.as_str(),
            row.job_name.as_str(),
            row.payload.as_str()
        ),
        (queue.as_str(), JOB, r#"{"n":1}"#)
    );
    assert_eq!(
        (row.status, row.priority, row.attempts, row.max_attempts),
        (JobStatus::Pending, -7, 0, 5)
    );
    assert_eq!(row.run_at, row.created_at, "due now");
    assert_eq!((row.idempotency_key, row.last_error), (Some(key), None));
    assert_eq!(
        (row.claimed_by, row.claimed_at, row.finished_at),
        (None, None, None)
    );
    assert_eq!(token, None);

    let delayed = enqueue_row(
        &jobq,
        &row_with(
            2,
            Enqueue::new()
                .queue(&queue)
                .delay(Duration::from_secs(3600)),
        ),
    )
    .await;
    let delayed = info(&jobq, delayed).await;
    assert_eq!(
        delayed.run_at - delayed.created_at,
        chrono::TimeDelta::hours(1)
    );
    // An instant is stored to the microsecond.
    let at = chrono::DateTime::from_timestamp_micros(
        (chrono::Utc::now() + chrono::TimeDelta::hours(2)).timestamp_micros(),
    )
    .unwrap();
    let scheduled = enqueue_row(&jobq, &row_with(3, Enqueue::new().queue(&queue).run_at(at))).await;
    assert_eq!(info(&jobq, scheduled).await.run_at, at);
    assert_eq!(jobq.counts(&queue).await.unwrap().pending, 3);
}

/// An enqueue of a key that exists inserts nothing and returns the
/// existing row, unchanged, whatever else it asked for.
async fn an_existing_key_returns_its_row_unchanged(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("enqueue-key");
    let key = format!("key-{queue}");
    let first = __store::enqueue(
        &jobq,
        &row_with(1, Enqueue::new().queue(&queue).idempotency_key(&key)),
    )
    .await
    .unwrap();
    let before = info(&jobq, first.id).await;
    let again = Enqueue::new()
        .queue(unique_queue("enqueue-key-other"))
        .priority(9)
        .max_attempts(1)
        .delay(Duration::from_secs(60))
        .idempotency_key(&key);
    let again = __store::enqueue(&jobq, &row_with(2, again)).await.unwrap();
    assert_eq!((again.id, again.duplicate), (first.id, true));
    assert_eq!(info(&jobq, first.id).await, before);
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

/// A batch's results are its rows' ids in input order: new rows get
/// ascending ids, a key that exists returns its row, a key repeated in the
/// batch is one row.
async fn enqueue_many_returns_each_rows_id_in_input_order(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("enqueue-many");
    let existing_key = format!("existing-{queue}");
    let repeated_key = format!("repeated-{queue}");
    let keyed = |n, key: &str| row_with(n, Enqueue::new().queue(&queue).idempotency_key(key));
    let existing = enqueue_row(&jobq, &keyed(99, &existing_key)).await;
    let batch = vec![
        row(&queue, 0),
        keyed(1, &repeated_key),
        row(&queue, 2),
        keyed(3, &repeated_key),
        keyed(4, &existing_key),
        row(&queue, 5),
    ];
    let results = __store::enqueue_many(&jobq, batch).await.unwrap();

    let duplicates: Vec<bool> = results.iter().map(|e| e.duplicate).collect();
    assert_eq!(duplicates, [false, false, false, true, true, false]);
    assert_eq!(results[3].id, results[1].id, "a repeated key is one row");
    assert_eq!(results[4].id, existing, "an existing key returns its row");
    let new: Vec<i64> = [0, 1, 2, 5].iter().map(|&i| results[i].id).collect();
    assert!(new.is_sorted(), "new ids follow input order: {new:?}");
    for (i, enqueued) in results.iter().enumerate() {
        let n = match i {
            3 => 1,
            4 => 99,
            _ => i,
        };
        let payload = info(&jobq, enqueued.id).await.payload;
        assert_eq!(payload, format!("{{\"n\":{n}}}"), "result {i}");
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().pending, 5);
}

/// A batch larger than one statement takes (500 rows on MySQL/MariaDB,
/// 1,000 on PostgreSQL and SQLite) keeps input order across its
/// statements, with duplicates in different ones.
async fn enqueue_many_keeps_input_order_across_chunks(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("enqueue-chunks");
    let key = |name: &str| format!("{name}-{queue}");
    let keyed = |n, k: &str| row_with(n, Enqueue::new().queue(&queue).idempotency_key(key(k)));
    let existing = enqueue_row(&jobq, &keyed(0, "existing")).await;
    let mut rows: Vec<Row> = (1..=2500).map(|n| row(&queue, n)).collect();
    rows[10] = keyed(-10, "existing");
    rows[20] = keyed(-20, "batch");
    rows[2400] = keyed(-2400, "batch");
    let results = __store::enqueue_many(&jobq, rows).await.unwrap();
    assert_eq!(results.len(), 2500);

    let db = Db::of(&jobq);
    let sql = db.pick(
        "SELECT id, CAST(payload AS CHAR) FROM jobq_jobs WHERE queue = ?",
        "SELECT id, payload FROM jobq_jobs WHERE queue = ?",
        "SELECT id, payload FROM jobq_jobs WHERE queue = ?",
    );
    let stored: Vec<(i64, String)> = db
        .fetch_all(sql, &[Arg::from(queue.as_str())])
        .await
        .unwrap();
    assert_eq!(stored.len(), 2500 + 1 - 2);
    let payloads: std::collections::HashMap<i64, String> = stored.into_iter().collect();
    for (i, result) in results.iter().enumerate() {
        let n = match i {
            10 => 0,
            2400 => -20,
            20 => -20,
            _ => i as i64 + 1,
        };
        assert_eq!(
            payloads[&result.id],
            format!("{{\"n\":{n}}}"),
            "input {i} got row {}",
            result.id
        );
        assert_eq!(result.duplicate, i == 10 || i == 2400, "input {i}");
    }
    assert_eq!(results[10].id, existing);
    assert_eq!(results[2400].id, results[20].id);
    let new: Vec<i64> = results
        .iter()
        .filter(|e| !e.duplicate)
        .map(|e| e.id)
        .collect();
    assert!(new.is_sorted(), "new ids follow input order");
}

/// On the caller's connection the row is the caller's transaction's:
/// invisible to others until it commits, gone if it rolls back; a key that
/// exists returns its row there too.
async fn enqueue_in_writes_through_the_callers_transaction(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("enqueue-in");
    let key = format!("key-{queue}");
    let keyed = row_with(1, Enqueue::new().queue(&queue).idempotency_key(&key));
    /// Enqueues `row` in a transaction on `pool`; whether another
    /// connection saw it before the end; commits or rolls back.
    macro_rules! in_tx {
        ($pool:expr, $row:expr, $commit:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = __store::enqueue_in(&jobq, &mut *tx, $row).await.unwrap();
            let seen = jobq.job(e.id).await.unwrap();
            if $commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            (e, seen)
        }};
    }
    let runs = match db.backend() {
        Backend::MySql => {
            let pool = jobq.mysql_pool().unwrap();
            let rolled_back = in_tx!(pool, &row(&queue, 0), false);
            let committed = in_tx!(pool, &keyed, true);
            [rolled_back, committed, in_tx!(pool, &keyed, false)]
        }
        Backend::Postgres => {
            let pool = jobq.pg_pool().unwrap();
            let rolled_back = in_tx!(pool, &row(&queue, 0), false);
            let committed = in_tx!(pool, &keyed, true);
            [rolled_back, committed, in_tx!(pool, &keyed, false)]
        }
        _ => {
            let pool = jobq.sqlite_pool().unwrap();
            let rolled_back = in_tx!(pool, &row(&queue, 0), false);
            let committed = in_tx!(pool, &keyed, true);
            [rolled_back, committed, in_tx!(pool, &keyed, false)]
        }
    };
    let [
        (rolled_back, seen),
        (committed, seen_committed),
        (duplicate, _),
    ] = runs;
    assert!(
        seen.is_none() && seen_committed.is_none(),
        "seen before the commit"
    );
    assert!(!rolled_back.duplicate && !committed.duplicate);
    // SQLite may hand a rolled-back id out again; the payload tells them apart.
    let row = info(&jobq, committed.id).await;
    assert_eq!(
        (row.status, row.payload.as_str()),
        (JobStatus::Pending, r#"{"n":1}"#)
    );
    assert_eq!((duplicate.id, duplicate.duplicate), (committed.id, true));
    assert_eq!(
        info(&jobq, committed.id).await,
        row,
        "the duplicate changed nothing"
    );
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.total(), 1, "the rolled-back row is gone: {counts:?}");
}

contract!(
    an_enqueued_row_is_pending_with_what_it_was_given,
    an_existing_key_returns_its_row_unchanged,
    enqueue_many_returns_each_rows_id_in_input_order,
    enqueue_many_keeps_input_order_across_chunks,
    enqueue_in_writes_through_the_callers_transaction,
);
