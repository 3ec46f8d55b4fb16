//! Unique jobs by state and period: a unique key is taken while the job
//! that holds it is in one of its states and within its period, and free
//! as soon as that job moves on — whatever moved it (settle, cancel,
//! failure, prune) — or its period passes; concurrent enqueues of one key
//! make one job, also from several handles (on Galera, several nodes); a
//! batch and a caller's transaction take keys as single enqueues do.

use jobq_runtime::Unique;

use super::*;

/// A row of [`JOB`] on `queue` under unique key `key`, kept as `unique` says.
fn unique_row(queue: &str, key: &str, unique: Unique, n: i64) -> Row {
    row_with(
        n,
        Enqueue::new()
            .queue(queue)
            .max_attempts(3)
            .idempotency_key(key)
            .unique(unique),
    )
}

/// Enqueues `row`: its id and whether it was a duplicate.
async fn enqueue_unique(jobq: &Jobq, row: &Row) -> (i64, bool) {
    let enqueued = __store::enqueue(jobq, row).await.unwrap();
    (enqueued.id, enqueued.duplicate)
}

/// Moves the end of the period of unique key `key` an hour back, as if its
/// holder was enqueued long ago.
async fn period_passed(jobq: &Jobq, key: &str) {
    let db = Db::of(jobq);
    let sql = db.pick(
        "UPDATE jobq_unique SET held_until = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR WHERE ukey = ?",
        "UPDATE jobq_unique SET held_until = now() - interval '1 hour' WHERE ukey = ?",
        "UPDATE jobq_unique SET held_until = held_until - 7200000000 WHERE ukey = ?",
    );
    assert_eq!(
        db.execute(sql, &[Arg::Text(key.to_owned())]).await.unwrap(),
        1
    );
}

/// Unique while active: a duplicate returns the holder while it is
/// pending and while it runs; once it is done the key enqueues a new job,
/// which holds it from then on. The key is the job's, as stored and as
/// its claim hands it to the handler; the plain key column stays free.
async fn a_key_unique_while_active_is_taken_until_its_job_finishes(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-active");
    let key = format!("digest:{queue}");
    let active = |n| unique_row(&queue, &key, Unique::while_active(), n);

    let (first, duplicate) = enqueue_unique(&jobq, &active(1)).await;
    assert!(!duplicate);
    assert_eq!(enqueue_unique(&jobq, &active(2)).await, (first, true));
    let claimed = __store::claim_rows(&jobq, &queue, 10, LEASE, "w")
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(
        enqueue_unique(&jobq, &active(3)).await,
        (first, true),
        "running"
    );
    let row = info(&jobq, first).await;
    assert_eq!(
        (row.payload.as_str(), row.idempotency_key.as_deref()),
        (r#"{"n":1}"#, Some(key.as_str()))
    );

    let held = (claimed[0].claim.id, claimed[0].claim.token);
    assert_eq!(__store::complete(&jobq, &[held]).await.unwrap(), 1);
    let (second, duplicate) = enqueue_unique(&jobq, &active(4)).await;
    assert!(!duplicate && second != first, "a done job holds no key");
    assert_eq!(enqueue_unique(&jobq, &active(5)).await, (second, true));
    // A plain idempotency key of the same text is another namespace.
    let plain = row_with(6, Enqueue::new().queue(&queue).idempotency_key(&key));
    let (plain_id, duplicate) = enqueue_unique(&jobq, &plain).await;
    assert!(!duplicate && plain_id != second);
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.done), (2, 1), "{counts:?}");
}

/// Unique while pending: the key is free as soon as its job starts, and a
/// cancelled job frees a key unique while active; one unique while active
/// or failed keeps it through a failure, until cancelled.
async fn each_state_set_frees_its_key_when_its_job_leaves_it(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-states");

    let key = format!("pending:{queue}");
    let (first, _) =
        enqueue_unique(&jobq, &unique_row(&queue, &key, Unique::while_pending(), 1)).await;
    claim_only(&jobq, &queue, first, "w").await;
    let (second, duplicate) =
        enqueue_unique(&jobq, &unique_row(&queue, &key, Unique::while_pending(), 2)).await;
    assert!(
        !duplicate && second != first,
        "a running job holds no pending-only key"
    );
    __store::cancel(&jobq, second).await.unwrap();

    let key = format!("active:{queue}");
    let (third, _) =
        enqueue_unique(&jobq, &unique_row(&queue, &key, Unique::while_active(), 3)).await;
    assert!(__store::cancel(&jobq, third).await.unwrap().0);
    let (fourth, duplicate) =
        enqueue_unique(&jobq, &unique_row(&queue, &key, Unique::while_active(), 4)).await;
    assert!(
        !duplicate && fourth != third,
        "a cancelled job holds no active key"
    );
    __store::cancel(&jobq, fourth).await.unwrap();

    let key = format!("failed:{queue}");
    let kept = |n| unique_row(&queue, &key, Unique::while_active_or_failed(), n);
    let (fifth, _) = enqueue_unique(&jobq, &kept(5)).await;
    let held = claim_only(&jobq, &queue, fifth, "w").await;
    let failed = __store::transition(&jobq, fence(&held), true, Duration::ZERO, false, None);
    assert!(failed.await.unwrap());
    assert_finished(&jobq, fifth, JobStatus::Failed).await;
    assert_eq!(
        enqueue_unique(&jobq, &kept(6)).await,
        (fifth, true),
        "failed holds"
    );
    assert!(jobq.retry(fifth).await.unwrap());
    assert_eq!(
        enqueue_unique(&jobq, &kept(7)).await,
        (fifth, true),
        "retried holds"
    );
    __store::cancel(&jobq, fifth).await.unwrap();
    let (sixth, duplicate) = enqueue_unique(&jobq, &kept(8)).await;
    assert!(!duplicate && sixth != fifth, "a cancelled job holds no key");
}

/// Unique for a period: the key is taken in any state, finished included,
/// until the period since the holder's enqueue has passed; with states as
/// well, both must hold.
async fn a_key_unique_for_a_period_is_taken_in_any_state_until_the_period_passes(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-period");
    let hour = Duration::from_secs(3600);

    let key = format!("hourly:{queue}");
    let hourly = |n| unique_row(&queue, &key, Unique::for_period(hour), n);
    let (first, _) = enqueue_unique(&jobq, &hourly(1)).await;
    __store::cancel(&jobq, first).await.unwrap();
    assert_eq!(
        enqueue_unique(&jobq, &hourly(2)).await,
        (first, true),
        "cancelled, within the hour"
    );
    period_passed(&jobq, &key).await;
    let (second, duplicate) = enqueue_unique(&jobq, &hourly(3)).await;
    assert!(!duplicate && second != first, "the period passed");
    assert_eq!(
        enqueue_unique(&jobq, &hourly(4)).await,
        (second, true),
        "a new period"
    );

    let key = format!("both:{queue}");
    let both = |n| unique_row(&queue, &key, Unique::while_active().within(hour), n);
    let (third, _) = enqueue_unique(&jobq, &both(5)).await;
    assert_eq!(enqueue_unique(&jobq, &both(6)).await, (third, true));
    period_passed(&jobq, &key).await;
    let (fourth, duplicate) = enqueue_unique(&jobq, &both(7)).await;
    assert!(
        !duplicate && fourth != third,
        "still pending, but the period passed"
    );
    assert_eq!(info(&jobq, third).await.status, JobStatus::Pending);
}

/// A pruned holder frees its key, even one unique for every state, and
/// the prune deletes the key's row (a key held by a live job keeps its).
async fn a_pruned_holder_frees_its_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-pruned");
    let key = format!("pruned:{queue}");
    let daily = |n| {
        unique_row(
            &queue,
            &key,
            Unique::for_period(Duration::from_secs(86_400)),
            n,
        )
    };
    let (first, _) = enqueue_unique(&jobq, &daily(1)).await;
    __store::cancel(&jobq, first).await.unwrap();
    assert_eq!(enqueue_unique(&jobq, &daily(2)).await, (first, true));
    // Another key, its holder pending: its row stays.
    let kept = format!("kept:{queue}");
    let live = |n| unique_row(&queue, &kept, Unique::while_active(), n);
    let (holder, _) = enqueue_unique(&jobq, &live(9)).await;
    // The holder pruned (as a prune deletes a finished row; the real prune,
    // which works on every queue of the shared database, is left to
    // prune.rs), then the key rows whose holders are gone.
    let db = Db::of(&jobq);
    let sql = "DELETE FROM jobq_jobs WHERE id = ?";
    assert_eq!(db.execute(sql, &[Arg::Int(first)]).await.unwrap(), 1);
    // (Another test's prune may delete it first: the count is not this test's.)
    __store::prune_unique(&jobq).await.unwrap();
    assert_eq!(
        key_rows(&jobq, &key).await,
        0,
        "the key's row went with its holder"
    );
    assert_eq!(
        key_rows(&jobq, &kept).await,
        1,
        "a live holder's key row stays"
    );
    let (second, duplicate) = enqueue_unique(&jobq, &daily(3)).await;
    assert!(!duplicate && second != first);
    assert_eq!(enqueue_unique(&jobq, &live(10)).await, (holder, true));
}

/// How many rows `jobq_unique` has for `key`.
async fn key_rows(jobq: &Jobq, key: &str) -> i64 {
    let db = Db::of(jobq);
    let rows: Vec<(i64,)> = db
        .fetch_all(
            "SELECT COUNT(*) FROM jobq_unique WHERE ukey = ?",
            &[Arg::Text(key.to_owned())],
        )
        .await
        .unwrap();
    rows[0].0
}

/// Concurrent enqueues of one unique key from 6 handles, each with a pool
/// of its own (on Galera, spread over the nodes), 20 keys one after the
/// other (unique while active, and for a period, in turn; half of them
/// held before by a job that finished, so the racers take the key over):
/// each key makes one job, and every enqueue returns its id.
async fn concurrent_enqueues_of_one_unique_key_make_one_job(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-race");
    let mut handles = Vec::new();
    for _ in 0..6 {
        handles.push(Jobq::connect(db.url()).await.unwrap());
    }
    for round in 0..20 {
        let key = format!("race:{queue}:{round}");
        if round % 4 < 2 {
            // A key whose holder has finished: the racers take it over.
            let row = unique_row(&queue, &key, Unique::while_active(), -1);
            let (holder, _) = enqueue_unique(&jobq, &row).await;
            assert!(__store::cancel(&jobq, holder).await.unwrap().0);
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(handles.len()));
        let tasks: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(i, handle)| {
                let (handle, barrier) = (handle.clone(), barrier.clone());
                let rules = if round % 2 == 0 {
                    Unique::while_active()
                } else {
                    Unique::for_period(Duration::from_secs(3600))
                };
                let row = unique_row(&queue, &key, rules, i as i64);
                tokio::spawn(async move {
                    barrier.wait().await;
                    __store::enqueue(&handle, &row).await.unwrap()
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        let ids: std::collections::BTreeSet<i64> = results.iter().map(|e| e.id).collect();
        let counts = jobq.counts(&queue).await.unwrap();
        assert_eq!(
            counts.pending,
            round + 1,
            "round {round}: one pending job per key: {counts:?}"
        );
        assert_eq!(ids.len(), 1, "round {round}: {results:?}");
        let new = results.iter().filter(|e| !e.duplicate).count();
        assert_eq!(
            new, 1,
            "round {round}: one enqueue made the job: {results:?}"
        );
    }
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.cancelled), (20, 10), "{counts:?}");
}

/// A batch takes unique keys one row at a time (a key repeated in it
/// returns its first row), beside plain rows; an enqueue in a caller's
/// transaction holds the key from its commit, and a rolled-back one
/// leaves it free.
async fn batches_and_callers_transactions_take_unique_keys(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("unique-batch");
    let (a, b) = (format!("a:{queue}"), format!("b:{queue}"));
    let active = |key: &str, n| unique_row(&queue, key, Unique::while_active(), n);
    let batch = vec![active(&a, 1), row(&queue, 2), active(&a, 3), active(&b, 4)];
    let results = __store::enqueue_many(&jobq, batch).await.unwrap();
    let flags: Vec<bool> = results.iter().map(|e| e.duplicate).collect();
    assert_eq!(flags, [false, false, true, false]);
    assert_eq!(results[2].id, results[0].id);
    assert_eq!(
        enqueue_unique(&jobq, &active(&b, 5)).await,
        (results[3].id, true)
    );

    let c = format!("c:{queue}");
    macro_rules! in_tx {
        ($pool:expr, $commit:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = __store::enqueue_in(&jobq, &mut *tx, &active(&c, 6))
                .await
                .unwrap();
            if $commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            e
        }};
    }
    let (rolled_back, committed) = match db.backend() {
        Backend::MySql => {
            let pool = jobq.mysql_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        Backend::Postgres => {
            let pool = jobq.pg_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
        _ => {
            let pool = jobq.sqlite_pool().unwrap();
            (in_tx!(pool, false), in_tx!(pool, true))
        }
    };
    assert!(
        !rolled_back.duplicate && !committed.duplicate,
        "the rollback left the key free"
    );
    assert_eq!(
        enqueue_unique(&jobq, &active(&c, 7)).await,
        (committed.id, true)
    );
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!(counts.pending, 4, "a, the plain row, b, c: {counts:?}");
}

/// An enqueue of a key another transaction is taking waits for it, and
/// when that transaction rolls back, makes the job itself (the race of
/// Oban #1093, where a waiter on an advisory lock assumed the holder's
/// insert would commit and returned none).
async fn an_enqueue_waiting_on_a_key_makes_the_job_when_the_taker_rolls_back(db: TestDb) {
    let jobq = db.jobq().await;
    // Another handle on the same server (on Galera, the same node: locks
    // are node-local there, and nodes meet at certification instead).
    let other = db.jobq().await;
    let queue = unique_queue("unique-rollback");
    let key = format!("rollback:{queue}");
    let active = |n| unique_row(&queue, &key, Unique::while_active(), n);
    macro_rules! race {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let taken = __store::enqueue_in(&jobq, &mut *tx, &active(1))
                .await
                .unwrap();
            let waiter = {
                let (other, row) = (other.clone(), active(2));
                tokio::spawn(async move { __store::enqueue(&other, &row).await })
            };
            // The waiter is blocked on the key's row (or the write lock).
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(
                !waiter.is_finished(),
                "the waiter did not wait for the taker"
            );
            tx.rollback().await.unwrap();
            (taken, waiter.await.unwrap().unwrap())
        }};
    }
    let (taken, waited) = match db.backend() {
        Backend::MySql => race!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => race!(jobq.pg_pool().unwrap()),
        _ => race!(jobq.sqlite_pool().unwrap()),
    };
    assert!(
        !taken.duplicate && !waited.duplicate,
        "{taken:?} {waited:?}"
    );
    let row = info(&jobq, waited.id).await;
    assert_eq!(
        (row.status, row.payload.as_str()),
        (JobStatus::Pending, r#"{"n":2}"#)
    );
    assert_eq!(enqueue_unique(&jobq, &active(3)).await, (waited.id, true));
    assert_eq!(jobq.counts(&queue).await.unwrap().total(), 1);
}

contract!(
    a_key_unique_while_active_is_taken_until_its_job_finishes,
    each_state_set_frees_its_key_when_its_job_leaves_it,
    a_key_unique_for_a_period_is_taken_in_any_state_until_the_period_passes,
    a_pruned_holder_frees_its_key,
    concurrent_enqueues_of_one_unique_key_make_one_job,
    batches_and_callers_transactions_take_unique_keys,
    an_enqueue_waiting_on_a_key_makes_the_job_when_the_taker_rolls_back,
);
