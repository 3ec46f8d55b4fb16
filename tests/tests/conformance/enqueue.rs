//! Enqueueing: idempotency keys, batches and their ids, the caller's transaction.

use super::*;

#[job(name = "conf_key", key = "conf-key:{user_id}")]
async fn keyed(ctx: JobContext, recorder: State<Recorder>, keys: State<KeyLog>, user_id: u64) {
    let _ = user_id;
    recorder.record(ctx.id(), ctx.attempt());
    keys.note(&ctx);
}

async fn an_existing_idempotency_key_returns_the_existing_job(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "key").await;
    // Keys live as long as their rows, and the database outlives test runs.
    let user: u64 = rand::random::<u32>().into();
    let first = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    let again = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    let other = jobq
        .enqueue_with(Keyed::new(user + 1), on(&queue))
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(again.duplicate);
    assert_eq!(again.id, first.id);
    assert_ne!(other.id, first.id);
    let info = jobq.job(first.id).await.unwrap().unwrap();
    assert_eq!(info.idempotency_key, Some(format!("conf-key:{user}")));
    // Another payload under a taken key: the first job and its payload stay.
    let taken = on(&queue).idempotency_key(format!("conf-key:{user}"));
    let other_payload = jobq
        .enqueue_with(Keyed::new(user + 3), taken)
        .await
        .unwrap();
    assert_eq!(
        (other_payload.id, other_payload.duplicate),
        (first.id, true)
    );
    let stored = jobq.job(first.id).await.unwrap().unwrap().payload;
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["user_id"], user, "the first payload is kept");
    // An explicit key overrides the template; the handler sees it.
    let explicit = format!("explicit-{queue}");
    let e = jobq
        .enqueue_with(
            Keyed::new(user + 2),
            on(&queue).idempotency_key(explicit.clone()),
        )
        .await
        .unwrap();
    let handle = worker(&jobq, &queue, 2, &recorder).build().unwrap().start();
    wait_for_status(&jobq, e.id, JobStatus::Done, LONG).await;
    wait_for_status(&jobq, first.id, JobStatus::Done, LONG).await;
    stop(handle).await;
    // Enqueueing a done job's key again still returns it: keys are unique for the row's lifetime.
    let after = jobq
        .enqueue_with(Keyed::new(user), on(&queue))
        .await
        .unwrap();
    assert_eq!(
        after,
        jobq_runtime::Enqueued {
            id: first.id,
            duplicate: true
        }
    );
}

async fn concurrent_enqueuers_of_one_key_create_one_row(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "race").await;
    let key = format!("race-{queue}");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let jobq = jobq.clone();
        let options = on(&queue).idempotency_key(key.clone());
        tasks.push(tokio::spawn(async move {
            jobq.enqueue_with(Record::new(1), options).await.unwrap()
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let ids: HashSet<i64> = results.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 1, "all enqueuers got one id: {results:?}");
    assert_eq!(
        results.iter().filter(|e| !e.duplicate).count(),
        1,
        "exactly one inserted"
    );
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
    let sql = jobq_tests::sql::Db::of(&jobq);
    let hits = sql.pick(
        "SELECT CAST(dedupe_hits AS SIGNED) FROM jobq_jobs WHERE id = ?",
        "SELECT dedupe_hits::int8 FROM jobq_jobs WHERE id = ?",
        "SELECT dedupe_hits FROM jobq_jobs WHERE id = ?",
    );
    let id = results[0].id;
    let hits: Vec<(i64,)> = sql.fetch_all(hits, &[id.into()]).await.unwrap();
    assert_eq!(
        hits,
        [(15,)],
        "each duplicate enqueue is counted on the row"
    );
}

async fn enqueue_many_returns_ids_in_input_order(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "many").await;
    let key = format!("many-{queue}");
    let existing = jobq
        .enqueue_with(Record::new(99), on(&queue).idempotency_key(key.clone()))
        .await
        .unwrap();
    let batch = vec![
        (Record::new(0), on(&queue)),
        (Record::new(1), on(&queue).idempotency_key(key)),
        (Record::new(2), on(&queue)),
    ];
    let out = jobq.enqueue_many_with(batch).await.unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(
        out[1],
        jobq_runtime::Enqueued {
            id: existing.id,
            duplicate: true
        }
    );
    assert!(!out[0].duplicate && !out[2].duplicate);
    for (i, e) in [(0u64, out[0]), (2, out[2])] {
        let info = jobq.job(e.id).await.unwrap().unwrap();
        let payload: serde_json::Value = serde_json::from_str(&info.payload).unwrap();
        assert_eq!(payload["n"], i, "row {} holds input {i}", e.id);
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().pending, 3);
}

/// Batches without keys are one INSERT each; the ids they return belong to
/// the rows in input order, even with other batches inserting at once.
async fn concurrent_keyless_batches_return_each_rows_id(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "keyless").await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4u64 {
        let jobq = jobq.clone();
        let queue = queue.clone();
        tasks.spawn(async move {
            // Batches 0 and 1 are due now (MySQL's short row form); batch 3
            // is delayed, so every row carries its own run_at.
            let options = |i: u64| {
                let options = on(&queue)
                    .priority(i16::try_from(t).unwrap())
                    .max_attempts(u32::try_from(t + 2).unwrap());
                if t == 3 {
                    options.delay(Duration::from_secs(3600 + i))
                } else {
                    options
                }
            };
            let batch = (0..300).map(|i| (Record::new(t * 1000 + i), options(i)));
            let ids = jobq.enqueue_many_with(batch).await.unwrap();
            (t, ids)
        });
    }
    let mut seen = HashSet::new();
    let soon = chrono::Utc::now() + chrono::Duration::minutes(30);
    for (t, ids) in tasks.join_all().await {
        assert_eq!(ids.len(), 300);
        for (i, e) in ids.into_iter().enumerate() {
            assert!(!e.duplicate && seen.insert(e.id), "{e:?}");
            let info = jobq.job(e.id).await.unwrap().unwrap();
            let payload: serde_json::Value = serde_json::from_str(&info.payload).unwrap();
            assert_eq!(
                payload["n"],
                t * 1000 + i as u64,
                "row {} of batch {t}",
                e.id
            );
            assert_eq!(
                (info.priority, u64::from(info.max_attempts)),
                (i16::try_from(t).unwrap(), t + 2),
                "row {} of batch {t}",
                e.id
            );
            assert_eq!(info.run_at > soon, t == 3, "row {} of batch {t}", e.id);
        }
    }
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1200);
}

async fn enqueue_in_follows_the_callers_transaction(db: TestDb) {
    let (jobq, queue, _) = fixture(&db, "outbox").await;
    macro_rules! in_tx {
        ($pool:expr, $commit:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = jobq
                .enqueue_in_with(&mut *tx, Record::new(u64::from($commit)), on(&queue))
                .await
                .unwrap();
            assert!(!e.duplicate, "{e:?}");
            if $commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            e.id
        }};
    }
    let (rolled_back, committed) = match db.backend() {
        jobq_runtime::Backend::MySql => {
            let pool = jobq.mysql_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        jobq_runtime::Backend::Postgres => {
            let pool = jobq.pg_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        _ => {
            let pool = jobq.sqlite_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
    };
    // SQLite may hand the rolled-back id out again; the payload tells the rows apart.
    if rolled_back != committed {
        assert!(jobq.job(rolled_back).await.unwrap().is_none());
    }
    let info = jobq.job(committed).await.unwrap().unwrap();
    assert_eq!(info.status, JobStatus::Pending);
    assert_eq!(
        info.payload, r#"{"n":1}"#,
        "the committed job, not the rolled-back one"
    );
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

async fn the_handler_sees_a_stable_idempotency_key(db: TestDb) {
    let (jobq, queue, recorder) = fixture(&db, "ctxkey").await;
    let keys = KeyLog::default();
    let handle = worker(&jobq, &queue, 1, &recorder)
        .state(keys.clone())
        .build()
        .unwrap()
        .start();
    let user: u64 = rand::random::<u32>().into();
    let keyed = enqueue(&jobq, Keyed::new(user), on(&queue)).await;
    wait_for_status(&jobq, keyed, JobStatus::Done, LONG).await;
    stop(handle).await;
    assert_eq!(keys.seen(), [format!("conf-key:{user}")]);
    let ctx = JobContext::detached(jobq_runtime::JobMeta::new(5, "conf_record", "q"));
    assert_eq!(
        ctx.idempotency_key(),
        "jobq:conf_record:5",
        "the default without a key"
    );
}

conformance!(
    an_existing_idempotency_key_returns_the_existing_job,
    concurrent_enqueuers_of_one_key_create_one_row,
    enqueue_many_returns_ids_in_input_order,
    concurrent_keyless_batches_return_each_rows_id,
    enqueue_in_follows_the_callers_transaction,
    the_handler_sees_a_stable_idempotency_key,
);
