//! Rate limits: a rate-limited claim takes no more jobs than the queue's
//! rate allows at the database's clock (GCRA: one start per interval, at
//! most the burst at once), moves the rate on by exactly what it claimed
//! in the same transaction, says when the rate held due jobs back and how
//! long until its next start, takes nothing without waiting while another
//! claim holds the rate, and takes the least of a limit and a rate; a rate
//! is set, changed and removed at run time, and a bad one is refused.

use jobq_runtime::{InvalidArgument, Rate};
use jobq_tests::sql::Tx;

use super::*;

/// What a rate-limited claim took: the claims, whether the concurrency
/// limit held jobs back, and when the rate did, how long until its next start.
struct Rated {
    claims: Vec<Claim>,
    held_back: bool,
    next_start: Option<Duration>,
}

/// A rate-limited claim of up to `asked` rows of `queue` (`limited`: the
/// queue's concurrency limit applies too).
async fn claim_rated(jobq: &Jobq, queue: &str, asked: u32, limited: bool) -> Rated {
    let (claims, held_back, next_start) =
        __store::claim_flow(jobq, queue, asked, LEASE, "w", limited)
            .await
            .unwrap();
    Rated {
        claims,
        held_back,
        next_start,
    }
}

/// `queue`'s stored theoretical arrival time (µs).
async fn tat(jobq: &Jobq, queue: &str) -> i64 {
    let rows: Vec<(i64,)> = Db::of(jobq)
        .fetch_all(
            "SELECT tat_us FROM jobq_rates WHERE queue = ?",
            &[Arg::Text(queue.to_owned())],
        )
        .await
        .unwrap();
    rows[0].0
}

/// Completes `claims`.
async fn complete_all(jobq: &Jobq, claims: &[Claim]) {
    let fences: Vec<(i64, i64)> = claims.iter().map(fence).collect();
    assert_eq!(
        __store::complete(jobq, &fences).await.unwrap(),
        fences.len() as u64
    );
}

/// 10 a second, burst 1 (an interval of 100 ms): a claim asking for 10
/// takes 1 and says the rate held the rest back until about an interval
/// later; an immediate claim takes none; after an interval, one more. The
/// stored time moved on by at least the interval.
async fn a_rate_starts_one_job_per_interval_and_says_when_the_next_may_start(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate");
    jobq.set_queue_rate(&queue, Some(Rate::per(10, Duration::from_secs(1))))
        .await
        .unwrap();
    for n in 0..5 {
        enqueue(&jobq, &queue, n).await;
    }

    let first = claim_rated(&jobq, &queue, 10, false).await;
    assert_eq!(first.claims.len(), 1);
    assert!(!first.held_back, "no concurrency limit");
    let wait = first.next_start.expect("the rate held jobs back");
    assert!(
        wait > Duration::from_millis(90) && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    assert_held(&jobq, &first.claims[0], "w", LEASE).await;
    let after_first = tat(&jobq, &queue).await;

    let none = claim_rated(&jobq, &queue, 10, false).await;
    assert!(none.claims.is_empty());
    let wait = none.next_start.expect("held back by the rate");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    assert_eq!(
        tat(&jobq, &queue).await,
        after_first,
        "a claim of none spends nothing"
    );

    // The clock decides: claim until the rate allows the next start.
    let started = Instant::now();
    let second = loop {
        let claimed = claim_rated(&jobq, &queue, 10, false).await;
        if !claimed.claims.is_empty() {
            break claimed;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no second start"
        );
        tokio::time::sleep(claimed.next_start.unwrap().max(Duration::from_millis(1))).await;
    };
    assert_eq!(second.claims.len(), 1);
    let moved = tat(&jobq, &queue).await - after_first;
    assert!(moved >= 100_000, "the rate moved on by {moved} µs");
}

/// A burst of 3 at 1 a minute: a rate never used allows 3 at once, and a
/// claim spends only what it took — 2 due jobs spend 2, leaving 1.
async fn a_claim_spends_only_what_it_took_and_a_burst_saves_up_no_more(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate-burst");
    let rate = Rate::per(3, Duration::from_secs(180)).with_burst(3);
    jobq.set_queue_rate(&queue, Some(rate)).await.unwrap();

    let idle = claim_rated(&jobq, &queue, 10, false).await;
    assert!(idle.claims.is_empty());
    assert_eq!(idle.next_start, None, "nothing due: nothing held back");

    enqueue(&jobq, &queue, 1).await;
    enqueue(&jobq, &queue, 2).await;
    let two = claim_rated(&jobq, &queue, 10, false).await;
    assert_eq!(two.claims.len(), 2);
    assert_eq!(
        two.next_start, None,
        "the queue ran out before the rate did"
    );

    for n in 3..8 {
        enqueue(&jobq, &queue, n).await;
    }
    let one = claim_rated(&jobq, &queue, 10, false).await;
    assert_eq!(one.claims.len(), 1, "the burst of 3 less the 2 spent");
    let wait = one.next_start.expect("held back by the rate");
    assert!(
        wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    let none = claim_rated(&jobq, &queue, 10, false).await;
    assert!(none.claims.is_empty());
    assert!(none.next_start.is_some());
    let stats = jobq.stats().await.unwrap();
    let q = stats.queue(&queue).unwrap();
    assert_eq!((q.rate, q.available, q.rate_held_back), (Some(rate), 4, 4));
}

/// A limit of 2 and a rate with a burst of 3 (1 a minute): the first claim
/// is held by the limit (2), the next by the rate (the 1 start left), the
/// next takes none and says how long the rate holds it.
async fn a_queue_with_a_limit_and_a_rate_takes_the_least_of_both(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate-limit");
    jobq.set_queue_limit(&queue, Some(2)).await.unwrap();
    jobq.set_queue_rate(
        &queue,
        Some(Rate::per(3, Duration::from_secs(180)).with_burst(3)),
    )
    .await
    .unwrap();
    for n in 0..10 {
        enqueue(&jobq, &queue, n).await;
    }

    let by_limit = claim_rated(&jobq, &queue, 10, true).await;
    assert_eq!(by_limit.claims.len(), 2);
    assert!(by_limit.held_back);
    assert_eq!(by_limit.next_start, None, "the rate allowed 3");
    complete_all(&jobq, &by_limit.claims).await;

    let by_rate = claim_rated(&jobq, &queue, 10, true).await;
    assert_eq!(by_rate.claims.len(), 1);
    assert!(!by_rate.held_back, "a slot was left");
    assert!(by_rate.next_start.is_some());
    complete_all(&jobq, &by_rate.claims).await;

    let none = claim_rated(&jobq, &queue, 10, true).await;
    assert!(none.claims.is_empty());
    assert!(!none.held_back);
    let wait = none.next_start.expect("held back by the rate");
    assert!(wait > Duration::from_secs(50), "{wait:?}");
}

/// Another claim holding the rate's row: a claim takes nothing, without
/// waiting, and says to try again soon (a next start of zero); once the
/// holder is gone it takes a job. SQLite has no row locks (a claim holds
/// the write lock, which no other claim shares).
async fn a_claim_takes_nothing_without_waiting_while_another_holds_the_rate(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate-busy");
    jobq.set_queue_rate(&queue, Some(Rate::per(10, Duration::from_secs(1))))
        .await
        .unwrap();
    enqueue(&jobq, &queue, 1).await;
    if db.backend() == Backend::Sqlite {
        return;
    }
    let mut holder: Tx = Db::of(&jobq).begin().await.unwrap();
    assert_eq!(holder.lock_rate(&queue).await.unwrap(), 1);
    let busy = without_waiting("the claim", claim_rated(&jobq, &queue, 10, false)).await;
    assert!(busy.claims.is_empty());
    assert_eq!(busy.next_start, Some(Duration::ZERO));
    holder.rollback().await.unwrap();

    let took = claim_rated(&jobq, &queue, 10, false).await;
    assert_eq!(took.claims.len(), 1);
}

/// A stored time ahead of the database's clock by more than a second (the
/// clock stepped back, or another Galera node's runs ahead) holds the rate
/// for one interval, not until the clock catches up: the claim that finds
/// it writes it back.
async fn a_rate_ahead_of_the_clock_is_pulled_back_to_it(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate-ahead");
    jobq.set_queue_rate(&queue, Some(Rate::per(10, Duration::from_secs(1))))
        .await
        .unwrap();
    enqueue(&jobq, &queue, 1).await;
    let first = claim_rated(&jobq, &queue, 1, false).await;
    assert_eq!(first.claims.len(), 1);
    let now = tat(&jobq, &queue).await;
    let an_hour = 3_600_000_000;
    Db::of(&jobq)
        .execute(
            "UPDATE jobq_rates SET tat_us = ? WHERE queue = ?",
            &[Arg::Int(now + an_hour), Arg::Text(queue.clone())],
        )
        .await
        .unwrap();
    enqueue(&jobq, &queue, 2).await;

    let held = claim_rated(&jobq, &queue, 1, false).await;
    assert!(held.claims.is_empty());
    let wait = held.next_start.unwrap();
    assert!(wait <= Duration::from_millis(100), "{wait:?}");
    let pulled = tat(&jobq, &queue).await;
    assert!(
        pulled >= now && pulled < now + 60_000_000,
        "written back to the clock: {pulled} (was {now} + 1 h)"
    );
}

/// A rate is set, shown by `queue_rates` and `stats`, changed (keeping the
/// time already spent) and removed; removing none is no error; a bad rate
/// is refused with the reason and changes nothing.
async fn a_rate_is_set_changed_and_removed_and_a_bad_one_refused(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("rate-set");
    let minute = Duration::from_secs(60);
    let rate = Rate::per(100, minute);
    jobq.set_queue_rate(&queue, Some(rate)).await.unwrap();
    let mine = |rates: Vec<(String, Rate)>| -> Vec<Rate> {
        rates
            .into_iter()
            .filter(|(q, _)| *q == queue)
            .map(|(_, r)| r)
            .collect()
    };
    assert_eq!(mine(jobq.queue_rates().await.unwrap()), [rate]);
    let stats = jobq.stats().await.unwrap();
    let q = stats.queue(&queue).expect("a rate-limited queue is known");
    assert_eq!((q.rate, q.rate_held_back, q.limit), (Some(rate), 0, None));

    enqueue(&jobq, &queue, 1).await;
    assert_eq!(claim_rated(&jobq, &queue, 1, false).await.claims.len(), 1);
    let spent = tat(&jobq, &queue).await;
    let faster = Rate::per(200, minute).with_burst(20);
    jobq.set_queue_rate(&queue, Some(faster)).await.unwrap();
    assert_eq!(mine(jobq.queue_rates().await.unwrap()), [faster]);
    assert_eq!(
        tat(&jobq, &queue).await,
        spent,
        "a change keeps the time spent"
    );

    for (bad, reason) in [
        (Rate::per(0, minute), "starts"),
        (Rate::per(1_000_001, minute), "starts"),
        (Rate::per(10, Duration::ZERO), "period"),
        (Rate::per(1, Duration::from_micros(999)), "period"),
        (Rate::per(10, Duration::from_secs(86_401)), "period"),
        (
            Rate::per(1_000_000, Duration::from_millis(500)),
            "microsecond",
        ),
        (Rate::per(10, minute).with_burst(0), "burst"),
        (Rate::per(10, minute).with_burst(11), "burst"),
    ] {
        let error = jobq.set_queue_rate(&queue, Some(bad)).await.unwrap_err();
        match &error {
            jobq_runtime::Error::Invalid(InvalidArgument::QueueRate { rate, .. }) => {
                assert_eq!(*rate, bad);
            }
            other => panic!("{bad}: {other:?}"),
        }
        let message = error.to_string();
        assert!(
            message.contains(reason) && message.contains(&queue),
            "{message}"
        );
    }
    assert_eq!(
        mine(jobq.queue_rates().await.unwrap()),
        [faster],
        "nothing changed"
    );
    assert!(
        jobq.set_queue_rate("", Some(rate)).await.is_err(),
        "a queue name is checked too"
    );

    jobq.set_queue_rate(&queue, None).await.unwrap();
    assert!(mine(jobq.queue_rates().await.unwrap()).is_empty());
    jobq.set_queue_rate(&queue, None).await.unwrap();
    let stats = jobq.stats().await.unwrap();
    assert_eq!(stats.queue(&queue).unwrap().rate, None);
}

/// A concurrency key's rate (`Jobq::set_key_rate`): set, listed, changed
/// and removed; a bad one refused. A take for claimed jobs of the key
/// starts its burst, then none until an interval has passed (saying how
/// long), stamps the started jobs' `claimed_at` with the moment the rate
/// let them start, and moves the rate on by what it started only; a key
/// without a rate takes nothing.
async fn a_keys_rate_starts_its_burst_then_one_job_an_interval(db: TestDb) {
    let jobq = db.jobq().await;
    let queue = unique_queue("key-rate");
    let key = format!("provider:{queue}");
    // One start every 6 s: no test step, on any backend, takes that long.
    let rate = Rate::per(10, Duration::from_secs(60)).with_burst(3);
    jobq.set_key_rate(&key, Some(rate)).await.unwrap();
    assert!(
        jobq.key_rates()
            .await
            .unwrap()
            .contains(&(key.clone(), rate))
    );
    let bad = jobq
        .set_key_rate(&key, Some(Rate::per(0, Duration::from_secs(1))))
        .await;
    assert!(
        matches!(
            bad,
            Err(jobq_runtime::Error::Invalid(
                InvalidArgument::QueueRate { .. }
            ))
        ),
        "{bad:?}"
    );
    assert!(
        jobq.set_key_rate("", Some(rate)).await.is_err(),
        "an empty key"
    );

    let keyed = |n| row_with(n, Enqueue::new().queue(&queue).concurrency_key(&key, 100));
    for n in 0..5 {
        enqueue_row(&jobq, &keyed(n)).await;
    }
    let claimed = claim(&jobq, &queue, 10, "w").await;
    let ids: Vec<i64> = claimed.iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 5);
    let (taken, next) = __store::take_key_starts(&jobq, &key, &ids)
        .await
        .unwrap()
        .expect("the key has a rate");
    assert_eq!(taken, 3, "the burst");
    assert!(next > Duration::ZERO && next <= rate.interval(), "{next:?}");
    let stamped: Vec<Option<chrono::DateTime<chrono::Utc>>> = {
        let mut out = Vec::new();
        for id in &ids {
            out.push(info(&jobq, *id).await.claimed_at);
        }
        out
    };
    assert!(
        stamped[..3].iter().all(|t| t == &stamped[0]),
        "the started jobs carry the moment the rate let them start: {stamped:?}"
    );
    let (taken, next) = __store::take_key_starts(&jobq, &key, &ids[3..])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken, 0, "no start within the interval");
    assert!(next > Duration::ZERO && next <= rate.interval(), "{next:?}");
    let other = format!("other:{queue}");
    assert_eq!(
        __store::take_key_starts(&jobq, &other, &ids[3..])
            .await
            .unwrap(),
        None
    );

    let slower = Rate::per(1, Duration::from_secs(60));
    jobq.set_key_rate(&key, Some(slower)).await.unwrap();
    assert!(
        jobq.key_rates()
            .await
            .unwrap()
            .contains(&(key.clone(), slower))
    );
    jobq.set_key_rate(&key, None).await.unwrap();
    assert!(
        !jobq
            .key_rates()
            .await
            .unwrap()
            .iter()
            .any(|(k, _)| k == &key)
    );
    assert_eq!(
        __store::take_key_starts(&jobq, &key, &ids[3..])
            .await
            .unwrap(),
        None,
        "removed"
    );
}

contract!(
    a_keys_rate_starts_its_burst_then_one_job_an_interval,
    a_rate_starts_one_job_per_interval_and_says_when_the_next_may_start,
    a_claim_spends_only_what_it_took_and_a_burst_saves_up_no_more,
    a_queue_with_a_limit_and_a_rate_takes_the_least_of_both,
    a_claim_takes_nothing_without_waiting_while_another_holds_the_rate,
    a_rate_ahead_of_the_clock_is_pulled_back_to_it,
    a_rate_is_set_changed_and_removed_and_a_bad_one_refused,
);
