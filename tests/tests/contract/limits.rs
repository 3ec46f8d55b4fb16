//! Global concurrency limits: a limited claim takes no more jobs than the
//! queue has free slots, writes each job's fence into a slot of its own,
//! and finds a slot free again whatever moved its job's row on; a stale
//! attempt frees nothing; a limit is set, moved and removed in one
//! transaction.

use super::*;

/// A limited claim of up to `limit` rows of `queue` by `worker`: the
/// claims, and whether the limit held due jobs back.
async fn claim_limited(jobq: &Jobq, queue: &str, limit: u32, worker: &str) -> (Vec<Claim>, bool) {
    __store::claim_limited(jobq, queue, limit, LEASE, worker)
        .await
        .unwrap()
}

/// The slot rows of `queue` as stored: `(slot, job_id, lease_token)`.
async fn slots(jobq: &Jobq, queue: &str) -> Vec<(i32, Option<i64>, Option<i64>)> {
    let db = Db::of(jobq);
    let sql = "SELECT slot, job_id, lease_token FROM jobq_slots WHERE queue = ? ORDER BY slot";
    db.fetch_all(sql, &[Arg::Text(queue.to_owned())])
        .await
        .unwrap()
}

/// The fences the slot rows of `queue` hold, sorted.
async fn slot_fences(jobq: &Jobq, queue: &str) -> Vec<(i64, i64)> {
    let mut fences: Vec<(i64, i64)> = slots(jobq, queue)
        .await
        .into_iter()
        .filter_map(|(_, id, token)| id.zip(token))
        .collect();
    fences.sort_unstable();
    fences
}

/// The fences of `claims`, sorted.
fn fences(claims: &[Claim]) -> Vec<(i64, i64)> {
    let mut fences: Vec<(i64, i64)> = claims.iter().map(fence).collect();
    fences.sort_unstable();
    fences
}

/// A limit of 3: a claim asking for 10 takes 3 and says the limit held the
/// rest back; the next takes none while the three hold their rows; each
/// settle frees one slot; a claim that empties the queue is not held back,
/// nor is one that finds every slot busy and nothing due.
async fn a_limited_claim_takes_only_free_slots_and_says_when_the_limit_held_jobs_back(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("limit");
    jobq.set_queue_limit(&queue, Some(3)).await.unwrap();
    for n in 0..5 {
        enqueue(&jobq, &queue, n).await;
    }

    let (first, held) = claim_limited(&jobq, &queue, 10, "w").await;
    assert_eq!((first.len(), held), (3, true));
    for claim in &first {
        assert_held(&jobq, claim, "w", LEASE).await;
    }
    assert_eq!(slot_fences(&jobq, &queue).await, fences(&first));
    assert_eq!(slots(&jobq, &queue).await.len(), 3);
    let (none, held) = claim_limited(&jobq, &queue, 10, "w").await;
    assert_eq!((none.len(), held), (0, true));

    assert_eq!(
        __store::complete(&jobq, &[fence(&first[0])]).await.unwrap(),
        1
    );
    let (second, held) = claim_limited(&jobq, &queue, 10, "w").await;
    assert_eq!(
        (second.len(), held),
        (1, true),
        "one slot free, one job left behind"
    );
    let mut holders = fences(&first[1..]);
    holders.extend(fences(&second));
    holders.sort_unstable();
    assert_eq!(slot_fences(&jobq, &queue).await, holders);

    let done: Vec<(i64, i64)> = first[1..].iter().chain(&second).map(fence).collect();
    assert_eq!(__store::complete(&jobq, &done).await.unwrap(), 3);
    let (last, held) = claim_limited(&jobq, &queue, 10, "w").await;
    assert_eq!((last.len(), held), (1, false), "the queue is empty now");

    // Every slot busy and nothing due: not held back.
    let other = unique_queue("limit-idle");
    jobq.set_queue_limit(&other, Some(1)).await.unwrap();
    enqueue(&jobq, &other, 9).await;
    let (running, _) = claim_limited(&jobq, &other, 1, "w").await;
    assert_eq!(running.len(), 1);
    let (none, held) = claim_limited(&jobq, &other, 1, "w").await;
    assert_eq!((none.len(), held), (0, false));

    // The plain claim of another queue knows nothing of slots.
    let plain = unique_queue("limit-plain");
    for n in 0..5 {
        enqueue(&jobq, &plain, n).await;
    }
    assert_eq!(claim(&jobq, &plain, 10, "w").await.len(), 5);
    assert!(slots(&jobq, &plain).await.is_empty());
}

/// With a limit of 1, the slot is free again after each way its holder's
/// row moves on — a retry's transition, a cancel, the reaper after its
/// lease expired (an expired lease alone holds it: its worker may yet
/// renew it) — and a stale attempt's settle of a row claimed again frees
/// nothing.
async fn every_way_a_row_moves_on_frees_its_slot_and_a_stale_settle_frees_none(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("limit-free");
    jobq.set_queue_limit(&queue, Some(1)).await.unwrap();
    let a = enqueue(&jobq, &queue, 1).await;
    let b = enqueue(&jobq, &queue, 2).await;
    let c = enqueue(&jobq, &queue, 3).await;

    let (held, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(ids(&held), [a]);
    assert!(claim_limited(&jobq, &queue, 5, "w").await.0.is_empty());

    // A retry (back to pending, due now: behind `b` and `c` in the claim
    // order): the slot is free.
    let retry = __store::transition(&jobq, fence(&held[0]), false, Duration::ZERO, false, None);
    assert!(retry.await.unwrap());
    let (running_b, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(ids(&running_b), [b]);

    // The first attempt of `a` is stale: its settle changes nothing and
    // frees nothing.
    assert_eq!(
        __store::complete(&jobq, &[fence(&held[0])]).await.unwrap(),
        0
    );
    let (none, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!((none.len(), held_back), (0, true));

    // A cancel frees it.
    assert_eq!(
        __store::cancel(&jobq, b).await.unwrap(),
        (true, vec![fence(&running_b[0])])
    );
    let (running_c, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(ids(&running_c), [c]);

    // An expired lease alone frees nothing: until the reaper moves the
    // row, its worker may still renew it and run on.
    expire(&jobq, c).await;
    let (none, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!((none.len(), held_back), (0, true));
    assert_eq!(slot_fences(&jobq, &queue).await, [fence(&running_c[0])]);

    // The reaper returns `c` to pending, in its place in line (ahead of
    // `a`, retried later): the slot is free, and `c` takes it again.
    assert_eq!(__store::reap(&jobq, &queue, 10).await.unwrap(), 1);
    let (again_c, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(
        (ids(&again_c), held_back),
        (vec![c], true),
        "it took all the free slots allowed: more may wait"
    );
    assert_eq!(slot_fences(&jobq, &queue).await, [fence(&again_c[0])]);
    assert_eq!(
        __store::complete(&jobq, &[fence(&again_c[0])])
            .await
            .unwrap(),
        1
    );
    let (last, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(ids(&last), [a]);
}

/// Setting a limit makes its slot rows, raising it adds rows, lowering it
/// drops the idle ones above (a job holding one runs on and counts against
/// the new limit; its row goes once it finished), removing it drops them all; each limit
/// reads back from `queue_limits` and `stats`. Limits of 0 or above
/// `MAX_QUEUE_LIMIT` are refused and change nothing.
async fn a_limit_is_set_raised_lowered_and_removed(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("limit-set");
    jobq.set_queue_limit(&queue, Some(2)).await.unwrap();
    assert_eq!(slots(&jobq, &queue).await.len(), 2);
    enqueue(&jobq, &queue, 1).await;
    enqueue(&jobq, &queue, 2).await;
    enqueue(&jobq, &queue, 3).await;
    let (two, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(two.len(), 2);

    jobq.set_queue_limit(&queue, Some(5)).await.unwrap();
    assert_eq!(slots(&jobq, &queue).await.len(), 5);
    assert_eq!(
        slot_fences(&jobq, &queue).await,
        fences(&two),
        "raising keeps the holders"
    );
    assert!(
        jobq.queue_limits()
            .await
            .unwrap()
            .contains(&(queue.clone(), 5))
    );

    jobq.set_queue_limit(&queue, Some(1)).await.unwrap();
    // The idle slots above the new limit went; the two running jobs keep
    // theirs, and count against it until they finish.
    assert_eq!(slots(&jobq, &queue).await.len(), 2);
    let (none, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!((none.len(), held_back), (0, true));
    assert_eq!(slot_fences(&jobq, &queue).await, fences(&two));
    // Slot 1's job finishes: its row goes at the next claim, and slot 0's
    // job, still running, keeps the limit of 1 full.
    assert_eq!(
        __store::complete(&jobq, &[fence(&two[1])]).await.unwrap(),
        1
    );
    let (none, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!((none.len(), held_back), (0, true));
    assert_eq!(slot_fences(&jobq, &queue).await, [fence(&two[0])]);
    assert_eq!(slots(&jobq, &queue).await.len(), 1);

    for bad in [0, jobq_runtime::MAX_QUEUE_LIMIT + 1] {
        let error = jobq.set_queue_limit(&queue, Some(bad)).await.unwrap_err();
        assert!(error.to_string().contains("must be 1 to 10000"), "{error}");
    }
    assert!(
        jobq.queue_limits()
            .await
            .unwrap()
            .contains(&(queue.clone(), 1))
    );
    let stats = jobq.stats().await.unwrap();
    let row = stats.queues.iter().find(|q| q.queue == queue).unwrap();
    assert_eq!(row.limit, Some(1));

    jobq.set_queue_limit(&queue, None).await.unwrap();
    assert!(slots(&jobq, &queue).await.is_empty());
    assert!(
        !jobq
            .queue_limits()
            .await
            .unwrap()
            .iter()
            .any(|(q, _)| *q == queue)
    );
}

/// Lowering a limit below the jobs running under it: no claim takes a job
/// until fewer than the new limit run, however the running jobs sit in the
/// slots (here the one in slot 0 finished first, and the two still running
/// hold slots 1 and 2, one of them above the new limit of 2).
async fn a_lowered_limit_holds_while_jobs_started_under_the_old_one_run(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("limit-lower");
    jobq.set_queue_limit(&queue, Some(3)).await.unwrap();
    for n in 0..6 {
        enqueue(&jobq, &queue, n).await;
    }
    let (three, _) = claim_limited(&jobq, &queue, 3, "w").await;
    assert_eq!(three.len(), 3);
    assert_eq!(
        __store::complete(&jobq, &[fence(&three[0])]).await.unwrap(),
        1
    );

    jobq.set_queue_limit(&queue, Some(2)).await.unwrap();
    let (none, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!(
        (none.len(), held_back),
        (0, true),
        "two run, the limit is two"
    );

    assert_eq!(
        __store::complete(&jobq, &[fence(&three[2])]).await.unwrap(),
        1
    );
    let (one, held_back) = claim_limited(&jobq, &queue, 5, "w").await;
    assert_eq!((one.len(), held_back), (1, true), "one ran, one more may");
    let (none, _) = claim_limited(&jobq, &queue, 5, "w").await;
    assert!(none.is_empty());
    let mut running = fences(&three[1..2]);
    running.extend(fences(&one));
    running.sort_unstable();
    assert_eq!(slot_fences(&jobq, &queue).await, running);
}

/// Eight claimers on connections of their own claim and settle a limited
/// queue at once: the rows `processing`, read from the database after
/// every claim, never exceed the limit, and every job runs once.
async fn concurrent_limited_claims_never_exceed_the_limit(db: TestDb) {
    const LIMIT: u32 = 3;
    const JOBS: i64 = 120;
    let jobq = db.jobq().await;
    let queue = unique_queue("limit-race");
    jobq.set_queue_limit(&queue, Some(LIMIT)).await.unwrap();
    for n in 0..JOBS {
        enqueue(&jobq, &queue, n).await;
    }
    let count_sql = "SELECT COUNT(*) FROM jobq_jobs WHERE queue = ? AND status = 'processing'";
    let mut tasks = Vec::new();
    for claimer in 0..8 {
        let jobq = jobq.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let db = Db::of(&jobq);
            let worker = format!("w{claimer}");
            let mut ran = Vec::new();
            let mut most = 0i64;
            let started = Instant::now();
            loop {
                assert!(started.elapsed() < Duration::from_secs(60), "not drained");
                let (claimed, held_back) = __store::claim_limited(&jobq, &queue, 2, LEASE, &worker)
                    .await
                    .unwrap();
                let (running,): (i64,) = db
                    .fetch_all(count_sql, &[Arg::Text(queue.clone())])
                    .await
                    .unwrap()[0];
                most = most.max(running);
                if claimed.is_empty() {
                    if !held_back && jobq.counts(&queue).await.unwrap().pending == 0 {
                        return (ran, most);
                    }
                    tokio::task::yield_now().await;
                    continue;
                }
                tokio::task::yield_now().await;
                let settled: Vec<(i64, i64)> = claimed.iter().map(fence).collect();
                assert_eq!(
                    __store::complete(&jobq, &settled).await.unwrap(),
                    settled.len() as u64
                );
                ran.extend(ids(&claimed));
            }
        }));
    }
    let mut ran = Vec::new();
    let mut most = 0;
    for task in tasks {
        let (mine, peak) = task.await.unwrap();
        ran.extend(mine);
        most = most.max(peak);
    }
    ran.sort_unstable();
    let before = ran.len();
    ran.dedup();
    assert_eq!((before, ran.len()), (JOBS as usize, JOBS as usize));
    assert!(
        (1..=i64::from(LIMIT)).contains(&most),
        "{most} rows processing at once under a limit of {LIMIT}"
    );
}

contract!(
    a_limited_claim_takes_only_free_slots_and_says_when_the_limit_held_jobs_back,
    a_lowered_limit_holds_while_jobs_started_under_the_old_one_run,
    every_way_a_row_moves_on_frees_its_slot_and_a_stale_settle_frees_none,
    a_limit_is_set_raised_lowered_and_removed,
    concurrent_limited_claims_never_exceed_the_limit,
);
