//! Per-key concurrency: at most a key's limit of its jobs are holders
//! (`pending` or `processing`, a job waiting to retry included), the rest
//! wait `blocked`, outside the claim; a release (what a worker runs after
//! a job of the key left it) unblocks the oldest blocked jobs up to the
//! limit, counting the holders from their rows — so a release repeated,
//! or after a stale settle, unblocks nothing more, and the sweep makes up
//! a release nobody made. Concurrent enqueuers and claimers (on Galera,
//! on several nodes) never put more than the limit of one key to work.

use super::*;

/// A row of [`JOB`] on `queue` under concurrency key `key`, limit `limit`.
fn keyed(queue: &str, key: &str, limit: u32, n: i64) -> Row {
    row_with(
        n,
        Enqueue::new()
            .queue(queue)
            .max_attempts(3)
            .concurrency_key(key, limit),
    )
}

/// The statuses of rows `ids`, in their order.
async fn statuses(jobq: &Jobq, ids: &[i64]) -> Vec<JobStatus> {
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        out.push(info(jobq, id).await.status);
    }
    out
}

use JobStatus::{Blocked, Cancelled, Done, Failed, Pending, Processing};

/// A key limited to 2: the first two jobs are pending, the rest blocked
/// and never claimed; each job that leaves the key (done, failed for
/// good) lets the oldest blocked one in, at the next release — and a
/// release repeated, or with nothing left, unblocks nothing.
async fn a_key_runs_at_most_its_limit_and_unblocks_in_enqueue_order(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-order");
    let key = format!("k:{queue}");
    let mut jobs = Vec::new();
    for n in 0..5 {
        jobs.push(enqueue_row(&jobq, &keyed(&queue, &key, 2, n)).await);
    }
    assert_eq!(
        statuses(&jobq, &jobs).await,
        [Pending, Pending, Blocked, Blocked, Blocked]
    );
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.blocked), (2, 3));

    let claimed = __store::claim_rows(&jobq, &queue, 10, LEASE, "w")
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|c| c.claim.id).collect::<Vec<_>>(),
        jobs[..2]
    );
    assert_eq!(claimed[0].concurrency_key.as_deref(), Some(key.as_str()));
    assert!(claim(&jobq, &queue, 10, "w").await.is_empty());
    assert_eq!(
        __store::release_keys(&jobq, &[&key]).await.unwrap(),
        0,
        "two holders: no room"
    );

    assert_eq!(
        __store::complete(&jobq, &[fence(&claimed[0].claim)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 1);
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 0);
    assert_eq!(
        statuses(&jobq, &jobs).await,
        [Done, Processing, Pending, Blocked, Blocked]
    );

    // A stale settle changes no row, and its release unblocks nothing.
    assert_eq!(
        __store::complete(&jobq, &[fence(&claimed[0].claim)])
            .await
            .unwrap(),
        0
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 0);

    let second = claimed[1].claim;
    assert!(
        __store::transition(&jobq, fence(&second), true, Duration::ZERO, false, None)
            .await
            .unwrap()
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 1);
    assert_eq!(
        statuses(&jobq, &jobs).await,
        [Done, Failed, Pending, Pending, Blocked]
    );
    let next = claim(&jobq, &queue, 10, "w").await;
    assert_eq!(ids(&next), jobs[2..4]);
}

/// Limit 1, ordered: a head that fails an attempt and waits to retry
/// still holds its key (the next job stays blocked) and runs again first;
/// once it succeeds the next runs; a cancelled head lets the next in
/// (the cancel releases the key); the last job leaving the key deletes
/// the key's row.
async fn a_retrying_head_holds_its_key_and_a_cancelled_one_lets_the_next_run(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-head");
    let key = format!("k:{queue}");
    let mut jobs = Vec::new();
    for n in 0..3 {
        jobs.push(enqueue_row(&jobq, &keyed(&queue, &key, 1, n)).await);
    }
    assert_eq!(statuses(&jobq, &jobs).await, [Pending, Blocked, Blocked]);

    let head = claim_only(&jobq, &queue, jobs[0], "w").await;
    let retry = Some("try again".to_owned());
    assert!(
        __store::transition(&jobq, fence(&head), false, Duration::ZERO, false, retry)
            .await
            .unwrap()
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 0);
    assert_eq!(statuses(&jobq, &jobs).await, [Pending, Blocked, Blocked]);
    let head = claim_only(&jobq, &queue, jobs[0], "w").await;
    assert_eq!(head.attempt, 2);
    assert_eq!(__store::complete(&jobq, &[fence(&head)]).await.unwrap(), 1);
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 1);
    assert_eq!(statuses(&jobq, &jobs).await, [Done, Pending, Blocked]);

    assert!(jobq.cancel(jobs[1]).await.unwrap());
    assert_eq!(statuses(&jobq, &jobs).await, [Done, Cancelled, Pending]);
    let last = claim_only(&jobq, &queue, jobs[2], "w").await;
    assert_eq!(__store::complete(&jobq, &[fence(&last)]).await.unwrap(), 1);
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 0);
    assert_eq!(key_rows(&jobq, &key).await, (0, 0), "the key is forgotten");

    // The key starts afresh: its next job is pending at once.
    let again = enqueue_row(&jobq, &keyed(&queue, &key, 1, 9)).await;
    assert_eq!(statuses(&jobq, &[again]).await, [Pending]);
}

/// `(rows in jobq_keys, rows in jobq_key_jobs)` of key `key`.
async fn key_rows(jobq: &Jobq, key: &str) -> (i64, i64) {
    let db = Db::of(jobq);
    let count = |sql: &'static str| {
        let db = &db;
        async move {
            let rows: Vec<(i64,)> = db
                .fetch_all(sql, &[Arg::Text(key.to_owned())])
                .await
                .unwrap();
            rows[0].0
        }
    };
    (
        count("SELECT COUNT(*) FROM jobq_keys WHERE ckey = ?").await,
        count("SELECT COUNT(*) FROM jobq_key_jobs WHERE ckey = ?").await,
    )
}

/// A retried job of a key comes back `blocked` behind the key's running
/// job, and starts once that one finishes; a cancelled blocked job never
/// runs and takes no place.
async fn a_retried_job_waits_for_its_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-retry");
    let key = format!("k:{queue}");
    let first = enqueue_row(&jobq, &keyed(&queue, &key, 1, 0)).await;
    let second = enqueue_row(&jobq, &keyed(&queue, &key, 1, 1)).await;
    let third = enqueue_row(&jobq, &keyed(&queue, &key, 1, 2)).await;
    assert!(jobq.cancel(third).await.unwrap(), "a blocked job cancels");

    let head = claim_only(&jobq, &queue, first, "w").await;
    assert!(
        __store::transition(&jobq, fence(&head), true, Duration::ZERO, false, None)
            .await
            .unwrap()
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 1);
    let running = claim_only(&jobq, &queue, second, "w").await;

    assert!(jobq.retry(first).await.unwrap());
    assert_eq!(
        statuses(&jobq, &[first, second]).await,
        [Blocked, Processing]
    );
    assert!(claim(&jobq, &queue, 10, "w").await.is_empty());
    assert_eq!(
        __store::complete(&jobq, &[fence(&running)]).await.unwrap(),
        1
    );
    assert_eq!(__store::release_keys(&jobq, &[&key]).await.unwrap(), 1);
    claim_only(&jobq, &queue, first, "w").await;
    assert_eq!(statuses(&jobq, &[third]).await, [Cancelled]);
}

/// A job left its key and nobody released it (its worker died after the
/// settle): the sweep, which every reaper runs, unblocks the next.
async fn the_sweep_makes_up_a_release_nobody_made(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-sweep");
    let key = format!("k:{queue}");
    let first = enqueue_row(&jobq, &keyed(&queue, &key, 1, 0)).await;
    let second = enqueue_row(&jobq, &keyed(&queue, &key, 1, 1)).await;
    let head = claim_only(&jobq, &queue, first, "w").await;
    assert_eq!(__store::complete(&jobq, &[fence(&head)]).await.unwrap(), 1);
    assert_eq!(statuses(&jobq, &[second]).await, [Blocked]);
    // Each round reads a bounded share of all keys (other tests' too),
    // resuming where the last stopped: a few rounds reach every key.
    for _ in 0..200 {
        __store::sweep_keys(&jobq, 5).await.unwrap();
        if statuses(&jobq, &[second]).await == [Pending] {
            return;
        }
    }
    panic!("200 sweep rounds did not unblock the key's next job");
}

/// Eight enqueuers on their own connections put 10 jobs each on one key
/// limited to 3 at once: exactly 3 are pending, 77 blocked.
async fn concurrent_enqueues_of_one_key_admit_its_limit(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-enqueue");
    let key = format!("k:{queue}");
    let mut tasks = Vec::new();
    for t in 0..8 {
        let handle = db.jobq().await;
        let (queue, key) = (queue.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..10 {
                enqueue_row(&handle, &keyed(&queue, &key, 3, t * 100 + n)).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.pending, counts.blocked), (3, 77), "{counts:?}");
}

/// Keys whose jobs run at once, per key, as the database holds them:
/// `(key, jobs processing)` for every key of `queue` above `limit`.
async fn over_limit(jobq: &Jobq, queue: &str, limit: i64) -> Vec<(String, i64)> {
    let db = Db::of(jobq);
    db.fetch_all(
        "SELECT concurrency_key, COUNT(*) FROM jobq_jobs \
         WHERE queue = ? AND status IN ('pending', 'processing') \
         GROUP BY concurrency_key HAVING COUNT(*) > ?",
        &[Arg::Text(queue.to_owned()), Arg::Int(limit)],
    )
    .await
    .unwrap()
}

/// Six claimers on their own connections drain 40 keys × 5 jobs at limit
/// 1, each completing what it claimed and releasing the keys as a worker
/// does: after every step no key has more than one holder, and every job
/// ran once.
async fn concurrent_claimers_never_hold_two_jobs_of_one_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-claim");
    let mut rows = Vec::new();
    for n in 0..200 {
        rows.push(keyed(&queue, &format!("k{}:{queue}", n % 40), 1, n));
    }
    __store::enqueue_many(&jobq, rows).await.unwrap();
    assert!(over_limit(&jobq, &queue, 1).await.is_empty());
    let mut tasks = Vec::new();
    for t in 0..6 {
        let handle = db.jobq().await;
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let mut ran = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut idle = 0;
            while idle < 20 && Instant::now() < deadline {
                let claimed = __store::claim_rows(&handle, &queue, 4, LEASE, &format!("w{t}"))
                    .await
                    .unwrap();
                let over = over_limit(&handle, &queue, 1).await;
                assert!(over.is_empty(), "two holders of one key: {over:?}");
                if claimed.is_empty() {
                    idle += 1;
                    tokio::task::yield_now().await;
                    continue;
                }
                idle = 0;
                let fences: Vec<_> = claimed.iter().map(|c| fence(&c.claim)).collect();
                let done = __store::complete(&handle, &fences).await.unwrap();
                assert_eq!(done, fences.len() as u64);
                let keys: Vec<&str> = claimed
                    .iter()
                    .filter_map(|c| c.concurrency_key.as_deref())
                    .collect();
                __store::release_keys(&handle, &keys).await.unwrap();
                ran.extend(fences.iter().map(|f| f.0));
            }
            ran
        }));
    }
    let mut ran = Vec::new();
    for task in tasks {
        ran.extend(task.await.unwrap());
    }
    ran.sort_unstable();
    let len = ran.len();
    ran.dedup();
    assert_eq!((len, ran.len()), (200, 200), "each job ran once");
    let counts = jobq.counts(&queue).await.unwrap();
    assert_eq!((counts.done, counts.blocked), (200, 0), "{counts:?}");
}

/// A batch and a caller's transaction enqueue keyed jobs as single
/// enqueues do: the first of a key pending, the rest blocked.
async fn batches_and_callers_transactions_block_by_key(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("keys-batch");
    let key = format!("k:{queue}");
    let other = format!("other:{queue}");
    let rows = vec![
        keyed(&queue, &key, 1, 0),
        keyed(&queue, &other, 1, 1),
        row(&queue, 2),
        keyed(&queue, &key, 1, 3),
    ];
    let ids: Vec<i64> = __store::enqueue_many(&jobq, rows)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(
        statuses(&jobq, &ids).await,
        [Pending, Pending, Pending, Blocked]
    );
    macro_rules! in_tx {
        ($pool:expr) => {{
            let mut tx = $pool.begin().await.unwrap();
            let e = __store::enqueue_in(&jobq, &mut *tx, &keyed(&queue, &other, 1, 4))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            e.id
        }};
    }
    let in_tx = match db.backend() {
        Backend::MySql => in_tx!(jobq.mysql_pool().unwrap()),
        Backend::Postgres => in_tx!(jobq.pg_pool().unwrap()),
        _ => in_tx!(jobq.sqlite_pool().unwrap()),
    };
    assert_eq!(statuses(&jobq, &[in_tx]).await, [Blocked]);
}

contract!(
    a_key_runs_at_most_its_limit_and_unblocks_in_enqueue_order,
    a_retrying_head_holds_its_key_and_a_cancelled_one_lets_the_next_run,
    a_retried_job_waits_for_its_key,
    the_sweep_makes_up_a_release_nobody_made,
    concurrent_enqueues_of_one_key_admit_its_limit,
    concurrent_claimers_never_hold_two_jobs_of_one_key,
    batches_and_callers_transactions_block_by_key,
);
